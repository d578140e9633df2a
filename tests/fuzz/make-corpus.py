#!/usr/bin/env python3
"""tests/fuzz/make-corpus.py — (re)write the seed corpus of the libFuzzer targets, tests/fuzz/corpus/<target>/.

Usage: python3 tests/fuzz/make-corpus.py [--build-dir build]
Needs the native build's tools (bin/bitnet-dummy, for the small dummy models) and utils/plan-cluster.py.
Every seed is small (the fuzzers mutate whole inputs: the smaller, the more executions per second) and
valid, so that the fuzzer starts deep inside each parser; the hand-made ones below spell out each
format's structure. The output is deterministic: running it again rewrites the same bytes.
Exit status: 0, or 1 when a tool fails (its message is printed)."""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SEP = b"\n=====\n"  # fuzz_util.h FUZZ_SEP: between the files of a multi-file input


OUT = os.path.join(HERE, "corpus")  # main() points this at a temporary directory, swapped in at the end


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    if r.returncode != 0:
        sys.exit(f"make-corpus: {' '.join(cmd)} failed:\n{r.stderr}")


# ---- GGUF (formats.md; v3 little-endian: magic, version, n_tensors, n_kv, KVs, tensor infos, pad 32, data)
def gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_kv(key, vtype, payload):
    return gguf_str(key) + struct.pack("<I", vtype) + payload


def small_gguf():
    """Every value type once, string and numeric arrays, two F32 tensors and a chat template."""
    kvs = [
        gguf_kv("general.architecture", 8, gguf_str("llama")),
        gguf_kv("general.alignment", 4, struct.pack("<I", 32)),
        gguf_kv("t.u8", 0, struct.pack("<B", 7)), gguf_kv("t.i8", 1, struct.pack("<b", -7)),
        gguf_kv("t.u16", 2, struct.pack("<H", 700)), gguf_kv("t.i16", 3, struct.pack("<h", -700)),
        gguf_kv("t.i32", 5, struct.pack("<i", -70000)), gguf_kv("t.f32", 6, struct.pack("<f", 0.5)),
        gguf_kv("t.bool", 7, struct.pack("<B", 1)), gguf_kv("t.u64", 10, struct.pack("<Q", 1 << 40)),
        gguf_kv("t.i64", 11, struct.pack("<q", -(1 << 40))), gguf_kv("t.f64", 12, struct.pack("<d", 1e-300)),
        gguf_kv("tokenizer.ggml.model", 8, gguf_str("llama")),
        gguf_kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 4) + b"".join(gguf_str(t) for t in
                                                                              ["<unk>", "<s>", "</s>", "\u2581a"])),
        gguf_kv("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, 4) + struct.pack("<4f", 0, 0, 0, -1)),
        gguf_kv("tokenizer.ggml.token_type", 9, struct.pack("<IQ", 5, 4) + struct.pack("<4i", 2, 3, 3, 1)),
        gguf_kv("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", 1)),
        gguf_kv("tokenizer.ggml.eos_token_id", 4, struct.pack("<I", 2)),
        gguf_kv("tokenizer.chat_template", 8, gguf_str("{% for m in messages %}<|start_header_id|>{{ m['role'] }}"
                                                       "<|end_header_id|>{{ m['content'] }}<|eot_id|>{% endfor %}")),
    ]
    tensors = [("a.weight", [4, 2], 0, 0), ("b.weight", [8], 0, 32)]
    infos = b"".join(gguf_str(n) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", x) for x in ne) +
                     struct.pack("<IQ", t, off) for n, ne, t, off in tensors)
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs) + infos
    head += b"\0" * (-len(head) % 32)
    data = struct.pack("<8f", *range(8)) + struct.pack("<8f", *[x / 8 for x in range(8)])
    return head + data


# ---- safetensors (8-byte little-endian header length, JSON header, data; offsets relative to the data)
def safetensors(entries, meta=None):
    header, data = {}, b""
    for name, dtype, shape, raw in entries:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if meta is not None:
        header["__metadata__"] = meta
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


