#!/bin/sh
# expect-error.sh REGEX COMMAND... — passes (exit 0) when COMMAND exits with status 1 (an error it reports,
# not a crash: a fault on the board exits 134, a hang 124) and its output matches the extended REGEX.
set -u
re=$1
shift
out=$("$@" 2>&1); st=$?
printf '%s\n' "$out"
[ $st -eq 1 ] || { echo "FAIL: exit status $st, expected 1"; exit 1; }
printf '%s\n' "$out" | grep -Eq -- "$re" || { echo "FAIL: no line matches: $re"; exit 1; }
echo "OK: refused with status 1 and the expected message"
