#!/usr/bin/env python3
"""Serve a BitNet model over HTTP with OpenAI's API: runs build/bin/llama-server with the flags
bitnet.cpp's run_inference_server.py takes.

    python3 run_inference_server.py -m models/dummy-bitnet-125m.i2_s.gguf --port 8080
    curl http://127.0.0.1:8080/v1/chat/completions -H 'Content-Type: application/json' \\
         -d '{"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 32}'

Flags (bitnet.cpp's names): -m/--model, -p/--prompt (the system prompt of chat requests that bring none),
-n/--n-predict (max_tokens of requests that give none), -t/--threads, -c/--ctx-size (shared by the slots),
-temp/--temperature (the default of requests that give none), --host (default 127.0.0.1), --port (8080);
plus this project's -np/--parallel, --api-key, --chat-template, --lut-tiles, --i2s-layout and --build-dir.

The script replaces itself with llama-server (exec), so SIGINT/SIGTERM reach the server directly: it
answers the requests already received and exits 0. Exit status: llama-server's; 1 when the model file or
llama-server is missing; 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, ROOT)
from utils.launch import add_i2s_layout, i2s_layout_args, missing_input, positive_int, tool_path  # noqa: E402  (needs ROOT on sys.path)

DEFAULT_MODEL = os.path.join("models", "dummy-bitnet-125m.i2_s.gguf")


def port_number(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a port number") from None
    if not 0 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"{v} is not in [0, 65535]")
    return v


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Serve a model with build/bin/llama-server (bitnet.cpp's run_inference_server.py flags).")
    p.add_argument("-m", "--model", default=DEFAULT_MODEL,
                   help=f"GGUF model (default {DEFAULT_MODEL}, the model quickstart.sh writes)")
    p.add_argument("-p", "--prompt", default=None,
                   help="system prompt of chat requests that do not begin with a system message")
    p.add_argument("-n", "--n-predict", type=int, default=4096,
                   help="max_tokens of requests that give none (default 4096; -1 = until the slot's context is full)")
    p.add_argument("-t", "--threads", type=positive_int, default=2, help="threads (default 2)")
    p.add_argument("-c", "--ctx-size", type=positive_int, default=2048,
                   help="context size in tokens, shared by the slots: each holds ctx-size / parallel (default 2048)")
    p.add_argument("-temp", "--temperature", type=float, default=0.8,
                   help="temperature of requests that give none (default 0.8; 0 = greedy)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=port_number, default=8080, help="port (default 8080)")
    p.add_argument("-np", "--parallel", type=positive_int, default=4,
                   help="requests decoded together with continuous batching (default 4)")
    p.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY' (default: none)")
    p.add_argument("--chat-template", choices=("bitnet", "llama3", "falcon3"), default=None,
                   help="chat template to use when the model's tokenizer.chat_template is missing or unknown")
    p.add_argument("--lut-tiles", metavar="FILE", default=None,
                   help="the tiles a TL1/TL2 model without a tile record (written by bitnet.cpp) was packed with")
    add_i2s_layout(p, "llama-server")
    p.add_argument("--build-dir", default=None, help="where bin/llama-server is (default build/, env BITNET_BUILD_DIR)")
    a = p.parse_args(argv)
    if a.n_predict < -1 or a.n_predict == 0:
        p.error(f"-n {a.n_predict}: must be -1 or positive")
    if not 0 <= a.temperature <= 2:
        p.error(f"-temp {a.temperature}: must be in [0, 2]")
    if a.ctx_size < a.parallel:
        p.error(f"-c {a.ctx_size} is smaller than -np {a.parallel}: every slot needs at least one position")
    return a


def command(a, server):
    """The llama-server command line for parsed arguments a."""
    cmd = [server, "-m", a.model, "-c", str(a.ctx_size), "-np", str(a.parallel), "-t", str(a.threads),
           "-n", str(a.n_predict), "--temp", str(a.temperature), "--host", a.host, "--port", str(a.port)]
    if a.prompt is not None:
        cmd += ["--system-prompt", a.prompt]
    if a.api_key:
        cmd += ["--api-key", a.api_key]
    if a.chat_template:
        cmd += ["--chat-template", a.chat_template]
    if a.lut_tiles:
        cmd += ["--lut-tiles", a.lut_tiles]
    return cmd + i2s_layout_args(a)


def main(argv=None) -> int:
    a = parse_args(argv)
    server = tool_path(a.build_dir, "llama-server")
    why = missing_input("run_inference_server", a.model, a.lut_tiles, server, "make one with `python3 utils/generate-"
                        "dummy-bitnet-model.py`, or prepare a model with `python3 setup_env.py`")
    if why:
        print(why, file=sys.stderr)
        return 1
    cmd = command(a, server)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(server, cmd)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
