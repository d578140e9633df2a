/* bench_util.c — monotonic clock, CPU model, last-level cache size, load average and mean/sd of the
 * benchmarks (bench_util.h). */
#include "tools/common/bench_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t bitnet_tool_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double bitnet_tool_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void bitnet_tool_cpu_model(char *out, size_t n, bool arm_part) {
    snprintf(out, n, "%s", arm_part ? "unknown" : "");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512], impl[64] = "", part[64] = "";
    bool found = false;
    while (fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (!c) continue;
        char *val = c + 1;
        while (*val == ' ' || *val == '\t') ++val;
        val[strcspn(val, "\n")] = '\0';
        if (!strncmp(line, "model name", 10)) {
            snprintf(out, n, "%s", val);
            found = true;
            break;
        }
        if (!strncmp(line, "CPU implementer", 15) && !impl[0]) snprintf(impl, sizeof impl, "%s", val);
        if (!strncmp(line, "CPU part", 8) && !part[0]) snprintf(part, sizeof part, "%s", val);
    }
    fclose(f);
    if (!found && arm_part && impl[0]) snprintf(out, n, "ARM implementer %s part %s", impl, part);
}

/* The first line of a sysfs file into buf; false when it cannot be read. */
static bool read_line(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    const bool ok = fgets(buf, (int)cap, f) != NULL;
    fclose(f);
    return ok;
}

int64_t bitnet_tool_llc_bytes(int *level_out) {
    int64_t best = 0;
    for (int idx = 0; idx < 16; ++idx) {
        char path[128], buf[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", idx);
        FILE *f = fopen(path, "r");
        if (!f) break;
        bool ok = fgets(buf, sizeof buf, f) && strncmp(buf, "Instruction", 11) != 0;
        fclose(f);
        if (!ok) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", idx);
        f = fopen(path, "r");
        if (!f) continue;
        int64_t size = 0;
        if (fgets(buf, sizeof buf, f)) {
            char *end;
            long long v = strtoll(buf, &end, 10);
            if (v > 0) size = v * (*end == 'M' ? 1048576 : *end == 'K' ? 1024 : 1);
        }
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", idx);
        const int level = read_line(path, buf, sizeof buf) ? atoi(buf) : 0;
        if (size > best) {
            best = size;
            if (level_out) *level_out = level;
        }
    }
    return best;
}

void bitnet_tool_loadavg(double out[3]) {
    out[0] = out[1] = out[2] = -1.0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return;
    if (fscanf(f, "%lf %lf %lf", &out[0], &out[1], &out[2]) != 3) out[0] = out[1] = out[2] = -1.0;
    fclose(f);
}

void bitnet_tool_mean_sd(const double *x, long n, double *mean, double *sd) {
    double s = 0.0;
    for (long i = 0; i < n; i++) s += x[i];
    const double m = s / (double)n;
    double q = 0.0;
    for (long i = 0; i < n; i++) q += (x[i] - m) * (x[i] - m);
    *mean = m;
    *sd = n > 1 ? sqrt(q / (double)(n - 1)) : 0.0;
}
