"""utils/plan-cluster.py (docs/CLUSTER.md, clusters/README.md):

- the partition DP equals a brute force over every composition of the layers, on hundreds of random small
  cases with ties (small integer costs) and stages that do not fit, for both objectives;
- bitnet.cpp's tiny model on two ESP32-S3 boards over UART: every predicted number equals the one computed
  here by hand from the board, the cluster file and bitnet-mcu-plan's JSON;
- the plan file: the contract's keys and types, the model's bytes, SHA-256 and shape, a do-not-edit banner,
  the same bytes on two runs, link_to_next null for one node;
- --layers: every split of an 8-layer model on 2 nodes, refusals of a wrong sum, a zero entry, a count that
  differs from the nodes (exit 2), and a forced split that overflows a node (exit 1, naming it);
- an infeasible cluster: the number of extra ESP32-S3 boards the planner asks for equals an independent
  search over the JSON's partition model; an embedding no board holds: no number helps;
- bad cluster files (exit 2, naming the file and the key path, no traceback).

Models: tests/data/bitnetcpp-tiny and small bitnet-dummy models written to a temporary directory.
Environment: BITNET_BUILD_DIR (default build/), BITNET_RUN_PREFIX (the emulator of a cross build).
"""
import hashlib
import importlib.util
import itertools
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import unittest
from fractions import Fraction

import yaml

from tests.tools.paths import BIN, BUILD, PREFIX, ROOT, TINY
PLANNER = os.path.join(ROOT, "utils", "plan-cluster.py")
CLUSTERS = os.path.join(ROOT, "clusters")

_spec = importlib.util.spec_from_file_location("plan_cluster", PLANNER)
pc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pc)


def plan(*args):
    env = dict(os.environ, BITNET_BUILD_DIR=BUILD)
    return subprocess.run([sys.executable, PLANNER] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=env, cwd=ROOT)


