// llama-server's connection guard (src/server/guard.h) on socket pairs, and the /metrics text
// (src/server/metrics.h): the per-address limit, the request deadline that trickled bytes do not stretch
// (408 written, then the socket shut down), the keep-alive deadline, no deadline while busy, and the
// exposition's counters and cumulative histogram buckets.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "server/guard.h"
#include "server/metrics.h"

namespace {

sockaddr_in V4(const char *ip, int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

sockaddr_in6 V6(const char *ip, int port) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons((uint16_t)port);
    inet_pton(AF_INET6, ip, &a.sin6_addr);
    return a;
}

const sockaddr *SA(const void *a) { return static_cast<const sockaddr *>(a); }

// Reads what the peer of fd gets until it is shut down or ms pass; returns the bytes and whether it ended.
std::string ReadUntilEnd(int fd, int ms, bool *ended) {
    std::string got;
    *ended = false;
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(ms)) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 20) <= 0) continue;
        char buf[1024];
        const ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) {
            *ended = true;
            break;
        }
        got.append(buf, (size_t)n);
    }
    return got;
}

struct Pair {
    int server = -1, client = -1;
    Pair() {
        int sv[2];
        EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        server = sv[0];
        client = sv[1];
    }
    ~Pair() {
        close(server);
        close(client);
    }
};

TEST(Guard, PerAddressLimitCountsHostsNotPorts) {
    const bitnet_guard_limits lim = {60000, 60000, 2, 20};
    bitnet_guard *g = bitnet_guard_create(&lim);
    ASSERT_NE(g, nullptr);
    const sockaddr_in a1 = V4("10.0.0.1", 1000), a2 = V4("10.0.0.1", 2000), b = V4("10.0.0.2", 1000);
    const sockaddr_in6 a_mapped = V6("::ffff:10.0.0.1", 3000), c6 = V6("2001:db8::1", 1);
    Pair p1, p2, p3;
    EXPECT_TRUE(bitnet_guard_admit(g, SA(&a1), sizeof a1));
    bitnet_guard_conn *c1 = bitnet_guard_open(g, p1.server, SA(&a1), sizeof a1);
    EXPECT_TRUE(bitnet_guard_admit(g, SA(&a2), sizeof a2));
    bitnet_guard_conn *c2 = bitnet_guard_open(g, p2.server, SA(&a2), sizeof a2);
    // a third from 10.0.0.1, whatever its port or whether it comes IPv4-mapped, is refused; others pass
    EXPECT_FALSE(bitnet_guard_admit(g, SA(&a1), sizeof a1));
    EXPECT_FALSE(bitnet_guard_admit(g, SA(&a_mapped), sizeof a_mapped));
    EXPECT_TRUE(bitnet_guard_admit(g, SA(&b), sizeof b));
    EXPECT_TRUE(bitnet_guard_admit(g, SA(&c6), sizeof c6));
    bitnet_guard_close(g, c1); // one leaves: room again
    EXPECT_TRUE(bitnet_guard_admit(g, SA(&a_mapped), sizeof a_mapped));
    bitnet_guard_conn *c3 = bitnet_guard_open(g, p3.server, SA(&a_mapped), sizeof a_mapped);
    EXPECT_FALSE(bitnet_guard_admit(g, SA(&a1), sizeof a1));
    bitnet_guard_stats st{};
    bitnet_guard_get_stats(g, &st);
    EXPECT_EQ(st.accepted, 3u);
    EXPECT_EQ(st.rejected_address, 3u);
    EXPECT_EQ(st.open, 2u);
    bitnet_guard_close(g, c2);
    bitnet_guard_close(g, c3);
    bitnet_guard_get_stats(g, &st);
    EXPECT_EQ(st.open, 0u);
    bitnet_guard_free(g);
}

