"""`tune`: the search space, the baseline, the successive-halving search and the choice (with a
deterministic stand-in benchmark), the refusals (ARM on x86, tracked or configs/ outputs, a failing
or disagreeing benchmark), the proposed YAML (validates, other targets' tables copied unchanged,
provenance), and one real run of build/bin/bitnet-kernel-bench with a tiny budget."""
from __future__ import annotations

import json
import os
import platform
import re
import stat
import sys
import unittest

from .helpers import CONFIGS, REPO, run_cli, tempdir, write

from codegen import config as cfg
from codegen import derive, tune
from codegen.targets import SCHEMES, native_target

NATIVE = native_target()
FOREIGN = {"tl2": "tl1", "tl1": "tl2"}.get(NATIVE)
TINY_CFG = os.path.join(CONFIGS, "bitnetcpp-tiny.yaml")
B2_CFG = os.path.join(CONFIGS, "BitNet-b1.58-2B-4T.yaml")

# A stand-in for bitnet-kernel-bench: parses the flags the tuner passes and writes the JSON the real
# tool writes, with median GEMV time = a fixed function of the tiles (env FAKE_BENCH_MODE):
#   bowl:     100 + |BM - 160| + |BK - 192| / 10 + BM / 1000 us (no ties; the minimum at 160/192/32)
#   flat:     100 us, except 99.5 us for BM 32 (a 0.5 % "win" the min-gain rule must ignore)
#   mismatch: as bowl, but the kernel check of BM 64 reports a mismatch
#   crash:    exit 1 without JSON
# Every call is appended to $FAKE_BENCH_LOG (one JSON list of the --tiles per call).
FAKE_BENCH = r'''#!PYTHON
import json, os, sys
a = sys.argv[1:]
mode = os.environ.get("FAKE_BENCH_MODE", "bowl")
if mode == "crash":
    print("fake bench: crashed", file=sys.stderr)
    sys.exit(1)
tiles, threads, out, shape, reps = [], [1], None, None, 3
i = 0
while i < len(a):
    if a[i] == "--tiles": tiles.append([int(v) for v in a[i + 1].split(",")]); i += 1
    elif a[i] == "--threads": threads = [int(v) for v in a[i + 1].split(",")]; i += 1
    elif a[i] == "--json": out = a[i + 1]; i += 1
    elif a[i] == "--shape": shape = [int(v) for v in a[i + 1].split("x")]; i += 1
    elif a[i] == "--reps": reps = int(a[i + 1]); i += 1
    elif a[i] in ("--target", "--batch", "--min-time", "--max-time", "--seed"): i += 1
    i += 1
with open(os.environ["FAKE_BENCH_LOG"], "a") as f:
    f.write(json.dumps({"shape": shape, "tiles": tiles, "threads": threads, "reps": reps,
                        "generic": "--generic" in a}) + "\n")
def t_us(bm, bk, sm):
    if mode == "flat":
        return 99.5 if bm == 32 else 100.0
    return 100.0 + abs(bm - 160) + abs(bk - 192) / 10.0 + bm / 1000.0
ks = []
for bm, bk, sm in tiles:
    us = t_us(bm, bk, sm)
    st = {"median_us": us, "min_us": us * 0.99, "max_us": us * 1.01, "sd_us": 0.1, "mean_us": us, "reps": reps, "calls": 10}
    check = "bit-exact with I2_S (N = 1, 1)"
    if mode == "mismatch" and bm == 64:
        check = "MISMATCH at N = 1, column 0 row 3: 1 vs 2"
    ks.append({"target": "tl2", "M": shape[0], "K": shape[1], "tiles": [bm, bk, sm], "check": check,
               "lut": {"kernel": "bitnet_tl2_qgemm_generic__avx2", "specialized": False, "packed_bytes": 1000,
                       "read_bytes": 800000, "gemv": [{"threads": t, "dram": st} for t in threads], "batch": []},
               "i2s": None})
json.dump({"tool": "bitnet-kernel-bench", "kernels": ks}, open(out, "w"))
'''


def fake_bench(test) -> tuple[str, str]:
    """Write the stand-in bench into a temp dir; returns (path, call log path)."""
    d = tempdir(test)
    path = write(os.path.join(d, "fake-bench"), FAKE_BENCH.replace("#!PYTHON", "#!" + sys.executable, 1))
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path, os.path.join(d, "calls.log")


def read(path: str, mode: str = "r"):
    with open(path, mode) as f:
        return f.read()


def calls(log: str) -> list[dict]:
    if not os.path.exists(log):
        return []
    with open(log) as f:
        return [json.loads(line) for line in f]


