// test_hf_tokenizer.cc — src/convert/hf_tokenizer.c on small hand-written Hugging Face tokenizer folders:
// byte-level and SentencePiece-style tokenizer.json, a hand-encoded tokenizer.model protobuf,
// tokenizer_config.json / special_tokens_map.json, the pre-tokenizer identification, padding to the
// model's vocab_size, the GGUF keys written, and the error message of every broken input.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "base/gguf.h"
#include "convert/hf_tokenizer.h"
#include "test_util.h"
#include "text/tokenizer.h"

namespace {

std::string g_dir;
::testing::Environment *const g_env =
    ::testing::AddGlobalTestEnvironment(new bitnet_test::TempDirEnv("bitnet_hftok_", &g_dir));

#define EXPECT_HAS(msg, sub) EXPECT_NE((msg).find(sub), std::string::npos) << "'" << (msg) << "' lacks '" << (sub) << "'"

// A fresh folder under the scratch dir with the given files.
std::string folder(const std::string &name, const std::vector<std::pair<std::string, std::string>> &files) {
    const std::string d = g_dir + "/" + name;
    mkdir(d.c_str(), 0755);
    for (const auto &f : files) {
        std::ofstream o(d + "/" + f.first, std::ios::binary);
        o << f.second;
    }
    return d;
}

struct HfVocab {
    bitnet_hf_vocab *v = nullptr;
    ~HfVocab() { bitnet_hf_vocab_free(v); }
};

bitnet_status load(const std::string &dir, HfVocab *out, std::string *msg) {
    bitnet_error err{};
    bitnet_status st = bitnet_hf_vocab_load(dir.c_str(), &out->v, &err);
    *msg = err.msg;
    if (st != BITNET_OK) {
        EXPECT_EQ(out->v, nullptr);
    }
    return st;
}

// s with the first `from` replaced by `to`.
std::string subst(std::string s, const std::string &from, const std::string &to) {
    const size_t i = s.find(from);
    if (i != std::string::npos) s.replace(i, from.size(), to);
    return s;
}

const char kLlama3Regex[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+)";

std::string llama3_pre() {
    return std::string(R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":")") + kLlama3Regex +
           R"("},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]})";
}

// A byte-level tokenizer.json: vocab a b ab Ġ, merge "a b", added tokens with a hole at id 4.
std::string bytelevel_json(const std::string &pre, const std::string &merges = R"(["a b"])") {
    return R"({"version":"1.0","added_tokens":[
      {"id":5,"content":"<|end|>","special":true},
      {"id":6,"content":"<x>","special":false},
      {"id":7,"content":"<|look|>","special":false}],
     "normalizer":null,"pre_tokenizer":)" +
           pre + R"(,"post_processor":{"type":"ByteLevel"},"decoder":{"type":"ByteLevel"},
     "model":{"type":"BPE","ignore_merges":true,"vocab":{"a":0,"b":1,"ab":2,"Ġ":3},"merges":)" +
           merges + "}}";
}

// A SentencePiece-style tokenizer.json (Llama 2 layout).
const char kSpmJson[] = R"({"version":"1.0",
  "added_tokens":[{"id":0,"content":"<unk>","special":true},{"id":1,"content":"<s>","special":true},
                  {"id":2,"content":"</s>","special":true}],
  "normalizer":{"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"▁"},
                {"type":"Replace","pattern":{"String":" "},"content":"▁"}]},
  "pre_tokenizer":null,
  "post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},
                    {"Sequence":{"id":"A","type_id":0}}]},
  "decoder":{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},
             {"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]},
  "model":{"type":"BPE","byte_fallback":true,"unk_token":"<unk>",
           "vocab":{"<unk>":0,"<s>":1,"</s>":2,"<0x41>":3,"▁":4,"a":5,"b":6,"ab":7,"▁ab":8,"xyz":9},
           "merges":["a b","▁ ab"]}})";

// ---- protobuf writing (wire format: varint keys, length-delimited messages) ----
using bitnet_test::field_bytes;
using bitnet_test::field_float;
using bitnet_test::field_varint;
using bitnet_test::varint;
std::string piece(const std::string &text, float score, int type) {
    std::string m = field_bytes(1, text) + field_float(2, score);
    if (type != 1) m += field_varint(3, type);
    return field_bytes(1, m);
}

// <unk> <s> </s> <0x41> ▁ a b ab ▁ab, BPE, add_dummy_prefix as given; pad_id -1 written explicitly.
std::string spm_model(int model_type = 2, bool dummy_prefix = false) {
    std::string m;
    m += piece("<unk>", 0, 2) + piece("<s>", 0, 3) + piece("</s>", 0, 3) + piece("<0x41>", 0, 6);
    m += piece("▁", -1, 1) + piece("a", -2, 1) + piece("b", -3, 1) + piece("ab", -4, 1) + piece("▁ab", -5, 1);
    m += piece("<sep>", 0, 4);
    const std::string trainer = field_varint(3, model_type) + field_varint(40, 0) + field_varint(41, 1) +
                                field_varint(42, 2) + field_varint(43, -1) + field_bytes(44, "ignored");
    m += field_bytes(2, trainer);
    m += field_bytes(3, field_bytes(1, "identity") + field_varint(3, dummy_prefix ? 1 : 0));
    return m;
}

struct Gguf {
    bitnet_gguf *g = nullptr;
    ~Gguf() { bitnet_gguf_close(g); }
};

std::string gguf_str(const bitnet_gguf *g, const char *key) {
    const char *p = nullptr;
    size_t n = 0;
    bitnet_error err{};
    EXPECT_EQ(bitnet_gguf_get_str(g, key, &p, &n, &err), BITNET_OK) << err.msg;
    return p ? std::string(p, n) : std::string();
}

}  // namespace

