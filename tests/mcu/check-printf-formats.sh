#!/bin/sh
# check-printf-formats.sh FILE... — the C sources of the bare-metal build must not use printf conversions
# that newlib's printf (Debian's arm-none-eabi build) lacks: the C99 length modifiers z, j and t (and the
# PRI*64 macros, which its <inttypes.h> does not define). newlib prints "%zu" literally and does not
# consume the argument, so every later argument of the message is read wrongly. Use %llu with a cast to
# unsigned long long, %d with (int), %lld with (long long). Exit status 1 naming each offending line.
set -u
bad=$(grep -nE '%[-+ #0-9.*]*[zjt][diouxXn]|PRI[diouxX](8|16|32|64)' "$@" || true)
if [ -n "$bad" ]; then
    printf '%s\n' "$bad"
    echo "FAIL: printf conversions newlib does not support (see the lines above)"
    exit 1
fi
echo "OK: $# files use only conversions newlib supports"
