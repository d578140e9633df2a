// test_tokenizer.cc — the tokenizers and detokenizers of src/text/tokenizer.c on small inputs:
// SentencePiece-style: the bitnet.cpp case (prompt ids from expected.json), an independent naive merge
// reference on random strings, byte fallback, special tokens, invalid UTF-8, the vocabulary keys and
// their errors; Gemma 3's layout (no space prefix, added whitespace tokens). Byte-level BPE: merges by rank
// on hand-made vocabularies (with an independent naive reference), ignore_merges, the pre-tokenizer
// regexes on tricky input (Qwen2's single digits too), NFC before the "qwen2" regex, add_eos, special tokens
// on and off. Unicode NFC against Python's unicodedata (tests/tokenizer-refs/nfc.json). The UTF-8-safe
// streaming output and bitnet_detokenize. (The real Llama 3 / Llama 2 vocabularies are
// in test_tokenizer_refs.cc, the Hugging Face file import in test_hf_tokenizer.cc.)
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <json-c/json.h>

#include "base/gguf.h"
#include "test_util.h"
#include "text/tokenizer.h"

namespace {

const std::string kTiny = std::string(BITNET_TEST_DATA_DIR) + "/bitnetcpp-tiny/ggml-model-i2_s.gguf";

struct Vocab {
    bitnet_gguf *g = nullptr;
    bitnet_vocab *v = nullptr;
    ~Vocab() {
        bitnet_vocab_free(v);
        bitnet_gguf_close(g);
    }
};

void load(const std::string &path, Vocab *out) {
    bitnet_error err{};
    ASSERT_EQ(bitnet_gguf_open(path.c_str(), &out->g, &err), BITNET_OK) << err.msg;
    ASSERT_EQ(bitnet_vocab_load(out->g, &out->v, &err), BITNET_OK) << err.msg;
}

std::vector<int32_t> tok(const bitnet_vocab *v, const std::string &s, bool bos, bool special) {
    int32_t *ids = nullptr;
    size_t n = 0;
    bitnet_error err{};
    EXPECT_EQ(bitnet_tokenize(v, s.data(), s.size(), bos, special, &ids, &n, &err), BITNET_OK) << err.msg;
    std::vector<int32_t> r(ids, ids + n);
    std::free(ids);
    return r;
}

std::string piece(const bitnet_vocab *v, int32_t id, bool special = false) {
    char small[4];
    size_t n = bitnet_token_to_piece(v, id, special, small, sizeof small);
    std::string s(n, '\0');
    if (n > 0) {
        EXPECT_EQ(bitnet_token_to_piece(v, id, special, &s[0], n), n);
    }
    return s;
}

std::string detok(const bitnet_vocab *v, const std::vector<int32_t> &ids, bool special = false) {
    std::string s;
    for (int32_t id : ids) s += piece(v, id, special);
    return s;
}

// The tiny vocabulary has no "▁" token: a lone "▁" falls back to its three byte tokens, which print
// as the raw bytes of U+2581 (as in llama.cpp). Round trips compare after mapping U+2581 to a space.
std::string unmark(std::string s) {
    for (size_t i; (i = s.find("\xE2\x96\x81")) != std::string::npos;) s.replace(i, 3, " ");
    return s;
}

// ---- Independent reference: the naive quadratic form of the SPM merge loop -----------------------
// pieces = UTF-8 characters (bad bytes alone); repeat: among all adjacent pairs whose concatenation is
// a token, merge the one with the highest score, leftmost on ties; then ids or byte tokens.
size_t ref_char_len(const std::string &s, size_t i) {
    const unsigned char c = s[i];
    auto cont = [&](size_t k) { return i + k < s.size() && ((unsigned char)s[i + k] & 0xC0) == 0x80; };
    auto b1 = [&]() { return (unsigned char)s[i + 1]; };
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF && cont(1)) return 2;
    if (c >= 0xE0 && c <= 0xEF && cont(1) && cont(2)) {
        if (c == 0xE0 && b1() < 0xA0) return 1;
        if (c == 0xED && b1() > 0x9F) return 1;
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4 && cont(1) && cont(2) && cont(3)) {
        if (c == 0xF0 && b1() < 0x90) return 1;
        if (c == 0xF4 && b1() > 0x8F) return 1;
        return 4;
    }
    return 1;
}

std::vector<int32_t> ref_tokenize(const bitnet_vocab *v, const std::string &text) {
    if (text.empty()) return {};  // no fragment at all: no space prefix either
    std::string e = "\xE2\x96\x81";  // space prefix
    for (char c : text) e += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
    std::vector<std::string> p;
    for (size_t i = 0; i < e.size();) {
        size_t l = ref_char_len(e, i);
        p.push_back(e.substr(i, l));
        i += l;
    }
    for (;;) {
        int best = -1;
        float best_score = 0;
        for (size_t i = 0; i + 1 < p.size(); i++) {
            const std::string c = p[i] + p[i + 1];
            const int32_t id = bitnet_vocab_find(v, c.data(), c.size());
            if (id < 0) continue;
            const float sc = bitnet_vocab_score(v, id);
            if (best < 0 || sc > best_score) {
                best = (int)i;
                best_score = sc;
            }
        }
        if (best < 0) break;
        p[best] += p[best + 1];
        p.erase(p.begin() + best + 1);
    }
    std::vector<int32_t> out;
    for (const std::string &s : p) {
        const int32_t id = bitnet_vocab_find(v, s.data(), s.size());
        if (id >= 0) {
            out.push_back(id);
            continue;
        }
        for (unsigned char b : s) {
            char name[8];
            std::snprintf(name, sizeof name, "<0x%02X>", b);
            out.push_back(bitnet_vocab_find(v, name, 6));
        }
    }
    return out;
}

// ---- Writing small vocabularies -----------------------------------------------------------------
std::string g_dir;

::testing::Environment *const g_env =
    ::testing::AddGlobalTestEnvironment(new bitnet_test::TempDirEnv("bitnet_tok_", &g_dir));

struct VocabSpec {
    std::string model = "llama";
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<int32_t> types;
    std::vector<std::pair<std::string, int64_t>> ids;  // key suffix → value (int32)
    std::vector<std::pair<std::string, bool>> flags;
    std::vector<std::string> merges;                   // tokenizer.ggml.merges (BPE)
    std::vector<std::pair<std::string, std::string>> strs; // key suffix → string value (e.g. "pre")
};

// <unk>, <s>, </s>, all 256 byte tokens, then `extra` normal tokens with the given scores.
VocabSpec base_spec(const std::vector<std::pair<std::string, float>> &extra) {
    VocabSpec s;
    s.tokens = {"<unk>", "<s>", "</s>"};
    s.types = {BITNET_TOKEN_UNKNOWN, BITNET_TOKEN_CONTROL, BITNET_TOKEN_CONTROL};
    for (int b = 0; b < 256; b++) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        s.tokens.push_back(name);
        s.types.push_back(BITNET_TOKEN_BYTE);
    }
    s.scores.assign(s.tokens.size(), 0.0f);
    for (const auto &e : extra) {
        s.tokens.push_back(e.first);
        s.scores.push_back(e.second);
        s.types.push_back(BITNET_TOKEN_NORMAL);
    }
    s.ids = {{"bos_token_id", 1}, {"eos_token_id", 2}};
    return s;
}

std::string write_vocab(const VocabSpec &s, const std::string &name) {
    bitnet_gguf_writer *w = bitnet_gguf_writer_new();
    bitnet_gguf_set_str(w, "tokenizer.ggml.model", s.model.c_str());
    std::vector<const char *> p;
    for (const std::string &t : s.tokens) p.push_back(t.c_str());
    if (!s.tokens.empty()) bitnet_gguf_set_arr_str(w, "tokenizer.ggml.tokens", p.data(), p.size());
    if (!s.scores.empty()) bitnet_gguf_set_arr(w, "tokenizer.ggml.scores", BITNET_GGUF_FLOAT32, s.scores.data(), s.scores.size());
    if (!s.types.empty()) bitnet_gguf_set_arr(w, "tokenizer.ggml.token_type", BITNET_GGUF_INT32, s.types.data(), s.types.size());
    for (const auto &k : s.ids) bitnet_gguf_set_i32(w, ("tokenizer.ggml." + k.first).c_str(), (int32_t)k.second);
    for (const auto &k : s.flags) bitnet_gguf_set_bool(w, ("tokenizer.ggml." + k.first).c_str(), k.second);
    for (const auto &k : s.strs) bitnet_gguf_set_str(w, ("tokenizer.ggml." + k.first).c_str(), k.second.c_str());
    std::vector<const char *> m;
    for (const std::string &t : s.merges) m.push_back(t.c_str());
    if (!s.merges.empty()) bitnet_gguf_set_arr_str(w, "tokenizer.ggml.merges", m.data(), m.size());
    const std::string path = g_dir + "/" + name + ".gguf";
    bitnet_error err{};
    EXPECT_EQ(bitnet_gguf_write_begin(w, path.c_str(), &err), BITNET_OK) << err.msg;
    EXPECT_EQ(bitnet_gguf_write_end(w, &err), BITNET_OK) << err.msg;
    bitnet_gguf_writer_free(w);
    return path;
}

