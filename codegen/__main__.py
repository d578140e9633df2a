"""Entry point of `python3 -m codegen`; see codegen/cli.py."""
import sys

from .cli import main

sys.exit(main())
