"""tests/server/test_hostile.py — llama-server against hostile and stuck clients (ctest server_hostile):
half-open connections from one address (slowloris) do not lock other clients out, and are closed with 408
at --request-timeout; a request dribbled byte by byte is closed at the same deadline; an idle kept-alive
connection is closed at --keepalive-timeout; a client that stops reading a stream has its generation
stopped and its slot freed at --timeout; SIGTERM with long requests in flight exits 0 within
--shutdown-timeout, the stream ending with an error event and [DONE], the waiting request with 503; and
GET /metrics counts what was sent.

The attacking connections come from 127.0.0.2 (the whole of 127.0.0.0/8 is loopback on Linux), the
others from 127.0.0.1; the server listens on 127.0.0.1 only. Every wait is bounded.
"""
import json
import os
import re
import select
import signal
import socket
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

from tests.server.server_util import Server, curl, make_model

TMP = tempfile.mkdtemp(prefix="bitnet_server_hostile_")
TINY = make_model(os.path.join(TMP, "tiny.gguf"))
PARTIAL = b"GET /health HTTP/1.1\r\nHost: x\r\n"


def attacker(port, src="127.0.0.2", timeout=5.0):
    """A connection from src to the server that has sent nothing yet."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s


def closed_within(sock, seconds):
    """Reads until the peer closes or seconds pass; returns (closed, bytes read, seconds waited)."""
    t0 = time.monotonic()
    got = b""
    while time.monotonic() - t0 < seconds:
        r, _, _ = select.select([sock], [], [], 0.05)
        if not r:
            continue
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, OSError):
            return True, got, time.monotonic() - t0
        if not chunk:
            return True, got, time.monotonic() - t0
        got += chunk
    return False, got, time.monotonic() - t0


def post_stream(c, max_tokens=15000):
    """Sends on the connected socket c a streamed completion of "Once" for max_tokens tokens (EOS ignored)."""
    body = json.dumps({"prompt": "Once", "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0,
                       "stream": True}).encode()
    c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def timed_get(url, timeout):
    """GET url with urllib; returns (status, body, seconds)."""
    t0 = time.monotonic()
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read(), time.monotonic() - t0


def timed_post(url, body, timeout, headers=None):
    t0 = time.monotonic()
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers=dict({"Content-Type": "application/json"}, **(headers or {})))
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read(), time.monotonic() - t0
    except urllib.error.HTTPError as e:
        return e.code, e.read(), time.monotonic() - t0


def metric(text, name, **labels):
    """The value of one sample of a Prometheus text exposition (None when absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pat = re.escape(name) + (r"\{" + re.escape(want) + r"\}" if want else "") + r" (\S+)$"
    for line in text.split("\n"):
        m = re.match(pat, line)
        if m:
            return float(m.group(1))
    return None


class Slowloris(unittest.TestCase):
    def test_half_open_connections_from_one_address_do_not_lock_others_out(self):
        # only flags the server has always had: the per-address default (--max-connections / 4) must do it
        s = Server(TINY, "-np", 2, "-t", 1, "--max-connections", 16)
        socks = []
        try:
            for _ in range(40):
                try:
                    c = attacker(s.port)
                    c.sendall(PARTIAL)
                    socks.append(c)
                except OSError:
                    pass  # refused or reset at accept: the limit at work
            time.sleep(0.3)
            status, body, dt = timed_get(s.url("/health"), timeout=1.0)
            self.assertEqual(status, 200)
            self.assertLess(dt, 1.0)
            status, body, dt = timed_post(s.url("/v1/completions"),
                                          {"prompt": "Once", "max_tokens": 8, "temperature": 0}, timeout=1.0)
            self.assertEqual(status, 200, body)
            self.assertEqual(json.loads(body)["usage"]["completion_tokens"], 8)
            self.assertLess(dt, 1.0)
            # at most 16 / 4 = 4 of the 40 were kept; the others are closed
            alive = sum(1 for c in socks if not closed_within(c, 0.2)[0])
            self.assertLessEqual(alive, 4)
        finally:
            for c in socks:
                c.close()
        self.assertEqual(s.stop(), 0)

    def test_slow_requests_are_closed_at_the_request_timeout(self):
        s = Server(TINY, "-np", 1, "-t", 1, "--max-connections-per-ip", 4, "--request-timeout", 1.5,
                   "--keepalive-timeout", 1, "--metrics")
        try:
            t0 = time.monotonic()
            silent = attacker(s.port)              # sends nothing
            partial = attacker(s.port)             # the headers never end
            partial.sendall(PARTIAL)
            body_short = attacker(s.port)          # the body never ends
            body_short.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"pro")
            dribble = attacker(s.port)             # one byte every 0.2 s: never idle, never done
            stop = threading.Event()

            def drip():
                msg = PARTIAL + b"X-Pad: " + b"a" * 200
                for ch in msg:
                    if stop.wait(0.2):
                        return
                    try:
                        dribble.send(bytes([ch]))
                    except OSError:
                        return

            th = threading.Thread(target=drip, daemon=True)
            th.start()
            # a fifth connection from the same address is refused at accept (4 per address)
            fifth = attacker(s.port)
            closed, _, _ = closed_within(fifth, 1.0)
            self.assertTrue(closed, "a fifth connection from 127.0.0.2 was kept")
            fifth.close()
            # others are served meanwhile
            self.assertEqual(timed_get(s.url("/health"), 1.0)[0], 200)
            for name, c in (("silent", silent), ("partial headers", partial), ("partial body", body_short),
                            ("dribbling", dribble)):
                closed, got, _ = closed_within(c, 1.5 + 2.0 - (time.monotonic() - t0) + 0.5)
                self.assertTrue(closed, f"the {name} connection is still open {time.monotonic() - t0:.1f} s later")
                self.assertTrue(got.startswith(b"HTTP/1.1 408 "), (name, got[:80]))
                self.assertIn(b'"code":"request_timeout"', got)
            self.assertLess(time.monotonic() - t0, 1.5 + 2.0)
            self.assertGreater(time.monotonic() - t0, 1.4)
            stop.set()
            th.join(5)
            for c in (silent, partial, body_short, dribble):
                c.close()
            # a kept-alive connection that idles is closed at --keepalive-timeout (no answer owed)
            k = socket.create_connection(("127.0.0.1", s.port), timeout=5)
            k.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            closed, got, _ = closed_within(k, 0.5)
            self.assertFalse(closed)
            self.assertTrue(got.startswith(b"HTTP/1.1 200 "), got[:80])
            closed, got, dt = closed_within(k, 3.0)
            self.assertTrue(closed, "the idle kept-alive connection is still open")
            self.assertEqual(got, b"")
            self.assertGreater(0.5 + dt, 0.9)
            k.close()
            status, text, _ = timed_get(s.url("/metrics"), 2.0)
            text = text.decode()
            self.assertEqual(metric(text, "bitnet_rejected_total", reason="request_timeout"), 4)
            self.assertEqual(metric(text, "bitnet_rejected_total", reason="per_address_limit"), 1)
            self.assertEqual(metric(text, "bitnet_rejected_total", reason="keepalive_timeout"), 1)
        finally:
            rc = s.stop()
        self.assertEqual(rc, 0)


