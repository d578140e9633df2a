#!/usr/bin/env python3
"""utils/soak-server.py — a soak of llama-server (issue 26): hours of mixed concurrent traffic against one
server process, checking every answer, that resident memory and open file descriptors stay flat after a
warm-up, that no request gets a 5xx, and that the server stops cleanly.

Usage:
    python3 utils/soak-server.py --model-size 125M --duration 7200 --clients 16 --csv soak.csv   # the 2-hour run
    python3 utils/soak-server.py --short                   # the CI preset: 45 s, 8 clients, the tiny dummy
    python3 utils/soak-server.py -m MODEL.gguf --duration 600 -- --chat-template bitnet   # args after -- go to
                                                                                           # llama-server

The script starts llama-server itself (--server, default build/bin/llama-server; -m MODEL, or a dummy model
made with bitnet-dummy for --model-size tiny|125M, the shapes of tests/server/server_util.py) on 127.0.0.1 and
a port the system picks ("--port 0"; the port is read from its "listening on" line).

Phase 1, references: each of 8 fixed prompts (4 completions, 4 chats; max_tokens 8-32, temperature 0 =
greedy) is sent alone, not streamed, and its text, finish_reason and usage are recorded; each is sent alone
streamed too and must give the same text. POST /tokenize of each prompt's text is recorded.

Phase 2, load (--duration seconds, --clients threads, seeded by --seed): each client loops over random actions
  completion, chat            a reference prompt, not streamed: text, finish_reason and usage must equal the
                              reference exactly
  completion-stream,          the same streamed (server-sent events; the "data:" events' text joined): text
  chat-stream                 and finish_reason equal to the reference, the stream ends with [DONE]; with
                              stream_options.include_usage half of the time, then the usage too
  tokenize                    POST /tokenize of a reference text: the same ids
  info                        GET /health or /v1/models: 200 and JSON
  cancel                      a streamed request of 64 tokens; after 1-3 events the socket is closed (half of
                              the time with SO_LINGER 0, i.e. a reset)
  malformed                   one of: bad JSON, an empty body, wrong types, invalid UTF-8, nesting 5000 deep, a
                              token id outside the vocabulary, an out-of-range value, an unknown path, a wrong
                              method (each must get its 400/404/405 with an OpenAI error object) or a
                              Content-Length of 99,999,999,999 bytes (413)
Clients keep their connection alive between requests (a connection the server closed while idle is reopened
and the request sent again once) and open a new one every ~10 requests. Client i connects from 127.0.1.(1 + i
mod --client-addrs), so that a per-address connection limit of the server is not reached by the soak's own
clients. A 429 is counted and the request sent again after 0.25 s (at most 100 times).
Beside them, the slowloris thread keeps --slowloris K connections from 127.0.0.2, each having sent only
"GET /health HTTP/1.1\\r\\nHost: x\\r\\n", and records how long the server takes to close each (a closed one is
replaced). With --expect-request-timeout S a connection still open S+5 s after it was made is a failure;
without it the times are only reported.

Every --sample-interval seconds (default 10; and exactly at the end of the warm-up) the server's VmRSS, open
file descriptors (/proc/PID/fd) and threads are sampled; with --scrape-metrics the server is started with
--metrics and GET /metrics is scraped too (a scrape that is not 200 is a failure; --metrics-out keeps the
last one). --csv writes the samples.

Checked (any failure makes the run FAIL):
  - every legitimate request gets 2xx (429 retried), never a 5xx or a connection error or a timeout (every
    socket operation has --timeout seconds, default 120), and its answer equals the reference
  - every malformed request gets its expected status and an error object; every cancellation got its 200
  - RSS bound: max RSS after the warm-up - RSS at the end of the warm-up <= --rss-bound-mb (default 64 MiB)
  - fd bound: max fds after the warm-up <= fds at the end of the warm-up + clients + slowloris K + 16
    (every connection is one descriptor of the server; 16 for the sampler, cancelled connections not yet
    closed and slack)
  - after the load, with every connection of the soak closed: /health shows no busy slot and no waiting
    request, and fds and threads come back to at most their count before the load + 2 (within 30 s)
  - with --expect-request-timeout S: no half-open connection lives longer than S + 5 s
  - SIGTERM at the end: the server exits with status 0 within 60 s
Warm-up: --warmup seconds (default 10% of --duration, at least 5).

Output: one progress line per sample on stderr; at the end a Markdown table per request kind (requests,
statuses, failures, p50/p99 latency of the whole request and time to first token in ms; TTFT is the time to
the first event with text, for streams only — for the others it is the latency) and one of resources (RSS,
fds, threads at warm-up end, min, max, end; RSS and fd curves), then the last line
"soak: PASS ..." or "soak: FAIL ...". --json writes the same numbers as JSON.
Exit status: 0 PASS, 1 FAIL (or the server does not start), 2 bad arguments.

The run of issue 26 (2 hours on the 125M dummy, 16 clients), for docs/RELIABILITY.md:
    python3 utils/soak-server.py --model-size 125M --duration 7200 --clients 16 --csv soak-125M.csv \\
        --json soak-125M.json
"""
import argparse
import collections
import csv
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The reference prompts: (name, endpoint kind, prompt or messages, max_tokens, ignore_eos).
PROMPTS = [
    ("c-river", "completion", "The river flows", 16, True),
    ("c-village", "completion", "Once upon a time, in a small village by the sea,", 32, False),
    ("c-count", "completion", "1, 2, 3, 4,", 8, True),
    ("c-qa", "completion", "Q: What is the capital of France?\nA:", 24, False),
    ("chat-hello", "chat", [{"role": "user", "content": "Hello there"}], 16, True),
    ("chat-colors", "chat", [{"role": "system", "content": "You are a terse assistant."},
                             {"role": "user", "content": "Name three colors."}], 24, False),
    ("chat-turns", "chat", [{"role": "user", "content": "Tell me a story about a robot"},
                            {"role": "assistant", "content": "Once there was a robot"},
                            {"role": "user", "content": "Go on"}], 32, True),
    ("chat-french", "chat", [{"role": "user", "content": "Translate 'good morning' to French."}], 8, False),
]

# The malformed requests: (name, method, path, body bytes or None, expected status). "oversize" is sent by hand.
MALFORMED = [
    ("bad JSON", "POST", "/v1/completions", b'{"prompt": "x",', 400),
    ("empty body", "POST", "/v1/chat/completions", b"", 400),
    ("max_tokens a string", "POST", "/v1/completions", b'{"prompt":"x","max_tokens":"ten"}', 400),
    ("content an integer", "POST", "/v1/chat/completions", b'{"messages":[{"role":"user","content":1}]}', 400),
    ("invalid UTF-8", "POST", "/v1/completions", b'{"prompt":"\xff\xfe"}', 400),
    ("nesting 5000 deep", "POST", "/v1/completions", b'{"prompt":' + b"[" * 5000 + b"]" * 5000 + b"}", 400),
    ("token id outside the vocabulary", "POST", "/v1/completions", b'{"prompt":[1,99999999]}', 400),
    ("temperature out of range", "POST", "/v1/completions", b'{"prompt":"x","temperature":5}', 400),
    ("tokenize without text", "POST", "/tokenize", b'{"content":null}', 400),
    ("unknown path", "GET", "/v1/nothing", None, 404),
    ("wrong method", "GET", "/v1/completions", None, 405),
    ("wrong method on /health", "DELETE", "/health", None, 405),
    ("oversize Content-Length", "POST", "/v1/completions", None, 413),
]

