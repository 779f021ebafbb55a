"""Sealing bundle members: authenticated encryption under a key derived from a passphrase.

A key is derived with scrypt (n=2^15, r=8, p=1) from the passphrase and a random
16-byte salt kept in the bundle's meta. A member is sealed as a stream of
AES-256-GCM chunks (the STREAM construction): the file starts with ``MAGIC`` and
an 8-byte random nonce prefix; each chunk of up to ``CHUNK`` plaintext bytes is
encrypted with the nonce ``prefix || counter (4 bytes) || last (1 byte)`` and the
member's name as associated data. So a chunk cannot be altered, reordered,
dropped, moved to another member, or the stream cut short without the open
failing. A wrong key and tampering look the same: ``IntegrityError``.

Needs the ``cryptography`` package (``pip install 'cortexctl[encrypt]'``),
imported only here and only when a bundle is sealed or opened.
"""

from __future__ import annotations

import os
from pathlib import Path

from cortexctl.errors import IntegrityError, UsageError

MAGIC = b"CXSEAL1\n"
CHUNK = 1 << 20
TAG = 16
SCHEME = "aes-256-gcm-stream/scrypt"
SCRYPT = {"n": 1 << 15, "r": 8, "p": 1}
# The most key-derivation work a bundle may ask for, as n * r * p: twice what cortexctl writes.
# A bundle's meta is not trusted until its key is proven, so a higher cost is refused before
# deriving (scrypt at the largest parameters it would otherwise take runs for minutes).
WRITTEN_COST = SCRYPT["n"] * SCRYPT["r"] * SCRYPT["p"]
MAX_COST = 2 * WRITTEN_COST


def _aead(key: bytes):
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError:
        raise UsageError("encrypted bundles need the cryptography package: pip install 'cortexctl[encrypt]'") from None
    return AESGCM(key)


def derive(passphrase: str, salt: bytes, params: dict | None = None) -> bytes:
    """The 32-byte key for ``passphrase`` and ``salt``."""
    try:
        from cryptography.hazmat.primitives.kdf.scrypt import Scrypt
    except ImportError:
        raise UsageError("encrypted bundles need the cryptography package: pip install 'cortexctl[encrypt]'") from None
    p = params or SCRYPT
    n, r, par = (p.get(k) if isinstance(p, dict) else None for k in ("n", "r", "p"))
    if not (all(type(v) is int for v in (n, r, par))  # from a bundle's meta: anything at all
            and 2 <= n <= 1 << 20 and n & (n - 1) == 0 and 1 <= r <= 16 and 1 <= par <= 4):
        raise IntegrityError("bundle meta names key derivation parameters out of range")
    if n * r * par > MAX_COST:
        raise IntegrityError(f"bundle's key-derivation cost {n * r * par} exceeds the limit {MAX_COST} "
                             f"(n * r * p; this cortexctl writes {WRITTEN_COST})")
    return Scrypt(salt=salt, length=32, n=n, r=r, p=par).derive(passphrase.encode("utf-8", "surrogatepass"))


def _nonce(prefix: bytes, counter: int, last: bool) -> bytes:
    return prefix + counter.to_bytes(4, "big") + (b"\x01" if last else b"\x00")


def seal_bytes(key: bytes, data: bytes, aad: bytes) -> bytes:
    """One small message: a random 12-byte nonce, then the ciphertext and tag."""
    nonce = os.urandom(12)
    return nonce + _aead(key).encrypt(nonce, data, aad)


def open_bytes(key: bytes, blob: bytes, aad: bytes) -> bytes:
    from cryptography.exceptions import InvalidTag

    try:
        return _aead(key).decrypt(blob[:12], blob[12:], aad)
    except (InvalidTag, ValueError):
        raise IntegrityError("the bundle key is wrong, or the bundle was tampered with") from None


def seal_file(key: bytes, src: Path, dst: Path, name: str) -> None:
    """Write ``src`` sealed to ``dst`` (the associated data is ``name``)."""
    aead = _aead(key)
    prefix = os.urandom(8)
    aad = name.encode()
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        fout.write(MAGIC + prefix)
        counter = 0
        chunk = fin.read(CHUNK)
        while True:
            nxt = fin.read(CHUNK)
            last = not nxt
            fout.write(aead.encrypt(_nonce(prefix, counter, last), chunk, aad))
            if last:
                break
            chunk, counter = nxt, counter + 1
            if counter >= 1 << 32:
                raise UsageError(f"member {name} is too large to seal")


def check_file(key: bytes, src: Path, name: str) -> None:
    """Open the first and the last chunk of sealed ``src``, reading nothing else: a member that
    was cut, padded or made up is refused without reading (or hashing) all of it."""
    from cryptography.exceptions import InvalidTag

    aead = _aead(key)
    head_len, block = len(MAGIC) + 8, CHUNK + TAG
    size = src.stat().st_size
    body = size - head_len
    with open(src, "rb") as fin:
        head = fin.read(head_len)
        if len(head) != head_len or not head.startswith(MAGIC) or body < TAG:
            raise IntegrityError(f"member {name} is not a sealed member")
        prefix = head[len(MAGIC):]
        count = max(1, -(-body // block))
        last_len = body - (count - 1) * block
        if last_len < TAG:
            raise IntegrityError(f"member {name} is not a sealed member (its size does not fit its chunks)")
        wanted = [(0, count == 1)] + ([(count - 1, True)] if count > 1 else [])
        for counter, last in wanted:
            fin.seek(head_len + counter * block)
            data = fin.read(last_len if last else block)
            try:
                aead.decrypt(_nonce(prefix, counter, last), data, name.encode())
            except (InvalidTag, ValueError):
                raise IntegrityError(
                    f"member {name} does not open: the bundle key is wrong, or the member was tampered with"
                ) from None


def open_file(key: bytes, src: Path, dst: Path, name: str) -> None:
    """Write the plaintext of sealed ``src`` to ``dst``; IntegrityError if anything is off."""
    from cryptography.exceptions import InvalidTag

    aead = _aead(key)
    aad = name.encode()
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        head = fin.read(len(MAGIC) + 8)
        if len(head) != len(MAGIC) + 8 or not head.startswith(MAGIC):
            raise IntegrityError(f"member {name} is not a sealed member")
        prefix = head[len(MAGIC):]
        counter = 0
        block = fin.read(CHUNK + TAG)
        while True:
            nxt = fin.read(CHUNK + TAG)
            last = not nxt
            try:
                fout.write(aead.decrypt(_nonce(prefix, counter, last), block, aad))
            except (InvalidTag, ValueError):
                raise IntegrityError(
                    f"member {name} does not open: the bundle key is wrong, or the member was tampered with"
                ) from None
            if last:
                return
            block, counter = nxt, counter + 1
