"""Chart F1 against p50 latency (batch 1) for one benchmark record: a PNG/SVG (matplotlib) or HTML (plotly).

    python scripts/plot_results.py                          # the record for this machine in assets/results
    python scripts/plot_results.py assets/results/X.json --out docs/f1-vs-latency.png
    python scripts/plot_results.py --device cuda --out chart.html

Each variant is a point at its p50 latency, with a bar reaching to its p90; the transformers
pipeline (the peer) is drawn as a cross. Latency is on a log scale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from variants.record import VIEW_TITLES, VIEWS, Record
from variants.results import RESULTS_DIR, hardware_label, load_records, pick_record, records_to_frame


def _title(record: Record, view: str) -> str:
    hardware = hardware_label(record.hardware, record.device)
    return (
        f"{record.preset} on {record.device} ({hardware}): SQuAD v2 F1 vs latency, {record.n_questions} questions\n"
        f"F1 {VIEW_TITLES[view]}"
    )


def _points(record: Record, view: str):
    frame = records_to_frame([record], view=view)
    return frame[frame["f1"].notna() & frame["p50_ms"].notna()]


def plot_record(record: Record, out: str | Path, view: str = "pipeline") -> Path:
    """Write the chart for ``record`` to ``out`` (.png/.svg/.pdf with matplotlib, .html with plotly)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    points = _points(record, view)
    if out.suffix == ".html":
        return _plot_html(record, points, out, view)
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    from matplotlib.ticker import ScalarFormatter  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(8, 5), dpi=150)
    placed: list[tuple[float, float]] = []
    for _, row in points.iterrows():
        color = "tab:gray" if row["is_peer"] else ("tab:blue" if row["headline"] else "tab:cyan")
        marker = "x" if row["is_peer"] else "o"
        p90 = row["p90_ms"] if row["p90_ms"] == row["p90_ms"] else row["p50_ms"]
        ax.errorbar(
            row["p50_ms"], row["f1"], xerr=[[0], [max(0.0, p90 - row["p50_ms"])]], fmt=marker, color=color, capsize=3
        )
        # Points at about the same place (same F1, latency within 40%: a label's width) get their labels stacked.
        near = sum(1 for x, y in placed if abs(y - row["f1"]) < 0.05 and 1 / 1.4 < x / row["p50_ms"] < 1.4)
        placed.append((row["p50_ms"], row["f1"]))
        offset = (6, -12) if row["is_peer"] else (6, 6 - 11 * near)
        where = (row["p50_ms"], row["f1"])
        ax.annotate(row["short_label"], where, textcoords="offset points", xytext=offset, fontsize=8)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(ScalarFormatter())
    ax.tick_params(axis="x", which="minor", labelsize=7)
    ax.set_xlabel("latency per question, batch 1 (ms, p50 with bar to p90; log scale)")
    ax.set_ylabel("SQuAD v2 F1")
    ax.set_title(_title(record, view), fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


def _plot_html(record: Record, points, out: Path, view: str) -> Path:
    import plotly.graph_objects as go  # noqa: PLC0415

    fig = go.Figure()
    for is_peer, group in points.groupby("is_peer"):
        fig.add_trace(
            go.Scatter(
                x=group["p50_ms"],
                y=group["f1"],
                error_x={
                    "type": "data",
                    "symmetric": False,
                    "array": group["p90_ms"] - group["p50_ms"],
                    "arrayminus": [0] * len(group),
                },
                mode="markers+text",
                text=group["short_label"],
                textposition="top right",
                marker={"symbol": "x" if is_peer else "circle", "size": 10},
                name="transformers pipeline" if is_peer else "variants",
            )
        )
    fig.update_layout(
        title=_title(record, view).replace("\n", "<br>"),
        xaxis={"title": "latency per question, batch 1 (ms, p50, bar to p90)", "type": "log"},
        yaxis={"title": "SQuAD v2 F1"},
    )
    fig.write_html(out, include_plotlyjs="cdn")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("record", nargs="?", help="a record JSON file (default: the one for this machine)")
    parser.add_argument("--folder", default=str(RESULTS_DIR), help="where to look for records")
    parser.add_argument("--device", default=None, help="prefer records measured on cpu or cuda")
    parser.add_argument("--out", default=None, help="output file (.png, .svg, .pdf or .html)")
    parser.add_argument("--view", choices=VIEWS, default="pipeline", help="which accuracy (default: threshold 0)")
    args = parser.parse_args(argv)
    if args.record:
        record = Record.load(args.record)
    else:
        record = pick_record(load_records(args.folder), device=args.device)
        if record is None:
            print(f"no benchmark records in {args.folder}", file=sys.stderr)
            return 1
    out = Path(args.out) if args.out else Path(args.folder) / (Path(record.file).stem + "-f1-vs-latency.png")
    print(plot_record(record, out, args.view))
    return 0


if __name__ == "__main__":
    sys.exit(main())
