"""Shared helpers for the codegen tests: run the CLI, stub kernel templates, temp dirs."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INVALID = os.path.join(REPO, "tests", "codegen", "invalid")
CONFIGS = os.path.join(REPO, "configs")
TINY = os.path.join(REPO, "tests", "data", "bitnetcpp-tiny")

if REPO not in sys.path:
    sys.path.insert(0, REPO)


def run_cli(*args: str, cwd: str = REPO, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    """`python3 -m codegen ARGS` from the repo root (environment plus env_extra); returns the completed
    process (text mode)."""
    env = dict(os.environ)
    env.update(env_extra or {})
    env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, "-m", "codegen", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


# A kernel template that uses every field of the kernel-template contract (codegen/render.py), so the
# generator machinery is tested independently of the real kernels' C text.
STUB_KERNEL_TEMPLATE = """{{ banner }}
#include "{{ header }}"
#if {{ target.isa.guard }}
/* ctor {{ ctor_name }} generic {{ generic_name }} target {{ target }} scheme {{ target.scheme }} isa {{ target.isa }} */
{% for k in kernels %}
/* {{ k.name }} {{ k.target }} {{ k.target.scheme.name }} {{ k.target.isa.name }} m={{ k.m }} k={{ k.k }} bm={{ k.block_m }} bk={{ k.block_k }} sm={{ k.simd_m }} tiles={{ k.derived.n_tiles }} origins={{ k.origins | join(",") }} */
{% endfor %}
#endif
"""


def stub_template_dir(parent: str) -> str:
    """Write a stub kernel template for every (scheme, ISA) pair into parent/stub-templates and return that dir."""
    from codegen.targets import PAIRS
    d = os.path.join(parent, "stub-templates")
    os.makedirs(d, exist_ok=True)
    for t in PAIRS:
        with open(os.path.join(d, t.template), "w") as f:
            f.write(STUB_KERNEL_TEMPLATE)
    return d


def tempdir(test) -> str:
    """A temporary directory removed when the test ends."""
    td = tempfile.TemporaryDirectory(prefix="codegen-test-")
    test.addCleanup(td.cleanup)
    return td.name


def write(path: str, text: str) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path
