"""ULID identifiers and ``cortex://`` URIs.

An ID is a 16-byte ULID: 48 bits of milliseconds since the epoch, then 80
random bits, shown as 26 Crockford base32 characters. IDs made by one process
in the same millisecond increase monotonically, so IDs sort by creation time.

References a user may type (``parse_ref``):

- ``cortex://m/<ID>`` and ``cortex://m/<ID>/v/<N>``
- a bare 26-character ID
- any prefix of at least 6 characters of an ID (resolved against the store)
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass

from cortexctl.errors import UsageError

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_DECODE = {c: i for i, c in enumerate(CROCKFORD)}
# Crockford's forgiving aliases; lower case is folded first.
_ALIASES = str.maketrans({"I": "1", "L": "1", "O": "0"})
ID_LEN = 26
MIN_PREFIX = 6
_ID_RE = re.compile(r"^[0-9A-HJKMNP-TV-Z]{1,26}$")
_MAX_ID = "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"

_lock = threading.Lock()
_last: tuple[int, int] = (0, 0)


# Two characters per 10-bit group; 13 groups carry the 130 bits of 26 characters.
_PAIRS = [a + b for a in CROCKFORD for b in CROCKFORD]
_SHIFTS = range(120, -1, -10)


def _encode(value: int) -> str:
    # The 128-bit value sits in the low bits of 130: the first character carries 3 bits.
    return "".join([_PAIRS[(value >> s) & 1023] for s in _SHIFTS])


def new_id(ms: int | None = None) -> str:
    """A new ULID; ``ms`` (milliseconds since the epoch) fixes its time part."""
    global _last
    with _lock:
        now = int(time.time() * 1000) if ms is None else int(ms)
        if now < 0 or now >= 1 << 48:
            raise UsageError(f"time {now} ms is outside what an ID can hold")
        if ms is None and now <= _last[0]:
            now, rand = _last[0], _last[1] + 1
            if rand >= 1 << 80:  # 2^80 IDs in one millisecond: wait for the next one
                time.sleep(0.001)
                now, rand = max(now + 1, int(time.time() * 1000)), int.from_bytes(os.urandom(10), "big")
        else:
            rand = int.from_bytes(os.urandom(10), "big")
        if ms is None:
            _last = (now, rand)
        return _encode((now << 80) | rand)


def id_time_ms(id_: str) -> int:
    value = 0
    for c in id_[:10]:
        value = (value << 5) | _DECODE[c]
    return value


def normalize_id_text(text: str) -> str | None:
    """Upper-cased, alias-folded ID text, or None when it cannot be (part of) an ID."""
    norm = text.strip().upper().translate(_ALIASES)
    if not _ID_RE.match(norm) or (len(norm) == ID_LEN and norm > _MAX_ID):
        return None
    return norm


def is_id(text: str) -> bool:
    return len(text) == ID_LEN and normalize_id_text(text) == text


@dataclass(frozen=True)
class Ref:
    """A parsed reference: a full ID or a prefix, and maybe a version."""

    id_or_prefix: str
    version: int | None = None

    @property
    def is_full(self) -> bool:
        return len(self.id_or_prefix) == ID_LEN


def memory_uri(id_: str, version: int | None = None) -> str:
    return f"cortex://m/{id_}" if version is None else f"cortex://m/{id_}/v/{version}"


_URI_RE = re.compile(r"^cortex://m/([^/]+)(?:/v/([^/]+))?/?$", re.ASCII)


def parse_ref(text: str, *, error=UsageError) -> Ref:
    """Parse what a user typed as a memory reference; raise ``error`` if it cannot be one."""
    if not isinstance(text, str) or not text.strip():
        raise error("empty memory reference")
    raw = text.strip()
    version: int | None = None
    if raw.startswith("cortex://"):
        m = _URI_RE.match(raw)
        if not m:
            raise error(f"malformed URI {raw!r}: expected cortex://m/<ID> or cortex://m/<ID>/v/<N>")
        body, ver = m.group(1), m.group(2)
        if ver is not None:
            if not (ver.isascii() and ver.isdigit()) or len(ver) > 9 or int(ver) < 1:
                raise error(f"malformed URI {raw[:120]!r}: version must be a whole number from 1 to 999999999")
            version = int(ver)
        norm = normalize_id_text(body)
        if norm is None or len(norm) != ID_LEN:
            raise error(f"malformed URI {raw!r}: {body!r} is not a 26-character ID")
        return Ref(norm, version)
    if "://" in raw:
        raise error(f"malformed URI {raw!r}: only cortex://m/... refers to a memory")
    norm = normalize_id_text(raw)
    if norm is None:
        raise error(f"{raw!r} is not a memory ID, ID prefix or cortex:// URI")
    if len(norm) < MIN_PREFIX:
        raise error(f"ID prefix {raw!r} is too short: give at least {MIN_PREFIX} characters")
    return Ref(norm, None)
