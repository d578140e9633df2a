#!/usr/bin/env python3
"""utils/bench-cluster.py — measured vs predicted tokens/s of pipeline runs on this machine (docs/CLUSTER.md,
"Measured vs predicted").

For every model, cluster file and rank count N: utils/plan-cluster.py plans the first N nodes of the cluster
(--nodes N --out a temporary plan), then `mpirun --oversubscribe -np N build/bin/llama-bench --plan PLAN`
measures prompt (pp) and generation (tg) tokens/s — with --link-emulate when the cluster's links are not
loopback, so the runtime delivers every message no earlier than the plan's link would. One markdown row per
run: the plan's predicted generation_tokens_s and prompt_tokens_s (predicted.* of the plan file), the
measured llama-bench averages, and measured / predicted.

  python3 utils/bench-cluster.py -m MODEL [-m MODEL2] --cluster clusters/host-loopback-4.yaml \\
      [--cluster clusters/host-loopback-uart-4.yaml] [--nodes 1,2,4] [-p 32] [-n 16] [-r 3] [-t 1] [--ctx 256] \\
      [--batch 8]

Exit status: 0 when every run succeeded, 1 when one failed (its stderr is printed), 2 for a bad command line.
Needs mpirun (deps/install.sh cluster) and a build with --plan (BITNET_BUILD_DIR, default build/).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def int_list(text):
    """'1,2,4' -> [1, 2, 4] (positive integers)."""
    try:
        v = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected positive integers separated by commas, got '{text}'")
    if not v or min(v) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers separated by commas, got '{text}'")
    return v


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench-cluster.py", description=__doc__.split("\n\n")[0])
    p.add_argument("-m", "--model", action="append", required=True, help="GGUF model (repeat for several)")
    p.add_argument("--cluster", action="append", required=True, help="cluster file (repeat for several)")
    p.add_argument("--nodes", type=int_list, default=[1, 2, 4], help="rank counts, e.g. 1,2,4 (default)")
    p.add_argument("-p", "--n-prompt", type=int, default=32, help="prompt tokens (default 32)")
    p.add_argument("-n", "--n-gen", type=int, default=16, help="generated tokens (default 16)")
    p.add_argument("-r", "--repetitions", type=int, default=3, help="llama-bench repetitions (default 3)")
    p.add_argument("-t", "--threads", type=int, default=1, help="threads per rank (default 1)")
    p.add_argument("--ctx", type=int, default=256, help="n_ctx of the plans (default 256)")
    p.add_argument("--batch", type=int, default=8, help="prompt micro-batch of the plans (default 8)")
    return p.parse_args(argv)


def run(cmd, what):
    """Run cmd; the CompletedProcess, or an exception naming `what` with the end of its stderr."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
    return r


def measure(a, bench, model, cluster, n, tmp):
    """One row: planner prediction and llama-bench measurement for the first n nodes of cluster."""
    plan = os.path.join(tmp, f"plan-{n}.yaml")
    run([sys.executable, os.path.join(ROOT, "utils", "plan-cluster.py"), "-m", model, "--cluster", cluster,
         "--nodes", str(n), "--ctx", str(a.ctx), "--batch", str(a.batch), "--out", plan], "plan-cluster.py")
    with open(plan) as fp:
        pl = yaml.safe_load(fp)
    links = {s["link_to_next"]["kind"] for s in pl["stages"] if s["link_to_next"]}
    paced = bool(links - {"loopback"})
    cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", str(n), bench, "-m", model, "-p",
           str(a.n_prompt), "-n", str(a.n_gen), "-r", str(a.repetitions), "-t", str(a.threads), "-o", "json",
           "--plan", plan] + (["--link-emulate"] if paced else [])
    rows = json.loads(run(cmd, "llama-bench").stdout)
    got = {("pp" if r["n_gen"] == 0 else "tg"): r["avg_ts"] for r in rows}
    return {"model": os.path.basename(model), "cluster": pl["cluster"]["name"], "n": n,
            "links": ", ".join(sorted(links)) or "none", "paced": paced,
            "layers": "/".join(str(s["n_layers"]) for s in pl["stages"]),
            "pred_tg": pl["predicted"]["generation_tokens_s"], "tg": got.get("tg"),
            "pred_pp": pl["predicted"]["prompt_tokens_s"], "pp": got.get("pp")}


def main(argv=None):
    a = parse_args(argv)
    bench = os.path.join(os.environ.get("BITNET_BUILD_DIR") or os.path.join(ROOT, "build"), "bin", "llama-bench")
    for path, what in [(bench, "llama-bench (build the project first)")] + [(m, "model") for m in a.model] + \
            [(c, "cluster file") for c in a.cluster]:
        if not os.path.isfile(path):
            print(f"bench-cluster.py: {what} {path} not found", file=sys.stderr)
            return 1
    if not shutil.which("mpirun"):
        print("bench-cluster.py: mpirun not found (deps/install.sh cluster)", file=sys.stderr)
        return 1
    print("| model | cluster (links) | N | layers per rank | paced | tg predicted | tg measured | ratio | "
          "pp predicted | pp measured | ratio |")
    print("|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        for model in a.model:
            for cluster in a.cluster:
                for n in a.nodes:
                    try:
                        r = measure(a, bench, model, cluster, n, tmp)
                    except (RuntimeError, json.JSONDecodeError, KeyError) as e:
                        print(f"bench-cluster.py: {model}, {cluster}, N = {n}: {e}", file=sys.stderr)
                        return 1
                    print(f"| {r['model']} | {r['cluster']} ({r['links']}) | {r['n']} | {r['layers']} | "
                          f"{'yes' if r['paced'] else 'no'} | {r['pred_tg']:.2f} | {r['tg']:.2f} | "
                          f"{r['tg'] / r['pred_tg']:.2f} | {r['pred_pp']:.2f} | {r['pp']:.2f} | "
                          f"{r['pp'] / r['pred_pp']:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
