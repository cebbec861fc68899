#!/usr/bin/env bash
# All the set-up on a fresh Debian/Ubuntu machine with Python 3.11, then the app or the test suite.
# Idempotent: each step is skipped when already done (installs: a stamp of pyproject.toml + extras).
#
#   bash scripts/setup.sh app  [app.py options]   install what is missing, start the app (embedded preset)
#   bash scripts/setup.sh test [pytest options]   install what is missing, ruff check, ruff format --check,
#                                                 lint-imports (the layering contracts in pyproject.toml), pytest
#   bash scripts/setup.sh peers                   the peers' own environment (transformers 4, optimum: what the
#                                                 bench measures against, requirements-peers.txt), then its versions
#
# Environment: EXTRAS="gpu,train" adds pyproject.toml extras (gpu: onnxruntime-gpu instead of
# onnxruntime; train: the training-only packages); TORCH_INDEX_URL (e.g.
# https://download.pytorch.org/whl/cpu) where torch should come from, when that index is reachable;
# VENV (default .venv); VARIANTS_PEERS_VENV (default .venv-peers); PYTHON (default python3.11, else python3).
set -euo pipefail
cd "$(dirname "$0")/.."

target=${1:-}
case "$target" in
  app | test | peers) shift ;;
  *) echo "usage: bash scripts/setup.sh app|test|peers [options for app.py or pytest]" >&2; exit 2 ;;
esac
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
extras=${EXTRAS:-}
if [[ $target == test ]]; then extras="dev${extras:+,$extras}"; fi

# System packages (Debian): the venv module where Python lacks it, Chromium for the browser tests.
# Skipped, with a note, when not root or without apt-get; the browser tests then skip themselves.
missing=()
"$PYTHON" -c "import ensurepip, venv" 2>/dev/null || missing+=(python3-venv)
if [[ $target == test ]]; then
  command -v chromium >/dev/null || missing+=(chromium)
  command -v chromedriver >/dev/null || missing+=(chromium-driver)
fi
if ((${#missing[@]})); then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "setup: apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; } ||
      echo "setup: apt-get could not install ${missing[*]}; going on without" >&2
  else
    echo "setup: not root or no apt-get; install ${missing[*]} yourself (browser tests skip without chromium)" >&2
  fi
fi

# The peers' environment: its own venv and pins, reinstalled only when requirements-peers.txt changes.
if [[ $target == peers ]]; then
  PEERS_VENV=${VARIANTS_PEERS_VENV:-.venv-peers}
  [[ -x $PEERS_VENV/bin/python ]] || "$PYTHON" -m venv "$PEERS_VENV"
  declared=$(sha256sum requirements-peers.txt | cut -c1-16)
  if [[ ! -f $PEERS_VENV/.setup-peers-$declared ]]; then
    echo "setup: installing the peers' environment into $PEERS_VENV"
    "$PEERS_VENV/bin/python" -m pip install -q --upgrade pip
    # torch first, alone, as for the main venv: a CPU wheel where one is found, before anything pulls CUDA torch.
    "$PEERS_VENV/bin/python" -m pip install -q "$(grep -o '^torch==[0-9.]*' requirements-peers.txt)" \
      ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
    "$PEERS_VENV/bin/python" -m pip install -q -r requirements-peers.txt
    find "$PEERS_VENV" -maxdepth 1 -name '.setup-peers-*' -delete  # an older requirements-peers.txt
    touch "$PEERS_VENV/.setup-peers-$declared"
  fi
  exec "$PEERS_VENV/bin/python" -I variants/benchmarking/peer_worker.py versions
fi

# The virtual environment and the Python packages, reinstalled only when pyproject.toml or the extras change.
[[ -x $VENV/bin/python ]] || "$PYTHON" -m venv "$VENV"
# shellcheck disable=SC1091
. "$VENV/bin/activate"
declared=$(sha256sum pyproject.toml | cut -c1-16)
stamp="$VENV/.setup-$declared-${extras//,/-}"
if [[ ! -f $stamp ]]; then
  echo "setup: installing into $VENV (extras: ${extras:-none})"
  python -m pip install -q --upgrade pip
  # torch first, alone: the pin, from a CPU wheel where one is found, before anything can pull CUDA torch.
  torch_pin=$(python -c 'import tomllib; d = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
print(next(r for r in d if r.startswith("torch=")))')
  python -m pip install -q "$torch_pin" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
  python -m pip install -q -e ".${extras:+[$extras]}"
  if [[ ,$extras, == *,gpu,* ]]; then
    # onnxruntime and onnxruntime-gpu share the import name: keep only the GPU build's files.
    python -m pip uninstall -q -y onnxruntime
    python -m pip install -q --force-reinstall --no-deps "$(grep -o 'onnxruntime-gpu==[0-9.]*' pyproject.toml)"
  fi
  find "$VENV" -maxdepth 1 -name '.setup-*' ! -name ".setup-$declared-*" -delete  # older pyproject.toml
  touch "$stamp"
fi

if [[ $target == app ]]; then
  exec python app.py --preset embedded "$@"
fi
ruff check .
ruff format --check .
lint-imports
exec python -m pytest "$@"
