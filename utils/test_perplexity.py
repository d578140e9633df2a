#!/usr/bin/env python3
"""Perplexity of a BitNet model over several text files: runs build/bin/llama-perplexity once per file
and writes one CSV row per run.

    python3 utils/test_perplexity.py -m models/dummy-bitnet-125m.i2_s.gguf -f wiki.test.raw other.txt \\
        [-c 512] [-b N] [-t N] [--chunks N] [--kernel auto|i2_s|tl1|tl2] [--csv OUT]

Flags kept from bitnet.cpp's utils/test_perplexity.py (same names and defaults): -m/--model (required),
-d/--data-dir DIR (every DIR/<dataset>/test.txt is a file to test, named by its folder; used when no -f
is given, default "data"), -c/--ctx-size (512), -t/--threads (here: llama-perplexity's default, the
number of online CPUs, instead of bitnet.cpp's fixed 16), -o/--output-dir (perplexity_results: the CSV
ppl_<model>_<time>.csv when --csv is not given, and a .log with every run's command and output),
--csv-output (also --csv), --llama-perplexity PATH, -q/--quick (the first 4096 characters of each file,
-c at most 128). bitnet.cpp's -e/--test-embeddings and --quantize-bin need llama-quantize, which this
project does not have: -e is refused with a message. This project's additions: -f/--file FILE... (files
to test, repeatable; the dataset name is the file name without extension), -b/--batch-size, --chunks,
--kernel, --head-type, --lut-table, --lut-tiles, --i2s-layout, --build-dir (where bin/llama-perplexity is, default build/ or $BITNET_BUILD_DIR),
--timeout (seconds per run, default 3600 as bitnet.cpp).

CSV columns: model, dataset, file, kernel (the path llama-perplexity reports), n_ctx, batch, threads,
chunks (evaluated), text_tokens (the file's tokens, BOS included), scored_tokens, ppl, ppl_err (the
final estimate and its uncertainty at full precision, llama.cpp's formula: src/eval/perplexity.h), seconds
(evaluation time llama-perplexity measured), tokens_per_s (chunks x n_ctx / seconds), wall_seconds (the
whole run, model load and tokenization included), status (ok | failed | timeout), error (the tool's
last error line). stdout: one line per run and a summary table.

Exit status: 0 when every run succeeded; 1 when any failed (each failure is named with its file on
stderr), or the model, a file list or llama-perplexity is missing; 2 bad arguments; 130 on Ctrl-C.
"""
from __future__ import annotations

import argparse
import csv
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from utils.launch import add_i2s_layout, i2s_layout_args  # noqa: E402  (needs ROOT on sys.path)
KERNELS = ("auto", "i2_s", "tl1", "tl2")
FIELDS = ["model", "dataset", "file", "kernel", "n_ctx", "batch", "threads", "chunks", "text_tokens",
          "scored_tokens", "ppl", "ppl_err", "seconds", "tokens_per_s", "wall_seconds", "status", "error"]
QUICK_CHARS = 4096  # bitnet.cpp's quick mode: the first 4096 characters
QUICK_CTX = 128     # ... and a context of at most 128

# The lines of llama-perplexity's stderr this script reads (src/tools/llama-perplexity.c documents them).
RE_MODEL = re.compile(r"^llama-perplexity: model .*; path ([^:]+):", re.M)
RE_FILE = re.compile(r": \d+ bytes, (\d+) tokens \((?:BOS added|no BOS)\); n_ctx (\d+)(?: \(default\))?, "
                     r"(\d+) of \d+ chunks, batch (\d+), threads (\d+);", re.M)
RE_NLL = re.compile(r"^llama-perplexity: mean NLL \S+ over (\d+) tokens, PPL (\S+) \+/- (\S+)$", re.M)
RE_TIME = re.compile(r"^llama-perplexity: \d+ chunks of \d+ tokens in ([0-9.]+) s \(([0-9.]+) tokens/s\)$", re.M)
RE_ERROR = re.compile(r"^llama-perplexity: error: (.*)$", re.M)