bitnet_status load_status(const VocabSpec &s, const std::string &name, std::string *msg) {
    const std::string path = write_vocab(s, name);
    bitnet_gguf *g = nullptr;
    bitnet_error err{};
    EXPECT_EQ(bitnet_gguf_open(path.c_str(), &g, &err), BITNET_OK) << err.msg;
    bitnet_vocab *v = reinterpret_cast<bitnet_vocab *>(0x1);
    bitnet_status st = bitnet_vocab_load(g, &v, &err);
    if (st == BITNET_OK) bitnet_vocab_free(v);
    else EXPECT_EQ(v, nullptr);
    bitnet_gguf_close(g);
    *msg = err.msg;
    return st;
}

#define EXPECT_HAS(msg, sub) EXPECT_NE((msg).find(sub), std::string::npos) << "'" << (msg) << "' lacks '" << (sub) << "'"

const std::string U2581 = "\xE2\x96\x81";

}  // namespace

// ---- The bitnet.cpp case -----------------------------------------------------------------------------

TEST(TokenizerBitnetCpp, PromptIdsMatchBitnetCpp) {
    Vocab V;
    load(kTiny, &V);
    EXPECT_EQ(bitnet_vocab_n_tokens(V.v), 512);
    EXPECT_EQ(bitnet_vocab_bos(V.v), 1);
    EXPECT_EQ(bitnet_vocab_eos(V.v), 2);
    EXPECT_EQ(bitnet_vocab_unk(V.v), 0);
    EXPECT_TRUE(bitnet_vocab_add_bos(V.v));
    EXPECT_FALSE(bitnet_vocab_add_eos(V.v));
    EXPECT_STREQ(bitnet_vocab_text(V.v, 1), "<s>");
    EXPECT_EQ(bitnet_vocab_type(V.v, 1), BITNET_TOKEN_CONTROL);
    EXPECT_EQ(bitnet_vocab_type(V.v, 3), BITNET_TOKEN_BYTE);
    EXPECT_EQ(bitnet_vocab_type(V.v, 512), -1);
    EXPECT_EQ(bitnet_vocab_text(V.v, -1), nullptr);
    EXPECT_TRUE(bitnet_vocab_is_eog(V.v, 2));
    EXPECT_FALSE(bitnet_vocab_is_eog(V.v, 1));
    const std::vector<int32_t> want = {1, 450, 439, 293, 110, 289, 307, 122, 113, 285, 114, 123, 432, 398, 115, 118};
    EXPECT_EQ(tok(V.v, "The quick brown fox jumps", true, false), want);
    EXPECT_EQ(tok(V.v, "The quick brown fox jumps", true, true), want);
    const std::vector<int32_t> no_bos(want.begin() + 1, want.end());
    EXPECT_EQ(tok(V.v, "The quick brown fox jumps", false, false), no_bos);
    EXPECT_EQ(detok(V.v, no_bos), " The quick brown fox jumps");
    EXPECT_EQ(detok(V.v, want), " The quick brown fox jumps");        // BOS prints nothing ...
    EXPECT_EQ(detok(V.v, want, true), "<s> The quick brown fox jumps");  // ... unless special
}

TEST(TokenizerBitnetCpp, AgreesWithNaiveReference) {
    Vocab V;
    load(kTiny, &V);
    // alphabet of the vocabulary's pieces plus spaces, a 2-byte char and a stray continuation byte
    const std::vector<std::string> alpha = {"a", "e", "t", "h", "o", "n", "s", " ", " ", "T", "qu", "x", "é", "\x80", "in", "the"};
    uint64_t st = 2463534242ull;
    for (int rep = 0; rep < 2000; rep++) {
        std::string s;
        st ^= st << 13, st ^= st >> 7, st ^= st << 17;
        const int len = (int)(st % 24);
        for (int i = 0; i < len; i++) {
            st ^= st << 13, st ^= st >> 7, st ^= st << 17;
            s += alpha[st % alpha.size()];
        }
        ASSERT_EQ(tok(V.v, s, false, false), ref_tokenize(V.v, s)) << "text '" << s << "'";
        ASSERT_EQ(unmark(detok(V.v, tok(V.v, s, false, false))), s.empty() ? "" : " " + s) << "text '" << s << "'";
    }
}

TEST(TokenizerBitnetCpp, EmptyAndSpaces) {
    Vocab V;
    load(kTiny, &V);
    EXPECT_EQ(tok(V.v, "", true, false), std::vector<int32_t>({1}));
    EXPECT_EQ(tok(V.v, "", false, false), std::vector<int32_t>());
    int32_t *ids = nullptr;
    size_t n = 99;
    bitnet_error err{};
    ASSERT_EQ(bitnet_tokenize(V.v, nullptr, 0, false, false, &ids, &n, &err), BITNET_OK);
    EXPECT_EQ(n, 0u);
    EXPECT_NE(ids, nullptr);
    std::free(ids);
    for (const std::string s : {" ", "   ", "a  b", "  x  "}) {
        std::vector<int32_t> t = tok(V.v, s, false, false);
        EXPECT_EQ(t, ref_tokenize(V.v, s)) << "'" << s << "'";
        EXPECT_EQ(unmark(detok(V.v, t)), " " + s) << "'" << s << "'";
    }
}

TEST(TokenizerBitnetCpp, ByteFallbackRoundTrips) {
    Vocab V;
    load(kTiny, &V);
    for (const std::string s : {"Привет", "🙂 ok", "漢字かな", "naïve café"}) {
        std::vector<int32_t> t = tok(V.v, s, false, false);
        EXPECT_EQ(unmark(detok(V.v, t)), " " + s) << s;
        EXPECT_EQ(t, ref_tokenize(V.v, s)) << s;
        // every non-ASCII byte of the text became its own <0xXX> BYTE token (plus those of a lone "▁"
        // and of ASCII characters the tiny vocabulary lacks)
        size_t n_bytes = 0;
        for (int32_t id : t) n_bytes += bitnet_vocab_type(V.v, id) == BITNET_TOKEN_BYTE;
        size_t non_ascii = 0;
        for (unsigned char c : s) non_ascii += c >= 0x80;
        EXPECT_GE(n_bytes, non_ascii) << s;
    }
    // "П" = D0 9F → <0xD0> <0x9F>, ids 3 + byte
    std::vector<int32_t> t = tok(V.v, "П", false, false);
    ASSERT_GE(t.size(), 2u);
    EXPECT_EQ(t[t.size() - 2], 3 + 0xD0);
    EXPECT_EQ(t[t.size() - 1], 3 + 0x9F);
    EXPECT_EQ(piece(V.v, 3 + 0xD0), std::string("\xD0"));
}

TEST(TokenizerBitnetCpp, InvalidUtf8DoesNotCrash) {
    Vocab V;
    load(kTiny, &V);
    const std::string cases[] = {
        std::string("\xff\xfe abc \xc3", 9), std::string("\xe2\x96", 2), std::string("a\x80\x80z", 4),
        std::string("\xed\xa0\x80", 3),     // a surrogate: three bad bytes
        std::string("\xf0\x9f\x99", 3),     // truncated 4-byte sequence
        std::string("nul\0byte", 8), std::string("\xc0\xaf", 2),
    };
    for (const std::string &s : cases) {
        std::vector<int32_t> t = tok(V.v, s, false, false);
        EXPECT_EQ(unmark(detok(V.v, t)), " " + s);
        EXPECT_EQ(t, ref_tokenize(V.v, s));
    }
}

