"""tests/server/test_http.py — llama-server at the HTTP level, driven by curl (ctest server_http):
the error cases (status, OpenAI error object, the field named), the API key, the body limit, 429 when the
queue is full, a disconnected client freeing its slot, server-sent events against the non-streamed
answer, and SIGTERM answering the request in flight before exiting 0. The server listens on 127.0.0.1
only, on a port the system picks; every wait is bounded (server_util).
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from tests.server.server_util import BIN, Server, curl, make_model

TMP = tempfile.mkdtemp(prefix="bitnet_server_http_")
TINY = make_model(os.path.join(TMP, "tiny.gguf"))


def error_of(test, status, body, want_status, param=None, code=None, words=None, typ="invalid_request_error"):
    test.assertEqual(status, want_status, body)
    err = json.loads(body)["error"]
    test.assertEqual(err["type"], typ, body)
    test.assertEqual(err["param"], param, body)
    test.assertEqual(err["code"], code, body)
    if words:
        test.assertIn(words, err["message"])
    return err


DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs",
                   "RELIABILITY.md")


def bad_request_rows():
    """(what, method, path, body bytes or None, status, param or None, words) of each row of the table between
    <!-- bad-requests:begin --> and <!-- bad-requests:end --> in docs/RELIABILITY.md."""
    with open(DOC, encoding="utf-8") as f:
        lines = f.read().split("\n")
    rows = []
    for line in lines[lines.index("<!-- bad-requests:begin -->") + 3:lines.index("<!-- bad-requests:end -->")]:
        cells = [c.strip() for c in line.strip()[1:-1].split("|")]  # no body holds a "|"
        assert len(cells) == 6, line
        what, endpoint, body, status, param, words = cells
        method, path = endpoint.strip("`").split(" ", 1)
        if body:
            body = body[1:-1]  # the backquotes
            body = '{"prompt":"' + "x" * 5000 + '"}' if body == "{big}" else body
            body = re.sub(r"\\x([0-9A-F]{2})", lambda m: chr(int(m.group(1), 16)), body).encode("latin-1")
        elif method == "POST":
            body = b""
        else:
            body = None
        rows.append((what, method, path, body, int(status), param.strip("`") or None, words.strip("`")))
    return rows


def code_of(status, param, words):
    """The error code a row's answer carries."""
    if status == 404:
        return "model_not_found" if param == "model" else "not_found"
    return "context_length_exceeded" if "slot's context" in words else None


def sse_events(body):
    """The JSON of every "data:" event of a stream, and whether it ended with [DONE]."""
    events, done = [], False
    for block in body.split("\n\n"):
        if not block.strip():
            continue
        line = block.strip()
        if line.startswith(":"):  # an SSE comment (": keep-alive" while a stream waits long for text)
            continue
        assert line.startswith("data: "), block
        payload = line[6:]
        if payload == "[DONE]":
            done = True
            continue
        assert not done, "an event after [DONE]"
        events.append(json.loads(payload))
    return events, done


