#!/usr/bin/env bash
# Download, where a package index is reachable, the wheels that scripts/gpu_report.sh installs on a
# GPU machine that has none (Python 3.12, x86-64 Linux, with torch, onnx, onnxruntime, numpy,
# safetensors, tokenizers' other needs already there). They go to .whl/ (git-ignored; about 20 MB,
# carried next to the checkout):
#   transformers 4.57.6 + tokenizers 0.22.2 + huggingface-hub 0.36.2: the versions requirements.txt pins;
#     the engine and config.pruned_heads (how the pruned checkpoints and the replica store removed
#     heads) need transformers 4, and transformers 4.57 refuses the machine's tokenizers 0.23 and hub 1.x;
#   optimum 2.1.0 + optimum-onnx 0.1.0: the ONNX export;
#   fastapi, starlette, pydantic (+ core), annotated-types, typing-inspection, uvicorn: served latency.
# onnxruntime-gpu (about 244 MB) cannot come along: where it is installed (a Space), the same report
# measures ORT CUDA; elsewhere its ORT entries say the provider is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PYVER="${PYVER:-3.12}"
python3 -m pip download --quiet --dest .whl --no-deps --only-binary=:all: \
  --python-version "$PYVER" --implementation cp --platform manylinux2014_x86_64 \
  transformers==4.57.6 tokenizers==0.22.2 huggingface-hub==0.36.2 optimum==2.1.0 optimum-onnx==0.1.0 \
  fastapi==0.165.0 starlette==1.10.0 pydantic==2.14.3 pydantic-core==2.50.4 annotated-types==0.8.0 \
  typing-inspection==0.4.5 annotated-doc==0.0.7 uvicorn==0.54.0
du -sh .whl
