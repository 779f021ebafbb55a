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


def encode_plain(value: object) -> bytes:
    """``encode(value)`` (the very same bytes) for values of dicts with text keys, lists,
    text, bytes, integers, floats, booleans and None, such as journal payloads.

    Canonical encoding sorts every map's keys and picks each float's shortest
    exact form. Here each set of keys is put in canonical order once and
    remembered, floats are encoded canonically one by one, and the rest is
    encoded as given. Anything else falls back to ``encode``.
    """
    try:
        ordered = _ordered(value)
    except _NotPlain:
        return encode(value)
    return cbor2.dumps(ordered, default=_write_raw)


class _NotPlain(Exception):
    pass


class _Raw:
    """Bytes already encoded, written as they are."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


def _write_raw(encoder, value: _Raw) -> None:
    encoder.write(value.data)


_KEY_ORDER: dict[tuple, tuple] = {}
_SCALARS = frozenset({str, bytes, int, bool, type(None)})


def _ordered(value):
    t = type(value)
    if t in _SCALARS:
        return value
    if t is dict:
        keys = tuple(value)
        order = _KEY_ORDER.get(keys)
        if order is None:
            if any(type(k) is not str for k in keys):
                raise _NotPlain
            # the order canonical encoding gives them (decoding keeps it)
            order = tuple(cbor2.loads(encode(dict.fromkeys(keys))))
            if len(_KEY_ORDER) < 256:
                _KEY_ORDER[keys] = order
        out = {}
        for k in order:
            v = value[k]
            out[k] = v if type(v) in _SCALARS else _ordered(v)
        return out
    if t is list:
        return [v if type(v) in _SCALARS else _ordered(v) for v in value]
    if t is float:
        return _Raw(encode(value))
    raise _NotPlain


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
