"""Chart F1 against median latency (batch 1) for one benchmark record: a PNG/SVG (matplotlib) or HTML (plotly).

    python -m variants plot                          # the record for this machine in assets/results
    python -m variants plot assets/results/X.json --out docs/f1-vs-latency.png
    python -m variants plot --device cuda --view pipeline --out chart.html

The same rules as the app's Benchmark tab (the HTML chart is that very figure, ``ui.charts``): one
accuracy view, named in the title; by default the tab's, F1 on the answerable questions at threshold 0
(what the app does: people ask questions their passage answers), with the SQuAD v2 views one flag away
(``--view pipeline``: all questions at threshold 0, with the F1 of always answering "no answer" marked);
the F1 axis from 0 to 100, so that a few points look like a few points; each
variant in its own colour and marker (``ui.palette``, as in every plot of the app), named in plain words
in the legend rather than labelled on the plot, where overlapping points would hide each other's names;
a bar from the median to p90 latency, on a linear axis from 0 so that distances read as speedups.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ui.charts import Y_TITLES, accuracy_figure, no_answer_floor
from ui.palette import PEER, variant_style
from variants.core.hardware import hardware_label
from variants.records.record import ANSWERABLE, SHOWN_VIEWS, VIEW_TITLES, Record, accuracy_column, record_view
from variants.records.results import RESULTS_DIR, load_records, pick_record, records_to_frame


def _title(record: Record, view: str) -> str:
    """Two lines that fit the chart's width: where it ran, then what is plotted."""
    hardware = hardware_label(record.hardware, record.device)
    if view == ANSWERABLE:
        what = (
            f"F1 on the {record.data.get('has_answer', '?')} answerable questions of {record.n_questions}, "
            f"{VIEW_TITLES['pipeline']}"
        )
    elif view == "best":
        what = f"{VIEW_TITLES['best']}, {record.n_questions} questions"
    else:
        what = f"SQuAD v2 F1 on {record.n_questions} questions, {VIEW_TITLES[view]}"
    return f"{record.preset} preset on {record.device}: {hardware}\n{what}"


def _points(record: Record, view: str):
    frame = records_to_frame([record], view=record_view(view))
    return frame[frame[accuracy_column(view)].notna() & frame["p50_ms"].notna()]


def plot_record(record: Record, out: str | Path, view: str = ANSWERABLE) -> Path:
    """Write the chart for ``record`` to ``out`` (.png/.svg/.pdf with matplotlib, .html with plotly)."""
    if view not in SHOWN_VIEWS:
        raise ValueError(f"unknown view {view!r}; choose one of {SHOWN_VIEWS}")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    points = _points(record, view)
    column = accuracy_column(view)
    # Answering "no answer" to everything scores 0 on the answerable questions: the line marks the SQuAD v2 views.
    floor = None if view == ANSWERABLE else no_answer_floor(record)
    if out.suffix == ".html":
        fig = accuracy_figure(points, floor, _title(record, view).replace("\n", " · "), y=column)
        fig.write_html(out, include_plotlyjs="cdn")
        return out
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=150)
    for _, row in points.iterrows():
        style = variant_style(PEER if row["is_peer"] else row["variant"])
        p90 = row["p90_ms"] if row["p90_ms"] == row["p90_ms"] else row["p50_ms"]
        ax.errorbar(
            row["p50_ms"],
            row[column],
            xerr=[[0], [max(0.0, p90 - row["p50_ms"])]],
            fmt=style.mpl_marker,
            color=style.colour,
            markersize=9,
            markeredgecolor="#1f2937",
            markeredgewidth=0.6,
            alpha=0.9,
            capsize=3,
            label=row["short_label"],
        )
    if floor is not None:
        ax.axhline(floor, color="#9ca3af", linestyle=":", linewidth=1.2)
        ax.annotate(
            f"always “no answer”: {floor:.1f}",
            (1, floor),
            xycoords=("axes fraction", "data"),
            xytext=(-4, -12),
            textcoords="offset points",
            ha="right",
            fontsize=8,
            color="#6b7280",
        )
    ax.set_ylim(0, 100)
    ax.set_xlim(left=0)
    ax.set_xlabel("median latency per question, batch 1 (ms), bar to p90")
    ax.set_ylabel(Y_TITLES[column])
    ax.set_title(_title(record, view), fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m variants plot", description=__doc__.splitlines()[0])
    parser.add_argument("record", nargs="?", help="a record JSON file (default: the one for this machine)")
    parser.add_argument("--folder", default=str(RESULTS_DIR), help="where to look for records")
    parser.add_argument("--device", default=None, help="prefer records measured on cpu or cuda")
    parser.add_argument("--out", default=None, help="output file (.png, .svg, .pdf or .html)")
    parser.add_argument(
        "--view",
        choices=SHOWN_VIEWS,
        default=ANSWERABLE,
        help="which accuracy (default: the answerable questions at threshold 0, as the Benchmark tab)",
    )
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