TEST(Guard, RequestDeadlineIsNotStretchedAndWrites408) {
    const bitnet_guard_limits lim = {1000, 60000, 8, 10};
    bitnet_guard *g = bitnet_guard_create(&lim);
    ASSERT_NE(g, nullptr);
    Pair p;
    const sockaddr_in a = V4("127.0.0.2", 5);
    const auto t0 = std::chrono::steady_clock::now();
    bitnet_guard_conn *c = bitnet_guard_open(g, p.server, SA(&a), sizeof a);
    ASSERT_NE(c, nullptr);
    // a request line arriving later (RECEIVING again) keeps the deadline of the connection's start
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_TRUE(bitnet_guard_phase_set(g, c, BITNET_GUARD_RECEIVING));
    bool ended = false;
    const std::string got = ReadUntilEnd(p.client, 3000, &ended);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_TRUE(ended);
    EXPECT_GE(dt, 0.99);
    EXPECT_LT(dt, 3.0);
    EXPECT_EQ(got.rfind("HTTP/1.1 408 Request Timeout\r\n", 0), 0u) << got;
    EXPECT_NE(got.find("\"code\":\"request_timeout\""), std::string::npos) << got;
    EXPECT_NE(got.find("1000 ms"), std::string::npos) << got;
    // the length header is the body's length
    const size_t body = got.find("\r\n\r\n") + 4;
    EXPECT_NE(got.find("Content-Length: " + std::to_string(got.size() - body) + "\r\n"), std::string::npos) << got;
    EXPECT_TRUE(bitnet_guard_timed_out(g, c));
    EXPECT_FALSE(bitnet_guard_phase_set(g, c, BITNET_GUARD_BUSY)); // too late to answer
    bitnet_guard_stats st{};
    bitnet_guard_get_stats(g, &st);
    EXPECT_EQ(st.timeout_request, 1u);
    EXPECT_EQ(st.timeout_keepalive, 0u);
    bitnet_guard_close(g, c);
    bitnet_guard_free(g);
}

TEST(Guard, BusyHasNoDeadlineAndIdleClosesSilently) {
    const bitnet_guard_limits lim = {1000, 300, 8, 10};
    bitnet_guard *g = bitnet_guard_create(&lim);
    ASSERT_NE(g, nullptr);
    Pair p;
    const sockaddr_in a = V4("127.0.0.1", 5);
    bitnet_guard_conn *c = bitnet_guard_open(g, p.server, SA(&a), sizeof a);
    ASSERT_TRUE(bitnet_guard_phase_set(g, c, BITNET_GUARD_BUSY));
    bool ended = false;
    EXPECT_EQ(ReadUntilEnd(p.client, 1500, &ended), ""); // past the request deadline: still open
    EXPECT_FALSE(ended);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(bitnet_guard_phase_set(g, c, BITNET_GUARD_IDLE));
    const std::string got = ReadUntilEnd(p.client, 3000, &ended);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_TRUE(ended);
    EXPECT_EQ(got, ""); // nothing is owed to an idle connection
    EXPECT_GE(dt, 0.29);
    EXPECT_LT(dt, 2.5);
    bitnet_guard_stats st{};
    bitnet_guard_get_stats(g, &st);
    EXPECT_EQ(st.timeout_request, 0u);
    EXPECT_EQ(st.timeout_keepalive, 1u);
    bitnet_guard_close(g, c);
    bitnet_guard_free(g);
}

TEST(Guard, BadLimitsAreRefused) {
    const bitnet_guard_limits bad[] = {{0, 1, 1, 1}, {1, 0, 1, 1}, {1, 1, 0, 1}, {1, 1, 1, 0}};
    for (const auto &l : bad) EXPECT_EQ(bitnet_guard_create(&l), nullptr);
    EXPECT_EQ(bitnet_guard_create(nullptr), nullptr);
}

// The value of the sample line that starts with `prefix ` (-1 when absent).
double Sample(const std::string &text, const std::string &prefix) {
    const std::string key = "\n" + prefix + " ";
    const size_t at = ("\n" + text).find(key);
    if (at == std::string::npos) return -1;
    return std::strtod(text.c_str() + at + key.size() - 1, nullptr);
}

