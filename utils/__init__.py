"""Helpers shared by the scripts in utils/ and setup_env.py (the scripts themselves are run, not imported)."""
