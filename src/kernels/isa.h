/* isa.h — the instruction sets kernels are written for: whether this CPU runs one (its CPU feature
 * check) and the BITNET_ISA cap. The names are the ISA suffixes of kernel names (codegen/targets.py
 * ISAS, the i2s versions). Implemented in src/kernels/isa.c (one table: name, rank, check). */
#ifndef BITNET_ISA_H
#define BITNET_ISA_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* true when this CPU runs code for `isa` ("scalar", "portable", "avx2", "avxvnni", "avx512", "neon"; false
 * for other names). "scalar" and "portable" (plain C) are true everywhere. "avx2" means AVX2+FMA+F16C (the
 * flags the AVX2 kernel files are compiled with); "avxvnni" those and AVX-VNNI (256-bit vpdpbusd);
 * "avx512" means the AVX2 set and AVX-512 F, BW, VL and VNNI. The environment variable
 * BITNET_ISA=scalar|portable|avx2|avxvnni|avx512 caps the level (in that order) for testing and
 * comparisons: with BITNET_ISA=avx2 the answer for "avxvnni" and "avx512" is false, with BITNET_ISA=scalar (or
 * portable, the same level) every SIMD ISA is refused (neon ranks with avx2) and the portable C kernels
 * run; other values are ignored. Read on
 * every call; the kernel choices that cache it (bitnet_i2s_gemm) read it on their first call. */
bool bitnet_cpu_supports(const char *isa);

#ifdef __cplusplus
}
#endif

#endif
