/* bench_util.h — what the two benchmarks (llama-bench, bitnet-kernel-bench) share: the monotonic
 * clock, facts about the machine (CPU model, last-level cache, load average) and mean / sample
 * standard deviation. */
#ifndef BITNET_TOOL_BENCH_UTIL_H
#define BITNET_TOOL_BENCH_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds / in seconds (tv_sec + 1e-9 * tv_nsec). */
uint64_t bitnet_tool_now_ns(void);
double bitnet_tool_now_s(void);

/* The CPU's "model name" from /proc/cpuinfo (x86). Without one: with arm_part, "ARM implementer <x> part
 * <y>" from the AArch64 lines when present, else "unknown"; without arm_part, the empty string. */
void bitnet_tool_cpu_model(char *out, size_t cap, bool arm_part);

/* Bytes of the largest data/unified cache of cpu0 (/sys/devices/system/cpu/cpu0/cache), 0 when unknown;
 * *level_out (may be NULL) gets its level. */
int64_t bitnet_tool_llc_bytes(int *level_out);

/* The 1-, 5- and 15-minute load averages of /proc/loadavg; all -1 when unavailable. */
void bitnet_tool_loadavg(double out[3]);

/* Mean and sample standard deviation (divisor n - 1; 0 for a single value) of x[0..n), n >= 1. */
void bitnet_tool_mean_sd(const double *x, long n, double *mean, double *sd);

#endif
