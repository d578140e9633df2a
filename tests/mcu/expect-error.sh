#!/bin/sh
# expect-error.sh [--status N] REGEX COMMAND... — passes (exit 0) when COMMAND exits with status N (default 1:
# an error it reports, not a crash: a fault on the board exits 134, a hang 124) and its output matches the
# extended REGEX.
set -u
want=1
if [ "${1:-}" = "--status" ]; then want=$2; shift 2; fi
re=$1
shift
out=$("$@" 2>&1); st=$?
printf '%s\n' "$out"
[ $st -eq "$want" ] || { echo "FAIL: exit status $st, expected $want"; exit 1; }
printf '%s\n' "$out" | grep -Eq -- "$re" || { echo "FAIL: no line matches: $re"; exit 1; }
echo "OK: refused with status $want and the expected message"
