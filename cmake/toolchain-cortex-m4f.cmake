# Bare-metal build for a Cortex-M4F: the Arm MPS2 board with the AN386 image, as qemu-system-arm emulates it
# (Debian: gcc-arm-none-eabi, libnewlib-arm-none-eabi, qemu-system-arm; deps/install.sh mcu). It sets the
# microcontroller configuration (BITNET_BARE_METAL, docs/MCU.md) and runs the firmware of `ctest` under
# cmake/qemu-mps2-an386.sh:
#   cmake -S . -B build-mcu -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-cortex-m4f.cmake    (or: cmake --preset mcu)
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)

set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_CXX_COMPILER arm-none-eabi-g++)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY) # no board to link a test program against yet

# Cortex-M4 with its single-precision FPU (FPv4-SP-D16), hard-float calling convention, IEEE binary16 for
# __fp16 (the FPU's VCVTB half-precision conversions: kernels/dense/dense.h); one section per function and
# object so that the linker drops what a firmware does not use.
set(BITNET_MCU_CPU_FLAGS "-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 -mfp16-format=ieee")
set(CMAKE_C_FLAGS_INIT "${BITNET_MCU_CPU_FLAGS} -ffunction-sections -fdata-sections")
set(CMAKE_CXX_FLAGS_INIT "${BITNET_MCU_CPU_FLAGS} -ffunction-sections -fdata-sections")
set(CMAKE_EXE_LINKER_FLAGS_INIT "${BITNET_MCU_CPU_FLAGS}")
set(CMAKE_EXECUTABLE_SUFFIX_C .elf)
set(CMAKE_EXECUTABLE_SUFFIX_CXX .elf)

set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

set(BITNET_BARE_METAL ON CACHE BOOL "Build the bare-metal (microcontroller) configuration" FORCE)
set(BITNET_BOARD mps2-an386 CACHE STRING "Board of the bare-metal build" FORCE)
set(CMAKE_CROSSCOMPILING_EMULATOR "${CMAKE_CURRENT_LIST_DIR}/qemu-mps2-an386.sh")
