"""The file writers on a disk that fills up mid-write (docs/RELIABILITY.md, "Writers under a full disk"):
bitnet-dummy -o, bitnet-convert -o (a Hugging Face folder and --relayout), bitnet-logits --out (the data
file and its .json) and the cache of the kernel choice (BITNET_KERNEL_CACHE, written by llama-cli).

Each writer gets a directory where its output does not fit. As root, when mount(8) works, the directory is
a tmpfs of 256 KiB (filled up first for the small files); elsewhere (a container without CAP_SYS_ADMIN, a
non-root user) the tool runs under RLIMIT_FSIZE with SIGXFSZ ignored, so that write(2) fails with EFBIG
at the limit. Either way the write fails in the middle of the file. Asserted:
- the tools exit 1 with "<tool>: cannot write PATH: <reason>" naming the final file (bitnet-convert:
  "bitnet-convert: error: cannot write ...") and leave nothing in the directory (no PATH, no PATH.tmp);
  a file that was there before keeps its bytes;
- llama-cli exits 0 (the cache is best effort), says once "could not write PATH", and leaves no cache file
  behind, or the old cache file byte for byte (no partial line).

Environment: BITNET_BUILD_DIR (default build/), BITNET_RUN_PREFIX (the emulator of a cross build),
BITNET_FULL_DISK=tmpfs|rlimit|auto (default auto: tmpfs when it can be mounted, else rlimit; tmpfs fails
when it cannot be mounted)."""
import errno
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

from tests.tools.paths import BIN, BUILD, PREFIX, ROOT, TINY

FS_SIZE = 256 * 1024  # the tmpfs, and the RLIMIT_FSIZE of the big outputs
PAGE = resource.getpagesize()  # tmpfs allocates whole pages
MODE = os.environ.get("BITNET_FULL_DISK", "auto")
DUMMY = ["--n-embd", "256", "--n-ff", "512", "--n-layer", "2", "--n-head", "4", "--vocab-size", "1000", "-q"]
TOKENS_LONG = ",".join(str(1 + i % 500) for i in range(160))  # 160 rows of 512 floats: 320 KiB


def limit_fsize(n):
    """preexec_fn: files of this process may not grow past n bytes; write(2) then fails with EFBIG."""
    def f():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
    return f


