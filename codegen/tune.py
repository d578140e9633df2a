"""`python3 -m codegen tune`: choose TL1/TL2 tiles per weight shape by measuring them on this machine.

For each (M, K) shape the legal tile space (codegen/targets.py rules) is pruned to
    block_m: multiples of 32 that divide M, up to --max-block-m (512; the host's hard limit is 8192),
    block_k: TL2 every legal value (multiples of 24 up to 255 leaving a K remainder the two-weight
             path takes 32 at a time); TL1 multiples of 32 up to 256 that divide K (every legal value
             when none does),
    simd_m:  TL2 32; TL1 32 and 64,
plus the tiles the runtime uses today (the covering configs/ table, else the derive rule: the
"baseline"). Each candidate is timed by build/bin/bitnet-kernel-bench: median GEMV (N = 1) time of the
whole product through bitnet_mul_mat with --threads threads, weights read from DRAM (the bench rotates
among copies of the weight ≥ 16× the last-level cache), which is what token generation does. Every
candidate runs on the generic SIMD kernel (runtime tiles, so no candidate needs a rebuild; also the
baseline, whose specialized kernel the build usually has, so like is compared with like).

Search (successive halving under --budget seconds, split over the shapes): round 1 times every
candidate briefly; each later round keeps the faster half (and always the baseline), doubles the
time per repetition and reverses the order (so a load change on a busy machine does not favour one
end of the list), until one candidate is left or the next round would not fit the budget. The finalists
are ranked by the geometric mean over all rounds of their median divided by the baseline's median
in the same round; a candidate replaces the baseline only when that is below 1 - --min-gain
(default 2 %), so measurement noise does not churn tables. --budget is an upper bound: the search
ends earlier when only finalists are left. With --specialize N the last
round's best N per shape (and the baseline) are also rendered as specialized kernels into a scratch
build next to --out and re-timed there (that is the code a config generates); that re-timing counts
as one more round and the winner must be one of them.

Output: a config YAML (codegen/config.py schema) whose `default` table of the target is the chosen
tiles, with provenance in its comments (CPU, date, command, load, per shape the top candidates'
medians) and one `note` per entry, plus a JSON file with every measurement. It is written to --out
(default build/tuned/<name>.yaml) and never into configs/ or generated/ or over a tracked file:
tuning proposes a file, a person decides to commit it. Tables of the other target are copied
unchanged from the config that covers the shapes, so ARM presets survive.

ARM (tl1) cannot be tuned on x86: the NEON kernels would run under qemu-user emulation, whose times
say nothing about a real ARM core; `--target tl1` on x86 exits 2 saying so (tune on an AArch64
machine, or keep the ARM presets). Likewise tl2 on AArch64.

Exit codes: 0 written; 2 bad input, a target this machine cannot measure, or an output path that is
refused; 3 the benchmark failed (not built, crashed, or a kernel disagreed with the reference).
"""
from __future__ import annotations

import datetime
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from . import config as cfgmod
from . import derive as derivemod
from . import shapes as shapesmod
from .render import DEFAULT_CONFIGS, REPO_ROOT, ProposalPathError, check_proposal_path, display_path
from .targets import SCHEMES, native_target, targets_of

EXIT_OK, EXIT_BAD, EXIT_BENCH = 0, 2, 3
BENCH_NAME = "bitnet-kernel-bench"
DEFAULT_BUDGET = 300.0
DEFAULT_MAX_BLOCK_M = 512
HOST_MAX_BLOCK_M = 8192          # src/runtime/lut_host.c: BITNET_HOST_ACC_CAP
ROUND1_REPS, ROUND1_MIN_TIME = 3, 0.01


class TuneError(Exception):
    """A problem the user can fix; `code` is the exit status."""

    def __init__(self, msg: str, code: int = EXIT_BAD):
        super().__init__(msg)
        self.code = code


Tiles = tuple  # (block_m, block_k, simd_m)


def fmt_tiles(t: Tiles) -> str:
    return f"{t[0]}/{t[1]}/{t[2]}"


# ---------------------------------------------------------------------------------------------
# Search space
# ---------------------------------------------------------------------------------------------
def candidates(target: str, m: int, k: int, max_block_m: int = DEFAULT_MAX_BLOCK_M) -> list[Tiles]:
    """The pruned legal (block_m, block_k, simd_m) of one shape (module docstring), sorted.

    Every returned triple passes Scheme.violations. Empty when M % 32 != 0 or no block_k is legal.
    Example: tl2 640x2560 -> block_m {32, 64, 128, 160, 320}, block_k {96, 192, 240}: 15 triples.
    """
    t = SCHEMES[target]
    cap = min(max_block_m, HOST_MAX_BLOCK_M, m)
    block_ms = [bm for bm in range(32, cap + 1, 32) if m % bm == 0]
    block_ks = t.search_block_ks(k)
    simd_ms = list(t.simd_m_allowed)
    out = [(bm, bk, sm) for bm in block_ms for bk in block_ks for sm in simd_ms
           if not t.violations(m, k, bm, bk, sm)]
    return sorted(out)


