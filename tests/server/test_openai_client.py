"""tests/server/test_openai_client.py — llama-server with the official OpenAI client (ctest
server_openai_client): tests/server/openai_client.js under node against the tiny dummy model (chat and
completions, 8 slots), the 125M dummy model (completions) and a small qwen3 embedding dummy
(embeddings.create), all with an API key. The npm package
"openai" comes from the npm cache (tests/tokenizer-refs/fetch_packages.sh); without it the test SKIPs,
unless BITNET_REQUIRE_NPM=1 (.ci/run), which makes that a failure.
"""
import os
import shutil
import subprocess
import tempfile
import unittest

from tests.server.server_util import ROOT, Server, make_embd_model, make_model

NPM = os.environ.get("BITNET_NPM_CACHE", os.path.join(ROOT, ".cache", "npm"))
SCRIPT = os.path.join(ROOT, "tests", "server", "openai_client.js")


def missing():
    if not shutil.which("node"):
        return "node is not installed (deps/install.sh tests)"
    if not os.path.isfile(os.path.join(NPM, "node_modules", "openai", "package.json")):
        return f"the npm package openai is not in {NPM} (tests/tokenizer-refs/fetch_packages.sh)"
    return None


class OpenAIClient(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        why = missing()
        if why:
            if os.environ.get("BITNET_REQUIRE_NPM") == "1":
                raise AssertionError(why + " and BITNET_REQUIRE_NPM=1")
            raise unittest.SkipTest(why)
        cls.tmp = tempfile.mkdtemp(prefix="bitnet_openai_")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_client(self, model, size, *server_args, chat=False, embeddings=False):
        if embeddings:
            path = make_embd_model(os.path.join(self.tmp, "dummy-qwen3-embd.gguf"))
        else:
            path = make_model(os.path.join(self.tmp, f"dummy-{size}.gguf"), size)
        s = Server(path, "--api-key", "test-key", "-np", 8, "-t", 2, *server_args)
        try:
            cmd = ["node", SCRIPT, s.url("/v1"), os.path.basename(path), "test-key"] + (["--chat"] if chat else []) + \
                (["--embeddings"] if embeddings else [])
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800,
                               env=dict(os.environ, NODE_PATH=os.path.join(NPM, "node_modules")))
            print(r.stdout, end="")
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr + "".join(s.log[-20:]))
            self.assertIn("every answer equal to the request alone", r.stdout)
        finally:
            self.assertEqual(s.stop(), 0)

    def test_tiny_chat_and_completions(self):
        self.run_client("tiny", "tiny", "-c", 8 * 256, "--chat-template", "bitnet", chat=True)

    def test_125m_completions(self):
        self.run_client("125M", "125M", "-c", 8 * 128)

    def test_embeddings(self):
        self.run_client("qwen3", "embd", "-c", 8 * 128, "-b", 64, embeddings=True)


if __name__ == "__main__":
    unittest.main()
