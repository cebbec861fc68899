#!/usr/bin/env bash
# Getting onnxruntime-gpu (and the other wheels of scripts/gpu_bundle.txt) onto an offline GPU machine
# that takes 64 MiB per transfer. docs/gpu.md ("Carrying the wheels to an offline GPU machine") gives the
# whole procedure and the transfers; in short:
#
#   here (PyPI reachable):
#     bash scripts/gpu_ort_wheel.sh pack      # download the wheels (hash-checked), split them into pieces
#     bash scripts/gpu_ort_wheel.sh check     # join the pieces again, check every wheel's sha256
#     bash scripts/gpu_ort_wheel.sh slim      # take assets/models out of the tree that travels
#   there, one transfer per piece, back to back, to the same running machine (parts gather in /tmp):
#     bash scripts/gpu_ort_wheel.sh stow      # move the carried piece to /tmp/gpu-bundle; the last one installs
#   here, after the transfers:
#     bash scripts/gpu_ort_wheel.sh restore   # put assets/models back (index and files)
#
# The pieces: one tar of the wheels (319 MB, onnxruntime-gpu's 255.6 MB of it), cut into parts of
# PIECE bytes (57 MiB, under 60 MB) in .gpu-pieces/ (git-ignored); parts.sha256 beside them holds the
# sha256 of each part and of the whole tar. The tree that travels without assets/models is about
# 3 MiB, so a part and the tree fit in one transfer. Nothing here changes a commit: `slim` takes the
# models out of the index and moves the folder to .gpu-stash/ (git-ignored); `restore` undoes both
# and fails loudly if anything differs from HEAD. Do not commit while slim.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
PIECES=.gpu-pieces
STASH=.gpu-stash
BUNDLE_DIR="${GPU_BUNDLE_DIR:-/tmp/gpu-bundle}"  # there: where the carried parts gather
SITE="${GPU_SITE:-/tmp/gpu-site}"                  # there: where the wheels are installed
PIECE="${PIECE:-57M}"
REQS=scripts/gpu_bundle.txt
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)

travelling_mib() {  # tracked and untracked-not-ignored files: what travels with the tree
  git ls-files -z --cached --others --exclude-standard | (xargs -0 stat -c %s 2>/dev/null || true) |
    awk '{s += $1} END {printf "%.1f MiB", s / 1048576}'
}

pack() {
  rm -rf "$PIECES"
  mkdir -p "$PIECES/wheels"
  "$PY" -m pip download --quiet --no-deps --require-hashes --only-binary=:all: --python-version 3.12 \
    --implementation cp "${PLATFORMS[@]}" -d "$PIECES/wheels" -r "$REQS"
  # A fixed order, owner and time: the same wheels always make the same tar (and parts.sha256).
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$PIECES/bundle.tar" -C "$PIECES" wheels
  split -b "$PIECE" -d -a 2 "$PIECES/bundle.tar" "$PIECES/part-"
  (cd "$PIECES" && sha256sum part-* bundle.tar) > "$PIECES/parts.sha256"
  rm "$PIECES/bundle.tar"
  ls -l "$PIECES"/part-* | awk '{printf "%s %d bytes\n", $NF, $5}'
  du -sb "$PIECES/wheels" | awk '{printf "wheels: %d bytes\n", $1}'
}

check() {  # here: the parts join to the tar whose sha256 parts.sha256 names, whose wheels match $REQS
  local tmp
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' RETURN
  (cd "$PIECES" && grep ' part-' parts.sha256 | sha256sum --check --quiet)
  cat "$PIECES"/part-* > "$tmp/bundle.tar"
  diff <(grep ' bundle.tar$' "$PIECES/parts.sha256" | cut -d' ' -f1) <(sha256sum "$tmp/bundle.tar" | cut -d' ' -f1)
  tar -xf "$tmp/bundle.tar" -C "$tmp"
  local bad=0
  while read -r spec hash; do
    local name="${spec%%==*}" version="${spec##*==}" file
    local found=("$tmp"/wheels/"${name//-/_}"-"$version"-*.whl)
    file="${found[0]}"
    if [ ! -f "$file" ] || [ "$(sha256sum "$file" | cut -d' ' -f1)" != "${hash#--hash=sha256:}" ]; then
      echo "MISMATCH: $spec" >&2
      bad=1
    fi
  done < <(grep -v '^#' "$REQS")
  [ "$bad" = 0 ] && echo "joined: $(stat -c %s "$tmp/bundle.tar") bytes; every wheel's sha256 matches $REQS"
  return "$bad"
}