def baseline_tiles(target: str, shape, configs) -> tuple[Tiles | None, str]:
    """The tiles the runtime picks today for `shape` and where they come from.

    Mirrors bitnet_lut_tiles_for without a model table: the first config (name order) whose
    `default` table has the shape, then `pretuned` tables, else the derive rule. (None, reason) when
    even the rule finds none.
    """
    for tab in cfgmod.TABLE_NAMES:
        for c in sorted(configs, key=lambda c: c.name):
            table = c.table(target, tab)
            e = table.entry(*shape) if table else None
            if e is not None:
                return e.tiles, f"{c.name}/{tab}"
    d = derivemod.derive_tiles(target, *shape)
    if d is None:
        return None, "no legal tiles under the derive rule"
    return (d["block_m"], d["block_k"], d["simd_m"]), "derive rule"


# ---------------------------------------------------------------------------------------------
# The benchmark tool
# ---------------------------------------------------------------------------------------------
def find_bench(explicit: str | None = None) -> str:
    """Path of bitnet-kernel-bench: --bench, else $BITNET_BUILD_DIR/bin, else build/bin of the repo."""
    cands = [explicit] if explicit else []
    if not explicit:
        if os.environ.get("BITNET_BUILD_DIR"):
            cands.append(os.path.join(os.environ["BITNET_BUILD_DIR"], "bin", BENCH_NAME))
        cands.append(os.path.join(REPO_ROOT, "build", "bin", BENCH_NAME))
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise TuneError(f"codegen tune: {BENCH_NAME} not found (looked at {', '.join(cands)}); build it with "
                    f"`cmake -S . -B build -G Ninja && cmake --build build --target {BENCH_NAME}` or pass --bench PATH",
                    EXIT_BENCH)


@dataclass
class Measurement:
    """One candidate's GEMV timing in one round (seconds per call)."""
    tiles: Tiles
    median: float
    min: float
    max: float
    sd: float
    reps: int
    gbps: float
    kernel: str
    specialized: bool
    per_threads: dict = field(default_factory=dict)   # threads -> median seconds


