"""Plotly figures, each a plain function of results or records (the components that show them live in the tabs)."""

import math

import plotly.graph_objects as go

from variants.building.replica import LATENCY_ONLY
from variants.core.spec import short_label
from variants.records.frontier import frontier
from variants.records.record import Record
from variants.serving.outcome import VariantResult
from variants.serving.snapshot import Snapshot

from .palette import PEER, variant_style
from .point_labels import fitted_range, label_lines, marker_px, place_labels
from .text import esc, fmt_ms, fmt_params, fmt_speedup

HOVER_FIELDS = {  # frame column -> what the hover box calls it
    "f1": "F1",
    "threshold": "no-answer threshold",
    "exact": "exact match",
    "has_ans_f1": "F1 on answerable questions",
    "no_ans_f1": "F1 on unanswerable questions",
    "has_ans_answered": "% of answerable questions answered",
    "p50_ms": "median ms",
    "p90_ms": "p90 ms",
    "p99_ms": "p99 ms",
    "throughput_qps": "questions per second",
    "speedup_vs_baseline": "× baseline speed",
    "size_mb": "model size, MB",
    "peak_rss_mb": "process peak memory, MB (every variant loaded)",
    "parameters": "parameters",
    "device": "device",
    "provider": "runtime",
    "dtype": "precision",
}


ROW_PX = 58  # each variant's row in the latency chart: its name on one line, its bar under it


def latency_figure(snap: Snapshot, names: list[str]) -> go.Figure:
    """Horizontal bars: each variant's median latency (chain order, baseline on top), a whisker over the
    spread of its timed runs, and its speedup; each bar in the variant's own colour. Each variant's name,
    median and speedup stand on one line above its bar, not beside it: on a phone, labels beside the bars took
    half the chart's width."""
    rows = [v.result for v in snap.loaded if v.name in names and v.result and v.result.latency_ms]
    rows = [r for r in rows if not r.error]
    fig = go.Figure()
    if rows:
        low = [r.latency_ms - (r.latency_min_ms or r.latency_ms) for r in rows]
        high = [(r.latency_max_ms or r.latency_ms) - r.latency_ms for r in rows]
        labels = [f"{short_label(r.variant, r.label)}<br><sub>{_bar_text(r)}</sub>" for r in rows]
        fig.add_bar(
            y=labels,
            x=[r.latency_ms for r in rows],
            orientation="h",
            width=0.42,
            marker_color=[variant_style(r.variant).colour for r in rows],
            error_x={"type": "data", "symmetric": False, "array": high, "arrayminus": low, "color": "#374151"},
            hovertemplate="median %{x:.1f} ms<extra></extra>",
        )
        for label, r in zip(labels, rows, strict=True):
            fig.add_annotation(
                x=0,
                y=label,
                xref="paper",
                text=f"<b>{esc(short_label(r.variant, r.label))}</b> · {esc(_bar_text(r))}",
                showarrow=False,
                xanchor="left",
                yanchor="bottom",
                yshift=ROW_PX * 0.21,
                font={"size": 12},
            )
    else:
        _empty(fig, "Latencies appear here<br>as each variant answers")  # two short lines: a phone's plot is narrow
    fig.update_layout(
        title={
            "text": "Median latency, this question<br><sup>whisker: fastest to slowest run</sup>",
            "font": {"size": 13},
        },
        xaxis={"title": "milliseconds", "rangemode": "tozero"},
        yaxis={"autorange": "reversed", "showticklabels": False},
        height=max(220, 90 + ROW_PX * max(len(rows), 3)),
        margin={"l": 10, "r": 20, "t": 50, "b": 40},
        template="plotly_white",
        showlegend=False,
    )
    return fig


def _bar_text(result: VariantResult) -> str:
    shown = fmt_ms(result.latency_ms)
    shown = shown if result.variant == "baseline" else f"{shown} · {fmt_speedup(result.speedup)}"
    return f"{shown} · random weights" if result.latency_only else shown


def _empty(fig: go.Figure, message: str) -> go.Figure:
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper", font={"size": 14})
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


