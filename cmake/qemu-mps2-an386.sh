#!/bin/sh
# qemu-mps2-an386.sh FIRMWARE.elf [ARGS...] — run a firmware of the bare-metal build (cmake/toolchain-cortex-m4f.cmake)
# on an emulated Arm MPS2 AN386 board (Cortex-M4F) and exit with its status. CMake's CROSSCOMPILING_EMULATOR:
# ctest runs every firmware through it.
#  - ARGS reach main() through the semihosting command line (qemu joins them with spaces, so an argument
#    may not contain one); files are opened on this machine through semihosting (paths as given).
#  - -icount shift=0: the guest clock advances 1 ns per instruction, so the firmware's SysTick counts
#    instructions (src/mcu/board/mps2_an386.c) and timings are the same on every run.
#  - BITNET_QEMU_TIMEOUT (seconds, default 900) ends a run that hangs, with status 124.
# Exit status: the firmware's (semihosting SYS_EXIT_EXTENDED), 124 on timeout, 2 on bad arguments.
set -eu
[ $# -ge 1 ] || { echo "usage: qemu-mps2-an386.sh FIRMWARE.elf [ARGS...]" >&2; exit 2; }
elf=$1
shift
command -v qemu-system-arm >/dev/null 2>&1 || {
    echo "qemu-mps2-an386.sh: qemu-system-arm not found (Debian package qemu-system-arm: deps/install.sh mcu)" >&2
    exit 2
}
# qemu's option syntax: a ',' inside a value is written ',,'
cfg="enable=on,target=native,arg=$(basename "$elf")"
for a in "$@"; do
    case "$a" in *" "*) echo "qemu-mps2-an386.sh: argument '$a' contains a space (semihosting splits on spaces)" >&2; exit 2 ;; esac
    cfg="$cfg,arg=$(printf '%s' "$a" | sed 's/,/,,/g')"
done
exec timeout "${BITNET_QEMU_TIMEOUT:-900}" qemu-system-arm -M mps2-an386 -nographic -monitor none -serial none \
    -icount shift=0 -semihosting-config "$cfg" -kernel "$elf"
