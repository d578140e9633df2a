// test_mcu_plan.cc — src/mcu/plan.h: board files (the shipped ones, and every kind of error naming file, key
// and value), placement, the greedy partition against brute force over every contiguous partition of small
// synthetic models, bitnet.cpp's workspace rule, and the plan of bitnet.cpp's tiny model on both boards, whose
// arena must be the node API's own figure (and exactly what bitnet_mcu_start then uses).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "test_util.h"

extern "C" {
#include "base/types.h"
#include "mcu/plan.h"
}

namespace {

std::string g_dir;
::testing::Environment *const g_env =
    ::testing::AddGlobalTestEnvironment(new bitnet_test::TempDirEnv("bitnet_mcu_plan_", &g_dir));

const std::string kBoards = std::string(BITNET_SOURCE_DIR) + "/boards/";
const std::string kTiny = std::string(BITNET_TEST_DATA_DIR) + "/bitnetcpp-tiny/ggml-model-i2_s.gguf";

// A valid board file; the error tests change one line of it.
const char *const kGood = R"(name: test
description: a board for the tests
sources:
  - id: doc
    title: a document
cpu:
  core: test core
  cores: 1
  clock_mhz: 100
  fpu: single
  simd: none
  source: [doc]
memories:
  - name: flash
    kind: flash
    bytes: 4 MiB
    roles: [weights]
    stream_mb_s: 20
    source: [doc]
    reserve:
      - what: firmware
        bytes: 512 KiB
  - name: sram
    kind: ram
    bytes: 512 KiB
    roles: [arena]
    stream_mb_s: 500.5
    source: [doc]
)";

std::string write(const std::string &name, const std::string &text) {
    const std::string path = g_dir + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
}

std::string replace(std::string s, const std::string &from, const std::string &to) {
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) s.replace(at, from.size(), to);
    return s;
}

// Loading `text` fails with BITNET_ERR_FORMAT and a message containing the file and every part.
void expect_refused(const std::string &name, const std::string &text, const std::vector<std::string> &parts,
                    bitnet_status want = BITNET_ERR_FORMAT) {
    const std::string path = write(name, text);
    bitnet_plan_board *b = nullptr;
    bitnet_error err;
    err.msg[0] = '\0';
    EXPECT_EQ(bitnet_plan_board_load(path.c_str(), &b, &err), want) << name;
    EXPECT_EQ(b, nullptr);
    const std::string msg = err.msg;
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    for (const std::string &p : parts) EXPECT_NE(msg.find(p), std::string::npos) << name << ": '" << p << "' not in: " << msg;
}

TEST(PlanBoard, ShippedBoardsLoad) {
    bitnet_error err;
    bitnet_plan_board *b = nullptr;
    ASSERT_EQ(bitnet_plan_board_load((kBoards + "esp32s3.yaml").c_str(), &b, &err), BITNET_OK) << err.msg;
    EXPECT_STREQ(b->name, "esp32s3");
    EXPECT_EQ(b->cpu.cores, 2);
    EXPECT_EQ(b->cpu.clock_mhz, 240.0);
    ASSERT_EQ(b->n_memories, 3);
    EXPECT_STREQ(b->memories[0].name, "flash");
    EXPECT_EQ(b->memories[0].kind, BITNET_PLAN_FLASH);
    EXPECT_EQ(b->memories[0].bytes, 16u << 20);
    EXPECT_EQ(b->memories[0].roles, (unsigned)BITNET_PLAN_ROLE_WEIGHTS);
    EXPECT_EQ(b->memories[1].bytes, 512u << 10);
    EXPECT_EQ(b->memories[2].bytes, 8u << 20);
    for (int m = 0; m < b->n_memories; m++) {
        EXPECT_EQ(b->memories[m].usable + b->memories[m].reserved, b->memories[m].bytes);
        EXPECT_GT(b->memories[m].n_source, 0);
    }
    EXPECT_GT(b->memories[1].reserved, 0u); // the firmware's SRAM is an explicit reserve
    bitnet_plan_board_free(b);

    ASSERT_EQ(bitnet_plan_board_load((kBoards + "cortex-m4f.yaml").c_str(), &b, &err), BITNET_OK) << err.msg;
    ASSERT_EQ(b->n_memories, 3);
    EXPECT_STREQ(b->memories[2].name, "psram");
    EXPECT_EQ(b->memories[2].bytes, 16u << 20);
    EXPECT_EQ(b->memories[2].roles, (unsigned)(BITNET_PLAN_ROLE_WEIGHTS | BITNET_PLAN_ROLE_ARENA));
    bitnet_plan_board_free(b);
}