class Errors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # 2 slots of 32 positions
        cls.s = Server(TINY, "-np", 2, "-c", 64, "-t", 1, "--max-body", 4096, "--max-tokens", 50,
                       "--chat-template", "bitnet")

    @classmethod
    def tearDownClass(cls):
        rc = cls.s.stop()
        if rc != 0:
            raise AssertionError(f"llama-server exited {rc}: " + "".join(cls.s.log))

    def post(self, path, body, **kw):
        return curl(self.s.url(path), data=body, **kw)

    def test_bad_request_table(self):
        # docs/RELIABILITY.md's table of bad HTTP requests, row by row
        rows = bad_request_rows()
        self.assertGreaterEqual(len(rows), 15)
        for what, method, path, body, status, param, words in rows:
            with self.subTest(row=what):
                got, _, text = curl(self.s.url(path), data=body, method=method if body is None else None)
                error_of(self, got, text, status, param, code_of(status, param, words), words)
        self.assertEqual(self.s.health()["status"], "ok")  # still serving

    def test_chunked_body_above_the_limit(self):
        # without Content-Length (chunked): refused when the body passes the limit
        big = '{"prompt":"' + "x" * 5000 + '"}'
        status, _, body = self.post("/v1/completions", big, headers=["Transfer-Encoding: chunked"])
        error_of(self, status, body, 413, words="larger than the 4096 bytes accepted")

    def test_tokenize_detokenize_models_health(self):
        status, _, body = self.post("/tokenize", '{"content":"Hello world"}')
        self.assertEqual(status, 200, body)
        toks = json.loads(body)["tokens"]
        self.assertGreater(len(toks), 1)
        status, _, body = self.post("/detokenize", json.dumps({"tokens": toks}))
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["content"], "Hello world")
        status, _, body = curl(self.s.url("/v1/models"))
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["data"][0]["id"], "tiny.gguf")
        h = self.s.health()
        self.assertEqual((h["slots_processing"], h["requests_waiting"]), (0, 0))


class ApiKey(unittest.TestCase):
    def test_bearer_key(self):
        for how in ("flag", "env"):
            with self.subTest(how=how):
                args, env = (["--api-key", "k-123"], None) if how == "flag" else ([], {"LLAMA_API_KEY": "k-123"})
                s = Server(TINY, "-np", 1, "-t", 1, *args, env=env)
                try:
                    url = s.url("/v1/models")
                    for hdr in ([], ["Authorization: Bearer k-12"], ["Authorization: Bearer k-1234"],
                                ["Authorization: k-123"]):
                        status, hs, body = curl(url, headers=hdr)
                        error_of(self, status, body, 401, code="invalid_api_key", words="Invalid API key")
                        self.assertEqual(hs.get("www-authenticate"), "Bearer")
                    status, _, body = curl(url, headers=["Authorization: Bearer k-123"])
                    self.assertEqual(status, 200, body)
                    self.assertEqual(curl(s.url("/health"))[0], 200)  # no key needed
                    self.assertTrue(any("API key required" in line for line in s.log))
                finally:
                    self.assertEqual(s.stop(), 0)


