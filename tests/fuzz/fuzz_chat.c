/* fuzz_chat.c — libFuzzer target: the chat templates of text/chat.h.
 * Input: two bytes, then parts separated by FUZZ_SEP lines.
 *   byte 0: bits 0-1 family (0 is the unknown family, which must be refused), bit 2
 *           add_generation_prompt, bit 3 reply_open, bit 6 an EOS text ("</s>", which Falcon3's template
 *           writes after each assistant message); byte 1: n_past (mod the message count + 1);
 *   part 0: a tokenizer.chat_template text for bitnet_chat_detect / bitnet_chat_family_of;
 *   parts 1..: messages; each part's first byte picks the role (system, user, assistant, or an
 *              invalid one), the rest is the content (cut at a NUL byte, as C strings are).
 * Checked: the renderers return a status and a NUL-terminated text of the length they report; and the
 * documented identity format(msgs[0..n_past), false) + increment(n_past, n) == format(msgs, n) whenever
 * all three succeed with reply_open false. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "text/chat.h"

enum { MAX_MSGS = 16 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const unsigned flags = data[0], past = data[1];
    const uint8_t *part[MAX_MSGS + 1];
    size_t len[MAX_MSGS + 1];
    const size_t n_parts = fuzz_split(data + 2, size - 2, MAX_MSGS + 1, part, len);

    bitnet_error err = {{0}};
    bitnet_chat_family fam;
    (void)bitnet_chat_detect((const char *)part[0], len[0]);
    bitnet_chat_family_of((const char *)part[0], len[0], "fuzz.gguf", &fam, &err);

    static const char *const roles[4] = {"system", "user", "assistant", "tool"};
    bitnet_chat_message msgs[MAX_MSGS];
    char *texts[MAX_MSGS];
    const size_t n = n_parts - 1;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = part[i + 1];
        const size_t l = len[i + 1];
        msgs[i].role = roles[l ? p[0] % 4 : 1];
        texts[i] = (char *)malloc(l + 1);
        if (l > 1) memcpy(texts[i], p + 1, l - 1);
        texts[i][l ? l - 1 : 0] = 0;
        msgs[i].content = texts[i];
    }
    bitnet_chat_template t = {(bitnet_chat_family)(flags & 3), (flags & 64) ? "</s>" : NULL};
    const bool agp = flags & 4, reply_open = flags & 8;
    const size_t n_past = past % (n + 1);
    char *whole = NULL, *head = NULL, *inc = NULL;
    size_t n_whole = 0, n_head = 0, n_inc = 0;
    const bitnet_status s_whole = bitnet_chat_format(&t, msgs, n, agp, &whole, &n_whole, &err);
    const bitnet_status s_head = bitnet_chat_format(&t, msgs, n_past, false, &head, &n_head, &err);
    const bitnet_status s_inc =
        bitnet_chat_format_increment(&t, msgs, n_past, n, agp, reply_open, &inc, &n_inc, &err);
    if (s_whole == BITNET_OK && strlen(whole) != n_whole) abort();
    if (s_head == BITNET_OK && strlen(head) != n_head) abort();
    if (s_inc == BITNET_OK && strlen(inc) != n_inc) abort();
    if (t.family == BITNET_CHAT_UNKNOWN && (s_whole == BITNET_OK || s_inc == BITNET_OK)) abort();
    if (s_whole == BITNET_OK && s_head == BITNET_OK && s_inc == BITNET_OK && !reply_open) {
        if (n_head + n_inc != n_whole || memcmp(head, whole, n_head) != 0 || memcmp(inc, whole + n_head, n_inc) != 0) {
            abort(); /* the increment must continue the cached text exactly */
        }
    }
    free(whole);
    free(head);
    free(inc);
    for (size_t i = 0; i < n; i++) free(texts[i]);
    return 0;
}
