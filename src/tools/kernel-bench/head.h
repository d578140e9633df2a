/* head.h — bitnet-kernel-bench's output-head measurement (--head VxD): the dense kernels of the head
 * (kernels/dense/: F16 and Q8_0 rows, the kernel bitnet_dense_kernel_for chooses) multiplying V rows of D
 * values by one prepared activation, the rows split among the pool's threads as the forward pass splits the
 * vocabulary, weights rotated among copies totalling the bust factor × LLC so that they stream from DRAM.
 * Every product is first compared with the single-row dot (dense.h: the same float for every row). */
#ifndef BITNET_KERNEL_BENCH_HEAD_H
#define BITNET_KERNEL_BENCH_HEAD_H

#include "tools/kernel-bench/run.h"

/* Measures every o->heads[] shape in F16 and Q8_0 at every thread count and prints one table (after the
 * ternary tables; the roofline is the session's read bandwidth). Sets s->failed on an allocation failure
 * and counts a product that differs from the single-row dot in s->n_mismatch. */
void kb_run_heads(kb_session *s);

#endif
