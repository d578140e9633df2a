"""build/bin/llama-bench and utils/e2e_benchmark.py.

Run from the repository root: `python3 -m unittest discover -s tests/scripts -t .` (the ctest entry
scripts_unittest). BITNET_BUILD_DIR names the CMake build whose bin/llama-bench is tested; tests that
need the binary are skipped without it. Models: bitnet.cpp's tiny I2_S/F32 files in tests/data, with
tiny -p/-n/-r. These tests check what the tool reports (rows, fields, statistics against the raw
samples, sizes against the file), never how fast anything is.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
import signal
import stat
import statistics
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
E2E = os.path.join(REPO, "utils", "e2e_benchmark.py")
CASE = os.path.join(REPO, "tests", "data", "bitnetcpp-tiny")
TINY = os.path.join(CASE, "ggml-model-i2_s.gguf")
TINY_F32 = os.path.join(CASE, "ggml-model-f32.gguf")
INI = os.path.join(REPO, "tests", "data", "kernel_config", "tiny-tl2.ini")  # a kernel_config.ini in bitnet.cpp's format
BUILD = os.environ.get("BITNET_BUILD_DIR") or os.path.join(REPO, "build")
BENCH = os.path.join(BUILD, "bin", "llama-bench")

if REPO not in sys.path:
    sys.path.insert(0, REPO)


def have_bench() -> bool:
    return os.access(BENCH, os.X_OK)


def bench(*args, timeout=300):
    p = subprocess.run([BENCH, *args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def e2e(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([sys.executable, E2E, *args], capture_output=True, text=True, env=e, cwd=REPO, timeout=300)
    return p.returncode, p.stdout, p.stderr


def md_rows(text: str) -> tuple[list[str], list[dict[str, str]]]:
    """Header cells and rows (dicts by header) of a markdown table; checks the separator line."""
    lines = [l for l in text.splitlines() if l.startswith("|")]
    cells = [[c.strip() for c in l.strip().strip("|").split("|")] for l in lines]
    head, sep, body = cells[0], cells[1], cells[2:]
    assert all(set(s) <= set("-:") and s for s in sep), sep
    assert all(len(r) == len(head) for r in body), text
    return head, [dict(zip(head, r)) for r in body]


def file_facts(path: str) -> tuple[int, int, str]:
    """(bytes of tensor data, elements of every tensor, type name of blk.0.attn_q.weight) read with the
    Python GGUF reader: an independent account of what llama-bench reports."""
    from codegen.gguf_reader import read_gguf
    g = read_gguf(path)
    size = sum(t.nbytes for t in g.tensors)
    n = sum(math.prod(t.ne) for t in g.tensors)
    return size, n, g.tensor("blk.0.attn_q.weight").type_name


@unittest.skipUnless(have_bench(), f"{BENCH} not built")
class LlamaBenchOutput(unittest.TestCase):
    def test_md_table_has_every_combination(self):
        rc, out, err = bench("-m", TINY, "-p", "8", "-n", "4", "-r", "2", "-t", "1,2")
        self.assertEqual(rc, 0, err)
        head, rows = md_rows(out)
        self.assertEqual(head, ["model", "size", "params", "kernel", "threads", "test", "t/s"])
        self.assertEqual([(r["threads"], r["test"]) for r in rows],
                         [("1", "pp8"), ("1", "tg4"), ("2", "pp8"), ("2", "tg4")])
        size, n, qtype = file_facts(TINY)
        self.assertEqual(qtype, "I2_S")
        for r in rows:
            self.assertEqual(r["model"], f"bitnet {n / 1e6:.0f}M I2_S")
            self.assertEqual(r["size"], f"{size / 2**20:.2f} MiB")
            self.assertEqual(r["params"], f"{n / 1e6:.2f} M")
            mean, sd = r["t/s"].split(" ± ")
            self.assertGreater(float(mean), 0.0)
            self.assertGreaterEqual(float(sd), 0.0)
        # stdout is the table only; the load line and kernel summary go to stderr
        self.assertEqual(len(out.splitlines()), 6, out)
        self.assertIn("kernels:", err)

    def test_json_statistics_match_raw_samples(self):
        rc, out, err = bench("-m", TINY, "-p", "8", "-n", "0", "-pg", "4,3", "-r", "3", "-t", "1",
                             "--kernel", "i2_s,tl2", "-o", "json")
        self.assertEqual(rc, 0, err)
        res = json.loads(out)
        self.assertEqual([(r["kernel"].split("/")[0], r["test"], r["n_prompt"], r["n_gen"]) for r in res],
                         [("I2_S", "pp8", 8, 0), ("I2_S", "pp4+tg3", 4, 3), ("TL2", "pp8", 8, 0),
                          ("TL2", "pp4+tg3", 4, 3)])
        size, n, _ = file_facts(TINY)
        for r in res:
            self.assertEqual(r["model_filename"], TINY)
            self.assertEqual(r["model_size"], size)
            self.assertEqual(r["model_n_params"], n)
            self.assertEqual((r["n_threads"], r["n_batch"], r["repetitions"]), (1, 2048, 3))
            ns, ts = r["samples_ns"], r["samples_ts"]
            self.assertEqual(len(ns), 3)
            self.assertTrue(all(isinstance(x, int) and x > 0 for x in ns), ns)
            tokens = r["n_prompt"] + r["n_gen"]
            for x, y in zip(ns, ts):
                self.assertAlmostEqual(y, tokens * 1e9 / x, delta=1e-6 * y + 1e-6)
            self.assertAlmostEqual(r["avg_ts"], statistics.fmean(ts), delta=1e-5 * r["avg_ts"])
            self.assertAlmostEqual(r["stddev_ts"], statistics.stdev(ts), delta=1e-5 * r["avg_ts"] + 1e-5)
            self.assertAlmostEqual(r["avg_ns"], statistics.fmean(ns), delta=1.0)
            self.assertAlmostEqual(r["stddev_ns"], statistics.stdev(ns), delta=1.0)
            self.assertRegex(r["test_time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
            self.assertTrue(r["kernel_summary"])
        self.assertIn("I2_S reference path", res[0]["kernel_summary"])

    def test_csv_carries_samples_and_a_row_per_test(self):
        rc, out, err = bench("-m", f"{TINY},{TINY_F32}", "-p", "4", "-n", "2", "-r", "2", "-t", "1", "-o", "csv")
        self.assertEqual(rc, 0, err)
        rows = list(csv.DictReader(io.StringIO(out)))
        self.assertEqual([(os.path.basename(r["model_filename"]), r["test"]) for r in rows],
                         [("ggml-model-i2_s.gguf", "pp4"), ("ggml-model-i2_s.gguf", "tg2"),
                          ("ggml-model-f32.gguf", "pp4"), ("ggml-model-f32.gguf", "tg2")])
        self.assertEqual(rows[2]["kernel"], "dense")  # F32 projection weights: no LUT
        self.assertTrue(rows[2]["model_type"].endswith(" F32"), rows[2]["model_type"])
        self.assertEqual(int(rows[2]["model_size"]), file_facts(TINY_F32)[0])
        for r in rows:
            ns = [int(x) for x in r["samples_ns"].split()]
            ts = [float(x) for x in r["samples_ts"].split()]
            self.assertEqual(len(ns), 2)
            self.assertAlmostEqual(float(r["avg_ts"]), statistics.fmean(ts), delta=1e-5 * float(r["avg_ts"]))
            self.assertAlmostEqual(float(r["avg_ns"]), statistics.fmean(ns), delta=1.0)

    def test_repeated_flags_append_and_batch_column_shows(self):
        rc, out, err = bench("-m", TINY, "-p", "4", "-p", "6", "-n", "0", "-b", "2,3", "-t", "1", "-r", "1",
                             "-ngl", "0", "--no-warmup")
        self.assertEqual(rc, 0, err)
        head, rows = md_rows(out)
        self.assertIn("n_batch", head)
        self.assertNotIn("file", head)  # one model: no file column
        self.assertEqual([(r["n_batch"], r["test"]) for r in rows],
                         [("2", "pp4"), ("2", "pp6"), ("3", "pp4"), ("3", "pp6")])

    def test_two_models_get_a_file_column(self):
        rc, out, err = bench("-m", TINY, "-m", TINY_F32, "-p", "0", "-n", "2", "-t", "1", "-r", "1")
        self.assertEqual(rc, 0, err)
        head, rows = md_rows(out)
        self.assertEqual([r["file"] for r in rows], ["ggml-model-i2_s.gguf", "ggml-model-f32.gguf"])

    def test_head_type_list_loads_each_head(self):
        rc, out, err = bench("-m", TINY, "-p", "0", "-n", "2", "-r", "1", "-t", "1", "--head-type", "stored,q8_0")
        self.assertEqual(rc, 0, err)
        _, rows = md_rows(out)
        self.assertEqual(len(rows), 2, out)
        self.assertNotIn("q8_0", rows[0]["kernel"])
        self.assertTrue(rows[1]["kernel"].endswith("+q8_0 head"), rows[1]["kernel"])
        self.assertIn("head: Q8_0 (requantized from F16 at load)", err)

    def test_depth_list_runs_each_test_after_the_filled_cache(self):
        # llama.cpp's -d: every test again with D tokens already in the cache, named "... @ dD", its
        # tokens/s counting the test's own tokens only (the fill is untimed)
        rc, out, err = bench("-m", TINY, "-p", "8", "-n", "3", "-pg", "4,2", "-d", "0,40", "-r", "2", "-t", "1",
                             "-o", "json")
        self.assertEqual(rc, 0, err)
        res = json.loads(out)
        self.assertEqual([(r["test"], r["n_prompt"], r["n_gen"], r["n_depth"]) for r in res],
                         [("pp8", 8, 0, 0), ("tg3", 0, 3, 0), ("pp4+tg2", 4, 2, 0),
                          ("pp8 @ d40", 8, 0, 40), ("tg3 @ d40", 0, 3, 40), ("pp4+tg2 @ d40", 4, 2, 40)])
        for r in res:
            for x, y in zip(r["samples_ns"], r["samples_ts"]):
                self.assertAlmostEqual(y, (r["n_prompt"] + r["n_gen"]) * 1e9 / x, delta=1e-6 * y + 1e-6)
        rc, out, err = bench("-m", TINY, "-p", "0", "-n", "2", "-d", "16", "-r", "1", "-t", "1")
        self.assertEqual(rc, 0, err)
        _, rows = md_rows(out)
        self.assertEqual([r["test"] for r in rows], ["tg2 @ d16"])
        # the depth counts against the context limit like the test's own tokens
        rc, out, err = bench("-m", TINY, "-p", "0", "-n", "2", "-d", "16777215", "-r", "1", "-t", "1")
        self.assertEqual(rc, 1, err)
        self.assertIn("tg2 @ d16777215: 16777217 tokens exceed the context limit", err)

    def test_help(self):
        rc, out, _ = bench("-h")
        self.assertEqual(rc, 0)
        for flag in ("-m,", "-p,", "-n,", "-pg", "-d,", "-b,", "-t,", "--kernel", "-r,", "-o,"):
            self.assertIn(flag, out)


@unittest.skipUnless(have_bench(), f"{BENCH} not built")
class LlamaBenchErrors(unittest.TestCase):
    def test_bad_flags_exit_2_with_a_message(self):  # 2: a bad command line (src/tools/common/args.h)
        for args, needle in [
            (["-p", "4"], "no model given"),
            (["-m", TINY, "--bogus"], "unknown argument '--bogus'"),
            (["-m", TINY, "-p"], "-p needs a value"),
            (["-m", TINY, "-p", "x"], "got 'x'"),
            (["-m", TINY, "-p", "4,,8"], "got ''"),
            (["-m", TINY, "-n", "-1"], "got '-1'"),
            (["-m", TINY, "-t", "0"], "-t expects integers in [1, 1024], got '0'"),
            (["-m", TINY, "-b", "0"], "got '0'"),
            (["-m", TINY, "-r", "0"], "got '0'"),
            (["-m", TINY, "-o", "xml"], "md, csv or json, got 'xml'"),
            (["-m", TINY, "--kernel", "i2_s,tl3"], "got 'tl3'"),
            (["-m", TINY, "-pg", "4"], "-pg expects two integers N,M, got '4'"),
            (["-m", TINY, "-pg", "4,0"], "got '0'"),
            (["-m", TINY, "-d", "-1"], "got '-1'"),
            (["-m", TINY, "-d", "8,x"], "got 'x'"),
            (["-m", TINY, "--lut-table", "fast"], "default or pretuned"),
            (["-m", TINY, "--head-type", "stored,f16"], "--head-type expects stored or q8_0 (comma list), got 'f16'"),
            (["-m", TINY, "--seed", "-3"], "--seed"),
            (["-m", TINY, "-p", "0", "-n", "0"], "nothing to run"),
            (["-m", f"{TINY},"], "empty file name"),
        ]:
            rc, out, err = bench(*args)
            self.assertEqual(rc, 2, f"{args}: {err}")
            self.assertIn(needle, err, args)
            self.assertEqual(out, "", args)  # nothing on stdout: no table was started

    def test_missing_or_bad_model_names_the_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            missing = os.path.join(tmp, "nope.gguf")
            rc, out, err = bench("-m", f"{TINY},{missing}", "-p", "4", "-n", "0")
            self.assertEqual(rc, 1)
            self.assertIn(missing, err)
            self.assertEqual(out, "")  # every file is checked before the first test
            bad = os.path.join(tmp, "bad.gguf")
            with open(bad, "wb") as f:
                f.write(b"GGUF\x03\x00\x00\x00")  # truncated header
            rc, out, err = bench("-m", bad, "-p", "4", "-n", "0")
            self.assertEqual(rc, 1)
            self.assertIn(bad, err)


# --------------------------------------------------------------------------------------------
# utils/e2e_benchmark.py
# --------------------------------------------------------------------------------------------

class E2EBenchmark(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="bitnet-bench-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def fake_bench(self, body: str) -> str:
        """A build dir whose bin/llama-bench records its arguments, then runs `body` (Python)."""
        bdir = os.path.join(self.tmp, "fakebuild")
        os.makedirs(os.path.join(bdir, "bin"), exist_ok=True)
        script = os.path.join(bdir, "bin", "llama-bench")
        with open(script, "w") as f:
            f.write(f"#!{sys.executable}\nimport json, os, signal, sys\n"
                    f"json.dump(sys.argv[1:], open({os.path.join(self.tmp, 'args.json')!r}, 'w'))\n{body}\n")
        os.chmod(script, os.stat(script).st_mode | stat.S_IXUSR)
        return bdir

    def recorded(self) -> list[str]:
        with open(os.path.join(self.tmp, "args.json")) as f:
            return json.load(f)

    def test_defaults_are_bitnet_cpps_and_output_passes_through(self):
        bdir = self.fake_bench("print('| table |'); sys.exit(0)")
        rc, out, err = e2e("-m", TINY, "--build-dir", bdir)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "| table |\n")
        argv = self.recorded()
        self.assertEqual(dict(zip(argv[0::2], argv[1::2])),
                         {"-m": TINY, "-n": "128", "-p": "512", "-t": "2", "-r": "5", "-o": "md"})

    def test_flags_are_passed(self):
        bdir = self.fake_bench("sys.exit(0)")
        rc, _, err = e2e("-m", TINY, "-n", "16", "-p", "32,64", "-t", "1,2", "-r", "3", "--kernel", "i2_s,tl2",
                         "-b", "1", "-o", "json", "--head-type", "stored,q8_0", "--lut-tiles", INI,
                         env={"BITNET_BUILD_DIR": bdir})
        self.assertEqual(rc, 0, err)
        argv = self.recorded()
        self.assertEqual(dict(zip(argv[0::2], argv[1::2])),
                         {"-m": TINY, "-n": "16", "-p": "32,64", "-t": "1,2", "-r": "3", "--kernel": "i2_s,tl2",
                          "-b": "1", "-o": "json", "--head-type": "stored,q8_0", "--lut-tiles": INI})
        missing = os.path.join(self.tmp, "no-such.ini")
        rc, _, err = e2e("-m", TINY, "--lut-tiles", missing, env={"BITNET_BUILD_DIR": bdir})
        self.assertEqual(rc, 1, err)
        self.assertIn(f"--lut-tiles {missing}: file not found", err)

    def test_exit_status_is_llama_benchs(self):
        rc, _, _ = e2e("-m", TINY, "--build-dir", self.fake_bench("sys.exit(3)"))
        self.assertEqual(rc, 3)
        # killed by a signal: 128 + the signal number, as a shell reports it
        rc, _, _ = e2e("-m", TINY, "--build-dir", self.fake_bench("os.kill(os.getpid(), signal.SIGTERM)"))
        self.assertEqual(rc, 128 + signal.SIGTERM)

    def test_missing_model_or_binary_is_a_clear_error(self):
        missing = os.path.join(self.tmp, "no-such-model.gguf")
        rc, _, err = e2e("-m", missing, "--build-dir", self.fake_bench("sys.exit(0)"))
        self.assertEqual(rc, 1, err)
        self.assertIn(missing, err)
        self.assertIn("generate-dummy-bitnet-model.py", err)
        nobuild = os.path.join(self.tmp, "nobuild")
        rc, _, err = e2e("-m", TINY, "--build-dir", nobuild)
        self.assertEqual(rc, 1, err)
        self.assertIn(os.path.join(nobuild, "bin", "llama-bench"), err)

    def test_bad_arguments_exit_2(self):
        for args, needle in [
            ([], "the following arguments are required: -m/--model"),
            (["-m", TINY, "-t", "0"], "0 is below 1"),
            (["-m", TINY, "-n", "x"], "'x' is not an integer"),
            (["-m", TINY, "-p", "-5"], "-5 is below 0"),
            (["-m", TINY, "--kernel", "tl3"], "'tl3' is not one of"),
            (["-m", TINY, "-r", "2,3"], "one number of repetitions"),
            (["-m", TINY, "-n", "0", "-p", "0"], "nothing to measure"),
        ]:
            rc, _, err = e2e(*args, "--build-dir", os.path.join(self.tmp, "nobuild"))
            self.assertEqual(rc, 2, f"{args}: {err}")
            self.assertIn(needle, err, args)

    @unittest.skipUnless(have_bench(), f"{BENCH} not built")
    def test_real_run_prints_the_table(self):
        rc, out, err = e2e("-m", TINY, "-n", "4", "-p", "8", "-t", "1", "-r", "2", "--build-dir", BUILD)
        self.assertEqual(rc, 0, err)
        head, rows = md_rows(out)
        self.assertEqual([r["test"] for r in rows], ["pp8", "tg4"])
        self.assertTrue(all(float(r["t/s"].split(" ± ")[0]) > 0 for r in rows))


if __name__ == "__main__":
    unittest.main()
