#!/usr/bin/env bash
# utils/bench-all.sh — reproduce the numbers of docs/PERFORMANCE.md in one run.
#
#   utils/bench-all.sh [OUT_DIR]        (default OUT_DIR: bench-results/, untracked)
#
# Steps (each prints what it runs; every tool's raw output is kept in OUT_DIR):
#   1. the dummy models 125M, 1B and 3.8B in I2_S (utils/generate-dummy-bitnet-model.py, seed 1) in
#      $BENCH_MODELS (default models/bench/), made once and reused
#   2. bitnet-kernel-bench: the 2B-4T and dummy-3.8B shapes, TL2 (and the I2_S path it always times),
#      1 and 2 threads, cache-busting, with the machine's read bandwidth measured in the same run
#   3. llama-bench: pp512 and tg128 (3.8B: pp128, tg32) at 1 and 2 threads, kernels tl2 and i2_s,
#      with the stored (F16) head and with --head-type q8_0 when the build has it
# Environment: BUILD_DIR (default build/), BENCH_MODELS, REPS (llama-bench repetitions, default 5).
# Needs a Release build (python3 setup_env.py --build-only). Exit status 0 only when every tool did.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-results}
BUILD=${BUILD_DIR:-build}
MODELS=${BENCH_MODELS:-models/bench}
REPS=${REPS:-5}
mkdir -p "$OUT" "$MODELS"
for t in llama-bench bitnet-kernel-bench bitnet-dummy; do
    [ -x "$BUILD/bin/$t" ] || { echo "utils/bench-all.sh: $BUILD/bin/$t not found: build first (python3 setup_env.py --build-only)" >&2; exit 1; }
done

run() { echo "+ $*" | tee -a "$OUT/commands.txt"; "$@"; }

{ uname -a; lscpu; uptime; } > "$OUT/machine.txt"

for size in 125M 1B 3.8B; do
    f="$MODELS/dummy-bitnet-${size,,}.i2_s.gguf"
    [ -s "$f" ] || run python3 utils/generate-dummy-bitnet-model.py --model-size "$size" --outtype i2_s --seed 1 --outfile "$f"
done

uptime | tee -a "$OUT/commands.txt"
run "$BUILD/bin/bitnet-kernel-bench" --config BitNet-b1.58-2B-4T --table default --target tl2 --threads 1,2 \
    --json "$OUT/kernel-2B-4T.json" | tee "$OUT/kernel-2B-4T.txt"
run "$BUILD/bin/bitnet-kernel-bench" --config dummy-3.8B --table default --target tl2 --threads 1,2 \
    --json "$OUT/kernel-3.8B.json" | tee "$OUT/kernel-3.8B.txt"

HEADS=("")
if "$BUILD/bin/llama-bench" --help | grep -q -- --head-type; then HEADS=("" "--head-type q8_0"); fi
for h in "${HEADS[@]}"; do
    tag=${h:+-q8head}
    uptime | tee -a "$OUT/commands.txt"
    # shellcheck disable=SC2086
    run "$BUILD/bin/llama-bench" -m "$MODELS/dummy-bitnet-125m.i2_s.gguf,$MODELS/dummy-bitnet-1b.i2_s.gguf" \
        -p 512 -n 128 -t 1,2 --kernel tl2,i2_s -r "$REPS" $h | tee "$OUT/e2e-small$tag.md"
    # shellcheck disable=SC2086
    run "$BUILD/bin/llama-bench" -m "$MODELS/dummy-bitnet-3.8b.i2_s.gguf" \
        -p 128 -n 32 -t 1,2 --kernel tl2,i2_s -r 3 $h | tee "$OUT/e2e-3.8B$tag.md"
done
uptime | tee -a "$OUT/commands.txt"
echo "utils/bench-all.sh: results in $OUT/"