TEST(Metrics, CountersAndCumulativeBuckets) {
    bitnet_metrics *m = bitnet_metrics_create();
    ASSERT_NE(m, nullptr);
    bitnet_metrics_request(m, BITNET_EP_CHAT, 200, 0.003);
    bitnet_metrics_request(m, BITNET_EP_CHAT, 200, 0.2);
    bitnet_metrics_request(m, BITNET_EP_CHAT, 429, 0.001);
    bitnet_metrics_request(m, BITNET_EP_CHAT, 418, 0.001); // not a status this server sends: "other"
    bitnet_metrics_request(m, BITNET_EP_HEALTH, 200, 1000.0); // past the last bound: +Inf only
    bitnet_metrics_ttft(m, 0.07);
    bitnet_metrics_timeout(m, BITNET_TIMEOUT_WRITE);
    bitnet_metrics_timeout(m, BITNET_TIMEOUT_WRITE);
    bitnet_metrics_timeout(m, BITNET_TIMEOUT_READ);
    bitnet_engine_stats es{};
    es.busy = 1;
    es.waiting = 3;
    es.slots = 4;
    es.generated = 500;
    es.prompt_evaluated = 1000;
    es.busy_gen_s = 2.0;
    es.busy_prompt_s = 0.5;
    bitnet_guard_stats gs{};
    gs.open = 7;
    gs.rejected_address = 5;
    gs.timeout_request = 2;
    char *txt = bitnet_metrics_render(m, &es, &gs);
    ASSERT_NE(txt, nullptr);
    const std::string t = txt;
    free(txt);
    EXPECT_EQ(Sample(t, "bitnet_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"}"), 2);
    EXPECT_EQ(Sample(t, "bitnet_requests_total{endpoint=\"/v1/chat/completions\",status=\"429\"}"), 1);
    EXPECT_EQ(Sample(t, "bitnet_requests_total{endpoint=\"/v1/chat/completions\",status=\"other\"}"), 1);
    EXPECT_EQ(Sample(t, "bitnet_requests_total{endpoint=\"/health\",status=\"200\"}"), 1);
    EXPECT_EQ(t.find("endpoint=\"/v1/completions\""), std::string::npos); // no line for what never happened
    // cumulative: 0.001, 0.001, 0.003 <= 0.005; 0.2 <= 0.25
    EXPECT_EQ(Sample(t, "bitnet_request_duration_seconds_bucket{endpoint=\"/v1/chat/completions\",le=\"0.005\"}"), 3);
    EXPECT_EQ(Sample(t, "bitnet_request_duration_seconds_bucket{endpoint=\"/v1/chat/completions\",le=\"0.1\"}"), 3);
    EXPECT_EQ(Sample(t, "bitnet_request_duration_seconds_bucket{endpoint=\"/v1/chat/completions\",le=\"0.25\"}"), 4);
    EXPECT_EQ(Sample(t, "bitnet_request_duration_seconds_bucket{endpoint=\"/v1/chat/completions\",le=\"+Inf\"}"), 4);
    EXPECT_EQ(Sample(t, "bitnet_request_duration_seconds_count{endpoint=\"/v1/chat/completions\"}"), 4);
    EXPECT_NEAR(Sample(t, "bitnet_request_duration_seconds_sum{endpoint=\"/v1/chat/completions\"}"), 0.205, 1e-6);
    EXPECT_EQ(Sample(t, "bitnet_request_duration_seconds_bucket{endpoint=\"/health\",le=\"300\"}"), 0);
    EXPECT_EQ(Sample(t, "bitnet_request_duration_seconds_bucket{endpoint=\"/health\",le=\"+Inf\"}"), 1);
    EXPECT_EQ(Sample(t, "bitnet_time_to_first_token_seconds_bucket{le=\"0.05\"}"), 0);
    EXPECT_EQ(Sample(t, "bitnet_time_to_first_token_seconds_bucket{le=\"0.1\"}"), 1);
    EXPECT_EQ(Sample(t, "bitnet_time_to_first_token_seconds_count"), 1);
    EXPECT_EQ(Sample(t, "bitnet_rejected_total{reason=\"queue_full\"}"), 1);
    EXPECT_EQ(Sample(t, "bitnet_rejected_total{reason=\"write_timeout\"}"), 2);
    EXPECT_EQ(Sample(t, "bitnet_rejected_total{reason=\"read_timeout\"}"), 1);
    EXPECT_EQ(Sample(t, "bitnet_rejected_total{reason=\"per_address_limit\"}"), 5);
    EXPECT_EQ(Sample(t, "bitnet_rejected_total{reason=\"request_timeout\"}"), 2);
    EXPECT_EQ(Sample(t, "bitnet_connections_open"), 7);
    EXPECT_EQ(Sample(t, "bitnet_tokens_per_second{phase=\"generation\"}"), 250);
    EXPECT_EQ(Sample(t, "bitnet_tokens_per_second{phase=\"prompt\"}"), 2000);
    EXPECT_EQ(Sample(t, "bitnet_slots{state=\"busy\"}"), 1);
    EXPECT_EQ(Sample(t, "bitnet_slots{state=\"idle\"}"), 3);
    EXPECT_EQ(Sample(t, "bitnet_queue_length"), 3);
    // every family has its HELP and TYPE before its samples
    for (const char *fam : {"requests_total", "request_duration_seconds", "time_to_first_token_seconds",
                            "rejected_total", "tokens_per_second", "slots", "queue_length"}) {
        const std::string name = std::string("bitnet_") + fam;
        const size_t help = t.find("# HELP " + name + " "), type = t.find("# TYPE " + name + " ");
        EXPECT_NE(help, std::string::npos) << name;
        EXPECT_LT(help, type) << name;
        EXPECT_LT(type, t.find("\n" + name)) << name;
    }
    bitnet_metrics_free(m);
}

} // namespace
