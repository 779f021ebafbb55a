"""Canonical CBOR and the version hash.

Data are encoded with ``cbor2.dumps(value, canonical=True)`` (RFC 8949 core
deterministic encoding: sorted map keys, shortest integer and float forms),
so equal data always give equal bytes and therefore equal hashes.

The version hash is ``sha256(DOMAIN || type byte || data bytes)``; any change
to a stored version's type or data changes it.
"""

from __future__ import annotations

import hashlib

import cbor2

from cortexctl.errors import IntegrityError

HASH_DOMAIN = b"cortexctl.memory.v1"


def encode(value: object) -> bytes:
    return cbor2.dumps(value, canonical=True)


def decode(data: bytes) -> object:
    try:
        return cbor2.loads(data)
    except Exception as exc:  # cbor2 raises several decoder errors
        raise IntegrityError(f"stored data does not decode as CBOR: {exc}") from None


def version_hash(type_code: int, data: bytes) -> bytes:
    h = hashlib.sha256()
    h.update(HASH_DOMAIN)
    h.update(bytes([type_code]))
    h.update(data)
    return h.digest()