KINDS = ["completion", "completion-stream", "chat", "chat-stream", "tokenize", "info", "cancel", "malformed",
         "slowloris"]
WEIGHTS = {"completion": 18, "completion-stream": 18, "chat": 14, "chat-stream": 14, "tokenize": 8, "info": 4,
           "cancel": 10, "malformed": 14}
SLOWLORIS_REQUEST = b"GET /health HTTP/1.1\r\nHost: x\r\n"


def parse_args(argv):
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    else:
        extra = []
    p = argparse.ArgumentParser(
        prog="soak-server.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__,
        epilog="Bounds: RSS max after warm-up - RSS at warm-up end <= --rss-bound-mb; fds max after warm-up <= fds "
               "at warm-up end + clients + slowloris K + 16; after the load fds and threads back to their count "
               "before it + 2; with --expect-request-timeout S no half-open connection open past S + 5 s; SIGTERM "
               "exits 0 within 60 s.\nExit status: 0 PASS, 1 FAIL, 2 bad arguments. See the docstring at the top "
               "of the file for the whole list.")
    p.add_argument("--server", default=os.path.join(ROOT, "build", "bin", "llama-server"),
                   help="the llama-server binary (default build/bin/llama-server)")
    p.add_argument("--dummy", help="the bitnet-dummy binary for --model-size (default: beside --server)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("-m", "--model", help="the GGUF model to serve")
    g.add_argument("--model-size", choices=("tiny", "125M"),
                   help="make a dummy I2_S model of this shape with bitnet-dummy (125M: the issue's target)")
    p.add_argument("--short", action="store_true",
                   help="the CI preset: --duration 45 --clients 8 --model-size tiny --sample-interval 5 "
                        "(flags given explicitly win)")
    p.add_argument("--duration", type=float, help="seconds of load (default 600)")
    p.add_argument("--clients", type=int, help="client threads (default 16)")
    p.add_argument("--warmup", type=float, help="seconds of load before the flatness bounds apply "
                                                "(default 10%% of --duration, at least 5)")
    p.add_argument("--seed", type=int, default=1, help="seed of the clients' random choices (default 1)")
    p.add_argument("--slowloris", type=int, default=8, metavar="K",
                   help="half-open connections held at any time (default 8; 0 = none)")
    p.add_argument("--expect-request-timeout", type=float, metavar="S",
                   help="the server closes a request not complete within S seconds: a half-open connection still "
                        "open S + 5 s after it was made fails the run (default: only report the times)")
    p.add_argument("--client-addrs", type=int, default=4,
                   help="client i connects from 127.0.1.(1 + i mod N) (default 4; 0 = no bind, from 127.0.0.1)")
    p.add_argument("--sample-interval", type=float, help="seconds between samples (default 10)")
    p.add_argument("--rss-bound-mb", type=float, default=64.0,
                   help="allowed RSS growth after the warm-up in MiB (default 64)")
    p.add_argument("--timeout", type=float, default=120.0, help="timeout of every socket operation in s (default 120)")
    p.add_argument("--scrape-metrics", action="store_true",
                   help="start the server with --metrics and scrape GET /metrics at every sample")
    p.add_argument("--metrics-out", metavar="PATH", help="write the last /metrics scrape here")
    p.add_argument("--csv", metavar="PATH", help="write the samples (time, RSS, fds, threads, counts) as CSV")
    p.add_argument("--json", metavar="PATH", help="write the summary as JSON")
    p.add_argument("--server-log", metavar="PATH", help="write the server's stderr here")
    p.add_argument("--slots", type=int, default=8, help="llama-server -np (default 8)")
    p.add_argument("--ctx-per-slot", type=int, default=256, help="positions per slot: -c is slots x this (default 256)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="llama-server -t (default: CPUs)")
    p.add_argument("--chat-template", help="llama-server --chat-template (default: bitnet for --model-size, "
                                           "the model's own for -m; without one chat is left out)")
    p.add_argument("--api-key", help="start the server with --api-key KEY and send it")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    a = p.parse_args(argv)
    a.extra = extra
    short = {"duration": 45.0, "clients": 8, "sample_interval": 5.0}
    normal = {"duration": 600.0, "clients": 16, "sample_interval": 10.0}
    for k, v in (short if a.short else normal).items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    if a.short and not a.model and not a.model_size:
        a.model_size = "tiny"
    if not a.model and not a.model_size:
        p.error("give -m MODEL or --model-size tiny|125M (or --short)")
    if a.warmup is None:
        a.warmup = max(5.0, 0.1 * a.duration)
    checks = [(a.duration > 0, "--duration must be > 0"), (a.clients >= 1, "--clients must be >= 1"),
              (0 <= a.warmup < a.duration, "--warmup must be in [0, --duration)"),
              (a.slowloris >= 0, "--slowloris must be >= 0"), (a.client_addrs >= 0, "--client-addrs must be >= 0"),
              (a.client_addrs <= 250, "--client-addrs must be <= 250"),
              (a.sample_interval > 0, "--sample-interval must be > 0"),
              (a.rss_bound_mb > 0, "--rss-bound-mb must be > 0"),
              (a.timeout > 0, "--timeout must be > 0"), (a.slots >= 1, "--slots must be >= 1"),
              (a.ctx_per_slot >= 64, "--ctx-per-slot must be >= 64"), (a.threads >= 1, "--threads must be >= 1"),
              (a.expect_request_timeout is None or a.expect_request_timeout > 0,
               "--expect-request-timeout must be > 0")]
    for ok, msg in checks:
        if not ok:
            p.error(msg)
    if not os.path.isfile(a.server) or not os.access(a.server, os.X_OK):
        p.error(f"--server {a.server}: not an executable file (build it: cmake --build build --target llama-server)")
    if a.model and not os.path.isfile(a.model):
        p.error(f"-m {a.model}: no such file")
    if a.model_size:
        a.dummy = a.dummy or os.path.join(os.path.dirname(os.path.abspath(a.server)), "bitnet-dummy")
        if not os.path.isfile(a.dummy) or not os.access(a.dummy, os.X_OK):
            p.error(f"--dummy {a.dummy}: not an executable file (build it: cmake --build build --target bitnet-dummy)")
        if a.chat_template is None:
            a.chat_template = "bitnet"
    return a


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def percentile(xs, q):
    """Nearest-rank percentile q (0-100) of xs; None for no values."""
    if not xs:
        return None
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(round(q / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


# ---- the server -------------------------------------------------------------------------------------------------

def make_model(dummy, path, size):
    """A dummy I2_S model with tests/server/server_util.py's shapes."""
    if size == "tiny":
        shape = ["--n-embd", "256", "--n-ff", "768", "--n-layer", "2", "--n-head", "4", "--ctx", "512",
                 "--vocab-size", "512"]
    else:
        shape = ["--n-embd", "768", "--n-ff", "3072", "--n-layer", "12", "--n-head", "12", "--ctx", "2048"]
    r = subprocess.run([dummy, "-o", path, "--seed", "1234"] + shape, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"bitnet-dummy failed ({r.returncode}): {r.stderr.strip()}")
    return path


class Server:
    """llama-server on 127.0.0.1 and a free port; its stderr is counted, the last 200 lines kept (all of them in
    --server-log)."""

    def __init__(self, args, model):
        cmd = [args.server, "-m", model, "--port", "0", "-np", str(args.slots), "-c",
               str(args.slots * args.ctx_per_slot), "-t", str(args.threads)]
        if args.chat_template:
            cmd += ["--chat-template", args.chat_template]
        if args.scrape_metrics:
            cmd += ["--metrics"]
        if args.api_key:
            cmd += ["--api-key", args.api_key]
        cmd += args.extra
        self.cmd = cmd
        self.tail = collections.deque(maxlen=200)
        self.n_lines = 0
        self.n_client_gone = 0
        self.port = None
        self.logf = open(args.server_log, "w", encoding="utf-8") if args.server_log else None
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, errors="replace")
        ready = threading.Event()

        def reader():
            for line in self.proc.stderr:
                self.tail.append(line.rstrip("\n"))
                self.n_lines += 1
                if "finish client gone" in line:
                    self.n_client_gone += 1
                if self.logf:
                    self.logf.write(line)
                m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
                if m and self.port is None:
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()

        self.reader = threading.Thread(target=reader, daemon=True)
        self.reader.start()
        if not ready.wait(300) or self.port is None:
            self.kill()
            raise RuntimeError("llama-server did not start (" + " ".join(cmd) + "):\n" + "\n".join(self.tail))

    def proc_stats(self):
        """(VmRSS KiB, open fds, threads) of the server process, or None when it is gone."""
        pid = self.proc.pid
        try:
            rss = thr = None
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss = int(line.split()[1])
                    elif line.startswith("Threads:"):
                        thr = int(line.split()[1])
            return rss, len(os.listdir(f"/proc/{pid}/fd")), thr
        except (OSError, ValueError):
            return None

    def stop(self, timeout=60):
        """SIGTERM and the exit status, or None when it did not exit within timeout s (then it is killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        self.reader.join(10)
        if self.logf:
            self.logf.close()
            self.logf = None
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self.reader.join(10)
        if self.logf:
            self.logf.close()
            self.logf = None


# ---- HTTP ---------------------------------------------------------------------------------------------------------

class Failure(Exception):
    """A check that failed: the request got something it must not."""


class Stale(Exception):
    """A reused keep-alive connection that the server had closed: nothing was answered."""


class Result:
    def __init__(self, status, headers, body=b"", events=None, latency=0.0, ttft=None, done=False):
        self.status, self.headers, self.body, self.events = status, headers, body, events
        self.latency, self.ttft, self.done = latency, ttft, done


def bind_socket(sock, addr):
    if addr:
        if hasattr(socket, "IP_BIND_ADDRESS_NO_PORT"):
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_BIND_ADDRESS_NO_PORT, 1)
        sock.bind((addr, 0))


class Conn:
    """A keep-alive HTTP/1.1 connection of one client, from source address addr (None: the system's choice)."""

    def __init__(self, port, timeout, addr, api_key):
        self.port, self.timeout, self.addr, self.api_key = port, timeout, addr, api_key
        self.c = None
        self.used = 0

    def fresh(self):
        self.close()
        self.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout,
                                            source_address=(self.addr, 0) if self.addr else None)
        self.used = 0
        return self.c

    def close(self):
        if self.c is not None:
            try:
                self.c.close()
            except OSError:
                pass
        self.c = None

    def headers(self, body):
        h = {}
        if body is not None:
            h["Content-Type"] = "application/json"
        if self.api_key:
            h["Authorization"] = "Bearer " + self.api_key
        return h

    def send(self, method, path, body):
        """Sends the request on this connection (reopened when needed) and returns the response object.
        Raises Stale when a reused connection turns out closed before any answer."""
        reused = self.c is not None and self.used > 0
        c = self.c or self.fresh()
        try:
            c.request(method, path, body=body, headers=self.headers(body))
            resp = c.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError):
            self.close()
            if reused:
                raise Stale()
            raise
        self.used += 1
        return resp

    def send_resending(self, method, path, body):
        """self.send, sent once more on a new connection when the kept-alive one was found closed (counted)."""
        try:
            return self.send(method, path, body)
        except Stale:
            STALE[0] += 1
            return self.send(method, path, body)

    def request(self, method, path, body=None):
        """A whole request: Result with the body bytes."""
        t0 = time.monotonic()
        resp = self.send_resending(method, path, body)
        data = resp.read()
        lat = time.monotonic() - t0
        if resp.will_close:
            self.close()
        return Result(resp.status, dict((k.lower(), v) for k, v in resp.getheaders()), data, latency=lat, ttft=lat)

    def stream(self, method, path, body, chat, cancel_after=None, rst=False):
        """A streamed request: Result with the parsed events. cancel_after: close the socket abruptly after that
        many data events (rst: with SO_LINGER 0, a reset)."""
        t0 = time.monotonic()
        resp = self.send_resending(method, path, body)
        hdrs = dict((k.lower(), v) for k, v in resp.getheaders())
        if resp.status != 200:
            data = resp.read()
            if resp.will_close:
                self.close()
            return Result(resp.status, hdrs, data, latency=time.monotonic() - t0)
        events, buf, ttft, done = [], b"", None, False
        while True:
            if cancel_after is not None and len(events) >= cancel_after:
                self.abort(resp, rst)
                return Result(200, hdrs, events=events, latency=time.monotonic() - t0, ttft=ttft, done=False)
            chunk = resp.read1(65536)
            if not chunk:
                break
            buf += chunk
            while b"\n\n" in buf:
                block, buf = buf.split(b"\n\n", 1)
                text = block.decode("utf-8")
                for line in text.split("\n"):
                    if not line.strip() or line.startswith(":"):  # an SSE comment (": keep-alive")
                        continue
                    if not line.startswith("data: "):
                        raise Failure(f"a stream line that is not 'data: ...': {line[:120]!r}")
                    payload = line[6:]
                    if payload == "[DONE]":
                        if done:
                            raise Failure("two [DONE] events")
                        done = True
                        continue
                    if done:
                        raise Failure("an event after [DONE]")
                    ev = json.loads(payload)
                    if "error" in ev:
                        raise Failure(f"an error event in the stream: {payload[:300]}")
                    events.append(ev)
                    if ttft is None and event_text(ev, chat):
                        ttft = time.monotonic() - t0
        lat = time.monotonic() - t0
        if buf.strip():
            raise Failure(f"the stream ended inside an event: {buf[:120]!r}")
        if resp.will_close:
            self.close()
        return Result(200, hdrs, events=events, latency=lat, ttft=ttft if ttft is not None else lat, done=done)

    def abort(self, resp, rst):
        sock = self.c.sock if self.c is not None else None
        try:
            if sock is not None:
                if rst:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                else:
                    sock.shutdown(socket.SHUT_RDWR)
            resp.close()
        except OSError:
            pass
        self.close()


STALE = [0]  # reused connections found closed by the server (the request was sent again on a new one)


def event_text(ev, chat):
    ch = ev.get("choices") or []
    if not ch:
        return ""
    if chat:
        return (ch[0].get("delta") or {}).get("content") or ""
    return ch[0].get("text") or ""


def request_body(p, stream, include_usage=False, max_tokens=None):
    """The JSON body of reference prompt p, greedy; max_tokens (with ignore_eos) replaces the prompt's own."""
    name, kind, prompt, mt, ignore_eos = p
    if max_tokens:
        mt, ignore_eos = max_tokens, True
    b = {"max_tokens": mt, "temperature": 0}
    if kind == "chat":
        b["messages"] = prompt
    else:
        b["prompt"] = prompt
    if ignore_eos:
        b["ignore_eos"] = True
    if stream:
        b["stream"] = True
        if include_usage:
            b["stream_options"] = {"include_usage": True}
    return json.dumps(b).encode()


def path_of(kind):
    return "/v1/chat/completions" if kind == "chat" else "/v1/completions"


def whole_answer(r, chat):
    """(text, finish_reason, usage) of a non-streamed answer."""
    o = json.loads(r.body)
    ch = o["choices"][0]
    text = ch["message"]["content"] if chat else ch["text"]
    return text, ch["finish_reason"], o.get("usage")


def stream_answer(r, chat):
    """(text, finish_reason, usage or None) of a stream's events."""
    text, finish, usage = [], None, None
    for ev in r.events:
        if ev.get("usage") is not None and not ev.get("choices"):
            usage = ev["usage"]
            continue
        text.append(event_text(ev, chat))
        fr = (ev.get("choices") or [{}])[0].get("finish_reason")
        if fr is not None:
            finish = fr
    return "".join(text), finish, usage


def tokenize_text(p):
    return p[2] if p[1] == "completion" else p[2][-1]["content"]


# ---- the soak -----------------------------------------------------------------------------------------------------

class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.status = {k: collections.Counter() for k in KINDS}
        self.ok = collections.Counter()
        self.fail = collections.Counter()
        self.latency = {k: [] for k in KINDS}
        self.ttft = {k: [] for k in KINDS}
        self.failures = []      # the first messages
        self.n_failures = 0
        self.mismatches = []    # the first diffs
        self.n_mismatches = 0
        self.n_5xx = 0
        self.n_conn_errors = 0
        self.n_429 = 0
        self.malformed_seen = collections.Counter()
        self.cancel_early_end = 0

    def record(self, kind, status, latency=None, ttft=None):
        with self.lock:
            self.status[kind][str(status)] += 1
            if isinstance(status, int) and status == 429:
                self.n_429 += 1
            if latency is not None:
                self.latency[kind].append(latency)
            if ttft is not None:
                self.ttft[kind].append(ttft)

    def success(self, kind):
        with self.lock:
            self.ok[kind] += 1

    def failure(self, kind, msg, status=None, mismatch=None):
        with self.lock:
            self.fail[kind] += 1
            self.n_failures += 1
            if isinstance(status, int) and status >= 500:
                self.n_5xx += 1
            if status == "conn":
                self.n_conn_errors += 1
            if mismatch is not None:
                self.n_mismatches += 1
                if len(self.mismatches) < 5:
                    self.mismatches.append(mismatch)
            if len(self.failures) < 20:
                self.failures.append(f"{kind}: {msg}")
        if not QUIET[0]:
            log(f"soak: failure: {kind}: {msg}")

    def total(self):
        with self.lock:
            return sum(sum(c.values()) for k, c in self.status.items() if k != "slowloris")


QUIET = [False]


class Soak:
    def __init__(self, args, server):
        self.a = args
        self.s = server
        self.stats = Stats()
        self.stop = threading.Event()
        self.refs = {}      # name -> (text, finish, usage)
        self.tok_refs = {}  # name -> ids
        self.prompts = list(PROMPTS)
        self.samples = []
        self.last_metrics = None
        self.metrics_scrapes = 0
        self.slow = {"opened": 0, "closed": [], "answers": collections.Counter(), "overdue": 0, "open_ages": [],
                     "bind": "127.0.0.2"}
        self.slow_open = 0
        self.addr_ok = args.client_addrs > 0
        self.notes = []
        self.t_load = None
        self.warm = None

    # -- phase 1 --
    def references(self):
        c = Conn(self.s.port, self.a.timeout, None, self.a.api_key)
        try:
            chat_ok = True
            for p in PROMPTS:
                name, kind = p[0], p[1]
                if kind == "chat" and not chat_ok:
                    continue
                r = c.request("POST", path_of(kind), request_body(p, False))
                if r.status == 400 and kind == "chat" and b"chat-template" in r.body:
                    chat_ok = False
                    self.notes.append("chat left out: the server has no chat template (" +
                                      json.loads(r.body)["error"]["message"][:160] + ")")
                    continue
                if r.status != 200:
                    raise Failure(f"reference {name}: status {r.status}: {r.body[:300]!r}")
                self.refs[name] = whole_answer(r, kind == "chat")
                rs = c.stream("POST", path_of(kind), request_body(p, True, include_usage=True), kind == "chat")
                if rs.status != 200 or not rs.done:
                    raise Failure(f"reference {name} streamed: status {rs.status}, [DONE] {rs.done}")
                got = stream_answer(rs, kind == "chat")
                if got != self.refs[name]:
                    raise Failure(f"reference {name}: the stream alone {got!r} differs from the answer alone "
                                  f"{self.refs[name]!r}")
                r = c.request("POST", "/tokenize", json.dumps({"content": tokenize_text(p)}).encode())
                if r.status != 200:
                    raise Failure(f"tokenize {name}: status {r.status}: {r.body[:300]!r}")
                self.tok_refs[name] = json.loads(r.body)["tokens"]
            if not chat_ok:
                self.prompts = [p for p in PROMPTS if p[1] != "chat"]
        finally:
            c.close()

    # -- phase 2: clients --
    def client(self, i):
        rng = random.Random(self.a.seed * 1000003 + i)
        addr = f"127.0.1.{1 + i % self.a.client_addrs}" if self.addr_ok else None
        conn = Conn(self.s.port, self.a.timeout, addr, self.a.api_key)
        kinds = [k for k in WEIGHTS if self.refs.get("chat-hello") is not None or not k.startswith("chat")]
        weights = [WEIGHTS[k] for k in kinds]
        while not self.stop.is_set():
            kind = rng.choices(kinds, weights)[0]
            if rng.random() < 0.1:
                conn.close()  # a new connection now and then
            try:
                self.action(kind, conn, rng, addr)
            except Failure as e:
                self.stats.failure(kind, str(e), status=getattr(e, "status", None))
                conn.close()
            except (OSError, http.client.HTTPException, Stale) as e:
                self.stats.record(kind, "conn")
                self.stats.failure(kind, f"connection error: {type(e).__name__}: {e}", status="conn")
                conn.close()
            except (ValueError, KeyError, IndexError, TypeError) as e:  # JSON that is not the expected answer
                self.stats.failure(kind, f"unexpected answer: {type(e).__name__}: {e}")
                conn.close()
        conn.close()

    def retrying(self, kind, fn):
        """fn() -> Result, sent again after 0.25 s while it is a 429 (at most 100 times)."""
        for _ in range(100):
            r = fn()
            if r.status != 429:
                return r
            self.stats.record(kind, 429)
            if self.stop.wait(0.25):
                return None
        raise Failure("429 a hundred times in a row")

    def action(self, kind, conn, rng, addr):
        st = self.stats
        if kind in ("completion", "chat", "completion-stream", "chat-stream"):
            base = kind.split("-")[0]
            p = rng.choice([q for q in self.prompts if q[1] == base])
            chat = base == "chat"
            if kind.endswith("stream"):
                usage = rng.random() < 0.5
                r = self.retrying(kind, lambda: conn.stream("POST", path_of(base), request_body(p, True, usage), chat))
                if r is None:
                    return
                st.record(kind, r.status, r.latency if r.status == 200 else None, r.ttft if r.status == 200 else None)
                self.check_status(kind, r, 200)
                if not r.done:
                    raise Failure(f"{p[0]}: the stream ended without [DONE]")
                got = stream_answer(r, chat)
                want = self.refs[p[0]]
                if not usage:
                    got, want = got[:2], want[:2]
            else:
                r = self.retrying(kind, lambda: conn.request("POST", path_of(base), request_body(p, False)))
                if r is None:
                    return
                st.record(kind, r.status, r.latency if r.status == 200 else None)
                self.check_status(kind, r, 200)
                got, want = whole_answer(r, chat), self.refs[p[0]]
            if got != want:
                st.failure(kind, f"{p[0]}: the answer differs from the reference", mismatch=(kind, p[0], want, got))
                return
            st.success(kind)
        elif kind == "tokenize":
            p = rng.choice(self.prompts)
            r = self.retrying(kind, lambda: conn.request("POST", "/tokenize",
                                                         json.dumps({"content": tokenize_text(p)}).encode()))
            if r is None:
                return
            st.record(kind, r.status, r.latency)
            self.check_status(kind, r, 200)
            got = json.loads(r.body)["tokens"]
            if got != self.tok_refs[p[0]]:
                st.failure(kind, f"{p[0]}: tokens differ", mismatch=(kind, p[0], self.tok_refs[p[0]], got))
                return
            st.success(kind)
        elif kind == "info":
            path = rng.choice(["/health", "/v1/models"])
            r = self.retrying(kind, lambda: conn.request("GET", path))
            if r is None:
                return
            st.record(kind, r.status, r.latency)
            self.check_status(kind, r, 200)
            o = json.loads(r.body)
            if path == "/health" and o.get("status") != "ok":
                raise Failure(f"/health: {r.body[:200]!r}")
            st.success(kind)
        elif kind == "cancel":
            p = rng.choice(self.prompts)
            chat = p[1] == "chat"
            n = rng.randint(1, 3)
            rst = rng.random() < 0.5
            c = Conn(self.s.port, self.a.timeout, addr, self.a.api_key)
            try:
                r = self.retrying(kind, lambda: c.stream("POST", path_of(p[1]), request_body(p, True, max_tokens=64),
                                                         chat, cancel_after=n + (1 if chat else 0), rst=rst))
            finally:
                c.close()
            if r is None:
                return
            st.record(kind, r.status, r.latency)
            self.check_status(kind, r, 200)
            if r.done:
                with st.lock:
                    st.cancel_early_end += 1  # it ended before the events were read: not a cancellation
            st.success(kind)
        elif kind == "malformed":
            name, method, path, body, want = rng.choice(MALFORMED)
            if name == "oversize Content-Length":
                status, data, lat = self.oversize(addr)
                r = Result(status, {}, data, latency=lat)
            else:
                r = conn.request(method, path, body)
            st.record(kind, r.status, r.latency)
            with st.lock:
                st.malformed_seen[name] += 1
            self.check_status(kind, r, want, what=name)
            err = json.loads(r.body).get("error") or {}
            if not err.get("message") or not err.get("type"):
                raise Failure(f"{name}: {r.status} without an OpenAI error object: {r.body[:200]!r}")
            st.success(kind)

    def check_status(self, kind, r, want, what=""):
        """Raises Failure (with .status) when r's status is not want."""
        if r.status != want:
            e = Failure(f"{what + ': ' if what else ''}status {r.status} (expected {want}): {r.body[:300]!r}")
            e.status = r.status
            raise e

    def oversize(self, addr):
        """POST with Content-Length 99,999,999,999 and no body: (status, body, latency)."""
        t0 = time.monotonic()
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(self.a.timeout)
        try:
            bind_socket(s, addr)
            s.connect(("127.0.0.1", self.s.port))
            key = f"Authorization: Bearer {self.a.api_key}\r\n" if self.a.api_key else ""
            s.sendall(("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + key +
                       "Content-Length: 99999999999\r\n\r\n").encode())
            resp = http.client.HTTPResponse(s, method="POST")
            resp.begin()
            data = resp.read()
            resp.close()
            return resp.status, data, time.monotonic() - t0
        finally:
            s.close()

    # -- phase 2: slowloris --
    def slowloris(self):
        K = self.a.slowloris
        limit = self.a.expect_request_timeout
        conns = {}  # socket -> (opened at, overdue reported)

        def open_one():
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(self.a.timeout)
            try:
                if self.slow["bind"]:
                    try:
                        bind_socket(s, self.slow["bind"])
                    except OSError as e:
                        self.notes.append(f"slowloris: cannot bind 127.0.0.2 ({e}); connecting from 127.0.0.1")
                        self.slow["bind"] = None
                        s.close()
                        return open_one()
                s.connect(("127.0.0.1", self.s.port))
                s.sendall(SLOWLORIS_REQUEST)
            except OSError as e:
                s.close()
                self.stats.record("slowloris", "conn")
                self.stats.failure("slowloris", f"cannot open a connection: {e}", status="conn")
                return
            s.setblocking(False)
            conns[s] = [time.monotonic(), False]
            self.slow["opened"] += 1
            self.stats.record("slowloris", "open")

        while not self.stop.is_set():
            while len(conns) < K and not self.stop.is_set():
                n = len(conns)
                open_one()
                if len(conns) == n:  # it failed: not again at once
                    self.stop.wait(1.0)
            now = time.monotonic()
            for s in list(conns):
                t, overdue = conns[s]
                try:
                    data = s.recv(4096)
                    closed = True
                except (BlockingIOError, InterruptedError):
                    data, closed = b"", False
                except OSError:
                    data, closed = b"", True
                if closed:
                    first = data.split(b"\r\n", 1)[0].decode("latin-1") if data else "closed without an answer"
                    self.slow["answers"][first[:60]] += 1
                    self.slow["closed"].append(now - t)
                    self.stats.record("slowloris", "closed", latency=now - t)
                    self.stats.success("slowloris")
                    s.close()
                    del conns[s]
                    if limit is not None and now - t > limit + 5:
                        self.stats.failure("slowloris", f"closed after {now - t:.1f} s, more than {limit} + 5 s")
                elif limit is not None and now - t > limit + 5 and not overdue:
                    conns[s][1] = True
                    self.slow["overdue"] += 1
                    self.stats.failure("slowloris", f"a half-open connection still open after {now - t:.1f} s "
                                                    f"(--expect-request-timeout {limit})")
            self.slow_open = len(conns)
            self.stop.wait(0.25)
        now = time.monotonic()
        self.slow["open_ages"] = sorted(now - t for t, _ in conns.values())
        for s in conns:
            s.close()
        self.slow_open = 0

    # -- sampling --
    def sample(self, phase):
        t = time.monotonic() - self.t_load if self.t_load is not None else 0.0
        ps = self.s.proc_stats()
        row = {"t_s": round(t, 1), "phase": phase, "rss_kib": ps[0] if ps else None, "fds": ps[1] if ps else None,
               "threads": ps[2] if ps else None, "requests": self.stats.total(), "failures": self.stats.n_failures,
               "slowloris_open": self.slow_open, "metrics": ""}
        if self.a.scrape_metrics:
            row["metrics"] = self.scrape()
        self.samples.append(row)
        if not self.a.quiet and phase != "before":
            rss = f"{row['rss_kib'] / 1024:.1f} MiB" if row["rss_kib"] else "?"
            log(f"soak: [{t:7.0f} s] {phase:7s} requests {row['requests']} failures {row['failures']} RSS {rss} "
                f"fds {row['fds']} threads {row['threads']} slowloris open {row['slowloris_open']}")
        return row

    def scrape(self):
        c = Conn(self.s.port, self.a.timeout, None, self.a.api_key)
        try:
            r = c.request("GET", "/metrics")
        except (OSError, http.client.HTTPException, Stale) as e:
            self.stats.failure("info", f"GET /metrics: {type(e).__name__}: {e}", status="conn")
            return "error"
        finally:
            c.close()
        if r.status != 200:
            self.stats.failure("info", f"GET /metrics: status {r.status}: {r.body[:200]!r}", status=r.status)
            return str(r.status)
        text = r.body.decode("utf-8", "replace")
        bad = [ln for ln in text.splitlines() if ln and not ln.startswith("#") and
               not re.match(r"^[a-zA-Z_:][a-zA-Z0-9_:]*(\{.*\})?\s+\S+(\s+\d+)?$", ln)]
        if bad:
            self.stats.failure("info", f"GET /metrics: a line that is not Prometheus text: {bad[0][:120]!r}")
        self.last_metrics = text
        self.metrics_scrapes += 1
        return "ok"

    def sampler(self):
        warm_at = self.t_load + self.a.warmup
        nxt = self.t_load + self.a.sample_interval
        while not self.stop.is_set():
            now = time.monotonic()
            due = min(nxt, warm_at) if self.warm is None else nxt
            if self.stop.wait(max(0.0, due - now)):
                break
            if self.warm is None and time.monotonic() >= warm_at:
                self.warm = self.sample("warm")
                if nxt <= warm_at:
                    nxt += self.a.sample_interval
                continue
            self.sample("warmup" if self.warm is None else "load")
            nxt += self.a.sample_interval

    def idle_stats(self, deadline_s, want=None):
        """The server's (fds, threads) with no connection of the soak open: polled until /health shows nothing
        busy and, with want=(fds, threads), until both are at most that (or deadline_s passes)."""
        t_end = time.monotonic() + deadline_s
        health = None
        while True:
            c = Conn(self.s.port, self.a.timeout, None, self.a.api_key)
            try:
                r = c.request("GET", "/health")
                health = json.loads(r.body) if r.status == 200 else None
            except (OSError, http.client.HTTPException, Stale, ValueError):
                health = None
            finally:
                c.close()
            time.sleep(0.3)  # the server closes its end of the /health connection
            ps = self.s.proc_stats()
            busy = health is None or health.get("slots_processing") or health.get("requests_waiting")
            fine = ps is not None and not busy and (want is None or (ps[1] <= want[0] and ps[2] <= want[1]))
            if fine or time.monotonic() >= t_end:
                return ps, health
            time.sleep(0.5)

    def run(self):
        """Phase 2 (references() must have run): the load, the samples, the idle check after it. Returns whether
        it was interrupted."""
        a = self.a
        before, _ = self.idle_stats(10)
        # the quietest of a few readings: connections of phase 1 may still be closing
        for _ in range(3):
            ps, _ = self.idle_stats(2)
            if ps and before and ps[1] < before[1]:
                before = ps
        self.before = before
        self.t_load = time.monotonic()
        self.sample("before")
        threads = [threading.Thread(target=self.client, args=(i,), daemon=True) for i in range(a.clients)]
        if a.slowloris:
            threads.append(threading.Thread(target=self.slowloris, daemon=True))
        sampler = threading.Thread(target=self.sampler, daemon=True)
        for t in threads:
            t.start()
        sampler.start()
        interrupted = False
        try:
            self.stop.wait(a.duration)
        except KeyboardInterrupt:
            interrupted = True
            self.notes.append("interrupted (Ctrl-C) before the end")
        self.stop.set()
        self.t_end_load = time.monotonic() - self.t_load
        for t in threads:
            t.join(a.timeout + 30)
            if t.is_alive():
                self.stats.failure("info", "a client thread did not finish within --timeout + 30 s after the load")
        sampler.join(a.timeout + 30)
        self.end = self.sample("end")
        want = (before[1] + 2, before[2] + 2) if before else None
        after, health = self.idle_stats(30, want)
        self.after = after
        self.after_health = health
        self.samples.append({"t_s": round(time.monotonic() - self.t_load, 1), "phase": "after",
                             "rss_kib": after[0] if after else None, "fds": after[1] if after else None,
                             "threads": after[2] if after else None, "requests": self.stats.total(),
                             "failures": self.stats.n_failures, "slowloris_open": 0, "metrics": ""})
        if a.scrape_metrics:
            self.scrape()
        return interrupted


# ---- the report ---------------------------------------------------------------------------------------------------

def fmt_ms(x):
    return "—" if x is None else f"{x * 1000:.0f}"


def summarize(args, soak, rc_stop, interrupted, model_desc, t_total):
    st = soak.stats
    problems = []
    rows = []
    out = {"model": model_desc, "duration_s": args.duration, "clients": args.clients, "slowloris": args.slowloris,
           "seed": args.seed, "kinds": {}, "notes": soak.notes}
    for k in KINDS:
        n = sum(st.status[k].values())
        lat, ttft = st.latency[k], st.ttft[k]
        stream = k.endswith("stream")
        statuses = ", ".join(f"{s}: {c}" for s, c in sorted(st.status[k].items()))
        d = {"requests": n, "statuses": dict(st.status[k]), "ok": st.ok[k], "failures": st.fail[k],
             "latency_p50_ms": None if not lat else percentile(lat, 50) * 1000,
             "latency_p99_ms": None if not lat else percentile(lat, 99) * 1000,
             "ttft_p50_ms": None if not (stream and ttft) else percentile(ttft, 50) * 1000,
             "ttft_p99_ms": None if not (stream and ttft) else percentile(ttft, 99) * 1000}
        out["kinds"][k] = d
        if k == "slowloris":
            rows.append(f"| slowloris (latency: until the server closed it) | {soak.slow['opened']} | "
                        f"held open: {soak.slow['opened'] - len(lat)}, closed by the server: {len(lat)} | "
                        f"{st.fail[k]} | {fmt_ms(percentile(lat, 50))} | {fmt_ms(percentile(lat, 99))} | — | — |")
        else:
            rows.append(f"| {k} | {n} | {statuses} | {st.fail[k]} | {fmt_ms(percentile(lat, 50))} | "
                        f"{fmt_ms(percentile(lat, 99))} | {fmt_ms(percentile(ttft, 50)) if stream else '—'} | "
                        f"{fmt_ms(percentile(ttft, 99)) if stream else '—'} |")
    total = sum(d["requests"] for k, d in out["kinds"].items() if k != "slowloris")

    # resources
    samples = [s for s in soak.samples if s["rss_kib"] is not None]
    warm = soak.warm
    post = [s for s in samples if s["phase"] in ("warm", "load", "end")]
    res = {}
    if warm is None or not post:
        problems.append("no sample at the end of the warm-up")
    else:
        rss_w, fd_w = warm["rss_kib"], warm["fds"]
        rss_max = max(s["rss_kib"] for s in post)
        fd_max = max(s["fds"] for s in post)
        growth_mib = (rss_max - rss_w) / 1024
        fd_bound = fd_w + args.clients + args.slowloris + 16
        res = {"rss_warm_mib": rss_w / 1024, "rss_min_mib": min(s["rss_kib"] for s in samples) / 1024,
               "rss_max_mib": max(s["rss_kib"] for s in samples) / 1024, "rss_end_mib": soak.end["rss_kib"] / 1024
               if soak.end["rss_kib"] else None, "rss_growth_after_warmup_mib": growth_mib,
               "rss_bound_mib": args.rss_bound_mb, "fds_warm": fd_w, "fds_min": min(s["fds"] for s in samples),
               "fds_max": max(s["fds"] for s in samples), "fds_max_after_warmup": fd_max, "fds_bound": fd_bound,
               "threads_min": min(s["threads"] for s in samples), "threads_max": max(s["threads"] for s in samples)}
        # the least-squares slope of RSS after the warm-up, MiB per hour (over 10 minutes at least)
        if len(post) >= 3 and post[-1]["t_s"] - post[0]["t_s"] >= 600:
            xs = [s["t_s"] for s in post]
            ys = [s["rss_kib"] / 1024 for s in post]
            mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
            den = sum((x - mx) ** 2 for x in xs)
            res["rss_slope_mib_per_h"] = (sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den * 3600) if den else 0.0
        if growth_mib > args.rss_bound_mb:
            problems.append(f"RSS grew {growth_mib:.1f} MiB after the warm-up (bound {args.rss_bound_mb:g})")
        if fd_max > fd_bound:
            problems.append(f"fds reached {fd_max} after the warm-up (bound {fd_bound} = {fd_w} at warm-up end + "
                            f"{args.clients} clients + {args.slowloris} slowloris + 16)")
    before, after = soak.before, soak.after
    if before and after:
        res.update({"fds_before": before[1], "threads_before": before[2], "fds_after": after[1],
                    "threads_after": after[2], "rss_before_mib": before[0] / 1024, "rss_after_mib": after[0] / 1024})
        if after[1] > before[1] + 2 or after[2] > before[2] + 2:
            problems.append(f"after the load fds {after[1]} / threads {after[2]} did not come back to the "
                            f"{before[1]} / {before[2]} before it (+2) within 30 s")
    else:
        problems.append("the server's /proc entries could not be read before or after the load")
    h = soak.after_health
    if not h or h.get("slots_processing") or h.get("requests_waiting"):
        problems.append(f"after the load /health is not idle: {h}")
    out["resources"] = res

    # slowloris
    sl = soak.slow
    closed = sl["closed"]
    out["slowloris_detail"] = {"opened": sl["opened"], "closed": len(closed),
                               "closed_p50_s": percentile(closed, 50), "closed_max_s": max(closed) if closed else None,
                               "open_at_end": len(sl["open_ages"]),
                               "oldest_open_s": sl["open_ages"][-1] if sl["open_ages"] else None,
                               "answers": dict(sl["answers"]), "source": sl["bind"] or "127.0.0.1",
                               "expect_request_timeout_s": args.expect_request_timeout}

    if rc_stop is None:
        problems.append("the server did not exit within 60 s of SIGTERM")
    elif rc_stop != 0:
        problems.append(f"the server exited with status {rc_stop} after SIGTERM")
    if interrupted:
        problems.append("interrupted")
    for k in KINDS:
        if k == "slowloris" and not args.slowloris:
            continue
        if k.startswith("chat") and "chat-hello" not in soak.refs:
            continue
        if not out["kinds"][k]["requests"]:
            problems.append(f"no request of kind {k} was made")
    if st.n_failures:
        problems.insert(0, f"{st.n_failures} failed checks")

    out.update({"requests": total, "failures": st.n_failures, "mismatches": st.n_mismatches, "5xx": st.n_5xx,
                "connection_errors": st.n_conn_errors, "429": st.n_429, "stale_keepalive_resends": STALE[0],
                "cancel_ended_before_close": st.cancel_early_end, "server_client_gone_lines": soak.s.n_client_gone,
                "malformed_cases": dict(st.malformed_seen), "sigterm_exit": rc_stop, "problems": problems,
                "pass": not problems, "wall_s": t_total, "metrics_scrapes": soak.metrics_scrapes})

    # print
    p = print
    p("")
    p(f"## llama-server soak: {model_desc}, {args.duration:g} s, {args.clients} clients, slowloris {args.slowloris}, "
      f"seed {args.seed}")
    p("")
    p(f"Server: `{' '.join(soak.s.cmd)}`")
    for n in soak.notes:
        p(f"Note: {n}")
    p("")
    p("| kind | requests | statuses | failures | latency p50 ms | latency p99 ms | TTFT p50 ms | TTFT p99 ms |")
    p("|---|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        p(r)
    p(f"| **all** | {total} | 5xx: {st.n_5xx}, connection errors: {st.n_conn_errors}, 429: {st.n_429} | "
      f"{st.n_failures} (mismatches {st.n_mismatches}) | | | | |")
    p("")
    if res:
        p("| resource | before load | warm-up end | min | max | end of load | after load | bound |")
        p("|---|---:|---:|---:|---:|---:|---:|---|")
        p(f"| RSS MiB | {res.get('rss_before_mib', 0):.1f} | {res['rss_warm_mib']:.1f} | {res['rss_min_mib']:.1f} | "
          f"{res['rss_max_mib']:.1f} | {res['rss_end_mib']:.1f} | {res.get('rss_after_mib', 0):.1f} | "
          f"max after warm-up − warm-up end = {res['rss_growth_after_warmup_mib']:+.1f} ≤ {args.rss_bound_mb:g}"
          + (f" (slope {res['rss_slope_mib_per_h']:+.1f} MiB/h)" if "rss_slope_mib_per_h" in res else "") + " |")
        p(f"| open fds | {res.get('fds_before', '?')} | {res['fds_warm']} | {res['fds_min']} | {res['fds_max']} | "
          f"{soak.end['fds']} | {res.get('fds_after', '?')} | max after warm-up {res['fds_max_after_warmup']} ≤ "
          f"{res['fds_bound']}; after load ≤ before + 2 |")
        p(f"| threads | {res.get('threads_before', '?')} | {warm['threads']} | {res['threads_min']} | "
          f"{res['threads_max']} | {soak.end['threads']} | {res.get('threads_after', '?')} | "
          "after load ≤ before + 2 |")
        p("")
        curve = [s for s in soak.samples if s["rss_kib"] is not None]
        if len(curve) > 12:
            step = (len(curve) - 1) / 11
            curve = [curve[round(i * step)] for i in range(12)]
        p("RSS MiB / fds over time (s): " + ", ".join(f"{s['t_s']:.0f}: {s['rss_kib'] / 1024:.1f} / {s['fds']}"
                                                       for s in curve))
    d = out["slowloris_detail"]
    if args.slowloris:
        p(f"Slowloris (from {d['source']}): {d['opened']} half-open connections opened, {d['closed']} closed by the "
          f"server" + (f" (after p50 {d['closed_p50_s']:.1f} s, max {d['closed_max_s']:.1f} s; "
                       + ", ".join(f"{a}: {c}" for a, c in d['answers'].items()) + ")" if closed else "")
          + f", {d['open_at_end']} still open at the end" +
          (f" (oldest {d['oldest_open_s']:.0f} s)" if d["oldest_open_s"] is not None else "") +
          (f"; expected closed within {args.expect_request_timeout:g} + 5 s" if args.expect_request_timeout
           else "; no --expect-request-timeout: not checked"))
    p(f"Cancellations: {out['kinds']['cancel']['requests']} ({st.cancel_early_end} ended before the close); server "
      f"log lines 'finish client gone': {soak.s.n_client_gone}. Keep-alive connections found closed and resent: "
      f"{STALE[0]}. Malformed cases sent: {len(st.malformed_seen)} of {len(MALFORMED)}.")
    if soak.metrics_scrapes:
        p(f"/metrics scraped {soak.metrics_scrapes} times; the last has {len(soak.last_metrics.splitlines())} lines"
          + (f" (written to {args.metrics_out})" if args.metrics_out else ""))
    p(f"SIGTERM: exit status {rc_stop}. Wall time {t_total:.0f} s.")
    for m in st.mismatches:
        p(f"MISMATCH {m[0]} {m[1]}:\n  reference {m[2]!r}\n  got       {m[3]!r}")
    for f in st.failures:
        p(f"FAILURE {f}")
    if problems:
        p("server log, last lines:\n  " + "\n  ".join(list(soak.s.tail)[-15:]))
    fds_txt = f"fds max {res['fds_max_after_warmup']} (bound {res['fds_bound']})" if res else "fds ?"
    rss_txt = f"RSS {res['rss_growth_after_warmup_mib']:+.1f} MiB after warm-up (bound {args.rss_bound_mb:g})" \
        if res else "RSS ?"
    line = (f"{total} requests in {soak.t_end_load:.0f} s ({args.clients} clients), {st.n_failures} failures, "
            f"{st.n_mismatches} mismatches, {st.n_5xx} 5xx, {rss_txt}, {fds_txt}, slowloris {d['opened']} opened / "
            f"{d['closed']} closed, SIGTERM exit {rc_stop}")
    if problems:
        p(f"soak: FAIL {line}: " + "; ".join(problems))
    else:
        p(f"soak: PASS {line}")
    return out


def main(argv):
    try:
        args = parse_args(argv)
    except SystemExit as e:
        return 2 if e.code not in (0, None) else 0
    QUIET[0] = args.quiet
    tmp = None
    server = None
    t0 = time.monotonic()
    try:
        if args.model_size:
            tmp = tempfile.mkdtemp(prefix="bitnet_soak_")
            log(f"soak: making the {args.model_size} dummy model with {args.dummy}")
            model = make_model(args.dummy, os.path.join(tmp, f"dummy-{args.model_size}.gguf"), args.model_size)
            model_desc = f"{args.model_size} dummy"
        else:
            model = args.model
            model_desc = os.path.basename(model)
        server = Server(args, model)
        log(f"soak: llama-server pid {server.proc.pid} on port {server.port}: {' '.join(server.cmd)}")
        soak = Soak(args, server)
        try:
            soak.references()
        except (Failure, OSError, http.client.HTTPException, Stale, ValueError, KeyError) as e:
            log(f"soak: FAIL phase 1 (references): {e}\nserver log:\n  " + "\n  ".join(list(server.tail)[-15:]))
            server.stop()
            return 1
        log(f"soak: {len(soak.refs)} references, {len(soak.tok_refs)} tokenizations; load for {args.duration:g} s "
            f"with {args.clients} clients (warm-up {args.warmup:g} s)")
        interrupted = soak.run()
        rc = server.stop(60)
        server = None
        out = summarize(args, soak, rc, interrupted, model_desc, time.monotonic() - t0)
        if args.csv:
            with open(args.csv, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=["t_s", "phase", "rss_kib", "fds", "threads", "requests", "failures",
                                                  "slowloris_open", "metrics"])
                w.writeheader()
                w.writerows(soak.samples)
        if args.metrics_out and soak.last_metrics is not None:
            with open(args.metrics_out, "w", encoding="utf-8") as f:
                f.write(soak.last_metrics)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(out, f, indent=1)
        return 0 if out["pass"] else 1
    except RuntimeError as e:
        log(f"soak: FAIL {e}")
        return 1
    finally:
        if server is not None:
            server.kill()
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