# ---- Hugging Face tokenizer files
LLAMA3_SPLIT = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")


def byte_chars():
    """GPT-2's bytes_to_unicode: printable bytes keep their code point, the rest get 256, 257, ..."""
    kept = set(range(ord("!"), ord("~") + 1)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    out, n = [], 0
    for b in range(256):
        if b in kept:
            out.append(chr(b))
        else:
            out.append(chr(256 + n))
            n += 1
    return out


def bpe_tokenizer_json(pre_tokenizer, merges_as_lists=False):
    # the byte-level characters of a small alphabet (a vocabulary of all 256 would make every input 3 KB
    # larger and every execution slower; the importer does not need them all)
    chars = [c for c in byte_chars() if c in "helowrd!,.123 \u0120\u010a"]
    vocab = {c: i for i, c in enumerate(chars)}
    merges = [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), ("\u0120", "w"), ("o", "r"), ("\u0120w", "or")]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    added = [{"id": len(vocab), "content": "<|begin_of_text|>", "special": True},
             {"id": len(vocab) + 1, "content": "<|eot_id|>", "special": True}]
    return json.dumps({
        "version": "1.0", "added_tokens": added, "normalizer": None, "pre_tokenizer": pre_tokenizer,
        "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|begin_of_text|>",
                                                                                      "type_id": 0}},
                                                                    {"Sequence": {"id": "A", "type_id": 0}}]},
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": vocab,
                  "merges": [[a, b] for a, b in merges] if merges_as_lists else [f"{a} {b}" for a, b in merges]},
    }, ensure_ascii=False)


def spm_tokenizer_json():
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(8):  # a few byte-fallback tokens (the format has 256; the importer needs none)
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for t in ["\u2581", "a", "b", "\u2581a", "ab", "\u2581ab"]:
        vocab[t] = len(vocab)
    return json.dumps({
        "version": "1.0",
        "added_tokens": [{"id": 0, "content": "<unk>", "special": True}, {"id": 1, "content": "<s>", "special": True},
                         {"id": 2, "content": "</s>", "special": True}],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                           {"type": "Replace", "pattern": {"String": " "},
                                                            "content": "\u2581"}]},
        "pre_tokenizer": None,
        "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": {"type": "BPE", "byte_fallback": True, "unk_token": "<unk>", "vocab": vocab,
                  "merges": ["\u2581 a", "a b", "\u2581a b"]},
    }, ensure_ascii=False)


def tokenizer_config(template, bos="<s>", eos="</s>"):
    return json.dumps({"add_bos_token": True, "add_eos_token": False, "bos_token": bos, "eos_token": eos,
                       "chat_template": template, "added_tokens_decoder": {
                           "1": {"content": "<s>", "special": True}, "2": {"content": "</s>", "special": True}}})


# ---- protobuf (tokenizer.model: ModelProto; field 1 pieces, 2 TrainerSpec, 3 NormalizerSpec)
def pb_varint(x):
    x &= (1 << 64) - 1
    out = b""
    while True:
        b = x & 0x7F
        x >>= 7
        out += bytes([b | (0x80 if x else 0)])
        if not x:
            return out


def pb_field(num, wire, payload):
    key = pb_varint(num << 3 | wire)
    if wire == 2:
        return key + pb_varint(len(payload)) + payload
    return key + payload


def spm_model():
    pieces = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3)]
    pieces += [(f"<0x{b:02X}>", 0.0, 6) for b in range(8)]
    pieces += [("\u2581", -1.0, 1), ("a", -2.0, 1), ("\u2581a", -3.0, 1), ("b", -4.0, 1), ("ab", -5.0, 1)]
    out = b""
    for text, score, typ in pieces:
        sp = pb_field(1, 2, text.encode()) + pb_field(2, 5, struct.pack("<f", score)) + pb_field(3, 0, pb_varint(typ))
        out += pb_field(1, 2, sp)
    trainer = (pb_field(3, 0, pb_varint(2)) + pb_field(40, 0, pb_varint(0)) + pb_field(41, 0, pb_varint(1)) +
               pb_field(42, 0, pb_varint(2)) + pb_field(43, 0, pb_varint(-1)))
    return out + pb_field(2, 2, trainer) + pb_field(3, 2, pb_field(3, 0, pb_varint(1)))


