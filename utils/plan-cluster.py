#!/usr/bin/env python3
"""Plan a pipeline (ring) of nodes for a BitNet GGUF model: which contiguous layer range each node of a
cluster holds, where its tensors go, and the predicted tokens/s (docs/CLUSTER.md).

    python3 utils/plan-cluster.py -m MODEL --cluster CLUSTER.yaml [--ctx 512] [--batch 8]
        [--objective latency|throughput] [--nodes N] [--layers A,B,C] [--out PLAN.yaml] [--json]

Inputs: the model (its facts come from this build's `bin/bitnet-mcu-plan --json`, run once per distinct
board of the cluster; the build directory is $BITNET_BUILD_DIR or ./build, as for
utils/generate-dummy-bitnet-model.py) and a cluster file (schema: clusters/README.md). Board files are
validated by bitnet-mcu-plan, not here. Output: PLAN.yaml in the format of docs/CLUSTER.md ("The plan
file"), written only with --out (through a temporary file, renamed); a human summary on stdout, or the
plan as JSON with --json.

The ring: stage 0 runs on the first node and holds token_embd, output_norm and the head (a tied head is
token_embd, stored once) plus the first layers; stage i holds the next contiguous layers; the hidden state
goes 0 -> 1 -> ... -> N-1 -> 0. Nodes are used in the cluster file's order (the first N with --nodes N);
every node holds at least one layer.

Cost model (docs/CLUSTER.md, "Cost model"; all times in seconds, bytes as bitnet-mcu-plan counts them):
  arith(stage) = layer tensor bytes / weight_bytes_per_s
                 + (stage 0: head + token_embd row + output_norm bytes) / head_bytes_per_s
  mem(stage)   = (the same bytes) / (weights memory stream_mb_s * 1e6)
                 + KV bytes read at position n_ctx/2 for its layers / (arena memory stream_mb_s * 1e6)
  compute_s_per_token = arith + mem      (memory_time: add -- an in-order MCU core stalls on cache misses)
                      = max(arith, mem)  (memory_time: overlap -- a host core streams while it computes)
  compute_s_per_batch = n_batch * compute_s_per_token, or with prompt_weight_bytes_per_s (a node whose
                        kernels reuse the weights across the batch's columns):
                        combine(n_batch * weight bytes / prompt_weight_bytes_per_s,
                                weight bytes / stream + n_batch * KV / stream)
  link t(B)    = latency_s + (B + ceil(B / frame_payload_bytes) * frame_overhead_bytes) / bandwidth_bytes_s
                 with B = 4 * n_embd + 32 per token and 4 * n_embd * n_batch + 32 per micro-batch
                 (the formula of the plan format; N links per token for N >= 2, none for N = 1)
  generation tokens/s = 1 / (sum of compute_s_per_token + sum of link_s_per_token)  (one token in flight)
  prompt tokens/s     = n_batch / max(every compute_s_per_batch, every link_s_per_batch) (pipelined)

Partition (function `optimal_partition`): a min-sum dynamic program over layer boundaries with a cap on
the stage batch time, g[i][j] = min over k of tok(i, j, k) + g[i+1][k] (node i takes layers [j, k)),
over stages whose tensors fit the node and whose batch time is at most the cap, and a binary search over
the finitely many candidate caps (the stage batch times). Objective latency: minimal sum of stage token
times, then minimal prompt bottleneck, then the lexicographically smallest list of layer counts;
throughput: minimal prompt bottleneck, then minimal sum, then the same list order. Exact rational
arithmetic (fractions.Fraction), so ties are ties and the result does not depend on summation order.
Tested against brute force over every composition (tests/tools/test_plan_cluster.py).

Exit status: 0 planned; 1 the cluster cannot hold the model (the message names the node and the memory
rule and says how many more nodes of the last node's kind would be needed, or that none would help), or
the model or a board file is refused by bitnet-mcu-plan, or a file cannot be written; 2 bad command line,
bad cluster file (the message names the file, the key path and the value), bad --layers.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from fractions import Fraction

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOARDS_DIR = os.path.join(ROOT, "boards")
LINK_KINDS = ("uart", "spi", "espnow", "ethernet", "loopback")
HEADER_BYTES = 32  # the fixed header the runtime sends with every hidden-state message (plan format)
DEFAULT_CTX = 512
DEFAULT_BATCH = 8


class UserError(Exception):
    """Bad command line or cluster file: printed without a traceback, exit status 2."""


class PlanError(Exception):
    """The model cannot be planned on the cluster, or a tool or file failed: exit status 1."""


# ---- cluster file --------------------------------------------------------------------------------------

_NUM_RE = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+")


def _fail(path, where, msg):
    raise UserError(f"{path}: {where}: {msg}")


def _vtext(v):
    return "a mapping" if isinstance(v, dict) else "a list" if isinstance(v, list) else repr(v)


def _mapping(path, where, v, required, optional=()):
    """Check that v is a mapping with every required key and no key outside required + optional."""
    if not isinstance(v, dict):
        _fail(path, where or "top level", f"expected a mapping, got {_vtext(v)}")
    for k in v:
        if k not in required and k not in optional:
            allowed = ", ".join(list(required) + list(optional))
            _fail(path, f"{where}.{k}" if where else str(k), f"unknown key (allowed: {allowed})")
    for k in required:
        if k not in v:
            _fail(path, f"{where}.{k}" if where else k, "missing required key")
    return v


def _number(path, where, v, lo=None, lo_open=False, hi=None):
    """A number (int, float, or a YAML 1.2 float that PyYAML reads as a string, e.g. 1e6) in range."""
    if isinstance(v, bool):
        _fail(path, where, f"expected a number, got {_vtext(v)}")
    if isinstance(v, str) and _NUM_RE.fullmatch(v.strip()):
        v = float(v)
    if not isinstance(v, (int, float)) or (isinstance(v, float) and not math.isfinite(v)):
        _fail(path, where, f"expected a number, got {_vtext(v)}")
    if lo is not None and (v <= lo if lo_open else v < lo):
        _fail(path, where, f"{v!r} out of range: must be {'>' if lo_open else '>='} {lo}")
    if hi is not None and v > hi:
        _fail(path, where, f"{v!r} out of range: must be <= {hi}")
    return v


def _int(path, where, v, lo):
    if isinstance(v, bool) or not isinstance(v, int):
        _fail(path, where, f"expected an integer, got {_vtext(v)}")
    if v < lo:
        _fail(path, where, f"{v!r} out of range: must be >= {lo}")
    return v


def _string(path, where, v, choices=None):
    if not isinstance(v, str) or not v:
        _fail(path, where, f"expected a non-empty string, got {_vtext(v)}")
    if choices and v not in choices:
        _fail(path, where, f"{v!r} is not one of {', '.join(choices)}")
    return v


class _NoDupLoader(yaml.SafeLoader):
    """SafeLoader that refuses a repeated key in a mapping."""


def _no_dup_mapping(loader, node, deep=False):
    seen = set()
    for k, _ in node.value:
        key = loader.construct_object(k, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"repeated key {key!r}", k.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_NoDupLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_dup_mapping)


def resolve_board(cluster_path, where, name):
    """A node's board: a boards/ name (boards/NAME.yaml) or a file path relative to the cluster file."""
    if "/" not in name and not name.endswith((".yaml", ".yml")):
        p = os.path.join(BOARDS_DIR, name + ".yaml")
    else:
        p = name if os.path.isabs(name) else os.path.join(os.path.dirname(os.path.abspath(cluster_path)), name)
    if not os.path.isfile(p):
        _fail(cluster_path, where, f"{name!r}: no such board (looked for {p})")
    return os.path.normpath(p)


