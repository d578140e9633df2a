"""The command-line contract every tool in build/bin keeps (tests/tools/test_tool_contract.py)."""
