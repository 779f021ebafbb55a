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
    """None when the MCP SDK is installed, else the one line that says how to install it."""
    from importlib.util import find_spec

    if find_spec("mcp") is None:  # found, not imported: importing it is most of a second (serve/early.py)
        return f"cortexctl mcp needs the MCP SDK: {INSTALL_HINT}"
    return None


def import_sdk() -> None:
    """Import the SDK (most of a second); one that is installed but cannot be imported is the same
    usage error as a missing one."""
    from cortexctl.errors import UsageError

    try:
        import mcp.server  # noqa: F401
    except ImportError:
        raise UsageError(f"cortexctl mcp needs the MCP SDK: {INSTALL_HINT}") from None