class SearchSpace(unittest.TestCase):
    def test_every_candidate_is_legal_and_the_space_is_the_documented_one(self):
        for target in SCHEMES:
            for m, k in [(640, 2560), (2560, 2560), (2560, 6912), (6912, 2560), (3200, 8640), (256, 768)]:
                cands = tune.candidates(target, m, k)
                self.assertTrue(cands, (target, m, k))
                self.assertEqual(cands, sorted(set(cands)))
                for bm, bk, sm in cands:
                    self.assertEqual(SCHEMES[target].violations(m, k, bm, bk, sm), [], (target, m, k, bm, bk, sm))
                    self.assertLessEqual(bm, 512)
                    self.assertEqual(m % bm, 0)
                    self.assertEqual(bm % 32, 0)
        self.assertEqual(tune.candidates("tl2", 640, 2560),
                         [(bm, bk, 32) for bm in (32, 64, 128, 160, 320) for bk in (96, 192, 240)])
        # TL1: block_k multiples of 32 dividing 2560 (32, 64, 128, 160, 256); simd_m 64 needs BM % 64 == 0
        t1 = tune.candidates("tl1", 2560, 2560)
        self.assertEqual(sorted({c[1] for c in t1}), [32, 64, 128, 160, 256])
        self.assertEqual(len(t1), 7 * 5 + 5 * 5)
        self.assertIn((512, 256, 64), t1)
        self.assertNotIn((160, 256, 64), t1)

    def test_all_legal_tl2_block_k_values_are_tried(self):
        for m, k in [(2560, 6912), (6912, 2560), (8640, 3200)]:
            want = sorted(bk for bk in range(24, 256, 24) if (k % bk) % 32 == 0)
            self.assertEqual(sorted({c[1] for c in tune.candidates("tl2", m, k)}), want)

    def test_derived_tiles_are_in_the_space(self):
        for target in SCHEMES:
            for shape in cfg.load_config(B2_CFG).shapes:
                d = derive.derive_tiles(target, *shape)
                self.assertIn((d["block_m"], d["block_k"], d["simd_m"]), tune.candidates(target, *shape))

    def test_no_candidates_for_m_not_multiple_of_32(self):
        self.assertEqual(tune.candidates("tl2", 100, 2560), [])

    def test_max_block_m(self):
        self.assertEqual({c[0] for c in tune.candidates("tl2", 6912, 2560, max_block_m=128)}, {32, 64, 96, 128})


class Baseline(unittest.TestCase):
    def test_covering_config_table_then_rule(self):
        configs = cfg.load_all(CONFIGS)
        t, origin = tune.baseline_tiles("tl2", (640, 2560), configs)
        self.assertEqual((t, origin), ((160, 96, 32), "BitNet-b1.58-2B-4T/default"))
        t, origin = tune.baseline_tiles("tl2", (4160, 2976), configs)
        d = derive.derive_tiles("tl2", 4160, 2976)
        self.assertEqual((t, origin), ((d["block_m"], d["block_k"], d["simd_m"]), "derive rule"))


def _meas(t, us):
    return tune.Measurement(t, us * 1e-6, us * 1e-6, us * 1e-6, 0.0, 3, 1.0, "k", False)


class Choice(unittest.TestCase):
    A, B, BASE = (320, 96, 32), (320, 240, 32), (160, 96, 32)

    def result(self, rounds, spec=None):
        r = tune.ShapeResult(shape=(640, 2560), baseline=self.BASE, baseline_origin="cfg/default", n_candidates=3)
        r.rounds = [{"reps": 3, "min_time": 0.01, "wall": 1.0, "results": {t: _meas(t, us) for t, us in rd.items()}}
                    for rd in rounds]
        r.spec = {t: _meas(t, us) for t, us in (spec or {}).items()}
        return r

    def test_every_round_counts_not_just_the_last(self):
        # A is 8 % faster in five rounds; B wins only the specialized re-timing, by 1 %
        rounds = [{self.A: 92.0, self.B: 96.0, self.BASE: 100.0}] * 5
        r = self.result(rounds, spec={self.A: 95.0, self.B: 94.0, self.BASE: 100.0})
        tune.choose(r, 0.02, use_spec=True)
        self.assertEqual(r.chosen, self.A)
        self.assertIn("over 6 rounds (the last: specialized kernels)", r.reason)
        sc = tune.scores(r, with_spec=True)
        self.assertAlmostEqual(sc[self.A], (0.92 ** 5 * 0.95) ** (1 / 6))
        self.assertAlmostEqual(sc[self.BASE], 1.0)
        # a load change between rounds cancels: the same ratios at twice the times score the same
        slow = [{t: 2 * us for t, us in rd.items()} for rd in rounds]
        r2 = self.result(rounds[:2] + slow[2:])
        self.assertAlmostEqual(tune.scores(r2)[self.A], 0.92)

    def test_min_gain_and_baseline_wins(self):
        r = self.result([{self.A: 99.0, self.BASE: 100.0}])
        tune.choose(r, 0.02, use_spec=False)
        self.assertEqual(r.chosen, self.BASE)
        self.assertIn("kept the baseline (cfg/default): the fastest, 320/96/32, was only 1.0 % faster", r.reason)
        tune.choose(r, 0.005, use_spec=False)
        self.assertEqual(r.chosen, self.A)
        r = self.result([{self.A: 101.0, self.BASE: 100.0}])
        tune.choose(r, 0.0, use_spec=False)
        self.assertEqual(r.chosen, self.BASE)
        self.assertIn("the baseline (cfg/default) was the fastest", r.reason)