TEST(HfTokenizer, ByteLevelTokenizerJson) {
    const std::string config = R"({"bos_token":"<|end|>","eos_token":{"content":"<|end|>","__type":"AddedToken"},
        "add_bos_token":false,"chat_template":[{"name":"tool_use","template":"T1"},{"name":"default","template":"T0"}]})";
    const std::string dir = folder("bytelevel", {{"tokenizer.json", bytelevel_json(llama3_pre())}, {"tokenizer_config.json", config}});
    HfVocab H;
    std::string msg;
    ASSERT_EQ(load(dir, &H, &msg), BITNET_OK) << msg;
    const bitnet_hf_vocab *v = H.v;
    EXPECT_STREQ(v->model, "gpt2");
    EXPECT_STREQ(v->pre, "llama-bpe");
    EXPECT_STREQ(v->source, "tokenizer.json");
    ASSERT_EQ(v->n_tokens, 8);
    EXPECT_EQ(v->scores, nullptr);
    EXPECT_STREQ(v->tokens[2], "ab");
    EXPECT_STREQ(v->tokens[4], "[PAD4]");  // an id no file defines
    EXPECT_EQ(v->token_types[4], BITNET_TOKEN_UNUSED);
    EXPECT_EQ(v->token_types[5], BITNET_TOKEN_CONTROL);       // special
    EXPECT_EQ(v->token_types[6], BITNET_TOKEN_USER_DEFINED);  // not special
    EXPECT_EQ(v->token_types[7], BITNET_TOKEN_CONTROL);       // not special, but looks like <|...|>
    EXPECT_EQ(v->token_types[0], BITNET_TOKEN_NORMAL);
    ASSERT_EQ(v->n_merges, 1);
    EXPECT_STREQ(v->merges[0], "a b");
    EXPECT_EQ(v->bos_id, 5);
    EXPECT_EQ(v->eos_id, 5);
    EXPECT_EQ(v->unk_id, -1);
    EXPECT_EQ(v->add_bos, 0);
    EXPECT_EQ(v->add_eos, -1);
    ASSERT_NE(v->chat_template, nullptr);
    EXPECT_STREQ(v->chat_template, "T0");

    // the GGUF keys, read back
    const std::string out = g_dir + "/bytelevel.gguf";
    bitnet_error err{};
    ASSERT_EQ(bitnet_hf_vocab_write_vocab_only(v, "bitnet-b1.58", "tiny", out.c_str(), &err), BITNET_OK) << err.msg;
    Gguf G;
    ASSERT_EQ(bitnet_gguf_open(out.c_str(), &G.g, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(gguf_str(G.g, "general.architecture"), "bitnet-b1.58");
    EXPECT_EQ(gguf_str(G.g, "general.name"), "tiny");
    EXPECT_EQ(gguf_str(G.g, "tokenizer.ggml.model"), "gpt2");
    EXPECT_EQ(gguf_str(G.g, "tokenizer.ggml.pre"), "llama-bpe");
    EXPECT_EQ(gguf_str(G.g, "tokenizer.chat_template"), "T0");
    EXPECT_EQ(bitnet_gguf_find_kv(G.g, "tokenizer.ggml.scores"), -1);
    EXPECT_EQ(bitnet_gguf_find_kv(G.g, "tokenizer.ggml.add_eos_token"), -1);  // not stated: not written
    EXPECT_EQ(bitnet_gguf_find_kv(G.g, "tokenizer.ggml.unknown_token_id"), -1);
    EXPECT_EQ(bitnet_gguf_kv_type(G.g, bitnet_gguf_find_kv(G.g, "tokenizer.ggml.eos_token_id")), BITNET_GGUF_UINT32);
    uint32_t eos = 0;
    EXPECT_EQ(bitnet_gguf_get_u32(G.g, "tokenizer.ggml.eos_token_id", &eos, &err), BITNET_OK);
    EXPECT_EQ(eos, 5u);
    bool add_bos = true;
    EXPECT_EQ(bitnet_gguf_get_bool(G.g, "tokenizer.ggml.add_bos_token", &add_bos, &err), BITNET_OK);
    EXPECT_FALSE(add_bos);
    const char *m = nullptr;
    size_t ml = 0;
    EXPECT_EQ(bitnet_gguf_get_arr_str(G.g, "tokenizer.ggml.merges", 0, &m, &ml, &err), BITNET_OK);
    EXPECT_EQ(std::string(m, ml), "a b");
    bitnet_gguf_type et;
    uint64_t n = 0;
    const void *data = nullptr;
    EXPECT_EQ(bitnet_gguf_get_arr(G.g, "tokenizer.ggml.token_type", &et, &n, &data, &err), BITNET_OK);
    EXPECT_EQ(et, BITNET_GGUF_INT32);
    EXPECT_EQ(n, 8u);
    // and the runtime reads it: "ab" is one token, the special text is the special token
    bitnet_vocab *rv = nullptr;
    ASSERT_EQ(bitnet_vocab_load(G.g, &rv, &err), BITNET_OK) << err.msg;
    int32_t *ids = nullptr;
    size_t nid = 0;
    ASSERT_EQ(bitnet_tokenize(rv, "ab<|end|>", 9, true, true, &ids, &nid, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(std::vector<int32_t>(ids, ids + nid), std::vector<int32_t>({2, 5}));  // add_bos_token false
    std::free(ids);
    bitnet_vocab_free(rv);
}

TEST(HfTokenizer, PreTokenizerIdentification) {
    struct Case {
        std::string pre, want;
    };
    const std::vector<Case> cases = {
        {llama3_pre(), "llama-bpe"},
        {R"({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true})", "gpt2"},
        {R"({"type":"ByteLevel"})", "gpt2"},  // use_regex defaults to true
        {R"({"type":"Sequence","pretokenizers":[{"type":"Punctuation","behavior":"Contiguous"},
            {"type":"Digits","individual_digits":true},{"type":"ByteLevel","add_prefix_space":false,"use_regex":true}]})",
         "falcon3"},
    };
    int i = 0;
    for (const Case &c : cases) {
        const std::string dir = folder("pre" + std::to_string(i++), {{"tokenizer.json", bytelevel_json(c.pre)}});
        HfVocab H;
        std::string msg;
        ASSERT_EQ(load(dir, &H, &msg), BITNET_OK) << msg;
        EXPECT_STREQ(H.v->pre, c.want.c_str());
    }
    // not recognised: the message shows the pre_tokenizer
    const std::vector<std::string> bad = {
        R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"\\p{L}+"},"behavior":"Isolated"},{"type":"ByteLevel","use_regex":false}]})",
        R"({"type":"ByteLevel","add_prefix_space":true})",
        R"({"type":"Sequence","pretokenizers":[{"type":"Whitespace"},{"type":"ByteLevel"}]})",
    };
    for (const std::string &b : bad) {
        const std::string dir = folder("prebad" + std::to_string(i++), {{"tokenizer.json", bytelevel_json(b)}});
        HfVocab H;
        std::string msg;
        EXPECT_EQ(load(dir, &H, &msg), BITNET_ERR_UNSUPPORTED);
        EXPECT_HAS(msg, "unsupported pre_tokenizer");
        EXPECT_HAS(msg, "tokenizer.json");
    }
    // merges in the newer two-string form
    const std::string dir = folder("merges2", {{"tokenizer.json", bytelevel_json(llama3_pre(), R"([["a","b"]])")}});
    HfVocab H;
    std::string msg;
    ASSERT_EQ(load(dir, &H, &msg), BITNET_OK) << msg;
    ASSERT_EQ(H.v->n_merges, 1);
    EXPECT_STREQ(H.v->merges[0], "a b");
}