TEST(PlanBoard, GoodFileAndUnits) {
    const std::string path = write("good.yaml", kGood);
    bitnet_plan_board *b = nullptr;
    bitnet_error err;
    ASSERT_EQ(bitnet_plan_board_load(path.c_str(), &b, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(b->memories[0].bytes, 4u << 20);
    EXPECT_EQ(b->memories[0].reserved, 512u << 10);
    EXPECT_EQ(b->memories[0].usable, (4u << 20) - (512u << 10));
    EXPECT_EQ(b->memories[1].stream_mb_s, 500.5);
    EXPECT_STREQ(b->cpu.fpu, "single");
    EXPECT_STREQ(b->memories[1].source[0], "doc");
    bitnet_plan_board_free(b);
}

TEST(PlanBoard, ErrorsNameFileKeyAndValue) {
    const std::string g = kGood;
    expect_refused("missing.yaml", replace(g, "    kind: flash\n", ""), {"memories[0]", "missing key 'kind'"});
    expect_refused("missing_top.yaml", replace(g, "description: a board for the tests\n", ""),
                   {"the top level", "missing key 'description'"});
    expect_refused("type_int.yaml", replace(g, "cores: 1", "cores: two"), {"cpu.cores", "'two'", "not an integer"});
    expect_refused("type_list.yaml", replace(g, "roles: [weights]", "roles: weights"),
                   {"memories[0].roles", "expected a list", "'weights'"});
    expect_refused("type_map.yaml",
                   replace(g, "cpu:\n  core: test core\n  cores: 1\n  clock_mhz: 100\n  fpu: single\n  simd: none\n  source: [doc]\n",
                           "cpu: fast\n"),
                   {"cpu: expected a mapping", "'fast'"});
    expect_refused("type_string.yaml", replace(g, "name: test\n", "name: [a, b]\n"), {"name", "expected a string", "a list"});
    expect_refused("unknown.yaml", replace(g, "    stream_mb_s: 20\n", "    stream_mb_s: 20\n    size: 5\n"),
                   {"memories[0]", "unknown key 'size'", "line 19"});
    expect_refused("unknown_top.yaml", g + "extra: 1\n", {"the top level", "unknown key 'extra'"});
    expect_refused("twice.yaml", replace(g, "  cores: 1\n", "  cores: 1\n  cores: 2\n"), {"cpu", "'cores'", "twice"});
    expect_refused("negative.yaml", replace(g, "bytes: 4 MiB", "bytes: -5"), {"memories[0].bytes", "'-5'", "byte count"});
    expect_refused("zero.yaml", replace(g, "bytes: 4 MiB", "bytes: 0"), {"memories[0].bytes", "'0'", "at least 1 byte"});
    expect_refused("unit.yaml", replace(g, "bytes: 4 MiB", "bytes: 4 MB"), {"memories[0].bytes", "'4 MB'"});
    expect_refused("reserve_neg.yaml", replace(g, "bytes: 512 KiB\n  - name", "bytes: -1\n  - name"),
                   {"memories[0].reserve[0].bytes", "'-1'"});
    expect_refused("reserve_big.yaml", replace(g, "bytes: 512 KiB\n  - name", "bytes: 5 MiB\n  - name"),
                   {"memories[0].reserve", "5242880", "4194304"});
    expect_refused("bandwidth.yaml", replace(g, "stream_mb_s: 20", "stream_mb_s: -3"),
                   {"memories[0].stream_mb_s", "'-3'", "positive number"});
    expect_refused("kind.yaml", replace(g, "kind: flash", "kind: rom"), {"memories[0].kind", "'rom'", "flash, ram"});
    expect_refused("role.yaml", replace(g, "roles: [weights]", "roles: [code]"), {"memories[0].roles[0]", "'code'"});
    expect_refused("flash_arena.yaml", replace(g, "roles: [weights]", "roles: [weights, arena]"),
                   {"memories[0].roles", "flash", "arena"});
    expect_refused("fpu.yaml", replace(g, "fpu: single", "fpu: yes"), {"cpu.fpu", "'yes'", "none, single, double"});
    expect_refused("source.yaml", replace(g, "    source: [doc]\n    reserve", "    source: [datasheet]\n    reserve"),
                   {"memories[0].source[0]", "'datasheet'", "sources"});
    expect_refused("no_arena.yaml", replace(g, "roles: [arena]", "roles: []"), {"role 'arena'"});
    expect_refused("dup_memory.yaml", replace(g, "  - name: sram", "  - name: flash"), {"memories[1].name", "'flash'"});
    expect_refused("syntax.yaml", replace(g, "cores: 1", "cores: [1"), {"YAML error at line"});
    expect_refused("two_docs.yaml", g + "---\nname: x\n", {"more than one YAML document"});
    expect_refused("empty.yaml", "", {"empty YAML document"});
    bitnet_plan_board *b = nullptr;
    bitnet_error err;
    const std::string nofile = g_dir + "/no-such-board.yaml";
    EXPECT_EQ(bitnet_plan_board_load(nofile.c_str(), &b, &err), BITNET_ERR_IO);
    EXPECT_NE(std::string(err.msg).find(nofile), std::string::npos) << err.msg;
}

// ---- placement and partition ------------------------------------------------------------------------------

// A board built in memory: (kind, usable bytes, roles) per memory, no reserves.
struct HandBoard {
    bitnet_plan_board b;
    HandBoard(const std::vector<std::tuple<bitnet_plan_memory_kind, uint64_t, unsigned>> &mems) {
        std::memset(&b, 0, sizeof b);
        b.name = "hand";
        b.path = "(hand-made)";
        static const char *const names[] = {"m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7"};
        for (const auto &m : mems) {
            bitnet_plan_memory &M = b.memories[b.n_memories];
            M.name = names[b.n_memories];
            M.kind = std::get<0>(m);
            M.bytes = M.usable = std::get<1>(m);
            M.roles = std::get<2>(m);
            M.stream_mb_s = 1;
            b.n_memories++;
        }
    }
};

constexpr unsigned W = BITNET_PLAN_ROLE_WEIGHTS, A = BITNET_PLAN_ROLE_ARENA;

TEST(PlanPlace, PreferenceSharingAndReasons) {
    HandBoard h({{BITNET_PLAN_FLASH, 1000, W}, {BITNET_PLAN_RAM, 100, A}, {BITNET_PLAN_RAM, 500, A}});
    bitnet_plan_fit f;
    ASSERT_TRUE(bitnet_plan_place(&h.b, 900, 100, &f));
    EXPECT_EQ(f.weights_memory, 0);
    EXPECT_EQ(f.arena_memory, 1); // the first arena memory that fits
    ASSERT_TRUE(bitnet_plan_place(&h.b, 900, 101, &f));
    EXPECT_EQ(f.arena_memory, 2);
    EXPECT_NE(std::string(f.reason).find("too big for m1"), std::string::npos) << f.reason;
    EXPECT_FALSE(bitnet_plan_place(&h.b, 1001, 10, &f));
    EXPECT_NE(std::string(f.reason).find("the weights (1001 bytes) exceed"), std::string::npos) << f.reason;
    EXPECT_FALSE(bitnet_plan_place(&h.b, 10, 501, &f));
    EXPECT_NE(std::string(f.reason).find("the arena (501 bytes) exceeds"), std::string::npos) << f.reason;

    // one memory with both roles: the two must fit together; a weights memory elsewhere frees it for the arena
    HandBoard s({{BITNET_PLAN_RAM, 1000, W | A}});
    EXPECT_TRUE(bitnet_plan_place(&s.b, 600, 400, &f));
    EXPECT_EQ(f.weights_memory, 0);
    EXPECT_EQ(f.arena_memory, 0);
    EXPECT_FALSE(bitnet_plan_place(&s.b, 600, 401, &f));
    EXPECT_NE(std::string(f.reason).find("400 of them beside the weights"), std::string::npos) << f.reason;
    HandBoard t({{BITNET_PLAN_RAM, 100, W | A}, {BITNET_PLAN_FLASH, 1000, W}});
    ASSERT_TRUE(bitnet_plan_place(&t.b, 50, 100, &f)); // the weights move to the flash to leave m0 to the arena
    EXPECT_EQ(f.weights_memory, 1);
    EXPECT_EQ(f.arena_memory, 0);
}

// The fewest boards over every contiguous partition of the pieces (all 2^(P-1) of them), or -1 when there is
// none; whether a range fits is asked once per range.
int brute_force(const bitnet_plan_board *b, const bitnet_plan_pieces *pc) {
    const int P = pc->n_layer + 2;
    std::vector<char> fits((size_t)(P + 1) * (P + 1), 0);
    for (int a = 0; a < P; a++) {
        for (int e = a + 1; e <= P; e++) {
            uint64_t flash, arena;
            bitnet_plan_range(pc, a, e, &flash, &arena);
            bitnet_plan_fit f;
            fits[(size_t)a * (P + 1) + e] = bitnet_plan_place(b, flash, arena, &f);
        }
    }
    int best = -1;
    for (uint32_t cuts = 0; cuts < (1u << (P - 1)); cuts++) { // bit i: a board ends after piece i
        int boards = 0, start = 0;
        bool ok = true;
        for (int p = 0; p < P && ok; p++) {
            if (p == P - 1 || (cuts >> p) & 1u) {
                ok = fits[(size_t)start * (P + 1) + p + 1];
                boards++;
                start = p + 1;
            }
        }
        if (ok && (best < 0 || boards < best)) best = boards;
    }
    return best;
}

TEST(PlanPartition, GreedyEqualsBruteForce) {
    std::mt19937_64 rng(20261201);
    auto U = [&](uint64_t lo, uint64_t hi) { return std::uniform_int_distribution<uint64_t>(lo, hi)(rng); };
    int possible = 0, impossible = 0, several = 0;
    for (int trial = 0; trial < 3000; trial++) {
        const int L = (int)U(0, 9);
        std::vector<uint64_t> lf(L), lk(L);
        for (int l = 0; l < L; l++) {
            lf[l] = U(1, 120);
            lk[l] = 2 * U(0, 40);
        }
        bitnet_plan_pieces pc;
        std::memset(&pc, 0, sizeof pc);
        pc.n_layer = L;
        pc.layer_flash = lf.data();
        pc.layer_kv = lk.data();
        pc.node_flash = U(0, 30);
        pc.node_arena = U(0, 60);
        pc.first_flash = U(0, 200);
        pc.shared_flash = U(0, 1) ? pc.first_flash : 0; // tied head
        pc.last_flash = U(0, 30) + pc.shared_flash + (pc.shared_flash ? 0 : U(0, 200));
        pc.last_arena = U(0, 80);
        std::vector<std::tuple<bitnet_plan_memory_kind, uint64_t, unsigned>> mems;
        const int n_mem = (int)U(1, 3);
        for (int m = 0; m < n_mem; m++) {
            const bool flash = U(0, 1);
            const unsigned roles = flash ? (U(0, 3) ? W : 0) : (unsigned)U(0, 3);
            mems.emplace_back(flash ? BITNET_PLAN_FLASH : BITNET_PLAN_RAM, U(20, 600), roles);
        }
        HandBoard h(mems);
        bitnet_plan_partition part;
        bitnet_error err;
        ASSERT_EQ(bitnet_plan_partition_make(&h.b, &pc, &part, &err), BITNET_OK) << err.msg;
        const int want = brute_force(&h.b, &pc);
        ASSERT_EQ(part.possible, want > 0) << "trial " << trial << ": " << part.reason;
        if (want > 0) {
            ASSERT_EQ(part.n_boards, want) << "trial " << trial;
            // the nodes cover the pieces in order and each fits
            int32_t next = 0;
            for (int32_t i = 0; i < part.n_boards; i++) {
                const bitnet_plan_node &nd = part.nodes[i];
                EXPECT_EQ(nd.first_piece, next);
                EXPECT_GT(nd.end_piece, nd.first_piece);
                EXPECT_TRUE(nd.fit.fits);
                uint64_t flash, arena;
                bitnet_plan_range(&pc, nd.first_piece, nd.end_piece, &flash, &arena);
                EXPECT_EQ(flash, nd.fit.flash_bytes);
                EXPECT_EQ(arena, nd.fit.arena_bytes);
                EXPECT_EQ(nd.has_first, nd.first_piece == 0);
                EXPECT_EQ(nd.has_last, nd.end_piece == L + 2);
                next = nd.end_piece;
            }
            EXPECT_EQ(next, L + 2);
            possible++;
            several += want > 1;
        } else {
            EXPECT_GE(part.bad_piece, 0);
            EXPECT_NE(std::string(part.reason).find("cannot split a tensor"), std::string::npos) << part.reason;
            int alone = 0; // pieces that fit no board alone; the first is bad_piece
            for (int p = L + 1; p >= 0; p--) {
                uint64_t flash, arena;
                bitnet_plan_range(&pc, p, p + 1, &flash, &arena);
                bitnet_plan_fit f;
                if (!bitnet_plan_place(&h.b, flash, arena, &f)) {
                    alone++;
                    EXPECT_LE(part.bad_piece, p);
                    if (p == part.bad_piece) alone += 1000;
                }
            }
            EXPECT_EQ(alone, 1000 + part.n_bad_pieces) << part.reason;
            impossible++;
        }
        bitnet_plan_partition_free(&part);
    }
    // the random cases cover all three outcomes
    EXPECT_GT(possible - several, 50);
    EXPECT_GT(several, 50);
    EXPECT_GT(impossible, 50);
}

TEST(PlanPartition, RangeFormula) {
    const uint64_t lf[3] = {10, 20, 30}, lk[3] = {128, 128, 130};
    bitnet_plan_pieces pc;
    std::memset(&pc, 0, sizeof pc);
    pc.n_layer = 3;
    pc.layer_flash = lf;
    pc.layer_kv = lk;
    pc.node_flash = 1;
    pc.node_arena = 2;
    pc.first_flash = 100;
    pc.last_flash = 105; // output_norm 5 + tied head 100
    pc.shared_flash = 100;
    pc.last_arena = 7;
    uint64_t f, a;
    bitnet_plan_range(&pc, 0, 5, &f, &a); // everything: token_embd once
    EXPECT_EQ(f, 1u + 100 + 60 + 105 - 100);
    EXPECT_EQ(a, 2u + 2 * 256 + 7); // K and V: (128+128+130)/2 = 193 -> 256 each
    bitnet_plan_range(&pc, 0, 2, &f, &a); // token_embd + layer 0
    EXPECT_EQ(f, 1u + 100 + 10);
    EXPECT_EQ(a, 2u + 2 * 64);
    bitnet_plan_range(&pc, 3, 5, &f, &a); // layer 2 + the head: token_embd stored again
    EXPECT_EQ(f, 1u + 30 + 105);
    EXPECT_EQ(a, 2u + 2 * 128 + 7);
}

TEST(PlanSeed, BitnetCppRule) {
    // TL1: 768·1·15 + 1·2·4 = 11528 -> 11584; TL2: 768·1·11 + 2·1·2·4 = 8464 -> 8512
    EXPECT_EQ(bitnet_plan_seed_wsize(BITNET_TYPE_TL1, 768, 1), 11584u);
    EXPECT_EQ(bitnet_plan_seed_wsize(BITNET_TYPE_TL2, 768, 1), 8512u);
    EXPECT_EQ(bitnet_plan_seed_wsize(BITNET_TYPE_TL1, 4096, 8), 4096u * 8 * 15 + 64);
    EXPECT_EQ(bitnet_plan_seed_wsize(BITNET_TYPE_I2_S, 768, 1), 0u);
}

// ---- the tiny model on both boards ------------------------------------------------------------------------

// The node API's own arena for (n_ctx, n_batch) with n_batch rows of logits, and a start on exactly that many
// usable bytes (one less is refused). The image is named by its path, as bitnet-mcu-run and the plan name it:
// the GGUF index keeps a copy of the name, so the metadata grows with its length.
uint64_t node_arena(int32_t n_ctx, int32_t n_batch) {
    const std::vector<uint8_t> file = bitnet_test::read_file(kTiny);
    void *image = aligned_alloc(64, (file.size() + 63) / 64 * 64);
    std::memcpy(image, file.data(), file.size());
    const size_t arena_bytes = (size_t)64 << 20;
    void *arena = aligned_alloc(64, arena_bytes);
    bitnet_mcu rt;
    bitnet_error err;
    uint64_t total = 0;
    EXPECT_EQ(bitnet_mcu_open(&rt, image, file.size(), kTiny.c_str(), arena, arena_bytes, &err), BITNET_OK) << err.msg;
    const bitnet_mcu_params p = {n_ctx, n_batch, n_batch};
    bitnet_mcu_budget bud;
    EXPECT_EQ(bitnet_mcu_arena_bytes(&rt, &p, &bud, &err), BITNET_OK) << err.msg;
    total = bud.total;
    bitnet_mcu_close(&rt);
    // the same image in an arena of exactly `total` usable bytes starts, and uses all of them
    void *exact = aligned_alloc(64, (total + 63) / 64 * 64);
    EXPECT_EQ(bitnet_mcu_open(&rt, image, file.size(), kTiny.c_str(), exact, total, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(bitnet_mcu_start(&rt, &p, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(rt.arena.used, total);
    bitnet_mcu_close(&rt);
    EXPECT_EQ(bitnet_mcu_open(&rt, image, file.size(), kTiny.c_str(), exact, total - 1, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(bitnet_mcu_start(&rt, &p, &err), BITNET_ERR_NOMEM);
    bitnet_mcu_close(&rt);
    std::free(exact);
    std::free(arena);
    std::free(image);
    return total;
}

TEST(PlanModel, TinyFitsBothBoardsWithTheNodesArena) {
    const std::vector<uint8_t> file = bitnet_test::read_file(kTiny);
    ASSERT_FALSE(file.empty());
    for (const char *board : {"esp32s3", "cortex-m4f"}) {
        bitnet_plan_board *b = nullptr;
        bitnet_error err;
        ASSERT_EQ(bitnet_plan_board_load((kBoards + board + ".yaml").c_str(), &b, &err), BITNET_OK) << err.msg;
        for (const auto &sz : std::vector<std::pair<int32_t, int32_t>>{{256, 1}, {64, 4}, {16, 32}}) {
            SCOPED_TRACE(std::string(board) + " n_ctx " + std::to_string(sz.first) + " n_batch " + std::to_string(sz.second));
            const bitnet_mcu_plan_params pp = {sz.first, sz.second, 0};
            bitnet_mcu_plan *p = nullptr;
            ASSERT_EQ(bitnet_mcu_plan_make(kTiny.c_str(), b, &pp, &p, &err), BITNET_OK) << err.msg;
            const int32_t n_batch = std::min(sz.first, sz.second);
            EXPECT_EQ(p->params.n_batch, n_batch);
            EXPECT_EQ(p->budget.total, node_arena(sz.first, n_batch));
            EXPECT_EQ(p->image_bytes, file.size());
            EXPECT_TRUE(p->one.fits) << p->one.reason;
            ASSERT_TRUE(p->partition.possible);
            EXPECT_EQ(p->partition.n_boards, 1);
            // the pieces add up to the image and the arena; every layer's tensors are counted
            uint64_t layers = 0, kv = 0;
            ASSERT_EQ(p->hp.n_layer, 2);
            for (int32_t l = 0; l < p->hp.n_layer; l++) {
                EXPECT_EQ(p->layers[l].n_tensors, 11); // 7 projections, 4 norms
                layers += p->layers[l].flash_bytes;
                kv += p->layers[l].kv_cache_bytes;
            }
            EXPECT_EQ(kv, p->budget.context.kv_cache);
            EXPECT_LT(p->output, 0); // tied
            ASSERT_GE(p->token_embd, 0);
            EXPECT_EQ(p->header_bytes + layers + p->tensors[p->token_embd].flash_bytes +
                          p->tensors[p->output_norm].flash_bytes,
                      p->image_bytes);
            // the LUT workspace: the I2_S product with the largest K, the runtime's size per buffer
            ASSERT_GE(p->lut_tensor, 0);
            EXPECT_STREQ(p->tensors[p->lut_tensor].name, "blk.0.ffn_down.weight");
            const uint64_t K = 768, N = (uint64_t)n_batch, r4 = (4 * N + 63) / 64 * 64;
            EXPECT_EQ(p->lut_buffer_bytes, N * K + 2 * r4);
            EXPECT_EQ(p->budget.context.lut_workspace, 2 * p->lut_buffer_bytes);
            EXPECT_EQ(p->seed_tl1_bytes, bitnet_plan_seed_wsize(BITNET_TYPE_TL1, 768, n_batch));
            // per generated token: 14 I2_S projections (4 of 256x256, 3 of 256x768: M*K/4 + 32 bytes each) and 8
            // F32 norms, the whole tied F16 head (512 x 256 x 2), one of its rows, output_norm; KV: 2 layers of
            // K and V, 256 F16 values per position
            const uint64_t proj = 2 * (4 * (256 * 256 / 4 + 32) + 3 * (256 * 768 / 4 + 32));
            const uint64_t norms = 2 * 4 * (256 + 256 + 256 + 768);
            EXPECT_EQ(p->token_layer_bytes, proj + norms);
            EXPECT_EQ(p->token_head_bytes, 512u * 256 * 2);
            EXPECT_EQ(p->token_embd_row_bytes, 256u * 2);
            EXPECT_EQ(p->token_flash_bytes, proj + norms + 512u * 256 * 2 + 256 * 2 + 256 * 4);
            EXPECT_EQ(p->token_kv_write_bytes, 2u * 2 * 256 * 2);
            EXPECT_EQ(p->token_kv_full_bytes, p->token_kv_write_bytes * (uint64_t)sz.first);
            EXPECT_EQ(p->token_kv_mid_bytes, p->token_kv_write_bytes * (uint64_t)(sz.first / 2 + 1));
            const std::string json = g_dir + "/tiny-" + board + ".json";
            EXPECT_EQ(bitnet_mcu_plan_write_json(p, b, json.c_str(), &err), BITNET_OK) << err.msg;
            bitnet_mcu_plan_free(p);
        }
        bitnet_plan_board_free(b);
    }
}

TEST(PlanModel, Errors) {
    bitnet_plan_board *b = nullptr;
    bitnet_error err;
    ASSERT_EQ(bitnet_plan_board_load((kBoards + "esp32s3.yaml").c_str(), &b, &err), BITNET_OK) << err.msg;
    bitnet_mcu_plan *p = nullptr;
    const bitnet_mcu_plan_params pp = {256, 1, 0};
    const std::string missing = g_dir + "/missing.gguf";
    EXPECT_EQ(bitnet_mcu_plan_make(missing.c_str(), b, &pp, &p, &err), BITNET_ERR_IO);
    EXPECT_NE(std::string(err.msg).find(missing), std::string::npos) << err.msg;
    const std::string bad = write("bad.gguf", "not a gguf file at all");
    EXPECT_EQ(bitnet_mcu_plan_make(bad.c_str(), b, &pp, &p, &err), BITNET_ERR_FORMAT);
    EXPECT_NE(std::string(err.msg).find(bad), std::string::npos) << err.msg;
    const bitnet_mcu_plan_params zero = {0, 1, 0};
    EXPECT_EQ(bitnet_mcu_plan_make(kTiny.c_str(), b, &zero, &p, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("n_ctx = 0"), std::string::npos) << err.msg;
    EXPECT_EQ(p, nullptr);
    p = nullptr;
    ASSERT_EQ(bitnet_mcu_plan_make(kTiny.c_str(), b, &pp, &p, &err), BITNET_OK) << err.msg;
    // a board runs its image in place: an image in bitnet.cpp's arm64 layout, asked for or recorded, is refused
    // before any weight is rewritten, naming the command that writes the image to plan
    const bitnet_mcu_plan_params arm = {256, 1, BITNET_I2S_LAYOUT_ARM64};
    bitnet_mcu_plan *q = nullptr;
    EXPECT_EQ(bitnet_mcu_plan_make(kTiny.c_str(), b, &arm, &q, &err), BITNET_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(err.msg).find(kTiny + ": I2_S layout arm64: a board runs its image in place, in the x86 "
                                        "layout; rewrite it once (bitnet-convert --relayout arm64 " + kTiny),
              std::string::npos) << err.msg;
    const std::string rec = bitnet_test::write_i2s_layout_copy(kTiny, g_dir + "/rec-arm64.gguf",
                                                                BITNET_I2S_LAYOUT_ARM64, "arm64");
    EXPECT_EQ(bitnet_mcu_plan_make(rec.c_str(), b, &pp, &q, &err), BITNET_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(err.msg).find(rec + ": records I2_S layout arm64: a board runs its image in place"),
              std::string::npos) << err.msg;
    EXPECT_EQ(q, nullptr);
    EXPECT_NE(std::string(p->i2s_note).find("I2_S layout x86 (assumed"), std::string::npos) << p->i2s_note;
    const std::string nodir = g_dir + "/no-dir/plan.json";
    EXPECT_EQ(bitnet_mcu_plan_write_json(p, b, nodir.c_str(), &err), BITNET_ERR_IO);
    EXPECT_NE(std::string(err.msg).find(nodir), std::string::npos) << err.msg;
    bitnet_mcu_plan_free(p);
    bitnet_plan_board_free(b);
}

} // namespace