def no_answer_floor(record: Record | None) -> float | None:
    """F1 of answering "no answer" to every question: the share of unanswerable ones, in percent."""
    data = record.data if record else {}
    n, none = data.get("n_questions"), data.get("no_answer")
    return 100 * none / n if n and none is not None else None


Y_TITLES = {"f1": "F1 on SQuAD v2 (%)", "has_ans_f1": "F1, answerable questions (%)"}
SCATTER_HEIGHT = 540  # px; the plot area's height is this less the margins: fixed, so labels can be placed
SCATTER_MARGIN = {"l": 10, "r": 16, "b": 50}  # t: the title's lines
PHONE_PLOT_WIDTH = 250  # px: the narrowest plot area the chart is drawn in (a 390 px phone, less axes)


def axis_note(low: float) -> str:
    """The F1 axis title's ending that says where the axis starts when it does not start at 0."""
    return f", from {low:g}" if low > 0 else ""


FRONTIER_NAME = "Best trade-offs"
FAINT = 0.4  # the opacity of a point off the best trade-offs
LABEL_PX = 11  # the labels' font: 10 px read as 9 on a phone


def best_trade_offs(rows, y: str) -> list[str]:
    """The variants of ``rows`` on the frontier (:func:`variants.records.frontier.frontier`), fastest first."""
    return frontier({str(r.variant): (r.p50_ms, getattr(r, y)) for r in rows.itertuples(index=False)}).best


def accuracy_figure(
    frame,
    floor: float | None = None,
    view: str = "",
    y: str = "f1",
    unit: str = "F1",
    y_range: tuple[float, float] | None = None,
) -> go.Figure:
    """F1 against median latency, one marker per variant in its own colour and shape (the peers, which are not
    ours, hollow), its area in proportion to the model's size in MB, each labelled with its short name, size,
    speedup and the F1 it loses against the baseline (:mod:`ui.point_labels`), a thin translucent bar from the
    median to p90. The variants no other beats on both speed and accuracy (:func:`best_trade_offs`, the peers
    counted) are joined by a line; the others are drawn fainter, with a one-line label. ``y`` is the frame's
    column plotted: ``f1`` (all of SQuAD v2) or ``has_ans_f1`` (its answerable questions). The F1 axis is fitted to
    the points (a few points of F1 are the whole story; ``y_range`` sets it instead) and its title says where it
    starts; ``floor``, the F1 of always answering "no answer", is a dotted line labelled at the right. ``view``
    names the accuracy view; ``unit`` what the labels call the y value where it is not F1 (the overlap with the
    baseline's answers)."""
    fig = go.Figure()
    rows = frame.dropna(subset=[y, "p50_ms"]) if frame is not None and len(frame) else None
    if rows is not None and "latency_only" in rows:
        rows = rows[~rows["latency_only"].fillna(False).astype(bool)]  # random weights: no F1 to plot
    y_title = Y_TITLES.get(y, y)
    if rows is not None and len(rows):
        rows = draw_order(rows)
        fitted, x_range = scatter_ranges(rows, y, floor)
        y_range = tuple(y_range) if y_range is not None else fitted
        y_title += axis_note(y_range[0])
        best = best_trade_offs(rows, y)
        _frontier_line(fig, rows, y, best)
        sizes = marker_sizes(rows)
        hover = "<br>".join(f"{label}: %{{customdata[{i}]}}" for i, label in enumerate(HOVER_FIELDS.values()))
        for row, size in zip(rows.itertuples(index=False), sizes, strict=True):
            style = variant_style(PEER if row.is_peer else str(row.variant))
            p90 = row.p90_ms if not _missing(row.p90_ms) else row.p50_ms
            on = str(row.variant) in best
            fig.add_scatter(
                x=[row.p50_ms],
                y=[getattr(row, y)],
                mode="markers",
                name=str(row.short_label),
                opacity=1.0 if on else FAINT,
                error_x={
                    "type": "data",
                    "symmetric": False,
                    "array": [p90 - row.p50_ms],
                    "arrayminus": [0],
                    "color": _translucent(style.colour),
                    "thickness": 1,
                    "width": 0,
                },
                marker={
                    "size": size,
                    "color": style.colour,
                    "symbol": style.symbol,
                    "line": {"width": 2 if style.hollow else 1, "color": style.colour if style.hollow else "#1f2937"},
                },
                customdata=[[_hover_value(getattr(row, f, None)) for f in HOVER_FIELDS]],
                hovertemplate=f"<b>{esc(row.short_label)}</b>"
                + ("" if on else " (beaten on both speed and accuracy)")
                + f"<br>{hover}<extra></extra>",
            )
        _label_points(fig, rows, y, x_range, y_range, unit, best)
        if floor is not None:
            fig.add_scatter(
                x=list(x_range),
                y=[floor, floor],
                mode="lines",
                name=f"always “no answer”: {floor:.1f}",
                line={"dash": "dot", "color": "#6b7280", "width": 1.5},
                hoverinfo="skip",
            )
            fig.add_annotation(
                text=f"always “no answer”: {floor:.1f}",
                x=1,
                xref="paper",
                y=floor,
                yshift=-8,
                xanchor="right",
                showarrow=False,
                font={"size": 10, "color": "#6b7280"},
            )
        fig.update_yaxes(range=list(y_range))
        fig.update_xaxes(range=list(x_range))
    elif frame is not None and len(frame) and frame["latency_only"].fillna(False).astype(bool).all():
        _empty(fig, f"{LATENCY_ONLY.capitalize()}: no F1 to plot<br>(the latency plot beside this one holds)")
    elif frame is not None and len(frame) and y != "f1":
        _empty(fig, "This record holds no F1<br>on the answerable questions alone")
    else:
        _empty(fig, "No accuracy and latency numbers yet")
    # Short lines: a phone's plot is ~320 px wide and plotly does not wrap titles.
    title = "Accuracy against speed<br><sup>up and left is better; bar: median to p90</sup>"
    title += "<br><sup>line: best trade-offs; area: model size (MB)</sup>"
    title += f"<br><sup>{esc(view)}</sup>" if view else ""
    fig = _chart_layout(fig, title, "median ms per question", y_title)
    top = scatter_top(bool(view))  # the title's lines clear of the axis
    return fig.update_layout(
        height=SCATTER_HEIGHT, margin={**SCATTER_MARGIN, "t": top}, showlegend=False, hoverlabel={"font_size": 11}
    )