TEST(HfTokenizer, SentencePieceStyleTokenizerJson) {
    const std::string dir = folder("spmjson", {{"tokenizer.json", kSpmJson},
                                               {"special_tokens_map.json", R"({"bos_token":"<s>","eos_token":"</s>"})"}});
    HfVocab H;
    std::string msg;
    ASSERT_EQ(load(dir, &H, &msg), BITNET_OK) << msg;
    const bitnet_hf_vocab *v = H.v;
    EXPECT_STREQ(v->model, "llama");
    EXPECT_STREQ(v->pre, "default");
    ASSERT_EQ(v->n_tokens, 10);
    ASSERT_NE(v->scores, nullptr);
    EXPECT_EQ(v->n_merges, 0);
    EXPECT_EQ(v->token_types[0], BITNET_TOKEN_UNKNOWN);
    EXPECT_EQ(v->token_types[1], BITNET_TOKEN_CONTROL);
    EXPECT_EQ(v->token_types[3], BITNET_TOKEN_BYTE);
    EXPECT_EQ(v->token_types[7], BITNET_TOKEN_NORMAL);
    // scores: -(rank of the first merge producing the token); other multi-character tokens below every
    // merge; single characters, byte and special tokens 0
    EXPECT_EQ(v->scores[7], -0.0f);  // ab: merge 0
    EXPECT_EQ(v->scores[8], -1.0f);  // ▁ab: merge 1
    EXPECT_EQ(v->scores[9], -(2.0f + 9.0f)); // xyz: no merge makes it
    EXPECT_EQ(v->scores[5], 0.0f);
    EXPECT_EQ(v->scores[4], 0.0f);  // ▁ is one character
    EXPECT_EQ(v->scores[3], 0.0f);
    EXPECT_EQ(v->unk_id, 0);
    EXPECT_EQ(v->bos_id, 1);
    EXPECT_EQ(v->eos_id, 2);
    EXPECT_EQ(v->add_bos, 1);  // TemplateProcessing starts with <s>
    EXPECT_EQ(v->add_eos, 0);
    EXPECT_EQ(v->add_space_prefix, 1);  // Prepend("▁")
    EXPECT_EQ(v->chat_template, nullptr);
}

TEST(HfTokenizer, PostProcessorAndMetaspaceVariants) {
    // Llama 3.1-style post-processor: Sequence[ByteLevel, TemplateProcessing] with <|end|> first → add BOS
    const std::string seq = subst(bytelevel_json(llama3_pre()), R"("post_processor":{"type":"ByteLevel"})",
                                  R"("post_processor":{"type":"Sequence","processors":[{"type":"ByteLevel"},
        {"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<|end|>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}]}]})");
    const std::string d1 = folder("postseq", {{"tokenizer.json", seq}});
    HfVocab A;
    std::string msg;
    ASSERT_EQ(load(d1, &A, &msg), BITNET_OK) << msg;
    EXPECT_EQ(A.v->add_bos, 1);
    EXPECT_EQ(A.v->add_eos, 0);
    EXPECT_EQ(A.v->bos_id, 5);  // the template's special token, when no config names one
    // SentencePiece-style files of the newer layout: no normalizer, a Metaspace pre-tokenizer
    for (const auto &c : std::vector<std::pair<std::string, int>>{{"first", 1}, {"always", 1}, {"never", 0}}) {
        std::string j = subst(kSpmJson, R"("normalizer":{"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"▁"},
                {"type":"Replace","pattern":{"String":" "},"content":"▁"}]},
  "pre_tokenizer":null,)",
                              R"("normalizer":null,"pre_tokenizer":{"type":"Metaspace","replacement":"▁","prepend_scheme":")" +
                                  c.first + R"(","split":false},)");
        ASSERT_NE(j.find("Metaspace"), std::string::npos);
        const std::string d = folder("meta_" + c.first, {{"tokenizer.json", j}});
        HfVocab H;
        ASSERT_EQ(load(d, &H, &msg), BITNET_OK) << msg;
        EXPECT_STREQ(H.v->model, "llama");
        EXPECT_EQ(H.v->add_space_prefix, c.second) << c.first;
    }
}

