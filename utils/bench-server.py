#!/usr/bin/env python3
"""Benchmark llama-server under concurrent clients: aggregate generated tokens per second and
time to first token (TTFT) for 1, 2, 4 and 8 clients, each sending requests back to back.

    python3 utils/bench-server.py --model-size 125M --model-size 1B --clients 1,2,4,8

For every model (a dummy made with utils/generate-dummy-bitnet-model.py into --models-dir, or --model
FILE), one llama-server with as many slots as the most clients is started on 127.0.0.1 and a free port.
Each client sends --requests streamed completions (a prompt of about --prompt-tokens tokens, different
per request; --max-tokens generated tokens, ignore_eos, temperature 0) one after another. Measured per
client count, after one warm-up request:
  aggregate tok/s  generated tokens of all requests / wall time from the first request to the last answer
  TTFT             median and largest time from sending a request to its first text event
  per-client tok/s generated tokens / (last event - first event), median over requests (decode speed as
                   one user sees it)
The table is printed (and written as JSON with --json FILE), with the aggregate throughput of each client
count against one client. Numbers depend on the CPU and on what else runs: compare ratios of one run. On a
shared machine, --rounds N measures the client counts N times, interleaved, and reports each count's median
round with the throughput of every round.
Exit status: 0 on success, 1 when the server fails or a request does not complete, 2 bad arguments.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORDS = ("river stone lamp north green paper orbit salt violin ember cloud marble tiger glass honey "
         "ladder canyon copper willow thunder").split()


def parse_args(argv):
    p = argparse.ArgumentParser(description="llama-server throughput and time to first token under 1..N clients.")
    p.add_argument("--model", action="append", default=[], metavar="FILE", help="a GGUF model (repeatable)")
    p.add_argument("--model-size", action="append", default=[], metavar="SIZE",
                   help="a dummy of this size from utils/generate-dummy-bitnet-model.py (125M, 1B, ...; repeatable)")
    p.add_argument("--models-dir", default=os.path.join(ROOT, "models"), help="where the dummies go (default models/)")
    p.add_argument("--clients", default="1,2,4,8", help="client counts (default 1,2,4,8)")
    p.add_argument("--requests", type=int, default=4, help="requests per client (default 4)")
    p.add_argument("--rounds", type=int, default=1,
                   help="measure every client count this many times, the counts interleaved (1,2,4,8,1,2,...), "
                        "and report the round of median aggregate tok/s with every round's (default 1)")
    p.add_argument("--max-tokens", type=int, default=64, help="generated tokens per request (default 64)")
    p.add_argument("--prompt-tokens", type=int, default=32, help="about this many prompt tokens (default 32)")
    p.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 1, help="server threads (default: CPUs)")
    p.add_argument("--ctx-per-slot", type=int, default=512, help="positions per slot (default 512)")
    p.add_argument("--head-type", choices=("stored", "q8_0"), default="stored",
                   help="llama-server --head-type: the output head as stored or requantized to Q8_0 (default stored)")
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"), help="where bin/llama-server is")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    a = p.parse_args(argv)
    try:
        a.clients = sorted({int(x) for x in a.clients.split(",") if x})
    except ValueError:
        p.error(f"--clients {a.clients!r}: a comma list of positive integers")
    if not a.clients or min(a.clients) < 1:
        p.error(f"--clients {a.clients!r}: a comma list of positive integers")
    for name in ("requests", "rounds", "max_tokens", "prompt_tokens", "threads", "ctx_per_slot"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be positive")
    if a.prompt_tokens + a.max_tokens > a.ctx_per_slot:
        p.error(f"--prompt-tokens + --max-tokens ({a.prompt_tokens + a.max_tokens}) exceed --ctx-per-slot {a.ctx_per_slot}")
    if not a.model and not a.model_size:
        a.model_size = ["125M"]
    return a


def dummy(size, models_dir, build_dir):
    path = os.path.join(models_dir, f"dummy-bitnet-{size.lower()}.i2_s.gguf")
    if not os.path.isfile(path):
        os.makedirs(models_dir, exist_ok=True)
        print(f"bench-server: writing {path}", file=sys.stderr)
        subprocess.run([sys.executable, os.path.join(ROOT, "utils", "generate-dummy-bitnet-model.py"), "--model-size",
                        size, "--outtype", "i2_s", "--outfile", path, "--build-dir", build_dir, "-q"], check=True)
    return path


class Server:
    def __init__(self, exe, model, slots, ctx_per_slot, threads, head_type="stored"):
        cmd = [exe, "-m", model, "--port", "0", "-np", str(slots), "-c", str(slots * ctx_per_slot), "-t", str(threads),
               "--temp", "0", "--queue", "0", "--max-tokens", str(ctx_per_slot), "--head-type", head_type]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.port, self.log = None, []
        t0 = time.time()
        for line in self.proc.stderr:
            self.log.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
            if time.time() - t0 > 600:
                break
        if self.port is None:
            self.stop()
            raise RuntimeError("llama-server did not start:\n" + "".join(self.log))
        threading.Thread(target=lambda: [self.log.append(x) for x in self.proc.stderr], daemon=True).start()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def prompt_text(i, n_words):
    return " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(n_words))


def one_request(port, prompt, max_tokens):
    """A streamed completion; returns (t_send, t_first_event, t_last_event, completion_tokens)."""
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0,
                       "stream": True, "stream_options": {"include_usage": True}})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t_send = time.perf_counter()
    conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {r.read()[:300]!r}")
    t_first = t_last = None
    tokens = None
    buf = b""
    while True:
        chunk = r.read1(65536) if hasattr(r, "read1") else r.read(4096)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            if not event.startswith(b"data: "):
                continue
            payload = event[6:]
            if payload == b"[DONE]":
                continue
            ev = json.loads(payload)
            now = time.perf_counter()
            if ev.get("usage"):
                tokens = ev["usage"]["completion_tokens"]
            elif ev["choices"] and ev["choices"][0].get("text"):
                if t_first is None:
                    t_first = now
                t_last = now
    conn.close()
    if tokens != max_tokens or t_first is None:
        raise RuntimeError(f"request ended with {tokens} tokens, wanted {max_tokens}")
    return t_send, t_first, t_last, tokens


def run_clients(port, n_clients, a, words, base):
    results, errors = [], []
    lock = threading.Lock()

    def client(c):
        try:
            for k in range(a.requests):
                res = one_request(port, prompt_text(base + c * a.requests + k, words), a.max_tokens)
                with lock:
                    results.append(res)
        except Exception as e:  # noqa: BLE001 - reported below
            with lock:
                errors.append(str(e))

    threads = [threading.Thread(target=client, args=(c,)) for c in range(n_clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise RuntimeError(errors[0])
    total = sum(r[3] for r in results)
    ttft = [r[1] - r[0] for r in results]
    per_client = [(r[3] - 1) / (r[2] - r[1]) for r in results if r[2] > r[1]]
    return {"clients": n_clients, "requests": len(results), "tokens": total, "wall_s": wall,
            "aggregate_tok_s": total / wall, "ttft_median_ms": 1e3 * statistics.median(ttft),
            "ttft_max_ms": 1e3 * max(ttft),
            "per_client_tok_s": statistics.median(per_client) if per_client else float("nan")}


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def main(argv=None):
    a = parse_args(argv)
    exe = os.path.join(a.build_dir, "bin", "llama-server")
    if not os.access(exe, os.X_OK):
        print(f"bench-server: {exe} not found: build first (python3 setup_env.py --build-only)", file=sys.stderr)
        return 1
    models = list(a.model)
    for m in models:
        if not os.path.isfile(m):
            print(f"bench-server: model file {m} not found", file=sys.stderr)
            return 1
    try:
        models += [dummy(s, a.models_dir, a.build_dir) for s in a.model_size]
    except subprocess.CalledProcessError as e:
        print(f"bench-server: could not write a dummy model: {e}", file=sys.stderr)
        return 1
    words = max(1, int(a.prompt_tokens / 1.3))  # the dummies' vocabulary: about 1.3 tokens per word
    out = {"cpu": cpu_name(), "threads": a.threads, "requests_per_client": a.requests, "max_tokens": a.max_tokens,
           "prompt_words": words, "head_type": a.head_type, "models": []}
    print(f"# {out['cpu']}, {os.cpu_count()} CPUs; server threads {a.threads}, head {a.head_type}; "
          f"{a.requests} requests per client, "
          f"{a.max_tokens} generated tokens each, prompts of {words} words; streamed, temperature 0")
    for model in models:
        try:
            srv = Server(exe, model, max(a.clients), a.ctx_per_slot, a.threads, a.head_type)
        except RuntimeError as e:
            print(f"bench-server: {e}", file=sys.stderr)
            return 1
        rows = []
        try:
            one_request(srv.port, prompt_text(10_000, words), min(8, a.max_tokens))  # warm-up
            by_count = {n: [] for n in a.clients}
            for rnd in range(a.rounds):
                for i, n in enumerate(a.clients):
                    by_count[n].append(run_clients(srv.port, n, a, words, 1000 * (i + 1) + 100_000 * rnd))
            for n in a.clients:
                runs = sorted(by_count[n], key=lambda r: r["aggregate_tok_s"])
                row = dict(runs[(len(runs) - 1) // 2])  # the median round (the lower one of an even count)
                row["rounds_tok_s"] = [r["aggregate_tok_s"] for r in by_count[n]]
                rows.append(row)
        except (RuntimeError, OSError) as e:
            print(f"bench-server: {os.path.basename(model)}: {e}", file=sys.stderr)
            return 1
        finally:
            srv.stop()
        base = rows[0]["aggregate_tok_s"]
        print(f"\n{os.path.basename(model)}")
        print("| clients | requests | aggregate tok/s | vs 1 client | TTFT median ms | TTFT max ms | tok/s per client"
              + (" | aggregate tok/s of the rounds |" if a.rounds > 1 else " |"))
        print("|--:|--:|--:|--:|--:|--:|--:|" + ("--:|" if a.rounds > 1 else ""))
        for r in rows:
            r["vs_first"] = r["aggregate_tok_s"] / base
            rounds = (" " + ", ".join(f"{x:.1f}" for x in r["rounds_tok_s"]) + " |") if a.rounds > 1 else ""
            print(f"| {r['clients']} | {r['requests']} | {r['aggregate_tok_s']:.1f} | {r['vs_first']:.2f}x | "
                  f"{r['ttft_median_ms']:.0f} | {r['ttft_max_ms']:.0f} | {r['per_client_tok_s']:.1f} |{rounds}")
        out["models"].append({"model": os.path.basename(model), "rows": rows})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
