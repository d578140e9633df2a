# BOOTSTRAP PLACEHOLDER until `python3 -m codegen generate` exists.
set(BITNET_GENERATED_SOURCES "${CMAKE_CURRENT_LIST_DIR}/bitnet-lut-registry.c")