TEST(TokenizerBitnetCpp, ControlTokensAndParseSpecial) {
    Vocab V;
    load(kTiny, &V);
    const std::vector<int32_t> hello = tok(V.v, "hello", false, false);  // "▁hello"
    // parse_special: <s> and </s> become ids; the text after a special token gets the space prefix
    std::vector<int32_t> want = {1};
    want.insert(want.end(), hello.begin(), hello.end());
    want.push_back(2);
    EXPECT_EQ(tok(V.v, "<s>hello</s>", false, true), want);
    // without parse_special they are plain text, tokenized like any other characters
    std::vector<int32_t> plain = tok(V.v, "<s>hello</s>", false, false);
    EXPECT_EQ(plain, ref_tokenize(V.v, "<s>hello</s>"));
    for (int32_t id : plain) {
        EXPECT_NE(id, 1);
        EXPECT_NE(id, 2);
    }
    EXPECT_EQ(unmark(detok(V.v, plain)), " <s>hello</s>");
    // <unk> is special too; text on both sides, repeated tokens
    std::vector<int32_t> t = tok(V.v, "a<unk>b<unk><unk>", false, true);
    std::vector<int32_t> a = tok(V.v, "a", false, false), b = tok(V.v, "b", false, false);
    std::vector<int32_t> w2 = a;
    w2.push_back(0);
    w2.insert(w2.end(), b.begin(), b.end());
    w2.push_back(0);
    w2.push_back(0);
    EXPECT_EQ(t, w2);
    EXPECT_EQ(detok(V.v, t), " a b");
    EXPECT_EQ(detok(V.v, t, true), " a<unk> b<unk><unk>");
}

TEST(TokenizerBitnetCpp, PieceBuffers) {
    Vocab V;
    load(kTiny, &V);
    EXPECT_EQ(bitnet_token_to_piece(V.v, 1, false, nullptr, 0), 0u);
    EXPECT_EQ(bitnet_token_to_piece(V.v, 1, true, nullptr, 0), 3u);
    char buf[2] = {'x', 'x'};
    EXPECT_EQ(bitnet_token_to_piece(V.v, 1, true, buf, 2), 3u);  // full length, truncated write
    EXPECT_EQ(buf[0], '<');
    EXPECT_EQ(buf[1], 's');
    EXPECT_EQ(bitnet_token_to_piece(V.v, 512, true, buf, 2), 0u);
    EXPECT_EQ(bitnet_token_to_piece(V.v, -5, true, buf, 2), 0u);
}

// ---- Small hand-made vocabularies ---------------------------------------------------------------

TEST(TokenizerSpm, ScoresDecideMergesAndTiesGoLeft) {
    // "▁abc": ab (score -1) vs bc (score -2): ab wins; then "▁" + "ab"? not a token; "abc" is.
    VocabSpec s = base_spec({{U2581, -10}, {"ab", -1}, {"bc", -2}, {"abc", -3}, {U2581 + "a", -5}});
    Vocab V;
    load(write_vocab(s, "merge"), &V);
    const int32_t base = 259;  // first extra token
    // ▁a (-5) vs ab (-1): ab first → ▁ | ab | c ; then abc (-3) → ▁ | abc
    EXPECT_EQ(tok(V.v, "abc", false, false), std::vector<int32_t>({base + 0, base + 3}));
    // ties: "aa" token twice with equal score in "aaa": the leftmost pair merges first → aa | a
    VocabSpec t = base_spec({{"aa", -1}});
    t.flags = {{"add_space_prefix", false}};
    Vocab W;
    load(write_vocab(t, "tie"), &W);
    EXPECT_EQ(tok(W.v, "aaa", false, false), std::vector<int32_t>({259, 3 + 'a'}));
    EXPECT_EQ(tok(W.v, "aaaa", false, false), std::vector<int32_t>({259, 259}));
    // a higher score on the right beats position
    VocabSpec u = base_spec({{"ab", -2}, {"bc", -1}});
    u.flags = {{"add_space_prefix", false}};
    Vocab U;
    load(write_vocab(u, "right"), &U);
    EXPECT_EQ(tok(U.v, "abc", false, false), std::vector<int32_t>({3 + 'a', 260}));
}

TEST(TokenizerSpm, FlagsAndFallbacks) {
    // add_bos_token = false, add_eos_token = true, no space prefix
    VocabSpec s = base_spec({{"hi", -1}});
    s.flags = {{"add_bos_token", false}, {"add_eos_token", true}, {"add_space_prefix", false}};
    Vocab V;
    load(write_vocab(s, "flags"), &V);
    EXPECT_FALSE(bitnet_vocab_add_bos(V.v));
    EXPECT_TRUE(bitnet_vocab_add_eos(V.v));
    EXPECT_EQ(tok(V.v, "hi", true, false), std::vector<int32_t>({259, 2}));
    EXPECT_EQ(tok(V.v, "hi", false, false), std::vector<int32_t>({259}));

    // no byte tokens: a one-byte token is used, else <unk>
    VocabSpec n;
    n.tokens = {"<unk>", "<s>", "</s>", "x", U2581};
    n.types = {BITNET_TOKEN_UNKNOWN, BITNET_TOKEN_CONTROL, BITNET_TOKEN_CONTROL, BITNET_TOKEN_NORMAL, BITNET_TOKEN_NORMAL};
    n.scores = {0, 0, 0, 0, 0};
    Vocab N;
    load(write_vocab(n, "nobytes"), &N);
    EXPECT_EQ(tok(N.v, "xé", true, false), std::vector<int32_t>({1, 4, 3, 0, 0}));

    // ... and with no unknown token either: an error naming the byte
    n.ids = {{"unknown_token_id", -1}};
    Vocab M;
    load(write_vocab(n, "nounk"), &M);
    EXPECT_EQ(bitnet_vocab_unk(M.v), -1);
    int32_t *ids = nullptr;
    size_t cnt = 0;
    bitnet_error err{};
    EXPECT_EQ(bitnet_tokenize(M.v, "é", 2, false, false, &ids, &cnt, &err), BITNET_ERR_UNSUPPORTED);
    EXPECT_HAS(std::string(err.msg), "byte 0xC3");
    EXPECT_EQ(ids, nullptr);

    // user-defined tokens are matched even without parse_special, and print as their text
    VocabSpec d = base_spec({{"ab", -1}});
    d.tokens.push_back("<|u|>");
    d.scores.push_back(0);
    d.types.push_back(BITNET_TOKEN_USER_DEFINED);
    d.tokens.push_back("<|c|>");
    d.scores.push_back(0);
    d.types.push_back(BITNET_TOKEN_CONTROL);
    d.tokens.push_back("gone");
    d.scores.push_back(0);
    d.types.push_back(BITNET_TOKEN_UNUSED);
    d.flags = {{"add_space_prefix", false}};
    Vocab D;
    load(write_vocab(d, "user"), &D);
    EXPECT_EQ(tok(D.v, "ab<|u|>ab", false, false), std::vector<int32_t>({259, 260, 259}));
    EXPECT_EQ(piece(D.v, 260), "<|u|>");
    EXPECT_EQ(tok(D.v, "<|c|>", false, true), std::vector<int32_t>({261}));
    EXPECT_EQ(tok(D.v, "<|c|>", false, false).size(), 5u);  // five byte tokens
    EXPECT_EQ(piece(D.v, 261), "");
    EXPECT_EQ(piece(D.v, 261, true), "<|c|>");
    EXPECT_EQ(piece(D.v, 262, true), "");  // unused
}

