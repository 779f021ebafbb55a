"""Put on PYTHONPATH of a `cortexctl mcp` a test starts, with CORTEXCTL_TEST_SDK_GATE=<path>: the import
of ``mcp.server`` (the MCP SDK's load, which ``serve/early.py`` starts on a thread) waits until the
file <path> exists. Whatever that server answers before the test makes the file, it answered without
the SDK; nothing else of the SDK or of cortexctl changes."""

import os
import sys
import time

_GATE = os.environ.get("CORTEXCTL_TEST_SDK_GATE")


class _HoldTheSdk:
    def find_spec(self, name, path=None, target=None):
        if name == "mcp.server":
            while not os.path.exists(_GATE):
                time.sleep(0.005)
            sys.meta_path.remove(self)
        return None


if _GATE:
    sys.meta_path.insert(0, _HoldTheSdk())
