"""The bad-input table of docs/RELIABILITY.md, run: every row between the markers
<!-- bad-inputs:begin --> and <!-- bad-inputs:end --> is one command on one bad input, with the text its
message must contain and its exit status. The table is the documentation and the test at once: a row
whose message or status changes fails here, and a row cannot be added without being checked.

Columns: | bad input | command | message contains | exit |
Placeholders in `command` and `message contains` (each in backquotes in the table):
  {bin}    this build's bin/ (BITNET_BUILD_DIR)       {tiny}  bitnet.cpp's tiny I2_S model (tests/data)
  {tmp}    a scratch directory holding the fixtures below, made once for the whole table
Fixtures (files in {tmp}, made by FIXTURES below from the tiny model and hand-written text):
  text.txt, trunc.gguf (the tiny model's first 1000 bytes), cut.gguf (its first 700000 bytes),
  badtiles.yaml (configs/bitnetcpp-tiny.yaml with block_k 100), broken.yaml (a YAML syntax error),
  board.yaml (an unknown key),
  plan.yaml (a plan of utils/plan-cluster.py, tests/fuzz/corpus/cluster_plan/loopback-1.yaml, with version
  2), hf/ (a Hugging Face folder whose hidden_size is a string),
  spm/ (a tokenizer.model whose piece has type 9), norecord-tl2.gguf (a TL2 file without tile record),
  x86rec.gguf (an I2_S dummy model, which records its layout: x86).
No run may print a sanitizer report (the AddressSanitizer build runs this too).
Environment: BITNET_BUILD_DIR (default build/), BITNET_RUN_PREFIX (the emulator of a cross build)."""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest

from tests.tools.paths import BIN, PREFIX, ROOT, TINY

DOC = os.path.join(ROOT, "docs", "RELIABILITY.md")


def table_rows():
    """(line number, bad input, command, message, exit status) of each row of the table."""
    with open(DOC, encoding="utf-8") as f:
        lines = f.read().split("\n")
    begin = lines.index("<!-- bad-inputs:begin -->")
    end = lines.index("<!-- bad-inputs:end -->")
    rows = []
    for i in range(begin + 1, end):
        line = lines[i].strip()
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == "bad input":
            continue
        if len(cells) != 4:
            raise AssertionError(f"{DOC}:{i + 1}: a row needs 4 cells, got {len(cells)}: {line}")
        code = [re.fullmatch(r"`(.*)`", c) for c in cells[1:3]]
        if not all(code) or not cells[3].isdigit():
            raise AssertionError(f"{DOC}:{i + 1}: command and message must be `code`, exit a number: {line}")
        rows.append((i + 1, cells[0], code[0].group(1), code[1].group(1), int(cells[3])))
    return rows


def pb_field(num, wire, payload):
    """One protobuf field (sentencepiece_model.proto's encoding): key varint, then the payload."""
    def varint(x):
        out = b""
        while True:
            b, x = x & 0x7F, x >> 7
            out += bytes([b | (0x80 if x else 0)])
            if not x:
                return out
    key = varint(num << 3 | wire)
    return key + (varint(len(payload)) + payload if wire == 2 else varint(payload))


