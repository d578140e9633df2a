#!/usr/bin/env bash
# utils/mcu-cost.sh [OUT_DIR] — instructions per token on the emulated Cortex-M4F (docs/MCU.md, "Cost on
# the core"): runs the bare-metal firmware build-mcu/bin/bitnet-mcu-run.elf under cmake/qemu-mps2-an386.sh
# (qemu-system-arm -icount shift=0: the guest clock counts instructions) on
#   - bitnet.cpp's tiny model (tests/data/bitnetcpp-tiny: I2_S and F32),
#   - dummy models of the same layout in I2_S, TL1 and TL2 (seed 1234), and
#   - the largest dummy of the 125M width (n_embd 768, n_ff 3072, 12 heads) whose image and arena fit the
#     board's 16 MiB PSRAM: 4 layers and a 2048-token vocabulary, in I2_S, TL1 and TL2,
# each with a 16-token prompt in one batch and 16 greedy tokens, and prints a Markdown table: instructions
# per prompt token and per generated token, and the node's arena. Needs the host tools (build/bin: bitnet-dummy)
# and the firmware (tests/run-all.sh --only mcu, or cmake --preset mcu && cmake --build --preset mcu).
# Models go to OUT_DIR (default: a temporary directory, removed at the end). Exit status: 0, or 1 when a run fails.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
FW=$ROOT/build-mcu/bin/bitnet-mcu-run.elf
DUMMY=$ROOT/build/bin/bitnet-dummy
EMU=$ROOT/cmake/qemu-mps2-an386.sh
for f in "$FW" "$DUMMY"; do
    [ -x "$f" ] || { echo "utils/mcu-cost.sh: $f not found: build the host tools and the firmware first (tests/run-all.sh --only mcu)" >&2; exit 1; }
done
if [ $# -ge 1 ]; then OUT=$1; mkdir -p "$OUT"; else OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT; fi

PROMPT=1,450,439,293,110,289,307,122,113,285,114,123,432,398,115,118
TINY="--n-embd 256 --n-ff 768 --n-layer 2 --n-head 4 --vocab-size 512"
WIDE="--n-embd 768 --n-ff 3072 --n-layer 4 --n-head 12 --vocab-size 2048"

row() { # name file
    local out
    if ! out=$("$EMU" "$FW" -m "$2" --tokens "$PROMPT" -n 16 -b 16 2>&1); then
        printf '%s\n' "$out" >&2
        echo "utils/mcu-cost.sh: the run on $2 failed" >&2
        exit 1
    fi
    local path prompt gen arena
    path=$(printf '%s\n' "$out" | sed -n 's/^model: .*; \([A-Za-z0-9_]*\) path: \(.*\)$/\1: \2/p')
    prompt=$(printf '%s\n' "$out" | sed -n 's/^instructions: prompt [0-9]* (\([0-9]*\) per token.*/\1/p')
    gen=$(printf '%s\n' "$out" | sed -n 's/.*generation [0-9]* (\([0-9]*\) per token.*/\1/p')
    arena=$(printf '%s\n' "$out" | sed -n 's/^arena: .* = \([0-9]*\) bytes of .*/\1/p')
    printf '| %s | %s | %s | %s | %s | %s |\n' "$1" "$(stat -c %s "$2")" "$path" "$prompt" "$gen" "$arena"
}

echo "| model | image bytes | kernels | instructions per prompt token (batch 16) | instructions per generated token | arena bytes |"
echo "|---|---:|---|---:|---:|---:|"
row "bitnetcpp-tiny I2_S" "$ROOT/tests/data/bitnetcpp-tiny/ggml-model-i2_s.gguf"
row "bitnetcpp-tiny F32" "$ROOT/tests/data/bitnetcpp-tiny/ggml-model-f32.gguf"
for t in i2_s tl1 tl2; do
    # shellcheck disable=SC2086
    "$DUMMY" -q $TINY --seed 1234 --outtype $t -o "$OUT/tiny-$t.gguf"
    row "tiny layout dummy $t" "$OUT/tiny-$t.gguf"
done
for t in i2_s tl1 tl2; do
    # shellcheck disable=SC2086
    "$DUMMY" -q $WIDE --seed 1234 --outtype $t -o "$OUT/wide-$t.gguf"
    row "125M width, 4 layers, vocab 2048, $t" "$OUT/wide-$t.gguf"
done
