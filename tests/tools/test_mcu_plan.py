"""build/bin/bitnet-mcu-plan end to end (src/mcu/plan.h, boards/README.md):

- bitnet.cpp's tiny model fits one ESP32-S3 and one Cortex-M4F, and the arena the plan prints (and writes to
  the JSON) is the one bitnet-mcu-run reports for the same n_ctx and n_batch: the node runtime's own figure;
- a dummy model too big for one ESP32-S3 (I2_S, small vocabulary) needs several, and the number equals an
  independent brute force in Python over the JSON's partition model and the board's memories;
- a model whose F16 token embedding alone exceeds the ESP32-S3's flash fits no number of boards, and the tool
  says that a partition cannot split a tensor;
- errors: a bad board file (exit 1, naming file, key and value), an unknown board name (exit 1, naming the path).
No run may print a sanitizer report (the ASan build runs this too).

Environment: BITNET_BUILD_DIR (default build/), BITNET_RUN_PREFIX (the emulator of a cross build).
"""
import itertools
import json
import os
import re
import subprocess
import tempfile
import unittest

from tests.tools.paths import BIN, PREFIX, ROOT, TINY
BOARDS = os.path.join(ROOT, "boards")


def run(args):
    p = subprocess.run(PREFIX + [os.path.join(BIN, args[0])] + args[1:], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, errors="replace")
    if "Sanitizer" in p.stderr or ": runtime error: " in p.stderr or "Segmentation" in p.stderr:
        raise AssertionError(f"{' '.join(args)}: crash or sanitizer report:\n{p.stderr}")
    return p


def round64(n):
    return (n + 63) // 64 * 64


