"""healthcheck: one answer to "is this store fine?", for people, cron and monitoring (SPEC §12).

The payload is stable: fields may be added, never renamed or removed (the key
set is documented in the README and held by a test). A misconfiguration is
data in the payload, never a crash. It reads only cheap things — counts, the
index file's record and sampled checksum, the newest bundle's name — so it
answers in about a second on a large store; ``verify`` is what proves every
record, version and journal entry.

It opens what it reports on: the database is read through once (every block of
every table, so DuckDB checks each block's checksum: about 1.4 s at 100,000
memories), the index file is checked against its record (sampled blocks, its
header, and the whole file once after any change: ``hnsw`` module docstring) and
the search snapshot block by block.

Status: **unhealthy** when the configuration cannot be read or the store is
missing, unreadable, damaged or from a newer cortexctl (a damaged file is named
in ``damaged``, and the command exits 7); **degraded** when the embedding
endpoint does not answer its probe, memories wait for their embedding, the
index file is out of step with the store or damaged, the search snapshot is
damaged (both caches: find answers without them, and ``reindex`` rebuilds
them), the last background fold of those caches failed (``cortex.fold.log``), a chat endpoint that needs a key has none, or no bundle is newer than
``backup.window_days`` (when set); **healthy** otherwise.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone
from typing import Callable
from urllib.parse import urlsplit

from cortexctl.dsn import redact_text
from cortexctl.errors import CortexError, IntegrityError, signalled
from cortexctl.store.interface import OverBudget

HEALTHY, DEGRADED, UNHEALTHY = "healthy", "degraded", "unhealthy"
PROBE_TIMEOUT = 2.0  # seconds: a dead endpoint must not stall monitoring
_STARTED = time.monotonic()


_ORDER = (HEALTHY, DEGRADED, UNHEALTHY)


class _Findings:
    def __init__(self) -> None:
        self.status = HEALTHY
        self.found: list[tuple[str, str]] = []

    def add(self, status: str, detail: str) -> None:
        if _ORDER.index(status) > _ORDER.index(self.status):
            self.status = status
        self.found.append((status, redact_text(detail)))

    @property
    def details(self) -> list[str]:
        """One sentence per finding, the worst first."""
        return [d for _, d in sorted(self.found, key=lambda t: -_ORDER.index(t[0]))]


def _is_local(host: str | None) -> bool:
    return host in ("localhost", "127.0.0.1", "::1") or bool(host and host.startswith("127."))


def _host(url: str | None) -> str | None:
    """scheme://host[:port] of a URL: never the user name or password a URL may carry."""
    if not url:
        return None
    parts = urlsplit(url)
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    host = parts.hostname or ""
    return f"{parts.scheme}://{'[' + host + ']' if ':' in host else host}{port}"


def report(load_settings: Callable[[], object], *, probe: bool = True) -> dict:
    """The healthcheck payload. ``load_settings`` is called here so a bad config is reported, not raised."""
    from cortexctl import __version__

    f = _Findings()
    doc: dict = {"status": HEALTHY, "timestamp": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z",
                 "store": None, "topology": None, "index": None, "snapshot": None,
                 "providers": {"embedding": None, "summary": None}, "features": {}, "backup": None,
                 "identity": None, "details": [], "damaged": [], "version": __version__, "uptime": 0.0}
    try:
        settings = load_settings()
    except CortexError as exc:
        f.add(UNHEALTHY, f"the configuration cannot be used: {exc.message}")
        return _close(doc, f)
    from cortexctl.engine.context import Context
    from cortexctl.store import storage_for

    doc["topology"] = topology(settings)
    doc["identity"] = {"actor": settings.actor, "source": settings.sources.get("actor", "default")}
    try:
        ctx = Context(settings, storage_for(settings))
    except CortexError as exc:  # a backend this installation lacks (the postgres extra)
        f.add(UNHEALTHY, f"the store cannot be opened: {exc.message}")
        return _close(doc, f)
    embedder = _embedding(ctx, doc, f, probe)
    _store(ctx, doc, f, embedder)
    _summary(settings, doc, f)
    _backup(settings, doc, f)
    doc["features"] = {"semantic_search": embedder is not None, "summarization": bool(
        settings.get("chat.base_url") and settings.get("chat.model")), "encryption": _can_encrypt()}
    return _close(doc, f)