class Slots(unittest.TestCase):
    def test_queue_full_then_disconnect_frees_the_slot(self):
        # one slot, no queue: a long request holds it; the next gets 429; when the first client goes away,
        # its generation stops at once (it would run 6000 tokens)
        s = Server(TINY, "-np", 1, "--queue", 0, "-c", 8192, "-t", 1, "--max-tokens", 8000)
        try:
            body = json.dumps({"prompt": "Once", "max_tokens": 6000, "ignore_eos": True, "temperature": 0})
            long_req = subprocess.Popen(["curl", "-sS", "-m", "600", "-o", "/dev/null", "--data-binary", body,
                                         s.url("/v1/completions")], stderr=subprocess.DEVNULL)
            try:
                s.wait_until(lambda h: h["slots_processing"] == 1, what="the long request running")
                status, hs, text = curl(s.url("/v1/completions"), data='{"prompt":"x","max_tokens":2}')
                error_of(self, status, text, 429, code="rate_limit_exceeded", typ="rate_limit_error",
                         words="all 1 slots are taken")
                self.assertEqual(hs.get("retry-after"), "1")
            finally:
                long_req.terminate()
                long_req.wait(30)
            s.wait_until(lambda h: h["slots_processing"] == 0, timeout=30, what="the slot freed after the disconnect")
            ended = [line for line in s.log if "/v1/completions: prompt" in line]
            self.assertEqual(len(ended), 1, s.log)
            self.assertIn("finish client gone", ended[0])
            generated = int(ended[0].split(" generated")[0].rsplit(" ", 1)[1])
            self.assertLess(generated, 6000, ended[0])
            status, _, text = curl(s.url("/v1/completions"), data='{"prompt":"x","max_tokens":2}')
            self.assertEqual(status, 200, text)
        finally:
            self.assertEqual(s.stop(), 0)

    def test_streamed_client_that_leaves_stops_its_generation(self):
        s = Server(TINY, "-np", 1, "-c", 8192, "-t", 1, "--max-tokens", 8000)
        try:
            body = json.dumps({"prompt": "Once", "max_tokens": 6000, "ignore_eos": True, "stream": True})
            req = subprocess.Popen(["curl", "-sSN", "-m", "600", "-o", "/dev/null", "--data-binary", body,
                                    s.url("/v1/completions")], stderr=subprocess.DEVNULL)
            try:
                s.wait_until(lambda h: h["slots_processing"] == 1, what="the stream running")
            finally:
                req.terminate()
                req.wait(30)
            s.wait_until(lambda h: h["slots_processing"] == 0, timeout=30, what="the slot freed after the disconnect")
            s.wait_until(lambda h: any("/v1/completions: prompt" in line for line in s.log), timeout=30,
                         what="the request's log line")
            ended = [line for line in s.log if "/v1/completions: prompt" in line]
            self.assertEqual(len(ended), 1, s.log)
            self.assertIn("finish client gone", ended[0])
            self.assertLess(int(ended[0].split(" generated")[0].rsplit(" ", 1)[1]), 6000, ended[0])
        finally:
            self.assertEqual(s.stop(), 0)

    def test_endless_body_is_cut_at_the_limit(self):
        # a chunked upload that never ends: answered 413 and closed once it passes 4 x --max-body + 64 KiB (a
        # client still sending sees the connection close; curl says "Send failure"), well before curl's -m 60
        s = Server(TINY, "-np", 1, "-t", 1, "--max-body", 10000)
        try:
            r = subprocess.run(["curl", "-sS", "-m", "60", "-H", "Transfer-Encoding: chunked", "-H",
                                "Content-Type: application/json", "-T", "/dev/zero", "-X", "POST", "-w", "\n%{http_code}",
                                s.url("/v1/completions")], capture_output=True, text=True, timeout=120)
            self.assertNotEqual(r.returncode, 28, "curl timed out: the server kept reading")  # 28: curl's timeout
            self.assertTrue(r.stdout.endswith("413") or "Send failure" in r.stderr or "Recv failure" in r.stderr,
                            r.stdout[-300:] + r.stderr)
            self.assertEqual(curl(s.url("/health"))[0], 200)
        finally:
            self.assertEqual(s.stop(), 0)

    def test_sigterm_answers_the_request_in_flight(self):
        s = Server(TINY, "-np", 1, "-c", 4096, "-t", 1, "--max-tokens", 3500)
        out = tempfile.NamedTemporaryFile(delete=False)
        out.close()
        body = json.dumps({"prompt": "Once", "max_tokens": 3000, "ignore_eos": True, "temperature": 0})
        req = subprocess.Popen(["curl", "-sS", "-m", "600", "-o", out.name, "-w", "%{http_code}", "--data-binary", body,
                                s.url("/v1/completions")], stdout=subprocess.PIPE, text=True)
        try:
            s.wait_until(lambda h: h["slots_processing"] == 1, what="the request running")
            s.proc.send_signal(signal.SIGTERM)
            # while it drains, new generation requests get 503 at once
            for _ in range(600):  # bounded: 30 s
                if any("shutting down" in line for line in s.log):
                    break
                time.sleep(0.05)
            status, _, text = curl(s.url("/v1/completions"), data='{"prompt":"x","max_tokens":1}', timeout=30)
            error_of(self, status, text, 503, typ="server_error", words="shutting down")
            self.assertIsNone(req.poll())  # the first request is still running
            self.assertEqual(s.stop(sig=None), 0)  # no second signal: that would exit at once
            code, _ = req.communicate(timeout=600)
        finally:
            if req.poll() is None:
                req.kill()
        self.assertEqual(code.strip(), "200")
        with open(out.name) as f:
            answer = json.load(f)
        os.unlink(out.name)
        self.assertEqual(answer["usage"]["completion_tokens"], 3000)
        self.assertEqual(answer["choices"][0]["finish_reason"], "length")
        log = "".join(s.log)
        self.assertIn("shutting down: finishing 1 running and 0 waiting requests", log)
        self.assertIn("llama-server: stopped", log)


