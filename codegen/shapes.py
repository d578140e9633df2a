"""Ternary matmul shapes of a model, and which config tables cover them.

A shape is (M, K): M = weight rows = outputs (GGUF ne[1]), K = inputs (GGUF ne[0]), written "MxK"
as bitnet.cpp writes it (design.md §2). The shapes of a BitNet/Llama-style layer
(docs/ARCHITECTURE.md, "Configs"):

    attn_q       (n_head*head_dim) x hidden      attn_output  hidden x (n_head*head_dim)
    attn_k/v     (n_kv*head_dim)   x hidden      ffn_gate/up  ffn x hidden
    ffn_down     hidden x ffn

with head_dim = hidden / n_head unless given. Sources of a model's shapes: the tensor infos of a GGUF
file (blk.N.{attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down}.weight, 2-D) or an HF
config.json (hidden_size, intermediate_size, num_attention_heads, num_key_value_heads, head_dim).
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from .gguf_reader import GGUFError, read_gguf

TERNARY_PROJS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
_TERNARY_RE = re.compile(r"^blk\.\d+\.(" + "|".join(TERNARY_PROJS) + r")\.weight$")


class ShapeError(ValueError):
    """Unusable model description; the message names the file and the key or tensor."""


def fmt_shape(shape) -> str:
    """(M, K) -> "MxK"."""
    return f"{shape[0]}x{shape[1]}"


def parse_shape(text: str) -> tuple[int, int]:
    """"MxK" (also "M*K", "M,K" or with a unicode times sign) -> (M, K); ValueError if malformed."""
    m = re.fullmatch(r"\s*(\d+)\s*[xX×*,]\s*(\d+)\s*", text)
    if not m or int(m.group(1)) <= 0 or int(m.group(2)) <= 0:
        raise ValueError(f"shape {text!r}: expected MxK with positive integers, e.g. 2560x6912")
    return int(m.group(1)), int(m.group(2))


def layout_shapes(hidden: int, ffn: int, n_head: int, n_kv: int, head_dim: int | None = None) -> list[tuple[int, int]]:
    """The distinct (M, K) ternary matmul shapes of one transformer layer, sorted.

    hidden = hidden_size, ffn = intermediate_size, n_head / n_kv = attention / KV heads, head_dim
    defaults to hidden / n_head (must divide then). Raises ValueError for non-positive values, a
    hidden size the heads do not divide, or n_head not a multiple of n_kv (grouped-query attention).
    Example: BitNet-b1.58-2B-4T (2560, 6912, 20, 5) -> 640x2560, 2560x2560, 2560x6912, 6912x2560.
    """
    for name, v in (("hidden_size", hidden), ("intermediate_size", ffn), ("num_attention_heads", n_head),
                    ("num_key_value_heads", n_kv)):
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"{name} = {v!r}: must be a positive integer")
    if head_dim is None:
        if hidden % n_head:
            raise ValueError(f"hidden_size = {hidden} is not a multiple of num_attention_heads = {n_head} "
                             f"(give head_dim)")
        head_dim = hidden // n_head
    elif not isinstance(head_dim, int) or isinstance(head_dim, bool) or head_dim <= 0:
        raise ValueError(f"head_dim = {head_dim!r}: must be a positive integer")
    if n_head % n_kv:
        raise ValueError(f"num_attention_heads = {n_head} is not a multiple of num_key_value_heads = {n_kv}")
    q_dim, kv_dim = n_head * head_dim, n_kv * head_dim
    return sorted({(q_dim, hidden), (kv_dim, hidden), (hidden, q_dim), (ffn, hidden), (hidden, ffn)})


@dataclass(frozen=True)
class ModelInfo:
    """What `shapes` and `derive --model` learn from one model description."""
    source: str                               # the file actually read
    shapes: list[tuple[int, int]]             # sorted distinct (M, K)
    layout: dict | None                       # config `layout:` keys, when the file states them
    architecture: str | None = None


def _find_model_file(path: str) -> str:
    if not os.path.isdir(path):
        if not os.path.exists(path):
            raise ShapeError(f"{path}: no such file or directory")
        return path
    cfg = os.path.join(path, "config.json")
    if os.path.isfile(cfg):
        return cfg
    ggufs = sorted(f for f in os.listdir(path) if f.endswith(".gguf") and os.path.isfile(os.path.join(path, f)))
    if not ggufs:
        raise ShapeError(f"{path}: directory has no config.json and no *.gguf file")
    return os.path.join(path, ggufs[0])


def _is_gguf(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"GGUF"
    except OSError as e:
        raise ShapeError(f"{path}: cannot read: {e.strerror or e}") from None


def _gguf_info(path: str) -> ModelInfo:
    try:
        g = read_gguf(path)
    except GGUFError as e:
        raise ShapeError(str(e)) from None
    except OSError as e:
        raise ShapeError(f"{path}: cannot read: {e.strerror or e}") from None
    shapes = set()
    for t in g.tensors:
        if _TERNARY_RE.match(t.name):
            if len(t.ne) != 2:
                raise ShapeError(f"{path}: tensor '{t.name}' has {len(t.ne)} dimensions {list(t.ne)}, expected 2")
            shapes.add((t.ne[1], t.ne[0]))
    if not shapes:
        raise ShapeError(f"{path}: no ternary matmul tensors (blk.N.{{{','.join(TERNARY_PROJS)}}}.weight)")
    arch = g.kv.get("general.architecture")
    layout = None
    if isinstance(arch, str):
        def get(key, default=None):
            v = g.kv.get(f"{arch}.{key}", default)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
                raise ShapeError(f"{path}: key '{arch}.{key}' = {v!r}: expected an integer")
            return v
        hidden, ffn, heads = get("embedding_length"), get("feed_forward_length"), get("attention.head_count")
        if None not in (hidden, ffn, heads):
            layout = {"hidden_size": hidden, "intermediate_size": ffn, "num_attention_heads": heads,
                      "num_key_value_heads": get("attention.head_count_kv", heads)}
            if get("block_count") is not None:
                layout["num_hidden_layers"] = get("block_count")
            kl = get("attention.key_length")
            if kl is not None and kl * heads != hidden:
                layout["head_dim"] = kl
    return ModelInfo(source=path, shapes=sorted(shapes), layout=layout,
                     architecture=arch if isinstance(arch, str) else None)


def _config_json_info(path: str) -> ModelInfo:
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read().decode("utf-8"))
    except OSError as e:
        raise ShapeError(f"{path}: cannot read: {e.strerror or e}") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise ShapeError(f"{path}: neither a GGUF file nor a JSON config.json: {e}") from None
    if not isinstance(data, dict):
        raise ShapeError(f"{path}: expected a JSON object (an HF config.json)")

    def get(key, required=True):
        if key not in data or data[key] is None:
            if required:
                raise ShapeError(f"{path}: missing key '{key}'")
            return None
        v = data[key]
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ShapeError(f"{path}: key '{key}' = {v!r}: expected a positive integer")
        return v

    hidden, ffn, heads = get("hidden_size"), get("intermediate_size"), get("num_attention_heads")
    kv = get("num_key_value_heads", required=False) or heads
    head_dim = get("head_dim", required=False)
    if head_dim is not None and head_dim * heads == hidden:
        head_dim = None      # the default; keep layouts minimal
    try:
        shapes = layout_shapes(hidden, ffn, heads, kv, head_dim)
    except ValueError as e:
        raise ShapeError(f"{path}: {e}") from None
    layout = {"hidden_size": hidden, "intermediate_size": ffn, "num_attention_heads": heads,
              "num_key_value_heads": kv}
    layers = get("num_hidden_layers", required=False)
    if layers is not None:
        layout["num_hidden_layers"] = layers
    if head_dim is not None:
        layout["head_dim"] = head_dim
    return ModelInfo(source=path, shapes=shapes, layout=layout)


def model_info(path: str | os.PathLike) -> ModelInfo:
    """Read a GGUF file, an HF config.json, or a directory holding config.json (preferred) or a *.gguf.

    Raises ShapeError naming the file and the key/tensor for a missing file, a file that is neither
    GGUF nor JSON, a truncated GGUF, a config.json without hidden_size/intermediate_size/
    num_attention_heads, or values that are not positive integers.
    """
    path = _find_model_file(os.fspath(path))
    if _is_gguf(path) or path.endswith(".gguf"):
        return _gguf_info(path)      # a .gguf without the magic gets the reader's "not a GGUF" error
    return _config_json_info(path)


def shapes_of(path: str | os.PathLike) -> list[tuple[int, int]]:
    """Distinct (M, K) ternary matmul shapes of a model (GGUF, config.json or a directory), sorted.
    Raises ShapeError (a ValueError) on bad input; see model_info."""
    return model_info(path).shapes


def coverage(shapes, configs) -> dict:
    """Which configs cover all the shapes, per target and table name, and which shapes no table has.

    shapes: iterable of (M, K); configs: list of codegen.config.Config. Returns
    {"covering": {target: {"default": [config names], "pretuned": [...]}},
     "uncovered": {target: [[M, K], ...]}} — a table covers the shapes when it has an entry for every
    one of them (extra entries are allowed); a shape is uncovered for a target when no table of any
    config has it (the runtime then uses the default tile rule, codegen/derive.py). Lists sorted.
    """
    from .config import TABLE_NAMES
    from .targets import SCHEMES

    shapes = sorted({(int(m), int(k)) for m, k in shapes})
    covering: dict = {}
    uncovered: dict = {}
    for t in SCHEMES:
        covering[t] = {}
        for tab in TABLE_NAMES:
            names = []
            for c in configs:
                table = c.table(t, tab)
                if table is not None and set(shapes) <= set(table.shapes):
                    names.append(c.name)
            covering[t][tab] = sorted(names)
        have = set()
        for c in configs:
            for table in c.tables.get(t, {}).values():
                have.update(table.shapes)
        uncovered[t] = [[m, k] for m, k in shapes if (m, k) not in have]
    return {"covering": covering, "uncovered": uncovered}


def shape_origins(shape, configs, target: str) -> list[str]:
    """"config/table" strings of every table of `target` that has an entry for `shape`, sorted."""
    out = []
    for c in configs:
        for tab, table in c.tables.get(target, {}).items():
            if table.entry(*shape) is not None:
                out.append(f"{c.name}/{tab}")
    return sorted(out)
