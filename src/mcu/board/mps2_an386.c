/* mps2_an386.c — the Arm MPS2 AN386 board (Cortex-M4F) under qemu-system-arm: the vector table, the
 * reset handler (FPU on, .data copied, .bss zeroed, the C library's semihosting streams, argv from the
 * semihosting command line, exit status through semihosting), fault handlers that report and exit
 * instead of hanging, and board.h: the model image at the start of PSRAM, the arena after it, SysTick as
 * the instruction counter, and the stack's high-water mark.
 *
 * Sources: Arm Cortex-M4 Devices Generic User Guide (DUI 0553): CPACR at 0xE000ED88 (bits 20-23 give
 * access to CP10/CP11, the FPU), SysTick CSR/RVR/CVR at 0xE000E010/14/18 (24-bit down counter), the
 * vector table layout; Arm Semihosting specification v2 (SYS_WRITE0 = 0x04, SYS_GET_CMDLINE = 0x15,
 * SYS_EXIT_EXTENDED = 0x20, `bkpt 0xab` on M-profile); QEMU hw/arm/mps2.c: the memory map and the 25 MHz
 * system clock that drives SysTick. */
#include "mcu/board.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* linker script symbols (mps2-an386.ld) */
extern uint32_t __data_load, __data_start, __data_end, __bss_start__, __bss_end__, __stack_top, __stack_limit;
extern uint8_t __psram_start, __psram_end;

int main(int argc, char **argv);
extern void initialise_monitor_handles(void); /* newlib's librdimon: stdin/stdout/stderr over semihosting */
extern unsigned int __heap_limit;             /* newlib's librdimon: where _sbrk stops (0xcafedead: no limit) */

#define REG32(a) (*(volatile uint32_t *)(a))
#define SCB_CPACR 0xE000ED88u
#define SYST_CSR 0xE000E010u
#define SYST_RVR 0xE000E014u
#define SYST_CVR 0xE000E018u
#define SCB_CFSR 0xE000ED28u
#define SYSCLK_HZ 25000000u          /* QEMU's mps2 system clock, SysTick's source with CLKSOURCE = 1 */
#define NS_PER_TICK (1000000000u / SYSCLK_HZ) /* 40: instructions per tick under -icount shift=0 */

