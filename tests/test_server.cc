// test_server.cc — llama-server's parts below HTTP: the request parser (src/server/request.h) and the
// continuous-batching engine (src/server/engine.h) on a seeded dummy model in the bitnetcpp-tiny layout.
// The engine's outputs are compared with the same requests run alone, byte for byte; stop strings, limits,
// cancellation, the queue and the slot context are checked with exact values.
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

struct Parsed {
    bitnet_status st;
    bitnet_srv_request q;
    bitnet_srv_error e;
    Parsed(bitnet_srv_kind kind, const std::string &body) {
        memset(&e, 0, sizeof e);
        st = bitnet_srv_parse(kind, body.data(), body.size(), &kLim, &q, &e);
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
    const bitnet_engine_params ep = {slots, ctx, batch, threads, queue};
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

} // namespace
