#!/bin/sh
# compare.sh HOST_RUNNER EMULATOR FIRMWARE [--expect-ids "IDS"] -- RUNNER_ARGS...
# Runs bitnet-mcu-run on this machine (HOST_RUNNER: the host build's build/bin/bitnet-mcu-run) and on the
# board (EMULATOR FIRMWARE: cmake/qemu-mps2-an386.sh build-mcu/bin/bitnet-mcu-run.elf) with the same
# arguments plus --logit-hashes, prints both outputs, and compares every "prompt ids", "generated ids" and
# "logits hash" line: equal hashes of every position mean bit-identical logits. With --expect-ids the
# generated ids must also be IDS (space-separated).
# Exit status: 0 when both runs succeeded and agree (and the ids are the expected ones), 1 otherwise.
set -u
host=$1 emu=$2 fw=$3
shift 3
expect=""
if [ "${1:-}" = "--expect-ids" ]; then expect=$2; shift 2; fi
[ "${1:-}" = "--" ] && shift
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$host" "$@" --logit-hashes >"$out/host.txt" 2>&1; hs=$?
"$emu" "$fw" "$@" --logit-hashes >"$out/board.txt" 2>&1; bs=$?
echo "---- host ($host), exit $hs"; cat "$out/host.txt"
echo "---- board ($fw), exit $bs"; cat "$out/board.txt"
[ $hs -eq 0 ] && [ $bs -eq 0 ] || { echo "FAIL: a run failed (host $hs, board $bs)"; exit 1; }
grep -E '^(prompt ids|generated ids|logits hash)' "$out/host.txt" >"$out/h"
grep -E '^(prompt ids|generated ids|logits hash)' "$out/board.txt" >"$out/b"
[ -s "$out/h" ] || { echo "FAIL: no ids or hashes in the host output"; exit 1; }
if ! diff "$out/h" "$out/b"; then echo "FAIL: the board's ids or logits differ from the host's (lines above)"; exit 1; fi
if [ -n "$expect" ] && ! grep -qx "generated ids: $expect" "$out/h"; then
    echo "FAIL: generated ids are not the expected: $expect"; exit 1
fi
echo "MATCH: $(grep -c 'logits hash: pos' "$out/h") positions' logits bit-identical, ids equal${expect:+ and as expected}"