def make_fixtures(tmp):
    """Writes the fixtures the table's commands name into the directory tmp (see the module docstring)."""
    with open(TINY, "rb") as f:
        tiny = f.read()
    with open(os.path.join(tmp, "text.txt"), "w") as f:
        f.write("hello\n")
    with open(os.path.join(tmp, "trunc.gguf"), "wb") as f:
        f.write(tiny[:1000])
    with open(os.path.join(tmp, "cut.gguf"), "wb") as f:
        f.write(tiny[:700000])
    with open(os.path.join(ROOT, "configs", "bitnetcpp-tiny.yaml")) as f:
        cfg = f.read()
    with open(os.path.join(tmp, "badtiles.yaml"), "w") as f:
        f.write(re.sub(r"block_k: \d+", "block_k: 100", cfg, count=1))
    with open(os.path.join(tmp, "broken.yaml"), "w") as f:
        f.write("x: [1, 2\n")
    with open(os.path.join(tmp, "board.yaml"), "w") as f:
        f.write("name: x\nbogus: 1\n")
    with open(os.path.join(ROOT, "tests", "fuzz", "corpus", "cluster_plan", "loopback-1.yaml")) as f:
        plan = f.read()
    with open(os.path.join(tmp, "plan.yaml"), "w") as f:
        f.write(plan.replace("\nversion: 1\n", "\nversion: 2\n"))
    os.makedirs(os.path.join(tmp, "hf"))
    with open(os.path.join(tmp, "hf", "config.json"), "w") as f:
        f.write('{"architectures": ["LlamaForCausalLM"], "hidden_size": "64"}')
    os.makedirs(os.path.join(tmp, "spm"))
    with open(os.path.join(tmp, "spm", "tokenizer.model"), "wb") as f:
        # TrainerSpec{model_type: BPE}, then a piece {type: 9, piece: "abc"}: its text is the file's end
        f.write(pb_field(2, 2, pb_field(3, 0, 2)) + pb_field(1, 2, pb_field(3, 0, 9) + pb_field(1, 2, b"abc")))
    subprocess.run(PREFIX + [os.path.join(BIN, "bitnet-dummy"), "-o", os.path.join(tmp, "norecord-tl2.gguf"),
                             "--n-embd", "256", "--n-ff", "256", "--n-layer", "1", "--n-head", "2", "--vocab-size",
                             "259", "--outtype", "tl2", "--no-tile-record", "-q"], check=True)
    subprocess.run(PREFIX + [os.path.join(BIN, "bitnet-dummy"), "-o", os.path.join(tmp, "x86rec.gguf"),
                             "--n-embd", "256", "--n-ff", "256", "--n-layer", "1", "--n-head", "2", "--vocab-size",
                             "259", "--outtype", "i2_s", "-q"], check=True)


class BadInputs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="bitnet-bad-inputs-")
        make_fixtures(cls.tmp)
        # --plan is always parsed; a build without Open MPI and OpenSSL refuses it with this sentence
        probe = subprocess.run(PREFIX + [os.path.join(BIN, "llama-cli"), "-m", TINY, "--plan",
                                         os.path.join(cls.tmp, "plan.yaml"), "-p", "hi"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                               timeout=300, env=dict(os.environ, ASAN_OPTIONS=":".join(
                                   filter(None, [os.environ.get("ASAN_OPTIONS", ""), "detect_leaks=0"]))))
        cls.have_plan = "this build has no cluster support" not in probe.stdout

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_table_has_rows(self):
        self.assertGreaterEqual(len(table_rows()), 10)

    def test_every_row(self):
        subst = {"{bin}": BIN, "{tiny}": TINY, "{tmp}": self.tmp}
        for line, what, cmd, msg, status in table_rows():
            for k, v in subst.items():
                cmd, msg = cmd.replace(k, v), msg.replace(k, v)
            argv = shlex.split(cmd)
            if "--plan" in argv and not self.have_plan:
                continue  # a build without cluster support refuses every plan (the probe above saw that refusal)
            if argv[0] == "python3":
                argv[0] = sys.executable
            elif argv[0].startswith(BIN):
                argv = PREFIX + argv
            env = dict(os.environ)
            if "--plan" in argv:  # Open MPI's own allocations are not freed at exit (as ctest cluster_mpi)
                env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS", ""), "detect_leaks=0"]))
            with self.subTest(row=line, input=what):
                p = subprocess.run(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   errors="replace", timeout=300, env=env)
                self.assertNotRegex(p.stderr, r"Sanitizer|runtime error:|Traceback|Segmentation", cmd)
                self.assertEqual(p.returncode, status, f"{DOC}:{line}: {cmd}\n{p.stderr[-2000:]}")
                self.assertIn(msg, p.stdout + p.stderr, f"{DOC}:{line}: {cmd}")


if __name__ == "__main__":
    unittest.main()
