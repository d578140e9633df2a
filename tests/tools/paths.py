"""Where the tests of tests/tools find things: the source tree, the build (BITNET_BUILD_DIR, default build/),
its programs, the emulator prefix of a cross build (BITNET_RUN_PREFIX) and bitnet.cpp's tiny model."""
import os
import shlex

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("BITNET_BUILD_DIR", os.path.join(ROOT, "build"))
BIN = os.path.join(BUILD, "bin")
PREFIX = shlex.split(os.environ.get("BITNET_RUN_PREFIX", ""))
TINY = os.path.join(ROOT, "tests", "data", "bitnetcpp-tiny", "ggml-model-i2_s.gguf")