def scatter_top(view: bool) -> int:
    """The chart's top margin: room for the title's lines."""
    return 112 if view else 96


def draw_order(rows):
    """Larger models first, so that a small marker is never hidden behind a larger one at the same spot (the
    INT8 star behind the Pruned diamond); at equal size the peers first, ours on top."""
    size = rows["size_mb"].astype(float).fillna(0.0) if "size_mb" in rows else 0.0
    keyed = rows.assign(_size=size, _peer=rows["any_peer"].astype(bool))
    return keyed.sort_values(["_size", "_peer"], ascending=[False, False], kind="stable").drop(
        columns=["_size", "_peer"]
    )


def marker_sizes(rows) -> list[float]:
    """Each row's marker diameter (:func:`ui.point_labels.marker_px`): its area in proportion to its model's MB."""
    sizes = [None if _missing(v) else float(v) for v in rows["size_mb"]] if "size_mb" in rows else [None] * len(rows)
    largest = max((v for v in sizes if v), default=None)
    return [marker_px(v, largest) for v in sizes]


def _frontier_line(fig: go.Figure, rows, y: str, best: list[str]) -> None:
    """The line through the best trade-offs, fastest first, drawn under the markers."""
    if len(best) < 2:
        return
    at = {str(r.variant): (r.p50_ms, getattr(r, y)) for r in rows.itertuples(index=False)}
    fig.add_scatter(
        x=[at[n][0] for n in best],
        y=[at[n][1] for n in best],
        mode="lines",
        name=FRONTIER_NAME,
        line={"color": "#4b5563", "width": 1.5},
        hoverinfo="skip",
    )


