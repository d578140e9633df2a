"""tests/server/test_soak_short.py — the short soak of llama-server (issue 26): utils/soak-server.py --short
(45 s of 8 clients and 8 half-open connections on the tiny dummy model) must PASS: every greedy answer equal to
the request alone, every malformed request its 4xx, no 5xx or connection error, RSS and open fds flat after the
warm-up, fds and threads back to their count before the load, SIGTERM exiting 0. The summary (--json) must
count requests of every kind. The long run (hours on the 125M dummy) is in the script's docstring.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from tests.server.server_util import BIN, ROOT

SCRIPT = os.path.join(ROOT, "utils", "soak-server.py")
KINDS = ["completion", "completion-stream", "chat", "chat-stream", "tokenize", "info", "cancel", "malformed",
         "slowloris"]


class SoakShort(unittest.TestCase):
    def test_short_soak_passes(self):
        with tempfile.TemporaryDirectory(prefix="bitnet_soak_short_") as d:
            out = os.path.join(d, "soak.json")
            # an AddressSanitizer build keeps freed blocks in a quarantine (256 MiB by default), which would
            # count as RSS growth: a small one keeps the RSS bound meaningful there too
            env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=16")
            cmd = [sys.executable, SCRIPT, "--short", "--server", os.path.join(BIN, "llama-server"), "--json", out,
                   "--csv", os.path.join(d, "soak.csv"), "--quiet"]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=400, env=env)
            print(r.stdout, end="")
            lines = r.stdout.strip().splitlines()
            self.assertEqual(r.returncode, 0, r.stdout[-4000:] + r.stderr[-2000:])
            self.assertTrue(lines and lines[-1].startswith("soak: PASS"), r.stdout[-2000:])
            with open(out, encoding="utf-8") as f:
                s = json.load(f)
            self.assertTrue(s["pass"], s["problems"])
            self.assertEqual((s["failures"], s["mismatches"], s["5xx"], s["connection_errors"]), (0, 0, 0, 0))
            for k in KINDS:
                self.assertGreater(s["kinds"][k]["requests"], 0, k)
                self.assertEqual(s["kinds"][k]["failures"], 0, k)
            # answered requests of every kind but slowloris are 2xx, or the 4xx each malformed case expects
            for k in KINDS[:-2]:
                self.assertEqual(set(s["kinds"][k]["statuses"]) - {"200", "429"}, set(), k)
            self.assertEqual(set(s["kinds"]["malformed"]["statuses"]) - {"400", "404", "405", "413"}, set())
            self.assertGreaterEqual(len(s["malformed_cases"]), 10 if s["kinds"]["malformed"]["requests"] >= 300 else 1)
            self.assertEqual(s["sigterm_exit"], 0)
            self.assertEqual(s["slowloris_detail"]["opened"], s["kinds"]["slowloris"]["statuses"].get("open"))
            res = s["resources"]
            self.assertLessEqual(res["rss_growth_after_warmup_mib"], res["rss_bound_mib"])
            self.assertLessEqual(res["fds_max_after_warmup"], res["fds_bound"])
            self.assertLessEqual(res["fds_after"], res["fds_before"] + 2)
            # the server saw the cancellations as clients that left (one whose whole answer was already written
            # into the socket ends "finish length" on the server's side; nothing else of the soak leaves early)
            cancelled = s["kinds"]["cancel"]["statuses"]["200"]
            self.assertLessEqual(s["server_client_gone_lines"], cancelled)
            self.assertGreaterEqual(s["server_client_gone_lines"], 0.9 * cancelled)

    def test_bad_arguments_exit_2(self):
        for args, words in ((["--short", "--clients", "0"], "--clients must be >= 1"),
                            (["--model-size", "tiny", "--duration", "10", "--warmup", "10"], "--warmup must be in"),
                            (["--duration", "10"], "give -m MODEL or --model-size"),
                            (["--short", "--server", "/nonexistent/llama-server"], "not an executable file")):
            r = subprocess.run([sys.executable, SCRIPT] + args, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 2, (args, r.stdout, r.stderr))
            self.assertIn(words, r.stderr)


if __name__ == "__main__":
    unittest.main()
