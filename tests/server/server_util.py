"""tests/server/server_util.py — what the llama-server tests share: dummy models made with bitnet-dummy,
a llama-server process on 127.0.0.1 and a free port (it prints the port it got), and curl.

Every wait here is bounded: a server that does not start, answer or stop in time fails the test instead
of hanging it. BITNET_BIN_DIR (default build/bin) names the directory of llama-server and bitnet-dummy.
"""
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.abspath(os.environ.get("BITNET_BIN_DIR", os.path.join(ROOT, "build", "bin")))


def make_model(path, size="tiny", seed=1234):
    """A dummy I2_S model: "tiny" (the bitnetcpp-tiny layout: hidden 256, 2 layers, 512-token vocabulary)
    or "125M" (hidden 768, 12 layers, 32002 tokens, as utils/generate-dummy-bitnet-model.py --model-size
    125M). Returns path."""
    if size == "tiny":
        shape = ["--n-embd", "256", "--n-ff", "768", "--n-layer", "2", "--n-head", "4", "--ctx", "512",
                 "--vocab-size", "512"]
    elif size == "125M":
        shape = ["--n-embd", "768", "--n-ff", "3072", "--n-layer", "12", "--n-head", "12", "--ctx", "2048"]
    else:
        raise ValueError(size)
    subprocess.run([os.path.join(BIN, "bitnet-dummy"), "-o", path, "--seed", str(seed)] + shape,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
    return path


def make_embd_model(path, seed=3, pooling=None):
    """A dummy I2_S embedding model in BitNet-embedding-0.6B's layout, small: arch qwen3, hidden 256, 2 layers,
    4 heads of 128 (GQA 4/2), FFN 512, 1000-token vocabulary with add_eos_token; pooling_type last unless
    pooling ("none", "mean", "cls", "last") says otherwise. Returns path."""
    cmd = [os.path.join(BIN, "bitnet-dummy"), "-o", path, "--seed", str(seed), "--arch", "qwen3", "--n-embd", "256",
           "--n-ff", "512", "--n-layer", "2", "--n-head", "4", "--n-head-kv", "2", "--n-embd-head", "128",
           "--vocab-size", "1000", "--outtype", "i2_s"]
    if pooling:
        cmd += ["--pooling", pooling]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
    return path


class Server:
    """llama-server -m MODEL --port 0 ARGS..., started and waited for (at most start_timeout seconds).
    stderr is collected in self.log; self.port is the port it listens on."""

    def __init__(self, model, *args, env=None, start_timeout=120, launcher=None):
        """launcher: the command before "-m MODEL" (default: llama-server itself)."""
        cmd = (launcher or [os.path.join(BIN, "llama-server")]) + ["-m", model, "--port", "0"] + [str(a) for a in args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     env=dict(os.environ, **(env or {})))
        self.log = []
        self.port = None
        ready = threading.Event()

        def reader():
            for line in self.proc.stderr:
                self.log.append(line)
                m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
                if m:
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()  # the process ended

        self.thread = threading.Thread(target=reader, daemon=True)
        self.thread.start()
        if not ready.wait(start_timeout) or self.port is None:
            self.kill()
            raise AssertionError("llama-server did not start: " + "".join(self.log))

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def stop(self, sig=signal.SIGTERM, timeout=120):
        """Sends sig (None: none, the process is already stopping) and waits for the exit; returns the exit
        status."""
        if sig is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"llama-server did not exit within {timeout} s of signal {sig}")
        self.thread.join(10)
        self.proc.stderr.close()
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self.thread.join(10)
        self.proc.stderr.close()

    def health(self):
        status, _, body = curl(self.url("/health"))
        assert status == 200, (status, body)
        return json.loads(body)

    def wait_until(self, pred, timeout=60, what="condition"):
        """Polls /health every 50 ms until pred(health) is true; fails after timeout seconds."""
        t0 = time.time()
        while time.time() - t0 < timeout:
            h = self.health()
            if pred(h):
                return h
            time.sleep(0.05)
        raise AssertionError(f"{what} not reached within {timeout} s: last /health {h}")


def curl(url, data=None, headers=(), method=None, timeout=300, extra=()):
    """One request with curl; data is str or bytes (sent as is). Returns (status, headers dict with
    lower-case names, body str)."""
    with tempfile.TemporaryDirectory() as d:
        hdr, body, inp = os.path.join(d, "h"), os.path.join(d, "b"), os.path.join(d, "in")
        cmd = ["curl", "-sS", "-m", str(timeout), "-D", hdr, "-o", body, "-w", "%{http_code}"]
        for h in headers:
            cmd += ["-H", h]
        if method:
            cmd += ["-X", method]
        if data is not None:
            with open(inp, "wb") as f:
                f.write(data.encode() if isinstance(data, str) else data)
            cmd += ["--data-binary", "@" + inp, "-H", "Content-Type: application/json"]
        cmd += list(extra) + [url]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 30)
        status = int(r.stdout.strip() or 0)
        hs = {}
        if os.path.exists(hdr):
            with open(hdr, encoding="latin-1") as f:
                for line in f:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        hs[k.strip().lower()] = v.strip()
        text = ""
        if os.path.exists(body):
            with open(body, "rb") as f:
                text = f.read().decode("utf-8")  # a response that is not UTF-8 fails here
        return status, hs, text