def scatter_plot_size(view: bool) -> tuple[float, float]:
    """The plot area (width, height) in pixels the labels are placed for: a phone's width, the chart's height."""
    return PHONE_PLOT_WIDTH, SCATTER_HEIGHT - SCATTER_MARGIN["b"] - scatter_top(view)


def scatter_ranges(rows, y: str, floor: float | None) -> tuple[tuple[float, float], tuple[float, float]]:
    """The F1 axis fitted to the points (and the always-"no answer" floor), on multiples of 5; the latency axis
    from 0 to the furthest p90, so that distances from 0 read as speedups."""
    values = [float(v) for v in rows[y]] + ([floor] if floor is not None else [])
    right = max(max(r.p90_ms, r.p50_ms) if not _missing(r.p90_ms) else r.p50_ms for r in rows.itertuples())
    return fitted_range(values), (0.0, float(right) * 1.04)


def point_labels(rows, y: str, unit: str = "F1", best: list[str] | None = None) -> list[list[str]]:
    """Each row's label lines: short name and size, speedup and F1 (or ``unit``) against the baseline's
    (:func:`label_lines`); one short line for a row off the best trade-offs ``best`` (all on it where None)."""
    base = rows[rows["variant"] == "baseline"]
    baseline_f1 = float(base[y].iloc[0]) if len(base) else None
    return [
        label_lines(
            str(r.variant),
            str(r.short_label),
            r.speedup_vs_baseline,
            float(getattr(r, y)),
            baseline_f1,
            unit,
            getattr(r, "size_mb", None),
            best is None or str(r.variant) in best,
        )
        for r in rows.itertuples(index=False)
    ]


def label_order(rows, best: list[str] | None = None) -> list[int]:
    """Which labels are placed first (they get the spot beside their point): the baseline, then the best
    trade-offs (the headline variant first), the peers, then the rest in the chain's order."""

    def rank(r) -> tuple:
        on = best is None or str(r.variant) in best
        return (r.variant != "baseline", not on, not r.headline, not r.any_peer)

    ranks = [rank(r) for r in rows.itertuples(index=False)]
    return sorted(range(len(ranks)), key=lambda i: ranks[i])


def _label_points(fig: go.Figure, rows, y: str, x_range, y_range, unit: str = "F1", best=None) -> None:
    labels = point_labels(rows, y, unit, best)
    order = label_order(rows, best)
    points = [(float(r.p50_ms), float(getattr(r, y))) for r in rows.itertuples(index=False)]
    sizes = marker_sizes(rows)
    size = scatter_plot_size(view=True)
    placed = place_labels(
        [points[i] for i in order], [labels[i] for i in order], x_range, y_range, size, LABEL_PX,
        [sizes[i] for i in order],
    )  # fmt: skip
    variants = [str(r.variant) for r in rows.itertuples(index=False)]
    for i, where in zip(order, placed, strict=True):
        x, y_value = points[i]
        on = best is None or variants[i] in best
        fig.add_annotation(
            x=x,
            y=y_value,
            text="<br>".join(esc(line) for line in labels[i]),
            showarrow=True,
            arrowhead=0,
            arrowwidth=0.8,
            arrowcolor="#9ca3af",
            standoff=sizes[i] / 2 + 1,
            ax=where.dx,
            ay=where.dy,
            xanchor=where.anchor,
            yanchor="middle",
            align=where.anchor,
            font={"size": LABEL_PX if on else LABEL_PX - 1, "color": "#111827" if on else "#6b7280"},
        )


def _translucent(colour: str, alpha: float = 0.35) -> str:
    red, green, blue = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},{alpha})"


