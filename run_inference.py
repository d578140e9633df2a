#!/usr/bin/env python3
"""Generate text with a BitNet model: runs build/bin/llama-cli with the flags bitnet.cpp's
run_inference.py takes.

    python3 run_inference.py -m models/dummy-bitnet-125m.i2_s.gguf -p "The quick brown fox" -n 32 -temp 0

Flags (bitnet.cpp's names): -m/--model, -n/--n-predict, -p/--prompt, -t/--threads, -c/--ctx-size,
-temp/--temperature, -cnv/--conversation; plus -s/--seed, --chat-template, --head-type, --lut-tiles,
--i2s-layout and --build-dir (this project's).

Chat (-cnv), as in bitnet.cpp: -p is the system prompt; user turns are read from this script's stdin,
one per line, until end of input (Ctrl-D); -n limits each reply. The chat template comes from the
model's tokenizer.chat_template, or from --chat-template bitnet|llama3|falcon3. Ctrl-C is left to
llama-cli (it stops the current reply; at the prompt it ends the chat).

Exit status: llama-cli's, passed through (in chat mode 0 at end of input, 3 when the context -c filled
up and the chat ended, 130 after Ctrl-C at the prompt); 1 when the model file or llama-cli is missing;
2 for bad arguments.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, ROOT)
from utils.launch import add_i2s_layout, i2s_layout_args, missing_input, positive_int, tool_path  # noqa: E402  (needs ROOT on sys.path)

DEFAULT_MODEL = os.path.join("models", "dummy-bitnet-125m.i2_s.gguf")


def parse_args(argv):
    p = argparse.ArgumentParser(description="Run inference with build/bin/llama-cli (bitnet.cpp's run_inference.py flags).")
    p.add_argument("-m", "--model", default=DEFAULT_MODEL,
                   help=f"GGUF model (default {DEFAULT_MODEL}, the model quickstart.sh writes)")
    p.add_argument("-n", "--n-predict", type=int, default=128,
                   help="tokens to generate (default 128; -1 = until end of text or a full context)")
    p.add_argument("-p", "--prompt", required=True, help="prompt text")
    p.add_argument("-t", "--threads", type=positive_int, default=2, help="threads (default 2)")
    p.add_argument("-c", "--ctx-size", type=positive_int, default=2048, help="context size in tokens (default 2048)")
    p.add_argument("-temp", "--temperature", type=float, default=0.8,
                   help="sampling temperature (default 0.8; 0 = greedy)")
    p.add_argument("-s", "--seed", type=int, default=None, help="sampling seed (default: llama-cli's)")
    p.add_argument("-cnv", "--conversation", action="store_true",
                   help="chat: -p is the system prompt, user turns come from stdin (passed to llama-cli)")
    p.add_argument("--chat-template", choices=("bitnet", "llama3", "falcon3"), default=None,
                   help="chat template to use when the model's tokenizer.chat_template is missing or unknown")
    p.add_argument("--head-type", choices=("stored", "q8_0"), default=None,
                   help="output head as stored in the file (llama-cli's default, exact) or requantized to Q8_0 at "
                        "load (faster, logits change slightly); passed to llama-cli --head-type")
    p.add_argument("--lut-tiles", metavar="FILE", default=None,
                   help="the tiles a TL1/TL2 model without a tile record (written by bitnet.cpp) was packed with: "
                        "bitnet.cpp's include/kernel_config.ini or a configs/-style YAML; passed to llama-cli --lut-tiles")
    add_i2s_layout(p, "llama-cli")
    p.add_argument("--build-dir", default=None, help="where bin/llama-cli is (default build/, env BITNET_BUILD_DIR)")
    a = p.parse_args(argv)
    if a.n_predict < -1:
        p.error(f"-n {a.n_predict}: must be -1 or more")
    if a.temperature < 0 or a.temperature != a.temperature:
        p.error(f"-temp {a.temperature}: must be >= 0")
    return a


def main(argv=None) -> int:
    a = parse_args(argv)
    cli = tool_path(a.build_dir, "llama-cli")
    why = missing_input("run_inference", a.model, a.lut_tiles, cli, "make one with `python3 utils/generate-dummy-"
                        "bitnet-model.py`, or prepare a model with `python3 setup_env.py`")
    if why:
        print(why, file=sys.stderr)
        return 1
    cmd = [cli, "-m", a.model, "-n", str(a.n_predict), "-t", str(a.threads), "-p", a.prompt,
           "-c", str(a.ctx_size), "--temp", str(a.temperature)]
    if a.seed is not None:
        cmd += ["--seed", str(a.seed)]
    if a.chat_template:
        cmd += ["--chat-template", a.chat_template]
    if a.head_type:
        cmd += ["--head-type", a.head_type]
    if a.lut_tiles:
        cmd += ["--lut-tiles", a.lut_tiles]
    cmd += i2s_layout_args(a)
    if a.conversation:
        cmd.append("-cnv")
        return run_chat(cmd)
    try:
        rc = subprocess.call(cmd)
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    return 128 - rc if rc < 0 else rc


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_chat(cmd) -> int:
    """Run llama-cli -cnv with this process's stdin/stdout; Ctrl-C belongs to llama-cli (it stops a reply
    and returns to the prompt), so this process ignores SIGINT while it waits. Returns the exit status."""
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        p = subprocess.Popen(cmd, preexec_fn=_default_sigint)
        rc = p.wait()
    finally:
        signal.signal(signal.SIGINT, old)
    return 128 - rc if rc < 0 else rc


if __name__ == "__main__":
    sys.exit(main())