class StuckReader(unittest.TestCase):
    def test_a_client_that_stops_reading_a_stream_frees_its_slot(self):
        s = Server(TINY, "-np", 1, "-c", 16384, "-t", 1, "--max-tokens", 16000, "--timeout", 1, "--metrics")
        try:
            c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window: the server's writes block
            c.settimeout(10)
            c.connect(("127.0.0.1", s.port))
            post_stream(c)
            first = c.recv(1024)
            self.assertTrue(first.startswith(b"HTTP/1.1 200"), first[:80])
            t0 = time.monotonic()
            # no more reads: the client's window closes after a few KB; the kernel's send buffer (megabytes on
            # loopback) would take the stream for a long time, but the client acknowledges nothing more, and
            # after --timeout 1 s the server ends the stream and frees the slot (15000 tokens take ~30 s)
            s.wait_until(lambda h: h["slots_processing"] == 0, timeout=15, what="the slot freed")
            self.assertLess(time.monotonic() - t0, 15)
            c.close()
            for _ in range(100):
                if any("client gone" in line for line in s.log):
                    break
                time.sleep(0.05)
            line = [x for x in s.log if "/v1/completions" in x and "finish" in x][-1]
            n_gen = int(re.search(r"(\d+) generated", line).group(1))
            self.assertIn("finish client gone", line)
            self.assertLess(n_gen, 15000 * 0.9)
            text = timed_get(s.url("/metrics"), 2.0)[1].decode()
            self.assertEqual(metric(text, "bitnet_rejected_total", reason="write_timeout"), 1)
            self.assertEqual(metric(text, "bitnet_engine_requests_cancelled_total"), 1)
        finally:
            rc = s.stop()
        self.assertEqual(rc, 0)


    def test_a_stream_that_waits_long_for_its_text_is_kept(self):
        # --timeout 1: a stream queued behind a long request waits 2.5 s for its first text, however fast the
        # machine (the long request is a stream whose client reads it and hangs up after 2.5 s); the server
        # sends SSE comments meanwhile, so the queued stream is not closed as idle, and it arrives whole
        s = Server(TINY, "-np", 1, "-c", 16384, "-t", 1, "--max-tokens", 16000, "--timeout", 1)
        hold = 2.5

        def long_stream():
            c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
            post_stream(c)
            t_start = time.monotonic()
            while time.monotonic() - t_start < 30:  # bounded even if the main thread never signals
                r, _, _ = select.select([c], [], [], 0.05)
                if r and not c.recv(65536):
                    break
                if started.is_set() and time.monotonic() - started.t0 >= hold:
                    break
            c.close()

        started = threading.Event()
        try:
            long = threading.Thread(target=long_stream)
            long.start()
            s.wait_until(lambda h: h["slots_processing"] == 1, what="the long request running")
            started.t0 = time.monotonic()
            started.set()
            t0 = started.t0
            status, raw, _ = timed_post(s.url("/v1/completions"),
                                        {"prompt": "The cat", "max_tokens": 6, "temperature": 0, "stream": True}, 60)
            waited = time.monotonic() - t0
            long.join(60)
            alone = timed_post(s.url("/v1/completions"), {"prompt": "The cat", "max_tokens": 6, "temperature": 0}, 60)
        finally:
            rc = s.stop()
        self.assertEqual(rc, 0)
        self.assertEqual(status, 200)
        raw = raw.decode()
        self.assertGreater(waited, 1.5)  # it did wait longer than --timeout
        self.assertIn(": keep-alive\n\n", raw)
        events = [json.loads(b[6:]) for b in raw.split("\n\n") if b.startswith("data: {")]
        self.assertTrue(raw.rstrip().endswith("data: [DONE]"), raw[-200:])
        self.assertEqual(events[-1]["choices"][0]["finish_reason"], "length")
        self.assertEqual("".join(e["choices"][0]["text"] or "" for e in events),
                         json.loads(alone[1])["choices"][0]["text"])