class Streams(unittest.TestCase):
    def test_events_equal_the_whole_answer(self):
        s = Server(TINY, "-np", 2, "-t", 1, "--chat-template", "bitnet", "--temp", 0)
        try:
            for path, req in (("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi there"}]}),
                              ("/v1/completions", {"prompt": "Hello"})):
                req = dict(req, max_tokens=20, ignore_eos=True)
                status, _, whole = curl(s.url(path), data=json.dumps(req))
                self.assertEqual(status, 200, whole)
                whole = json.loads(whole)
                status, hs, body = curl(s.url(path), data=json.dumps(
                    dict(req, stream=True, stream_options={"include_usage": True})))
                self.assertEqual(status, 200, body)
                self.assertTrue(hs["content-type"].startswith("text/event-stream"))
                events, done = sse_events(body)
                self.assertTrue(done, body)
                chat = path.startswith("/v1/chat")
                self.assertEqual({e["object"] for e in events}, {"chat.completion.chunk" if chat else "text_completion"})
                self.assertEqual(len({e["id"] for e in events}), 1)
                usage = events[-1]
                self.assertEqual(usage["choices"], [])
                self.assertEqual(usage["usage"], whole["usage"])
                finish = events[-2]["choices"][0]
                self.assertEqual(finish["finish_reason"], "length")
                pieces = events[:-2]
                if chat:
                    self.assertEqual(pieces[0]["choices"][0]["delta"], {"role": "assistant", "content": ""})
                    text = "".join(e["choices"][0]["delta"].get("content", "") for e in pieces)
                    self.assertEqual(text, whole["choices"][0]["message"]["content"])
                else:
                    text = "".join(e["choices"][0]["text"] for e in pieces)
                    self.assertEqual(text, whole["choices"][0]["text"])
                self.assertTrue(all(e["choices"][0]["finish_reason"] is None for e in pieces))
        finally:
            self.assertEqual(s.stop(), 0)

    def test_no_chat_template_is_a_clear_400(self):
        s = Server(TINY, "-np", 1, "-t", 1)
        try:
            self.assertTrue(any("has no tokenizer.chat_template" in line for line in s.log))
            status, _, body = curl(s.url("/v1/chat/completions"),
                                   data='{"messages":[{"role":"user","content":"x"}]}')
            error_of(self, status, body, 400, param="messages", words="--chat-template NAME")
        finally:
            self.assertEqual(s.stop(), 0)


