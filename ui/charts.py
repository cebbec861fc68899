"""Plotly figures, each a plain function of results or records (the components that show them live in the tabs)."""

import math

import plotly.graph_objects as go

from variants.engine import Engine, VariantResult

from .text import esc, fmt_ms, fmt_params, fmt_speedup

# Colours: the baseline grey, headline variants in the accent colour, intermediate steps lighter.
BASELINE_COLOUR, HEADLINE_COLOUR, STEP_COLOUR = "#9ca3af", "#ea580c", "#fdba74"
HOVER_FIELDS = [
    *("exact", "f1", "has_ans_f1", "no_ans_f1", "p50_ms", "p90_ms", "p99_ms", "throughput_qps"),
    *("speedup_vs_baseline", "size_mb", "parameters", "best_f1", "device", "provider", "dtype"),
]


def latency_figure(engine: Engine, names: list[str], results: dict[str, VariantResult]) -> go.Figure:
    """Horizontal bars: latency per variant (chain order, baseline on top) with speedup labels."""
    rows = []
    for loaded in engine.loaded:
        r = results.get(loaded.spec.name)
        if loaded.spec.name in names and r is not None and r.latency_ms and not r.error:
            colour = (
                BASELINE_COLOUR if r.variant == "baseline" else HEADLINE_COLOUR if loaded.spec.headline else STEP_COLOUR
            )
            text = fmt_ms(r.latency_ms) + (f"  ·  {fmt_speedup(r.speedup)}" if r.variant != "baseline" else "")
            rows.append((r.label, r.latency_ms, colour, text))
    fig = go.Figure()
    if rows:
        labels, values, colours, texts = zip(*rows, strict=True)
        fig.add_bar(
            y=list(labels),
            x=list(values),
            orientation="h",
            marker_color=list(colours),
            text=list(texts),
            textposition="auto",
            hovertemplate="%{y}: %{x:.1f} ms<extra></extra>",
        )
    else:
        _empty(fig, "Latencies appear here as each variant answers")
    fig.update_layout(
        title={"text": "Latency for this question (lower is better)", "font": {"size": 14}},
        xaxis_title="milliseconds",
        yaxis={"autorange": "reversed"},
        height=max(220, 70 + 42 * max(len(rows), 3)),
        margin={"l": 10, "r": 20, "t": 40, "b": 40},
        template="plotly_white",
        showlegend=False,
    )
    return fig


def _empty(fig: go.Figure, message: str) -> go.Figure:
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper", font={"size": 14})
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


def _colour(variant: str, headline: bool, peer: bool = False) -> str:
    if variant == "baseline" or peer:
        return BASELINE_COLOUR
    return HEADLINE_COLOUR if headline else STEP_COLOUR


def accuracy_figure(frame) -> go.Figure:
    """F1 against median latency; point size = model size; hover shows every metric."""
    fig = go.Figure()
    rows = frame.dropna(subset=["f1", "p50_ms"]) if frame is not None and len(frame) else None
    if rows is not None and len(rows):
        biggest = max(float(rows["size_mb"].fillna(0).max()), 1e-9)
        hover = "<br>".join(f"{f}: %{{customdata[{i}]}}" for i, f in enumerate(HOVER_FIELDS))
        for row in rows.itertuples(index=False):
            size = biggest / 4 if _missing(row.size_mb) else float(row.size_mb)
            shown = row.variant == "baseline" or bool(row.headline) or bool(row.is_peer)
            fig.add_scatter(
                x=[row.p50_ms],
                y=[row.f1],
                mode="markers+text" if shown else "markers",
                name=str(row.label),
                text=[str(row.variant) if not row.is_peer else "transformers pipeline"],
                textposition="bottom center" if row.variant == "pruned" else "top center",
                cliponaxis=False,
                marker={
                    "size": [14 + 40 * (size / biggest) ** 0.5],
                    "color": _colour(str(row.variant), bool(row.headline), bool(row.is_peer)),
                    "symbol": "diamond" if row.is_peer else "circle",
                    "opacity": 0.8,
                    "line": {"width": 1, "color": "#374151"},
                },
                customdata=[[_hover_value(getattr(row, f, None)) for f in HOVER_FIELDS]],
                hovertemplate=f"<b>{esc(row.label)}</b><br>{hover}<extra></extra>",
            )
    else:
        _empty(fig, "No accuracy and latency numbers yet")
    return _chart_layout(
        fig,
        "Accuracy against speed (up and left is better; bubble area = model size)",
        "median latency per question (ms)",
        "F1 on SQuAD v2 (%)",
        right_margin=60,
    )


def _chart_layout(fig: go.Figure, title: str, x_title: str, y_title: str, right_margin: int = 20) -> go.Figure:
    """The benchmark tab's common chart style: title, axes, white template, legend below."""
    fig.update_layout(
        title={"text": title, "font": {"size": 14}},
        xaxis_title=x_title,
        yaxis_title=y_title,
        height=440,
        margin={"l": 10, "r": right_margin, "t": 50, "b": 40},
        template="plotly_white",
        legend={"orientation": "h", "y": -0.22, "font": {"size": 11}},
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


def seq_len_figure(record: dict | None) -> go.Figure:
    """Median latency against sequence length, one line per variant."""
    fig = go.Figure()
    for v in (record or {}).get("variants", []):
        sweep = v.get("seq_len_sweep") or []
        points = [(p["seq_len"], p["p50_ms"]) for p in sweep if p.get("p50_ms") is not None]
        if points:
            xs, ys = zip(*points, strict=True)
            colour = _colour(str(v.get("variant")), bool(v.get("headline")))
            fig.add_scatter(
                x=list(xs),
                y=list(ys),
                mode="lines+markers",
                name=str(v.get("label", v.get("variant"))),
                line={"color": colour, "width": 3 if v.get("headline") else 1.5},
                hovertemplate="%{x} tokens: %{y:.1f} ms<extra>%{fullData.name}</extra>",
            )
    if not fig.data:
        _empty(
            fig,
            "No sequence-length sweep in this record"
            + ("<br>(quick benchmarks skip it; run python -m variants bench)" if record else ""),
        )
    return _chart_layout(
        fig, "Latency against input length (one window, batch 1)", "sequence length (tokens)", "median latency (ms)"
    )
