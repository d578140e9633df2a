/* isa.c — the table of instruction sets (name, BITNET_ISA rank, CPU feature check) behind
 * bitnet_cpu_supports. Adding an ISA: one row here (and its kernels in codegen/targets.py ISAS). */
#include "kernels/isa.h"

#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

/* plain C: every CPU */
static bool check_scalar(void) { return true; }

#if defined(__x86_64__) || defined(__i386__)
/* the AVX2 kernel files are compiled with -mavx2 -mfma -mf16c: all three must be present. F16C is CPUID
 * leaf 1, ECX bit 29 (Intel SDM vol. 2, CPUID), asked directly: clang before 18 does not know the name
 * "f16c" in __builtin_cpu_supports. */
static bool check_avx2(void) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return false;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    return (c >> 29) & 1u;
}

/* AVX-VNNI (VEX-encoded 256-bit vpdpbusd): CPUID leaf 7 sub-leaf 1, EAX bit 4 (Intel SDM vol. 2,
 * CPUID; GCC 12's __builtin_cpu_supports does not know the name), on top of the AVX2 set */
static bool check_avxvnni(void) {
    if (!check_avx2()) return false;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false; /* no leaf 7 */
    return (a >> 4) & 1u;
}

/* the AVX-512 kernels use 512-bit integer ops (F, BW), 256-bit masked forms (VL) and vpdpbusd (VNNI) */
static bool check_avx512(void) {
    return check_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}
#else
static bool check_avx2(void) { return false; }
static bool check_avxvnni(void) { return false; }
static bool check_avx512(void) { return false; }
#endif

#if defined(__aarch64__)
static bool check_neon(void) { return true; } /* Advanced SIMD is mandatory on AArch64 */
#else
static bool check_neon(void) { return false; }
#endif

/* rank: the BITNET_ISA order (scalar = portable < avx2 < avxvnni < avx512; neon is AArch64's only SIMD level
 * and ranks with avx2; BITNET_ISA=avxvnni imitates a CPU with AVX-VNNI but no AVX-512, e.g. Intel's
 * Alder Lake). "portable" is the plain C11 code of the generated kernels and of i2s_portable.c: it
 * compiles and runs everywhere, so BITNET_ISA=scalar (or portable) still allows it. check: whether this
 * CPU runs the ISA, BITNET_ISA aside. */
static const struct {
    const char *name;
    int rank;
    bool (*check)(void);
} isas[] = {
    {"scalar", 0, check_scalar},
    {"portable", 0, check_scalar},
    {"avx2", 1, check_avx2},
    {"neon", 1, check_neon},
    {"avxvnni", 2, check_avxvnni},
    {"avx512", 3, check_avx512},
};

/* Row of an ISA name, or -1 for a name this table does not know. */
static int isa_row(const char *isa) {
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        if (strcmp(isas[i].name, isa) == 0) return (int)i;
    }
    return -1;
}

bool bitnet_cpu_supports(const char *isa) {
    if (!isa) return false;
    const int row = isa_row(isa);
    if (row < 0) return false;
    const int rank = isas[row].rank;
    if (rank == 0) return true;
    /* BITNET_ISA caps the level (a known name; anything else is ignored) */
    const char *cap = getenv("BITNET_ISA");
    const int cap_row = cap ? isa_row(cap) : -1;
    if (cap_row >= 0 && rank > isas[cap_row].rank) return false;
    return isas[row].check();
}
