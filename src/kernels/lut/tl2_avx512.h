/* tl2_avx512.h — the one run-time switch of the AVX-512 TL2 kernels (generated from
 * templates/tl2_avx512.c.j2): whether they widen the qlut tables with VBMI's vpermb or with the
 * AVX-512BW sequence. Both give the same bytes; the switch exists so that tests run both paths on a
 * CPU that has VBMI. Implemented in generated/bitnet-lut-kernels-tl2-avx512.c (x86-64 builds only). */
#ifndef BITNET_TL2_AVX512_H
#define BITNET_TL2_AVX512_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* allow_vbmi = true (the default): the AVX-512 TL2 kernels use the VBMI path when
 * __builtin_cpu_supports("avx512vbmi"); false: always the AVX-512BW path. Takes effect on the next kernel
 * call (an atomic flag; set it while no kernel runs). Returns whether the VBMI path is now in use. */
bool bitnet_tl2_avx512_allow_vbmi(bool allow_vbmi);

#ifdef __cplusplus
}
#endif

#endif