// Gemma 3 as bitnet.cpp converts it: "llama" with add_space_prefix = false, byte fallback, added
// USER_DEFINED whitespace tokens ("\n\n", "▁▁") with the score -1000.
TEST(TokenizerSpm, GemmaStyleNoSpacePrefix) {
    VocabSpec s = base_spec({{U2581, -1}, {"hi", -2}, {U2581 + "hi", -3}});
    for (const std::string &t : {std::string("\n\n"), U2581 + U2581}) {
        s.tokens.push_back(t);
        s.scores.push_back(-1000);
        s.types.push_back(BITNET_TOKEN_USER_DEFINED);
    }
    s.ids = {{"bos_token_id", 1}, {"eos_token_id", 2}};
    s.flags = {{"add_space_prefix", false}};
    Vocab V;
    load(write_vocab(s, "gemma_style"), &V);
    const bitnet_vocab *v = V.v;
    EXPECT_TRUE(bitnet_vocab_add_bos(v));
    EXPECT_FALSE(bitnet_vocab_add_eos(v));
    // no "▁" in front of the text; each space is one
    EXPECT_EQ(tok(v, "hi hi", true, true), std::vector<int32_t>({1, 260, 261}));
    EXPECT_EQ(tok(v, " hi", false, true), std::vector<int32_t>({261}));
    EXPECT_EQ(tok(v, "hi  hi", false, true), std::vector<int32_t>({260, 259, 261}));  // ▁hi (-3) beats ▁▁ (-1000)
    EXPECT_EQ(tok(v, "  ", false, true), std::vector<int32_t>({263}));                // ... which merges at last
    // byte fallback without a prefix: П = D0 9F
    EXPECT_EQ(tok(v, "\xD0\x9F", false, true), std::vector<int32_t>({3 + 0xD0, 3 + 0x9F}));
    EXPECT_EQ(tok(v, "\xD0\x9F hi", false, true), std::vector<int32_t>({3 + 0xD0, 3 + 0x9F, 261}));
    // newlines are characters (byte fallback here), "\n\n" an added token matched in any text, and no
    // space is put after it
    EXPECT_EQ(tok(v, "a\n\nhi", false, false), std::vector<int32_t>({3 + 'a', 262, 260}));
    EXPECT_EQ(tok(v, "a\nhi", false, false), std::vector<int32_t>({3 + 'a', 3 + '\n', 260}));
    // literal "▁▁" in the input is the added token too (as Hugging Face matches unnormalized added tokens)
    EXPECT_EQ(tok(v, U2581 + U2581, false, false), std::vector<int32_t>({263}));
    // printing: "▁" is a space in USER_DEFINED tokens too; nothing is stripped without the prefix
    EXPECT_EQ(piece(v, 263), "  ");
    for (const std::string t : {"hi  hi", " hi", "  ", "a\n\nhi \xD0\x9F", "\n\n hi\n\n"}) {
        const std::vector<int32_t> ids = tok(v, t, false, true);
        const size_t n = bitnet_detokenize(v, ids.data(), ids.size(), false, nullptr, 0);
        std::string back(n, '\0');
        if (n) bitnet_detokenize(v, ids.data(), ids.size(), false, &back[0], n);
        EXPECT_EQ(back, t);
    }
}

// Thousands of added tokens (Gemma 3 has 6415): the ones whose first bytes are not in the text are skipped,
// the others are still found — one-byte ones, ones sharing their first bytes, at the ends of the text.
TEST(TokenizerSpm, ManyAddedTokens) {
    VocabSpec s = base_spec({{"hi", -1}});
    const int32_t first = (int32_t)s.tokens.size();
    for (int i = 0; i < 3000; i++) {
        s.tokens.push_back("<unused" + std::to_string(i) + ">");
        s.scores.push_back(-1000);
        s.types.push_back(BITNET_TOKEN_USER_DEFINED);
    }
    s.tokens.push_back("\n");
    s.scores.push_back(-1000);
    s.types.push_back(BITNET_TOKEN_USER_DEFINED);
    s.flags = {{"add_space_prefix", false}};
    Vocab V;
    load(write_vocab(s, "many_added"), &V);
    const int32_t nl = first + 3000;
    EXPECT_EQ(tok(V.v, "<unused2999>hi\n<unused7><unused70>", false, false),
              std::vector<int32_t>({first + 2999, 259, nl, first + 7, first + 70}));
    EXPECT_EQ(tok(V.v, "\n", false, false), std::vector<int32_t>({nl}));
    EXPECT_EQ(tok(V.v, "hi<unused", false, false), std::vector<int32_t>({259, 3 + '<', 3 + 'u', 3 + 'n', 3 + 'u', 3 + 's', 3 + 'e', 3 + 'd'}));
    EXPECT_EQ(tok(V.v, "hi", false, false), std::vector<int32_t>({259}));
}

TEST(TokenizerSpm, LongTextIsLinearish) {
    // 200 KB of text tokenizes (the heap keeps the merge loop O(n log n))
    VocabSpec s = base_spec({{U2581, -1}, {"ab", -2}, {"abab", -3}, {U2581 + "abab", -4}});
    Vocab V;
    load(write_vocab(s, "long"), &V);
    std::string text;
    for (int i = 0; i < 40000; i++) text += "abab ";
    std::vector<int32_t> t = tok(V.v, text, false, false);
    EXPECT_EQ(t.size(), 40001u);  // ▁abab × 40000, then a trailing ▁
    EXPECT_EQ(t[0], 262);
    EXPECT_EQ(t.back(), 259);
    EXPECT_EQ(detok(V.v, t), " " + text);
}

TEST(TokenizerSpm, LoadErrors) {
    std::string msg;
    VocabSpec s = base_spec({});
    s.model = "bert";
    EXPECT_EQ(load_status(s, "bert", &msg), BITNET_ERR_UNSUPPORTED);
    EXPECT_HAS(msg, "tokenizer.ggml.model = \"bert\" is not supported");
    s.model = "gpt2"; // byte-level BPE needs its merges
    EXPECT_EQ(load_status(s, "gpt2", &msg), BITNET_ERR_FORMAT);
    EXPECT_HAS(msg, "missing key 'tokenizer.ggml.merges'");

    s = base_spec({});
    s.scores.pop_back();
    EXPECT_EQ(load_status(s, "scores", &msg), BITNET_ERR_FORMAT);
    EXPECT_HAS(msg, "tokenizer.ggml.scores is 258 × float32, expected 259");

    s = base_spec({});
    s.types.push_back(1);
    EXPECT_EQ(load_status(s, "types", &msg), BITNET_ERR_FORMAT);
    EXPECT_HAS(msg, "tokenizer.ggml.token_type is 260");

    s = base_spec({});
    s.types[5] = 9;
    EXPECT_EQ(load_status(s, "types9", &msg), BITNET_ERR_FORMAT);
    EXPECT_HAS(msg, "token_type[5] = 9");

    s = base_spec({});
    s.tokens[3] = "<0xZZ>";
    EXPECT_EQ(load_status(s, "badbyte", &msg), BITNET_ERR_FORMAT);
    EXPECT_HAS(msg, "token 3 \"<0xZZ>\" has type BYTE");

    s = base_spec({});
    s.ids = {{"bos_token_id", 259}};
    EXPECT_EQ(load_status(s, "bos", &msg), BITNET_ERR_FORMAT);
    EXPECT_HAS(msg, "tokenizer.ggml.bos_token_id = 259 is not a token id");

    s = base_spec({});
    s.tokens.clear();
    EXPECT_EQ(load_status(s, "notokens", &msg), BITNET_ERR_FORMAT);
    EXPECT_HAS(msg, "missing key 'tokenizer.ggml.tokens'");

    // scores and token types are optional: defaults 0 and NORMAL
    s = base_spec({});
    s.scores.clear();
    s.types.clear();
    EXPECT_EQ(load_status(s, "minimal", &msg), BITNET_OK) << msg;
}

