"""``python -m cortexctl.store.fold_process STORE MODEL LOCK_FD``: a background fold (``fold.start``
starts it, detached, holding the fold lock on the inherited descriptor LOCK_FD until it exits)."""

from __future__ import annotations

import sys
from pathlib import Path

from cortexctl.store import fold
from cortexctl.store.db import DuckStorage


def main(argv: list[str]) -> int:
    store_path, model = argv[0], argv[1] or None  # argv[2]: the fold lock's descriptor, open until exit
    fold._folding.on = True  # the fold's own writes start no other
    try:
        fold.run(DuckStorage(Path(store_path), wait=fold.LOCK_WAIT), model)
    except Exception as exc:  # noqa: BLE001 - a cache: the next fold or reindex does it; healthcheck says so
        fold.failed(Path(store_path), exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
