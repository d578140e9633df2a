"""run_inference.py -cnv: chat through llama-cli.

Run from the repository root: `python3 -m unittest discover -s tests/scripts -t .` (the ctest entry
scripts_unittest). With a fake llama-cli: the flags, stdin, exit status and SIGINT disposition reach it.
With the real one (BITNET_BUILD_DIR/bin/llama-cli, skipped when absent): a two-turn chat on the
bitnet.cpp tiny model, the missing-template error and the full-context exit status. The detailed chat
checks (increments, positions, end-of-turn, thread counts) are in tests/test_chat.cc.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = os.path.join(REPO, "run_inference.py")
TINY = os.path.join(REPO, "tests", "data", "bitnetcpp-tiny", "ggml-model-i2_s.gguf")
BUILD = os.environ.get("BITNET_BUILD_DIR") or os.path.join(REPO, "build")


def run(args, stdin="", env=None):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([sys.executable, RUN, *args], input=stdin, capture_output=True, text=True, env=e,
                       cwd=REPO, timeout=300, errors="replace")
    return p.returncode, p.stdout, p.stderr


def have_cli() -> bool:
    return os.access(os.path.join(BUILD, "bin", "llama-cli"), os.X_OK)


class ChatThroughFakeCli(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="bitnet-chat-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def fake_cli(self, rc: int) -> str:
        """A build dir whose bin/llama-cli records argv, stdin and its SIGINT disposition, exits with rc."""
        bdir = os.path.join(self.tmp, "build")
        os.makedirs(os.path.join(bdir, "bin"))
        script = os.path.join(bdir, "bin", "llama-cli")
        record = os.path.join(self.tmp, "record.json")
        with open(script, "w") as f:
            f.write(f"#!{sys.executable}\nimport json, signal, sys\n"
                    f"json.dump({{'argv': sys.argv[1:], 'stdin': sys.stdin.read(),\n"
                    f"           'sigint_default': signal.getsignal(signal.SIGINT) is signal.SIG_DFL\n"
                    f"                             or signal.getsignal(signal.SIGINT) is signal.default_int_handler}},\n"
                    f"          open({record!r}, 'w'))\nsys.exit({rc})\n")
        os.chmod(script, os.stat(script).st_mode | stat.S_IXUSR)
        return bdir

    def record(self):
        with open(os.path.join(self.tmp, "record.json")) as f:
            return json.load(f)

    def test_turns_flags_and_exit_status_reach_llama_cli(self):
        bdir = self.fake_cli(3)
        rc, out, err = run(["-m", TINY, "-p", "You are terse.", "-cnv", "--chat-template", "llama3", "-n", "5",
                            "--build-dir", bdir], stdin="Hello\nWhat is 2+2?\n")
        self.assertEqual(rc, 3, err)  # llama-cli's "context full" status passes through
        rec = self.record()
        self.assertEqual(rec["stdin"], "Hello\nWhat is 2+2?\n")
        self.assertEqual(rec["argv"][-3:], ["--chat-template", "llama3", "-cnv"])
        opts = dict(zip(rec["argv"][:-3][0::2], rec["argv"][:-3][1::2]))
        self.assertEqual(opts["-p"], "You are terse.")
        self.assertEqual(opts["-n"], "5")
        # Ctrl-C is llama-cli's to handle: the child does not inherit the parent's "ignore"
        self.assertTrue(rec["sigint_default"], rec)

    def test_unknown_template_name_exits_2(self):
        rc, out, err = run(["-m", TINY, "-p", "x", "-cnv", "--chat-template", "chatml"])
        self.assertEqual(rc, 2)
        self.assertIn("invalid choice: 'chatml'", err)


@unittest.skipUnless(have_cli(), f"{BUILD}/bin/llama-cli not built")
class ChatThroughLlamaCli(unittest.TestCase):
    def test_two_turns(self):
        rc, out, err = run(["-m", TINY, "-p", "Be brief.", "-cnv", "--chat-template", "llama3", "-n", "4",
                            "-temp", "0", "-t", "1", "--build-dir", BUILD], stdin="Hello\nAnd again\n")
        self.assertEqual(rc, 0, err)
        self.assertIn("chat template llama3 (from --chat-template)", err)
        self.assertIn("llama-cli: chat: 2 turns, n_past ", err)
        # a marker before each of the two turns and before the end of input; two reply lines
        self.assertTrue(out.startswith("> "), out)
        self.assertEqual(out.count("\n> "), 2, out)
        self.assertTrue(out.endswith("\n> \n"), out)

    def test_model_without_template_needs_one(self):
        rc, out, err = run(["-m", TINY, "-p", "x", "-cnv", "--build-dir", BUILD], stdin="Hi\n")
        self.assertEqual(rc, 1, err)
        self.assertIn("no tokenizer.chat_template key", err)
        self.assertIn("choose a template with --chat-template NAME", err)

    def test_full_context_exits_3(self):
        rc, out, err = run(["-m", TINY, "-p", "You are a very helpful assistant.", "-cnv", "--chat-template",
                            "falcon3", "-c", "8", "-t", "1", "--build-dir", BUILD], stdin="Hi\n")
        self.assertEqual(rc, 3, err)
        self.assertIn("the context is full", err)


if __name__ == "__main__":
    unittest.main()
