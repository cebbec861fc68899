#!/usr/bin/env bash
# The GPU measurement in ONE command of at most MEASURE_S seconds (default 420) on an offline GPU machine,
# after the wheel parts have been carried (scripts/gpu_ort_wheel.sh; docs/gpu.md gives the transfers). Records
# go to $OUT (seven files), most needed first:
#
#   1. the BERT-large replica's GPU report: the user's chain in ONNX Runtime (FP32, optimized, FP16,
#      FP16 + CUDA graphs, pruned and baseline), questions per second, served latency through the FP16
#      variant, then PyTorch (python -m variants gpu-report --presets bert-large-replica);
#   2. the embedded preset's GPU report (it builds the embedded graphs the next steps load);
#   3. the bench of the embedded preset on the GPU: the sample's 501 questions, F1 and latency per variant,
#      transformers' pipeline on the same GPU as the peer (python -m variants bench; a JSON and a CSV);
#   4. the app on the GPU with the replica's card variants, asked through gradio_client (gpu-app);
#   5. the app with the embedded preset, if time is left (the embedded report and bench ran it on the GPU).
#
# Each step gets its share (the *_S variables) or what is left of MEASURE_S less what the later steps
# need, so the command ends inside its limit; a step that fails is logged and the next one runs. The steps
# share one artifact cache: the report builds the graphs, the bench and the app load them. Wheels: installed
# from /tmp/gpu-bundle (the carried parts) into /tmp/gpu-site unless the last `stow` did it already;
# without them the reports still run and their ONNX Runtime rows say "no CUDA provider". The models:
# moved back into assets/models when the transfer carried them as .gpu-stash/models (a slim tree).
#
#   bash scripts/gpu_measure.sh                                  # on the GPU machine, in the checkout's copy
#   DEVICE=cpu QUICK=1 OUT=/tmp/m bash scripts/gpu_measure.sh    # a rehearsal anywhere (scaled replica)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
exec > >(tee "$OUT/measure.log") 2>&1
PY="${PYTHON:-python3}"
MEASURE_S="${MEASURE_S:-420}"
CACHE="${CACHE_DIR:-/tmp/variants-cache}"  # built ONNX graphs, shared by the steps
DEVICE="${DEVICE:-cuda:0}"
# Shares of MEASURE_S (seconds); the later steps' shares are held back while an earlier one runs.
# The replica's report builds the dense BERT-large's ONNX graphs (a minute or more) before it times them.
REPLICA_S="${REPLICA_S:-205}" EMBEDDED_S="${EMBEDDED_S:-55}" BENCH_S="${BENCH_S:-75}"
APP_REPLICA_S="${APP_REPLICA_S:-45}" APP_EMBEDDED_S="${APP_EMBEDDED_S:-40}"
REPORT_ARGS=(--runs 10 --throughput-runs 5) BENCH_ARGS=(--latency-passes 3 --skip-sweeps --profile-questions 0)
if [ -n "${QUICK:-}" ]; then
  REPORT_ARGS=(--quick) APP_EMBEDDED_S="${APP_EMBEDDED_S_QUICK:-90}"  # the app starts slowly on a small CPU
  BENCH_ARGS=(--limit 24 --latency-samples 8 --latency-passes 1 --warmup 1 --skip-sweeps --profile-questions 0)
fi
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
  if [ "$2" -lt 40 ]; then echo "skipped: $2 s left for the $1 report"; return 0; fi
  timeout --signal=INT --kill-after=15 $(($2 + 30)) "$PY" -m variants gpu-report --presets "$1" --device "$DEVICE" \
    "${REPORT_ARGS[@]}" --budget-s "$2" --out "$OUT" --cache-dir "$CACHE" || echo "WARNING: the $1 report exited with $?"
}
bench() {  # bench PRESET LIMIT
  if [ "$2" -lt 40 ]; then echo "skipped: $2 s left for the $1 bench"; return 0; fi
  timeout --signal=INT --kill-after=15 "$2" "$PY" -m variants bench --preset "$1" --device "$DEVICE" \
    "${BENCH_ARGS[@]}" --out "$OUT" --cache-dir "$CACHE" || echo "WARNING: the $1 bench exited with $?"
}
app() {  # app PRESET QUESTIONS LIMIT
  if [ "$3" -lt 30 ]; then echo "skipped: $3 s left for the $1 app"; return 0; fi
  timeout --signal=INT --kill-after=15 "$3" "$PY" -m variants gpu-app --preset "$1" --device "$DEVICE" \
    --questions "$2" --startup-timeout-s "$(($3 - 15))" --out "$OUT" --cache-dir "$CACHE" ||
    echo "WARNING: the $1 app check exited with $?"
}

step "1. BERT-large replica report"
report bert-large-replica "$(budget "$REPLICA_S" $((EMBEDDED_S + BENCH_S + APP_REPLICA_S)))"
step "2. embedded report"
report embedded "$(budget "$EMBEDDED_S" $((BENCH_S + APP_REPLICA_S)))"
step "3. embedded bench on $DEVICE"
bench embedded "$(budget "$BENCH_S" "$APP_REPLICA_S")"
step "4. the app on $DEVICE, replica"
if [ -z "${QUICK:-}" ]; then  # a rehearsal skips it: the app has no scaled replica
  app bert-large-replica 4 "$(budget "$APP_REPLICA_S" 0)"
fi
step "5. the app on $DEVICE, embedded preset"
app embedded 8 "$(budget "$APP_EMBEDDED_S" 0)"
step "done"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,memory.used --format=csv,noheader || true
ls -l "$OUT"
sleep 1  # let tee write the log's end