class FullDisk(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.scratch = tempfile.mkdtemp(prefix="bitnet-fulldisk-in-")
        cls.hf = os.path.join(cls.scratch, "hf")
        r = subprocess.run([sys.executable, os.path.join(ROOT, "utils", "make-hf-checkpoint.py"), cls.hf, "--arch",
                            "bitnet", "--n-embd", "256", "--n-ff", "512", "--n-layer", "2", "--n-head", "4",
                            "--ctx", "256", "--tokenizer", "builtin", "--vocab-size", "1000", "--seed", "3",
                            "--build-dir", BUILD],
                           capture_output=True, text=True)
        if r.returncode != 0:
            shutil.rmtree(cls.scratch, ignore_errors=True)  # tearDownClass does not run after this
            raise AssertionError(f"make-hf-checkpoint failed: {r.stderr}")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.scratch, ignore_errors=True)

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="bitnet-fulldisk-")
        self.addCleanup(shutil.rmtree, self.dir, True)  # cleanups run even when setUp fails, last added first
        self.mounted = False
        if MODE not in ("auto", "tmpfs", "rlimit"):
            self.fail(f"BITNET_FULL_DISK={MODE!r}: expected auto, tmpfs or rlimit")
        if MODE != "rlimit" and os.geteuid() == 0 and shutil.which("mount"):
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={FS_SIZE},mode=0755", "tmpfs", self.dir],
                               capture_output=True, text=True)
            self.mounted = r.returncode == 0
            self.mount_error = r.stderr.strip()
            if self.mounted:
                self.addCleanup(self.unmount)
        else:
            self.mount_error = ("BITNET_FULL_DISK=rlimit" if MODE == "rlimit" else
                                "not root" if os.geteuid() != 0 else "no mount(8)")
        if MODE == "tmpfs" and not self.mounted:
            self.fail(f"BITNET_FULL_DISK=tmpfs: cannot mount a tmpfs on {self.dir}: {self.mount_error}")

    def unmount(self):
        r = subprocess.run(["umount", self.dir], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, f"umount {self.dir}: {r.stderr}")

    # ---- helpers ----------------------------------------------------------------------------------

    def run_tool(self, name, args, fsize=FS_SIZE, env=None):
        """Run a tool; under rlimit its files may not exceed fsize bytes (the tmpfs needs no limit)."""
        p = subprocess.run(PREFIX + [os.path.join(BIN, name)] + [str(a) for a in args], capture_output=True,
                           text=True, errors="replace", timeout=300, env=env,
                           preexec_fn=None if self.mounted else limit_fsize(fsize))
        if "Sanitizer" in p.stderr or "runtime error:" in p.stderr:
            raise AssertionError(f"{name}: sanitizer report:\n{p.stderr}")
        return p

    def fill(self, leave_pages=0):
        """tmpfs: a filler file takes every page but leave_pages (none left: the next allocation fails)."""
        filler = os.path.join(self.dir, ".filler")
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            chunk = b"\0" * PAGE
            while True:
                try:
                    if os.write(fd, chunk) < len(chunk):
                        break
                except OSError as e:
                    self.assertEqual(e.errno, errno.ENOSPC)
                    break
        finally:
            os.close(fd)
        size = os.path.getsize(filler) // PAGE * PAGE
        os.truncate(filler, max(0, size - leave_pages * PAGE))
        return filler

    def listing(self, *keep):
        return sorted(n for n in os.listdir(self.dir) if n not in keep and n != ".filler" and n != "lost+found")

    def expect_failure(self, p, tool, path):
        self.assertEqual(p.returncode, 1, f"{tool} exit {p.returncode}, stderr:\n{p.stderr}")
        reason = os.strerror(errno.ENOSPC if self.mounted else errno.EFBIG)
        # bitnet-convert reports through bitnet_tool_error, which says "error: " first
        self.assertRegex(p.stderr, f"(?m)^{re.escape(tool)}: (error: )?cannot write {re.escape(path)}: {reason}$")

    # ---- the GGUF writers -------------------------------------------------------------------------

    def test_dummy(self):
        out = os.path.join(self.dir, "x.gguf")
        p = self.run_tool("bitnet-dummy", ["-o", out] + DUMMY)
        self.expect_failure(p, "bitnet-dummy", out)
        self.assertEqual(self.listing(), [])

    def test_dummy_keeps_the_old_file(self):
        out = os.path.join(self.dir, "x.gguf")
        with open(out, "wb") as f:
            f.write(b"old bytes")
        p = self.run_tool("bitnet-dummy", ["-o", out] + DUMMY)
        self.expect_failure(p, "bitnet-dummy", out)
        self.assertEqual(self.listing(), ["x.gguf"])
        with open(out, "rb") as f:
            self.assertEqual(f.read(), b"old bytes")

    def test_convert(self):
        out = os.path.join(self.dir, "conv.gguf")
        p = self.run_tool("bitnet-convert", [self.hf, "-o", out, "--outtype", "i2_s", "-q"])
        self.expect_failure(p, "bitnet-convert", out)
        self.assertEqual(self.listing(), [])

    def test_convert_relayout(self):
        out = os.path.join(self.dir, "arm.gguf")
        p = self.run_tool("bitnet-convert", ["--relayout", "arm64", TINY, "-o", out])
        self.expect_failure(p, "bitnet-convert", out)
        self.assertEqual(self.listing(), [])

    # ---- bitnet-logits --out ------------------------------------------------------------------------

    def test_logits(self):
        out = os.path.join(self.dir, "l.bin")
        p = self.run_tool("bitnet-logits", ["-m", TINY, "--tokens", TOKENS_LONG, "--out", out, "-t", "2"])
        self.expect_failure(p, "bitnet-logits", out)
        self.assertEqual(self.listing(), [])

    def test_logits_keeps_the_old_files(self):
        out = os.path.join(self.dir, "l.bin")
        for path, data in ((out, b"old data"), (out + ".json", b"{}\n")):
            with open(path, "wb") as f:
                f.write(data)
        p = self.run_tool("bitnet-logits", ["-m", TINY, "--tokens", TOKENS_LONG, "--out", out, "-t", "2"])
        self.expect_failure(p, "bitnet-logits", out)
        self.assertEqual(self.listing(), ["l.bin", "l.bin.json"])
        with open(out, "rb") as f:
            self.assertEqual(f.read(), b"old data")

    def test_logits_header_does_not_fit(self):
        """The data (3 rows of 512 floats: 6144 bytes, two pages) fits, its .json does not."""
        if not self.mounted:
            self.skipTest(f"needs the tmpfs (RLIMIT_FSIZE cannot fail the smaller file only): {self.mount_error}")
        out = os.path.join(self.dir, "l.bin")
        self.fill(leave_pages=-(-6144 // PAGE))
        p = self.run_tool("bitnet-logits", ["-m", TINY, "--tokens", "1,450,439", "--out", out, "-t", "2"])
        self.expect_failure(p, "bitnet-logits", out + ".json")
        self.assertEqual(self.listing(), [])

    # ---- the kernel-choice cache ------------------------------------------------------------------

    def cli(self, cache, fsize):
        env = dict(os.environ, BITNET_KERNEL_CACHE=cache)
        env.pop("BITNET_LUT_I2S_MIN_COLS", None)  # it would fix the choice: nothing measured, nothing written
        return self.run_tool("llama-cli", ["-m", TINY, "-p", "hi", "-n", "2", "--temp", "0", "-t", "2", "--kernel",
                                           "tl1"], fsize=fsize, env=env)

    def expect_cache_warning(self, p, cache):
        self.assertEqual(p.returncode, 0, f"llama-cli exit {p.returncode}, stderr:\n{p.stderr}")
        self.assertIn("kernel per batch size: measured", p.stderr)
        self.assertEqual(p.stderr.count(f"could not write {cache}"), 1, p.stderr)

    def test_kernel_cache_new(self):
        cache = os.path.join(self.dir, "kernel-choice.txt")
        if self.mounted:
            self.fill()
        p = self.cli(cache, fsize=40)  # the first record's line is cut at 40 bytes
        self.expect_cache_warning(p, cache)
        self.assertEqual(self.listing(), [])

    def test_kernel_cache_existing(self):
        """An old cache whose append is cut mid-line: the old bytes stay, without the partial line."""
        cache = os.path.join(self.dir, "kernel-choice.txt")
        line = b"v1|another-cpu|k|i2s-x|TL1|1x1|1,1,1|t1 4\n"
        # 50 bytes short of a page boundary: the append fills the page, then the next page is refused
        old = (line * (PAGE // len(line) + 1))[:PAGE - 50 - 1] + b"\n"
        with open(cache, "wb") as f:
            f.write(old)
        if self.mounted:
            self.fill()
        p = self.cli(cache, fsize=len(old) + 50)
        self.expect_cache_warning(p, cache)
        self.assertEqual(self.listing(), ["kernel-choice.txt"])
        with open(cache, "rb") as f:
            self.assertEqual(f.read(), old)


if __name__ == "__main__":
    unittest.main()