def main():
    """Writes every target's seeds into a temporary directory, then replaces tests/fuzz/corpus with it (a
    failing tool leaves the committed corpus as it was). Exit status as the module's docstring says."""
    global OUT
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default=os.environ.get("BITNET_BUILD_DIR", os.path.join(ROOT, "build")))
    a = ap.parse_args()
    dummy = os.path.join(a.build_dir, "bin", "bitnet-dummy")
    if not os.access(dummy, os.X_OK):
        sys.exit(f"make-corpus: {dummy} not found: build the native tools first (cmake --build build)")
    tmp = tempfile.mkdtemp(prefix="bitnet-corpus-")
    OUT = os.path.join(tmp, "corpus")
    try:
        # model and gguf: dummy models of each architecture and layout (n_embd 64: about 37 KB)
        # fuzz_model.c's selector byte (mod 5): 0 AUTO, 1 I2_S, 2 TL1, 3 TL2, 4 STORED
        paths = {"auto": 0, "i2_s": 1, "tl1": 2, "tl2": 3, "stored": 4}
        for arch, outtype, on in [("bitnet", "i2_s", ["i2_s", "auto"]), ("bitnet-b1.58", "tl1", ["tl1", "stored"]),
                                  ("bitnet-25", "i2_s", ["stored", "tl1"]), ("llama", "i2_s", ["i2_s", "tl2"]),
                                  ("llama", "tl1", ["i2_s"])]:
            p = os.path.join(tmp, f"{arch}-{outtype}.gguf")
            run([dummy, "-o", p, "--arch", arch, "--n-embd", "64", "--n-ff", "128", "--n-layer", "1", "--n-head", "2",
                 "--vocab-size", "259", "--ctx", "32", "--outtype", outtype, "-q"])
            with open(p, "rb") as f:
                gguf = f.read()
            for path in on:
                put("model", f"{arch}-{outtype}-on-{path}", bytes([paths[path]]) + gguf)
        # the bitnet I2_S model in bitnet.cpp's ARM and 4-row layouts (no record), asked for as such:
        # selector / 5 = the layout (0 AUTO, 1 x86, 2 arm64, 3 rows4)
        sys.path.insert(0, ROOT)
        from tests.tools import i2s_layouts
        norec = os.path.join(tmp, "bitnet-i2_s-norecord.gguf")
        run([dummy, "-o", norec, "--arch", "bitnet", "--n-embd", "64", "--n-ff", "128", "--n-layer", "1", "--n-head",
             "2", "--vocab-size", "259", "--ctx", "32", "--outtype", "i2_s", "--no-layout-record", "-q"])
        for layout, code, path in (("arm64", 2, "i2_s"), ("rows4", 3, "stored")):
            p = os.path.join(tmp, f"bitnet-i2_s-{layout}.gguf")
            i2s_layouts.repack_file(norec, p, layout)
            with open(p, "rb") as f:
                put("model", f"bitnet-i2_s-{layout}-on-{path}", bytes([paths[path] + 5 * code]) + f.read())
        # fuzz_gguf.c's selector byte: 0 with the string-array index, 1 without
        with open(os.path.join(tmp, "llama-i2_s.gguf"), "rb") as f:
            put("gguf", "dummy-llama-i2_s-indexed", b"\0" + f.read())
        put("gguf", "all-types-indexed", b"\0" + small_gguf())
        put("gguf", "all-types-walked", b"\1" + small_gguf())

        put("safetensors", "f32-bf16-f16.safetensors", safetensors(
            [("model.embed_tokens.weight", "F32", [2, 4], struct.pack("<8f", *range(8))),
             ("model.norm.weight", "BF16", [4], b"\x80\x3f" * 4),
             ("lm_head.weight", "F16", [2, 2], b"\x00\x3c" * 4),
             ("model.layers.0.self_attn.q_proj.weight", "U8", [2, 2], bytes([0x55, 0xAA, 0x05, 0x50])),
             ("model.layers.0.self_attn.q_proj.weight_scale", "F32", [], struct.pack("<f", 0.25))],
            {"format": "pt"}))
        put("safetensors", "f64-i8-empty.safetensors", safetensors(
            [("a", "F64", [2], struct.pack("<2d", 1.5, -2.0)), ("b", "I8", [3], bytes([1, 255, 0])),
             ("c", "F32", [0, 3], b"")]))

        put("hf_tokenizer_json", "llama-bpe.json", bpe_tokenizer_json(
            {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": LLAMA3_SPLIT}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}).encode() +
            SEP + tokenizer_config("{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
                                   "{{ m['content'] }}<|eot_id|>{% endfor %}", "<|begin_of_text|>",
                                   "<|eot_id|>").encode())
        put("hf_tokenizer_json", "gpt2.json", bpe_tokenizer_json(
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}, True))
        put("hf_tokenizer_json", "falcon3.json", bpe_tokenizer_json(
            {"type": "Sequence", "pretokenizers": [{"type": "Punctuation", "behavior": "contiguous"},
                                                   {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
                                                   {"type": "Digits", "individual_digits": True}]}).encode() +
            SEP + b"{}" + SEP + json.dumps({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}).encode())
        put("hf_tokenizer_json", "spm.json", spm_tokenizer_json().encode() + SEP + tokenizer_config(None).encode())
        put("hf_tokenizer_model", "spm.model", spm_model())
        put("hf_tokenizer_model", "spm-config.model", spm_model() + SEP + tokenizer_config("bitnet").encode())

        put("hf_config", "llama.json", json.dumps({
            "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 300,
            "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "tie_word_embeddings": True,
            "rope_scaling": {"rope_type": "llama3", "factor": 8.0}, "torch_dtype": "bfloat16",
            "quantization_config": {"quant_method": "bitnet", "linear_class": "autobitlinear",
                                    "quantization_mode": "offline"}}))
        put("hf_config", "bitnet.json", json.dumps({
            "architectures": ["BitnetForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 2, "vocab_size": 300, "rms_norm_eps": 1e-6,
            "hidden_act": "silu", "head_dim": 32}))

        # tokenizer: mode byte (fuzz_tokenizer.c) + text or ids
        texts = [b"Hello world! hello, World 12345", "caf\u00e9 \u2581 \u65e5\u672c\u8a9e \U0001F600".encode(),
                 b"<s>a</s> <|eot_id|><u>  \t\n\n x", b"\xff\xfe\xc3(\xe2\x82 ab"]
        for mode in range(16):
            put("tokenizer", f"encode-{mode:02d}", bytes([mode]) + texts[mode % len(texts)])
        put("tokenizer", "decode-ids", bytes([16]) + b"".join(struct.pack("<i", i) for i in [1, 300, 5, 259, 2, 72]))
        put("tokenizer", "decode-bpe", bytes([17]) + b"".join(struct.pack("<i", i) for i in [256, 259, 200, 31, 5]))

        # chat: flags, n_past, template, then messages (role byte + content)
        msgs = SEP + b"\x00You are helpful." + SEP + b"\x01Hi!" + SEP + b"\x02Hello. How can I help?" + SEP + b"\x01Bye"
        for fam in range(1, 4):
            put("chat", f"family{fam}", bytes([fam | 4, 2]) + b"<|start_header_id|>" + msgs)
            put("chat", f"family{fam}-open", bytes([fam | 8, 3]) + b"{{ eos_token }}" + msgs)

        for p in ["tests/data/kernel_config/tiny-tl1.ini", "tests/data/kernel_config/tiny-tl2.ini",
                  "configs/bitnetcpp-tiny.yaml", "configs/dummy-125M.yaml"]:
            with open(os.path.join(ROOT, p), "rb") as f:
                text = f.read()
            put("tile_file", os.path.basename(p), bytes([0, 1 if p.endswith(".yaml") else 0]) + text)
        for b in sorted(os.listdir(os.path.join(ROOT, "boards"))):
            if b.endswith(".yaml"):
                with open(os.path.join(ROOT, "boards", b), "rb") as f:
                    put("board", b, f.read())
        # a cluster plan as utils/plan-cluster.py writes it (a 2-layer model on two loopback nodes)
        m = os.path.join(tmp, "plan-model.gguf")
        run([dummy, "-o", m, "--n-embd", "64", "--n-ff", "128", "--n-layer", "2", "--n-head", "2", "--vocab-size", "259",
             "-q"])
        env = dict(os.environ, BITNET_BUILD_DIR=a.build_dir)
        for nodes in (1, 2):
            out = os.path.join(tmp, f"plan-{nodes}.yaml")
            # the cluster file by its path in the repository (the plan records it), run from the root
            run([sys.executable, os.path.join("utils", "plan-cluster.py"), "-m", m, "--cluster",
                 os.path.join("clusters", "host-loopback-4.yaml"), "--nodes", str(nodes), "--out", out], env)
            with open(out, "rb") as f:
                text = f.read()
            # the plan names the model by its path and SHA-256: make the path stable
            put("cluster_plan", f"loopback-{nodes}.yaml", text.replace(m.encode(), b"model.gguf"))
        put("kchoice_cache", "two-records", "v1|AMD_EPYC|tl2-avx2|i2s-avx2|TL2|3200x3200|160,96,32|t2 16\n"
                                            "v1|x|tl2-avx2|i2s-avx512|TL2|8640x3200|160,96,32|t1 128\n")
        put("kchoice_cache", "cut-record", "v1|x|y 12\nv1|AMD_EPYC|tl2-avx2|i2s-avx2|TL2|3200x3200|160,96,32|t2 9")
        # server_request: selector byte (fuzz_server_request.c: 0 chat, 1 completion, 2 tokenize, 3 detokenize,
        # 4 embeddings)
        put("server_request", "chat", b"\0" + json.dumps({
            "model": "model.gguf", "messages": [{"role": "system", "content": "Be brief."},
                                                {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                                                {"role": "assistant", "content": "Hello."},
                                                {"role": "developer", "content": "x"}],
            "max_tokens": 16, "temperature": 0.7, "top_p": 0.9, "top_k": 40, "seed": -1, "stop": ["\n", "END"],
            "stream": True, "stream_options": {"include_usage": True}, "n": 1, "ignore_eos": False}).encode())
        put("server_request", "completion", b"\1" + json.dumps({
            "prompt": "caf\u00e9 \U0001F600", "max_completion_tokens": 8, "stop": "x", "logprobs": None}).encode())
        put("server_request", "completion-ids", b"\1" + json.dumps({"prompt": [1, 2, 511], "seed": 2**64 - 1}).encode())
        put("server_request", "tokenize", b"\2" + json.dumps({"content": "Hello world", "add_special": True}).encode())
        put("server_request", "detokenize", b"\3" + json.dumps({"tokens": [1, 300, 511]}).encode())
        put("server_request", "embeddings", b"\4" + json.dumps({
            "model": "model.gguf", "input": ["query: what is BitNet?", "caf\u00e9"], "encoding_format": "base64",
            "dimensions": 64}).encode())
        put("server_request", "embeddings-ids", b"\4" + json.dumps({"input": [[1, 2, 511], [7]]}).encode())
        final = os.path.join(HERE, "corpus")
        shutil.rmtree(final, ignore_errors=True)
        shutil.move(OUT, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