def topology(settings) -> dict:
    """Where the store is: ``embedded`` (a DuckDB directory on this machine) or ``external``
    (a PostgreSQL server: host, port and database, never the password), and which setting
    named it."""
    import cortexctl.dsn as dsn

    if settings.backend == "duckdb":
        return {"mode": "embedded", "backend": "duckdb", "coordinates": settings.location,
                "resolved_via": settings.sources.get("store", "default")}
    named_by = "store" if dsn.is_postgres(settings.values.get("store")) else "store.dsn"
    where = dsn.parts(settings.location)
    return {"mode": "external", "backend": "postgres", "coordinates": dsn.redact(settings.location),
            "host": where["host"], "port": where["port"], "database": where["database"],
            "resolved_via": settings.sources.get(named_by, "default")}


def _close(doc: dict, f: _Findings) -> dict:
    doc["status"] = f.status
    doc["details"] = f.details if f.found else ["all checks passed"]
    doc["uptime"] = round(time.monotonic() - _STARTED, 3)
    return doc


def _can_encrypt() -> bool:
    import importlib.util

    return importlib.util.find_spec("cryptography") is not None


def _embedding(ctx, doc: dict, f: _Findings, probe: bool):
    s = ctx.settings
    block = {"active": None, "host": _host(s.get("embedding.base_url")), "model": s.get("embedding.model"),
             "dimensions": s.get("embedding.dimensions"), "probe": "skipped"}
    doc["providers"]["embedding"] = block
    try:
        embedder = ctx.embedder
    except CortexError as exc:
        block["error"] = redact_text(exc.message)
        f.add(DEGRADED, f"embedding is misconfigured: {exc.message}")
        return None
    block["active"] = embedder.provider
    block["model"] = embedder.model
    if not embedder.remote:
        block["dimensions"] = embedder.dim
        block["probe"] = "ok (built in)" if embedder.provider == "hash" else "ok (on this machine)"
        return embedder
    if not probe:
        return embedder
    embedder.timeout = min(float(embedder.timeout), PROBE_TIMEOUT)
    embedder.retries = 0
    try:
        block["dimensions"] = embedder.probe()
        block["probe"] = "ok"
    except CortexError as exc:
        block["probe"] = f"failed: {redact_text(exc.message)}"
        f.add(DEGRADED, f"the embedding endpoint does not answer: {exc.message}")
    return embedder


def _counts(storage, model: str | None, *, bounded: bool) -> tuple[dict, int, int | None]:
    """The store's counts (every block read: a damaged one raises), its journal's length and the
    memories waiting for ``model``'s embedding."""
    with storage.reading(bounded=bounded) as tx:
        counts = tx.health_counts()
        return counts, tx.journal_bounds()[0], None if model is None else tx.count_pending(model)


