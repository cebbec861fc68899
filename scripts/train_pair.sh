#!/usr/bin/env bash
# Train the next embedded pair end to end, each stage resumable (issue 44): the baseline on train.json +
# train-extra.json with whole-article windows, its card on dev.json, the gate it must pass to be shipped,
# its comparison with the shipped baseline on the 862 held-out questions, then the pruned partner
# distilled from it (fewer layers: --drop-layers) and its card. Ships nothing: `train ship` is a person's
# call after reading the cards (docs/training.md, "How a model is chosen").
#
#   DATA=path/to/squad bash scripts/train_pair.sh   # the folder of the SQuAD v2 files; nohup ... & in the background
#
# DATA must be spelled as when the stage started: a resumed run refuses a checkpoint whose settings differ,
# and the data files are among them.
#
# Run it again after an interruption: a finished stage is skipped (its folder has train_config.json; a card
# has its evaluation), an interrupted one resumes from its checkpoint (runs/checkpoints/<name>/).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] && export PATH="$PWD/.venv/bin:$PATH"  # the project's environment (scripts/setup.sh)

DATA=${DATA:?set DATA to the folder holding train.json, train-extra.json and dev.json}
BASE=${BASE:-runs/minilm-squad2-extra-long20}
THREADS=${THREADS:-2}
DROP_LAYERS=${DROP_LAYERS:-2}
# The partner's schedule, sized to fit a 3-hour session on 2 cores after the baseline: measured on the
# family-25 EPYC (BF16, 2 threads, quiet), a 4-layer student takes 1.65 s a step of 32 and the teacher's
# logits ~26 ms a feature; ~31k features without teacher-only pairs: 2 epochs ~55 min + ~13 min of logits
# (3 epochs with --teacher-inputs 1.0, the shipped recipe's, would be ~45k features and ~2.3 h).
PRUNE_EPOCHS=${PRUNE_EPOCHS:-2}
TEACHER_INPUTS=${TEACHER_INPUTS:-0}
# The cut after the layers go: shares of all heads / FFN neurons removed, and what every layer keeps at least
# (--head-share 0.5 --min-heads 6 on 5 layers leaves exactly 6 heads each: a structure chosen by measured time,
# experiments/cut_timing_probe.py).
HEAD_SHARE=${HEAD_SHARE:-0.3}
FFN_SHARE=${FFN_SHARE:-0.8}
MIN_HEADS=${MIN_HEADS:-4}
MIN_NEURONS=${MIN_NEURONS:-256}
PRUNED=${PRUNED:-runs/minilm-squad2-pruned-drop${DROP_LAYERS}-extra-long20}
GATE_HASANS=${GATE_HASANS:-63}   # issue 44: dev.json HasAns F1 at threshold 0 at least 63 ...
GATE_F1=${GATE_F1:-48.44}        # ... and F1 at 0 no lower than the shipped baseline's
HELD=Computational_complexity_theory,Steam_engine
SHARED="--impossible-repeat 2 --holdout-titles $HELD --synthetic-unanswerable 0.4 --long-contexts 0.2 --threads $THREADS"
TRAIN="$DATA/train.json,$DATA/train-extra.json"

resume_flag() {  # --resume when the stage has a checkpoint to continue
  if [ -f "runs/checkpoints/$(basename "$1")/checkpoint.pt" ]; then echo --resume; fi
}
evaluated() {  # the stage's card has been written (a dev.json evaluation under today's window rule)
  python - "$1" <<'EOF'
import json, sys
from variants.answering.qa import DecodeSettings
evaluation = json.load(open(f"{sys.argv[1]}/train_config.json")).get("evaluation", {})
sys.exit(0 if evaluation.get("data") == "dev.json" and evaluation.get("windows") == DecodeSettings().windows else 1)
EOF
}
at_zero() {  # "F1 HasAns-F1" at threshold 0 from a card's evaluation
  python -c "import json,sys; e=json.load(open(sys.argv[1]+'/train_config.json'))['evaluation']; \
print(f\"{e['f1_at_zero']:.2f} {e['has_ans_f1_at_zero']:.2f}\")" "$1"
}

echo "== $(date -u +%FT%TZ) baseline: $BASE"
if [ ! -f "$BASE/train_config.json" ]; then
  # shellcheck disable=SC2046,SC2086  # flags are words
  python -m variants train finetune --data "$TRAIN" --out "$BASE" --epochs 3 --bf16 $SHARED $(resume_flag "$BASE")
fi
evaluated "$BASE" || python -m variants train card --data "$DATA/dev.json" --out "$BASE"
scores=$(at_zero "$BASE")  # fails the script (set -e) if the card has no evaluation
read -r f1 hasans <<<"$scores"
echo "== baseline at threshold 0 on dev.json: F1 $f1, HasAns F1 $hasans (gate: $GATE_F1, $GATE_HASANS)"
if ! python -c "import sys; sys.exit(0 if float('$f1') >= $GATE_F1 and float('$hasans') >= $GATE_HASANS else 1)"; then
  echo "== the baseline misses the gate: the shipped pair stays; no partner is distilled from it" >&2
  exit 3
fi
mkdir -p experiments/records/training
compare=experiments/records/training/holdout-baseline-vs-$(basename "$BASE").json
[ -f "$compare" ] || python -m experiments.compare_holdout --data "$DATA/train.json" \
  --a assets/models/minilm-squad2 --b "$BASE" --threads "$THREADS" --out "$compare"

echo "== $(date -u +%FT%TZ) pruned partner: $PRUNED (--drop-layers $DROP_LAYERS)"
if [ ! -f "$PRUNED/train_config.json" ]; then
  # shellcheck disable=SC2046,SC2086
  python -m variants train prune --data "$TRAIN" --out "$PRUNED" --teacher "$BASE" $SHARED \
    --epochs "$PRUNE_EPOCHS" --teacher-inputs "$TEACHER_INPUTS" --short-contexts 0.5 --head-share "$HEAD_SHARE" --ffn-share "$FFN_SHARE" --min-heads "$MIN_HEADS" --min-neurons "$MIN_NEURONS" \
    --freeze-embeddings --alpha 0.2 --drop-layers "$DROP_LAYERS" --bf16 $(resume_flag "$PRUNED")
fi
evaluated "$PRUNED" || python -m variants train card --data "$DATA/dev.json" --out "$PRUNED"
scores=$(at_zero "$PRUNED")
read -r pf1 phasans <<<"$scores"
echo "== pruned at threshold 0 on dev.json: F1 $pf1 (baseline $f1), HasAns F1 $phasans (baseline $hasans)"
echo "== issue 44 asks for at most 3.5 F1 and 5 HasAns F1 below the baseline; then: train ship, bench --long-inputs"