// ---- Byte-level BPE ("gpt2") ---------------------------------------------------------------------------
namespace {

// GPT-2's bytes_to_unicode written out the way encoder.py states it (independent of tokenizer_internal.h's
// closed form): the printable ranges keep their code points, the rest get 256, 257, ... in byte order.
std::string gpt2_char(unsigned b) {
    static std::vector<uint32_t> map;
    if (map.empty()) {
        map.assign(256, 0);
        std::vector<bool> kept(256, false);
        for (unsigned c = '!'; c <= '~'; c++) kept[c] = true;
        for (unsigned c = 0xA1; c <= 0xAC; c++) kept[c] = true;
        for (unsigned c = 0xAE; c <= 0xFF; c++) kept[c] = true;
        unsigned n = 0;
        for (unsigned c = 0; c < 256; c++) map[c] = kept[c] ? c : 256 + n++;
    }
    const uint32_t cp = map[b];
    std::string s;
    if (cp < 0x80) s += (char)cp;
    else {
        s += (char)(0xC0 | (cp >> 6));
        s += (char)(0x80 | (cp & 0x3F));
    }
    return s;
}

const char *const kBpeMerges[] = {"h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld",
                                  "b c", "a b", "a a", "ab c", "x y"};

// 256 byte tokens (id = byte), then merge results and a few specials:
// 256 he, 257 ll, 258 hell, 259 hello, 260 Ġw, 261 or, 262 Ġwor, 263 ld, 264 Ġworld, 265 bc, 266 ab,
// 267 aa, 268 abc, 269 xy (CONTROL: a merge must never produce it), 270 <|eot|> (CONTROL),
// 271 <u> (USER_DEFINED), 272 zz (NORMAL, whole-word only: no merge makes it)
VocabSpec bpe_spec(const std::string &pre) {
    VocabSpec s;
    s.model = "gpt2";
    for (unsigned b = 0; b < 256; b++) {
        s.tokens.push_back(gpt2_char(b));
        s.types.push_back(BITNET_TOKEN_NORMAL);
    }
    for (const char *t : {"he", "ll", "hell", "hello", "Ġw", "or", "Ġwor", "ld", "Ġworld", "bc", "ab", "aa", "abc"}) {
        s.tokens.push_back(t);
        s.types.push_back(BITNET_TOKEN_NORMAL);
    }
    s.tokens.push_back("xy");
    s.types.push_back(BITNET_TOKEN_CONTROL);
    s.tokens.push_back("<|eot|>");
    s.types.push_back(BITNET_TOKEN_CONTROL);
    s.tokens.push_back("<u>");
    s.types.push_back(BITNET_TOKEN_USER_DEFINED);
    s.tokens.push_back("zz");
    s.types.push_back(BITNET_TOKEN_NORMAL);
    for (const char *m : kBpeMerges) s.merges.push_back(m);
    if (!pre.empty()) s.strs = {{"pre", pre}};
    s.ids = {{"eos_token_id", 270}};
    return s;
}

int32_t id_of(const bitnet_vocab *v, const std::string &text) { return bitnet_vocab_find(v, text.data(), text.size()); }

std::vector<std::string> pieces(const bitnet_vocab *v, const std::string &s) {
    size_t *ends = nullptr, n = 0;
    bitnet_error err{};
    EXPECT_EQ(bitnet_pretokenize(v, s.data(), s.size(), &ends, &n, &err), BITNET_OK) << err.msg;
    std::vector<std::string> r;
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        r.push_back(s.substr(start, ends[i] - start));
        start = ends[i];
    }
    std::free(ends);
    return r;
}

// Naive GPT-2 BPE of one piece: repeatedly find the lowest-ranked adjacent pair and merge every
// occurrence left to right (encoder.py's loop), then look the symbols up.
std::vector<int32_t> ref_bpe(const bitnet_vocab *v, const std::string &piece) {
    std::vector<std::string> w;
    for (unsigned char c : piece) w.push_back(gpt2_char(c));
    const size_t n_merges = sizeof kBpeMerges / sizeof kBpeMerges[0];
    for (;;) {
        size_t best = n_merges;
        for (size_t i = 0; i + 1 < w.size(); i++) {
            for (size_t r = 0; r < best; r++) {
                if (w[i] + " " + w[i + 1] == kBpeMerges[r] && bitnet_vocab_type(v, id_of(v, w[i] + w[i + 1])) == BITNET_TOKEN_NORMAL) {
                    best = r;
                }
            }
        }
        if (best == n_merges) break;
        const std::string m = kBpeMerges[best];
        const std::string a = m.substr(0, m.find(' ')), b = m.substr(m.find(' ') + 1);
        std::vector<std::string> nw;
        for (size_t i = 0; i < w.size(); i++) {
            if (i + 1 < w.size() && w[i] == a && w[i + 1] == b) {
                nw.push_back(a + b);
                i++;
            } else {
                nw.push_back(w[i]);
            }
        }
        w = nw;
    }
    std::vector<int32_t> ids;
    for (const std::string &t : w) ids.push_back(id_of(v, t));
    return ids;
}

struct TinyBpe {
    Vocab V;
    explicit TinyBpe(const std::string &pre) {
        const std::string path = write_vocab(bpe_spec(pre), "bpe_" + (pre.empty() ? std::string("none") : pre));
        load(path, &V);
    }
};

}  // namespace

TEST(TokenizerBpe, MergesByRank) {
    TinyBpe T("gpt2");
    const bitnet_vocab *v = T.V.v;
    EXPECT_STREQ(bitnet_vocab_model(v), "gpt2");
    EXPECT_STREQ(bitnet_vocab_pre(v), "gpt2");
    EXPECT_EQ(bitnet_vocab_bos(v), -1);           // BPE: no SentencePiece defaults
    EXPECT_FALSE(bitnet_vocab_add_bos(v));
    EXPECT_EQ(tok(v, "hello world", true, false), std::vector<int32_t>({259, 264}));
    EXPECT_EQ(tok(v, "abc", false, false), std::vector<int32_t>({'a', 265}));  // "b c" (rank 9) before "a b" (10)
    EXPECT_EQ(tok(v, "aaa", false, false), std::vector<int32_t>({267, 'a'}));  // equal ranks: leftmost first
    EXPECT_EQ(tok(v, "aaaa", false, false), std::vector<int32_t>({267, 267}));
    EXPECT_EQ(tok(v, "hell", false, false), std::vector<int32_t>({258}));
    EXPECT_EQ(tok(v, "zz", false, false), std::vector<int32_t>({'z', 'z'}));  // no merge makes "zz"
    EXPECT_EQ(tok(v, " ", false, false), std::vector<int32_t>({' '}));
    // a merge whose result is a CONTROL token never applies to text
    EXPECT_EQ(tok(v, "xy", false, false), std::vector<int32_t>({'x', 'y'}));
    EXPECT_EQ(tok(v, "xy", false, true), std::vector<int32_t>({269}));  // ... but the text is the special token
    // the pieces print as the original bytes (GPT-2 alphabet mapped back)
    EXPECT_EQ(detok(v, tok(v, "hello world", false, false)), "hello world");
    EXPECT_EQ(piece(v, 264), " world");
    EXPECT_EQ(piece(v, 0), std::string(1, '\0'));
    EXPECT_EQ(piece(v, 0x0A), "\n");
    EXPECT_EQ(piece(v, 0xAD), "\xAD");
    EXPECT_EQ(piece(v, 0xFF), "\xFF");
    for (unsigned b = 0; b < 256; b++) EXPECT_EQ(piece(v, (int32_t)b), std::string(1, (char)b)) << b;
}

TEST(TokenizerBpe, AgreesWithNaiveReference) {
    TinyBpe T("gpt2");
    const bitnet_vocab *v = T.V.v;
    const std::vector<std::string> alpha = {"a", "b", "c", "h", "e", "l", "o", " ", "w", "r", "d", "x", "y", "\n", "7", "é", "!"};
    uint64_t st = 88172645463325252ull;
    for (int rep = 0; rep < 2000; rep++) {
        std::string s;
        st ^= st << 13, st ^= st >> 7, st ^= st << 17;
        const int len = (int)(st % 20);
        for (int i = 0; i < len; i++) {
            st ^= st << 13, st ^= st >> 7, st ^= st << 17;
            s += alpha[st % alpha.size()];
        }
        std::vector<int32_t> want;
        for (const std::string &p : pieces(v, s)) {
            const std::vector<int32_t> r = ref_bpe(v, p);
            want.insert(want.end(), r.begin(), r.end());
        }
        ASSERT_EQ(tok(v, s, false, false), want) << "text '" << s << "'";
        ASSERT_EQ(detok(v, want), s);
    }
}

TEST(TokenizerBpe, IgnoreMergesForLlama3StylePreTokenizers) {
    // "abc" and "zz" are tokens no merge sequence reaches: the Llama-3-style pre-tokenizers emit a piece
    // that is a token as a whole (tokenizer.json "ignore_merges": true), the GPT-2 one merges.
    for (const char *pre : {"llama-bpe", "falcon3"}) {
        TinyBpe T(pre);
        EXPECT_STREQ(bitnet_vocab_pre(T.V.v), pre);
        EXPECT_EQ(tok(T.V.v, "abc", false, false), std::vector<int32_t>({268})) << pre;
        EXPECT_EQ(tok(T.V.v, "zz", false, false), std::vector<int32_t>({272})) << pre;
        EXPECT_EQ(tok(T.V.v, "xy", false, false), std::vector<int32_t>({'x', 'y'})) << pre; // never a CONTROL token
        EXPECT_TRUE(bitnet_vocab_add_bos(T.V.v) == false); // no BOS id in this vocabulary
    }
    TinyBpe G("gpt2");
    EXPECT_EQ(tok(G.V.v, "abc", false, false), std::vector<int32_t>({'a', 265}));
}

