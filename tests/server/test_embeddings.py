"""tests/server/test_embeddings.py — POST /v1/embeddings of llama-server at the HTTP level, driven by curl
(ctest server_embeddings), on a small qwen3 dummy in BitNet-embedding-0.6B's layout (pooling_type last):
OpenAI's request and response shapes (the four forms of "input", float and base64, usage), the vectors
against llama-embedding's for the same texts (same pooling, L2-normalized; its json output prints %.7f, so
the server's floats must print the same), the errors (status, OpenAI error object, the field named), the
two modes' refusals, --pooling, concurrent clients getting the vectors each request gets alone (bit for
bit), and a client that leaves freeing its slots. Every wait is bounded (server_util).
"""
import base64
import json
import os
import struct
import subprocess
import tempfile
import threading
import time
import unittest

from tests.server.server_util import BIN, Server, curl, make_embd_model, make_model

TMP = tempfile.mkdtemp(prefix="bitnet_server_embd_")
QWEN = make_embd_model(os.path.join(TMP, "q.gguf"))
TINY = make_model(os.path.join(TMP, "tiny.gguf"))  # a generation model (no pooling_type)
N_EMBD = 256

TEXTS = ["a", "b", "The quick brown fox", "héllo wörld ✓", "river stone lamp north green paper orbit salt",
         "x" * 40, "1 2 3 4 5 6 7 8 9 10"]


def f32(x):
    """x rounded to the nearest float32 (the server prints 9 significant digits: its float exactly)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def error_of(test, status, body, want_status, param=None, words=None, code=None, typ="invalid_request_error"):
    test.assertEqual(status, want_status, body)
    err = json.loads(body)["error"]
    test.assertEqual(err["type"], typ, body)
    test.assertEqual(err["param"], param, body)
    test.assertEqual(err["code"], code, body)
    if words:
        test.assertIn(words, err["message"])
    return err


def llama_embedding(model, texts, *args):
    """llama-embedding's vectors (json output, %.7f) as lists of strings, one list per text."""
    r = subprocess.run([os.path.join(BIN, "llama-embedding"), "-m", model, "-p", "\n".join(texts), "-t", "1",
                        "--embd-output-format", "json"] + list(args), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout, parse_float=str)["data"]
    assert [d["index"] for d in data] == list(range(len(texts))), r.stdout[:200]
    return [d["embedding"] for d in data]