def positive(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer")
    if v < 1:
        raise argparse.ArgumentTypeError(f"{v} is below 1")
    return v


def chunks_type(text: str) -> int:
    """argparse type for --chunks: -1 (all) or an integer >= 1."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer")
    if v == 0 or v < -1:
        raise argparse.ArgumentTypeError(f"{v}: expected -1 (all) or a number of chunks >= 1")
    return v


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Perplexity of a GGUF model over several text files with build/bin/llama-perplexity "
                    "(bitnet.cpp's utils/test_perplexity.py flags); one CSV row per file.")
    p.add_argument("-m", "--model", required=True, help="GGUF model file")
    p.add_argument("-f", "--file", nargs="+", action="extend", default=[], metavar="FILE",
                   help="text files to test (repeatable); without -f, the datasets of --data-dir")
    p.add_argument("-d", "--data-dir", default="data",
                   help="folder of dataset folders, each with a test.txt (used without -f; default: data)")
    p.add_argument("-c", "--ctx-size", type=positive, default=512, help="tokens per chunk (default 512)")
    p.add_argument("-b", "--batch-size", type=positive, default=None,
                   help="tokens per forward pass (default: llama-perplexity's 512, at most -c)")
    p.add_argument("-t", "--threads", type=positive, default=None,
                   help="threads (default: llama-perplexity's, the number of online CPUs)")
    p.add_argument("--chunks", type=chunks_type, default=-1, help="at most N chunks per file (default -1 = all)")
    p.add_argument("--kernel", choices=KERNELS, default=None, help="ternary kernel path (default auto)")
    p.add_argument("--head-type", choices=("stored", "q8_0"), default=None,
                   help="output head as stored (default) or requantized to Q8_0 at load")
    p.add_argument("--lut-table", choices=("default", "pretuned"), default=None,
                   help="preferred tile table; also which table of a --lut-tiles YAML (llama-perplexity --lut-table)")
    p.add_argument("--lut-tiles", metavar="FILE", default=None,
                   help="the tiles a TL1/TL2 model without a tile record (bitnet.cpp's) was packed with: its "
                        "include/kernel_config.ini or a configs/-style YAML (llama-perplexity --lut-tiles)")
    add_i2s_layout(p, "llama-perplexity")
    p.add_argument("--csv", "--csv-output", dest="csv", default=None, metavar="OUT",
                   help="write the CSV here (default: OUTPUT_DIR/ppl_<model>_<time>.csv)")
    p.add_argument("-o", "--output-dir", default="perplexity_results",
                   help="folder of the default CSV and of the run log (default: perplexity_results)")
    p.add_argument("-q", "--quick", action="store_true",
                   help=f"the first {QUICK_CHARS} characters of each file, -c at most {QUICK_CTX}")
    p.add_argument("-e", "--test-embeddings", action="store_true",
                   help="bitnet.cpp's embedding-type sweep: not available (needs llama-quantize)")
    p.add_argument("--llama-perplexity", default=None, metavar="PATH",
                   help="the llama-perplexity binary (default: BUILD_DIR/bin/llama-perplexity)")
    p.add_argument("--build-dir", default=None, help="build folder (default build/, env BITNET_BUILD_DIR)")
    p.add_argument("--timeout", type=positive, default=3600, help="seconds per run (default 3600)")
    a = p.parse_args(argv)
    if a.test_embeddings:
        p.error("-e/--test-embeddings: this project has no llama-quantize to requantize the token embedding; "
                "test each model file with -m instead")
    return a


def find_files(a) -> tuple[list[tuple[str, str]], str | None]:
    """[(dataset name, path)] to test, or an error message."""
    if a.file:
        return [(os.path.splitext(os.path.basename(f))[0], f) for f in a.file], None
    if not os.path.isdir(a.data_dir):
        return [], (f"no -f files and data directory {a.data_dir} not found (give text files with -f, or "
                    f"-d DIR with DIR/<dataset>/test.txt)")
    out = []
    for name in sorted(os.listdir(a.data_dir)):
        t = os.path.join(a.data_dir, name, "test.txt")
        if os.path.isfile(t):
            out.append((name, t))
    if not out:
        return [], f"no {a.data_dir}/<dataset>/test.txt found"
    return out, None


def quick_copy(path: str, tmpdir: str) -> str:
    """The first QUICK_CHARS characters of path (UTF-8, bad bytes replaced) in a file under tmpdir."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read(QUICK_CHARS)
    out = os.path.join(tmpdir, f"quick-{len(os.listdir(tmpdir))}-{os.path.basename(path)}")
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    return out


def run_one(a, tool: str, dataset: str, path: str, text_path: str, n_ctx: int) -> tuple[dict, str]:
    """Run llama-perplexity on text_path; (CSV row, log text)."""
    cmd = [tool, "-m", a.model, "-f", text_path, "-c", str(n_ctx), "--chunks", str(a.chunks)]
    if a.threads:
        cmd += ["-t", str(a.threads)]
    if a.batch_size:
        cmd += ["-b", str(a.batch_size)]
    if a.kernel:
        cmd += ["--kernel", a.kernel]
    if a.head_type:
        cmd += ["--head-type", a.head_type]
    if a.lut_table:
        cmd += ["--lut-table", a.lut_table]
    if a.lut_tiles:
        cmd += ["--lut-tiles", a.lut_tiles]
    cmd += i2s_layout_args(a)
    row = {k: "" for k in FIELDS}
    row.update(model=a.model, dataset=dataset, file=path, n_ctx=n_ctx, status="failed")
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=a.timeout)
        out, err, rc = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        rc = None
    except OSError as e:
        out, err, rc = "", f"cannot run {tool}: {e.strerror or e}", -1
    row["wall_seconds"] = f"{time.monotonic() - t0:.2f}"
    log = f"$ {' '.join(cmd)}\n--- stdout\n{out}--- stderr\n{err}--- exit status: {rc}\n"
    if (m := RE_MODEL.search(err)):
        row["kernel"] = m.group(1)
    if (m := RE_FILE.search(err)):
        row.update(text_tokens=m.group(1), n_ctx=m.group(2), chunks=m.group(3), batch=m.group(4), threads=m.group(5))
    if rc is None:
        row.update(status="timeout", error=f"no result after {a.timeout} s")
        return row, log
    nll, tm = RE_NLL.search(err), RE_TIME.search(err)
    if rc == 0 and nll and tm:
        row.update(scored_tokens=nll.group(1), ppl=nll.group(2), ppl_err=nll.group(3), seconds=tm.group(1),
                   tokens_per_s=tm.group(2), status="ok")
        return row, log
    errors = RE_ERROR.findall(err)
    if errors:  # the tool names the text file first; the FAILED line names it already
        row["error"] = errors[-1][len(text_path) + 2:] if errors[-1].startswith(text_path + ": ") else errors[-1]
    elif rc != 0:
        row["error"] = (err.strip().splitlines() or [f"exit status {rc}"])[-1]
    else:
        row["error"] = "exit status 0 but no result lines on stderr"
    return row, log


