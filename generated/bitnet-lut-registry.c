/* BOOTSTRAP PLACEHOLDER until `python3 -m codegen generate` exists: empty registry. */
#include "lut.h"
const bitnet_lut_kernel bitnet_lut_kernels[1] = {{0}};
const size_t bitnet_lut_n_kernels = 0;
const bitnet_lut_isa_impl bitnet_lut_isa_impls[1] = {{0}};
const size_t bitnet_lut_n_isa_impls = 0;
const bitnet_lut_table bitnet_lut_tables[1] = {{0}};
const size_t bitnet_lut_n_tables = 0;