class Script(unittest.TestCase):
    def test_run_inference_server_flags(self):
        # bitnet.cpp's flags: -p is the system prompt of chat requests without one, -temp the default temperature
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        launcher = [sys.executable, os.path.join(root, "run_inference_server.py"), "--build-dir", os.path.dirname(BIN)]
        s = Server(TINY, "-p", "You are terse.", "-temp", "0", "-np", "2", "-c", "512", "-t", "1", "-n", "12",
                   "--chat-template", "bitnet", launcher=launcher)
        try:
            self.assertTrue(any("2 slots x 256 positions" in line for line in s.log), s.log)
            user = {"role": "user", "content": "Hello"}
            status, _, implicit = curl(s.url("/v1/chat/completions"), data=json.dumps({"messages": [user]}))
            self.assertEqual(status, 200, implicit)
            explicit_req = {"messages": [{"role": "system", "content": "You are terse."}, user]}
            status, _, explicit = curl(s.url("/v1/chat/completions"), data=json.dumps(explicit_req))
            self.assertEqual(status, 200, explicit)
            implicit, explicit = json.loads(implicit), json.loads(explicit)
            self.assertEqual(implicit["choices"][0]["message"], explicit["choices"][0]["message"])
            self.assertEqual(implicit["usage"], explicit["usage"])
            self.assertLessEqual(implicit["usage"]["completion_tokens"], 12)  # -n
        finally:
            self.assertEqual(s.stop(), 0)
        r = subprocess.run(launcher + ["-m", "/nonexistent.gguf"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertIn("model file /nonexistent.gguf not found", r.stderr)
        r = subprocess.run(launcher + ["-m", TINY, "-c", "2", "-np", "4"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("-c 2 is smaller than -np 4", r.stderr)


class Bench(unittest.TestCase):
    def test_bench_server_runs_every_round(self):
        # utils/bench-server.py end to end on the tiny model (no timing asserted): every client count is
        # measured --rounds times, every request generates --max-tokens tokens, and the JSON has the table
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        out = os.path.join(TMP, "bench.json")
        r = subprocess.run([sys.executable, os.path.join(root, "utils", "bench-server.py"), "--model", TINY,
                            "--build-dir", os.path.dirname(BIN), "--clients", "1,3", "--requests", "2", "--rounds", "2",
                            "--max-tokens", "4", "--prompt-tokens", "4", "--ctx-per-slot", "64", "-t", "1",
                            "--json", out], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("| 3 | 6 |", r.stdout)
        with open(out) as f:
            rows = json.load(f)["models"][0]["rows"]
        self.assertEqual([row["clients"] for row in rows], [1, 3])
        for row in rows:
            self.assertEqual(row["tokens"], row["clients"] * 2 * 4)
            self.assertEqual(len(row["rounds_tok_s"]), 2)
            self.assertIn(row["aggregate_tok_s"], row["rounds_tok_s"])
        self.assertEqual(rows[0]["vs_first"], 1.0)
        r = subprocess.run([sys.executable, os.path.join(root, "utils", "bench-server.py"), "--rounds", "0"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--rounds must be positive", r.stderr)


class CommandLine(unittest.TestCase):
    def test_head_type_q8_0(self):
        # the head requantized at load: the kernel line says so, and a greedy completion still answers
        s = Server(TINY, "--head-type", "q8_0", "-np", "2", "-c", "256", "-t", "1")
        try:
            self.assertTrue(any("head: Q8_0" in line for line in s.log), s.log)
            status, _, body = curl(s.url("/v1/completions"),
                                   data=json.dumps({"prompt": "hello", "max_tokens": 4, "temperature": 0}))
            self.assertEqual(status, 200, body)
            self.assertEqual(json.loads(body)["usage"]["completion_tokens"], 4)
        finally:
            self.assertEqual(s.stop(), 0)

    def test_bad_flags_and_files(self):
        exe = os.path.join(BIN, "llama-server")
        cases = [
            (["-m", TINY, "--port", "70000"], 2, "--port"),
            (["-m", TINY, "-np", "0"], 2, "-np"),
            (["-m", TINY, "-c", "2", "-np", "4"], 2, "-c 2 is smaller than -np 4"),
            (["-m", TINY, "--chat-template", "chatml"], 2, "--chat-template expects one of"),
            (["-m", TINY, "--head-type", "q4_0"], 2, "--head-type expects stored or q8_0, got 'q4_0'"),
            (["-p", "x"], 2, "unknown"),
            ([], 2, "no model given"),
            (["-m", "/nonexistent.gguf", "--port", "0"], 1, "/nonexistent.gguf"),
            (["-m", TINY, "--host", "no.such.host.invalid", "--port", "0"], 1, "cannot resolve --host no.such.host.invalid"),
        ]
        for args, rc, words in cases:
            with self.subTest(args=args):
                r = subprocess.run([exe] + args, capture_output=True, text=True, timeout=120)
                self.assertEqual(r.returncode, rc, r.stderr)
                self.assertIn(words, r.stderr)


if __name__ == "__main__":
    unittest.main()
