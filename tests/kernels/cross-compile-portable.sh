#!/usr/bin/env bash
# tests/kernels/cross-compile-portable.sh — compile the portable C kernels for a microcontroller with its
# cross compiler, as they will be built there (docs/ARCHITECTURE.md "A new ISA"; codegen/targets.py ISAS
# "portable"):
#   - every generated portable kernel file (generated/bitnet-lut-kernels-*-portable.c: TL1, TL2),
#   - src/kernels/i2s/i2s_portable.c (the I2_S product),
#   - the sources of what they call: src/base/quants.c (bitnet_quantize_act, the constructors'
#     quantizer) and src/kernels/lut/lut_ref.c (the scalar LUT kernels the generic ones defer to for a bm
#     no TL1 layout has),
# each with CC -std=c11 -Wall -Wextra -Werror -O2 -c, the include directories src/ and the generated
# directory, and the extra flags given. The headers they include are compiled with them. Nothing is
# linked; the objects go to a temporary directory.
#
# Usage: tests/kernels/cross-compile-portable.sh CC [extra flags...]
#   e.g. tests/kernels/cross-compile-portable.sh arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb \
#            -mfloat-abi=hard -mfpu=fpv4-sp-d16
#        tests/kernels/cross-compile-portable.sh xtensa-lx106-elf-gcc
# BITNET_GENERATED_DIR: the generated files to compile (default: the repository's generated/).
# When CC does not find <string.h> on its own but knows picolibc.specs (Debian's picolibc-* packages),
# --specs=picolibc.specs is added.
# Exit status: 0 every file compiled; 77 CC is not installed (ctest SKIP_RETURN_CODE), or 1 then when
# BITNET_REQUIRE_MCU_TOOLS=1 (.ci/run sets it); 1 a file failed (named on stderr with the compiler's
# messages) or bad usage.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
if [ $# -lt 1 ] || [ -z "$1" ]; then
    echo "usage: $0 CC [extra flags...]" >&2
    exit 1
fi
CC=$1
shift
if ! command -v "$CC" >/dev/null 2>&1; then
    if [ "${BITNET_REQUIRE_MCU_TOOLS:-0}" = 1 ]; then
        echo "cross-compile-portable: $CC is not installed (deps/debian-packages, group [mcu]) and BITNET_REQUIRE_MCU_TOOLS=1" >&2
        exit 1
    fi
    echo "cross-compile-portable: $CC is not installed (deps/debian-packages, group [mcu]); skipped" >&2
    exit 77
fi
GEN=${BITNET_GENERATED_DIR:-$ROOT/generated}

TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT

FLAGS=(-std=c11 -Wall -Wextra -Werror -O2 "$@")
# the C library's headers: found by the compiler itself, else through picolibc's specs file
printf '#include <string.h>\n#include <math.h>\n#include <stdint.h>\n' > "$TMP/probe.c"
if ! "$CC" "${FLAGS[@]}" -c "$TMP/probe.c" -o "$TMP/probe.o" >/dev/null 2>&1; then
    specs=$("$CC" -print-file-name=picolibc.specs 2>/dev/null)
    if [ -n "$specs" ] && [ "$specs" != picolibc.specs ] && [ -f "$specs" ]; then
        FLAGS+=(--specs=picolibc.specs)
    fi
fi

FILES=()
for f in "$GEN"/bitnet-lut-kernels-*-portable.c; do
    [ -f "$f" ] && FILES+=("$f")
done
if [ ${#FILES[@]} -eq 0 ]; then
    echo "cross-compile-portable: no generated portable kernel file in $GEN (python3 -m codegen generate)" >&2
    exit 1
fi
FILES+=("$ROOT/src/kernels/i2s/i2s_portable.c" "$ROOT/src/base/quants.c" "$ROOT/src/kernels/lut/lut_ref.c")

status=0
for f in "${FILES[@]}"; do
    obj="$TMP/$(basename "$f" .c).o"
    if "$CC" "${FLAGS[@]}" -I"$ROOT/src" -I"$GEN" -c "$f" -o "$obj" 2>"$TMP/err"; then
        echo "ok      $f"
    else
        echo "FAILED  $f ($CC ${FLAGS[*]})" >&2
        cat "$TMP/err" >&2
        status=1
    fi
done
[ "$status" = 0 ] && echo "cross-compile-portable: ${#FILES[@]} files compiled with $CC ${FLAGS[*]}"
exit "$status"