def range_bytes(pm, n_layer, a, b):
    """Flash and arena of a board holding pieces [a, b) (boards/README.md, "Partition over several boards")."""
    last = n_layer + 1
    flash = pm["node_flash_bytes"]
    kv = 0
    for p in range(a, b):
        if p == 0:
            flash += pm["first_flash_bytes"]
        elif p == last:
            flash += pm["last_flash_bytes"]
        else:
            flash += pm["layer_flash_bytes"][p - 1]
            kv += pm["layer_kv_bytes"][p - 1]
    if a == 0 and b == last + 1:
        flash -= pm["shared_flash_bytes"]
    arena = pm["node_arena_bytes"] + 2 * round64(kv // 2) + (pm["last_arena_bytes"] if b == last + 1 else 0)
    return flash, arena


def fits(board, flash, arena):
    """Some weights memory and arena memory of the board hold the two (shared when it is one memory)."""
    mems = board["memories"]
    for a in mems:
        if "arena" not in a["roles"]:
            continue
        for w in mems:
            if "weights" not in w["roles"]:
                continue
            if a is w:
                if flash + arena <= a["usable_bytes"]:
                    return True
            elif flash <= w["usable_bytes"] and arena <= a["usable_bytes"]:
                return True
    return False


def brute_force_boards(plan):
    """The fewest boards over every contiguous partition of the pieces, or None."""
    pm, n_layer = plan["partition_model"], plan["model"]["n_layer"]
    n_pieces = n_layer + 2
    best = None
    for k in range(1, n_pieces + 1):
        for cuts in itertools.combinations(range(1, n_pieces), k - 1):
            bounds = (0,) + cuts + (n_pieces,)
            if all(fits(plan["board"], *range_bytes(pm, n_layer, bounds[i], bounds[i + 1])) for i in range(k)):
                best = k
                break
        if best is not None:
            break
    return best


class McuPlanTool(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def plan(self, model, board, *extra):
        out = self.path(f"plan-{len(os.listdir(self.dir))}.json")
        p = run(["bitnet-mcu-plan", "-m", model, "--board", board, "--json", out] + list(extra))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")
        with open(out, encoding="utf-8") as f:
            return p.stdout, json.load(f)

    def dummy(self, name, *args):
        out = self.path(name)
        p = run(["bitnet-dummy", "-q", "-o", out, "--outtype", "i2_s", "--seed", "7"] + list(args))
        self.assertEqual(p.returncode, 0, p.stderr)
        return out

    def runner_arena(self, model, n_ctx, n_batch):
        p = run(["bitnet-mcu-run", "-m", model, "--tokens", "1", "-n", "0", "-c", str(n_ctx), "-b", str(n_batch)])
        self.assertEqual(p.returncode, 0, p.stderr)
        m = re.search(r"^arena: model (\d+) \+ context (\d+) .*\) = (\d+) bytes", p.stdout, re.M)
        self.assertIsNotNone(m, p.stdout)
        return int(m.group(1)), int(m.group(3))

    def test_tiny_fits_both_boards_with_the_runners_arena(self):
        size = os.path.getsize(TINY)
        for board in ("esp32s3", "cortex-m4f"):
            for n_ctx, n_batch in ((256, 1), (64, 8), (16, 32)):  # n_batch > n_ctx: both clamp it
                with self.subTest(board=board, n_ctx=n_ctx, n_batch=n_batch):
                    out, plan = self.plan(TINY, board, "--ctx", str(n_ctx), "--batch", str(n_batch))
                    model, total = self.runner_arena(TINY, n_ctx, n_batch)
                    self.assertIn(f"arena: {total} bytes", out)
                    self.assertIn(f"= node metadata {model} + context {total - model}", out)
                    self.assertIn(f"verdict: fits one {board}: ", out)
                    self.assertIn("boards needed: 1\n", out)
                    self.assertIn(f"flash: {size} bytes", out)
                    self.assertEqual(plan["format"], "bitnet-mcu-plan")
                    self.assertEqual(plan["version"], 1)
                    self.assertEqual(plan["arena"]["total_bytes"], total)
                    self.assertEqual(plan["arena"]["model_bytes"], model)
                    self.assertEqual(plan["totals"], {"flash_bytes": size, "arena_bytes": total})
                    self.assertTrue(plan["one_board"]["fits"])
                    self.assertEqual(plan["partition"]["boards"], 1)
                    self.assertEqual(len(plan["layers"]), 2)
                    rows = min(n_batch, n_ctx)
                    self.assertEqual(plan["params"], {"n_ctx": n_ctx, "n_batch": rows, "n_logits": rows})
                    self.assertEqual(plan["board"]["name"], board)
                    self.assertEqual(sum(l["kv_cache_bytes"] for l in plan["layers"]),
                                     plan["arena"]["context"]["kv_cache"])
                    self.assertEqual(plan["fixed"]["head"], "token_embd.weight")
                    self.assertIsNone(plan["fixed"]["output"])
                    self.assertEqual(plan["lut_workspace"]["largest_product"]["tensor"], "blk.0.ffn_down.weight")
                    self.assertEqual(range_bytes(plan["partition_model"], 2, 0, 4), (size, total))
                    self.assertEqual(brute_force_boards(plan), 1)
            # where the parts go: ESP32-S3 weights in flash, Cortex-M4F both in PSRAM
            _, plan = self.plan(TINY, board, "--ctx", "32")
            if board == "esp32s3":
                self.assertEqual((plan["one_board"]["weights_memory"], plan["one_board"]["arena_memory"]),
                                 ("flash", "sram"))
            else:
                self.assertEqual((plan["one_board"]["weights_memory"], plan["one_board"]["arena_memory"]),
                                 ("psram", "psram"))

    def test_model_on_several_boards(self):
        model = self.dummy("multi.gguf", "--n-embd", "768", "--n-ff", "2048", "--n-layer", "12", "--n-head", "12",
                           "--vocab-size", "1000")
        for n_ctx, want in ((256, 2), (512, 3)):
            with self.subTest(n_ctx=n_ctx):
                out, plan = self.plan(model, "esp32s3", "--ctx", str(n_ctx))
                self.assertIn("verdict: does not fit one esp32s3: ", out)
                self.assertIn(f"boards needed: {want} ({want} esp32s3 boards with contiguous layer ranges)", out)
                self.assertFalse(plan["one_board"]["fits"])
                part = plan["partition"]
                self.assertTrue(part["possible"])
                self.assertEqual(part["boards"], want)
                self.assertEqual(brute_force_boards(plan), want)
                nodes = part["nodes"]
                self.assertEqual(len(nodes), want)
                self.assertTrue(nodes[0]["token_embd"] and nodes[-1]["head"])
                self.assertEqual(sum(n["n_layers"] for n in nodes), 12)
                layer = 0
                usable = {m["name"]: m["usable_bytes"] for m in plan["board"]["memories"]}
                for n in nodes:
                    self.assertEqual(n["first_layer"], layer)
                    layer += n["n_layers"]
                    self.assertLessEqual(n["flash_bytes"], usable[n["weights_memory"]])
                    self.assertLessEqual(n["arena_bytes"], usable[n["arena_memory"]])
                # pieces: 0 token_embd, 1..12 the layers, 13 the head; each board fits, and every board but the
                # last holds as much as fits: one more piece would not
                pm = plan["partition_model"]
                for n in nodes:
                    start = 0 if n["token_embd"] else n["first_layer"] + 1
                    end = n["first_layer"] + n["n_layers"] + 1 + (1 if n["head"] else 0)
                    self.assertEqual(range_bytes(pm, 12, start, end), (n["flash_bytes"], n["arena_bytes"]))
                    self.assertTrue(fits(plan["board"], n["flash_bytes"], n["arena_bytes"]))
                    if not n["head"]:
                        self.assertFalse(fits(plan["board"], *range_bytes(pm, 12, start, end + 1)))

    def test_embedding_larger_than_flash_fits_no_number_of_boards(self):
        # an F16 token embedding of 256 x 29000 (14.8 MB) against 14.5 MB of usable flash
        model = self.dummy("big-vocab.gguf", "--n-embd", "256", "--n-ff", "512", "--n-layer", "1", "--n-head", "4",
                           "--vocab-size", "29000")
        out, plan = self.plan(model, "esp32s3", "--ctx", "64")
        self.assertIn("verdict: does not fit one esp32s3", out)
        self.assertIn("boards needed: none is enough: no number of esp32s3 boards holds this model: "
                      "token_embd.weight alone needs", out)
        self.assertIn("cannot split a tensor", out)
        self.assertEqual(plan["fixed"]["token_embd"]["type"], "F16")
        self.assertEqual(plan["fixed"]["token_embd"]["bytes"], 256 * 29000 * 2)
        self.assertFalse(plan["partition"]["possible"])
        self.assertIsNone(plan["partition"]["boards"])
        # token_embd and the tied head (token_embd again) each fit no board; the one layer does
        self.assertEqual(plan["partition"]["pieces_too_big"], 2)
        self.assertIn("2 of the 3 pieces fit no board alone: token_embd.weight, output_norm.weight + the head", out)
        self.assertIsNone(brute_force_boards(plan))
        # the same model fits the Cortex-M4F: image and arena in its 16 MiB PSRAM
        out, plan = self.plan(model, "cortex-m4f", "--ctx", "64")
        self.assertTrue(plan["one_board"]["fits"], plan["one_board"]["reason"])

    def test_board_file_errors(self):
        with open(os.path.join(BOARDS, "esp32s3.yaml"), encoding="utf-8") as f:
            good = f.read()
        cases = [
            ("negative.yaml", good.replace("bytes: 16 MiB", "bytes: -5", 1), "memories[0].bytes: '-5' is not a byte count"),
            ("unknown.yaml", good.replace("    stream_mb_s: 20\n", "    stream_mb_s: 20\n    size: 3\n", 1),
             "memories[0]: unknown key 'size'"),
            ("missing.yaml", good.replace("    kind: flash\n", "", 1), "memories[0]: missing key 'kind'"),
            ("type.yaml", good.replace("  cores: 2\n", "  cores: two\n", 1), "cpu.cores: 'two' is not an integer"),
        ]
        for name, text, message in cases:
            with self.subTest(file=name):
                self.assertNotEqual(text, good)
                path = self.path(name)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
                p = run(["bitnet-mcu-plan", "-m", TINY, "--board", path])
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertEqual(p.stdout, "")
                self.assertIn(f"bitnet-mcu-plan: error: {path}: {message}", p.stderr)
        p = run(["bitnet-mcu-plan", "-m", TINY, "--board", "no-such-board"])
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(os.path.join("boards", "no-such-board.yaml"), p.stderr)
        self.assertIn("the boards are cortex-m4f, esp32s3", p.stderr)
        p = run(["bitnet-mcu-plan", "-m", TINY])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--board", p.stderr)


if __name__ == "__main__":
    unittest.main()