slim() {
  if [ -d "$STASH/models" ]; then echo "already slim ($STASH/models exists)" >&2; return 1; fi
  if [ -n "$(git status --porcelain -- assets/models)" ]; then
    echo "assets/models has changes; commit or drop them first" >&2
    return 1
  fi
  echo "travelling before: $(travelling_mib)"
  git rm -r -q --cached assets/models
  mkdir -p "$STASH"
  mv assets/models "$STASH/models"
  echo "travelling now: $(travelling_mib) (assets/models is in $STASH/models; run '$0 restore' afterwards," \
    "and commit nothing until then)"
}

restore() {
  if [ -d "$STASH/models" ]; then
    if [ -e assets/models ]; then echo "both assets/models and $STASH/models exist; look first" >&2; return 1; fi
    mv "$STASH/models" assets/models
  fi
  git reset -q -- assets/models
  if [ -n "$(git status --porcelain -- assets/models)" ] || ! git diff --quiet HEAD -- assets/models; then
    git status --short -- assets/models >&2
    echo "assets/models differs from HEAD after restoring" >&2
    return 1
  fi
  rmdir "$STASH" 2>/dev/null || true
  echo "restored; travelling: $(travelling_mib)"
}

stow() {  # there: keep what this transfer carried in $BUNDLE_DIR; install once every part is there
  mkdir -p "$BUNDLE_DIR"
  [ -f "$PIECES/parts.sha256" ] && cp "$PIECES/parts.sha256" "$BUNDLE_DIR/"
  for part in "$PIECES"/part-*; do
    [ -e "$part" ] && mv "$part" "$BUNDLE_DIR/"
  done
  local want have
  want="$(grep -c ' part-' "$BUNDLE_DIR/parts.sha256" 2>/dev/null || echo '?')"
  have="$(find "$BUNDLE_DIR" -name 'part-*' | wc -l)"
  echo "$(date -u +%T) parts here: $have of $want ($(du -sh "$BUNDLE_DIR" | cut -f1)); $(df -h /tmp | tail -1)"
  if [ "$have" = "$want" ]; then install; fi
}

install() {  # there: join, check, install into $SITE (then: export PYTHONPATH=$SITE)
  if [ -f "$SITE/.installed" ]; then echo "already installed in $SITE"; return 0; fi
  local started=$SECONDS
  (cd "$BUNDLE_DIR" && grep ' part-' parts.sha256 | sha256sum --check --quiet)
  diff <(grep ' bundle.tar$' "$BUNDLE_DIR/parts.sha256" | cut -d' ' -f1) \
    <(cat "$BUNDLE_DIR"/part-* | sha256sum | cut -d' ' -f1)
  cat "$BUNDLE_DIR"/part-* | tar -xf - -C "$BUNDLE_DIR"
  rm -rf "$SITE"
  "$PY" -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir --require-hashes \
    --find-links "$BUNDLE_DIR/wheels" --target "$SITE" -r "$REQS"
  rm -rf "$BUNDLE_DIR/wheels"  # the parts stay: /tmp holds both (about 0.7 GB)
  touch "$SITE/.installed"
  echo "installed in $SITE in $((SECONDS - started)) s"
  PYTHONPATH="$SITE" "$PY" -c 'import onnxruntime as ort, transformers, gradio, optimum.exporters.onnx
print("onnxruntime", ort.__version__, ort.get_available_providers(), "| transformers", transformers.__version__,
      "| gradio", gradio.__version__)'
}

case "${1:-}" in
  pack | check | slim | restore | stow | install) "$1" ;;
  *) echo "usage: $0 pack|check|slim|restore (here) or stow|install (on the GPU machine)" >&2; exit 2 ;;
esac