def _chart_layout(fig: go.Figure, title: str, x_title: str, y_title: str) -> go.Figure:
    """The benchmark tab's common chart style: title, axes, white template, legend at the foot (it wraps on a phone)."""
    fig.update_layout(
        title={"text": title, "font": {"size": 14}},
        xaxis_title=x_title,
        yaxis_title=y_title,
        height=480,
        margin={"l": 10, "r": 20, "t": 80, "b": 40},
        template="plotly_white",
        # At the figure's foot (container coordinates), so that plotly makes room for it below the axis title: placed
        # under the plot area instead, it met the x-axis title on a phone, where the legend is one column.
        legend={"orientation": "h", "yref": "container", "yanchor": "bottom", "y": 0, "font": {"size": 11}},
    )
    return fig


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _hover_value(value) -> str:
    if isinstance(value, float):
        return "–" if math.isnan(value) else f"{value:,.2f}"
    if isinstance(value, int) and value > 1e5:
        return fmt_params(value)
    return esc("–" if value is None else value)


def seq_len_figure(record: Record | None) -> go.Figure:
    """Median latency against sequence length, one line per variant in its own colour, marker and dash."""
    fig = go.Figure()
    for v in record.variants if record else []:
        points = [(p["seq_len"], p["p50_ms"]) for p in v.seq_len_sweep if p.get("p50_ms") is not None]
        if points:
            xs, ys = zip(*points, strict=True)
            style = variant_style(v.variant)
            fig.add_scatter(
                x=list(xs),
                y=list(ys),
                mode="lines+markers",
                name=v.short_label + (f" ({LATENCY_ONLY})" if v.latency_only else ""),
                line={"color": style.colour, "width": 2.5 if v.headline else 1.5, "dash": style.dash},
                marker={"symbol": style.marker, "size": 8, "color": style.colour},
                hovertemplate="%{x} tokens: %{y:.1f} ms<extra>%{fullData.name}</extra>",
            )
    if not fig.data:
        _empty(
            fig,
            "No sequence-length sweep<br>in this record"
            + (
                (
                    "<br>(quick runs skip it;<br>python -m variants bench<br>measures it)"
                    if record.is_quick or record.is_own
                    else "<br>(this run skipped it;<br>python -m variants bench<br>"
                    "without --skip-sweeps<br>measures it)"
                )
                if record
                else ""
            ),
        )
    else:
        fig.update_yaxes(rangemode="tozero")
    return _chart_layout(
        fig, "Latency against input length (batch 1)", "sequence length (tokens)", "median latency (ms)"
    )


# GPU records: a line per variant and mode, the variant's colour, the mode's dash and marker (a captured CUDA
# graph is the bold line: it is the one that removes the launch overhead a GPU at batch 1 waits on).
MODE_LOOKS = {  # mode -> (dash, marker, width)
    "torch-fp32": ("solid", "circle", 1.5),
    "torch-fp16": ("dash", "square", 1.5),
    "torch-amp": ("dot", "triangle-up", 1.5),
    "torch-cudagraph-fp16": ("solid", "diamond", 3.0),
    "torch-compile-fp16": ("dashdot", "x", 1.5),
    "torch-compile-reduce-overhead-fp16": ("longdash", "cross", 1.5),
    "torch-compile-max-autotune-fp16": ("longdashdot", "pentagon", 1.5),
}
ORT_LOOKS = {"cudagraph": ("solid", "star", 3.0), "iobinding": ("dash", "hexagon", 2.0)}


def mode_look(mode: str) -> tuple[str, str, float]:
    """(dash, marker, line width) of a GPU report's mode."""
    if mode in MODE_LOOKS:
        return MODE_LOOKS[mode]
    how = "cudagraph" if "cudagraph" in mode else "iobinding"
    return ORT_LOOKS[how] if mode.startswith("ort-") else ("dot", "circle-open", 1.5)


def gpu_line_name(variant_label: str, mode_label: str, preset: str | None, presets: int) -> str:
    """A line's legend name: variant and mode, and the preset when the record holds several."""
    name = f"{variant_label} · {mode_label}"
    return f"{preset}: {name}" if presets > 1 and preset else name


