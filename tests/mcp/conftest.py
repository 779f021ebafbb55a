"""tests/mcp needs the MCP SDK (the `mcp` extra, part of the `test` extra): without it they are skipped."""

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install -e '.[test]'")