TEST(TokenizerBpe, PreTokenizerLlama3) {
    TinyBpe T("llama-bpe");
    const bitnet_vocab *v = T.V.v;
    using P = std::vector<std::string>;
    // contractions, case-insensitive
    EXPECT_EQ(pieces(v, "I'm DON'T you're"), P({"I", "'m", " DON", "'T", " you", "'re"}));
    EXPECT_EQ(pieces(v, "don't"), P({"don", "'t"}));
    // digits in groups of 1-3, a space before digits is its own piece
    EXPECT_EQ(pieces(v, "1234567 89"), P({"123", "456", "7", " ", "89"}));
    EXPECT_EQ(pieces(v, "x1y22z333w4444"), P({"x", "1", "y", "22", "z", "333", "w", "444", "4"}));
    // whitespace runs and newlines
    EXPECT_EQ(pieces(v, "a\n\n b"), P({"a", "\n\n", " b"}));
    EXPECT_EQ(pieces(v, "  x"), P({" ", " x"}));
    EXPECT_EQ(pieces(v, "x  "), P({"x", "  "}));
    EXPECT_EQ(pieces(v, "!\n\nx"), P({"!\n\n", "x"}));
    EXPECT_EQ(pieces(v, "\t\tfoo"), P({"\t", "\tfoo"}));
    EXPECT_EQ(pieces(v, "a \n b"), P({"a", " \n", " b"}));
    // Unicode classes: CJK letters, emoji (neither letter nor number), a combining mark after a letter
    EXPECT_EQ(pieces(v, "你好 world😀😀"), P({"你好", " world", "😀😀"}));
    EXPECT_EQ(pieces(v, "e\xCC\x81"), P({"e", "\xCC\x81"}));
    EXPECT_EQ(pieces(v, "Привет, мир"), P({"Привет", ",", " мир"}));
    EXPECT_EQ(pieces(v, "½ ²"), P({"½", " ", "²"}));  // \p{N} covers No
    // invalid UTF-8 is never inside a match: it is a piece of its own
    EXPECT_EQ(pieces(v, std::string("a\xff" "b")), P({"a", "\xff", "b"}));
    EXPECT_EQ(pieces(v, std::string("ab\xe2\x96")), P({"ab", "\xe2\x96"}));
    EXPECT_EQ(pieces(v, ""), P());
    // a long whitespace run before a word (deep backtracking in \s+(?!\S)) works and keeps every byte
    const std::string ws(5000, ' ');
    EXPECT_EQ(pieces(v, ws + "x"), P({std::string(4999, ' '), " x"}));
}

TEST(TokenizerBpe, PreTokenizerGpt2) {
    TinyBpe T("default");
    const bitnet_vocab *v = T.V.v;
    using P = std::vector<std::string>;
    EXPECT_EQ(pieces(v, "I'm DON'T you're"), P({"I", "'m", " DON", "'", "T", " you", "'re"}));  // case-sensitive
    EXPECT_EQ(pieces(v, "1234567 89"), P({"1234567", " 89"}));  // digit runs are not split
    EXPECT_EQ(pieces(v, "!\n\nx"), P({"!", "\n", "\n", "x"}));
    EXPECT_EQ(pieces(v, "\t\tfoo"), P({"\t", "\t", "foo"}));
    EXPECT_EQ(pieces(v, "  x"), P({" ", " x"}));
}

TEST(TokenizerBpe, SpecialTokensOnAndOff) {
    TinyBpe T("llama-bpe");
    const bitnet_vocab *v = T.V.v;
    EXPECT_EQ(bitnet_vocab_eos(v), 270);
    EXPECT_TRUE(bitnet_vocab_is_eog(v, 270));
    // parse_special: the CONTROL text is the token; the text around it is tokenized as usual
    EXPECT_EQ(tok(v, "hello<|eot|>hello", false, true), std::vector<int32_t>({259, 270, 259}));
    // without parse_special the CONTROL text is ordinary bytes; USER_DEFINED text is always the token
    const std::vector<int32_t> plain = tok(v, "hello<|eot|>", false, false);
    EXPECT_EQ(plain.front(), 259);
    for (int32_t id : plain) EXPECT_NE(id, 270);
    EXPECT_EQ(detok(v, plain), "hello<|eot|>");
    EXPECT_EQ(tok(v, "ab<u>ab", false, false), std::vector<int32_t>({266, 271, 266}));
    EXPECT_EQ(tok(v, "ab<u>ab", false, true), std::vector<int32_t>({266, 271, 266}));
    // printing: CONTROL only with `special`, USER_DEFINED always, as their plain text
    EXPECT_EQ(detok(v, {259, 270, 271}), "hello<u>");
    EXPECT_EQ(detok(v, {259, 270, 271}, true), "hello<|eot|><u>");
}

TEST(TokenizerBpe, EotFoundByTextAndLoadErrors) {
    std::string msg;
    VocabSpec s = bpe_spec("llama-bpe");
    s.tokens.push_back("<|eot_id|>");
    s.types.push_back(BITNET_TOKEN_CONTROL);
    s.tokens.push_back("<|eom_id|>");
    s.types.push_back(BITNET_TOKEN_CONTROL);
    {
        Vocab V;
        load(write_vocab(s, "bpe_eot"), &V);
        EXPECT_EQ(bitnet_vocab_eot(V.v), 273);
        EXPECT_EQ(bitnet_vocab_eom(V.v), 274);
        EXPECT_TRUE(bitnet_vocab_is_eog(V.v, 273));
        EXPECT_TRUE(bitnet_vocab_is_eog(V.v, 274));
        EXPECT_TRUE(bitnet_vocab_is_eog(V.v, 270));
        EXPECT_FALSE(bitnet_vocab_is_eog(V.v, 259));
    }
    s.ids.push_back({"eot_token_id", 270}); // an explicit key wins over the text search
    {
        Vocab V;
        load(write_vocab(s, "bpe_eot2"), &V);
        EXPECT_EQ(bitnet_vocab_eot(V.v), 270);
    }
    s = bpe_spec("qwen35");
    EXPECT_EQ(load_status(s, "bpe_pre", &msg), BITNET_ERR_UNSUPPORTED);
    EXPECT_HAS(msg, "tokenizer.ggml.pre = \"qwen35\" is not a supported pre-tokenizer");
    EXPECT_HAS(msg, "llama-bpe");
    EXPECT_HAS(msg, "qwen2");
    s = bpe_spec("");
    EXPECT_EQ(load_status(s, "bpe_nopre", &msg), BITNET_OK) << msg;  // absent: "default"
    s = bpe_spec("gpt2");
    s.merges.push_back("nospace");
    EXPECT_EQ(load_status(s, "bpe_merge", &msg), BITNET_ERR_FORMAT);
    EXPECT_HAS(msg, "tokenizer.ggml.merges[14] = \"nospace\" is not two tokens separated by a space");
    s = bpe_spec("gpt2");
    s.merges.push_back("q ");
    EXPECT_EQ(load_status(s, "bpe_merge2", &msg), BITNET_ERR_FORMAT);
    s = bpe_spec("gpt2");
    s.merges.push_back("nosuch token"); // sides that are not tokens can never apply: ignored
    EXPECT_EQ(load_status(s, "bpe_merge3", &msg), BITNET_OK) << msg;
}

TEST(TokenizerBpe, PreTokenizerQwen2) {
    TinyBpe T("qwen2");
    const bitnet_vocab *v = T.V.v;
    EXPECT_STREQ(bitnet_vocab_pre(v), "qwen2");
    using P = std::vector<std::string>;
    // every digit is a piece (Llama 3 groups up to three)
    EXPECT_EQ(pieces(v, "1234567 89"), P({"1", "2", "3", "4", "5", "6", "7", " ", "8", "9"}));
    EXPECT_EQ(pieces(v, "x1y22z333"), P({"x", "1", "y", "2", "2", "z", "3", "3", "3"}));
    EXPECT_EQ(pieces(v, "١٢ ½"), P({"١", "٢", " ", "½"}));  // \p{N}: any script, No too
    // the rest is Llama 3's: case-insensitive contractions, letters with one leading non-letter,
    // punctuation runs with their newlines, whitespace runs
    EXPECT_EQ(pieces(v, "I'm DON'T you're"), P({"I", "'m", " DON", "'T", " you", "'re"}));
    EXPECT_EQ(pieces(v, "a\n\n b"), P({"a", "\n\n", " b"}));
    EXPECT_EQ(pieces(v, "!\n\nx"), P({"!\n\n", "x"}));
    EXPECT_EQ(pieces(v, "\t\tfoo"), P({"\t", "\tfoo"}));
    EXPECT_EQ(pieces(v, "x  "), P({"x", "  "}));
    EXPECT_EQ(pieces(v, "你好 world😀😀"), P({"你好", " world", "😀😀"}));
    // no ignore_merges (Qwen's tokenizer.json has "ignore_merges": false) and no BOS by default
    EXPECT_EQ(tok(v, "abc", false, false), std::vector<int32_t>({'a', 265}));
    EXPECT_EQ(tok(v, "zz", false, false), std::vector<int32_t>({'z', 'z'}));
    EXPECT_FALSE(bitnet_vocab_add_bos(v));
    EXPECT_FALSE(bitnet_vocab_add_eos(v));
}

