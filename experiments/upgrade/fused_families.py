"""The fused operators per family on whichever stack runs this: the tiny random BERT, DistilBERT, RoBERTa, ELECTRA
and XLM-RoBERTa of tests/test_export_families.py through the chain's own calls (export, optimize for the CPU and
for the GPU, INT8 with the QA head FP32), counted node by node.

    python experiments/upgrade/fused_families.py CHECKOUT OUT.json

CHECKOUT is the tree whose ``variants`` exports (the old stack's: a checkout from before the move, run with its
environment); the models come from this tree's tests. The old stack's record: upgrade-fused-families-before.json.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2] / "tests"


def main() -> None:
    checkout, out = sys.argv[1], Path(sys.argv[2])
    sys.path[:0] = [checkout, str(TESTS)]
    import onnx  # noqa: PLC0415
    import test_export_families as families  # noqa: PLC0415
    import torch  # noqa: PLC0415

    from variants.building import export  # noqa: PLC0415

    def count(path: Path) -> dict[str, int]:
        nodes = onnx.load(str(path)).graph.node
        return dict(Counter(n.op_type for n in nodes), nodes=len(nodes))

    record = {}
    for name, make in families.FAMILIES.items():
        folder = Path(tempfile.mkdtemp())
        torch.manual_seed(0)
        model, tokenizer = make(folder)
        exported = export.export_onnx(model.eval(), tokenizer, folder / "onnx")
        optimized = export.optimize_onnx(exported, folder / "opt", for_gpu=False)
        for_gpu = export.optimize_onnx(exported, folder / "opt-gpu", for_gpu=True)
        int8 = export.apply_step("int8", optimized, folder / "int8", for_gpu=False)
        record[name] = {k: count(p) for k, p in (("export", exported), ("optimized", optimized),
                                                   ("optimized_for_gpu", for_gpu), ("int8", int8))}  # fmt: skip
        print(name, json.dumps(record[name]["optimized"]), flush=True)
    out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
