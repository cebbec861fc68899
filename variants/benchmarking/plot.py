"""Chart F1 against median latency (batch 1) for one benchmark record: a PNG/SVG (matplotlib) or HTML (plotly).

    python -m variants plot                          # the record for this machine in assets/results
    python -m variants plot assets/results/X.json --out docs/f1-vs-latency.png
    python -m variants plot --device cuda --view pipeline --out chart.html

The same rules as the app's Benchmark tab (the HTML chart is that very figure, ``ui.charts``): one
accuracy view, named in the title; by default the tab's, F1 on the answerable questions at threshold 0
(what the app does: people ask questions their passage answers), with the SQuAD v2 views one flag away
(``--view pipeline``: all questions at threshold 0, with the F1 of always answering "no answer" marked);
the F1 axis fitted to the points, its title saying where it starts; each variant in its own colour and
marker (``ui.palette``, as in every plot of the app; the peers hollow), labelled with its short name, its
speedup and the F1 it loses against the baseline, the labels placed clear of each other
(``ui.point_labels``); a thin, light bar from the median to p90 latency, on a linear axis from 0 so that
distances read as speedups.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ui.charts import (
    FAINT,
    Y_TITLES,
    accuracy_figure,
    axis_note,
    best_trade_offs,
    draw_order,
    label_order,
    marker_sizes,
    no_answer_floor,
    point_labels,
    scatter_ranges,
)
from ui.palette import PEER, variant_style
from ui.point_labels import place_labels
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

    fig, ax = plt.subplots(figsize=(8, 6), dpi=150)
    points = draw_order(points)  # larger models first: a small marker is never hidden behind a larger one
    y_range, x_range = scatter_ranges(points, column, floor)
    best = best_trade_offs(points, column)
    at = {r.variant: (r.p50_ms, getattr(r, column)) for r in points.itertuples(index=False)}
    if len(best) > 1:  # the best trade-offs joined by a line, under the markers
        ax.plot([at[n][0] for n in best], [at[n][1] for n in best], color="#4b5563", linewidth=1.2, zorder=1)
    # the markers' areas in proportion to the models' sizes (the tab's pixels, as points at this figure's dpi)
    sizes = [px * 72 / fig.dpi * 1.6 for px in marker_sizes(points)]
    for (_, row), size in zip(points.iterrows(), sizes, strict=True):
        style = variant_style(PEER if row["is_peer"] else row["variant"])
        alpha = 1.0 if row["variant"] in best else FAINT
        p90 = row["p90_ms"] if row["p90_ms"] == row["p90_ms"] else row["p50_ms"]
        ax.plot(  # the spread: thin and light, the median's marker on top
            [row["p50_ms"], max(row["p50_ms"], p90)], [row[column]] * 2, color=style.colour, alpha=0.35, linewidth=1
        )
        ax.plot(
            row["p50_ms"],
            row[column],
            style.mpl_marker,
            color=style.colour,
            markersize=size,
            alpha=alpha,
            markerfacecolor="none" if style.hollow else style.colour,
            markeredgecolor=style.colour if style.hollow else "#1f2937",
            markeredgewidth=1.6 if style.hollow else 0.6,
            zorder=2,
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
    ax.set_ylim(*y_range)
    ax.set_xlim(*x_range)
    ax.set_xlabel(
        "median latency per question, batch 1 (ms); bar: median to p90\n"
        "line: the best trade-offs (no other variant both faster and more accurate); marker area: model size (MB)"
    )
    ax.set_ylabel(Y_TITLES[column] + axis_note(y_range[0]))
    ax.set_title(_title(record, view), fontsize=9)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    _label(ax, points, column, x_range, y_range, best, sizes)
    fig.savefig(out)
    plt.close(fig)
    return out


def _label(ax, points, column: str, x_range, y_range, best: list[str], sizes: list[float]) -> None:
    """The tab's labels (``ui.charts.point_labels``), placed by the same rule for this figure's plot area."""
    box = ax.get_window_extent()
    font_pt = 7.5
    font_px = font_pt * ax.figure.dpi / 72
    labels, order = point_labels(points, column, best=best), label_order(points, best)
    xy = [(float(r.p50_ms), float(getattr(r, column))) for r in points.itertuples(index=False)]
    size = (box.width, box.height)
    marker_px = [s * ax.figure.dpi / 72 for s in sizes]  # the markers' sizes, from points
    placed = place_labels(
        [xy[i] for i in order],
        [labels[i] for i in order],
        x_range,
        y_range,
        size,
        font_px,
        [marker_px[i] for i in order],
    )
    for i, where in zip(order, placed, strict=True):
        ax.annotate(
            "\n".join(labels[i]),
            xy[i],
            xytext=(where.dx, -where.dy),
            textcoords="offset pixels",
            ha=where.anchor,
            va="center",
            fontsize=font_pt,
            color="#111827" if points.iloc[i]["variant"] in best else "#6b7280",
            linespacing=1.1,
            arrowprops={"arrowstyle": "-", "color": "#9ca3af", "linewidth": 0.6, "shrinkA": 0, "shrinkB": 6},
        )


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
        # a record with random weights (a replica's) has no accuracy to plot: the newest record that has
        scored = [r for r in load_records(args.folder) if not all(e.latency_only for e in r.variants)]
        record = pick_record(scored, device=args.device)
        if record is None:
            print(f"no benchmark records in {args.folder}", file=sys.stderr)
            return 1
    out = Path(args.out) if args.out else Path(args.folder) / (Path(record.file).stem + "-f1-vs-latency.png")
    print(plot_record(record, out, args.view))
    return 0


if __name__ == "__main__":
    sys.exit(main())
