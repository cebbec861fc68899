#!/usr/bin/env bash
# One command, about ten minutes, on a GPU machine with no package index: the GPU report
# (variants/benchmarking/gpu/report.py): the embedded preset and the BERT-large replica on CUDA, PyTorch
# eager/AMP/CUDA graphs/torch.compile, ONNX Runtime CUDA (IOBinding, CUDA graphs) where onnxruntime-gpu
# is installed, questions per second by batch, one question answered by every variant, served latency
# over HTTP; records go to assets/results/gpu/ (or --out).
#
#   bash scripts/gpu_report.sh                          # CUDA
#   bash scripts/gpu_report.sh --device cpu --quick     # anywhere (CI runs this)
#
# Wheels in .whl/ (made by scripts/gpu_wheels.sh where an index is reachable) are installed into
# .gpu-site/ and put first on PYTHONPATH, so the pinned transformers 4.57 / fastapi stack runs even
# where the machine has transformers 5 and no fastapi. They leave out optimum and onnxruntime-gpu, which
# do not fit one transfer to an offline GPU machine: scripts/gpu_measure.sh, after the parts of scripts/gpu_ort_wheel.sh,
# runs the whole measurement (docs/gpu.md). Without them the report still runs to the end; variants that
# need a missing package carry its error.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
WHEELS="${WHEELS_DIR:-.whl}"   # WHEELS_DIR=none: the installed packages only
if compgen -G "$WHEELS/*.whl" > /dev/null; then
  if [ ! -f .gpu-site/.installed ] || [ -n "$(find "$WHEELS" -newer .gpu-site/.installed -name '*.whl')" ]; then
    rm -rf .gpu-site
    if "$PY" -m pip install --quiet --no-index --no-deps --target .gpu-site "$WHEELS"/*.whl; then
      touch .gpu-site/.installed
    else
      echo "warning: the wheels in $WHEELS do not install here; going on with the installed packages" >&2
      rm -rf .gpu-site
    fi
  fi
  if [ -f .gpu-site/.installed ]; then export PYTHONPATH="$PWD/.gpu-site${PYTHONPATH:+:$PYTHONPATH}"; fi
fi
"$PY" -c 'import torch, transformers, onnxruntime as ort
print(f"torch {torch.__version__} (CUDA {torch.version.cuda}, GPU: {torch.cuda.is_available()}), "
      f"transformers {transformers.__version__}, onnxruntime {ort.__version__} {ort.get_available_providers()}")'
exec "$PY" -m variants gpu-report "$@"