def _store(ctx, doc: dict, f: _Findings, embedder) -> None:
    from cortexctl.memory.types import TYPE_NAMES

    storage = ctx.storage
    path = storage.location
    block: dict = {"path": path, "exists": storage.exists(), "size_bytes": storage.size_bytes()}
    doc["store"] = block
    model = embedder.model if embedder is not None else None
    doc["index"] = storage.index_health(None)
    if not block["exists"]:
        f.add(UNHEALTHY, f"no store at {path} (a write creates one; check --store, CORTEXCTL_STORE and the config)")
        return
    try:
        try:  # bounded: reading every block, DuckDB would otherwise cache the whole file (1.7 GB at 1M)
            counts, journal, pending = _counts(storage, model, bounded=True)
        except OverBudget:
            counts, journal, pending = _counts(storage, model, bounded=False)
        block.update(schema_version=counts["schema_version"],
                     memories=sum(counts["by_type"].values()),
                     by_type={TYPE_NAMES.get(code, str(code)): n for code, n in sorted(counts["by_type"].items())},
                     tombstoned=counts["tombstoned"], versions=counts["versions"],
                     journal_entries=journal, pending_embeddings=pending,
                     isolation=counts.get("isolation", "engine"))
        if model is not None:
            doc["index"] = storage.index_health(model)
    except Exception as exc:
        if signalled() is not None:  # an interrupt that DuckDB made an error of: the command's end, not the store's
            raise
        if isinstance(exc, IntegrityError):
            doc["damaged"].append(exc.path or path)
        # a damaged file can fail in ways DuckDB does not classify
        said = exc.message if isinstance(exc, CortexError) else (str(exc).strip().splitlines() or [""])[0][:200]
        f.add(UNHEALTHY, f"the store cannot be read: {said}")
        return
    doc["snapshot"] = storage.cache_health()
    if doc["topology"] and doc["topology"]["mode"] == "external" and block["isolation"] != "database":
        f.add(DEGRADED, "finds are held to their actor by cortexctl alone, not by the database: this user may not "
                        "make or take on the role cortexctl_viewer (a write by a user with CREATEROLE makes it; "
                        "or GRANT cortexctl_viewer TO this user, then write once)")
    if block.get("pending_embeddings"):
        f.add(DEGRADED, f"{block['pending_embeddings']} memories wait for their embedding (cortexctl reindex)")
    if doc["index"]["consistent"] is False:
        f.add(DEGRADED, f"the index file {doc['index']['path']} is {doc['index']['state']} (find searches without "
                        "it meanwhile; cortexctl reindex rebuilds it)")
    if doc["snapshot"].get("problem"):
        f.add(DEGRADED, f"{doc['snapshot']['problem']}; find reads the database meanwhile")
    failure = doc["snapshot"].get("fold_failed")
    if failure:
        when = f" at {failure['at']}" if failure.get("at") else ""
        f.add(DEGRADED, f"the last fold of the index file and search snapshot failed{when}: {failure['error']} "
                        "(find reads the database for what it left out; the next write's fold tries again, "
                        "cortexctl reindex folds now)")


def _summary(settings, doc: dict, f: _Findings) -> None:
    base = settings.get("chat.base_url")
    env = settings.get("chat.api_key_env")
    host = urlsplit(base).hostname if base else None
    endpoint = _host(base) + urlsplit(base).path.rstrip("/") + "/chat/completions" if base else None
    configured = bool(env and os.environ.get(env))
    required = bool(base) and not _is_local(host)
    doc["providers"]["summary"] = {"active": "openai" if base else None, "host": _host(base),
                                   "model": settings.get("chat.model"), "endpoint": endpoint,
                                   "local": _is_local(host) if base else None,
                                   "credential": {"env": env, "configured": configured, "required": required}}
    if required and not configured:
        f.add(DEGRADED, f"the chat endpoint {_host(base)} needs a key in ${env}, which is not set")


def _backup(settings, doc: dict, f: _Findings) -> None:
    from cortexctl.engine.bundle import bundles_in, default_dest

    dest = default_dest(settings)
    window = settings.get("backup.window_days")
    block = {"dest": str(dest), "last": None, "window_days": window}
    doc["backup"] = block
    try:
        found = bundles_in(dest) if dest.is_dir() else []
    except OSError:
        found = []
    if found:
        at, path = found[0]
        age = datetime.now(timezone.utc).replace(tzinfo=None) - at
        block["last"] = {"path": str(path), "created_at": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                         "age_hours": round(age.total_seconds() / 3600, 2)}
    if window is not None:
        if not found:
            f.add(DEGRADED, f"no backup in {dest} (backup.window_days is {window:g})")
        elif block["last"]["age_hours"] > float(window) * 24:
            f.add(DEGRADED, f"the last backup is {block['last']['age_hours'] / 24:.1f} days old "
                            f"(backup.window_days is {window:g})")
