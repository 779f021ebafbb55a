"""The store served to agents over the Model Context Protocol (``cortexctl mcp``, SPEC §16).

``server.py`` builds the server on the official ``mcp`` SDK (the optional extra
``cortexctl[mcp]``): its tools are thin over the engine and answer with the same
documents ``--json`` prints. It is the only module that imports ``mcp`` (an
import-linter contract says so). This package's ``__init__`` imports nothing
heavy, so the command can say how to install the SDK when it is missing.
"""

from __future__ import annotations

INSTALL_HINT = "pip install 'cortexctl[mcp]'"


def sdk_missing() -> str | None:
    """None when the MCP SDK can be imported, else the one line that says how to install it."""
    try:
        import mcp.server  # noqa: F401
    except ImportError:
        return f"cortexctl mcp needs the MCP SDK: {INSTALL_HINT}"
    return None
