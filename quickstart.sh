#!/usr/bin/env bash
# quickstart.sh — from a fresh Debian 12 machine to generated text, in bitnet.cpp's order of use:
#   1. install what is missing (deps/install.sh build: apt-get, as root or through sudo)
#   2. check that the committed kernels in generated/ match configs/ (python3 -m codegen check)
#   3. set up: build the runtime (python3 setup_env.py --build-only)
#   4. make the 125M dummy model in I2_S (utils/generate-dummy-bitnet-model.py)
#   5. generate text with it (run_inference.py, greedy)
# Nothing is downloaded except Debian packages. Exit status: 0 when every step worked.
#
# Environment: PROMPT (default "The quick brown fox"), N_PREDICT (32), THREADS (2).
set -euo pipefail

cd "$(dirname "$0")"
ROOT=$(pwd)
MODEL=models/dummy-bitnet-125m.i2_s.gguf
PROMPT=${PROMPT:-"The quick brown fox"}
N_PREDICT=${N_PREDICT:-32}
THREADS=${THREADS:-2}

say() { printf '\n==> %s\n' "$*"; }
die() { printf 'quickstart.sh: %s\n' "$*" >&2; exit 1; }

# ---- 1. packages ------------------------------------------------------------------------------
say "packages: deps/install.sh build (the [build] group of deps/debian-packages)"
deps/install.sh build || die "could not install the build packages (deps/debian-packages, group [build])"

# ---- 2. generated kernels ---------------------------------------------------------------------
say "checking generated/ against configs/ (python3 -m codegen check)"
if python3 -m codegen check; then
    echo "generated/ is current"
else
    echo "generated/ is stale or configs/ changed: setup_env.py renders the kernels into build/generated instead"
fi

# ---- 3. setup (build) -------------------------------------------------------------------------
say "python3 setup_env.py --build-only"
python3 setup_env.py --build-only || die "setup failed (logs in $ROOT/logs/)"

# ---- 4. dummy model ---------------------------------------------------------------------------
say "python3 utils/generate-dummy-bitnet-model.py --model-size 125M --outtype i2_s --outfile $MODEL"
python3 utils/generate-dummy-bitnet-model.py --model-size 125M --outtype i2_s --outfile "$MODEL" \
    || die "could not write $MODEL"

# ---- 5. inference -----------------------------------------------------------------------------
say "python3 run_inference.py -m $MODEL -p \"$PROMPT\" -n $N_PREDICT -t $THREADS -temp 0"
python3 run_inference.py -m "$MODEL" -p "$PROMPT" -n "$N_PREDICT" -t "$THREADS" -temp 0 \
    || die "inference failed"

cat <<EOF

Done. The model has random weights, so the text is noise; the point is the whole path works.
Next: python3 run_inference.py -m $MODEL -p "..." (see README.md), or tests/run-all.sh for the test suite.
EOF
