#!/usr/bin/env bash
# Download, where a package index is reachable, the wheels that scripts/gpu_report.sh installs on a
# GPU machine that has none (Python 3.12, x86-64 Linux, with torch, onnx, onnxruntime, numpy,
# safetensors, tokenizers' other needs already there). They go to .whl/ (git-ignored; about 9 MB,
# carried next to the checkout):
#   transformers 4.57.6 + tokenizers 0.22.2 + huggingface-hub 0.36.2: the versions requirements.txt pins;
#     the engine and config.pruned_heads (how the pruned checkpoints and the replica store removed
#     heads) need transformers 4, and transformers 4.57 refuses the machine's tokenizers 0.23 and hub 1.x;
#   fastapi, starlette, pydantic (+ core), annotated-types, typing-inspection, opentelemetry-api,
#     uvicorn: served latency.
# The checkout (54 MiB of tracked files) and the wheels travel to the GPU machine together, 64 MiB at
# most (about 1 MiB to spare with these wheels), so transformers' wheel is cut to the model folders
# this project loads (12 MB -> 1.9 MB): bert, auto, and those auto's tokenizer and pipeline lookups
# import in transformers 4.57.6 (KEEP below, found by loading the embedded models and the
# question-answering pipeline with the cut wheel; check it again when the pin moves). optimum and
# optimum-onnx stay behind: the ONNX export imports model folders cut here, and such a machine's
# onnxruntime is a CPU build, so the ONNX variants' entries say why they are missing. Where
# onnxruntime-gpu is installed (a Space), the same report measures ORT CUDA.
set -euo pipefail
cd "$(dirname "$0")/.."
PYVER="${PYVER:-3.12}"
KEEP="bert auto encoder_decoder speecht5 align bark"  # for transformers 4.57.6
rm -rf .whl  # wheels of an earlier version of this script (optimum) would be installed too
download() {
  python3 -m pip download --quiet --dest "$1" --no-deps --only-binary=:all: \
    --python-version "$PYVER" --implementation cp --platform manylinux2014_x86_64 "${@:2}"
}
download .whl tokenizers==0.22.2 huggingface-hub==0.36.2 \
  fastapi==0.165.0 starlette==1.10.0 pydantic==2.14.3 pydantic-core==2.50.4 annotated-types==0.8.0 \
  typing-inspection==0.4.5 annotated-doc==0.0.7 opentelemetry-api==1.45.2 uvicorn==0.54.0
full="$(mktemp -d)"
trap 'rm -rf "$full"' EXIT
download "$full" transformers==4.57.6
python3 - "$full"/transformers-*.whl .whl "$KEEP" <<'EOF'
"""Copy a transformers wheel without the model folders not named in KEEP (their RECORD lines too)."""
import csv
import io
import sys
import zipfile
from pathlib import Path

source, dest, keep = Path(sys.argv[1]), Path(sys.argv[2]), set(sys.argv[3].split())


def kept(name: str) -> bool:
    parts = name.split("/")
    return not (len(parts) > 3 and parts[:2] == ["transformers", "models"] and parts[2] not in keep)


with zipfile.ZipFile(source) as src, zipfile.ZipFile(dest / source.name, "w", zipfile.ZIP_DEFLATED) as out:
    for item in src.infolist():
        if not kept(item.filename):
            continue
        data = src.read(item)
        if item.filename.endswith(".dist-info/RECORD"):
            rows = [row for row in csv.reader(io.StringIO(data.decode())) if row and kept(row[0])]
            text = io.StringIO()
            csv.writer(text, lineterminator="\n").writerows(rows)
            data = text.getvalue().encode()
        out.writestr(item, data)
EOF
du -sh .whl