def mcu_json(model, board, ctx, batch):
    with tempfile.TemporaryDirectory() as td:
        out = os.path.join(td, "p.json")
        p = subprocess.run(PREFIX + [os.path.join(BIN, "bitnet-mcu-plan"), "-m", model, "--board", board, "--ctx",
                                     str(ctx), "--batch", str(batch), "--json", out],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert p.returncode == 0, p.stderr
        with open(out) as f:
            return json.load(f)


def compositions(total, parts):
    """Every list of `parts` positive integers summing to `total`."""
    for cuts in itertools.combinations(range(1, total), parts - 1):
        b = (0,) + cuts + (total,)
        yield [b[i + 1] - b[i] for i in range(parts)]


def brute_key(cost, counts, objective, link_max):
    """The documented order (docs/CLUSTER.md "Partition"): latency = (sum of stage token times, prompt
    bottleneck, counts); throughput = (prompt bottleneck, sum, counts); the bottleneck includes the links."""
    j, tot, bott = 0, 0, link_max
    for i, n in enumerate(counts):
        c = cost(i, j, j + n)
        if c is None:
            return None
        tot += c[0]
        bott = max(bott, c[1])
        j += n
    return (tot, bott, counts) if objective == "latency" else (bott, tot, counts)


def round64(n):
    return (n + 63) // 64 * 64


def ring_fits(facts, n_nodes):
    """Independent check: some partition of the layers over n_nodes identical boards holds, with stage 0
    holding token_embd, output_norm and the head (a tied head once) -- boards/README.md's partition model
    with the ring placement, and its placement rule."""
    pm, mems = facts["partition_model"], facts["board"]["memories"]
    L = facts["model"]["n_layer"]

    def fits(first, a, b):
        w = pm["node_flash_bytes"] + sum(pm["layer_flash_bytes"][a:b])
        ar = pm["node_arena_bytes"] + 2 * round64(sum(pm["layer_kv_bytes"][a:b]) // 2)
        if first:
            w += pm["first_flash_bytes"] + pm["last_flash_bytes"] - pm["shared_flash_bytes"]
            ar += pm["last_arena_bytes"]
        for am in mems:
            for wm in mems:
                if "arena" in am["roles"] and "weights" in wm["roles"]:
                    if (am is wm and w + ar <= am["usable_bytes"]) or \
                       (am is not wm and w <= wm["usable_bytes"] and ar <= am["usable_bytes"]):
                        return True
        return False

    for counts in compositions(L, n_nodes):
        j, ok = 0, True
        for i, c in enumerate(counts):
            ok = ok and fits(i == 0, j, j + c)
            j += c
        if ok:
            return True
    return False


class PlanClusterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="test-plan-cluster-")
        cls.dir = cls.tmp.name
        dummy = os.path.join(BIN, "bitnet-dummy")
        cls.m8 = os.path.join(cls.dir, "l8.gguf")      # tiny width, 8 layers, vocab 512
        cls.bigvocab = os.path.join(cls.dir, "v32k.gguf")  # tiny width, F16 embedding of 16 MB
        for out, extra in ((cls.m8, ["--n-layer", "8", "--vocab-size", "512"]),
                           (cls.bigvocab, ["--n-layer", "2", "--vocab-size", "32002"])):
            p = subprocess.run(PREFIX + [dummy, "-o", out, "--n-embd", "256", "--n-ff", "768", "--n-head", "4",
                                         "--outtype", "i2_s"] + extra,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            assert p.returncode == 0, p.stderr

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    # ---- the DP ----------------------------------------------------------------------------------------

    def test_dp_equals_brute_force(self):
        rng = random.Random(1234)
        cases = 0
        for _ in range(600):
            n = rng.randint(1, 4)
            L = rng.randint(n, 7)
            table = {}
            for i in range(n):
                for a in range(L):
                    for b in range(a + 1, L + 1):
                        if rng.random() < 0.15:
                            table[(i, a, b)] = None  # does not fit
                        else:
                            # small integers: many ties; rationals now and then
                            table[(i, a, b)] = (Fraction(rng.randint(0, 6), rng.choice((1, 1, 2, 3))),
                                                Fraction(rng.randint(0, 6)))
            cost = lambda i, a, b: table[(i, a, b)]
            link_max = Fraction(rng.choice((0, 0, 2, 4)))
            for obj in ("latency", "throughput"):
                keys = [k for c in compositions(L, n) if (k := brute_key(cost, c, obj, link_max)) is not None]
                want = min(keys)[2] if keys else None
                got = pc.optimal_partition(cost, n, L, obj, link_max)
                self.assertEqual(got, want, f"n={n} L={L} {obj} table={table}")
                cases += 1
        self.assertEqual(cases, 1200)

    def test_dp_on_real_costs(self):
        """Both objectives on the loopback file (1 to 4 nodes), the ESP32-S3 and the mixed files with the
        8-layer model: the DP's partition is the brute force's over the planner's own stage costs."""
        for cfile, counts in (("host-loopback-4.yaml", (1, 2, 3, 4)), ("esp32s3-uart-2.yaml", (2,)),
                              ("esp32s3-spi-4.yaml", (4,)), ("mixed-rpi-esp32s3-uart-4.yaml", (4,))):
            cl = pc.load_cluster(os.path.join(CLUSTERS, cfile))
            for n in counts:
                nodes = cl["nodes"][:n]
                links = pc.ring_links(cl, nodes)
                facts = {nd["board_file"]: mcu_json(self.m8, nd["board_file"], 512, 8) for nd in nodes}
                m = pc.Model(facts, nodes, links, 8)
                for obj in ("latency", "throughput"):
                    lm = max(m.link_batch)
                    keys = [k for c in compositions(8, n) if (k := brute_key(m.cost, c, obj, lm)) is not None]
                    self.assertEqual(pc.optimal_partition(m.cost, n, 8, obj, lm), min(keys)[2], (cfile, n, obj))

    # ---- one ESP32-S3 example by hand ------------------------------------------------------------------

    def test_esp32s3_uart_2_by_hand(self):
        out = os.path.join(self.dir, "tiny-uart2.yaml")
        p = plan("-m", TINY, "--cluster", "clusters/esp32s3-uart-2.yaml", "--ctx", "64", "--out", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(out) as f:
            pl = yaml.safe_load(f)
        s0, s1 = pl["stages"]
        self.assertEqual((s0["first_layer"], s0["n_layers"], s1["first_layer"], s1["n_layers"]), (0, 1, 1, 1))
        # memory: bitnet-mcu-plan's tiny-model figures at n_ctx 64, n_batch 8 (boards/README.md partition model)
        j = mcu_json(TINY, os.path.join(ROOT, "boards", "esp32s3.yaml"), 64, 8)
        pm = j["partition_model"]
        self.assertEqual(pm["layer_flash_bytes"], [219360, 219360])
        self.assertEqual((pm["node_flash_bytes"], pm["first_flash_bytes"], pm["last_flash_bytes"],
                          pm["shared_flash_bytes"]), (13056, 262144, 263168, 262144))
        # stage 0: header 13056 + token_embd 262144 + layer 0 219360 + output_norm 1024 (the tied head once)
        self.assertEqual(s0["predicted"]["weights_bytes"], 13056 + 262144 + 219360 + 1024)
        self.assertEqual(s1["predicted"]["weights_bytes"], 13056 + 219360)
        kv = pm["layer_kv_bytes"][0]
        self.assertEqual(kv, 65536)  # 2 (K, V) x 256 x 64 positions x 2 bytes (F16)
        self.assertEqual(s1["predicted"]["arena_bytes"], pm["node_arena_bytes"] + kv)
        self.assertEqual(s0["predicted"]["arena_bytes"], pm["node_arena_bytes"] + kv + pm["last_arena_bytes"])
        self.assertEqual(pm["last_arena_bytes"], 8 * 512 * 4)  # n_batch rows of 512 float logits
        self.assertEqual((s0["predicted"]["weights_memory"], s0["predicted"]["arena_memory"]), ("flash", "sram"))
        self.assertEqual((s0["weights_capacity_bytes"], s0["arena_capacity_bytes"]), (14548992, 311296))
        self.assertIs(s0["shared_memory"], False)  # flash and SRAM
        # time, stage 1: 219360 layer bytes / 9885739 B/s + 219360 / 20e6 (flash) + KV at position 32:
        # 2 x 256 x 33 positions x 2 bytes = 33792 bytes / 960e6 (sram); memory_time add
        t1 = 219360 / 9885739 + 219360 / 20e6 + 33792 / 960e6
        self.assertAlmostEqual(s1["predicted"]["compute_s_per_token"], t1, delta=1e-12)
        # stage 0 adds the head (the tied F16 token_embd, 262144 bytes), a row (512) and output_norm (1024)
        # at the head rate 21818181 B/s, and the same bytes from flash
        h = 262144 + 512 + 1024
        t0 = t1 + h / 21818181 + h / 20e6
        self.assertAlmostEqual(s0["predicted"]["compute_s_per_token"], t0, delta=1e-12)
        self.assertAlmostEqual(s0["predicted"]["compute_s_per_batch"], 8 * t0, delta=1e-12)
        # link: B = 4 x 256 + 32 = 1056 bytes, 5 frames of <= 256 with 8 bytes each, 460800 baud / 10
        tl = 0.0005 + (1056 + 5 * 8) / 46080
        self.assertAlmostEqual(s0["predicted"]["link_s_per_token"], tl, delta=1e-15)
        tb = 0.0005 + (8 * 1024 + 32 + 33 * 8) / 46080  # a micro-batch of 8: 8224 bytes, 33 frames
        self.assertAlmostEqual(s1["predicted"]["link_s_per_batch"], tb, delta=1e-15)
        self.assertAlmostEqual(pl["predicted"]["generation_tokens_s"], 1 / (t0 + t1 + 2 * tl), delta=1e-9)
        self.assertAlmostEqual(pl["predicted"]["prompt_tokens_s"], 8 / max(8 * t0, 8 * t1, tb), delta=1e-9)
        self.assertEqual(pl["predicted"]["bottleneck"], "stage 0 compute")

    # ---- the plan file ---------------------------------------------------------------------------------

    def test_plan_file_contract_and_determinism(self):
        a, b = os.path.join(self.dir, "a.yaml"), os.path.join(self.dir, "b.yaml")
        for out in (a, b):
            p = plan("-m", self.m8, "--cluster", "clusters/host-loopback-4.yaml", "--nodes", "3", "--out", out)
            self.assertEqual(p.returncode, 0, p.stderr)
        with open(a, "rb") as f:
            ta = f.read()
        with open(b, "rb") as f:
            self.assertEqual(ta, f.read())
        text = ta.decode()
        self.assertTrue(text.startswith("# Written by utils/plan-cluster.py from ") and "do not edit" in
                        text.splitlines()[0])
        pl = yaml.safe_load(text)
        self.assertEqual((pl["format"], pl["version"]), ("bitnet-cluster-plan", 1))
        with open(self.m8, "rb") as f:
            data = f.read()
        self.assertEqual(pl["model"], {"file": self.m8, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                                       "arch": "bitnet", "n_layer": 8, "n_embd": 256, "n_vocab": 512})
        self.assertEqual(pl["params"], {"n_ctx": 512, "n_batch": 8, "objective": "latency"})
        self.assertEqual(pl["cluster"], {"file": "clusters/host-loopback-4.yaml", "name": "host-loopback-4"})
        st = pl["stages"]
        self.assertEqual([s["node"] for s in st], ["host0", "host1", "host2"])
        nxt = 0
        for i, s in enumerate(st):
            self.assertEqual(s["first_layer"], nxt)
            self.assertGreaterEqual(s["n_layers"], 1)
            nxt += s["n_layers"]
            self.assertIs(s["token_embd"], i == 0)
            self.assertIs(s["head"], i == 0)
            for k in ("weights_capacity_bytes", "arena_capacity_bytes"):
                self.assertIsInstance(s[k], int)
            ln = s["link_to_next"]
            self.assertEqual(set(ln), {"kind", "bandwidth_bytes_s", "latency_s", "frame_payload_bytes",
                                       "frame_overhead_bytes"})
            self.assertIsInstance(ln["latency_s"], float)
            self.assertGreater(ln["bandwidth_bytes_s"], 0)
            self.assertLessEqual(s["predicted"]["weights_bytes"] + s["predicted"]["arena_bytes"],
                                 s["weights_capacity_bytes"])  # one RAM holds both on this board
            self.assertIs(s["shared_memory"], True)
        self.assertEqual(nxt, 8)
        self.assertGreater(pl["predicted"]["generation_tokens_s"], 0)
        # one node: no link, the whole model on host0
        p = plan("-m", self.m8, "--cluster", "clusters/host-loopback-4.yaml", "--nodes", "1", "--out", a)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(a) as f:
            one = yaml.safe_load(f)
        self.assertIsNone(one["stages"][0]["link_to_next"])
        self.assertEqual(one["stages"][0]["n_layers"], 8)
        # --json prints the same plan
        p = plan("-m", self.m8, "--cluster", "clusters/host-loopback-4.yaml", "--nodes", "1", "--json")
        self.assertEqual(json.loads(p.stdout)["model"], one["model"])

    # ---- --layers --------------------------------------------------------------------------------------

    def test_forced_layers(self):
        out = os.path.join(self.dir, "f.yaml")
        for k in range(1, 8):
            p = plan("-m", self.m8, "--cluster", "clusters/host-loopback-4.yaml", "--nodes", "2",
                     "--layers", f"{k},{8 - k}", "--out", out)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(out) as f:
                text = f.read()
            self.assertIn("# Layer counts forced by --layers", text)
            st = yaml.safe_load(text)["stages"]
            self.assertEqual([(s["first_layer"], s["n_layers"]) for s in st], [(0, k), (k, 8 - k)])
        for bad, what in (("3,4", "sum to 7"), ("0,8", "at least one layer"), ("2,2,4", "3 counts for 2 nodes"),
                          ("a,b", "integers")):
            p = plan("-m", self.m8, "--cluster", "clusters/host-loopback-4.yaml", "--nodes", "2", "--layers", bad)
            self.assertEqual(p.returncode, 2, (bad, p.stderr))
            self.assertIn(what, p.stderr)
            self.assertNotIn("Traceback", p.stderr)
        # a forced split whose stage overflows a board: n_ctx 2048 puts 2 MiB of KV per layer in PSRAM
        p = plan("-m", self.m8, "--cluster", "clusters/esp32s3-uart-2.yaml", "--ctx", "2048", "--layers", "1,7")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("node s3-1 (stage 1, esp32s3, layers 1-7)", p.stderr)
        self.assertIn("the arena", p.stderr)

    # ---- infeasible clusters ---------------------------------------------------------------------------

    def test_extra_nodes_counted(self):
        ctx = 2048
        p = plan("-m", self.m8, "--cluster", "clusters/esp32s3-uart-2.yaml", "--ctx", str(ctx))
        self.assertEqual(p.returncode, 1, p.stderr)
        facts = mcu_json(self.m8, os.path.join(ROOT, "boards", "esp32s3.yaml"), ctx, 8)
        need = next(n for n in range(2, 9) if ring_fits(facts, n))
        self.assertGreater(need, 2)
        self.assertIn(f"{need - 2} more esp32s3 node", p.stderr)
        self.assertIn(f"{need} nodes", p.stderr)
        self.assertIn("hold at most", p.stderr)
        # the 4- and 8-board files: planned exactly when the independent check finds a partition
        for n in (4, 8):
            p = plan("-m", self.m8, "--cluster", f"clusters/esp32s3-uart-{n}.yaml", "--ctx", str(ctx))
            self.assertEqual(p.returncode, 0 if ring_fits(facts, n) else 1, (n, p.stderr))

    def test_no_number_helps(self):
        p = plan("-m", self.bigvocab, "--cluster", "clusters/esp32s3-uart-2.yaml")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("node s3-0 (stage 0, esp32s3) cannot hold token_embd", p.stderr)
        self.assertIn("over by", p.stderr)
        self.assertIn("no number of additional esp32s3 nodes", p.stderr)
        p = plan("-m", TINY, "--cluster", "clusters/host-loopback-4.yaml")
        self.assertEqual(p.returncode, 1)
        self.assertIn("4 nodes but 2 layers", p.stderr)

    # ---- bad cluster files -----------------------------------------------------------------------------

    def test_bad_cluster_files(self):
        with open(os.path.join(CLUSTERS, "esp32s3-uart-2.yaml")) as f:
            good = f.read()
        cases = [
            ("unknown key", good.replace("  - from: s3-1\n", "  - from: s3-1\n    colour: red\n"),
             "links[1].colour: unknown key"),
            ("wrong type", good.replace("baud: 460800", "baud: fast", 1), "links[0].baud: expected an integer, got 'fast'"),
            ("missing link", good[:good.index("  - from: s3-1")], "links: no link from 's3-1' to 's3-0'"),
            ("negative bandwidth", good.replace("baud: 460800", "baud: -9600", 1), "links[0].baud: -9600 out of range"),
            ("bad kind", good.replace("kind: uart", "kind: carrier-pigeon", 1), "links[0].kind: 'carrier-pigeon' is not one of"),
            ("missing key", good.replace("      memory_time: add\n", "", 1), "nodes[0].compute.memory_time: missing required key"),
            ("zero rate", good.replace("weight_bytes_per_s: 9885739", "weight_bytes_per_s: 0", 1),
             "nodes[0].compute.weight_bytes_per_s: 0 out of range"),
            ("unknown board", good.replace("board: esp32s3", "board: esp32s9", 1), "nodes[0].board: 'esp32s9': no such board"),
            ("unknown node", good.replace("to: s3-1", "to: s3-9", 1), "links[0].to: 's3-9' is not a node"),
            ("repeated key", good.replace("name: esp32s3-uart-2\n", "name: esp32s3-uart-2\nname: again\n"), "repeated key 'name'"),
            ("spi key on uart", good.replace("baud: 460800", "baud: 460800\n    clock_hz: 1000000", 1),
             "links[0].clock_hz: unknown key"),
            ("not yaml", "nodes: [", "not valid YAML"),
        ]
        for what, text, msg in cases:
            path = self.write("bad.yaml", text)
            p = plan("-m", TINY, "--cluster", path)
            self.assertEqual(p.returncode, 2, (what, p.stderr))
            self.assertIn(path + ": ", p.stderr, what)
            self.assertIn(msg, p.stderr, what)
            self.assertNotIn("Traceback", p.stderr, what)
        p = plan("-m", TINY, "--cluster", "clusters/esp32s3-uart-2.yaml", "--nodes", "3")
        self.assertEqual(p.returncode, 2)
        self.assertIn("has 2 nodes", p.stderr)

    def test_shipped_cluster_files_load(self):
        for name in sorted(os.listdir(CLUSTERS)):
            if name.endswith(".yaml"):
                cl = pc.load_cluster(os.path.join(CLUSTERS, name))
                pc.ring_links(cl, cl["nodes"])
                for n in range(1, len(cl["nodes"]) + 1) if name.startswith("host-loopback") else ():
                    pc.ring_links(cl, cl["nodes"][:n])


if __name__ == "__main__":
    unittest.main()
