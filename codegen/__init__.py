"""Kernel generator for ternary (BitNet b1.58) LUT matmul kernels.

configs/*.yaml (tile tables per model) -> Jinja2 templates/ -> generated/ (C kernels, registry, CMake).
Command line: `python3 -m codegen {generate,check,validate,shapes,derive}` (codegen/cli.py).
Python API used by the scripts: codegen.config (load_config, load_all, ConfigError),
codegen.shapes (layout_shapes, shapes_of, coverage), codegen.derive (derive_tiles).
"""