def load_cluster(path):
    """Read and check a cluster file (schema: clusters/README.md).

    Returns {"name", "description", "file", "nodes": [{"name", "board_file", "compute": {...}}],
    "links": {(from, to): {"kind", "bandwidth_bytes_s" (Fraction), "latency_s" (Fraction),
    "frame_payload_bytes", "frame_overhead_bytes", "text": the file's mapping}}}.
    Bandwidth: uart baud / 10 (8N1: a start bit, 8 data bits, a stop bit per byte); spi clock_hz / 8 *
    efficiency; the other kinds give bandwidth_bytes_s. Raises UserError naming file, key path and value.
    """
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.load(f, Loader=_NoDupLoader)
    except OSError as e:
        raise UserError(f"{path}: cannot read: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise UserError(f"{path}: not valid YAML: {str(e).strip()}") from None
    _mapping(path, "", doc, ("name", "description", "nodes", "links"))
    name = _string(path, "name", doc["name"])
    _string(path, "description", doc["description"])
    nodes_in = doc["nodes"]
    if not isinstance(nodes_in, list) or not nodes_in:
        _fail(path, "nodes", f"expected a non-empty list, got {_vtext(nodes_in)}")
    nodes = []
    names = set()
    for i, n in enumerate(nodes_in):
        w = f"nodes[{i}]"
        _mapping(path, w, n, ("name", "board", "compute"))
        nn = _string(path, f"{w}.name", n["name"])
        if not _NAME_RE.fullmatch(nn):
            _fail(path, f"{w}.name", f"{nn!r}: only letters, digits, '_', '.' and '-'")
        if nn in names:
            _fail(path, f"{w}.name", f"{nn!r} repeated (node names are unique)")
        names.add(nn)
        board = _string(path, f"{w}.board", n["board"])
        c = _mapping(path, f"{w}.compute", n["compute"], ("weight_bytes_per_s", "memory_time", "source", "note"),
                     ("head_bytes_per_s", "prompt_weight_bytes_per_s"))
        comp = {
            "weight_bytes_per_s": _number(path, f"{w}.compute.weight_bytes_per_s", c["weight_bytes_per_s"], 0, True),
            "memory_time": _string(path, f"{w}.compute.memory_time", c["memory_time"], ("add", "overlap")),
            "source": _string(path, f"{w}.compute.source", c["source"], ("measured", "assumed")),
        }
        _string(path, f"{w}.compute.note", c["note"])
        comp["head_bytes_per_s"] = _number(path, f"{w}.compute.head_bytes_per_s", c["head_bytes_per_s"], 0, True) \
            if "head_bytes_per_s" in c else comp["weight_bytes_per_s"]
        comp["prompt_weight_bytes_per_s"] = _number(path, f"{w}.compute.prompt_weight_bytes_per_s",
                                                    c["prompt_weight_bytes_per_s"], 0, True) \
            if "prompt_weight_bytes_per_s" in c else None
        nodes.append({"name": nn, "board": board, "board_file": resolve_board(path, f"{w}.board", board),
                      "compute": comp})
    links_in = doc["links"]
    if not isinstance(links_in, list):
        _fail(path, "links", f"expected a list, got {_vtext(links_in)}")
    links = {}
    common = ("from", "to", "kind", "latency_s", "frame_payload_bytes", "frame_overhead_bytes", "source", "note")
    for i, l in enumerate(links_in):
        w = f"links[{i}]"
        if not isinstance(l, dict):
            _fail(path, w, f"expected a mapping, got {_vtext(l)}")
        kind = _string(path, f"{w}.kind", l.get("kind"), LINK_KINDS) if "kind" in l else None
        extra = {"uart": ("baud",), "spi": ("clock_hz", "efficiency")}.get(kind, ("bandwidth_bytes_s",))
        _mapping(path, w, l, common + extra)
        a = _string(path, f"{w}.from", l["from"])
        b = _string(path, f"{w}.to", l["to"])
        for key, v in (("from", a), ("to", b)):
            if v not in names:
                _fail(path, f"{w}.{key}", f"{v!r} is not a node of this cluster")
        if a == b:
            _fail(path, f"{w}.to", f"{b!r}: a link joins two different nodes")
        if (a, b) in links:
            _fail(path, w, f"a second link from {a!r} to {b!r}")
        if kind == "uart":
            bw = Fraction(_int(path, f"{w}.baud", l["baud"], 1)) / 10
        elif kind == "spi":
            clk = _number(path, f"{w}.clock_hz", l["clock_hz"], 0, True)
            eff = _number(path, f"{w}.efficiency", l["efficiency"], 0, True, 1)
            bw = Fraction(clk) / 8 * Fraction(eff)
        else:
            bw = Fraction(_number(path, f"{w}.bandwidth_bytes_s", l["bandwidth_bytes_s"], 0, True))
        links[(a, b)] = {
            "kind": kind, "bandwidth_bytes_s": bw,
            "latency_s": Fraction(_number(path, f"{w}.latency_s", l["latency_s"], 0)),
            "frame_payload_bytes": _int(path, f"{w}.frame_payload_bytes", l["frame_payload_bytes"], 1),
            "frame_overhead_bytes": _int(path, f"{w}.frame_overhead_bytes", l["frame_overhead_bytes"], 0),
        }
        _string(path, f"{w}.source", l["source"], ("measured", "assumed"))
        _string(path, f"{w}.note", l["note"])
    return {"name": name, "file": path, "nodes": nodes, "links": links}


def ring_links(cluster, nodes):
    """The links of the ring over `nodes` (node i -> node (i+1) mod N), or UserError naming the missing one."""
    n = len(nodes)
    if n == 1:
        return [None]
    out = []
    for i in range(n):
        a, b = nodes[i]["name"], nodes[(i + 1) % n]["name"]
        link = cluster["links"].get((a, b))
        if link is None:
            raise UserError(f"{cluster['file']}: links: no link from {a!r} to {b!r} (the ring of {n} nodes needs "
                            f"node i -> node i+1 and the last node -> the first)")
        out.append(link)
    return out


# ---- model facts: bitnet-mcu-plan --json ---------------------------------------------------------------

def build_dir():
    """$BITNET_BUILD_DIR, else ROOT/build (as utils/generate-dummy-bitnet-model.py)."""
    return os.environ.get("BITNET_BUILD_DIR") or os.path.join(ROOT, "build")


def mcu_plan_json(model, board_file, ctx, batch):
    """Run bin/bitnet-mcu-plan -m MODEL --board FILE --ctx N --batch N --json; return the parsed JSON
    (fields: boards/README.md "JSON"). PlanError with the tool's message when it refuses."""
    tool = os.path.join(build_dir(), "bin", "bitnet-mcu-plan")
    if not (os.path.isfile(tool) and os.access(tool, os.X_OK)):
        raise PlanError(f"{tool} not found: build it first (cmake -S . -B build && cmake --build build), "
                        f"or set BITNET_BUILD_DIR")
    prefix = os.environ.get("BITNET_RUN_PREFIX", "").split()
    with tempfile.TemporaryDirectory(prefix="plan-cluster-") as td:
        out = os.path.join(td, "plan.json")
        p = subprocess.run(prefix + [tool, "-m", model, "--board", board_file, "--ctx", str(ctx),
                                     "--batch", str(batch), "--json", out],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace")
        if p.returncode != 0:
            raise PlanError(p.stderr.strip() or f"bitnet-mcu-plan exited with status {p.returncode}")
        with open(out, encoding="utf-8") as f:
            return json.load(f)


def sha256_file(path):
    """SHA-256 of the whole file, lowercase hex (hashlib, read in 4 MiB blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def round64(n):
    return (n + 63) // 64 * 64


# ---- memory of a stage ---------------------------------------------------------------------------------

def stage_memory(facts, a, b, first):
    """Weights and arena bytes of a stage holding layers [a, b) (first: stage 0 of the ring, which also holds
    token_embd, output_norm and the head, a tied head stored once). From the JSON's partition_model
    (boards/README.md "Partition over several boards"), with the ring placement instead of first/last boards:
      weights = node_flash + sum(layer_flash[a:b]) + (first: first_flash + last_flash - shared_flash)
      arena   = node_arena + 2 * round64(sum(layer_kv[a:b]) / 2) + (first: last_arena, the logits)."""
    pm = facts["partition_model"]
    w = pm["node_flash_bytes"] + sum(pm["layer_flash_bytes"][a:b])
    kv = sum(pm["layer_kv_bytes"][a:b])
    arena = pm["node_arena_bytes"] + 2 * round64(kv // 2)
    if first:
        w += pm["first_flash_bytes"] + pm["last_flash_bytes"] - pm["shared_flash_bytes"]
        arena += pm["last_arena_bytes"]
    return w, arena


def place(memories, w, arena):
    """boards/README.md "Placement": the first arena memory (file order) with room, with the first weights
    memory that leaves it that room (one memory with both roles must hold both). Returns (weights memory,
    arena memory) or None."""
    for am in memories:
        if "arena" not in am["roles"] or arena > am["usable_bytes"]:
            continue
        for wm in memories:
            if "weights" not in wm["roles"]:
                continue
            if wm is am:
                if w + arena <= am["usable_bytes"]:
                    return wm, am
            elif w <= wm["usable_bytes"]:
                return wm, am
    return None


def misfit_reason(memories, w, arena):
    """Why weights w and arena bytes fit no memory pair: which rule overflows, by how many bytes."""
    wms = [m for m in memories if "weights" in m["roles"]]
    ams = [m for m in memories if "arena" in m["roles"]]
    best_w = max(wms, key=lambda m: m["usable_bytes"])
    best_a = max(ams, key=lambda m: m["usable_bytes"])
    parts = []
    if w > best_w["usable_bytes"]:
        parts.append(f"the weights ({w} bytes) exceed every weights memory: {best_w['name']} holds "
                     f"{best_w['usable_bytes']} usable, over by {w - best_w['usable_bytes']}")
    if arena > best_a["usable_bytes"]:
        parts.append(f"the arena ({arena} bytes) exceeds every arena memory: {best_a['name']} holds "
                     f"{best_a['usable_bytes']} usable, over by {arena - best_a['usable_bytes']}")
    if not parts:
        shared = [m for m in memories if "weights" in m["roles"] and "arena" in m["roles"]]
        m = shared[0] if shared else best_a
        parts.append(f"the weights ({w} bytes) and the arena ({arena} bytes) share {m['name']} "
                     f"({m['usable_bytes']} usable), over by {w + arena - m['usable_bytes']}")
    return "; ".join(parts)


# ---- cost model ----------------------------------------------------------------------------------------

def link_time(link, nbytes):
    """Seconds for one message of nbytes payload (plan format, the one formula):
    latency_s + (B + ceil(B / frame_payload_bytes) * frame_overhead_bytes) / bandwidth_bytes_s."""
    frames = -(-nbytes // link["frame_payload_bytes"])
    return link["latency_s"] + Fraction(nbytes + frames * link["frame_overhead_bytes"]) / link["bandwidth_bytes_s"]


class Model:
    """The planning problem: a model's facts (one bitnet-mcu-plan JSON per board file) on an ordered list of
    nodes with their ring links. All times are Fractions in seconds."""

    def __init__(self, facts_by_board, nodes, links, n_batch, cache=None):
        self.nodes = nodes
        self.links = links
        self.facts = facts_by_board
        f0 = facts_by_board[nodes[0]["board_file"]]
        self.f0 = f0
        self.n_layer = f0["model"]["n_layer"]
        self.n_embd = f0["model"]["n_embd"]
        self.n_batch = n_batch
        self.layer_bytes = [l["tensor_bytes"] for l in f0["layers"]]
        tt = f0["token_traffic"]
        ob = f0["fixed"]["output_norm"]
        self.head_bytes = tt["head_bytes"] + tt["token_embd_row_bytes"] + (ob["bytes"] if ob else 0)
        self.kv_mid = Fraction(tt["kv_read_bytes_mid_context"], self.n_layer)  # per layer, position n_ctx/2
        self.msg_token = 4 * self.n_embd + HEADER_BYTES
        self.msg_batch = 4 * self.n_embd * n_batch + HEADER_BYTES
        self.link_tok = [link_time(l, self.msg_token) if l else Fraction(0) for l in links]
        self.link_batch = [link_time(l, self.msg_batch) if l else Fraction(0) for l in links]
        self._cache = {} if cache is None else cache  # shared by clusters of the same nodes

    def memories(self, i):
        return self.facts[self.nodes[i]["board_file"]]["board"]["memories"]

    def stage(self, i, a, b):
        """Node i holding layers [a, b) as stage i: a dict of memory, placement and times, or with
        "fits": False and "reason"."""
        nd = self.nodes[i]
        key = (nd["board_file"], json.dumps(nd["compute"], sort_keys=True), i == 0, a, b)
        if key in self._cache:
            return self._cache[key]
        facts = self.facts[self.nodes[i]["board_file"]]
        w, arena = stage_memory(facts, a, b, i == 0)
        mems = facts["board"]["memories"]
        pl = place(mems, w, arena)
        s = {"weights_bytes": w, "arena_bytes": arena}
        if pl is None:
            s.update(fits=False, reason=misfit_reason(mems, w, arena))
        else:
            wm, am = pl
            comp = self.nodes[i]["compute"]
            layer_b = sum(self.layer_bytes[a:b])
            head_b = self.head_bytes if i == 0 else 0
            kv = self.kv_mid * (b - a)
            ws = Fraction(wm["stream_mb_s"]) * 1000000
            as_ = Fraction(am["stream_mb_s"]) * 1000000
            arith = Fraction(layer_b) / Fraction(comp["weight_bytes_per_s"]) + \
                Fraction(head_b) / Fraction(comp["head_bytes_per_s"])
            mem = Fraction(layer_b + head_b) / ws + kv / as_
            add = comp["memory_time"] == "add"
            tok = arith + mem if add else max(arith, mem)
            nb = self.n_batch
            if comp["prompt_weight_bytes_per_s"] is None:
                batch = nb * tok
            else:
                arith_b = Fraction(nb * (layer_b + head_b)) / Fraction(comp["prompt_weight_bytes_per_s"])
                mem_b = Fraction(layer_b + head_b) / ws + nb * kv / as_
                batch = arith_b + mem_b if add else max(arith_b, mem_b)
            s.update(fits=True, weights_memory=wm, arena_memory=am, tok=tok, batch=batch,
                     arith=arith, flash=Fraction(layer_b + head_b) / ws, kv=kv / as_,
                     read_bytes=layer_b + head_b)
        self._cache[key] = s
        return s

    def cost(self, i, a, b):
        """(token time, batch time) of node i on layers [a, b), or None when its tensors do not fit."""
        s = self.stage(i, a, b)
        return (s["tok"], s["batch"]) if s["fits"] else None


def _min_sum(cost, n_nodes, n_layer, cap):
    """Suffix DP: g[i][j] = least sum of token times of nodes i.. on layers j.. with every stage fitting and
    its batch time <= cap (None: impossible)."""
    INF = None
    g = [[INF] * (n_layer + 1) for _ in range(n_nodes + 1)]
    g[n_nodes][n_layer] = Fraction(0)
    for i in range(n_nodes - 1, -1, -1):
        rest = n_nodes - 1 - i
        for j in range(i, n_layer - rest):
            best = INF
            for k in range(j + 1, n_layer - rest + 1):
                sub = g[i + 1][k]
                if sub is None:
                    continue
                c = cost(i, j, k)
                if c is None or (cap is not None and c[1] > cap):
                    continue
                v = c[0] + sub
                if best is None or v < best:
                    best = v
            g[i][j] = best
    return g


def _reconstruct(cost, n_nodes, n_layer, cap, g):
    """Layer counts of the lexicographically smallest partition reaching g[0][0] under cap."""
    counts, j = [], 0
    for i in range(n_nodes):
        rest = n_nodes - 1 - i
        for k in range(j + 1, n_layer - rest + 1):
            sub = g[i + 1][k]
            c = cost(i, j, k)
            if sub is None or c is None or (cap is not None and c[1] > cap):
                continue
            if c[0] + sub == g[i][j]:
                counts.append(k - j)
                j = k
                break
        else:  # pragma: no cover - g says a partition exists
            raise AssertionError("reconstruction failed")
    return counts


def optimal_partition(cost, n_nodes, n_layer, objective, link_batch_max=Fraction(0)):
    """The optimal contiguous partition of n_layer layers over n_nodes nodes (each >= 1 layer), or None.

    cost(i, a, b) -> (token time, batch time) of node i holding layers [a, b), or None when it does not
    fit; times exact (Fraction or int). The prompt bottleneck of a partition is max(its stage batch times,
    link_batch_max). Orders: latency = (sum of token times, prompt bottleneck, layer counts);
    throughput = (prompt bottleneck, sum of token times, layer counts); layer counts compared as lists.
    Method: min-sum DP over layer boundaries with a cap C on stage batch times (_min_sum, O(N L^2)), and a
    binary search over the sorted candidate caps (every stage batch time): the least sum under cap C does
    not increase with C, so the least C reaching the wanted sum (latency) or any partition (throughput) is
    found with O(log(N L^2)) DPs; then C' = max(C, link_batch_max) (every cap below it gives the same
    bottleneck), and the forward reconstruction takes the smallest boundary that keeps g's optimum.
    """
    if n_nodes > n_layer or n_nodes < 1:
        return None
    g = _min_sum(cost, n_nodes, n_layer, None)
    if g[0][0] is None:
        return None
    caps = sorted({c[1] for i in range(n_nodes) for a in range(n_layer) for b in range(a + 1, n_layer + 1)
                   if (c := cost(i, a, b)) is not None})
    best_sum = g[0][0]

    def ok(cap):
        v = _min_sum(cost, n_nodes, n_layer, cap)[0][0]
        return v is not None and (objective == "throughput" or v == best_sum)

    lo, hi = 0, len(caps) - 1  # ok(caps[-1]) holds: no stage is excluded
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(caps[mid]):
            hi = mid
        else:
            lo = mid + 1
    cap = max(caps[lo], link_batch_max)
    g = _min_sum(cost, n_nodes, n_layer, cap)
    return _reconstruct(cost, n_nodes, n_layer, cap, g)


def partition_key(cost, counts, objective, link_batch_max=Fraction(0)):
    """The order optimal_partition minimizes, for a given list of layer counts (None if a stage does not
    fit): the definition the brute force of the tests uses."""
    j, tot, bott = 0, Fraction(0), Fraction(link_batch_max)
    for i, n in enumerate(counts):
        c = cost(i, j, j + n)
        if c is None:
            return None
        tot += c[0]
        bott = max(bott, c[1])
        j += n
    return (tot, bott, list(counts)) if objective == "latency" else (bott, tot, list(counts))


# ---- planning ------------------------------------------------------------------------------------------

def parse_layers(text, n_nodes, n_layer):
    """--layers A,B,C: one positive count per node, summing to n_layer (UserError otherwise)."""
    try:
        counts = [int(x) for x in text.split(",")]
    except ValueError:
        raise UserError(f"--layers {text!r}: expected comma-separated integers") from None
    if len(counts) != n_nodes:
        raise UserError(f"--layers {text!r}: {len(counts)} counts for {n_nodes} nodes")
    if any(c < 1 for c in counts):
        raise UserError(f"--layers {text!r}: every node holds at least one layer")
    if sum(counts) != n_layer:
        raise UserError(f"--layers {text!r}: the counts sum to {sum(counts)}, the model has {n_layer} layers")
    return counts


def explain_infeasible(m):
    """The reasons a cluster holds no partition, naming the node and the rule that overflows, and whether
    they are final (a node that cannot hold its minimum: appending nodes cannot help)."""
    n, L = len(m.nodes), m.n_layer
    if n > L:
        return [f"{n} nodes but {L} layers: every node holds at least one layer"], True
    out = []
    s = m.stage(0, 0, 1)
    if not s["fits"]:
        out.append(f"node {m.nodes[0]['name']} (stage 0, {m.nodes[0]['board']}) cannot hold token_embd, "
                   f"output_norm, the head and layer 0: {s['reason']}")
    stuck = {}  # reason -> nodes that cannot hold even one layer for it (said once for all of them)
    for i in range(1, n):
        fits = [m.stage(i, a, a + 1) for a in range(i, L - (n - 1 - i))]
        if not any(x["fits"] for x in fits):
            stuck.setdefault((m.nodes[i]["board"], fits[0]["reason"]), []).append(f"{m.nodes[i]['name']} (stage {i})")
    for (board, reason), names in stuck.items():
        what = f"node {names[0]}" if len(names) == 1 else "nodes " + ", ".join(names)
        out.append(f"{what}, {board}, cannot hold even one layer: {reason}")
    final = bool(out)
    if m.nodes[-1] is not m.nodes[0] and not final:
        if not any(m.stage(n - 1, a, a + 1)["fits"] for a in range(1, L)):
            final = True
    if not out:
        # Greedy in ring order: each node takes as many layers as fit (needs never grow when a range shrinks).
        j, got = 0, []
        for i in range(n):
            k = j
            while k < L and m.stage(i, j, k + 1)["fits"]:
                k += 1
            got.append(k - j)
            j = k
        out.append(f"the {n} nodes hold at most {j} of the {L} layers in ring order (" +
                   ", ".join(f"{nd['name']} {c}" for nd, c in zip(m.nodes, got)) + ")")
    return out, final


def extra_nodes_needed(facts, nodes, links, n_batch, n_layer, reasons_final):
    """How many copies of the last node (same board and compute; the link into it repeated between the
    copies, its link to the first node closing the ring) make the cluster feasible: found by checking each
    larger cluster for a feasible partition (the DP without objective), up to n_layer - N extra nodes.
    None when no number helps: stage 0 or a given node cannot hold its minimum (appending nodes at the end
    changes neither), or no larger cluster up to the bound is feasible. reasons_final: True when
    explain_infeasible found such a fixed-node reason."""
    if reasons_final:
        return None
    loop = {"kind": "loopback", "bandwidth_bytes_s": Fraction(1), "latency_s": Fraction(0),
            "frame_payload_bytes": 1, "frame_overhead_bytes": 0}
    into = links[-2] if len(nodes) > 1 else loop   # feasibility does not depend on the links
    out = links[-1] if len(nodes) > 1 else loop
    cache = {}
    for extra in range(1, max(0, n_layer - len(nodes)) + 1):
        nn = nodes + [dict(nodes[-1], name=f"{nodes[-1]['name']}+{e}") for e in range(1, extra + 1)]
        ll = (links[:-1] if len(nodes) > 1 else []) + [into] * extra + [out]
        m = Model(facts, nn, ll, n_batch, cache)
        if _min_sum(m.cost, len(nn), n_layer, None)[0][0] is not None:
            return extra
    return None


def fnum(x):
    """A float for YAML/JSON that PyYAML and libyaml both read as a float (always a '.', a signed exponent)."""
    s = repr(float(x))
    if "e" in s and "." not in s.split("e")[0]:
        m, e = s.split("e")
        s = f"{m}.0e{e}"
    return s


def make_plan(args):
    """Plan the model on the cluster; returns (plan dict for YAML, summary text). Raises UserError or
    PlanError (infeasible: the message names the node and the rule and the extra nodes needed)."""
    cluster = load_cluster(args.cluster)
    nodes = cluster["nodes"]
    if args.nodes is not None:
        if args.nodes > len(nodes):
            raise UserError(f"--nodes {args.nodes}: {args.cluster} has {len(nodes)} nodes")
        nodes = nodes[:args.nodes]
    links = ring_links(cluster, nodes)
    if not os.path.isfile(args.model):
        raise PlanError(f"{args.model}: no such file")
    facts = {}
    for nd in nodes:
        if nd["board_file"] not in facts:
            facts[nd["board_file"]] = mcu_plan_json(args.model, nd["board_file"], args.ctx, args.batch)
    f0 = facts[nodes[0]["board_file"]]
    n_batch = f0["params"]["n_batch"]
    m = Model(facts, nodes, links, n_batch)
    L = m.n_layer
    lbmax = max(m.link_batch)
    if args.layers is not None:
        counts = parse_layers(args.layers, len(nodes), L)
        j = 0
        for i, c in enumerate(counts):
            s = m.stage(i, j, j + c)
            if not s["fits"]:
                raise PlanError(f"--layers {args.layers}: node {nodes[i]['name']} (stage {i}, {nodes[i]['board']}, "
                                f"layers {j}-{j + c - 1}) does not hold its tensors: {s['reason']}")
            j += c
    else:
        counts = optimal_partition(m.cost, len(nodes), L, args.objective, lbmax)
        if counts is None:
            why, final = explain_infeasible(m)
            extra = extra_nodes_needed(facts, nodes, links, n_batch, L, final)
            last = nodes[-1]
            if len(nodes) > L:
                need = f"use at most {L} nodes (--nodes {L})"
            elif extra is None:
                need = (f"no number of additional {last['board']} nodes (copies of {last['name']}) helps")
            else:
                need = (f"{extra} more {last['board']} node{'s' if extra > 1 else ''} (copies of {last['name']} "
                        f"with its links) would make it feasible: {len(nodes) + extra} nodes")
            raise PlanError(f"{args.model} does not fit cluster {cluster['name']} ({len(nodes)} nodes, n_ctx "
                            f"{args.ctx}): " + "; ".join(why) + f". {need}")
    # the plan
    model_bytes = os.path.getsize(args.model)
    mi = f0["model"]
    stages, j = [], 0
    for i, c in enumerate(counts):
        s = m.stage(i, j, j + c)
        nd = nodes[i]
        link = links[i]
        st = {
            "node": nd["name"], "board": facts[nd["board_file"]]["board"]["name"],
            "first_layer": j, "n_layers": c, "token_embd": i == 0, "head": i == 0,
            "weights_capacity_bytes": s["weights_memory"]["usable_bytes"],
            "arena_capacity_bytes": s["arena_memory"]["usable_bytes"],
            "shared_memory": s["weights_memory"]["name"] == s["arena_memory"]["name"],
            "link_to_next": None if link is None else {
                "kind": link["kind"], "bandwidth_bytes_s": link["bandwidth_bytes_s"],
                "latency_s": link["latency_s"], "frame_payload_bytes": link["frame_payload_bytes"],
                "frame_overhead_bytes": link["frame_overhead_bytes"]},
            "predicted": {
                "weights_bytes": s["weights_bytes"], "arena_bytes": s["arena_bytes"],
                "weights_memory": s["weights_memory"]["name"], "arena_memory": s["arena_memory"]["name"],
                "compute_s_per_token": s["tok"], "link_s_per_token": m.link_tok[i],
                "compute_s_per_batch": s["batch"], "link_s_per_batch": m.link_batch[i],
                "read_bytes_per_token": s["read_bytes"], "arith_s_per_token": s["arith"],
                "weights_read_s_per_token": s["flash"], "kv_read_s_per_token": s["kv"],
                "memory_time": nd["compute"]["memory_time"]},
        }
        stages.append((st, s))
        j += c
    tok_total = sum(s["tok"] for _, s in stages) + sum(m.link_tok)
    bott, what = Fraction(-1), ""
    for i, (_, s) in enumerate(stages):
        if s["batch"] > bott:
            bott, what = s["batch"], f"stage {i} compute"
    for i, t in enumerate(m.link_batch):
        if len(nodes) > 1 and t > bott:
            bott, what = t, f"link {i} ({nodes[i]['name']} -> {nodes[(i + 1) % len(nodes)]['name']})"
    plan = {
        "model": {"file": args.model, "bytes": model_bytes, "sha256": sha256_file(args.model), "arch": mi["arch"],
                  "n_layer": L, "n_embd": mi["n_embd"], "n_vocab": mi["n_vocab"]},
        "params": {"n_ctx": f0["params"]["n_ctx"], "n_batch": n_batch, "objective": args.objective},
        "cluster": {"file": args.cluster, "name": cluster["name"]},
        "stages": [st for st, _ in stages],
        "predicted": {"generation_tokens_s": 1 / tok_total, "prompt_tokens_s": Fraction(n_batch) / bott,
                      "bottleneck": what},
    }
    return plan


# ---- output --------------------------------------------------------------------------------------------

_PLAIN_RE = re.compile(r"[A-Za-z_/][A-Za-z0-9_./+-]*")
_RESERVED = {"null", "true", "false", "yes", "no", "on", "off", "y", "n", "~"}


def _scalar(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, Fraction):
        return str(v.numerator) if v.denominator == 1 else fnum(v)
    if isinstance(v, float):
        return fnum(v)
    s = str(v)
    if _PLAIN_RE.fullmatch(s) and s.lower() not in _RESERVED:
        return s
    return json.dumps(s, ensure_ascii=True)


def _emit(obj, indent, lines):
    pad = " " * indent
    for k, v in obj.items():
        if isinstance(v, dict):
            lines.append(f"{pad}{k}:")
            _emit(v, indent + 2, lines)
        elif isinstance(v, list):
            lines.append(f"{pad}{k}:")
            for item in v:
                sub = []
                _emit(item, indent + 4, sub)
                lines.append(f"{pad}  - {sub[0].lstrip()}")
                lines.extend(sub[1:])
        else:
            lines.append(f"{pad}{k}: {_scalar(v)}")


def plan_yaml(plan, model_arg, cluster_arg, forced=None):
    """The plan as YAML text (block style, keys in the format's order, a do-not-edit banner)."""
    lines = [f"# Written by utils/plan-cluster.py from {model_arg} and {cluster_arg}: do not edit; re-run the planner."]
    if forced:
        lines.append(f"# Layer counts forced by --layers {forced} (not optimized).")
    lines += ["format: bitnet-cluster-plan", "version: 1"]
    _emit(plan, 0, lines)
    return "\n".join(lines) + "\n"


def _jsonable(v):
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if isinstance(v, Fraction):
        return v.numerator if v.denominator == 1 else float(v)
    return v


def summary(plan):
    """The human summary: one line per stage (layers, memory, where its time goes) and the cluster's rates."""
    out = []
    p = plan["predicted"]
    out.append(f"cluster {plan['cluster']['name']}: {len(plan['stages'])} stages, n_ctx {plan['params']['n_ctx']}, "
               f"n_batch {plan['params']['n_batch']}, objective {plan['params']['objective']}")
    out.append("stage node            board               layers  weights B (memory)       arena B (memory)"
               "       ms/token: arith   weights   KV    compute  link")
    for i, s in enumerate(plan["stages"]):
        q = s["predicted"]
        lr = f"{s['first_layer']}-{s['first_layer'] + s['n_layers'] - 1}"
        extra = " +embd/head" if s["head"] else ""
        out.append(f"{i:5d} {s['node']:<15s} {s['board']:<19s} {lr:>6s}  "
                   f"{q['weights_bytes']:>11d} ({q['weights_memory']:<6s})  {q['arena_bytes']:>10d} ({q['arena_memory']:<6s})"
                   f"  {1e3 * float(q['arith_s_per_token']):>13.2f} {1e3 * float(q['weights_read_s_per_token']):>9.2f} "
                   f"{1e3 * float(q['kv_read_s_per_token']):>6.2f} {1e3 * float(q['compute_s_per_token']):>8.2f} "
                   f"{1e3 * float(q['link_s_per_token']):>6.2f}  ({q['memory_time']}){extra}")
    tc = sum(float(s["predicted"]["compute_s_per_token"]) for s in plan["stages"])
    tl = sum(float(s["predicted"]["link_s_per_token"]) for s in plan["stages"])
    out.append(f"generation: {float(p['generation_tokens_s']):.3f} tokens/s ({1e3 * tc:.1f} ms compute + "
               f"{1e3 * tl:.1f} ms links per token); prompt: {float(p['prompt_tokens_s']):.3f} tokens/s "
               f"(bound by {p['bottleneck']})")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="plan-cluster.py", description=__doc__.split("\n\n")[0],
                                 epilog="Exit status: 0 planned, 1 does not fit / model or tool error, "
                                        "2 bad command line or cluster file.")
    ap.add_argument("-m", "--model", required=True, help="the GGUF model")
    ap.add_argument("--cluster", required=True, help="the cluster file (clusters/README.md)")
    ap.add_argument("--ctx", type=int, default=DEFAULT_CTX, help=f"context the memory assumes (default {DEFAULT_CTX})")
    ap.add_argument("--batch", type=int, default=DEFAULT_BATCH,
                    help=f"prompt micro-batch size (default {DEFAULT_BATCH}; clamped to --ctx)")
    ap.add_argument("--objective", choices=("latency", "throughput"), default="latency",
                    help="latency: least generation time per token (default); throughput: fastest prompt")
    ap.add_argument("--nodes", type=int, help="use the first N nodes of the cluster file")
    ap.add_argument("--layers", help="force the layer counts per node, e.g. 3,3,6 (memory still checked)")
    ap.add_argument("--out", help="write the plan (YAML) here")
    ap.add_argument("--json", action="store_true", help="print the plan as JSON instead of the summary")
    args = ap.parse_args(argv)
    try:
        if args.ctx < 1:
            raise UserError(f"--ctx {args.ctx}: must be >= 1")
        if args.batch < 1:
            raise UserError(f"--batch {args.batch}: must be >= 1")
        if args.nodes is not None and args.nodes < 1:
            raise UserError(f"--nodes {args.nodes}: must be >= 1")
        plan = make_plan(args)
        if args.out:
            text = plan_yaml(plan, args.model, args.cluster, args.layers)
            d = os.path.dirname(os.path.abspath(args.out))
            try:
                fd, tmp = tempfile.mkstemp(prefix=".plan-", dir=d)
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(text)
                os.replace(tmp, args.out)
            except OSError as e:
                raise PlanError(f"{args.out}: cannot write: {e.strerror}") from None
        if args.json:
            print(json.dumps(_jsonable(dict({"format": "bitnet-cluster-plan", "version": 1}, **plan)), indent=1))
        else:
            print(summary(plan))
    except UserError as e:
        print(f"plan-cluster: error: {e}", file=sys.stderr)
        return 2
    except PlanError as e:
        print(f"plan-cluster: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