TEST(HfTokenizer, SentencePieceModelFile) {
    const std::string config = R"({"add_bos_token":true,"add_eos_token":false,
        "added_tokens_decoder":{"1":{"content":"<s>","special":true},"11":{"content":"<extra>","special":false},
                                "12":{"content":"<ctl>","special":true}}})";
    const std::string dir = folder("spmmodel", {{"tokenizer.model", spm_model()}, {"tokenizer_config.json", config}});
    HfVocab H;
    std::string msg;
    ASSERT_EQ(load(dir, &H, &msg), BITNET_OK) << msg;
    const bitnet_hf_vocab *v = H.v;
    EXPECT_STREQ(v->model, "llama");
    EXPECT_STREQ(v->source, "tokenizer.model");
    ASSERT_EQ(v->n_tokens, 13);  // 10 pieces, a hole at 10, two added tokens
    EXPECT_STREQ(v->tokens[4], "▁");
    EXPECT_STREQ(v->tokens[8], "▁ab");
    EXPECT_FLOAT_EQ(v->scores[8], -5.0f);
    EXPECT_FLOAT_EQ(v->scores[5], -2.0f);
    EXPECT_EQ(v->token_types[0], BITNET_TOKEN_UNKNOWN);
    EXPECT_EQ(v->token_types[1], BITNET_TOKEN_CONTROL);
    EXPECT_EQ(v->token_types[3], BITNET_TOKEN_BYTE);
    EXPECT_EQ(v->token_types[4], BITNET_TOKEN_NORMAL);
    EXPECT_EQ(v->token_types[9], BITNET_TOKEN_USER_DEFINED);
    EXPECT_STREQ(v->tokens[10], "[PAD10]");
    EXPECT_EQ(v->token_types[10], BITNET_TOKEN_UNUSED);
    EXPECT_FLOAT_EQ(v->scores[10], -1000.0f);
    EXPECT_STREQ(v->tokens[11], "<extra>");
    EXPECT_EQ(v->token_types[11], BITNET_TOKEN_USER_DEFINED);
    EXPECT_EQ(v->token_types[12], BITNET_TOKEN_CONTROL);
    EXPECT_EQ(v->unk_id, 0);
    EXPECT_EQ(v->bos_id, 1);
    EXPECT_EQ(v->eos_id, 2);
    EXPECT_EQ(v->pad_id, -1);  // written as a 10-byte varint
    EXPECT_EQ(v->add_space_prefix, 0);
    EXPECT_EQ(v->add_bos, 1);
    EXPECT_EQ(v->add_eos, 0);

    // a SentencePiece-style tokenizer.json next to it: the .model file's real scores win
    const std::string both = folder("spmboth", {{"tokenizer.model", spm_model(2, true)}, {"tokenizer.json", kSpmJson}});
    HfVocab B;
    ASSERT_EQ(load(both, &B, &msg), BITNET_OK) << msg;
    EXPECT_STREQ(B.v->source, "tokenizer.model");
    EXPECT_EQ(B.v->add_space_prefix, 1);
    // ... but a byte-level tokenizer.json wins over a tokenizer.model
    const std::string bl = folder("blboth", {{"tokenizer.model", spm_model()}, {"tokenizer.json", bytelevel_json(llama3_pre())}});
    HfVocab C;
    ASSERT_EQ(load(bl, &C, &msg), BITNET_OK) << msg;
    EXPECT_STREQ(C.v->model, "gpt2");

    // GGUF keys of a "llama" vocabulary
    bitnet_error err{};
    const std::string out = g_dir + "/spm.gguf";
    ASSERT_EQ(bitnet_hf_vocab_write_vocab_only(v, "bitnet", nullptr, out.c_str(), &err), BITNET_OK) << err.msg;
    Gguf G;
    ASSERT_EQ(bitnet_gguf_open(out.c_str(), &G.g, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(gguf_str(G.g, "tokenizer.ggml.model"), "llama");
    EXPECT_EQ(gguf_str(G.g, "tokenizer.ggml.pre"), "default");
    EXPECT_EQ(bitnet_gguf_find_kv(G.g, "tokenizer.ggml.merges"), -1);
    EXPECT_EQ(bitnet_gguf_find_kv(G.g, "general.name"), -1);
    bool prefix = true;
    EXPECT_EQ(bitnet_gguf_get_bool(G.g, "tokenizer.ggml.add_space_prefix", &prefix, &err), BITNET_OK);
    EXPECT_FALSE(prefix);
    bitnet_gguf_type et;
    uint64_t n = 0;
    const void *data = nullptr;
    ASSERT_EQ(bitnet_gguf_get_arr(G.g, "tokenizer.ggml.scores", &et, &n, &data, &err), BITNET_OK);
    EXPECT_EQ(n, 13u);
    float s8;
    std::memcpy(&s8, (const char *)data + 8 * 4, 4);
    EXPECT_FLOAT_EQ(s8, -5.0f);
    // the runtime: no space prefix; "ab" merges; the unused [PAD10] and the CONTROL token never come from text
    bitnet_vocab *rv = nullptr;
    ASSERT_EQ(bitnet_vocab_load(G.g, &rv, &err), BITNET_OK) << err.msg;
    int32_t *ids = nullptr;
    size_t nid = 0;
    ASSERT_EQ(bitnet_tokenize(rv, "ab ab<extra>", 12, true, false, &ids, &nid, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(std::vector<int32_t>(ids, ids + nid), std::vector<int32_t>({1, 7, 8, 11}));
    std::free(ids);
    bitnet_vocab_free(rv);
}

TEST(HfTokenizer, PadToModelVocabSize) {
    const std::string dir = folder("pad", {{"tokenizer.json", bytelevel_json(llama3_pre())}});
    HfVocab H;
    std::string msg;
    ASSERT_EQ(load(dir, &H, &msg), BITNET_OK) << msg;
    bitnet_error err{};
    EXPECT_EQ(bitnet_hf_vocab_pad(H.v, 8, &err), BITNET_OK);
    EXPECT_EQ(H.v->n_tokens, 8);
    // fewer rows than tokens: trailing added tokens (5 <|end|>, 6 <x>, 7 <|look|>; the hole 4 is UNUSED)
    // are dropped, a model token is not, nor a special id
    EXPECT_EQ(bitnet_hf_vocab_pad(H.v, 3, &err), BITNET_ERR_FORMAT);
    EXPECT_HAS(std::string(err.msg), "the tokenizer (tokenizer.json) has 8 tokens but the model's vocab_size is 3");
    EXPECT_HAS(std::string(err.msg), "token 3 \"\xC4\xA0\" is not an added token");
    EXPECT_EQ(H.v->n_tokens, 8);
    H.v->eos_id = 6;
    EXPECT_EQ(bitnet_hf_vocab_pad(H.v, 6, &err), BITNET_ERR_FORMAT);
    EXPECT_HAS(std::string(err.msg), "the EOS token 6 \"<x>\" has no embedding row");
    H.v->eos_id = 5;
    ASSERT_EQ(bitnet_hf_vocab_pad(H.v, 6, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(H.v->n_tokens, 6);
    EXPECT_STREQ(H.v->tokens[5], "<|end|>");
    EXPECT_EQ(bitnet_hf_vocab_pad(H.v, 0, &err), BITNET_ERR_FORMAT);
    ASSERT_EQ(bitnet_hf_vocab_pad(H.v, 12, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(H.v->n_tokens, 12);
    EXPECT_STREQ(H.v->tokens[11], "[PAD11]");
    EXPECT_EQ(H.v->token_types[11], BITNET_TOKEN_UNUSED);
}

TEST(HfTokenizer, Errors) {
    struct Case {
        std::string name;
        std::vector<std::pair<std::string, std::string>> files;
        bitnet_status want;
        std::vector<std::string> subs;
    };
    const std::string good = bytelevel_json(llama3_pre());
    const std::vector<Case> cases = {
        {"empty", {}, BITNET_ERR_IO, {"no tokenizer in", "empty/tokenizer.json", "empty/tokenizer.model"}},
        {"truncated", {{"tokenizer.json", good.substr(0, good.size() / 2)}}, BITNET_ERR_FORMAT,
         {"truncated/tokenizer.json: malformed JSON: unexpected end of file at byte"}},
        {"syntax", {{"tokenizer.json", "{\n  \"model\": {\"type\": \"BPE\",, }\n}"}}, BITNET_ERR_FORMAT,
         {"syntax/tokenizer.json: malformed JSON at byte 28 (line 2, column 27)"}},
        {"trailing", {{"tokenizer.json", good + "\n}"}}, BITNET_ERR_FORMAT, {"malformed JSON at byte", "(line 7, column 1)"}},
        {"nomodel", {{"tokenizer.json", R"({"version":"1.0","added_tokens":[]})"}}, BITNET_ERR_FORMAT,
         {"nomodel/tokenizer.json: no \"model\" object"}},
        {"notobject", {{"tokenizer.json", "[1,2]"}}, BITNET_ERR_FORMAT, {"the top level is not an object"}},
        {"unigram", {{"tokenizer.json", R"({"model":{"type":"Unigram","vocab":[["a",0.0]]}})"}}, BITNET_ERR_UNSUPPORTED,
         {"tokenizer model type \"Unigram\" is not supported"}},
        {"wordpiece", {{"tokenizer.json", R"({"model":{"type":"WordPiece","vocab":{"a":0}}})"}}, BITNET_ERR_UNSUPPORTED,
         {"\"WordPiece\""}},
        {"novocab", {{"tokenizer.json", R"({"model":{"type":"BPE","merges":[]}})"}}, BITNET_ERR_FORMAT,
         {"\"model.vocab\" is missing or not an object"}},
        {"nomerges", {{"tokenizer.json", R"({"model":{"type":"BPE","vocab":{"a":0}}})"}}, BITNET_ERR_FORMAT,
         {"\"model.merges\" is missing"}},
        {"plainbpe", {{"tokenizer.json", R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"pre_tokenizer":{"type":"Whitespace"}})"}},
         BITNET_ERR_UNSUPPORTED, {"neither byte-level", "Whitespace"}},
        {"normalizer", {{"tokenizer.json", R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"normalizer":{"type":"Sequence","normalizers":[{"type":"NFKC"},{"type":"Replace","pattern":{"String":" "},"content":"▁"}]}})"}},
         BITNET_ERR_UNSUPPORTED, {"normalizer step {\"type\":\"NFKC\"} is not supported"}},
        {"dupid", {{"tokenizer.json", subst(good, "\"ab\":2", "\"ab\":1")}}, BITNET_ERR_FORMAT,
         {"model.vocab has two tokens with id 1"}},
        {"badid", {{"tokenizer.json", subst(good, "\"ab\":2", "\"ab\":-3")}}, BITNET_ERR_FORMAT,
         {"model.vocab[\"ab\"] = -3 is not a valid id"}},
        {"badmerge", {{"tokenizer.json", bytelevel_json(llama3_pre(), R"(["ab"])")}}, BITNET_ERR_FORMAT,
         {"model.merges[0] = \"ab\" is not two tokens separated by a space"}},
        {"nulcontent", {{"tokenizer.json", subst(good, "<x>", "<\\u0000>")}}, BITNET_ERR_FORMAT,
         {"added_tokens[1] (id 6) is empty or contains a NUL byte"}},
        {"badbos", {{"tokenizer.json", good}, {"tokenizer_config.json", R"({"bos_token":"<nope>"})"}}, BITNET_ERR_FORMAT,
         {"badbos/tokenizer_config.json: bos_token \"<nope>\" is not a token of tokenizer.json"}},
        {"badconfig", {{"tokenizer.json", good}, {"tokenizer_config.json", "{\"bos_token\": "}}, BITNET_ERR_FORMAT,
         {"badconfig/tokenizer_config.json: malformed JSON"}},
        {"protocut", {{"tokenizer.model", spm_model().substr(0, 40)}}, BITNET_ERR_FORMAT,
         {"protocut/tokenizer.model: malformed protobuf at byte"}},
        {"protojunk", {{"tokenizer.model", std::string("\x0f\x01\x02", 3)}}, BITNET_ERR_FORMAT, {"malformed protobuf"}},
        {"protounigram", {{"tokenizer.model", spm_model(1)}}, BITNET_ERR_UNSUPPORTED, {"model_type UNIGRAM (1) is not supported"}},
        {"protoempty", {{"tokenizer.model", field_bytes(2, field_varint(3, 2))}}, BITNET_ERR_FORMAT, {"0 pieces"}},
    };
    for (const Case &c : cases) {
        const std::string dir = folder(c.name, c.files);
        HfVocab H;
        std::string msg;
        EXPECT_EQ(load(dir, &H, &msg), c.want) << c.name << ": " << msg;
        for (const std::string &s : c.subs) EXPECT_HAS(msg, s) << " (" << c.name << ")";
    }
}

namespace {

const char kQwen2Regex[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+)";

std::string qwen2_pre() {
    return std::string(R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":")") + kQwen2Regex +
           R"("},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false}]})";
}

// Qwen's layout: the Qwen2 Split regex, the NFC normalizer, <|endoftext|> as an added token.
std::string qwen_json(const std::string &normalizer = R"({"type":"NFC"})", const std::string &post = R"({"type":"ByteLevel"})") {
    std::string j = bytelevel_json(qwen2_pre());
    j = subst(j, R"("normalizer":null)", "\"normalizer\":" + normalizer);
    j = subst(j, R"("post_processor":{"type":"ByteLevel"})", "\"post_processor\":" + post);
    j = subst(j, R"({"id":6,"content":"<x>","special":false})", R"({"id":6,"content":"<|endoftext|>","special":true})");
    return j;
}

// Gemma 3's layout: "▁" replacement without a prepend, Split on " ", byte fallback, added whitespace
// tokens (not special), <bos> first by the post-processor, an added token past the model's rows.
const char kGemmaJson[] = R"({"version":"1.0",
  "added_tokens":[{"id":0,"content":"<pad>","special":true},{"id":1,"content":"<eos>","special":true},
                  {"id":2,"content":"<bos>","special":true},{"id":3,"content":"<unk>","special":true},
                  {"id":10,"content":"\n\n","special":false,"normalized":false},
                  {"id":11,"content":"▁▁","special":false,"normalized":false},
                  {"id":12,"content":"<image_soft_token>","special":true}],
  "normalizer":{"type":"Replace","pattern":{"String":" "},"content":"▁"},
  "pre_tokenizer":{"type":"Split","pattern":{"String":" "},"behavior":"MergedWithPrevious","invert":false},
  "post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<bos>","type_id":0}},
                    {"Sequence":{"id":"A","type_id":0}}]},
  "decoder":{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},
             {"type":"ByteFallback"},{"type":"Fuse"}]},
  "model":{"type":"BPE","byte_fallback":true,"unk_token":"<unk>","fuse_unk":true,
           "vocab":{"<pad>":0,"<eos>":1,"<bos>":2,"<unk>":3,"<0x41>":4,"▁":5,"h":6,"i":7,"hi":8,"▁hi":9,
                    "\n\n":10,"▁▁":11},
           "merges":[["▁","▁"],["h","i"],["▁","hi"]]}})";

}  // namespace

