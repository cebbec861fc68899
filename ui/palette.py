"""One colour and one marker per variant, the same in every chart: the Ask tab's bars, the Benchmark tab's
plots and the README chart drawn by ``variants/benchmarking/plot.py`` (matplotlib), so that a variant is
recognised by its look everywhere. Colours are Okabe and Ito's colour-blind-safe set; the markers differ
too, so overlapping points and grey-scale prints still tell the variants apart.

Pure data, no plotting import: plotly and matplotlib both read it.
"""

from dataclasses import dataclass

PEER = "peer"  # the benchmark's name for the transformers pipeline on the baseline model
OPTIMUM_INT8 = "optimum-int8"  # the other peer: optimum's ONNX Runtime dynamic INT8 of the baseline


@dataclass(frozen=True)
class Style:
    colour: str
    marker: str  # a plotly symbol name; :attr:`mpl_marker` is matplotlib's for the same shape
    dash: str = "solid"  # plotly line dash (sweeps)
    hollow: bool = False  # drawn as an outline: the peers, which are not ours, beside our filled variants

    @property
    def symbol(self) -> str:
        """The plotly symbol, open when hollow."""
        return f"{self.marker}-open" if self.hollow else self.marker

    @property
    def mpl_marker(self) -> str:
        return MPL_MARKERS[self.marker]

    @property
    def mpl_dash(self) -> str:
        return {"solid": "-", "dash": "--", "dot": ":", "dashdot": "-."}[self.dash]


MPL_MARKERS = {
    "circle": "o",
    "square": "s",
    "diamond": "D",
    "triangle-up": "^",
    "triangle-down": "v",
    "star": "*",
    "x": "X",
    "pentagon": "p",
    "hexagon": "h",
    "cross": "P",
}
STYLES = {
    "baseline": Style("#6b7280", "circle"),
    "pruned-dense": Style("#56b4e9", "square", "dot"),
    "pruned": Style("#0072b2", "diamond"),
    "pruned-onnx": Style("#009e73", "triangle-up", "dash"),
    "pruned-onnx-opt": Style("#cc79a7", "triangle-down", "dashdot"),
    "pruned-onnx-opt-int8": Style("#d55e00", "star"),
    "pruned-onnx-opt-fp16": Style("#d55e00", "star"),  # the same last step, on GPU (never both in one record)
    PEER: Style("#111827", "x", "dot", hollow=True),
    OPTIMUM_INT8: Style("#111827", "hexagon", "dashdot", hollow=True),
    "custom": Style("#e69f00", "pentagon"),
}
# The baseline's own graph steps (a chain without a pruned partner, and the GPU report's baseline graphs): each
# the pruned step's marker and dash, open, as the same step made from the unpruned model; the last in orange.
STYLES |= {
    "baseline" + name.removeprefix("pruned"): Style("#e69f00" if name.endswith(("int8", "fp16")) else look.colour,
                                                     look.marker, look.dash, hollow=True)
    for name, look in STYLES.items()
    if name.startswith("pruned-onnx")
}  # fmt: skip
SPARE = [Style("#f0e442", "hexagon"), Style("#000000", "cross"), Style("#999999", "square", "dash")]


def variant_style(name: str) -> Style:
    """The style of variant ``name``; a name outside the chains gets a spare style, stable for that name."""
    if name in STYLES:
        return STYLES[name]
    return SPARE[sum(map(ord, name)) % len(SPARE)]
