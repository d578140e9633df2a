/* report.h — the output of bitnet-kernel-bench: header lines, tables and footer on stdout, and the
 * --json file (format 1: "tool", "machine", "settings", "bandwidth", "pool", "kernels", "skipped",
 * "mismatches", "wall_s"; `python3 -m codegen tune` reads it). */
#ifndef BITNET_KERNEL_BENCH_REPORT_H
#define BITNET_KERNEL_BENCH_REPORT_H

#include "tools/kernel-bench/run.h"

/* "# bitnet-kernel-bench <date>", the cpu line and the timing lines. */
void kb_report_header(const kb_session *s);
/* The read-bandwidth line before the kernels (or "not measured"). */
void kb_report_bandwidth_start(const kb_session *s);
/* The pool-cost lines and the cache-busting line; flushes stdout. */
void kb_report_pool(const kb_session *s);
/* After the kernels: the bandwidth-at-the-end line, the GEMV table, the batched table and the footer. */
void kb_report_tables(const kb_session *s);
/* Every number as JSON into path; false after a message. */
bool kb_write_json(const kb_session *s, const char *path);

#endif
