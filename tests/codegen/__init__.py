"""Unit tests of the kernel generator (codegen/). Run from the repo root:
python3 -m unittest discover -s tests/codegen -t ."""