class Shutdown(unittest.TestCase):
    def test_sigterm_ends_long_requests_at_the_shutdown_timeout(self):
        s = Server(TINY, "-np", 1, "-c", 16384, "-t", 1, "--max-tokens", 16000, "--shutdown-timeout", 2)
        out = {}

        def stream():
            c = socket.create_connection(("127.0.0.1", s.port), timeout=30)
            post_stream(c)
            got = b""
            while True:
                try:
                    chunk = c.recv(1 << 16)
                except OSError:
                    break
                if not chunk:
                    break
                got += chunk
            c.close()
            out["stream"] = got

        def waiting():  # queued behind the stream (one slot)
            out["waiting"] = timed_post(s.url("/v1/completions"), {"prompt": "x", "max_tokens": 4}, timeout=30)

        t1 = threading.Thread(target=stream)
        t1.start()
        s.wait_until(lambda h: h["slots_processing"] == 1, what="the stream running")
        t2 = threading.Thread(target=waiting)
        t2.start()
        s.wait_until(lambda h: h["requests_waiting"] == 1, what="the second request waiting")
        t0 = time.monotonic()
        s.proc.send_signal(signal.SIGTERM)
        rc = s.stop(sig=None, timeout=30)
        dt = time.monotonic() - t0
        t1.join(30)
        t2.join(30)
        self.assertEqual(rc, 0)
        self.assertGreater(dt, 1.9)
        self.assertLess(dt, 2 + 3.0)  # the deadline, then at most the 3 s the handlers get to write
        raw = out["stream"].decode("utf-8", "replace")
        self.assertTrue(raw.startswith("HTTP/1.1 200"), raw[:80])
        self.assertIn('"code":null', raw)
        errors = re.findall(r'data: (\{"error".*?\})\r?\n', raw)
        self.assertEqual(len(errors), 1, raw[-600:])
        self.assertIn("--shutdown-timeout", json.loads(errors[0])["error"]["message"])
        self.assertIn("data: [DONE]", raw[raw.index(errors[0]):])
        status, body, _ = out["waiting"]
        self.assertEqual(status, 503, body)
        self.assertIn("shutting down", json.loads(body)["error"]["message"])
        log = "".join(s.log)
        self.assertIn("--shutdown-timeout 2 s passed: ending 1 running and 1 waiting requests", log)
        self.assertIn("llama-server: stopped", log)