def run_bench(bench: str, target: str, shape, tiles_list, threads, reps: int, min_time: float,
              max_time: float, seed: int = 1, extra=(), generic: bool = True) -> tuple[dict, float]:
    """Time every tiles of tiles_list for one shape with one bench process.

    generic: run every candidate on the generic SIMD kernel (--generic), also tiles that have a
    specialized kernel in the bench's build (the baseline's usually has), so the search compares
    like with like; False for the specialized re-timing.

    Returns ({tiles: Measurement}, wall seconds). The objective `median` is the sum over `threads` of
    the median GEMV time at that thread count. Raises TuneError(EXIT_BENCH) when the bench fails,
    including a kernel output that differs from the I2_S reference (the bench checks every product).
    """
    m, k = shape
    with tempfile.TemporaryDirectory(prefix="codegen-tune-") as td:
        jpath = os.path.join(td, "bench.json")
        cmd = [bench, "--target", target, "--shape", f"{m}x{k}", "--threads", ",".join(map(str, threads)),
               "--batch", "none", "--no-i2s", "--no-bw", "--no-cache", "--no-lut", "--reps", str(reps),
               "--min-time", f"{min_time:g}", "--max-time", f"{max_time:g}", "--seed", str(seed),
               "--json", jpath, "--quiet", *(["--generic"] if generic else []), *extra]
        for t in tiles_list:
            cmd += ["--tiles", ",".join(map(str, t))]
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True)
        except OSError as e:
            raise TuneError(f"codegen tune: cannot run {bench}: {e.strerror or e}", EXIT_BENCH) from None
        wall = time.monotonic() - t0
        if p.returncode != 0:
            raise TuneError(f"codegen tune: {display_path(bench)} failed (exit {p.returncode}) on {m}x{k}:\n"
                            f"{p.stderr.strip() or p.stdout.strip()[-2000:]}", EXIT_BENCH)
        try:
            with open(jpath, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            raise TuneError(f"codegen tune: {display_path(bench)} wrote no readable JSON: {e}", EXIT_BENCH) from None
    out: dict = {}
    for kr in doc.get("kernels", []):
        tiles = tuple(kr["tiles"])
        if not str(kr.get("check", "")).startswith("bit-exact"):
            raise TuneError(f"codegen tune: {m}x{k} tiles {fmt_tiles(tiles)}: {kr.get('check')}", EXIT_BENCH)
        lut = kr["lut"]
        per = {g["threads"]: g["dram"]["median_us"] * 1e-6 for g in lut["gemv"]}
        tot = {key: sum(g["dram"][key + "_us"] for g in lut["gemv"]) * 1e-6 for key in ("median", "min", "max")}
        sd = math.sqrt(sum(g["dram"]["sd_us"] ** 2 for g in lut["gemv"])) * 1e-6
        reps_done = min(g["dram"]["reps"] for g in lut["gemv"])
        gb = lut["read_bytes"] / (lut["gemv"][-1]["dram"]["median_us"] * 1e-6) * 1e-9
        out[tiles] = Measurement(tiles, tot["median"], tot["min"], tot["max"], sd, reps_done, gb, lut["kernel"],
                                 bool(lut["specialized"]), per)
    missing = [t for t in tiles_list if tuple(t) not in out]
    if missing:
        raise TuneError(f"codegen tune: the bench did not report {', '.join(map(fmt_tiles, missing))} for {m}x{k}",
                        EXIT_BENCH)
    return out, wall


# ---------------------------------------------------------------------------------------------
# Search
# ---------------------------------------------------------------------------------------------
@dataclass
class ShapeResult:
    shape: tuple
    baseline: Tiles
    baseline_origin: str
    n_candidates: int
    rounds: list = field(default_factory=list)   # [{"reps", "min_time", "wall", "results": {tiles: Measurement}}]
    chosen: Tiles | None = None
    reason: str = ""
    spec: dict = field(default_factory=dict)     # tiles -> Measurement of the specialized kernel

    def final_ranking(self) -> list:
        """Every candidate once: the last round it reached, fastest first within a round, later rounds first."""
        best: dict = {}
        for ri, rnd in enumerate(self.rounds):
            for t, meas in rnd["results"].items():
                best[t] = (ri, meas)
        return sorted(best.items(), key=lambda kv: (-kv[1][0], kv[1][1].median))


def tune_shape(bench: str, target: str, shape, cands: list, baseline: Tiles, budget: float, threads,
               seed: int, log, extra=()) -> ShapeResult:
    """Successive halving over cands (baseline always included) within `budget` seconds (module doc)."""
    res = ShapeResult(shape=shape, baseline=baseline, baseline_origin="", n_candidates=len(cands))
    alive = list(cands)
    if baseline not in alive:
        alive.append(baseline)
    reps, min_time = ROUND1_REPS, ROUND1_MIN_TIME
    spent = 0.0
    order_rev = False
    while True:
        todo = list(reversed(alive)) if order_rev else list(alive)
        results, wall = run_bench(bench, target, shape, todo, threads, reps, min_time, max_time=max(2.0, 20 * min_time),
                                  seed=seed, extra=extra)
        spent += wall
        res.rounds.append({"reps": reps, "min_time": min_time, "wall": wall, "results": results})
        ranked = sorted(alive, key=lambda t: results[t].median)
        log(f"  round {len(res.rounds)}: {len(alive)} candidates, {reps} reps of >= {min_time:g} s, {wall:.1f} s; "
            f"best {fmt_tiles(ranked[0])} {results[ranked[0]].median * 1e6:.1f} us, baseline "
            f"{fmt_tiles(baseline)} {results[baseline].median * 1e6:.1f} us")
        contenders = [t for t in ranked if t != baseline]
        if len(contenders) <= 1:
            break
        keep = ranked[: max(2, (len(ranked) + 1) // 2)]
        if baseline not in keep:
            keep.append(baseline)
        if len(keep) >= len(alive):
            log(f"  stop: {len(alive)} finalists (with the baseline); the choice uses all their rounds")
            break
        # cost model of the next round: setup per candidate + (reps + 1) repetitions of max(min_time, call)
        n_reps_next, min_time_next = reps, min_time * 2
        per_cand_setup = max(0.0, wall / len(alive) - (reps + 1) * max(min_time, results[ranked[0]].median))
        call = max(results[t].median for t in keep)
        est = len(keep) * (per_cand_setup + (n_reps_next + 1) * max(min_time_next, call))
        if spent + est > budget:
            log(f"  stop: the next round ({len(keep)} candidates, ~{est:.1f} s) does not fit the "
                f"{budget:.1f} s of this shape ({spent:.1f} s spent)")
            break
        alive, reps, min_time = keep, n_reps_next, min_time_next
        order_rev = not order_rev
    return res


def scores(res: ShapeResult, with_spec: bool = False) -> dict:
    """Candidates of the last round (or, with_spec, of the specialized re-timing) -> geometric mean
    over every round of (its median / the baseline's median in that round): each ratio compares two
    timings taken minutes apart at most, so a load change between rounds cancels, and using every
    round of the finalists damps the noise of one round. with_spec counts the specialized re-timing
    as one more round."""
    rounds = [rd["results"] for rd in res.rounds]
    if with_spec and res.spec:
        rounds.append(res.spec)
    pool = res.spec if with_spec and res.spec else res.rounds[-1]["results"]
    out = {}
    for t in pool:
        logs = [math.log(rd[t].median / rd[res.baseline].median) for rd in rounds
                if t in rd and res.baseline in rd and rd[res.baseline].median > 0 and rd[t].median > 0]
        out[t] = math.exp(sum(logs) / len(logs)) if logs else float("inf")
    return out


def choose(res: ShapeResult, min_gain: float, use_spec: bool) -> None:
    """Pick the winner (module doc): the lowest geometric-mean ratio to the baseline over the rounds
    (scores), among the re-timed specialized kernels when use_spec (their round counts as one more).
    A candidate replaces the baseline only when it is faster by more than min_gain."""
    with_spec = bool(use_spec and res.spec and res.baseline in res.spec)
    sc = scores(res, with_spec)
    n = len(res.rounds) + with_spec
    where = (f"{n} round{'s' if n > 1 else ''}{' (the last: specialized kernels)' if with_spec else ''}, "
             f"geometric mean of the ratios to the baseline")
    best = min(sc, key=lambda t: (sc[t], t != res.baseline))
    gain = 1.0 - sc[best]
    if best == res.baseline:
        res.chosen, res.reason = best, f"the baseline ({res.baseline_origin}) was the fastest over {where}"
    elif gain > min_gain:
        res.chosen = best
        res.reason = (f"{gain * 100:.1f} % faster than the baseline {fmt_tiles(res.baseline)} "
                      f"({res.baseline_origin}) over {where}")
    else:
        res.chosen = res.baseline
        res.reason = (f"kept the baseline ({res.baseline_origin}): the fastest, {fmt_tiles(best)}, was only "
                      f"{gain * 100:.1f} % faster over {where} (threshold {min_gain * 100:.1f} %)")


# ---------------------------------------------------------------------------------------------
# Specialized re-timing (optional): render + build the bench with the top candidates compiled in
# ---------------------------------------------------------------------------------------------
def build_specialized_bench(work: str, target: str, per_shape: dict, jobs: int, log) -> str:
    """Write one scratch config per rank (shapes: list; tl table = the rank-th candidate of every
    shape), generate kernels into work/generated, configure and build bitnet-kernel-bench in
    work/build. Returns the bench path. per_shape: {shape: [tiles, ...]} (lists may differ in length)."""
    from . import render
    cfg_dir = os.path.join(work, "configs")
    os.makedirs(cfg_dir, exist_ok=True)
    for f in os.listdir(cfg_dir):
        os.remove(os.path.join(cfg_dir, f))
    depth = max(len(v) for v in per_shape.values())
    shapes = sorted(per_shape)
    for r in range(depth):
        lines = [f"model: tune-candidates-{r + 1}", "shapes:"] + [f"  - [{m}, {k}]" for m, k in shapes]
        lines += [f"{target}:", "  default:", f"    source: \"scratch config of codegen tune (rank {r + 1} candidates)\"",
                  "    kernels:"]
        for s in shapes:
            lst = per_shape[s]
            t = lst[min(r, len(lst) - 1)]
            lines.append(f"      - {{m: {s[0]}, k: {s[1]}, block_m: {t[0]}, block_k: {t[1]}, simd_m: {t[2]}}}")
        with open(os.path.join(cfg_dir, f"tune-candidates-{r + 1}.yaml"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    gen = os.path.join(work, "generated")
    configs = cfgmod.load_all(cfg_dir)
    files = render.render_all(configs, cfgmod.expand_paths(cfg_dir), None)
    os.makedirs(gen, exist_ok=True)
    render.check_out_dir(gen, files)
    render.write_outputs(gen, files)
    bdir = os.path.join(work, "build")
    gen_flag = ["-G", "Ninja"] if _have("ninja") and not os.path.exists(os.path.join(bdir, "CMakeCache.txt")) else []
    steps = [["cmake", "-S", REPO_ROOT, "-B", bdir, *gen_flag, "-DBITNET_BUILD_TESTS=OFF", "-DCMAKE_BUILD_TYPE=Release",
              f"-DBITNET_GENERATED_DIR={gen}"],
             ["cmake", "--build", bdir, "--target", BENCH_NAME, "--parallel", str(jobs)]]
    for cmd in steps:
        log(f"  $ {' '.join(shlex.quote(c) for c in cmd)}")
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise TuneError(f"codegen tune: building the specialized bench failed:\n{(p.stdout + p.stderr)[-3000:]}",
                            EXIT_BENCH)
    return os.path.join(bdir, "bin", BENCH_NAME)


def _have(prog: str) -> bool:
    return any(os.access(os.path.join(d, prog), os.X_OK) for d in os.environ.get("PATH", "").split(os.pathsep) if d)


# ---------------------------------------------------------------------------------------------
# Machine facts and output
# ---------------------------------------------------------------------------------------------
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def git_describe() -> str:
    try:
        head = subprocess.run(["git", "-C", REPO_ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO_ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return (head + (" (with uncommitted changes in the checkout)" if dirty else "")) if head else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def check_out_path(out: str) -> None:
    """Refuse an --out that tuning must not write (render.check_proposal_path). Raises TuneError."""
    try:
        check_proposal_path(out, "codegen tune", "tuning proposes a file")
    except ProposalPathError as e:
        raise TuneError(str(e)) from None


def _q(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def render_yaml(name: str, model: str, target: str, results: list, layout: dict | None, shapes: list,
                other_tables: dict, prov: dict, top: int, extra_keys: dict) -> str:
    """The proposed config's text. results: [ShapeResult] in shape order; other_tables: {target:
    {table name: (Table, origin)}} copied unchanged; prov: provenance strings."""
    c = ["# Proposed by `python3 -m codegen tune` -- tiles MEASURED ON ONE MACHINE; review before copying",
         "# into configs/ (then `python3 -m codegen generate`, commit configs/ and generated/).",
         f"# command:   {prov['command']}",
         f"# date:      {prov['date']}",
         f"# machine:   {prov['cpu']}; {prov['cpus']} online CPUs; {prov['machine']}",
         f"# checkout:  {prov['git']}",
         f"# bench:     {prov['bench']}",
         f"# objective: median GEMV (N = 1) time of the whole product through bitnet_mul_mat, {prov['threads']} "
         f"thread(s), weights read from DRAM (the bench rotates among copies >= 16x LLC); generic SIMD kernel "
         f"(runtime tiles){'; top candidates re-timed as specialized kernels' if prov.get('specialized') else ''}",
         f"# search:    {prov['search']}",
         f"# budget:    {prov['budget']}; load average at start {prov['load_start']}, at end {prov['load_end']}",
         "#"]
    for r in results:
        c.append(f"# {shapesmod.fmt_shape(r.shape)}: chosen {fmt_tiles(r.chosen)} -- {r.reason}; "
                 f"{r.n_candidates} candidates, {len(r.rounds)} round(s)")
        c.append("#   rank  tiles          median us      min us      max us    GB/s  round  x base  kernel")
        for i, (t, (ri, m)) in enumerate(r.final_ranking()[:top]):
            mark = " <- baseline" if t == r.baseline else ""
            b = r.rounds[ri]["results"].get(r.baseline)
            ratio = f"{m.median / b.median:6.3f}" if b and b.median > 0 else "     -"
            c.append(f"#   {i + 1:>4}  {fmt_tiles(t):<12} {m.median * 1e6:>10.1f} {m.min * 1e6:>11.1f} "
                     f"{m.max * 1e6:>11.1f} {m.gbps:>7.2f} {ri + 1:>6}  {ratio}  "
                     f"{'spec' if m.specialized else 'generic'}{mark}")
        if r.spec:
            c.append("#   specialized kernels (built from the rendered candidates):")
            for t, m in sorted(r.spec.items(), key=lambda kv: kv[1].median):
                c.append(f"#         {fmt_tiles(t):<12} {m.median * 1e6:>10.1f} {m.min * 1e6:>11.1f} "
                         f"{m.max * 1e6:>11.1f} {m.gbps:>7.2f}      -  {m.kernel}")
    c.append(f"# every measurement: {prov['json']}")
    lines = c + [f"model: {_q(model)}"]
    for key in ("hf_repo", "architecture"):
        if extra_keys.get(key):
            lines.append(f"{key}: {_q(extra_keys[key])}")
    if layout is not None:
        lines.append("layout:")
        for key in cfgmod.LAYOUT_REQUIRED + cfgmod.LAYOUT_OPTIONAL:
            if layout.get(key) is not None:
                lines.append(f"  {key}: {layout[key]}")
    else:
        lines.append("shapes:")
        lines += [f"  - [{m}, {k}]" for m, k in shapes]
    lines.append(f"notes: {_q(prov['notes'])}")
    tables = {target: {"default": None}}
    tables.update({t: v for t, v in other_tables.items() if t != target})
    for tname in SCHEMES:
        if tname not in tables:
            continue
        lines.append(f"{tname}:")
        if tname == target:
            lines += ["  default:", f"    source: {_q(prov['source'])}", "    kernels:"]
            for r in results:
                m = (r.spec.get(r.chosen) if r.spec else None) or r.rounds[-1]["results"].get(r.chosen)
                b = (r.spec.get(r.baseline) if r.spec else None) or r.rounds[-1]["results"].get(r.baseline)
                note = (f"{m.median * 1e6:.1f} us per GEMV at {prov['threads']} thread(s)"
                        + (f"; baseline {fmt_tiles(r.baseline)} {b.median * 1e6:.1f} us" if b and r.chosen != r.baseline
                           else " (the baseline)" if r.chosen == r.baseline else ""))
                t = r.chosen
                lines.append(f"      - {{m: {r.shape[0]}, k: {r.shape[1]}, block_m: {t[0]}, block_k: {t[1]}, "
                             f"simd_m: {t[2]}, note: {_q(note)}}}")
            continue
        for tab in cfgmod.TABLE_NAMES:
            if tab not in tables[tname]:
                continue
            table, origin = tables[tname][tab]
            lines += [f"  {tab}:", f"    source: {_q(table.source + ' [copied unchanged from ' + origin + ']')}",
                      "    kernels:"]
            for e in table.kernels:
                if e.shape not in shapes:
                    continue
                note = f", note: {_q(e.note)}" if e.note else ""
                lines.append(f"      - {{m: {e.m}, k: {e.k}, block_m: {e.block_m}, block_k: {e.block_k}, "
                             f"simd_m: {e.simd_m}{note}}}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Command
# ---------------------------------------------------------------------------------------------
def _source(args) -> tuple[list, dict | None, str, dict, object | None]:
    """(shapes, layout, model name, extra keys, source Config or None) from --model / --shape."""
    if args.shape:
        try:
            shapes = sorted({shapesmod.parse_shape(s) for s in args.shape})
        except ValueError as e:
            raise TuneError(f"codegen tune: --shape {e}") from None
        return shapes, None, args.name or "tuned", {}, None
    path = args.model
    if path.endswith((".yaml", ".yml")):
        cfg, problems = cfgmod.validate_file(path)
        if problems:
            raise TuneError("\n".join(problems) + f"\ncodegen tune: --model {path}: not a valid config")
        layout = None
        if cfg.layout is not None:
            layout = {k: getattr(cfg.layout, k) for k in cfgmod.LAYOUT_REQUIRED + cfgmod.LAYOUT_OPTIONAL
                      if getattr(cfg.layout, k) is not None}
        return cfg.shapes, layout, cfg.model, {"hf_repo": cfg.hf_repo, "architecture": cfg.architecture}, cfg
    try:
        info = shapesmod.model_info(path)
    except shapesmod.ShapeError as e:
        raise TuneError(f"codegen tune: {e}") from None
    layout = info.layout
    if layout is not None:
        try:
            implied = shapesmod.layout_shapes(layout["hidden_size"], layout["intermediate_size"],
                                              layout["num_attention_heads"], layout["num_key_value_heads"],
                                              layout.get("head_dim"))
        except ValueError:
            implied = None
        if implied != info.shapes:
            layout = None
    stem = os.path.basename(os.path.normpath(path))
    for ext in (".gguf", ".json"):
        stem = stem[: -len(ext)] if stem.endswith(ext) else stem
    return info.shapes, layout, stem, {"architecture": info.architecture}, None


def cmd_tune(args) -> int:
    """Entry point of `python3 -m codegen tune` (see the module docstring); returns the exit code."""
    try:
        return _tune(args)
    except TuneError as e:
        print(str(e), file=sys.stderr)
        return e.code


def _tune(args) -> int:
    def log(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    target = args.target
    native = native_target()
    if target != native:
        if target == "tl1":
            raise TuneError(
                f"codegen tune: --target tl1 cannot be measured on this {platform.machine()} machine: the TL1 kernels "
                f"are ARM NEON code, here they would run only as the portable C fallback or under qemu-user emulation, "
                f"and neither says anything about speed on a real ARM core. Keep the ARM presets (the tl1 tables "
                f"in configs/), or run this command on an AArch64 machine.")
        # the SIMD ISAs the tiles are tuned for (the portable C kernels run here too, but say nothing about them)
        isas = "/".join(t.isa.name.upper() for t in targets_of(target) if t.isa.name != "portable")
        raise TuneError(f"codegen tune: --target {target} cannot be measured on this {platform.machine()} machine "
                        f"(its kernels are {isas} code; this machine runs "
                        f"{native or 'neither LUT target'}); run it on a machine of that architecture.")

    shapes, layout, model, extra_keys, src_cfg = _source(args)
    name = args.name or (f"{src_cfg.name}-tuned" if src_cfg else f"{model}-tuned" if args.model else
                         "tuned-" + "_".join(shapesmod.fmt_shape(s) for s in shapes))
    if not cfgmod.NAME_RE.match(name):
        raise TuneError(f"codegen tune: config name {name!r}: use letters, digits, '.', '_' and '-' (give --name)")
    out = args.out or os.path.join(REPO_ROOT, "build", "tuned", f"{name}.yaml")
    check_out_path(out)
    if cfgmod.name_of(out) != name:
        log(f"codegen tune: note: the registry names a config by its file stem: {cfgmod.name_of(out)!r}, not {name!r}")
    try:
        threads = [int(t) for t in str(args.threads).split(",")] if args.threads else [os.cpu_count() or 1]
        if any(t < 1 for t in threads):
            raise ValueError
    except ValueError:
        raise TuneError(f"codegen tune: --threads {args.threads!r}: expected positive integers, e.g. 2 or 1,2") from None

    try:
        configs = cfgmod.load_all(args.configs or DEFAULT_CONFIGS)
    except cfgmod.ConfigError as e:
        raise TuneError("\n".join(e.violations) + "\ncodegen tune: the configs to compare with do not validate") from None
    if src_cfg is not None and all(c.name != src_cfg.name for c in configs):
        configs = configs + [src_cfg]
    bench = find_bench(args.bench)
    try:
        bench_args = shlex.split(args.bench_args or "")
    except ValueError as e:
        raise TuneError(f"codegen tune: --bench-args {args.bench_args!r}: {e}") from None

    plan = []
    for s in shapes:
        cands = candidates(target, *s, max_block_m=args.max_block_m)
        base, origin = baseline_tiles(target, s, [src_cfg] if src_cfg and src_cfg.table(target, "default") else configs)
        if base is None and not cands:
            raise TuneError(f"codegen tune: {target} {shapesmod.fmt_shape(s)}: no legal tiles (M must be a multiple "
                            f"of 32; see codegen/targets.py)")
        if base is None:
            base, origin = cands[0], "first legal candidate (no table, no derive-rule tiles)"
        plan.append((s, cands, base, origin))

    t_start = time.monotonic()
    load_start = loadavg()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    total_cands = sum(len(c) + (b not in c) for _, c, b, _ in plan)
    log(f"codegen tune: {target}, {len(shapes)} shape(s), {total_cands} candidates, budget {args.budget:g} s, "
        f"threads {','.join(map(str, threads))}, bench {display_path(bench)}")
    results: list[ShapeResult] = []
    for i, (s, cands, base, origin) in enumerate(plan):
        remaining = args.budget - (time.monotonic() - t_start)
        weight = (len(cands) + 1) / sum(len(c) + 1 for _, c, _, _ in plan[i:])
        shape_budget = max(0.0, remaining * weight)
        log(f"codegen tune: {shapesmod.fmt_shape(s)}: {len(cands)} candidates, baseline {fmt_tiles(base)} ({origin}), "
            f"budget {shape_budget:.1f} s")
        r = tune_shape(bench, target, s, cands, base, shape_budget, threads, args.seed, log, extra=bench_args)
        r.baseline_origin = origin
        results.append(r)

    if args.specialize > 0:
        per_shape = {}
        for r in results:
            sc = scores(r)
            top = sorted(sc, key=lambda t: sc[t])[: args.specialize]
            if r.baseline not in top:
                top.append(r.baseline)
            per_shape[r.shape] = top
        work = os.path.join(os.path.dirname(os.path.abspath(out)), f"{name}.specialize")
        log(f"codegen tune: building specialized kernels of the top {args.specialize} per shape in {work}")
        spec_bench = build_specialized_bench(work, target, per_shape, args.jobs, log)
        for r in results:
            reps = 5  # a few candidates once more, not bounded by --budget: keep it short
            min_time = min(max(r.rounds[-1]["min_time"], 0.05), 0.5)
            meas, wall = run_bench(spec_bench, target, r.shape, per_shape[r.shape], threads, reps, min_time,
                                   max_time=max(2.0, 20 * min_time), seed=args.seed, generic=False,
                                   extra=bench_args)
            r.spec = meas
            log(f"  {shapesmod.fmt_shape(r.shape)} specialized: " + ", ".join(
                f"{fmt_tiles(t)} {m.median * 1e6:.1f} us{'' if m.specialized else ' (NOT specialized)'}"
                for t, m in sorted(meas.items(), key=lambda kv: kv[1].median)))
    for r in results:
        choose(r, args.min_gain, use_spec=args.specialize > 0)
        log(f"codegen tune: {shapesmod.fmt_shape(r.shape)} -> {fmt_tiles(r.chosen)} ({r.reason})")

    # other targets' tables, unchanged, from the config that covers exactly these shapes
    other: dict = {}
    for tname in SCHEMES:
        if tname == target:
            continue
        srcs = [src_cfg] if src_cfg is not None else sorted(configs, key=lambda c: c.name)
        for c in srcs:
            tabs = {tab: (tb, f"configs/{c.name}.yaml" if c is not src_cfg else display_path(c.path))
                    for tab, tb in c.tables.get(tname, {}).items() if set(shapes) <= set(tb.shapes)}
            if tabs:
                other[tname] = tabs
                break

    wall = time.monotonic() - t_start
    json_path = os.path.splitext(out)[0] + ".tune.json"
    rounds_desc = "; ".join(f"{shapesmod.fmt_shape(r.shape)} {len(r.rounds)}" for r in results)
    prov = {
        "command": command_line(args),
        "date": date,
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "machine": f"{platform.machine()}, {platform.system()} {platform.release()}",
        "git": git_describe(),
        "bench": display_path(bench),
        "threads": ",".join(map(str, threads)),
        "search": (f"block_m multiples of 32 dividing M up to {args.max_block_m}; block_k "
                   + ("every legal value" if target == "tl2" else "multiples of 32 dividing K up to 256")
                   + f"; simd_m {'32' if target == 'tl2' else '32/64'}; successive halving (rounds per shape: "
                   + rounds_desc + f"); a candidate must beat the baseline by > {args.min_gain * 100:g} %"),
        "budget": f"{args.budget:g} s (used {wall:.1f} s)",
        "load_start": load_start,
        "load_end": loadavg(),
        "json": display_path(json_path),
        "specialized": args.specialize > 0,
        "source": (f"tuned by `python3 -m codegen tune` on {cpu_model()}, {date[:10]}: median GEMV time through "
                   f"bitnet_mul_mat at {','.join(map(str, threads))} thread(s), weights from DRAM; measurements in "
                   f"the comments above and in {os.path.basename(json_path)}"),
        "notes": (f"Tile table of {model} for {target} measured on one machine ({cpu_model()}); tables of other "
                  f"targets are copied unchanged. A proposal: it was not written into configs/."),
    }
    text = render_yaml(name, model, target, results, layout, shapes, other, prov, args.top, extra_keys)
    data, problems = cfgmod.parse_yaml(text, out)
    if not problems:
        _, problems = cfgmod.validate_data(data, out, cfgmod.name_of(out))
    if problems:
        raise TuneError("codegen tune: internal error, the proposed config does not validate:\n" + "\n".join(problems))
    doc = {
        "tool": "codegen tune", "format": 1, "provenance": prov, "target": target, "threads": threads,
        "shapes": [{
            "shape": list(r.shape), "baseline": list(r.baseline), "baseline_origin": r.baseline_origin,
            "chosen": list(r.chosen), "reason": r.reason, "n_candidates": r.n_candidates,
            "rounds": [{"reps": rd["reps"], "min_time_s": rd["min_time"], "wall_s": round(rd["wall"], 3),
                        "results": [_meas_json(m) for m in sorted(rd["results"].values(), key=lambda m: m.median)]}
                       for rd in r.rounds],
            "specialized": [_meas_json(m) for m in sorted(r.spec.values(), key=lambda m: m.median)],
        } for r in results],
    }
    try:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    except OSError as e:
        raise TuneError(f"codegen tune: {out}: {e.strerror or e}") from None
    log(f"codegen tune: wrote {display_path(out)} and {display_path(json_path)} ({wall:.1f} s)")
    log(f"codegen tune: to use it: python3 -m codegen validate {display_path(out)}; then either replace the "
        f"config it was made from (same file stem) or generate into a scratch dir: python3 -m codegen generate "
        f"--configs configs/*.yaml {display_path(out)} --out DIR && cmake -DBITNET_GENERATED_DIR=DIR ...")
    print(out)
    return EXIT_OK


def command_line(args) -> str:
    """The tune command as it ran, in canonical form (every option that shaped the result)."""
    parts = ["python3", "-m", "codegen", "tune"]
    if args.model:
        parts += ["--model", display_path(os.path.abspath(args.model)) if os.path.exists(args.model) else args.model]
    else:
        parts += ["--shape", *args.shape]
    parts += ["--target", args.target, "--budget", f"{args.budget:g}"]
    for flag, val, default in (("--threads", args.threads, None), ("--name", args.name, None),
                               ("--max-block-m", args.max_block_m, DEFAULT_MAX_BLOCK_M),
                               ("--min-gain", args.min_gain, 0.02), ("--specialize", args.specialize, 0),
                               ("--seed", args.seed, 1)):
        if val is not None and val != default:
            parts += [flag, str(val)]
    if args.bench_args:
        parts += ["--bench-args", args.bench_args]
    if args.out:
        parts += ["--out", display_path(os.path.abspath(args.out))]
    return " ".join(shlex.quote(p) for p in parts)


def _meas_json(m: Measurement) -> dict:
    return {"tiles": list(m.tiles), "median_us": round(m.median * 1e6, 3), "min_us": round(m.min * 1e6, 3),
            "max_us": round(m.max * 1e6, 3), "sd_us": round(m.sd * 1e6, 3), "reps": m.reps, "gbps": round(m.gbps, 3),
            "kernel": m.kernel, "specialized": m.specialized,
            "per_threads_us": {str(k): round(v * 1e6, 3) for k, v in m.per_threads.items()}}


def add_parser(sub) -> None:
    """Register the `tune` subcommand on the argparse subparsers of codegen/cli.py."""
    import argparse
    sp = sub.add_parser("tune", help="measure the legal tiles of each shape on this machine; write a proposed config",
                        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = sp.add_mutually_exclusive_group(required=True)
    g.add_argument("--model", metavar="PATH",
                   help="GGUF file, HF config.json, a directory holding one, or a config YAML (configs/X.yaml)")
    g.add_argument("--shape", nargs="+", metavar="MxK", help="shapes, e.g. 2560x6912 640x2560")
    sp.add_argument("--target", choices=sorted(SCHEMES), default=native_target() or "tl2",
                    help="layout to tune (default: this machine's, %(default)s); only the native one can be measured")
    sp.add_argument("--budget", type=float, default=DEFAULT_BUDGET, metavar="S",
                    help="seconds of measuring, split over the shapes (default %(default)g)")
    sp.add_argument("--out", metavar="FILE", help="proposed config (default build/tuned/<name>.yaml)")
    sp.add_argument("--name", help="config name (default <config>-tuned, <model>-tuned or tuned-<shapes>)")
    sp.add_argument("--threads", metavar="LIST",
                    help="thread counts to time; the objective is the sum of their medians (default: all CPUs)")
    sp.add_argument("--bench", metavar="PATH", help=f"{BENCH_NAME} binary (default $BITNET_BUILD_DIR/bin or build/bin)")
    sp.add_argument("--bench-args", metavar="ARGS",
                    help="extra flags for every bench call, e.g. \"--llc-mib 96 --bust-factor 32\" (see its --help)")
    sp.add_argument("--configs", nargs="+", metavar="PATH", help="configs holding the baseline tiles (default configs/)")
    sp.add_argument("--max-block-m", type=int, default=DEFAULT_MAX_BLOCK_M, metavar="N",
                    help="largest block_m tried (default %(default)d)")
    sp.add_argument("--min-gain", type=float, default=0.02, metavar="F",
                    help="a candidate replaces the baseline only when faster by more than this fraction (default 0.02)")
    sp.add_argument("--specialize", type=int, default=0, metavar="N",
                    help="re-time the best N per shape as specialized kernels (renders and builds a scratch bench)")
    sp.add_argument("--jobs", type=int, default=2, metavar="N", help="build jobs for --specialize (default 2)")
    sp.add_argument("--top", type=int, default=5, metavar="N", help="candidates listed per shape in the YAML (default 5)")
    sp.add_argument("--seed", type=int, default=1, help="seed of the bench's random weights (default 1)")
    sp.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    sp.set_defaults(func=cmd_tune)
