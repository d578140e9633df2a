// test_server.cc — llama-server's parts below HTTP: the request parser (src/server/request.h) and the
// continuous-batching engine (src/server/engine.h) on a seeded dummy model in the bitnetcpp-tiny layout.
// The engine's outputs are compared with the same requests run alone, byte for byte; stop strings, limits,
// cancellation, the queue and the slot context are checked with exact values. Embedding jobs run on a
// small qwen3 (BitNet-embedding layout) dummy: their vectors are compared bit for bit with bitnet_embed's.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <chrono>
#include <thread>
#include <vector>

#include "model/model.h"
#include "server/engine.h"
#include "server/request.h"
#include "test_util.h"

namespace {

std::string g_dir;
::testing::Environment *const g_env =
    ::testing::AddGlobalTestEnvironment(new bitnet_test::TempDirEnv("bitnet_server_", &g_dir));

// ---- request parser ---------------------------------------------------------------------------

const bitnet_srv_limits kLim = {"tiny", 512, 100, 4, 8};
const bitnet_srv_embd_limits kEmbdLim = {256, 3};

struct Parsed {
    bitnet_status st;
    bitnet_srv_request q;
    bitnet_srv_error e;
    Parsed(bitnet_srv_kind kind, const std::string &body) {
        memset(&e, 0, sizeof e);
        st = kind == BITNET_SRV_EMBEDDINGS ? bitnet_srv_parse_embeddings(body.data(), body.size(), &kLim, &kEmbdLim, &q, &e)
                                           : bitnet_srv_parse(kind, body.data(), body.size(), &kLim, &q, &e);
    }
    ~Parsed() { bitnet_srv_request_free(&q); }
};

TEST(Request, ChatWithEveryField) {
    Parsed p(BITNET_SRV_CHAT,
             R"({"model":"tiny","messages":[{"role":"developer","content":"Be brief."},)"
             R"({"role":"user","content":[{"type":"text","text":"Hi "},{"type":"text","text":"there"}]}],)"
             R"("max_tokens":7,"temperature":0,"top_p":0.5,"top_k":3,"seed":-1,"stop":["\n","END"],)"
             R"("stream":true,"stream_options":{"include_usage":true},"n":1,"user":"x","logprobs":false,"tools":[]})");
    ASSERT_EQ(p.st, BITNET_OK) << p.e.message;
    ASSERT_EQ(p.q.n_messages, 2u);
    EXPECT_STREQ(p.q.messages[0].role, "system"); // developer is the system role
    EXPECT_STREQ(p.q.messages[0].content, "Be brief.");
    EXPECT_STREQ(p.q.messages[1].role, "user");
    EXPECT_STREQ(p.q.messages[1].content, "Hi there");
    EXPECT_EQ(p.q.max_tokens, 7);
    EXPECT_TRUE(p.q.has_temperature);
    EXPECT_EQ(p.q.temperature, 0.0f);
    EXPECT_EQ(p.q.top_p, 0.5f);
    EXPECT_EQ(p.q.top_k, 3);
    EXPECT_EQ(p.q.seed, UINT64_MAX);
    ASSERT_EQ(p.q.n_stop, 2u);
    EXPECT_STREQ(p.q.stop[0], "\n");
    EXPECT_STREQ(p.q.stop[1], "END");
    EXPECT_TRUE(p.q.stream);
    EXPECT_TRUE(p.q.include_usage);
}

TEST(Request, CompletionPromptForms) {
    Parsed a(BITNET_SRV_COMPLETION, R"({"prompt":"abc","stop":"x","max_completion_tokens":100})");
    ASSERT_EQ(a.st, BITNET_OK) << a.e.message;
    EXPECT_EQ(std::string(a.q.prompt, a.q.prompt_len), "abc");
    EXPECT_EQ(a.q.max_tokens, 100);
    EXPECT_EQ(a.q.n_stop, 1u);
    EXPECT_EQ(a.q.max_tokens, 100);
    Parsed b(BITNET_SRV_COMPLETION, R"({"prompt":["one string"]})");
    ASSERT_EQ(b.st, BITNET_OK) << b.e.message;
    EXPECT_STREQ(b.q.prompt, "one string");
    EXPECT_EQ(b.q.max_tokens, -1);
    Parsed c(BITNET_SRV_COMPLETION, R"({"prompt":[1,2,511],"seed":18446744073709551615})");
    ASSERT_EQ(c.st, BITNET_OK) << c.e.message;
    ASSERT_EQ(c.q.n_tokens, 3u);
    EXPECT_EQ(c.q.tokens[2], 511);
    EXPECT_EQ(c.q.seed, UINT64_MAX);
    Parsed t(BITNET_SRV_TOKENIZE, R"({"content":"héllo","add_special":true})");
    ASSERT_EQ(t.st, BITNET_OK) << t.e.message;
    EXPECT_EQ(std::string(t.q.prompt), "héllo");
    EXPECT_TRUE(t.q.add_special);
    Parsed d(BITNET_SRV_DETOKENIZE, R"({"tokens":[]})");
    ASSERT_EQ(d.st, BITNET_OK) << d.e.message;
    EXPECT_EQ(d.q.n_tokens, 0u);
}

// Every refusal: HTTP status, the parameter, and the words of the message.
TEST(Request, RefusalsNameTheField) {
    struct Case {
        bitnet_srv_kind kind;
        std::string body;
        int status;
        const char *param, *msg;
    } cases[] = {
        {BITNET_SRV_CHAT, "", 400, "", "not a complete JSON object (it is empty)"},
        {BITNET_SRV_CHAT, "{\"messages\":", 400, "", "not a complete JSON object"},
        {BITNET_SRV_CHAT, "{\"messages\":[]} x", 400, "", "not valid JSON: unexpected character at byte 16"},
        {BITNET_SRV_CHAT, "{\"a\":tru}", 400, "", "not valid JSON"},
        {BITNET_SRV_CHAT, "{\"a\":1,}", 400, "", "not valid JSON"},
        {BITNET_SRV_CHAT, "[1]", 400, "", "must be a JSON object, got an array"},
        {BITNET_SRV_CHAT, "{\"x\":\"\xff\"}", 400, "", "not valid UTF-8"},
        {BITNET_SRV_CHAT, "{\"x\":\"\xed\xa0\x80\"}", 400, "", "not valid UTF-8"}, // a surrogate
        {BITNET_SRV_CHAT, "{}", 400, "messages", "'messages' is missing"},
        {BITNET_SRV_CHAT, R"({"messages":[]})", 400, "messages", "'messages' is empty"},
        {BITNET_SRV_CHAT, R"({"messages":{}})", 400, "messages", "must be an array of messages, got an object"},
        {BITNET_SRV_CHAT, R"({"messages":[1]})", 400, "messages[0]", "must be an object"},
        {BITNET_SRV_CHAT, R"({"messages":[{"content":"x"}]})", 400, "messages[0].role", "must be a string"},
        {BITNET_SRV_CHAT, R"({"messages":[{"role":"tool","content":"x"}]})", 400, "messages[0].role", "\"tool\""},
        {BITNET_SRV_CHAT, R"({"messages":[{"role":"user"}]})", 400, "messages[0].content", "is missing"},
        {BITNET_SRV_CHAT, R"({"messages":[{"role":"user","content":5}]})", 400, "messages[0].content", "got an integer 5"},
        {BITNET_SRV_CHAT, R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", 400,
         "messages[0].content", "reads text only"},
        {BITNET_SRV_CHAT, R"({"messages":[{"role":"user","content":"a\u0000b"}]})", 400, "messages[0].content", "NUL"},
        {BITNET_SRV_CHAT, R"({"messages":[{"role":"user","content":"x"}],"model":"gpt-4"})", 404, "model",
         "The model \"gpt-4\" does not exist: this server serves 'tiny'"},
        {BITNET_SRV_CHAT, R"({"messages":[{"role":"user","content":"x"}],"model":7})", 400, "model", "must be a string"},
        {BITNET_SRV_COMPLETION, R"({"prompt":"x","max_tokens":0})", 400, "max_tokens", "must be in [1, 100], got 0"},
        {BITNET_SRV_COMPLETION, R"({"prompt":"x","max_tokens":101})", 400, "max_tokens", "must be in [1, 100], got 101"},
        {BITNET_SRV_COMPLETION, R"({"prompt":"x","max_tokens":"5"})", 400, "max_tokens", "got a string \"5\""},
        {BITNET_SRV_COMPLETION, R"({"prompt":"x","max_tokens":5.5})", 400, "max_tokens", "got a number 5.5"},
        {BITNET_SRV_COMPLETION, R"({"prompt":"x","temperature":2.5})", 400, "temperature", "must be in [0, 2], got 2.5"},
        {BITNET_SRV_COMPLETION, R"({"prompt":"x","temperature":"hot"})", 400, "temperature", "must be a number"},
        {BITNET_SRV_COMPLETION, R"({"prompt":"x","top_p":-0.1})", 400, "top_p", "must be in [0, 1], got -0.1"},
        {BITNET_SRV_COMPLETION, R"({"prompt":"x","top_k":-1})", 400, "top_k", "got -1"},
        {BITNET_SRV_COMPLETION, R"({"prompt":"x","seed":1.5})", 400, "seed", "must be an integer"},
        {BITNET_SRV_COMPLETION, R"({"prompt":"x","stop":["a","b","c","d","e"]})", 400, "stop", "has 5 strings, at most 4"},
        {BITNET_SRV_COMPLETION, R"({"prompt":"x","stop":[""]})", 400, "stop", "'stop'[0] is empty"},
        {BITNET_SRV_COMPLETION, R"({"prompt":"x","stop":"123456789"})", 400, "stop", "has 9 bytes, at most 8"},
        {BITNET_SRV_COMPLETION, R"({"prompt":"x","stop":[1]})", 400, "stop", "'stop'[0] must be a string"},
        {BITNET_SRV_COMPLETION, R"({"prompt":"x","stream":"yes"})", 400, "stream", "must be true or false"},
        {BITNET_SRV_COMPLETION, R"({"prompt":"x","n":2})", 400, "n", "must be in [1, 1], got 2"},
        {BITNET_SRV_COMPLETION, R"({"prompt":"x","logprobs":true})", 400, "logprobs", "not supported"},
        {BITNET_SRV_COMPLETION, R"({"prompt":"x","logprobs":3})", 400, "logprobs", "must be true or false"},
        {BITNET_SRV_COMPLETION, R"({"prompt":"x","tools":[{"type":"function"}]})", 400, "tools", "not supported"},
        {BITNET_SRV_COMPLETION, R"({"prompt":"x","stream_options":true})", 400, "stream_options", "must be an object"},
        {BITNET_SRV_COMPLETION, R"({})", 400, "prompt", "'prompt' is missing"},
        {BITNET_SRV_COMPLETION, R"({"prompt":["a","b"]})", 400, "prompt", "has 2 strings"},
        {BITNET_SRV_COMPLETION, R"({"prompt":[[1],[2]]})", 400, "prompt", "array of token arrays"},
        {BITNET_SRV_COMPLETION, R"({"prompt":[1,512]})", 400, "prompt", "'prompt'[1] = 512 is not a token id"},
        {BITNET_SRV_COMPLETION, R"({"prompt":[1,"a"]})", 400, "prompt", "'prompt'[1] must be a token id"},
        {BITNET_SRV_TOKENIZE, R"({"content":3})", 400, "content", "'content' must be a string"},
        {BITNET_SRV_DETOKENIZE, R"({})", 400, "tokens", "'tokens' is missing"},
        {BITNET_SRV_DETOKENIZE, R"({"tokens":"1"})", 400, "tokens", "must be an array of token ids"},
        {BITNET_SRV_DETOKENIZE, R"({"tokens":[-1]})", 400, "tokens", "'tokens'[0] = -1 is not a token id"},
    };
    for (const Case &c : cases) {
        Parsed p(c.kind, c.body);
        EXPECT_EQ(p.st, BITNET_ERR_INVALID_ARG) << c.body;
        EXPECT_EQ(p.e.http_status, c.status) << c.body << ": " << p.e.message;
        EXPECT_STREQ(p.e.param, c.param) << c.body;
        EXPECT_NE(std::string(p.e.message).find(c.msg), std::string::npos) << c.body << ": " << p.e.message;
        EXPECT_STREQ(p.e.type, "invalid_request_error");
    }
    // the body's value is shown shortened, never cut inside a character
    std::string many;
    for (int i = 0; i < 60; i++) many += "é";
    Parsed p(BITNET_SRV_COMPLETION, "{\"prompt\":\"x\",\"top_p\":\"" + many + "\"}");
    const std::string m = p.e.message;
    EXPECT_NE(m.find("got a string \"ééé"), std::string::npos) << m;
    EXPECT_EQ(m.substr(m.size() - 5), "é...") << m;
    EXPECT_TRUE(bitnet_srv_utf8_valid(m.data(), m.size())) << m;
}

// OpenAI's four forms of "input" and the other fields of an embeddings request.
TEST(Request, EmbeddingsInputForms) {
    Parsed a(BITNET_SRV_EMBEDDINGS, R"({"input":"héllo","model":"tiny","user":"u","dimensions":256})");
    ASSERT_EQ(a.st, BITNET_OK) << a.e.message;
    ASSERT_EQ(a.q.n_inputs, 1u);
    ASSERT_NE(a.q.inputs, nullptr);
    EXPECT_EQ(a.q.input_ids, nullptr);
    EXPECT_EQ(std::string(a.q.inputs[0], a.q.input_lens[0]), "héllo");
    EXPECT_FALSE(a.q.base64);
    Parsed b(BITNET_SRV_EMBEDDINGS, R"({"input":["a","bc","d"],"encoding_format":"base64"})");
    ASSERT_EQ(b.st, BITNET_OK) << b.e.message;
    ASSERT_EQ(b.q.n_inputs, 3u);
    EXPECT_STREQ(b.q.inputs[1], "bc");
    EXPECT_EQ(b.q.input_lens[2], 1u);
    EXPECT_TRUE(b.q.base64);
    Parsed c(BITNET_SRV_EMBEDDINGS, R"({"input":[5,0,511],"encoding_format":"float"})");
    ASSERT_EQ(c.st, BITNET_OK) << c.e.message;
    ASSERT_EQ(c.q.n_inputs, 1u); // one text given as ids
    EXPECT_EQ(c.q.inputs, nullptr);
    ASSERT_EQ(c.q.input_n_ids[0], 3u);
    EXPECT_EQ(c.q.input_ids[0][0], 5);
    EXPECT_EQ(c.q.input_ids[0][2], 511);
    Parsed d(BITNET_SRV_EMBEDDINGS, R"({"input":[[1,2],[3],[4,5,6]],"model":null})");
    ASSERT_EQ(d.st, BITNET_OK) << d.e.message;
    ASSERT_EQ(d.q.n_inputs, 3u);
    EXPECT_EQ(d.q.input_n_ids[0], 2u);
    EXPECT_EQ(d.q.input_n_ids[1], 1u);
    EXPECT_EQ(d.q.input_ids[2][2], 6);
    // without the embeddings limits the generic parser refuses the kind (a server bug, hence 500)
    bitnet_srv_request q;
    bitnet_srv_error e{};
    const std::string body = R"({"input":"a"})";
    EXPECT_NE(bitnet_srv_parse(BITNET_SRV_EMBEDDINGS, body.data(), body.size(), &kLim, &q, &e), BITNET_OK);
    EXPECT_EQ(e.http_status, 500);
    EXPECT_NE(std::string(e.message).find("bitnet_srv_parse_embeddings"), std::string::npos) << e.message;
    bitnet_srv_request_free(&q);
}

TEST(Request, EmbeddingsRefusalsNameTheField) {
    struct Case {
        std::string body;
        int status;
        const char *param, *msg;
    } cases[] = {
        {R"({})", 400, "input", "'input' is missing"},
        {R"({"input":null})", 400, "input", "'input' is missing"},
        {R"({"input":5})", 400, "input", "must be a string, an array of strings, an array of token ids"},
        {R"({"input":[]})", 400, "input", "'input' is an empty array"},
        {R"({"input":""})", 400, "input", "'input' is an empty string"},
        {R"({"input":["a",""]})", 400, "input", "'input'[1] is an empty string"},
        {R"({"input":["a",1]})", 400, "input", "'input'[1] must be a string (as 'input'[0] is), got an integer 1"},
        {R"({"input":[{}]})", 400, "input", "'input'[0] must be a string, a token id or an array of token ids"},
        {R"({"input":[1,"a"]})", 400, "input", "'input'[1] must be a token id (an integer)"},
        {R"({"input":[1,512]})", 400, "input", "'input'[1] = 512 is not a token id: the vocabulary has ids [0, 512)"},
        {R"({"input":[[1],[-3]]})", 400, "input", "'input'[1][0] = -3 is not a token id"},
        {R"({"input":[[1],[]]})", 400, "input", "'input'[1] is an empty array of token ids"},
        {R"({"input":[[1],2]})", 400, "input", "'input'[1] must be an array of token ids (as 'input'[0] is)"},
        {R"({"input":["a","b","c","d"]})", 400, "input", "'input' has 4 texts, at most 3 are accepted"},
        {R"({"input":[[1],[2],[3],[4]]})", 400, "input", "'input' has 4 texts, at most 3"},
        {R"({"input":["a\u0000b"]})", 400, "input", "NUL"},
        {R"({"input":"a","encoding_format":"hex"})", 400, "encoding_format", "must be \"float\" or \"base64\""},
        {R"({"input":"a","encoding_format":1})", 400, "encoding_format", "got an integer 1"},
        {R"({"input":"a","dimensions":128})", 400, "dimensions", "'dimensions' is 128: this model's embeddings have 256"},
        {R"({"input":"a","dimensions":"256"})", 400, "dimensions", "must be an integer"},
        {R"({"input":"a","model":"text-embedding-3-small"})", 404, "model", "does not exist: this server serves 'tiny'"},
        {R"({"input":"a")", 400, "", "not a complete JSON object"},
    };
    for (const Case &c : cases) {
        Parsed p(BITNET_SRV_EMBEDDINGS, c.body);
        EXPECT_EQ(p.st, BITNET_ERR_INVALID_ARG) << c.body;
        EXPECT_EQ(p.e.http_status, c.status) << c.body << ": " << p.e.message;
        EXPECT_STREQ(p.e.param, c.param) << c.body;
        EXPECT_NE(std::string(p.e.message).find(c.msg), std::string::npos) << c.body << ": " << p.e.message;
    }
}

TEST(Request, Utf8CleanReplacesEveryBadByte) {
    const std::string in = "a\xff" "b\xe2\x82" "c\xe2\x82\xac" "\xf0\x9f\x98";
    size_t n = 0;
    char *out = bitnet_srv_utf8_clean(in.data(), in.size(), &n);
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(std::string(out, n), "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd" "c\xe2\x82\xac"
                                   "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    free(out);
}

// ---- engine -----------------------------------------------------------------------------------

struct ModelDel {
    void operator()(bitnet_model *m) const { bitnet_model_free(m); }
};
struct EngineDel {
    void operator()(bitnet_engine *e) const { bitnet_engine_free(e); }
};
using ModelPtr = std::unique_ptr<bitnet_model, ModelDel>;
using EnginePtr = std::unique_ptr<bitnet_engine, EngineDel>;

EnginePtr Start(bitnet_model *m, int slots, int ctx, int batch, int threads, int queue) {
    const bitnet_engine_params ep = {slots, ctx, batch, threads, queue, false};
    bitnet_engine *e = nullptr;
    bitnet_error err{};
    EXPECT_EQ(bitnet_engine_start(m, &ep, &e, &err), BITNET_OK) << err.msg;
    return EnginePtr(e);
}

class Engine : public ::testing::Test {
  protected:
    static std::string path_;
    static void SetUpTestSuite() {
        bitnet_dummy_params p = bitnet_test::tiny_layout_params(BITNET_DUMMY_I2_S, 1234);
        path_ = g_dir + "/tiny.gguf";
        bitnet_error err{};
        ASSERT_EQ(bitnet_dummy_write(&p, path_.c_str(), &err), BITNET_OK) << err.msg;
    }
    static ModelPtr Load(bitnet_kernel_path kp = BITNET_PATH_AUTO) {
        bitnet_model_params mp = {kp, nullptr, 0, nullptr, false, 0, 0, false, 0};
        bitnet_model *m = nullptr;
        bitnet_error err{};
        EXPECT_EQ(bitnet_model_load(path_.c_str(), &mp, &m, &err), BITNET_OK) << err.msg;
        return ModelPtr(m);
    }
};
std::string Engine::path_;

struct Result {
    std::string text;
    bitnet_job_update u{};
};

struct Req {
    std::vector<int32_t> prompt;
    int max_tokens = 24;
    float temp = 0.0f;
    uint64_t seed = 0;
    std::vector<std::string> stop;
    bool ignore_eos = false;
};

bitnet_job *Submit(bitnet_engine *e, const Req &r, bool *busy = nullptr, std::string *msg = nullptr) {
    std::vector<char *> stops;
    for (const auto &s : r.stop) stops.push_back(const_cast<char *>(s.c_str()));
    bitnet_gen_params gp = {r.prompt.data(), r.prompt.size(), r.max_tokens, r.temp, 40, 0.95f, r.seed,
                            stops.data(), stops.size(), r.ignore_eos};
    bitnet_job *j = nullptr;
    bool b = false;
    bitnet_error err{};
    bitnet_status st = bitnet_engine_submit(e, &gp, &j, &b, &err);
    if (busy) *busy = b;
    if (msg) *msg = err.msg;
    if (st != BITNET_OK) return nullptr;
    return j;
}

// Waits for the end; the whole text, checked to grow only by appending.
Result Wait(bitnet_job *j) {
    Result r;
    for (int i = 0; i < 20000; i++) { // bounded: at most 20000 polls of up to 50 ms
        char *t = nullptr;
        EXPECT_TRUE(bitnet_job_poll(j, r.text.size(), 50, &t, &r.u));
        if (t) r.text.append(t, r.u.text_len - r.text.size());
        free(t);
        if (r.u.finish != BITNET_FINISH_NONE) break;
    }
    bitnet_job_release(j);
    return r;
}

Result RunAlone(bitnet_model *m, const Req &r) {
    EnginePtr e = Start(m, 1, 256, 64, 1, 0);
    return Wait(Submit(e.get(), r));
}

std::vector<Req> EightRequests() {
    std::vector<Req> rs;
    for (int i = 0; i < 8; i++) {
        Req r;
        r.prompt = {1};
        for (int k = 0; k < 3 + 5 * i; k++) r.prompt.push_back(260 + (37 * i + 11 * k) % 250);
        r.max_tokens = 12 + 3 * i;
        r.ignore_eos = i % 2 == 1;
        if (i >= 6) r.temp = 0.9f, r.seed = 77 + i; // seeded sampling is just as independent of the others
        rs.push_back(r);
    }
    return rs;
}

// The issue's property: a request's output is byte-identical whether it runs alone or among 7 others,
// on every kernel path and thread count, with a batch that forces prompt chunks to share steps.
TEST_F(Engine, EightConcurrentRequestsEqualEachAlone) {
    for (bitnet_kernel_path kp : {BITNET_PATH_AUTO, BITNET_PATH_I2S, BITNET_PATH_TL1}) {
        ModelPtr m = Load(kp);
        ASSERT_TRUE(m);
        const std::vector<Req> rs = EightRequests();
        std::vector<Result> alone;
        for (const Req &r : rs) alone.push_back(RunAlone(m.get(), r));
        for (int threads : {1, 2}) {
            for (int slots : {4, 8}) {
                EnginePtr e = Start(m.get(), slots, 128, 16, threads, 8);
                std::vector<bitnet_job *> jobs;
                for (const Req &r : rs) jobs.push_back(Submit(e.get(), r));
                for (size_t i = 0; i < rs.size(); i++) {
                    ASSERT_NE(jobs[i], nullptr);
                    Result got = Wait(jobs[i]);
                    const std::string what = std::string(bitnet_kernel_path_name(kp)) + ", " + std::to_string(threads) +
                                             " threads, " + std::to_string(slots) + " slots, request " + std::to_string(i);
                    EXPECT_EQ(got.text, alone[i].text) << what;
                    EXPECT_EQ(got.u.n_gen, alone[i].u.n_gen) << what;
                    EXPECT_EQ(got.u.finish, alone[i].u.finish) << what;
                    EXPECT_EQ(got.u.n_prompt, (int)rs[i].prompt.size()) << what;
                    if (rs[i].ignore_eos) {
                        EXPECT_EQ(got.u.n_gen, rs[i].max_tokens) << what;
                    }
                }
            }
        }
    }
}

TEST_F(Engine, MaxTokensAndContextEndWithLength) {
    ModelPtr m = Load();
    Req r;
    r.prompt = {1, 300, 301, 302, 303, 304, 305, 306, 307, 308};
    r.ignore_eos = true;
    r.max_tokens = 5;
    EnginePtr e = Start(m.get(), 2, 16, 8, 1, 0);
    Result a = Wait(Submit(e.get(), r));
    EXPECT_EQ(a.u.finish, BITNET_FINISH_LENGTH);
    EXPECT_EQ(a.u.n_gen, 5);
    // 10 prompt tokens in a 16-position slot: tokens are sampled after positions 9 .. 15, so 7
    r.max_tokens = 100;
    Result b = Wait(Submit(e.get(), r));
    EXPECT_EQ(b.u.finish, BITNET_FINISH_LENGTH);
    EXPECT_EQ(b.u.n_gen, 16 - 10 + 1);
    // a prompt of exactly the slot's size still gets one token; one more is refused with both numbers
    r.prompt.resize(16, 300);
    Result c = Wait(Submit(e.get(), r));
    EXPECT_EQ(c.u.n_gen, 1);
    r.prompt.push_back(300);
    std::string msg;
    EXPECT_EQ(Submit(e.get(), r, nullptr, &msg), nullptr);
    EXPECT_NE(msg.find("the prompt has 17 tokens, more than the 16 positions"), std::string::npos) << msg;
    r.prompt.clear();
    EXPECT_EQ(Submit(e.get(), r, nullptr, &msg), nullptr);
    EXPECT_NE(msg.find("the prompt is empty"), std::string::npos) << msg;
}

// A stop string taken from the middle of the free-running text: the text ends right before it.
TEST_F(Engine, StopStringCutsTheTextAndIsNeverShown) {
    ModelPtr m = Load();
    Req r;
    r.prompt = {1, 400, 259, 450};
    r.ignore_eos = true;
    r.max_tokens = 40;
    const Result free_run = RunAlone(m.get(), r);
    ASSERT_GE(free_run.text.size(), 12u);
    // a stop of 3 bytes that first occurs at byte >= 6, at a character boundary
    size_t at = 6;
    while (at < free_run.text.size() && (static_cast<unsigned char>(free_run.text[at]) & 0xC0) == 0x80) at++;
    std::string stop = free_run.text.substr(at, 3);
    const size_t first = free_run.text.find(stop);
    r.stop = {"\x01never", stop};
    EnginePtr e = Start(m.get(), 2, 128, 16, 1, 0);
    bitnet_job *j = Submit(e.get(), r);
    ASSERT_NE(j, nullptr);
    // every intermediate text is a prefix of the final one and never contains the stop string
    Result got;
    for (int i = 0; i < 20000; i++) {
        char *t = nullptr;
        ASSERT_TRUE(bitnet_job_poll(j, got.text.size(), 50, &t, &got.u));
        if (t) got.text.append(t, got.u.text_len - got.text.size());
        free(t);
        EXPECT_EQ(got.text.find(stop), std::string::npos);
        if (got.u.finish != BITNET_FINISH_NONE) break;
    }
    bitnet_job_release(j);
    EXPECT_EQ(got.u.finish, BITNET_FINISH_STOP);
    EXPECT_EQ(got.text, free_run.text.substr(0, first));
}

TEST_F(Engine, QueueFullIsRefusedAndCancelFreesTheSlot) {
    ModelPtr m = Load();
    Req longr;
    longr.prompt = {1, 300, 301};
    longr.ignore_eos = true;
    longr.max_tokens = 3000;
    EnginePtr e = Start(m.get(), 1, 4096, 16, 1, 1);
    bitnet_job *a = Submit(e.get(), longr);
    bitnet_job *b = Submit(e.get(), longr);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    bool busy = false;
    std::string msg;
    EXPECT_EQ(Submit(e.get(), longr, &busy, &msg), nullptr);
    EXPECT_TRUE(busy);
    EXPECT_NE(msg.find("all 1 slots are taken and 1 requests wait"), std::string::npos) << msg;
    int32_t nb = 0, nw = 0;
    bitnet_engine_load(e.get(), &nb, &nw);
    EXPECT_EQ(nb + nw, 2);
    // the waiting one cancelled: it ends without a token; the running one cancelled after its first text
    bitnet_job_cancel(b);
    Result rb = Wait(b);
    EXPECT_EQ(rb.u.finish, BITNET_FINISH_CANCELLED);
    EXPECT_EQ(rb.u.n_gen, 0);
    char *t = nullptr;
    bitnet_job_update u{};
    for (int i = 0; i < 200 && u.n_gen == 0; i++) {
        ASSERT_TRUE(bitnet_job_poll(a, 0, 50, &t, &u));
        free(t);
        t = nullptr;
    }
    bitnet_job_cancel(a);
    Result ra = Wait(a);
    EXPECT_EQ(ra.u.finish, BITNET_FINISH_CANCELLED);
    EXPECT_LT(ra.u.n_gen, 3000);
    // the slot is free again at once
    bitnet_engine_load(e.get(), &nb, &nw);
    EXPECT_EQ(nb + nw, 0);
    Req shortr = longr;
    shortr.max_tokens = 3;
    Result c = Wait(Submit(e.get(), shortr));
    EXPECT_EQ(c.u.finish, BITNET_FINISH_LENGTH);
    EXPECT_EQ(c.u.n_gen, 3);
}

// Releasing a job without waiting cancels it (the engine counts it cancelled long before its 3000 tokens);
// draining waits for the rest, then submits are refused.
TEST_F(Engine, ReleaseCancelsAndDrainRefusesNewWork) {
    ModelPtr m = Load();
    Req r;
    r.prompt = {1, 300};
    r.ignore_eos = true;
    r.max_tokens = 3000;
    EnginePtr e = Start(m.get(), 2, 4096, 16, 1, 4);
    bitnet_job_release(Submit(e.get(), r));
    bitnet_engine_stats st{};
    for (int i = 0; i < 2000; i++) { // bounded: 2000 x 5 ms
        bitnet_engine_get_stats(e.get(), &st);
        if (st.finished == 1) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(st.finished, 1u);
    EXPECT_EQ(st.cancelled, 1u);
    EXPECT_LT(st.generated, 3000u);
    r.max_tokens = 40;
    bitnet_job *kept = Submit(e.get(), r);
    ASSERT_NE(kept, nullptr);
    bitnet_engine_drain(e.get()); // returns only when the kept job has ended
    char *t = nullptr;
    bitnet_job_update u{};
    ASSERT_TRUE(bitnet_job_poll(kept, 0, 0, &t, &u));
    free(t);
    EXPECT_EQ(u.finish, BITNET_FINISH_LENGTH);
    EXPECT_EQ(u.n_gen, 40);
    int32_t nb = -1, nw = -1;
    bitnet_engine_load(e.get(), &nb, &nw);
    EXPECT_EQ(nb, 0);
    EXPECT_EQ(nw, 0);
    bitnet_job_release(kept);
    bool busy = true;
    std::string msg;
    EXPECT_EQ(Submit(e.get(), r, &busy, &msg), nullptr);
    EXPECT_FALSE(busy);
    EXPECT_NE(msg.find("shutting down"), std::string::npos) << msg;
    bitnet_engine_get_stats(e.get(), &st);
    EXPECT_EQ(st.finished, 2u);
    EXPECT_EQ(st.cancelled, 1u);
}

// A drain with a deadline that passes returns false; bitnet_engine_abort then ends the running and the waiting
// request with ERROR and the reason, and the counters add up (prompt tokens evaluated, generated tokens).
TEST_F(Engine, DrainDeadlineThenAbortEndsRunningAndWaiting) {
    ModelPtr m = Load();
    Req r;
    r.prompt = {1, 300, 301};
    r.ignore_eos = true;
    r.max_tokens = 4000;
    EnginePtr e = Start(m.get(), 1, 4096, 16, 1, 4);
    bitnet_job *running = Submit(e.get(), r);
    bitnet_job *waiting = Submit(e.get(), r);
    ASSERT_NE(running, nullptr);
    ASSERT_NE(waiting, nullptr);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(bitnet_engine_drain_for(e.get(), 200)); // 4000 tokens take far longer than 200 ms
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_GE(waited, 0.19);
    EXPECT_LT(waited, 5.0);
    bitnet_engine_abort(e.get(), "stopping: test deadline");
    for (bitnet_job *j : {running, waiting}) {
        char *t = nullptr;
        bitnet_job_update u{};
        ASSERT_TRUE(bitnet_job_poll(j, 0, 0, &t, &u));
        free(t);
        EXPECT_EQ(u.finish, BITNET_FINISH_ERROR);
        EXPECT_STREQ(u.error, "stopping: test deadline");
        if (j == running) {
            EXPECT_GT(u.n_gen, 0);
        } else {
            EXPECT_EQ(u.n_gen, 0);
        }
        bitnet_job_release(j);
    }
    bitnet_engine_stats st{};
    bitnet_engine_get_stats(e.get(), &st);
    EXPECT_EQ(st.busy, 0);
    EXPECT_EQ(st.waiting, 0);
    EXPECT_EQ(st.slots, 1);
    EXPECT_EQ(st.finished, 2u);
    EXPECT_EQ(st.cancelled, 0u);
    EXPECT_EQ(st.prompt_evaluated, 3u); // the running request's prompt; the waiting one never ran
    EXPECT_GT(st.generated, 0u);
    EXPECT_LT(st.generated, 4000u);
    EXPECT_EQ(st.steps, st.generated); // pass k evaluates the prompt (k = 1) or token k-1 and samples token k
    EXPECT_GT(st.busy_prompt_s, 0.0);
    EXPECT_GT(st.busy_gen_s, 0.0);
    EXPECT_TRUE(bitnet_engine_drain_for(e.get(), 0)); // nothing left
    bool busy = true;
    EXPECT_EQ(Submit(e.get(), r, &busy), nullptr); // still refused
    EXPECT_FALSE(busy);
}

// ---- embedding engine -------------------------------------------------------------------------

class EmbdEngine : public ::testing::Test {
  protected:
    static std::string path_;
    static void SetUpTestSuite() {
        // BitNet-embedding-0.6B's layout in small: head_dim 128 != n_embd / n_head, GQA 4/2, pooling last
        bitnet_dummy_params p;
        bitnet_dummy_params_init(&p);
        p.arch = BITNET_DUMMY_ARCH_QWEN3;
        p.n_embd = 256;
        p.n_ff = 512;
        p.n_layer = 2;
        p.n_head = 4;
        p.n_head_kv = 2;
        p.n_embd_head = 128;
        p.n_vocab = 1000;
        p.seed = 3;
        path_ = g_dir + "/qwen3.gguf";
        bitnet_error err{};
        ASSERT_EQ(bitnet_dummy_write(&p, path_.c_str(), &err), BITNET_OK) << err.msg;
    }
    static ModelPtr Load(bitnet_kernel_path kp = BITNET_PATH_AUTO) {
        bitnet_model_params mp = {kp, nullptr, 0, nullptr, false, 0, 0, false, 0};
        bitnet_model *m = nullptr;
        bitnet_error err{};
        EXPECT_EQ(bitnet_model_load(path_.c_str(), &mp, &m, &err), BITNET_OK) << err.msg;
        return ModelPtr(m);
    }
    static EnginePtr StartEmbd(bitnet_model *m, int slots, int ctx, int batch, int threads, int queue) {
        const bitnet_engine_params ep = {slots, ctx, batch, threads, queue, true};
        bitnet_engine *e = nullptr;
        bitnet_error err{};
        EXPECT_EQ(bitnet_engine_start(m, &ep, &e, &err), BITNET_OK) << err.msg;
        return EnginePtr(e);
    }
};
std::string EmbdEngine::path_;

using Texts = std::vector<std::vector<int32_t>>;

// n texts of 1 .. 37 tokens (ids in [3, 1000)), each ending with EOS 2 as the vocabulary's add_eos_token says.
Texts SomeTexts(int n, int seed) {
    Texts ts;
    for (int i = 0; i < n; i++) {
        std::vector<int32_t> t;
        const int len = 1 + (i * 13 + seed * 7) % 37;
        for (int k = 0; k + 1 < len; k++) t.push_back(3 + (i * 131 + k * 17 + seed * 29) % 997);
        t.push_back(2);
        ts.push_back(t);
    }
    return ts;
}

bitnet_job *SubmitEmbd(bitnet_engine *e, const Texts &ts, bitnet_pooling pooling, bool *busy = nullptr,
                       std::string *msg = nullptr) {
    std::vector<const int32_t *> ptrs;
    std::vector<int32_t> lens;
    for (const auto &t : ts) {
        ptrs.push_back(t.data());
        lens.push_back((int32_t)t.size());
    }
    const bitnet_embd_params ep = {ptrs.data(), lens.data(), ts.size(), pooling};
    bitnet_job *j = nullptr;
    bool b = false;
    bitnet_error err{};
    const bitnet_status st = bitnet_engine_submit_embd(e, &ep, &j, &b, &err);
    if (busy) *busy = b;
    if (msg) *msg = err.msg;
    return st == BITNET_OK ? j : nullptr;
}

// Waits for the end; the vectors (empty unless STOP).
std::vector<float> WaitEmbd(bitnet_job *j, bitnet_job_update *u) {
    for (int i = 0; i < 20000; i++) { // bounded: at most 20000 polls of up to 50 ms
        char *t = nullptr;
        EXPECT_TRUE(bitnet_job_poll(j, 0, 50, &t, u));
        EXPECT_EQ(t, nullptr); // an embedding job has no text
        free(t);
        if (u->finish != BITNET_FINISH_NONE) break;
    }
    int32_t n = 0, d = 0;
    const float *v = bitnet_job_embeddings(j, &n, &d);
    std::vector<float> out;
    if (v) out.assign(v, v + (size_t)n * (size_t)d);
    bitnet_job_release(j);
    return out;
}

// The runtime's bitnet_embed on a context of its own: the reference vectors.
std::vector<float> Reference(bitnet_model *m, const Texts &ts, bitnet_pooling pooling) {
    const bitnet_context_params cp = {64, 64, 1, 1, 4, true};
    bitnet_context *c = nullptr;
    bitnet_error err{};
    EXPECT_EQ(bitnet_context_create_params(m, &cp, &c, &err), BITNET_OK) << err.msg;
    std::vector<const int32_t *> ptrs;
    std::vector<int32_t> lens;
    for (const auto &t : ts) {
        ptrs.push_back(t.data());
        lens.push_back((int32_t)t.size());
    }
    std::vector<float> out(ts.size() * 256);
    EXPECT_EQ(bitnet_embed(c, ptrs.data(), lens.data(), (int32_t)ts.size(), pooling, out.data(), nullptr, &err),
              BITNET_OK)
        << err.msg;
    bitnet_context_free(c);
    return out;
}

// A text's vector is bit-identical to bitnet_embed's, whatever runs with it: three jobs at once, slots
// fewer than texts, passes that split texts (batch 7) or hold many (batch 64), 1 and 2 threads, each pooling.
TEST_F(EmbdEngine, VectorsEqualBitnetEmbedWhateverRunsAlongside) {
    for (bitnet_kernel_path kp : {BITNET_PATH_AUTO, BITNET_PATH_I2S}) {
        ModelPtr m = Load(kp);
        ASSERT_TRUE(m);
        const Texts jobs[3] = {SomeTexts(9, 1), SomeTexts(1, 2), SomeTexts(5, 3)};
        for (bitnet_pooling pooling : {BITNET_POOLING_LAST, BITNET_POOLING_MEAN, BITNET_POOLING_CLS}) {
            std::vector<float> ref[3];
            for (int k = 0; k < 3; k++) ref[k] = Reference(m.get(), jobs[k], pooling);
            for (int threads : {1, 2}) {
                for (auto [slots, batch] : {std::pair<int, int>{1, 7}, {3, 7}, {4, 64}}) {
                    EnginePtr e = StartEmbd(m.get(), slots, 64, batch, threads, 4);
                    bitnet_job *js[3];
                    for (int k = 0; k < 3; k++) ASSERT_NE(js[k] = SubmitEmbd(e.get(), jobs[k], pooling), nullptr);
                    for (int k = 0; k < 3; k++) {
                        const std::string what = std::string(bitnet_kernel_path_name(kp)) + ", pooling " +
                                                 bitnet_pooling_name(pooling) + ", " + std::to_string(threads) +
                                                 " threads, " + std::to_string(slots) + " slots, batch " +
                                                 std::to_string(batch) + ", job " + std::to_string(k);
                        bitnet_job_update u{};
                        const std::vector<float> got = WaitEmbd(js[k], &u);
                        EXPECT_EQ(u.finish, BITNET_FINISH_STOP) << what << ": " << u.error;
                        EXPECT_EQ(u.n_gen, (int)jobs[k].size()) << what;
                        size_t tokens = 0;
                        for (const auto &t : jobs[k]) tokens += t.size();
                        EXPECT_EQ(u.n_prompt, (int)tokens) << what;
                        ASSERT_EQ(got.size(), ref[k].size()) << what;
                        EXPECT_EQ(memcmp(got.data(), ref[k].data(), got.size() * sizeof(float)), 0) << what;
                    }
                }
            }
        }
    }
}

// The modes do not mix: an embedding engine does not generate, a generation engine does not embed; bad
// texts are refused naming the text.
TEST_F(EmbdEngine, ModesAndBadTextsAreRefused) {
    ModelPtr m = Load();
    EnginePtr e = StartEmbd(m.get(), 2, 16, 16, 1, 0);
    Req r;
    r.prompt = {1, 5};
    std::string msg;
    EXPECT_EQ(Submit(e.get(), r, nullptr, &msg), nullptr);
    EXPECT_NE(msg.find("this engine computes embeddings"), std::string::npos) << msg;
    EXPECT_EQ(SubmitEmbd(e.get(), {std::vector<int32_t>(17, 5)}, BITNET_POOLING_LAST, nullptr, &msg), nullptr);
    EXPECT_NE(msg.find("text 0 has 17 tokens: a text needs 1 to 16"), std::string::npos) << msg;
    EXPECT_EQ(SubmitEmbd(e.get(), {{1}, {}}, BITNET_POOLING_LAST, nullptr, &msg), nullptr);
    EXPECT_NE(msg.find("text 1 has 0 tokens"), std::string::npos) << msg;
    EXPECT_EQ(SubmitEmbd(e.get(), {{1, 1000}}, BITNET_POOLING_LAST, nullptr, &msg), nullptr);
    EXPECT_NE(msg.find("text 0, token 1 is 1000, outside [0, 1000)"), std::string::npos) << msg;
    EXPECT_EQ(SubmitEmbd(e.get(), {{1}}, BITNET_POOLING_NONE, nullptr, &msg), nullptr);
    EXPECT_NE(msg.find("pooling none (0): the engine pools with mean, cls or last"), std::string::npos) << msg;
    EXPECT_EQ(SubmitEmbd(e.get(), {}, BITNET_POOLING_LAST, nullptr, &msg), nullptr);
    EXPECT_NE(msg.find("needs 1 to"), std::string::npos) << msg;
    const bitnet_engine_params gp = {2, 16, 16, 1, 0, false};
    bitnet_engine *g = nullptr;
    bitnet_error err{};
    ASSERT_EQ(bitnet_engine_start(m.get(), &gp, &g, &err), BITNET_OK) << err.msg;
    EnginePtr gen(g);
    EXPECT_EQ(SubmitEmbd(gen.get(), {{1}}, BITNET_POOLING_LAST, nullptr, &msg), nullptr);
    EXPECT_NE(msg.find("this engine generates text"), std::string::npos) << msg;
}

// A request of many texts does not hold the slots until its end: one submitted after it takes the next
// free slot (the job with the fewest texts in slots goes first) and finishes while the big one still runs.
// (QueueFullAndCancel: with two big ones running, a third small one still gets its turn.)
TEST_F(EmbdEngine, ManyTextsShareTheSlotsWithLaterRequests) {
    ModelPtr m = Load();
    EnginePtr e = StartEmbd(m.get(), 2, 64, 16, 1, 4);
    Texts big;
    for (int i = 0; i < 200; i++) big.push_back(std::vector<int32_t>(60, 3 + i));
    bitnet_job *a = SubmitEmbd(e.get(), big, BITNET_POOLING_MEAN);
    ASSERT_NE(a, nullptr);
    const Texts small = SomeTexts(1, 5);
    bitnet_job *b = SubmitEmbd(e.get(), small, BITNET_POOLING_MEAN);
    ASSERT_NE(b, nullptr);
    bitnet_job_update ub{}, ua{};
    const std::vector<float> vb = WaitEmbd(b, &ub);
    EXPECT_EQ(ub.finish, BITNET_FINISH_STOP);
    char *t = nullptr;
    ASSERT_TRUE(bitnet_job_poll(a, 0, 0, &t, &ua));
    EXPECT_EQ(ua.finish, BITNET_FINISH_NONE);
    EXPECT_LT(ua.n_gen, 10) << "the small request waited for most of the big one";
    EXPECT_EQ(vb, Reference(m.get(), small, BITNET_POOLING_MEAN));
    const std::vector<float> va = WaitEmbd(a, &ua);
    EXPECT_EQ(ua.finish, BITNET_FINISH_STOP);
    EXPECT_EQ(ua.n_gen, 200);
    ASSERT_EQ(va.size(), 200u * 256u);
    const std::vector<float> ref = Reference(m.get(), {big[0], big[199]}, BITNET_POOLING_MEAN);
    EXPECT_EQ(memcmp(va.data(), ref.data(), 256 * sizeof(float)), 0);
    EXPECT_EQ(memcmp(va.data() + 199 * 256, ref.data() + 256, 256 * sizeof(float)), 0);
}

// The queue bound counts requests (not texts); a cancelled request frees its slots at once.
TEST_F(EmbdEngine, QueueFullAndCancel) {
    ModelPtr m = Load();
    EnginePtr e = StartEmbd(m.get(), 2, 256, 16, 1, 1);
    Texts big;
    for (int i = 0; i < 300; i++) big.push_back(std::vector<int32_t>(200, 3 + i));
    bitnet_job *a = SubmitEmbd(e.get(), big, BITNET_POOLING_LAST);
    bitnet_job *b = SubmitEmbd(e.get(), big, BITNET_POOLING_LAST);
    bitnet_job *c = SubmitEmbd(e.get(), {{5, 2}}, BITNET_POOLING_LAST);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    ASSERT_NE(c, nullptr);
    bool busy = false;
    std::string msg;
    EXPECT_EQ(SubmitEmbd(e.get(), {{5}}, BITNET_POOLING_LAST, &busy, &msg), nullptr);
    EXPECT_TRUE(busy);
    EXPECT_NE(msg.find("3 requests are running or waiting, the most 2 slots and the queue (--queue 1) hold"),
              std::string::npos)
        << msg;
    bitnet_job_update u{};
    EXPECT_EQ(WaitEmbd(c, &u).size(), 256u);
    EXPECT_EQ(u.finish, BITNET_FINISH_STOP);
    bitnet_job_cancel(a);
    bitnet_job_cancel(b);
    EXPECT_TRUE(WaitEmbd(a, &u).empty());
    EXPECT_EQ(u.finish, BITNET_FINISH_CANCELLED);
    EXPECT_LT(u.n_gen, 300);
    EXPECT_TRUE(WaitEmbd(b, &u).empty());
    EXPECT_EQ(u.finish, BITNET_FINISH_CANCELLED);
    int32_t nb = -1, nw = -1;
    bitnet_engine_load(e.get(), &nb, &nw);
    EXPECT_EQ(nb + nw, 0);
    bitnet_engine_stats st{};
    bitnet_engine_get_stats(e.get(), &st);
    EXPECT_EQ(st.finished, 3u);
    EXPECT_EQ(st.cancelled, 2u);
    // the released jobs' slots are free: a new request runs, and draining waits for it
    bitnet_job *d = SubmitEmbd(e.get(), SomeTexts(3, 9), BITNET_POOLING_LAST);
    ASSERT_NE(d, nullptr);
    bitnet_engine_drain(e.get());
    EXPECT_EQ(WaitEmbd(d, &u), Reference(m.get(), SomeTexts(3, 9), BITNET_POOLING_LAST));
}

} // namespace