def main(argv=None) -> int:
    a = parse_args(argv)
    bdir = a.build_dir or os.environ.get("BITNET_BUILD_DIR") or os.path.join(ROOT, "build")
    tool = a.llama_perplexity or os.path.join(bdir, "bin", "llama-perplexity")
    if not os.path.isfile(a.model):
        print(f"test_perplexity: model file {a.model} not found", file=sys.stderr)
        return 1
    if not (os.path.isfile(tool) and os.access(tool, os.X_OK)):
        print(f"test_perplexity: {tool} not found: build first (`cmake -S . -B build && cmake --build build`)",
              file=sys.stderr)
        return 1
    files, problem = find_files(a)
    if problem:
        print(f"test_perplexity: {problem}", file=sys.stderr)
        return 1
    n_ctx = min(a.ctx_size, QUICK_CTX) if a.quick else a.ctx_size

    stamp = datetime.now().strftime("%Y%m%d_%H%M%S")
    model_name = os.path.splitext(os.path.basename(a.model))[0]
    csv_path = a.csv or os.path.join(a.output_dir, f"ppl_{model_name}_{stamp}.csv")
    log_path = os.path.splitext(csv_path)[0] + ".log"
    rows, logs = [], []
    try:
        with tempfile.TemporaryDirectory(prefix="test_perplexity_") as tmp:
            for i, (dataset, path) in enumerate(files, 1):
                text_path = quick_copy(path, tmp) if a.quick and os.path.isfile(path) else path
                row, log = run_one(a, tool, dataset, path, text_path, n_ctx)
                rows.append(row)
                logs.append(log)
                if row["status"] == "ok":
                    print(f"test_perplexity: [{i}/{len(files)}] {dataset}: PPL {float(row['ppl']):.4f} +/- "
                          f"{float(row['ppl_err']):.5f} ({row['chunks']} chunks of {row['n_ctx']}, "
                          f"{row['seconds']} s)", flush=True)
                else:
                    print(f"test_perplexity: [{i}/{len(files)}] {dataset}: {row['status'].upper()}: {row['error']}",
                          flush=True)
    except KeyboardInterrupt:
        print("test_perplexity: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT

    try:
        os.makedirs(os.path.dirname(os.path.abspath(csv_path)), exist_ok=True)
        with open(csv_path, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=FIELDS)
            w.writeheader()
            w.writerows(rows)
        with open(log_path, "w", encoding="utf-8") as f:
            f.write("\n".join(logs))
    except OSError as e:
        print(f"test_perplexity: cannot write {csv_path} / {log_path}: {e.strerror or e}", file=sys.stderr)
        return 1

    width = max(len("dataset"), *(len(r["dataset"]) for r in rows))
    print(f"\n{'dataset':<{width}}  {'PPL':>14}  {'+/-':>12}  {'chunks':>6}  {'seconds':>8}  status")
    for r in rows:
        ok = r["status"] == "ok"
        print(f"{r['dataset']:<{width}}  {float(r['ppl']) if ok else float('nan'):>14.4f}  "
              f"{float(r['ppl_err']) if ok else float('nan'):>12.5f}  {r['chunks'] or '-':>6}  "
              f"{r['seconds'] or '-':>8}  {r['status']}")
    print(f"\nCSV: {csv_path}\nlog: {log_path}")
    failed = [r for r in rows if r["status"] != "ok"]
    for r in failed:
        print(f"test_perplexity: FAILED: {r['file']}: {r['error']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