static int semihost(int op, void *arg) {
    register int r0 __asm__("r0") = op;
    register void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

static void semihost_exit(int status) {
    uint32_t block[2] = {0x20026u /* ADP_Stopped_ApplicationExit */, (uint32_t)status};
    semihost(0x20, block);
    for (;;) {
    }
}

/* ---- instruction counter -------------------------------------------------------------------------- */

static volatile uint32_t g_systick_wraps;

static void systick_handler(void) { g_systick_wraps++; }

static void systick_start(void) {
    REG32(SYST_RVR) = 0x00FFFFFFu;
    REG32(SYST_CVR) = 0;
    REG32(SYST_CSR) = 7u; /* enable, interrupt on wrap, processor clock */
}

bool bitnet_board_instructions(uint64_t *n) {
    uint32_t w, v;
    do {
        w = g_systick_wraps;
        v = REG32(SYST_CVR);
    } while (w != g_systick_wraps);
    const uint64_t ticks = (uint64_t)w * 0x1000000u + (0x00FFFFFFu - (v & 0x00FFFFFFu));
    *n = ticks * NS_PER_TICK;
    return true;
}

/* ---- faults --------------------------------------------------------------------------------------- */

/* Any fault: report the Configurable Fault Status Register and exit with status 134 (as an abort would)
 * instead of spinning, so that a test sees a failure, not a timeout. Nothing that allocates or does I/O
 * through the C library here (strstr only reads). */
static void fault_handler(void) {
    static char msg[] = "bitnet: fault on the Cortex-M4F, CFSR = 0x00000000; stopping\n";
    static const char hex[] = "0123456789abcdef";
    const uint32_t cfsr = REG32(SCB_CFSR);
    char *digits = strstr(msg, "0x") + 2;
    for (int i = 0; i < 8; i++) digits[i] = hex[(cfsr >> (28 - 4 * i)) & 15u];
    semihost(0x04, msg);
    semihost_exit(134);
}

/* ---- reset ---------------------------------------------------------------------------------------- */

/* ---- stack ---------------------------------------------------------------------------------------- */

#define STACK_PAINT 0x5AC4C3A5u

/* Fill the stack region below the current stack pointer (minus a margin for this function) with a
 * pattern; bitnet_board_stack_peak finds the deepest word that changed. */
static void stack_paint(void) {
    uint32_t *sp;
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    for (uint32_t *p = &__stack_limit; p < sp - 16; p++) *p = STACK_PAINT;
}

bool bitnet_board_stack_peak(size_t *bytes) {
    const uint32_t *p = &__stack_limit;
    while (p < &__stack_top && *p == STACK_PAINT) p++;
    *bytes = (size_t)((const uint8_t *)&__stack_top - (const uint8_t *)p);
    return true;
}

/* ---- command line --------------------------------------------------------------------------------- */

#define MAX_ARGS 256
static char g_cmdline[4096];
static char *g_argv[MAX_ARGS + 1];

static void usage_exit(const char *msg) {
    semihost(0x04, (void *)msg);
    semihost_exit(2);
}

/* argv from the semihosting command line (qemu's -semihosting-config arg=... words, joined by spaces); a
 * line that does not fit the buffer or has too many words stops the program with status 2. */
static int command_line(void) {
    struct {
        char *buf;
        int len;
    } block = {g_cmdline, (int)sizeof g_cmdline - 1};
    int argc = 0;
    if (semihost(0x15, &block) != 0) {
        usage_exit("bitnet: error: the semihosting command line is longer than 4095 bytes\n");
    }
    if (block.len > 0) {
        g_cmdline[block.len] = '\0';
        for (char *p = g_cmdline; *p;) {
            while (*p == ' ') *p++ = '\0';
            if (!*p) break;
            if (argc == MAX_ARGS) usage_exit("bitnet: error: more than 256 words on the semihosting command line\n");
            g_argv[argc++] = p;
            while (*p && *p != ' ') p++;
        }
    }
    if (argc == 0) g_argv[argc++] = (char *)"bitnet";
    g_argv[argc] = NULL;
    return argc;
}

void bitnet_board_reset(void) {
    REG32(SCB_CPACR) |= 0xFu << 20; /* CP10, CP11: full access (the FPU) */
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    for (uint32_t *s = &__data_load, *d = &__data_start; d < &__data_end;) *d++ = *s++;
    for (uint32_t *d = &__bss_start__; d < &__bss_end__;) *d++ = 0;
    stack_paint();
    __heap_limit = (unsigned int)(uintptr_t)&__stack_limit; /* malloc never reaches the stack region */
    initialise_monitor_handles();
    systick_start();
    const int argc = command_line();
    const int status = main(argc, g_argv);
    fflush(stdout);
    fflush(stderr);
    semihost_exit(status);
}

/* Cortex-M vector table: initial SP, reset, NMI, HardFault, MemManage, BusFault, UsageFault, 4 reserved,
 * SVCall, DebugMonitor, reserved, PendSV, SysTick. */
__attribute__((section(".isr_vector"), used)) static void (*const g_vectors[16])(void) = {
    (void (*)(void))(uintptr_t)&__stack_top,
    bitnet_board_reset,
    fault_handler,
    fault_handler,
    fault_handler,
    fault_handler,
    fault_handler,
    0,
    0,
    0,
    0,
    fault_handler,
    fault_handler,
    0,
    fault_handler,
    systick_handler,
};

/* ---- memory --------------------------------------------------------------------------------------- */

static uint8_t *g_psram_next = &__psram_start; /* PSRAM: the image, then the arena */

const char *bitnet_board_name(void) { return "mps2-an386"; }

static void *psram_take(size_t bytes, const char *what, char *why, size_t why_size) {
    const size_t left = (size_t)(&__psram_end - g_psram_next);
    if (bytes > left) {
        snprintf(why, why_size, "the %s needs %llu bytes, PSRAM has %llu left of %llu", what, (unsigned long long)bytes, (unsigned long long)left,
                 (unsigned long long)((size_t)(&__psram_end - &__psram_start)));
        return NULL;
    }
    uint8_t *p = g_psram_next;
    g_psram_next += (bytes + 63) & ~(size_t)63;
    if (g_psram_next > &__psram_end) g_psram_next = &__psram_end;
    return p;
}

void *bitnet_board_image_buffer(size_t bytes, char *why, size_t why_size) {
    return psram_take(bytes, "model image", why, why_size);
}

void *bitnet_board_arena(size_t want, size_t *got, char *why, size_t why_size) {
    const size_t left = (size_t)(&__psram_end - g_psram_next);
    *got = want ? want : left;
    return psram_take(*got, "arena", why, why_size);
}

void bitnet_board_release(void *p) { (void)p; }