@unittest.skipUnless(NATIVE, "no LUT target on this architecture")
class SearchWithFakeBench(unittest.TestCase):
    def setUp(self):
        self.dir = tempdir(self)
        self.bench, self.log = fake_bench(self)

    def run_tune(self, *args, mode="bowl"):
        os.environ["FAKE_BENCH_LOG"] = self.log
        os.environ["FAKE_BENCH_MODE"] = mode
        self.addCleanup(os.environ.pop, "FAKE_BENCH_LOG", None)
        self.addCleanup(os.environ.pop, "FAKE_BENCH_MODE", None)
        return run_cli("tune", "--bench", self.bench, "--target", NATIVE, *args)

    @unittest.skipUnless(NATIVE == "tl2", "the stand-in bench speaks TL2")
    def test_finds_the_minimum_and_writes_a_valid_proposal(self):
        out = os.path.join(self.dir, "BitNet-b1.58-2B-4T-tuned.yaml")
        r = self.run_tune("--model", B2_CFG, "--budget", "600", "--threads", "1", "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), out)
        text = read(out)
        c = cfg.load_config(out)
        self.assertEqual(c.name, "BitNet-b1.58-2B-4T-tuned")
        self.assertEqual(c.layout, cfg.load_config(B2_CFG).layout)
        chosen = {e.shape: e.tiles for e in c.table("tl2", "default").kernels}
        for shape in c.shapes:
            cands = tune.candidates("tl2", *shape)
            # the fake's unique minimum: BM closest to 160, BK closest to 192
            want = min(cands, key=lambda t: abs(t[0] - 160) + abs(t[1] - 192) / 10.0 + t[0] / 1000.0)
            self.assertEqual(chosen[shape], want, shape)
        # ARM presets: the tl1 table of the source config, unchanged
        src = cfg.load_config(B2_CFG).table("tl1", "default")
        self.assertEqual([e.tiles for e in c.table("tl1", "default").kernels], [e.tiles for e in src.kernels])
        self.assertIn("copied unchanged from", c.table("tl1", "default").source)
        # provenance
        for key in ("# command:   python3 -m codegen tune --model configs/BitNet-b1.58-2B-4T.yaml --target tl2",
                    "# date:", "# machine:", "# objective:", "# search:", "# budget:"):
            self.assertIn(key, text)
        # 2560x6912: baseline 256/96/32 costs 100 + 96 + 9.6 + 0.256 us in the fake, the best 100.16 us
        self.assertRegex(text, r"# 2560x6912: chosen 160/192/32 -- 51\.3 % faster than the baseline 256/96/32 "
                               r"\(BitNet-b1.58-2B-4T/default\) over \d+ rounds, geometric mean of the ratios to "
                               r"the baseline; 56 candidates, \d+ round\(s\)")
        self.assertRegex(text, r"#\s+1\s+160/192/32\s+100\.2\s+99\.2\s+101\.2\s+7\.99\s+\d+\s+0\.487  generic\n")
        # JSON: round 1 timed every candidate (plus the baseline), later rounds at most half (+ baseline)
        with open(os.path.splitext(out)[0] + ".tune.json") as f:
            doc = json.load(f)
        for s in doc["shapes"]:
            n = len(tune.candidates("tl2", *s["shape"]))
            r1 = s["rounds"][0]["results"]
            self.assertEqual(len(r1), n)
            for a, b in zip(s["rounds"], s["rounds"][1:]):
                self.assertLessEqual(len(b["results"]), (len(a["results"]) + 1) // 2 + 1)
                self.assertEqual(b["min_time_s"], 2 * a["min_time_s"])
            self.assertEqual(s["chosen"], [r for r in r1 if r["median_us"] == min(x["median_us"] for x in r1)][0]["tiles"])
        # every bench call got --threads 1 and one shape
        cl = calls(self.log)
        self.assertTrue(cl)
        self.assertTrue(all(c["threads"] == [1] for c in cl))
        self.assertTrue(all(c["generic"] for c in cl))  # like with like: the baseline's kernel is generic too

    @unittest.skipUnless(NATIVE == "tl2", "the stand-in bench speaks TL2")
    def test_noise_sized_gain_keeps_the_baseline(self):
        out = os.path.join(self.dir, "flat.yaml")
        r = self.run_tune("--shape", "640x2560", "--budget", "600", "--out", out, mode="flat")
        self.assertEqual(r.returncode, 0, r.stderr)
        c = cfg.load_config(out)
        self.assertEqual(c.table("tl2", "default").kernels[0].tiles, (160, 96, 32))   # BitNet-b1.58-2B-4T's
        self.assertIn("kept the baseline (BitNet-b1.58-2B-4T/default): the fastest, 32/", read(out))
        # with --min-gain 0.001 the 0.5 % is enough
        r = self.run_tune("--shape", "640x2560", "--budget", "600", "--out", out, "--min-gain", "0.001", mode="flat")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(cfg.load_config(out).table("tl2", "default").kernels[0].tiles[0], 32)

    @unittest.skipUnless(NATIVE == "tl2", "the stand-in bench speaks TL2")
    def test_tiny_budget_still_times_every_candidate_once(self):
        out = os.path.join(self.dir, "t.yaml")
        r = self.run_tune("--shape", "2560x6912", "--budget", "0.001", "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        cl = calls(self.log)
        self.assertEqual(len(cl), 1)
        self.assertEqual(len(cl[0]["tiles"]), len(tune.candidates("tl2", 2560, 6912)))
        self.assertIn("does not fit", r.stderr)

    def test_shape_without_legal_tiles(self):
        r = self.run_tune("--shape", "100x2560", "--out", os.path.join(self.dir, "x.yaml"))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(f"{NATIVE} 100x2560: no legal tiles", r.stderr)
        self.assertEqual(calls(self.log), [])

    def test_failing_bench_is_exit_3(self):
        out = os.path.join(self.dir, "x.yaml")
        r = self.run_tune("--shape", "640x2560", "--out", out, mode="crash")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("failed (exit 1) on 640x2560", r.stderr)
        self.assertIn("fake bench: crashed", r.stderr)
        self.assertFalse(os.path.exists(out))

    @unittest.skipUnless(NATIVE == "tl2", "the stand-in bench speaks TL2")
    def test_kernel_mismatch_is_exit_3(self):
        out = os.path.join(self.dir, "x.yaml")
        r = self.run_tune("--shape", "640x2560", "--out", out, mode="mismatch")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("640x2560 tiles 64/96/32: MISMATCH", r.stderr)
        self.assertFalse(os.path.exists(out))


class Refusals(unittest.TestCase):
    @unittest.skipUnless(FOREIGN, "no LUT target on this architecture")
    def test_foreign_target_cannot_be_measured(self):
        d = tempdir(self)
        out = os.path.join(d, "x.yaml")
        r = run_cli("tune", "--shape", "640x2560", "--target", FOREIGN, "--out", out, "--bench", "/nonexistent")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(f"--target {FOREIGN} cannot be measured on this {platform.machine()} machine", r.stderr)
        if FOREIGN == "tl1":
            self.assertIn("qemu", r.stderr)
            self.assertIn("Keep the ARM presets", r.stderr)
        self.assertFalse(os.path.exists(out))
        self.assertNotIn("Traceback", r.stderr)

    @unittest.skipUnless(NATIVE, "no LUT target on this architecture")
    def test_never_writes_tracked_or_configs_files(self):
        for out in (os.path.join(REPO, "configs", "BitNet-b1.58-2B-4T.yaml"),
                    os.path.join(REPO, "configs", "new-one.yaml"),
                    os.path.join(REPO, "generated", "x.yaml"),
                    os.path.join(REPO, "README.md")):
            before = read(out, "rb") if os.path.exists(out) else None
            r = run_cli("tune", "--shape", "640x2560", "--target", NATIVE, "--out", out, "--bench", "/nonexistent")
            self.assertEqual(r.returncode, 2, (out, r.stderr))
            self.assertRegex(r.stderr, r"refusing to (write into|overwrite)")
            after = read(out, "rb") if os.path.exists(out) else None
            self.assertEqual(before, after, out)

    def test_without_git_existing_repo_files_are_refused_with_the_reason(self):
        # A new machine may have no git: tune must not end in a traceback, and since it cannot tell which
        # files are tracked it refuses every existing file in the repository outside build*/.
        nogit = tempdir(self)  # PATH holds no git (sys.executable is called by its absolute path)
        for out in (os.path.join(REPO, "README.md"), os.path.join(REPO, ".gitignore")):
            before = read(out, "rb")
            r = run_cli("tune", "--shape", "640x2560", "--target", NATIVE or "tl2", "--out", out,
                        "--bench", "/nonexistent", env_extra={"PATH": nogit})
            self.assertEqual(r.returncode, 2, (out, r.stderr))
            self.assertIn("git is not installed", r.stderr)
            self.assertIn("refusing to overwrite an existing file in the repository", r.stderr)
            self.assertNotIn("Traceback", r.stderr)
            self.assertEqual(read(out, "rb"), before)
        # a path that does not exist yet needs no git: tune goes on (and stops at the missing bench)
        r = run_cli("tune", "--shape", "640x2560", "--target", NATIVE or "tl2", "--out",
                    os.path.join(nogit, "x.yaml"), "--bench", os.path.join(nogit, "nope"), env_extra={"PATH": nogit})
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("bitnet-kernel-bench not found", r.stderr)

    @unittest.skipUnless(NATIVE, "no LUT target on this architecture")
    def test_missing_bench_and_bad_input(self):
        d = tempdir(self)
        r = run_cli("tune", "--shape", "640x2560", "--target", NATIVE, "--out", os.path.join(d, "x.yaml"),
                    "--bench", os.path.join(d, "nope"))
        self.assertEqual(r.returncode, 3)
        self.assertIn("bitnet-kernel-bench not found", r.stderr)
        r = run_cli("tune", "--shape", "64x", "--target", NATIVE, "--out", os.path.join(d, "x.yaml"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("--shape", r.stderr)
        r = run_cli("tune", "--model", os.path.join(d, "missing.gguf"), "--target", NATIVE)
        self.assertEqual(r.returncode, 2)
        self.assertIn("missing.gguf", r.stderr)


def real_bench() -> str | None:
    try:
        return tune.find_bench(None)
    except tune.TuneError:
        return None


@unittest.skipUnless(NATIVE and real_bench(), "bitnet-kernel-bench is not built (ctest sets BITNET_BUILD_DIR)")
class RealBench(unittest.TestCase):
    def test_tiny_model_with_a_tiny_budget(self):
        """The real tool on bitnetcpp-tiny's shapes: a proposal that validates and lists real timings."""
        d = tempdir(self)
        out = os.path.join(d, "tiny-tuned.yaml")
        # --llc-mib 1: the copies for cache-busting total 16 MiB, not 512 (CI memory and time)
        r = run_cli("tune", "--model", TINY_CFG, "--target", NATIVE, "--budget", "2", "--threads", "1",
                    "--bench-args", "--llc-mib 1", "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        v = run_cli("validate", out)
        self.assertEqual(v.returncode, 0, v.stderr)
        c = cfg.load_config(out)
        src = cfg.load_config(TINY_CFG)
        self.assertEqual(c.shapes, src.shapes)
        for e in c.table(NATIVE, "default").kernels:
            self.assertIn(e.tiles, tune.candidates(NATIVE, e.m, e.k) + [src.table(NATIVE, "default").entry(e.m, e.k).tiles])
            self.assertRegex(e.note, r"^[0-9.]+ us per GEMV at 1 thread\(s\)")
        other = FOREIGN
        self.assertEqual([x.tiles for x in c.table(other, "default").kernels],
                         [x.tiles for x in src.table(other, "default").kernels])
        with open(os.path.splitext(out)[0] + ".tune.json") as f:
            doc = json.load(f)
        for s in doc["shapes"]:
            r1 = s["rounds"][0]["results"]
            self.assertEqual(len(r1), len(tune.candidates(NATIVE, *s["shape"])) +
                             (tuple(s["baseline"]) not in tune.candidates(NATIVE, *s["shape"])))
            for m in r1:
                self.assertGreater(m["median_us"], 0.0)
                self.assertLessEqual(m["min_us"], m["median_us"])
                self.assertLessEqual(m["median_us"], m["max_us"])
                self.assertEqual(m["per_threads_us"].keys(), {"1"})
        text = read(out)
        self.assertRegex(text, r"# machine:   .+; \d+ online CPUs; ")
        self.assertRegex(text, re.escape("# bench:     ") + r"\S*bitnet-kernel-bench")
        self.assertIn("--bench-args '--llc-mib 1'", text)


if __name__ == "__main__":
    unittest.main()