def gpu_latency_figure(frame) -> go.Figure:
    """Median batch-1 latency against sequence length from a GPU record (``variants.records.gpu.latency_frame``),
    one line per preset, variant and mode, with a bar up to the p90 at each point."""
    fig = go.Figure()
    rows = frame if frame is not None else []
    groups = rows.groupby(["preset", "variant", "mode"], sort=False, dropna=False) if len(rows) else []
    presets = rows["preset"].nunique() if len(rows) else 0
    for (preset, variant, mode), group in groups:
        points = group.sort_values("seq_len")
        first = points.iloc[0]
        dash, marker, width = mode_look(str(mode))
        colour = variant_style(str(variant)).colour
        p90 = points["p90_ms"].fillna(points["p50_ms"])
        fig.add_scatter(
            x=points["seq_len"].tolist(),
            y=points["p50_ms"].tolist(),
            mode="lines+markers",
            name=gpu_line_name(first["variant_label"], first["mode_label"], preset, presets),
            line={"color": colour, "width": width, "dash": dash},
            marker={"symbol": marker, "size": 8, "color": colour},
            error_y={
                "type": "data",
                "symmetric": False,
                "array": (p90 - points["p50_ms"]).tolist(),
                "arrayminus": [0] * len(points),
                "color": colour,
                "thickness": 1,
                "width": 3,
            },
            customdata=list(zip(p90.tolist(), points["n"].tolist(), strict=True)),
            hovertemplate="%{x} tokens: median %{y:.2f} ms, p90 %{customdata[0]:.2f} ms (%{customdata[1]} runs)"
            "<extra>%{fullData.name}</extra>",
        )
    if not fig.data:
        _empty(fig, "No GPU latency in this record")
    else:
        fig.update_yaxes(rangemode="tozero")
    fig = _chart_layout(
        fig,
        "GPU latency by input length<br><sup>batch 1; bar: median up to p90</sup>",
        "sequence length (tokens)",
        "median latency (ms)",
    )
    return fig.update_layout(height=560)


def gpu_throughput_figure(frame) -> go.Figure:
    """Questions per second against batch size from a GPU record (``variants.records.gpu.throughput_frame``):
    one panel per sequence length (stacked, for a phone), one line per preset, variant and mode in each."""
    from plotly.subplots import make_subplots  # noqa: PLC0415

    if frame is None or not len(frame):
        return _chart_layout(_empty(go.Figure(), "No throughput table in this record"), "Questions per second", "", "")
    lengths = sorted(frame["seq_len"].dropna().unique())
    fig = make_subplots(
        rows=len(lengths),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.12,
        subplot_titles=[f"{int(n)} tokens" for n in lengths],
    )
    presets = frame["preset"].nunique()
    for (preset, variant, mode), points in frame.groupby(["preset", "variant", "mode"], sort=False, dropna=False):
        first = points.iloc[0]
        dash, marker, width = mode_look(str(mode))
        colour = variant_style(str(variant)).colour
        name = gpu_line_name(first["variant_label"], first["mode_label"], preset, presets)
        for row, length in enumerate(lengths, start=1):
            shown = points[points["seq_len"] == length].sort_values("batch")
            if not len(shown):
                continue
            fig.add_scatter(
                x=shown["batch"].tolist(),
                y=shown["qps"].tolist(),
                mode="lines+markers",
                name=name,
                legendgroup=name,
                showlegend=row == 1,
                line={"color": colour, "width": width, "dash": dash},
                marker={"symbol": marker, "size": 8, "color": colour},
                hovertemplate=f"batch %{{x}}, {int(length)} tokens: %{{y:,.0f}} questions/s"
                "<extra>%{fullData.name}</extra>",
                row=row,
                col=1,
            )
    fig = _chart_layout(fig, "GPU throughput<br><sup>questions per second, one window each</sup>", "", "")
    fig.update_xaxes(type="log", tickvals=sorted(frame["batch"].dropna().unique().tolist()))
    fig.update_yaxes(type="log", title_text="questions / s")
    fig.update_xaxes(title_text="batch size", row=len(lengths), col=1)
    return fig.update_layout(height=300 * len(lengths) + 260)
