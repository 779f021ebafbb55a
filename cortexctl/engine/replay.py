"""Replaying the journal: rebuild each memory's head and versions from its entries alone.

Every entry kind that changes a memory is applied here, in sequence order:

- ``write``: the whole head and every version (a write, or one imported memory);
- ``update``: one new version, and the head's current version, time and forms;
- ``update_head``: the changed head fields (tags, frames, importance, visibility, time);
- ``tombstone``: the reason, time and actor.

Times in payloads are integer microseconds since the epoch (UTC).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from cortexctl.errors import IntegrityError
from cortexctl.memory import codec

_EPOCH = datetime(1970, 1, 1)
TIME_FIELDS = {"created_at", "updated_at", "tombstoned_at", "last_used"}
KINDS = ("write", "update", "update_head", "tombstone")


def _row(plain: dict) -> dict:
    return {
        k: (_EPOCH + timedelta(microseconds=v) if k in TIME_FIELDS and isinstance(v, int) else v)
        for k, v in plain.items()
    }


class Memory:
    """One memory as the journal says it is."""

    def __init__(self) -> None:
        self.head: dict[str, Any] | None = None
        self.versions: dict[int, dict] = {}

    def apply(self, seq: int, kind: str, payload: bytes) -> None:
        try:
            doc = codec.decode(payload)
        except IntegrityError:
            raise IntegrityError(f"journal entry {seq} does not decode") from None
        if not isinstance(doc, dict):
            raise IntegrityError(f"journal entry {seq} is not a record")
        try:
            if kind == "write":
                if self.head is not None:
                    raise IntegrityError(f"journal entry {seq} writes a memory that already exists")
                self.head = _row(doc["head"])
                for v in doc["versions"]:
                    self.versions[v["version"]] = _row(v)
                return
            if self.head is None:
                raise IntegrityError(f"journal entry {seq} ({kind}) comes before the memory's write")
            if kind == "update":
                v = _row(doc["version"])
                self.versions[v["version"]] = v
                self.head.update(current_version=v["version"], updated_at=_row(doc)["updated_at"],
                                 short=v["short"], medium=v["medium"])
            elif kind in ("update_head", "tombstone"):
                self.head.update(_row({k: v for k, v in doc.items() if k != "id"}))
            else:
                raise IntegrityError(f"journal entry {seq} has an unknown kind {kind!r}")
        except (KeyError, TypeError, AttributeError):
            raise IntegrityError(f"journal entry {seq} ({kind}) is missing fields") from None