class Embeddings(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Server(QWEN, "-np", 3, "-c", 3 * 128, "-b", 16, "-t", 1, "--embd-max-inputs", 8,
                       "--embd-max-tokens", 300)

    @classmethod
    def tearDownClass(cls):
        rc = cls.s.stop()
        if rc != 0:
            raise AssertionError(f"llama-server exited {rc}: " + "".join(cls.s.log))

    def embed(self, body, status=200):
        got, _, text = curl(self.s.url("/v1/embeddings"), data=json.dumps(body) if not isinstance(body, str) else body)
        self.assertEqual(got, status, text)
        return json.loads(text)

    def vectors(self, texts, **extra):
        r = self.embed(dict({"input": texts}, **extra))
        return [[f32(x) for x in d["embedding"]] for d in r["data"]]

    def tokens(self, text):
        status, _, body = curl(self.s.url("/tokenize"), data=json.dumps({"content": text, "add_special": True}))
        self.assertEqual(status, 200, body)
        return json.loads(body)["tokens"]

    def test_mode_line(self):
        self.assertTrue(any("embeddings, pooling last (the model's)" in line for line in self.s.log), self.s.log)

    def test_response_shape_and_usage(self):
        r = self.embed({"input": "The quick brown fox", "model": "q.gguf", "user": "someone"})
        self.assertEqual(set(r), {"object", "data", "model", "usage"})
        self.assertEqual(r["object"], "list")
        self.assertEqual(r["model"], "q.gguf")
        self.assertEqual(len(r["data"]), 1)
        d = r["data"][0]
        self.assertEqual((d["object"], d["index"]), ("embedding", 0))
        self.assertEqual(len(d["embedding"]), N_EMBD)
        n = len(self.tokens("The quick brown fox"))
        self.assertEqual(self.tokens("The quick brown fox")[-1], 2)  # EOS appended: last pooling reads it
        self.assertEqual(r["usage"], {"prompt_tokens": n, "total_tokens": n})
        self.assertAlmostEqual(sum(x * x for x in d["embedding"]), 1.0, delta=1e-5)  # L2-normalized
        # every form of "input": several strings (indices in order), token ids, lists of token ids
        many = self.embed({"input": TEXTS[:4]})
        self.assertEqual([d["index"] for d in many["data"]], [0, 1, 2, 3])
        total = sum(len(self.tokens(t)) for t in TEXTS[:4])
        self.assertEqual(many["usage"], {"prompt_tokens": total, "total_tokens": total})
        self.assertEqual(many["data"][2]["embedding"], d["embedding"])
        ids = [self.tokens(t) for t in TEXTS[:2]]
        self.assertEqual(self.embed({"input": ids[0]})["data"][0]["embedding"], many["data"][0]["embedding"])
        both = self.embed({"input": ids})
        self.assertEqual([x["embedding"] for x in both["data"]], [x["embedding"] for x in many["data"][:2]])
        self.assertEqual(both["usage"]["prompt_tokens"], len(ids[0]) + len(ids[1]))
        # "dimensions" equal to the model's is accepted
        self.assertEqual(self.embed({"input": "a", "dimensions": N_EMBD})["data"][0]["embedding"],
                         many["data"][0]["embedding"])

    def test_base64_is_the_little_endian_float32_bytes(self):
        floats = self.vectors(TEXTS[:3], encoding_format="float")
        r = self.embed({"input": TEXTS[:3], "encoding_format": "base64"})
        for i, d in enumerate(r["data"]):
            self.assertIsInstance(d["embedding"], str)
            raw = base64.b64decode(d["embedding"], validate=True)
            self.assertEqual(len(raw), 4 * N_EMBD)
            self.assertEqual(list(struct.unpack(f"<{N_EMBD}f", raw)), floats[i])

    def test_vectors_equal_llama_embedding(self):
        # the same file, texts and pooling (the model's: last), both L2-normalized: the server's floats
        # printed as llama-embedding prints them (%.7f) are its output, character for character
        ref = llama_embedding(QWEN, TEXTS)
        got = self.vectors(TEXTS[:7])
        self.assertEqual(len(got), len(ref))
        for i, (g, r) in enumerate(zip(got, ref)):
            self.assertEqual(["%.7f" % x for x in g], r, f"text {i} {TEXTS[i]!r}")

    def test_concurrent_clients_get_the_vectors_of_each_request_alone(self):
        # 6 clients x 3 requests of 1-4 texts on 3 slots with 16-token passes: texts of different requests
        # share passes and slots; every vector is bit-identical to the request sent alone
        reqs = [[TEXTS[(i + k) % len(TEXTS)] + " " + str(i) for k in range(1 + i % 4)] for i in range(18)]
        alone = [self.embed({"input": r}) for r in reqs]
        together = [None] * len(reqs)
        errors = []

        def client(c):
            try:
                for k in range(3):
                    i = c * 3 + k
                    together[i] = self.embed({"input": reqs[i]})
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(repr(e))

        threads = [threading.Thread(target=client, args=(c,)) for c in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        self.assertEqual(errors, [])
        for i in range(len(reqs)):
            self.assertEqual(together[i], alone[i], f"request {i}")

    def test_errors_name_the_field(self):
        url = self.s.url("/v1/embeddings")
        cases = [
            ("not JSON", "{input: 1}", 400, None, "not valid JSON", None),
            ("empty body", "", 400, None, "not a complete JSON object", None),
            ("no input", {}, 400, "input", "'input' is missing", None),
            ("empty list", {"input": []}, 400, "input", "'input' is an empty array", None),
            ("empty string", {"input": ["a", ""]}, 400, "input", "'input'[1] is an empty string", None),
            ("id out of range", {"input": [[1, 2], [5, 1000]]}, 400, "input",
             "'input'[1][1] = 1000 is not a token id: the vocabulary has ids [0, 1000)", None),
            ("negative id", {"input": [-1]}, 400, "input", "'input'[0] = -1 is not a token id", None),
            ("mixed list", {"input": ["a", 3]}, 400, "input", "'input'[1] must be a string", None),
            ("a number", {"input": 3.5}, 400, "input", "must be a string, an array of strings", None),
            ("too many texts", {"input": ["a"] * 9}, 400, "input", "'input' has 9 texts, at most 8", None),
            ("too many tokens", {"input": [[5] * 100] * 4}, 400, "input",
             "'input' has more than 300 tokens in all (400 up to 'input'[3])", None),
            ("longer than a slot", {"input": [[5] * 129]}, 400, "input",
             "'input'[0] has 129 tokens, more than the 128 tokens of a slot's context", "context_length_exceeded"),
            ("dimensions", {"input": "a", "dimensions": 64}, 400, "dimensions",
             "'dimensions' is 64: this model's embeddings have 256 dimensions", None),
            ("encoding", {"input": "a", "encoding_format": "int8"}, 400, "encoding_format",
             "must be \"float\" or \"base64\"", None),
            ("model", {"input": "a", "model": "text-embedding-3-small"}, 404, "model",
             "does not exist: this server serves 'q.gguf'", "model_not_found"),
        ]
        for what, body, status, param, words, code in cases:
            with self.subTest(what=what):
                got, _, text = curl(url, data=body if isinstance(body, str) else json.dumps(body))
                error_of(self, got, text, status, param, words, code)
        # 128 tokens (a slot's context) in one text, and exactly the 300-token bound in all, are accepted
        self.assertEqual(len(self.embed({"input": [[5] * 128]})["data"]), 1)
        self.assertEqual(self.embed({"input": [[5] * 100] * 3})["usage"]["prompt_tokens"], 300)
        # llama.cpp's /embeddings has a format of its own: not here
        status, _, text = curl(self.s.url("/embeddings"), data='{"input":"a"}')
        self.assertEqual(status, 404, text)
        status, _, text = curl(url)
        self.assertEqual(status, 405, text)
        self.assertEqual(self.s.health()["status"], "ok")

    def test_generation_is_refused_and_the_rest_answers(self):
        for path, body in (("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
                           ("/v1/completions", {"prompt": "hi"}), ("/completions", {"prompt": "hi"})):
            with self.subTest(path=path):
                status, _, text = curl(self.s.url(path), data=json.dumps(body))
                error_of(self, status, text, 400, None, "this model serves embeddings only: use POST /v1/embeddings")
        status, _, text = curl(self.s.url("/v1/models"))
        self.assertEqual(status, 200, text)
        self.assertEqual(json.loads(text)["data"][0]["id"], "q.gguf")
        h = self.s.health()
        self.assertEqual((h["status"], h["slots_processing"], h["requests_waiting"]), ("ok", 0, 0))
        self.assertEqual(self.tokens("a"), [1, 379, 2])


class Modes(unittest.TestCase):
    def test_generation_server_refuses_embeddings(self):
        s = Server(TINY, "-np", 1, "-t", 1, "-c", 256)
        try:
            status, _, text = curl(s.url("/v1/embeddings"), data='{"input":"a"}')
            error_of(self, status, text, 400, None,
                     "this server generates text; start it with --embeddings, or load an embedding model")
            status, _, text = curl(s.url("/v1/completions"), data='{"prompt":"a","max_tokens":2}')
            self.assertEqual(status, 200, text)
        finally:
            self.assertEqual(s.stop(), 0)

    def test_embeddings_flag_on_a_generation_model(self):
        # --embeddings on a file without pooling_type: pooling none, which OpenAI's endpoint cannot answer
        # (as llama.cpp's server); with --pooling mean it answers llama-embedding's mean vectors
        s = Server(TINY, "--embeddings", "-np", 2, "-t", 1, "-c", 256)
        try:
            self.assertTrue(any("pooling none: /v1/embeddings answers 400" in line for line in s.log), s.log)
            status, _, text = curl(s.url("/v1/embeddings"), data='{"input":"a"}')
            error_of(self, status, text, 400, None, "pooling 'none' (one vector per token) has no OpenAI-compatible")
            status, _, text = curl(s.url("/v1/completions"), data='{"prompt":"a"}')
            error_of(self, status, text, 400, None, "because it was started with --embeddings")
        finally:
            self.assertEqual(s.stop(), 0)
        s = Server(TINY, "--embedding", "--pooling", "mean", "-np", 2, "-t", 1, "-c", 256)
        try:
            self.assertTrue(any("embeddings, pooling mean)" in line for line in s.log), s.log)
            status, _, text = curl(s.url("/v1/embeddings"), data=json.dumps({"input": TEXTS[:3]}))
            self.assertEqual(status, 200, text)
            got = [[f32(x) for x in d["embedding"]] for d in json.loads(text)["data"]]
            ref = llama_embedding(TINY, TEXTS[:3], "--pooling", "mean")
            for i in range(3):
                self.assertEqual(["%.7f" % x for x in got[i]], ref[i], f"text {i}")
        finally:
            self.assertEqual(s.stop(), 0)

    def test_pooling_flag_overrides_the_model(self):
        for pooling in ("mean", "cls"):
            with self.subTest(pooling=pooling):
                s = Server(QWEN, "--pooling", pooling, "-np", 2, "-t", 1, "-c", 256)
                try:
                    status, _, text = curl(s.url("/v1/embeddings"), data=json.dumps({"input": TEXTS}))
                    self.assertEqual(status, 200, text)
                    got = [[f32(x) for x in d["embedding"]] for d in json.loads(text)["data"]]
                    ref = llama_embedding(QWEN, TEXTS, "--pooling", pooling)
                    for i in range(len(TEXTS)):
                        self.assertEqual(["%.7f" % x for x in got[i]], ref[i], f"text {i}")
                finally:
                    self.assertEqual(s.stop(), 0)
        # a file whose pooling_type is none (0) is still an embedding model: /v1/embeddings says why it cannot
        none = make_embd_model(os.path.join(TMP, "q-none.gguf"), pooling="none")
        s = Server(none, "-np", 1, "-t", 1, "-c", 64)
        try:
            status, _, text = curl(s.url("/v1/embeddings"), data='{"input":"a"}')
            error_of(self, status, text, 400, None, "start llama-server with --pooling mean, cls or last")
        finally:
            self.assertEqual(s.stop(), 0)


class Clients(unittest.TestCase):
    def test_client_that_leaves_frees_the_slots(self):
        # one request of 512 texts x 250 tokens (several seconds on one thread even with the int8 kernel on TL2
        # bytes; 128 texts took under 1 s there); its client gives up after 1 s: the request ends ("client gone"),
        # the slots are free, and a new request is answered
        s = Server(QWEN, "-np", 2, "-t", 1, "-c", 512, "--queue", 0, "--embd-max-tokens", 200000)
        try:
            big = json.dumps({"input": [[3 + (i * 7 + k) % 990 for k in range(249)] + [2] for i in range(512)]})
            with open(os.path.join(TMP, "big.json"), "w") as f:
                f.write(big)
            t0 = time.time()
            r = subprocess.run(["curl", "-sS", "-m", "1", "-o", "/dev/null", "--data-binary",
                                "@" + os.path.join(TMP, "big.json"), s.url("/v1/embeddings")],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 28, r.stderr)  # curl's timeout: the answer had not come
            s.wait_until(lambda h: h["slots_processing"] == 0 and h["requests_waiting"] == 0, timeout=30,
                         what="the slots freed after the client left")
            self.assertLess(time.time() - t0, 30)
            ended = [line for line in s.log if "/v1/embeddings: 512 texts" in line]
            self.assertEqual(len(ended), 1, s.log)
            self.assertIn("finish client gone", ended[0])
            status, _, text = curl(s.url("/v1/embeddings"), data='{"input":["a","b"]}')
            self.assertEqual(status, 200, text)
        finally:
            self.assertEqual(s.stop(), 0)


if __name__ == "__main__":
    unittest.main()
