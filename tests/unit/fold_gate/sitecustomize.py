"""Put on PYTHONPATH with CORTEXCTL_TEST_FOLD_GATE=<path>: a background fold (``python -m
cortexctl.store.fold_process``) waits before it starts until the file <path> exists. Whatever the test does
before it makes the file happens while the fold is under way and has not yet begun; nothing else of
cortexctl changes (any other process started with this PYTHONPATH is not held)."""

import os
import sys
import time

_GATE = os.environ.get("CORTEXCTL_TEST_FOLD_GATE")

if _GATE and sys.orig_argv[1:3] == ["-m", "cortexctl.store.fold_process"]:
    while not os.path.exists(_GATE):
        time.sleep(0.005)