TEST(HfTokenizer, Qwen2PreTokenizerAndNfc) {
    const std::string dir = folder("qwen", {{"tokenizer.json", qwen_json()},
                                            {"tokenizer_config.json", R"({"eos_token":"<|end|>","add_bos_token":false,"bos_token":null})"}});
    HfVocab H;
    std::string msg;
    ASSERT_EQ(load(dir, &H, &msg), BITNET_OK) << msg;
    EXPECT_STREQ(H.v->model, "gpt2");
    EXPECT_STREQ(H.v->pre, "qwen2");
    EXPECT_EQ(H.v->eos_id, 5);
    EXPECT_EQ(H.v->add_eos, -1);  // the ByteLevel post-processor adds nothing
    // the runtime reads "qwen2" with its single digits
    const std::string out = g_dir + "/qwen.gguf";
    bitnet_error err{};
    ASSERT_EQ(bitnet_hf_vocab_write_vocab_only(H.v, "qwen3", nullptr, out.c_str(), &err), BITNET_OK) << err.msg;
    Gguf G;
    ASSERT_EQ(bitnet_gguf_open(out.c_str(), &G.g, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(gguf_str(G.g, "tokenizer.ggml.pre"), "qwen2");
    // refused: the Qwen2 regex without NFC, NFC with another pre-tokenizer, another normalizer
    const std::vector<std::pair<std::string, std::string>> bad = {
        {subst(qwen_json(), R"("normalizer":{"type":"NFC"})", R"("normalizer":null)"), "the Qwen2 Split regex without the NFC normalizer"},
        {subst(bytelevel_json(llama3_pre()), R"("normalizer":null)", R"("normalizer":{"type":"NFC"})"),
         "normalizer {\"type\":\"NFC\"} is not supported with the llama-bpe pre-tokenizer"},
        {qwen_json(R"({"type":"NFKC"})"), "normalizer {\"type\":\"NFKC\"} is not supported with the qwen2 pre-tokenizer"},
    };
    int i = 0;
    for (const auto &b : bad) {
        const std::string d = folder("qwenbad" + std::to_string(i++), {{"tokenizer.json", b.first}});
        HfVocab B;
        EXPECT_EQ(load(d, &B, &msg), BITNET_ERR_UNSUPPORTED) << b.second;
        EXPECT_HAS(msg, b.second);
        EXPECT_HAS(msg, "tokenizer.json");
    }
}

TEST(HfTokenizer, AppendedTokenIsTheEos) {
    // a template "A <|endoftext|>" (Qwen3-Embedding's tokenizer.json): the appended token is the EOS and
    // add_eos is on; the config's eos_token <|end|> becomes the end of turn
    const std::string post = R"({"type":"TemplateProcessing","single":[{"Sequence":{"id":"A","type_id":0}},
        {"SpecialToken":{"id":"<|endoftext|>","type_id":0}}]})";
    const std::string dir = folder("appended", {{"tokenizer.json", qwen_json(R"({"type":"NFC"})", post)},
                                                {"tokenizer_config.json", R"({"eos_token":"<|end|>"})"}});
    HfVocab H;
    std::string msg;
    ASSERT_EQ(load(dir, &H, &msg), BITNET_OK) << msg;
    EXPECT_EQ(H.v->eos_id, 6);
    EXPECT_EQ(H.v->eot_id, 5);
    EXPECT_EQ(H.v->add_eos, 1);
    EXPECT_EQ(H.v->add_bos, 0);
    // an explicit add_eos_token = false in the config wins over the template (the EOS id stays the appended one)
    const std::string d2 = folder("appended_off", {{"tokenizer.json", qwen_json(R"({"type":"NFC"})", post)},
                                                   {"tokenizer_config.json", R"({"eos_token":"<|end|>","add_eos_token":false})"}});
    HfVocab H2;
    ASSERT_EQ(load(d2, &H2, &msg), BITNET_OK) << msg;
    EXPECT_EQ(H2.v->add_eos, 0);
    EXPECT_EQ(H2.v->eos_id, 6);
    // the runtime appends it with add_special
    const std::string out = g_dir + "/appended.gguf";
    bitnet_error err{};
    ASSERT_EQ(bitnet_hf_vocab_write_vocab_only(H.v, "qwen3", nullptr, out.c_str(), &err), BITNET_OK) << err.msg;
    Gguf G;
    ASSERT_EQ(bitnet_gguf_open(out.c_str(), &G.g, &err), BITNET_OK) << err.msg;
    bitnet_vocab *rv = nullptr;
    ASSERT_EQ(bitnet_vocab_load(G.g, &rv, &err), BITNET_OK) << err.msg;
    int32_t *ids = nullptr;
    size_t nid = 0;
    ASSERT_EQ(bitnet_tokenize(rv, "ab", 2, true, true, &ids, &nid, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(std::vector<int32_t>(ids, ids + nid), std::vector<int32_t>({2, 6}));
    std::free(ids);
    EXPECT_EQ(bitnet_vocab_eot(rv), 5);
    bitnet_vocab_free(rv);
}

TEST(HfTokenizer, ApplyArchQwen3) {
    const std::string dir = folder("archqwen", {{"tokenizer.json", qwen_json()},
                                                {"tokenizer_config.json", R"({"eos_token":"<|end|>","add_bos_token":false})"}});
    HfVocab H;
    std::string msg;
    ASSERT_EQ(load(dir, &H, &msg), BITNET_OK) << msg;
    bitnet_error err{};
    ASSERT_EQ(bitnet_hf_vocab_apply_arch(H.v, "llama", &err), BITNET_OK);  // other architectures: no change
    EXPECT_EQ(H.v->eos_id, 5);
    EXPECT_EQ(H.v->add_eos, -1);
    ASSERT_EQ(bitnet_hf_vocab_apply_arch(H.v, "qwen3", &err), BITNET_OK) << err.msg;
    EXPECT_EQ(H.v->eos_id, 6);  // <|endoftext|>
    EXPECT_EQ(H.v->eot_id, 5);  // the config's <|im_end|>-like EOS is the end of turn
    EXPECT_EQ(H.v->add_eos, 1);
    EXPECT_EQ(H.v->add_bos, 0);
    const std::string out = g_dir + "/archqwen.gguf";
    ASSERT_EQ(bitnet_hf_vocab_write_vocab_only(H.v, "qwen3", nullptr, out.c_str(), &err), BITNET_OK) << err.msg;
    Gguf G;
    ASSERT_EQ(bitnet_gguf_open(out.c_str(), &G.g, &err), BITNET_OK) << err.msg;
    bool add_eos = false;
    uint32_t eos = 0;
    EXPECT_EQ(bitnet_gguf_get_bool(G.g, "tokenizer.ggml.add_eos_token", &add_eos, &err), BITNET_OK);
    EXPECT_TRUE(add_eos);
    EXPECT_EQ(bitnet_gguf_get_u32(G.g, "tokenizer.ggml.eos_token_id", &eos, &err), BITNET_OK);
    EXPECT_EQ(eos, 6u);
    // a qwen3 vocabulary without <|endoftext|>
    const std::string d2 = folder("archqwen_noeot", {{"tokenizer.json", bytelevel_json(llama3_pre())}});
    HfVocab N;
    ASSERT_EQ(load(d2, &N, &msg), BITNET_OK) << msg;
    EXPECT_EQ(bitnet_hf_vocab_apply_arch(N.v, "qwen3", &err), BITNET_ERR_FORMAT);
    EXPECT_HAS(std::string(err.msg), "a qwen3 tokenizer without the token <|endoftext|>");
}

TEST(HfTokenizer, GemmaStyleTokenizerJson) {
    const std::string dir = folder("gemma", {{"tokenizer.json", kGemmaJson},
                                             {"tokenizer_config.json", R"({"bos_token":"<bos>","eos_token":"<eos>",
        "unk_token":"<unk>","pad_token":"<pad>","add_bos_token":true,"add_eos_token":false})"}});
    HfVocab H;
    std::string msg;
    ASSERT_EQ(load(dir, &H, &msg), BITNET_OK) << msg;
    bitnet_hf_vocab *v = H.v;
    EXPECT_STREQ(v->model, "llama");
    EXPECT_STREQ(v->pre, "default");
    EXPECT_EQ(v->add_space_prefix, 0);  // no Prepend
    ASSERT_EQ(v->n_tokens, 13);
    EXPECT_EQ(v->token_types[10], BITNET_TOKEN_USER_DEFINED);
    EXPECT_EQ(v->token_types[11], BITNET_TOKEN_USER_DEFINED);
    EXPECT_EQ(v->token_types[3], BITNET_TOKEN_UNKNOWN);
    EXPECT_EQ(v->token_types[4], BITNET_TOKEN_BYTE);
    EXPECT_EQ(v->bos_id, 2);
    EXPECT_EQ(v->eos_id, 1);
    EXPECT_EQ(v->unk_id, 3);
    EXPECT_EQ(v->add_bos, 1);
    EXPECT_EQ(v->add_eos, 0);
    EXPECT_EQ(v->scores[11], -0.0f);  // ▁▁: merge 0
    EXPECT_EQ(v->scores[8], -1.0f);   // hi
    EXPECT_EQ(v->scores[9], -2.0f);   // ▁hi
    bitnet_error err{};
    ASSERT_EQ(bitnet_hf_vocab_apply_arch(v, "gemma3", &err), BITNET_OK) << err.msg;
    // bitnet.cpp's scores: added tokens -1000, merge products -(rank), single characters and bytes 0
    EXPECT_EQ(v->scores[11], -1000.0f);
    EXPECT_EQ(v->scores[10], -1000.0f);
    EXPECT_EQ(v->scores[2], -1000.0f);
    EXPECT_EQ(v->scores[3], -1000.0f);
    EXPECT_EQ(v->scores[8], -1.0f);
    EXPECT_EQ(v->scores[5], 0.0f);
    EXPECT_EQ(v->scores[4], 0.0f);
    EXPECT_EQ(v->add_space_prefix, 0);
    ASSERT_EQ(bitnet_hf_vocab_pad(v, 12, &err), BITNET_OK) << err.msg;  // <image_soft_token> has no row
    const std::string out = g_dir + "/gemma.gguf";
    ASSERT_EQ(bitnet_hf_vocab_write_vocab_only(v, "gemma3", nullptr, out.c_str(), &err), BITNET_OK) << err.msg;
    Gguf G;
    ASSERT_EQ(bitnet_gguf_open(out.c_str(), &G.g, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(gguf_str(G.g, "tokenizer.ggml.model"), "llama");
    EXPECT_EQ(gguf_str(G.g, "tokenizer.ggml.pre"), "default");
    bool prefix = true;
    EXPECT_EQ(bitnet_gguf_get_bool(G.g, "tokenizer.ggml.add_space_prefix", &prefix, &err), BITNET_OK);
    EXPECT_FALSE(prefix);
    bitnet_vocab *rv = nullptr;
    ASSERT_EQ(bitnet_vocab_load(G.g, &rv, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(bitnet_vocab_n_tokens(rv), 12);
    int32_t *ids = nullptr;
    size_t nid = 0;
    // <bos>, "hi", "▁hi", "\n\n" (added token), "A" by byte fallback, "▁▁" last of the merges
    const std::string text = "hi hi\n\nA  ";
    ASSERT_EQ(bitnet_tokenize(rv, text.data(), text.size(), true, true, &ids, &nid, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(std::vector<int32_t>(ids, ids + nid), std::vector<int32_t>({2, 8, 9, 10, 4, 11}));
    const size_t n = bitnet_detokenize(rv, ids, nid, false, nullptr, 0);
    std::string back(n, '\0');
    bitnet_detokenize(rv, ids, nid, false, &back[0], n);
    EXPECT_EQ(back, text);
    std::free(ids);
    bitnet_vocab_free(rv);
    // a pre-tokenizer step that would split differently is refused
    const std::string d2 = folder("gemmabad", {{"tokenizer.json", subst(kGemmaJson, R"("pattern":{"String":" "},"behavior")",
                                                                         R"("pattern":{"String":"x"},"behavior")")}});
    HfVocab B;
    EXPECT_EQ(load(d2, &B, &msg), BITNET_ERR_UNSUPPORTED);
    EXPECT_HAS(msg, "pre_tokenizer step {\"type\":\"Split\"");
}
