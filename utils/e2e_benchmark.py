#!/usr/bin/env python3
"""End-to-end speed of a BitNet model: runs build/bin/llama-bench with the flags bitnet.cpp's
utils/e2e_benchmark.py takes and prints its table (prompt processing ppN and generation tgN, tokens/s).

    python3 utils/e2e_benchmark.py -m models/dummy-bitnet-125m.i2_s.gguf -n 128 -p 512 -t 2

Flags (bitnet.cpp's names and defaults): -m/--model (required), -n/--n-token (128), -p/--n-prompt (512),
-t/--threads (2). This project's additions: -r/--repetitions (5, as bitnet.cpp passes), --kernel
auto|i2_s|tl1|tl2, -b/--batch-size, --head-type, --lut-tiles, --i2s-layout, -o/--output md|csv|json,
--build-dir. -n, -p, -t, -b and --kernel
take comma lists (every combination runs, as llama-bench does).

Prompt batch: bitnet.cpp's script passes `-b 1` to llama-bench, which evaluates the prompt one token at a
time, so its "pp" figure is really a second generation figure. Here the prompt is evaluated in batches
of llama-bench's default size (2048 tokens, i.e. the whole prompt) unless -b is given; `-b 1` reproduces
bitnet.cpp's behaviour.

Exit status: llama-bench's, passed through (0 on success); 1 when the model file or llama-bench is
missing; 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from utils.launch import add_i2s_layout, i2s_layout_args, missing_input, tool_path  # noqa: E402  (needs ROOT on sys.path)
KERNELS = ("auto", "i2_s", "tl1", "tl2")


def int_list(minimum: int):
    """argparse type: one integer >= minimum, or a comma list of them; returns the text llama-bench gets."""
    def parse(text: str) -> str:
        items = text.split(",")
        for item in items:
            if not re.fullmatch(r"\s*[+-]?\d+\s*", item):
                raise argparse.ArgumentTypeError(f"'{text}' is not an integer or a comma list of integers")
            if int(item) < minimum:
                raise argparse.ArgumentTypeError(f"'{text}': {int(item)} is below {minimum}")
        return ",".join(str(int(i)) for i in items)
    return parse


def kernel_list(text: str) -> str:
    """argparse type for --kernel: names from KERNELS, comma separated."""
    for item in text.split(","):
        if item not in KERNELS:
            raise argparse.ArgumentTypeError(f"'{item}' is not one of {', '.join(KERNELS)}")
    return text


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Benchmark a BitNet model end to end with build/bin/llama-bench (bitnet.cpp's "
                    "e2e_benchmark.py flags).")
    p.add_argument("-m", "--model", required=True, help="GGUF model file")
    p.add_argument("-n", "--n-token", type=int_list(0), default="128",
                   help="tokens generated one at a time in the tg test (default 128; 0 = no tg test)")
    p.add_argument("-p", "--n-prompt", type=int_list(0), default="512",
                   help="prompt tokens of the pp test (default 512; 0 = no pp test)")
    p.add_argument("-t", "--threads", type=int_list(1), default="2", help="threads (default 2)")
    p.add_argument("-r", "--repetitions", type=int_list(1), default="5",
                   help="timed repetitions per test (default 5)")
    p.add_argument("--kernel", type=kernel_list, default=None,
                   help="auto|i2_s|tl1|tl2, comma list (default: llama-bench's auto: tl2 on x86-64, tl1 on AArch64)")
    p.add_argument("-b", "--batch-size", type=int_list(1), default=None,
                   help="prompt tokens per forward pass (default: llama-bench's 2048; bitnet.cpp's script uses 1)")
    p.add_argument("--head-type", choices=("stored", "q8_0", "stored,q8_0", "q8_0,stored"), default=None,
                   help="output head as stored in the file or requantized to Q8_0 at load (llama-bench --head-type; "
                        "default: llama-bench's stored)")
    p.add_argument("--lut-tiles", metavar="FILE", default=None,
                   help="the tiles a TL1/TL2 model without a tile record (written by bitnet.cpp) was packed with: "
                        "bitnet.cpp's include/kernel_config.ini or a configs/-style YAML (llama-bench --lut-tiles)")
    add_i2s_layout(p, "llama-bench")
    p.add_argument("-o", "--output", choices=("md", "csv", "json"), default="md", help="output format (default md)")
    p.add_argument("--build-dir", default=None,
                   help="where bin/llama-bench is (default build/, env BITNET_BUILD_DIR)")
    a = p.parse_args(argv)
    if "," in a.repetitions:
        p.error(f"-r {a.repetitions}: one number of repetitions")
    if a.n_token.split(",") == ["0"] * len(a.n_token.split(",")) and \
            a.n_prompt.split(",") == ["0"] * len(a.n_prompt.split(",")):
        p.error("-n 0 and -p 0: nothing to measure")
    return a


def bench_command(a, bench: str) -> list[str]:
    """The llama-bench command line for parsed arguments a."""
    cmd = [bench, "-m", a.model, "-n", a.n_token, "-p", a.n_prompt, "-t", a.threads, "-r", a.repetitions,
           "-o", a.output]
    if a.kernel:
        cmd += ["--kernel", a.kernel]
    if a.batch_size:
        cmd += ["-b", a.batch_size]
    if a.head_type:
        cmd += ["--head-type", a.head_type]
    if a.lut_tiles:
        cmd += ["--lut-tiles", a.lut_tiles]
    return cmd + i2s_layout_args(a)


def main(argv=None) -> int:
    a = parse_args(argv)
    bench = tool_path(a.build_dir, "llama-bench")
    why = missing_input("e2e_benchmark", a.model, a.lut_tiles, bench, "make a dummy model with `python3 utils/"
                        f"generate-dummy-bitnet-model.py --model-size 125M --outfile {a.model}`, or prepare one with "
                        "`python3 setup_env.py`")
    if why:
        print(why, file=sys.stderr)
        return 1
    cmd = bench_command(a, bench)
    print("e2e_benchmark: " + " ".join(cmd), file=sys.stderr)
    sys.stderr.flush()
    try:
        rc = subprocess.call(cmd)
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    except OSError as e:
        print(f"e2e_benchmark: cannot run {bench}: {e.strerror or e}", file=sys.stderr)
        return 1
    return 128 - rc if rc < 0 else rc


if __name__ == "__main__":
    sys.exit(main())
