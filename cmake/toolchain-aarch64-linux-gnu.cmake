# Cross build for AArch64 (TL1 / NEON) with Debian's gcc-aarch64-linux-gnu; test binaries run under
# qemu-user through CMAKE_CROSSCOMPILING_EMULATOR, so `ctest` works unchanged.
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# Executables are linked statically. A dynamic binary run with `qemu-aarch64 -L /usr/aarch64-linux-gnu`
# takes the loader from the cross toolchain's libc but, once Debian's multiarch libc6:arm64 is installed
# (the :arm64 -dev packages pull it in), libc.so.6 from /lib/aarch64-linux-gnu: two glibc builds mixed in
# one process, and the first pthread_create spins forever. A static binary carries its own libc.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")

set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
