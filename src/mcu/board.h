/* board.h — what a program of the microcontroller runtime (src/mcu) needs from the board under it: memory
 * for a model image read at start-up, memory for the arena, and an instruction counter. One
 * implementation per board: board_host.c (a Linux host: the heap, no counter) and
 * board/mps2_an386.c (Arm MPS2 AN386, Cortex-M4F, as qemu-system-arm emulates it). */
#ifndef BITNET_BOARD_H
#define BITNET_BOARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The board's name ("host", "mps2-an386"). */
const char *bitnet_board_name(void);

/* Memory for a model image of `bytes` bytes, 64-byte aligned, or NULL when the board has no room (the
 * message in `why`, e.g. "PSRAM holds 16777216 bytes"). One image per program run. */
void *bitnet_board_image_buffer(size_t bytes, char *why, size_t why_size);

/* Memory for the arena, after the image: `want` bytes (0: all the board has left), or NULL when it has
 * fewer (the message in `why`). *got = the bytes given. */
void *bitnet_board_arena(size_t want, size_t *got, char *why, size_t why_size);

/* Give back an image or arena buffer (nothing on boards whose regions are static). */
void bitnet_board_release(void *p);

/* The most stack the program has used so far, in bytes, when the board can tell (mps2-an386: the stack
 * region is painted at reset); false otherwise. */
bool bitnet_board_stack_peak(size_t *bytes);

/* Instructions the core executed since start-up, when the board can count them; false otherwise. On
 * mps2-an386 under `qemu-system-arm -icount shift=0` the virtual clock advances 1 ns per instruction and
 * SysTick counts it at 25 MHz, so the count is exact to 40 instructions. */
bool bitnet_board_instructions(uint64_t *n);

#ifdef __cplusplus
}
#endif

#endif
