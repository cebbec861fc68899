"""A benchmark record as one self-contained HTML report (the Benchmark tab's "Download a report"):

    python -m variants report assets/results/X.json --out report.html
    python -m variants report assets/results/X.json --view pipeline --no-examples --out report.html

The report is :mod:`ui.report`'s, built from the Benchmark tab's own functions (header, headline sentence,
chart, table). A bench record keeps no answers, so the example questions are answered by the record's variants
loaded here (the record's preset, or the chain of other models it ran,
as ``python -m variants ask`` loads it); ``--no-examples`` leaves them out,
and where the variants cannot be loaded the report says so instead.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from ui.record_table import DEFAULT_VIEW
from ui.report import Examples, benchmark_report, engine_examples
from variants.benchmarking.cli import price_argument
from variants.core.spec import NO_PARTNER
from variants.records.cost import check_price, find_price
from variants.records.record import SHOWN_VIEWS, Record
from variants.serving.engine import load_engine

log = logging.getLogger(__name__)


def examples_for(record: Record, device: str) -> Examples:
    """The app's examples answered by the record's variants loaded here; a sentence saying why not otherwise."""
    names = [e.variant for e in record.variants if not e.error]
    try:
        chain = record.chain  # a chain of other models than the preset's: its own baseline and partner (or none)
        overrides = {"baseline": chain["baseline"], "pruned": chain["pruned"] or NO_PARTNER} if chain else None
        engine = load_engine(record.preset, device, overrides, names=names)
    except Exception as exc:  # an unknown preset, models that cannot be fetched: the report still gets made
        log.warning("no example answers: %s", exc)
        return Examples(f"No example answers: the record's variants could not be loaded here ({exc}).")
    with engine:
        return engine_examples(engine, record)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m variants report", description=__doc__.splitlines()[0])
    parser.add_argument("record", help="a benchmark record (JSON), e.g. one of assets/results")
    parser.add_argument("--out", required=True, help="the report to write (.html)")
    parser.add_argument(
        "--view", choices=SHOWN_VIEWS, default=DEFAULT_VIEW, help="which accuracy, as the tab's control (default: "
        "the answerable questions at threshold 0)"
    )  # fmt: skip
    parser.add_argument("--price", type=price_argument, default=None, metavar="USD_PER_HOUR",
                        help="dollars per hour of the machine the record was measured on, or a published machine "
                        "as bench takes it (cpu-upgrade): the cost per million answers")  # fmt: skip
    parser.add_argument("--no-examples", action="store_true", help="leave out the example questions (no models)")
    parser.add_argument("--device", default="cpu", help="where the example questions are answered (default cpu)")
    args = parser.parse_args(argv)
    record = Record.load(args.record)
    price = args.price
    if isinstance(price, str):  # a published machine, as bench takes it: refused for hardware the record did not run on
        machine = find_price(price)
        try:
            check_price(machine, record)
        except ValueError as exc:
            parser.error(str(exc))
        price = machine.usd_per_hour
    examples = None if args.no_examples else examples_for(record, args.device)
    html = benchmark_report(record, args.view, examples=examples, price=price)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    print(f"{out} ({out.stat().st_size / 1e6:.1f} MB: plotly.js is inside, nothing is fetched when it opens)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
