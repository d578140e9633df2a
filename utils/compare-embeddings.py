#!/usr/bin/env python3
"""Compare this project's llama-embedding with another engine's llama-embedding on the same GGUF file and texts.

Usage:
    python3 utils/compare-embeddings.py --other /path/to/llama.cpp/build/bin/llama-embedding -m MODEL.gguf \\
        [-p TEXTS] [--pooling last] [--bound 1e-4] [--other-args "-fa off"]

Both tools run with --embd-normalize 2 --embd-output-format array --verbose-prompt and -t 2; the token ids each
printed for every text must be equal (else the comparison would be meaningless, exit 1), then for every text
the relative L2 difference |a - b| / |a| is printed, and the exit status is 1 when one exceeds --bound.
llama.cpp's CPU path computes attention with flash attention by default, which rounds differently from the
F16 KV-cache product this runtime reproduces: pass --other-args "-fa off" (the default) to compare the same
arithmetic. The other engine is never built or fetched by this script (docs/EMBEDDINGS.md §6).

Exit status: 0 within the bound; 1 beyond it, different token ids or a tool failed; 2 bad arguments.
"""
import argparse
import json
import math
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_TEXTS = "the quick brown fox\njumps over the lazy dog\nBitNet b1.58 runs on CPUs"


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=3600)
    out, err = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[0]} exited {p.returncode}:\n{err[-2000:]}")
    return out, err


def vectors(out):
    i = out.find("[[")
    if i < 0:
        raise RuntimeError("no [[...]] array in the output")
    return json.loads(out[i:out.rindex("]") + 1])


def ours_ids(err):
    return [[int(x) for x in m.group(1).split()] for m in re.finditer(r"text \d+: \d+ tokens:((?: \d+)*)", err)]


def other_ids(out, err):
    """llama.cpp's --verbose-prompt: "number of tokens in prompt = N" per prompt (its log) and the lines
    "   ID -> 'piece'" (stdout), in order."""
    counts = [int(n) for n in re.findall(r"number of tokens in prompt = (\d+)", err)]
    ids = [int(m.group(1)) for m in re.finditer(r"(?m)^\s*(\d+) -> '", out)]
    texts, at = [], 0
    for n in counts:
        texts.append(ids[at:at + n])
        at += n
    return texts


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--other", required=True, help="the other engine's llama-embedding")
    ap.add_argument("--ours", default=os.path.join(ROOT, "build", "bin", "llama-embedding"))
    ap.add_argument("-p", "--prompt", default=DEFAULT_TEXTS, help="texts separated by newlines")
    ap.add_argument("--pooling", default="last", choices=["none", "mean", "cls", "last"])
    ap.add_argument("--bound", type=float, default=1e-4)
    ap.add_argument("--other-args", default="-fa off")
    a = ap.parse_args(argv)
    for path in (a.model, a.other, a.ours):
        if not os.path.isfile(path):
            print(f"compare-embeddings: {path}: no such file", file=sys.stderr)
            return 2
    common = ["-m", a.model, "-p", a.prompt, "--pooling", a.pooling, "--embd-normalize", "2",
              "--embd-output-format", "array", "--verbose-prompt", "-t", "2"]
    try:
        out_a, err_a = run([a.ours] + common)
        out_b, err_b = run([a.other] + common + shlex.split(a.other_args))
        va, vb = vectors(out_a), vectors(out_b)
    except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
        print(f"compare-embeddings: {e}", file=sys.stderr)
        return 1
    ia, ib = ours_ids(err_a), other_ids(out_b, err_b)
    if ia != ib:
        print(f"compare-embeddings: the engines tokenize differently:\n  ours  {ia}\n  other {ib}", file=sys.stderr)
        return 1
    if len(va) != len(vb):
        print(f"compare-embeddings: {len(va)} vs {len(vb)} vectors", file=sys.stderr)
        return 1
    worst = 0.0
    for i, (x, y) in enumerate(zip(va, vb)):
        n = math.sqrt(sum(v * v for v in x)) or 1.0
        d = math.sqrt(sum((u - v) ** 2 for u, v in zip(x, y))) / n
        worst = max(worst, d)
        print(f"vector {i}: {len(ia[i]) if i < len(ia) else '?'} tokens, relative L2 difference {d:.3e}")
    print(f"worst {worst:.3e} (bound {a.bound:g}): {'ok' if worst <= a.bound else 'BEYOND THE BOUND'}")
    return 0 if worst <= a.bound else 1


if __name__ == "__main__":
    sys.exit(main())
