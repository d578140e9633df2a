#!/usr/bin/env bash
# utils/soak.sh — the long run of the soak test (tests/test_soak.cc, issue 12): one process chats with the
# tiny model until its context is full, round after round (the same context reused, a new context, a new
# model per round), and after every fill checks resident memory (growth since fill 1 within the bound the
# test states), live heap bytes, open file descriptors and threads, and bitnet_decode's context-full
# message. ctest runs 30 rounds; this runs as many as fit in --seconds (or exactly --rounds).
#
# Usage: utils/soak.sh [--build DIR] [--seconds S | --rounds N] [--verbose] [--all]
#   --build DIR   a configured build directory with -DBITNET_BUILD_TESTS=ON (default build-asan/, the
#                 AddressSanitizer build of tests/run-all.sh; build/ for the plain Release build)
#   --seconds S   run rounds until S seconds have passed (default 300; at least 30 rounds)
#   --rounds N    run exactly N rounds instead (at least 4: every way of starting a round once after the
#                 first); --seconds and --rounds exclude each other
#   --verbose     one line per round: turns, tokens, where the context filled, RSS (and growth),
#                 live heap, fds, threads, elapsed seconds
#   --all         also the llama-cli tests of test_soak (fixed size: a few seconds)
# Builds the targets test_soak and llama-cli (JOBS=N parallel jobs, default 2) and runs
# DIR/bin/test_soak. The last line "soak: N rounds ..." has the numbers: rounds, turns, tokens, RSS after
# fill 1 and the most after it, the bound, live-heap difference, fd and thread counts, time.
# Exit status: that of the test (0 passed, 1 failed); 2 bad arguments or a missing build directory.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 2
BUILD=build-asan
SECONDS_ARG=300
ROUNDS=""
GOT_SECONDS=0
VERBOSE=0
FILTER=Soak.ChatFillsTheContextManyTimes
while [ $# -gt 0 ]; do
    case "$1" in
        --build) BUILD=${2:-}; shift ;;
        --seconds) SECONDS_ARG=${2:-}; GOT_SECONDS=1; shift ;;
        --rounds) ROUNDS=${2:-}; shift ;;
        --verbose) VERBOSE=1 ;;
        --all) FILTER='Soak.*' ;;
        -h|--help) sed -n '2,19p' "$0" | sed 's/^# \?//'; exit 0 ;;
        *) echo "utils/soak.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
case "$SECONDS_ARG" in ''|*[!0-9]*) echo "utils/soak.sh: --seconds needs a whole number" >&2; exit 2 ;; esac
case "$ROUNDS" in *[!0-9]*) echo "utils/soak.sh: --rounds needs a whole number" >&2; exit 2 ;; esac
if [ -n "$ROUNDS" ] && [ "$GOT_SECONDS" = 1 ]; then
    echo "utils/soak.sh: --seconds and --rounds exclude each other" >&2
    exit 2
fi
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    echo "utils/soak.sh: $BUILD is not a configured build directory (see tests/run-all.sh for the configure lines)" >&2
    exit 2
fi
cmake --build "$BUILD" --parallel "${JOBS:-2}" --target test_soak llama-cli || exit 1

if [ -n "$ROUNDS" ]; then
    export BITNET_SOAK_ROUNDS=$ROUNDS BITNET_SOAK_SECONDS=0
else
    export BITNET_SOAK_ROUNDS=30 BITNET_SOAK_SECONDS=$SECONDS_ARG
fi
export BITNET_SOAK_VERBOSE=$VERBOSE
exec "$BUILD/bin/test_soak" --gtest_filter="$FILTER"
