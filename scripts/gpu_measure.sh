#!/usr/bin/env bash
# The GPU measurement of issue 42 in ONE device call (at most 10 minutes) on a lent H100/H200, after the
# wheel parts have been carried (scripts/gpu_ort_wheel.sh; docs/gpu.md gives the calls). Records go to
# $OUT (the device tool brings back at most 8 files), in this order, most needed first:
#
#   1. the BERT-large replica's GPU report: PyTorch and ONNX Runtime CUDA rows, questions per second,
#      served latency through the fastest variant (python -m variants gpu-report --presets bert-large-replica);
#   2. the app on cuda:0 with the card's three variants, asked through gradio_client (gpu-app, embedded);
#   3. the embedded preset's GPU report;
#   4. the app with the replica (timings), if time is left.
#
# Each step gets what is left of MEASURE_S (default 540 s) minus what the later steps need, so the call
# ends inside its limit; a step that fails is logged and the next one runs. Wheels: installed from
# /tmp/gpu-bundle (the carried parts) into /tmp/gpu-site unless the last `stow` did it already; without
# them the reports still run and their ONNX Runtime rows say "no CUDA provider". The models: moved
# back into assets/models when the call carried them as .gpu-stash/models (a slim tree).
#
#   bash scripts/gpu_measure.sh                    # on the lent machine, in the checkout's copy
#   DEVICE=cpu QUICK=1 OUT=/tmp/m bash scripts/gpu_measure.sh   # a rehearsal anywhere (scaled replica)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
exec > >(tee "$OUT/measure.log") 2>&1
PY="${PYTHON:-python3}"
MEASURE_S="${MEASURE_S:-540}"
CACHE="${CACHE_DIR:-/tmp/variants-cache}"  # built ONNX graphs, shared by the steps
DEVICE="${DEVICE:-cuda:0}"
QUICK_ARGS=()
if [ -n "${QUICK:-}" ]; then QUICK_ARGS=(--quick); fi
START=$SECONDS
left() { echo $((MEASURE_S - (SECONDS - START))); }
step() { echo "== $(date -u +%T) +$((SECONDS - START)) s ($(left) s left): $*"; }
budget() {  # budget NEED RESERVE: NEED seconds, or what is left after RESERVE for the later steps
  local spare=$(($(left) - $2))
  echo $((spare < $1 ? spare : $1))
}

step "set-up"
if [ ! -d assets/models ] && [ -d .gpu-stash/models ]; then mv .gpu-stash/models assets/models; fi
if [ ! -f /tmp/gpu-site/.installed ] && compgen -G "/tmp/gpu-bundle/part-*" > /dev/null; then
  bash scripts/gpu_ort_wheel.sh install || echo "WARNING: the wheels did not install"
fi
if [ -f /tmp/gpu-site/.installed ]; then
  export PYTHONPATH="/tmp/gpu-site${PYTHONPATH:+:$PYTHONPATH}"
else
  echo "WARNING: no onnxruntime-gpu here (no parts in /tmp/gpu-bundle): the ONNX Runtime rows will say so"
fi
export PYTHONUNBUFFERED=1 GRADIO_ANALYTICS_ENABLED=False HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,temperature.gpu,power.draw --format=csv ||
  echo "no nvidia-smi here"
"$PY" -c 'import torch, transformers, onnxruntime as ort
print(f"torch {torch.__version__} CUDA {torch.version.cuda} GPU {torch.cuda.is_available()}, transformers "
      f"{transformers.__version__}, onnxruntime {ort.__version__} {ort.get_available_providers()}")'

report() {  # report PRESET BUDGET
  if [ "$2" -lt 60 ]; then echo "skipped: $2 s left for the $1 report"; return 0; fi
  timeout --signal=INT --kill-after=20 $(($2 + 60)) "$PY" -m variants gpu-report --presets "$1" --device "$DEVICE" \
    "${QUICK_ARGS[@]}" --budget-s "$2" --out "$OUT" --cache-dir "$CACHE" || echo "WARNING: the $1 report exited with $?"
}
app() {  # app PRESET QUESTIONS LIMIT
  if [ "$3" -lt 45 ]; then echo "skipped: $3 s left for the $1 app"; return 0; fi
  timeout --signal=INT --kill-after=20 "$3" "$PY" -m variants gpu-app --preset "$1" --device "$DEVICE" \
    --questions "$2" --startup-timeout-s "$(($3 - 20))" --out "$OUT" --cache-dir "$CACHE" ||
    echo "WARNING: the $1 app check exited with $?"
}

step "1. BERT-large replica report"
report bert-large-replica "$(budget "${REPLICA_S:-320}" 170)"
step "2. the app on $DEVICE, embedded preset"
app embedded 8 "$(budget 90 80)"
step "3. embedded report"
report embedded "$(budget "${EMBEDDED_S:-80}" 0)"
step "4. the app on $DEVICE, replica"
if [ -z "${QUICK:-}" ]; then  # a rehearsal skips it: the app has no scaled replica
  app bert-large-replica 4 "$(budget 120 0)"
fi
step "done"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,memory.used --format=csv,noheader || true
ls -l "$OUT"
sleep 1  # let tee write the log's end
