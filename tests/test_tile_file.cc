// test_tile_file.cc — user tile tables (src/tilefile/tile_file.h, `--lut-tiles FILE`): bitnet.cpp's
// kernel_config.ini (the hand-written files of tests/data/kernel_config/, every key spelling
// ConfigParser accepts) and configs/-style YAML (the committed configs, table choice); every malformed
// input is refused with a message naming the file, the section or entry, the key and the value.
#include <gtest/gtest.h>

#include <string>

#include "base/common.h"
#include "tilefile/tile_file.h"
#include "test_util.h"

namespace {

std::string g_dir;
::testing::Environment *const g_env =
    ::testing::AddGlobalTestEnvironment(new bitnet_test::TempDirEnv("bitnet_tile_file_", &g_dir));

const std::string kData = std::string(BITNET_TEST_DATA_DIR) + "/kernel_config/";
const std::string kConfigs = std::string(BITNET_SOURCE_DIR) + "/configs/";

struct TileFile {
    bitnet_tile_file *f = nullptr;
    ~TileFile() { bitnet_tile_file_free(f); }
};

// Parses `text` named `name`; expects success.
void Parse(const std::string &text, const std::string &name, TileFile *out, const char *table = nullptr) {
    bitnet_error err{};
    ASSERT_EQ(bitnet_tile_file_parse(text.data(), text.size(), name.c_str(), (bitnet_tile_file_format)0, table, &out->f,
                                     &err),
              BITNET_OK)
        << err.msg;
    ASSERT_NE(out->f, nullptr);
}

// Parses `text`; expects `want` and returns the message.
std::string ParseFails(const std::string &text, const std::string &name, bitnet_status want = BITNET_ERR_FORMAT,
                       const char *table = nullptr) {
    bitnet_tile_file *f = reinterpret_cast<bitnet_tile_file *>(0x1);
    bitnet_error err{};
    const bitnet_status st =
        bitnet_tile_file_parse(text.data(), text.size(), name.c_str(), (bitnet_tile_file_format)0, table, &f, &err);
    EXPECT_EQ(st, want) << err.msg;
    EXPECT_EQ(f, nullptr);
    if (st == BITNET_OK) bitnet_tile_file_free(f);
    return err.msg;
}

void ExpectEntry(const bitnet_tile_file *f, int type, int64_t M, int64_t K, int BM, int BK, int bm) {
    const bitnet_tile_entry *e = bitnet_tile_file_find(f, type, M, K);
    ASSERT_NE(e, nullptr) << M << "x" << K;
    EXPECT_EQ(e->tiles.BM, BM) << M << "x" << K;
    EXPECT_EQ(e->tiles.BK, BK) << M << "x" << K;
    EXPECT_EQ(e->tiles.bm, bm) << M << "x" << K;
}

void ExpectHas(const std::string &msg, const std::vector<std::string> &parts) {
    for (const auto &p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' in: " << msg;
}

const char *kIni = "[Kernels_0]\nm = 256\nk = 256\nbm = 128\nbk = 96\nbmm = 32\n\n";

TEST(TileFile, ReadsBitnetCppKernelConfigIni) {
    TileFile t;
    bitnet_error err{};
    const std::string path = kData + "tiny-tl2.ini";
    ASSERT_EQ(bitnet_tile_file_load(path.c_str(), nullptr, &t.f, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(t.f->format, BITNET_TILE_FILE_INI);
    EXPECT_EQ(t.f->n_entries, 3u);
    EXPECT_EQ(t.f->path, path);
    // the ini does not say TL1 or TL2: its entries answer for both schemes
    for (int type : {BITNET_TYPE_TL1, BITNET_TYPE_TL2}) {
        ExpectEntry(t.f, type, 256, 256, 128, 96, 32);
        ExpectEntry(t.f, type, 256, 768, 128, 48, 32);
        ExpectEntry(t.f, type, 768, 256, 384, 96, 32);
    }
    EXPECT_EQ(t.f->entries[0].type, 0);
    EXPECT_STREQ(t.f->entries[1].where, "[Kernels_1]");
    EXPECT_EQ(bitnet_tile_file_find(t.f, BITNET_TYPE_TL2, 256, 512), nullptr);
    EXPECT_EQ(bitnet_tile_file_find(nullptr, BITNET_TYPE_TL2, 256, 256), nullptr);
}

TEST(TileFile, IniKeysInAnyCaseCommentsAndColons) {
    // ConfigParser reads keys without regard to case and accepts ':' and comments; bitnet.cpp writes 'm = 1536'
    TileFile t;
    Parse("# written by hand\n; another comment\n[Kernels_0]\nM = 1536\nK : 4096\nBM=256\nBK = 128 ; inline\n"
          "BMM = 32\r\n\n[Kernels_1]\nm = 1536\nk = 4096\nbm = 256\nbk = 128\nbmm = 32\n",
          "x.ini", &t);
    EXPECT_EQ(t.f->n_entries, 1u); // the same shape and tiles twice: one entry
    ExpectEntry(t.f, BITNET_TYPE_TL1, 1536, 4096, 256, 128, 32);
}

TEST(TileFile, FormatIsToldByNameOrFirstLine) {
    TileFile a, b;
    Parse(kIni, "no-suffix", &a); // first significant line starts with '['
    EXPECT_EQ(a.f->format, BITNET_TILE_FILE_INI);
    Parse("tl2:\n  default:\n    source: x\n    kernels:\n      - {m: 256, k: 256, block_m: 128, block_k: 96, simd_m: 32}\n",
          "no-suffix", &b);
    EXPECT_EQ(b.f->format, BITNET_TILE_FILE_YAML);
    ExpectEntry(b.f, BITNET_TYPE_TL2, 256, 256, 128, 96, 32);
    EXPECT_EQ(bitnet_tile_file_find(b.f, BITNET_TYPE_TL1, 256, 256), nullptr); // YAML entries have a scheme
}

TEST(TileFile, MalformedIniIsRefusedNamingLineSectionKeyAndValue) {
    ExpectHas(ParseFails("[Kernels_0]\nm = 256\nk = 256\nbm = 128\nbk = 96\n", "a.ini"),
              {"a.ini", "[Kernels_0]", "no key 'bmm'"});
    ExpectHas(ParseFails("[Kernels_0]\nm = 256\nk = 256\nbm = 128\nbk = 96\nbmm = 32\nbn = 4\n", "a.ini"),
              {"a.ini: line 7", "unknown key 'bn'"});
    ExpectHas(ParseFails("[Kernels_0]\nm = 256\nk = -256\nbm = 128\nbk = 96\nbmm = 32\n", "a.ini"),
              {"line 3", "k = '-256' is not a positive decimal integer"});
    ExpectHas(ParseFails("[Kernels_0]\nm = 0x100\n", "a.ini"), {"m = '0x100'"});
    ExpectHas(ParseFails("[Kernels_0]\nm = 256\nm = 256\n", "a.ini"), {"line 3", "key 'm' is given twice"});
    ExpectHas(ParseFails(std::string(kIni) + kIni, "a.ini"), {"line 8: section [Kernels_0] appears twice (first on line 1)"});
    ExpectHas(ParseFails("[DEFAULT]\nm = 256\n", "a.ini"), {"line 1: unknown section [DEFAULT]"});
    // sections without keys are seen too (libinih reports only key/value pairs)
    ExpectHas(ParseFails(std::string(kIni) + "[Kernels_1]\n", "a.ini"), {"[Kernels_1] (line 8) has no key 'm'"});
    ExpectHas(ParseFails(std::string(kIni) + "[Foo]\n", "a.ini"), {"line 8: unknown section [Foo]"});
    ExpectHas(ParseFails("[Kernels_01]\nm = 1\n", "a.ini"), {"unknown section [Kernels_01]"});
    // a leading zero is refused: YAML 1.1 (PyYAML, codegen) reads 0256 as octal 174
    ExpectHas(ParseFails("[Kernels_0]\nm = 0256\n", "a.ini"), {"m = '0256' is not a positive decimal integer"});
    ExpectHas(ParseFails("[Kernels_0]\nm = 0\n", "a.ini"), {"m = '0' is not a positive decimal integer"});
    ExpectHas(ParseFails("m = 256\n[Kernels_0]\n", "a.ini"), {"line 1", "before the first [Kernels_<n>] section"});
    ExpectHas(ParseFails("[Kernels_0]\nm = 256\nthis is not a pair\n", "a.ini"),
              {"a.ini: line 3", "not a [section] header, a 'key = value' line or a comment"});
    ExpectHas(ParseFails("[Kernels_0]\nm = " + std::string(300, '1') + "\n", "a.ini"), {"line 2 is longer than 199"});
    ExpectHas(ParseFails(std::string(kIni) + "[Kernels_1]\nm = 256\nk = 256\nbm = 256\nbk = 96\nbmm = 32\n", "a.ini"),
              {"shape 256x256 is listed twice with different tiles", "[Kernels_0] (BM 128 BK 96 bm 32)",
               "[Kernels_1] (BM 256 BK 96 bm 32)"});
    ExpectHas(ParseFails("# nothing\n", "a.ini"), {"a.ini: no tiles in this file"});
    ExpectHas(ParseFails("", "empty.ini"), {"empty.ini: no tiles"});
    ExpectHas(ParseFails(std::string("[Kernels_0]\nm = 2\0 56\n", 20), "a.ini"), {"a NUL byte at offset 17"});
}

TEST(TileFile, ReadsConfigsYamlAndPicksTheTable) {
    // configs/Llama3-8B-1.58-100B-tokens.yaml has TL1 default and pretuned tables that differ (design.md §2)
    const std::string path = kConfigs + "Llama3-8B-1.58-100B-tokens.yaml";
    TileFile d, p;
    bitnet_error err{};
    ASSERT_EQ(bitnet_tile_file_load(path.c_str(), "default", &d.f, &err), BITNET_OK) << err.msg;
    ASSERT_EQ(bitnet_tile_file_load(path.c_str(), "pretuned", &p.f, &err), BITNET_OK) << err.msg;
    // which of several tables a file was packed with is never the build's guess: no name, no table
    bitnet_tile_file *none = reinterpret_cast<bitnet_tile_file *>(0x1);
    EXPECT_EQ(bitnet_tile_file_load(path.c_str(), nullptr, &none, &err), BITNET_ERR_FORMAT);
    EXPECT_EQ(none, nullptr);
    ExpectHas(err.msg, {path, "tl1 has the tables default, pretuned: say which one the file was packed with"});
    EXPECT_EQ(d.f->format, BITNET_TILE_FILE_YAML);
    ExpectEntry(d.f, BITNET_TYPE_TL1, 14336, 4096, 256, 128, 32);
    ExpectEntry(p.f, BITNET_TYPE_TL1, 14336, 4096, 256, 128, 64);
    ExpectEntry(d.f, BITNET_TYPE_TL2, 4096, 14336, 128, 96, 32);
    EXPECT_EQ(d.f->n_entries, 8u); // 4 shapes x 2 schemes
    // a scheme with one table uses it whatever table is asked for
    TileFile one;
    ASSERT_EQ(bitnet_tile_file_load((kConfigs + "bitnetcpp-tiny.yaml").c_str(), "pretuned", &one.f, &err), BITNET_OK)
        << err.msg;
    ExpectEntry(one.f, BITNET_TYPE_TL2, 768, 256, 256, 96, 32);
    ExpectEntry(one.f, BITNET_TYPE_TL1, 768, 256, 256, 256, 32);
    ExpectHas(ParseFails("tl2:\n  default: {source: a, kernels: [{m: 256, k: 256, block_m: 256, block_k: 96, simd_m: 32}]}\n"
                         "  pretuned: {source: b, kernels: [{m: 256, k: 256, block_m: 128, block_k: 96, simd_m: 32}]}\n",
                         "t.yaml", BITNET_ERR_FORMAT, "best"),
              {"t.yaml: tl2 has the tables default, pretuned but none named 'best'"});
}

TEST(TileFile, MalformedYamlIsRefusedNamingEntryKeyAndValue) {
    const std::string head = "tl2:\n  default:\n    source: x\n    kernels:\n";
    ExpectHas(ParseFails(head + "      - {m: 256, k: 256, block_m: 128, block_k: 100, simd_m: 32}\n", "t.yaml"),
              {"t.yaml: tl2/default kernels[0] (line 5)", "BM 128 BK 100 bm 32 for 256x256 break the TL2 rules"});
    ExpectHas(ParseFails(head + "      - {m: 256, k: 256, blok_m: 128, block_k: 96, simd_m: 32}\n", "t.yaml"),
              {"unknown key 'blok_m'"});
    ExpectHas(ParseFails(head + "      - {m: 256, k: 256, block_m: \"128\", block_k: 96, simd_m: 32}\n", "t.yaml"),
              {"block_m = 128 is not a positive decimal integer"});
    ExpectHas(ParseFails(head + "      - {m: 256, k: 256, block_m: [1], block_k: 96, simd_m: 32}\n", "t.yaml"),
              {"block_m = (a list) is not a positive decimal integer"});
    ExpectHas(ParseFails(head + "      - {m: 256, k: 256, block_k: 96, simd_m: 32}\n", "t.yaml"), {"no key 'block_m'"});
    ExpectHas(ParseFails(head + "      - {m: 256, k: 256, block_m: 128, block_m: 128, block_k: 96, simd_m: 32}\n",
                         "t.yaml"),
              {"key 'block_m' is given twice"});
    ExpectHas(ParseFails(head + "      - {m: 0256, k: 256, block_m: 128, block_k: 96, simd_m: 32}\n", "t.yaml"),
              {"m = 0256 is not a positive decimal integer"});
    ExpectHas(ParseFails(head + "      - 5\n", "t.yaml"), {"kernels[0] (line 5): expected {m, k, block_m"});
    // repeated keys would mean "the last one wins" to PyYAML: refused at every level
    const std::string entry = "      - {m: 256, k: 256, block_m: 128, block_k: 96, simd_m: 32}\n";
    ExpectHas(ParseFails("tl2:\n  default:\n    source: x\n    kernels:\n" + entry + "  default:\n    source: y\n"
                         "    kernels:\n" + entry, "t.yaml"),
              {"t.yaml: tl2: key 'default' is given twice (line 6)"});
    ExpectHas(ParseFails(head + entry + "    kernels:\n" + entry, "t.yaml"),
              {"tl2/default: key 'kernels' is given twice (line 6)"});
    ExpectHas(ParseFails(head + entry + "tl2:\n  default:\n    source: x\n    kernels:\n" + entry, "t.yaml"),
              {"the top level: key 'tl2' is given twice (line 6)"});
    ExpectHas(ParseFails(head + "      - {m: 256\n", "t.yaml"), {"t.yaml: YAML error at line"});
    ExpectHas(ParseFails("tl2:\n  default:\n    source: x\n", "t.yaml"), {"tl2/default has no list 'kernels'"});
    ExpectHas(ParseFails("- 1\n- 2\n", "t.yaml"), {"the top level must be a mapping"});
    ExpectHas(ParseFails("model: x\n", "t.yaml"), {"t.yaml: no tiles in this file", "no tl1 or tl2 table"});
    ExpectHas(ParseFails("", "t.yaml"), {"t.yaml: empty YAML document"});
    ExpectHas(ParseFails(head + "      - {m: 256, k: 256, block_m: 128, block_k: 96, simd_m: 32}\n---\nx: 1\n", "t.yaml"),
              {"more than one YAML document"});
    ExpectHas(ParseFails(head + "      - {m: 256, k: 256, block_m: 128, block_k: 96, simd_m: 32}\n" +
                             "      - {m: 256, k: 256, block_m: 256, block_k: 96, simd_m: 32}\n",
                         "t.yaml"),
              {"shape 256x256 is listed twice with different tiles"});
}

TEST(TileFile, MissingOrUnreadableFileIsAnIoError) {
    bitnet_tile_file *f = reinterpret_cast<bitnet_tile_file *>(0x1);
    bitnet_error err{};
    const std::string missing = g_dir + "/missing.ini";
    EXPECT_EQ(bitnet_tile_file_load(missing.c_str(), nullptr, &f, &err), BITNET_ERR_IO);
    EXPECT_EQ(f, nullptr);
    ExpectHas(err.msg, {missing, "cannot open"});
    f = reinterpret_cast<bitnet_tile_file *>(0x1);
    EXPECT_EQ(bitnet_tile_file_load(g_dir.c_str(), nullptr, &f, &err), BITNET_ERR_IO);
    EXPECT_EQ(f, nullptr);
    const std::string big(5u << 20, '#');
    ExpectHas(ParseFails(big, "big.ini", BITNET_ERR_IO), {"big.ini", "4 MiB at most"});
}

} // namespace