class Metrics(unittest.TestCase):
    def test_scrape_counts_what_was_sent(self):
        s = Server(TINY, "-np", 1, "-t", 1, "--queue", 0, "--max-body", 4096, "--metrics", "--api-key", "k3y",
                   "-c", 4096, "--max-tokens", 4000)
        auth = {"Authorization": "Bearer k3y"}
        h = ["Authorization: Bearer k3y"]
        try:
            self.assertEqual(curl(s.url("/metrics"))[0], 401)  # under the API key
            n_health = 3
            for _ in range(n_health):
                self.assertEqual(curl(s.url("/health"))[0], 200)
            n_prompt, gen_tokens = {}, 0
            for p in ("Once", "The cat"):
                status, body, _ = timed_post(s.url("/v1/completions"), {"prompt": p, "max_tokens": 5,
                                                                         "temperature": 0}, 30, auth)
                self.assertEqual(status, 200, body)
                u = json.loads(body)["usage"]
                n_prompt[p] = u["prompt_tokens"]
                gen_tokens += u["completion_tokens"]
            status, body, _ = timed_post(s.url("/v1/completions"), {"prompt": "Once", "max_tokens": 3,
                                                                     "temperature": 0, "stream": True}, 30, auth)
            self.assertEqual(status, 200)
            gen_tokens += 3
            self.assertEqual(curl(s.url("/v1/completions"), data="{bad", headers=h)[0], 400)
            self.assertEqual(curl(s.url("/nope"), headers=h)[0], 404)
            self.assertEqual(curl(s.url("/v1/completions"), data='{"prompt":"' + "x" * 5000 + '"}', headers=h)[0], 413)
            # a 429: the one slot busy with a long request and no queue
            long = threading.Thread(target=lambda: timed_post(
                s.url("/v1/completions"), {"prompt": "Once", "max_tokens": 3000, "ignore_eos": True,
                                           "temperature": 0}, 60, auth))
            long.start()
            for _ in range(1200):  # bounded: 60 s
                n_health += 1
                if s.health()["slots_processing"] == 1:
                    break
                time.sleep(0.05)
            self.assertEqual(timed_post(s.url("/v1/completions"), {"prompt": "x", "max_tokens": 1}, 30, auth)[0], 429)
            long.join(60)
            gen_tokens += 3000
            # the long answer's bytes can reach the client a moment before the server has counted it
            for _ in range(100):  # bounded: 5 s
                text = timed_get(urllib.request.Request(s.url("/metrics"), headers=auth), 5)[1].decode()
                if metric(text, "bitnet_requests_total", endpoint="/v1/completions", status="200") == 4:
                    break
                time.sleep(0.05)
        finally:
            rc = s.stop()
        self.assertEqual(rc, 0)
        self.assertIn("# TYPE bitnet_requests_total counter", text)
        self.assertEqual(metric(text, "bitnet_requests_total", endpoint="/health", status="200"), n_health)
        self.assertEqual(metric(text, "bitnet_requests_total", endpoint="/v1/completions", status="200"), 4)
        self.assertEqual(metric(text, "bitnet_requests_total", endpoint="/v1/completions", status="400"), 1)
        self.assertEqual(metric(text, "bitnet_requests_total", endpoint="/v1/completions", status="413"), 1)
        self.assertEqual(metric(text, "bitnet_requests_total", endpoint="/v1/completions", status="429"), 1)
        self.assertEqual(metric(text, "bitnet_requests_total", endpoint="other", status="404"), 1)
        self.assertEqual(metric(text, "bitnet_requests_total", endpoint="/metrics", status="401"), 1)
        self.assertEqual(metric(text, "bitnet_rejected_total", reason="queue_full"), 1)
        self.assertEqual(metric(text, "bitnet_rejected_total", reason="body_too_large"), 1)
        self.assertEqual(metric(text, "bitnet_generated_tokens_total"), gen_tokens)
        # "Once" three times (a request, the stream, the long one), "The cat" once; the 429 never ran
        self.assertEqual(metric(text, "bitnet_prompt_tokens_total"), 3 * n_prompt["Once"] + n_prompt["The cat"])
        self.assertEqual(metric(text, "bitnet_request_duration_seconds_count", endpoint="/v1/completions"), 7)
        self.assertEqual(metric(text, "bitnet_request_duration_seconds_count", endpoint="/health"), n_health)
        self.assertEqual(metric(text, "bitnet_time_to_first_token_seconds_count"), 4)
        self.assertEqual(metric(text, "bitnet_time_to_first_token_seconds_bucket", le="+Inf"), 4)
        self.assertGreater(metric(text, "bitnet_tokens_per_second", phase="generation"), 0)
        self.assertEqual(metric(text, "bitnet_slots", state="busy"), 0)
        self.assertEqual(metric(text, "bitnet_slots", state="idle"), 1)
        self.assertEqual(metric(text, "bitnet_queue_length"), 0)
        self.assertGreaterEqual(metric(text, "bitnet_connections_open"), 1)

    def test_off_without_the_flag(self):
        s = Server(TINY, "-np", 1, "-t", 1)
        try:
            status, _, body = curl(s.url("/metrics"))
        finally:
            rc = s.stop()
        self.assertEqual(rc, 0)
        self.assertEqual(status, 404)
        self.assertIn("--metrics", json.loads(body)["error"]["message"])


if __name__ == "__main__":
    unittest.main()