TEST(TokenizerBpe, Qwen2NormalizesToNfc) {
    // "e" + U+0301 is "é" (C3 A9) after NFC: two byte-level tokens of é's bytes, where Llama 3's
    // pre-tokenizer (no normalizer) keeps e, CC, 81
    TinyBpe Q("qwen2"), L("llama-bpe");
    const std::string decomposed = "e\xCC\x81";
    EXPECT_EQ(tok(Q.V.v, decomposed, false, false), std::vector<int32_t>({0xC3, 0xA9}));
    EXPECT_EQ(tok(L.V.v, decomposed, false, false), std::vector<int32_t>({'e', 0xCC, 0x81}));
    EXPECT_EQ(tok(Q.V.v, "caf" + decomposed + " hello", false, false), tok(Q.V.v, "caf\xC3\xA9 hello", false, false));
    // the pieces of bitnet_pretokenize are those of the text as given
    EXPECT_EQ(pieces(Q.V.v, decomposed), std::vector<std::string>({"e", "\xCC\x81"}));
    // each fragment around a special token is normalized on its own; special text is never normalized
    EXPECT_EQ(tok(Q.V.v, decomposed + "<|eot|>" + decomposed, false, true),
              std::vector<int32_t>({0xC3, 0xA9, 270, 0xC3, 0xA9}));
    EXPECT_EQ(tok(Q.V.v, "e<|eot|>\xCC\x81", false, true), std::vector<int32_t>({'e', 270, 0xCC, 0x81}));
    // invalid UTF-8 next to a combining mark survives the normalizer byte for byte
    EXPECT_EQ(detok(Q.V.v, tok(Q.V.v, std::string("\xFF" "e\xCC\x81\xC3"), false, false)), "\xFF\xC3\xA9\xC3");
}

TEST(TokenizerBpe, AddEosWithAddSpecial) {
    // tokenizer.ggml.add_eos_token = true (the Qwen3 embedding model): add_special appends EOS; BOS only
    // when the vocabulary asks for it too
    VocabSpec s = bpe_spec("qwen2");
    s.flags = {{"add_eos_token", true}};
    Vocab V;
    load(write_vocab(s, "bpe_add_eos"), &V);
    EXPECT_TRUE(bitnet_vocab_add_eos(V.v));
    EXPECT_FALSE(bitnet_vocab_add_bos(V.v));
    EXPECT_EQ(tok(V.v, "hello", true, true), std::vector<int32_t>({259, 270}));
    EXPECT_EQ(tok(V.v, "hello", false, true), std::vector<int32_t>({259}));
    EXPECT_EQ(tok(V.v, "", true, true), std::vector<int32_t>({270}));
    // the EOS text in the input is one more EOS (parse_special), the appended one follows it
    EXPECT_EQ(tok(V.v, "hello<|eot|>", true, true), std::vector<int32_t>({259, 270, 270}));
    s.flags = {{"add_eos_token", true}, {"add_bos_token", true}};
    s.ids.push_back({"bos_token_id", 271});
    Vocab W;
    load(write_vocab(s, "bpe_add_both"), &W);
    EXPECT_EQ(tok(W.v, "hello", true, true), std::vector<int32_t>({271, 259, 270}));
    // an add_eos_token without an EOS id adds nothing
    s = bpe_spec("qwen2");
    s.ids.clear();
    s.flags = {{"add_eos_token", true}};
    Vocab N;
    load(write_vocab(s, "bpe_add_eos_none"), &N);
    EXPECT_FALSE(bitnet_vocab_add_eos(N.v));
    EXPECT_EQ(tok(N.v, "hello", true, true), std::vector<int32_t>({259}));
}

// ---- Unicode NFC ---------------------------------------------------------------------------------------

namespace {

std::string nfc(const std::string &s) {
    char *o = nullptr;
    size_t n = 99;
    bitnet_error err{};
    EXPECT_EQ(bitnet_utf8_nfc(s.data(), s.size(), &o, &n, &err), BITNET_OK) << err.msg;
    EXPECT_NE(o, nullptr);
    std::string r(o ? o : "", n);
    std::free(o);
    return r;
}

}  // namespace

