"""The Gradio page, one module per concern (as the LLM-Perf leaderboard Space keeps ``src/``): ``ask``,
``benchmark`` and ``about`` build the tabs and their handlers; ``cards`` and ``charts`` are pure functions of
results and records; ``text`` formats and escapes; ``styles`` holds the CSS. ``app.py`` only wires them.

No model code lives here: loading, answering, timing and benchmarking are the engine's (:mod:`variants`).
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_FILE = ROOT / "assets" / "data" / "squad_v2_dev_sample.json"