TEST(Nfc, KnownCases) {
    EXPECT_EQ(nfc(""), "");
    EXPECT_EQ(nfc("plain ASCII"), "plain ASCII");
    EXPECT_EQ(nfc("e\xCC\x81"), "\xC3\xA9");                      // e + acute → é
    EXPECT_EQ(nfc("a\xCC\x88\xCC\x84"), "\xC7\x9F");              // a + diaeresis + macron → ǟ (two steps)
    EXPECT_EQ(nfc("A\xCC\x8A\xCC\x81"), "\xC7\xBA");              // Å + acute → Ǻ
    EXPECT_EQ(nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // jamo G A K → 각 (Hangul LV + T)
    EXPECT_EQ(nfc("\xEA\xB0\x80\xE1\x86\xA8"), "\xEA\xB0\x81");   // 가 + K → 각
    EXPECT_EQ(nfc("q\xCC\x87\xCC\xA3"), "q\xCC\xA3\xCC\x87");     // reordered by class (220 before 230)
    EXPECT_EQ(nfc("e\xCC\x96\xCC\x81"), "\xC3\xA9\xCC\x96");      // acute not blocked by a lower class
    EXPECT_EQ(nfc("a\xCC\x81\xCC\x81"), "\xC3\xA1\xCC\x81");      // the second acute is blocked
    EXPECT_EQ(nfc("\xE2\x84\xAB"), "\xC3\x85");                   // Å (U+212B, singleton) → Å
    EXPECT_EQ(nfc("\xCD\x84"), "\xCC\x88\xCC\x81");               // U+0344: non-starter decomposition
    EXPECT_EQ(nfc("\xE0\xA5\x98"), "\xE0\xA4\x95\xE0\xA4\xBC");   // U+0958 is a composition exclusion
    // invalid UTF-8 is kept byte for byte and composes with nothing
    EXPECT_EQ(nfc(std::string("\xFF" "e\xCC\x81\xC3", 5)), std::string("\xFF\xC3\xA9\xC3", 4));
    EXPECT_EQ(nfc(std::string("e\x80\xCC\x81", 4)), std::string("e\x80\xCC\x81", 4));
    EXPECT_EQ(nfc(std::string("nul\0e\xCC\x81", 7)), std::string("nul\0\xC3\xA9", 6));
    char *o = nullptr;
    size_t n = 0;
    bitnet_error err{};
    EXPECT_EQ(bitnet_utf8_nfc(nullptr, 0, &o, &n, &err), BITNET_OK);
    EXPECT_EQ(n, 0u);
    std::free(o);
    EXPECT_EQ(bitnet_utf8_nfc(nullptr, 3, &o, &n, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_EQ(o, nullptr);
}

// Against Python's unicodedata on every code point that NFC or NFD changes, Hangul and random strings of
// combining marks (tests/tokenizer-refs/nfc.json, make_nfc_refs.py).
TEST(Nfc, AgreesWithPythonUnicodedata) {
    const std::string path = std::string(BITNET_SOURCE_DIR) + "/tests/tokenizer-refs/nfc.json";
    json_object *root = json_object_from_file(path.c_str());
    ASSERT_NE(root, nullptr) << path;
    json_object *cases = nullptr;
    ASSERT_TRUE(json_object_object_get_ex(root, "cases", &cases));
    const size_t n = json_object_array_length(cases);
    ASSERT_GT(n, 5000u);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *c = json_object_array_get_idx(cases, i);
        json_object *a = json_object_array_get_idx(c, 0), *b = json_object_array_get_idx(c, 1);
        const std::string in(json_object_get_string(a), (size_t)json_object_get_string_len(a));
        const std::string want(json_object_get_string(b), (size_t)json_object_get_string_len(b));
        const std::string got = nfc(in);
        if (got != want && ++bad <= 10) ADD_FAILURE() << "case " << i << ": \"" << in << "\" → \"" << got << "\", want \"" << want << "\"";
        if (nfc(want) != want && ++bad <= 10) ADD_FAILURE() << "case " << i << ": NFC is not idempotent on \"" << want << "\"";
    }
    EXPECT_EQ(bad, 0u);
    json_object_put(root);
}

// ---- Streaming output ------------------------------------------------------------------------------

namespace {

// Pushes `chunks` through a stream; returns the writes (one string per push, then the flush).
std::vector<std::string> stream(const std::vector<std::string> &chunks) {
    bitnet_utf8_stream s;
    bitnet_utf8_stream_init(&s);
    std::vector<std::string> writes;
    for (const std::string &c : chunks) {
        std::vector<char> out(c.size() + 3);
        const size_t n = bitnet_utf8_stream_push(&s, c.data(), c.size(), out.data());
        writes.emplace_back(out.data(), n);
    }
    char tail[3];
    const size_t n = bitnet_utf8_stream_flush(&s, tail);
    writes.emplace_back(tail, n);
    return writes;
}

// Offsets of the valid UTF-8 sequences of s (RFC 3629), as [start, end) pairs of multi-byte characters.
std::vector<std::pair<size_t, size_t>> multibyte_chars(const std::string &s) {
    std::vector<std::pair<size_t, size_t>> r;
    for (size_t i = 0; i < s.size();) {
        const size_t l = ref_char_len(s, i);
        if (l > 1) r.push_back({i, i + l});
        i += l;
    }
    return r;
}

}  // namespace

TEST(Utf8Stream, HoldsIncompleteCharacters) {
    using W = std::vector<std::string>;
    // 😀 = F0 9F 98 80 split over two pieces: nothing, then the whole character with what follows
    EXPECT_EQ(stream({"\xF0\x9F", "\x98\x80" "A"}), W({"", "\xF0\x9F\x98\x80" "A", ""}));
    EXPECT_EQ(stream({"\xF0", "\x9F", "\x98", "\x80"}), W({"", "", "", "\xF0\x9F\x98\x80", ""}));
    EXPECT_EQ(stream({"a\xD0", "\x9F" "b"}), W({"a", "\xD0\x9F" "b", ""}));               // П
    EXPECT_EQ(stream({"\xE2\x96", "\x81"}), W({"", "\xE2\x96\x81", ""}));                  // ▁
    // cut short by the next piece: the held bytes go out as they are, before it
    EXPECT_EQ(stream({"\xF0\x9F", "A"}), W({"", "\xF0\x9F" "A", ""}));
    // bytes that can never start or continue a sequence go out at once
    EXPECT_EQ(stream({"\x80", "\xFF", "\xC0\xAF"}), W({"\x80", "\xFF", "\xC0\xAF", ""}));
    EXPECT_EQ(stream({"\xE0\x80"}), W({"\xE0\x80", ""}));  // E0 needs A0..BF next
    EXPECT_EQ(stream({"\xED\xA0\x80"}), W({"\xED\xA0\x80", ""}));  // no surrogates
    EXPECT_EQ(stream({"\xF4\x90"}), W({"\xF4\x90", ""}));  // beyond U+10FFFF
    // the end of the stream releases the rest as it is
    EXPECT_EQ(stream({"ok\xE2\x96"}), W({"ok", "\xE2\x96"}));
    EXPECT_EQ(stream({}), W({""}));
}

TEST(Utf8Stream, RandomSplitsNeverCutACharacterAndLoseNothing) {
    const std::vector<std::string> alpha = {"a", " ", "é", "П", "▁", "中", "😀", "👍🏽", "\x80", "\xF0\x9F", "\xE2", "\xFF", "\n"};
    uint64_t st = 1234567ull;
    auto next = [&]() {
        st ^= st << 13, st ^= st >> 7, st ^= st << 17;
        return st;
    };
    for (int rep = 0; rep < 3000; rep++) {
        std::string all;
        const int len = (int)(next() % 12);
        for (int i = 0; i < len; i++) all += alpha[next() % alpha.size()];
        std::vector<std::string> chunks;
        for (size_t i = 0; i < all.size();) {
            const size_t n = 1 + next() % 4;
            chunks.push_back(all.substr(i, n));
            i += n;
        }
        const std::vector<std::string> w = stream(chunks);
        std::string joined;
        std::vector<size_t> cuts;
        for (const std::string &x : w) {
            joined += x;
            cuts.push_back(joined.size());
        }
        ASSERT_EQ(joined, all);  // lossless
        for (const auto &c : multibyte_chars(all)) {
            for (size_t cut : cuts) ASSERT_FALSE(cut > c.first && cut < c.second) << "a write ends inside a character";
        }
    }
}

TEST(Utf8Stream, DetokenizerOverByteTokens) {
    // byte-level BPE: 😀 and П as byte tokens, one per push
    TinyBpe T("llama-bpe");
    const std::string text = "a😀П";
    const std::vector<int32_t> ids = tok(T.V.v, text, false, false);
    ASSERT_GE(ids.size(), 6u);
    bitnet_detok *d = bitnet_detok_new(T.V.v, false);
    ASSERT_NE(d, nullptr);
    std::vector<std::string> writes;
    for (int32_t id : ids) {
        size_t n = 0;
        const char *p = bitnet_detok_push(d, id, &n);
        ASSERT_NE(p, nullptr);
        writes.emplace_back(p, n);
    }
    size_t n = 0;
    const char *p = bitnet_detok_flush(d, &n);
    writes.emplace_back(p, n);
    bitnet_detok_free(d);
    std::string joined;
    for (const std::string &w : writes) joined += w;
    EXPECT_EQ(joined, text);
    for (const std::string &w : writes) EXPECT_TRUE(w.empty() || w == "a" || w == "😀" || w == "П") << w;
    // SPM byte fallback in the bitnet.cpp tiny vocabulary: "Привет" is all <0xXX> tokens
    Vocab V;
    load(kTiny, &V);
    bitnet_detok *d2 = bitnet_detok_new(V.v, false);
    std::string out;
    for (int32_t id : tok(V.v, "Привет", false, false)) {
        const char *q = bitnet_detok_push(d2, id, &n);
        const std::string w(q, n);
        EXPECT_TRUE(w.empty() || w.size() == 2 || w == "\xE2\x96\x81") << w;  // whole characters (the prefix ▁ too)
        out += w;
    }
    const char *rest = bitnet_detok_flush(d2, &n);
    EXPECT_EQ(n, 0u);
    out += std::string(rest, n);
    bitnet_detok_free(d2);
    EXPECT_EQ(unmark(out), " Привет");
    // a long piece grows the buffers
    Vocab L;
    VocabSpec s = base_spec({{U2581, -1}, {std::string(300, 'q'), -2}});
    load(write_vocab(s, "longpiece"), &L);
    bitnet_detok *d3 = bitnet_detok_new(L.v, false);
    const char *q = bitnet_detok_push(d3, 260, &n);
    EXPECT_EQ(std::string(q, n), std::string(300, 'q'));
    bitnet_detok_free(d3);
}

TEST(Detokenize, InvertsTheTokenizer) {
    Vocab V;
    load(kTiny, &V);
    for (const std::string s : {"The quick brown fox jumps", " two  spaces ", "<s>hello</s>", "a<unk>b<unk><unk>", "", "Привет"}) {
        const std::vector<int32_t> t = tok(V.v, s, false, true);
        EXPECT_EQ(([&] {
                      const size_t n = bitnet_detokenize(V.v, t.data(), t.size(), true, nullptr, 0);
                      std::string r(n, '\0');
                      if (n) {
                          EXPECT_EQ(bitnet_detokenize(V.v, t.data(), t.size(), true, &r[0], n), n);
                      }
                      return r;
                  }()),
                  s);
    }
    // without `special` the special tokens print nothing but still end a fragment
    const std::vector<int32_t> t = tok(V.v, "<s>hello</s> x", false, true);
    char buf[64];
    const size_t n = bitnet_detokenize(V.v, t.data(), t.size(), false, buf, sizeof buf);
    EXPECT_EQ(std::string(buf, n), "hello x");
    TinyBpe T("llama-bpe");
    const std::vector<int32_t> b = tok(T.V.v, " hello<|eot|> world", false, true);
    const size_t m = bitnet_detokenize(T.V.v, b.data(), b.size(), true, buf, sizeof buf);
    EXPECT_EQ(std::string(buf, m), " hello<|eot|> world");  // BPE keeps every space
}
