"""Bulk import and export as JSONL, one JSON object per memory.

An import line is either the short form::

    {"type": "fact", "text": "...", "tags": [...], "frames": [...], "importance": 5,
     "visibility": "private", "confidence": 1.0, "actor": "...", "session": "...",
     "created_at": "...", "data": {...}, "forms": {"short": "...", "medium": "..."}, "id": "..."}

or the export form, which carries every version and the head as stored::

    {"uri": ..., "id": ..., "type": ..., "actor": ..., "visibility": ..., "tags": [...],
     "frames": [...], "importance": ..., "session": ..., "created_at": ..., "updated_at": ...,
     "tombstone": null | {"reason", "at", "by"},
     "salience": {"access_count", "citations", "last_used"},
     "versions": [{"version", "data", "created_at", "created_by", "confidence",
                   "provenance", "forms": {"short", "medium"}, "forms_override", "hash"}]}

Every line is checked before anything is written. A file with any bad line is
rejected whole, with every bad line reported, unless ``skip_invalid``. Good
records are then written in batches, one transaction each (heads, versions,
frames and one journal entry per memory); the store is released between
batches so that a concurrent reader waits at most one batch. A killed import
leaves only whole batches.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Callable

from cortexctl.engine.context import Context
from cortexctl.engine.models import ImportReport, LineProblem, Tombstone, iso
from cortexctl.engine.rows import (
    clean_frames,
    clean_tags,
    head_row,
    provenance_of,
    to_naive,
    version_row,
    write_payload,
)
from cortexctl.errors import CortexError, InvalidData, UsageError
from cortexctl.memory import codec, schema
from cortexctl.memory.ids import is_id, memory_uri, new_id, normalize_id_text
from cortexctl.memory.record import VersionBody, build_version
from cortexctl.memory.types import (
    MAX_COUNT,
    TYPE_CODES,
    type_name as stored_type,
    TYPES,
    check_confidence,
    check_importance,
    check_name,
    check_visibility,
)
from cortexctl.store.interface import NoStore

DEFAULT_BATCH = 5000
MAX_LINE_BYTES = 1 << 20
MAX_REPORTED = 1000

SHORT_KEYS = {"type", "text", "data", "tags", "frames", "importance", "visibility", "confidence",
              "actor", "session", "created_at", "forms", "id", "uri"}
EXPORT_KEYS = {"uri", "id", "type", "actor", "visibility", "tags", "frames", "importance", "session",
               "created_at", "updated_at", "tombstone", "salience", "versions"}
VERSION_KEYS = {"version", "data", "created_at", "created_by", "confidence", "provenance", "forms",
                "forms_override", "hash", "uri"}


class ImportRejected(InvalidData):
    """A file with bad lines, rejected whole; ``problems`` lists every one."""

    def __init__(self, problems: list[LineProblem], total: int) -> None:
        n = len(problems)
        super().__init__(
            f"import rejected: {n} of {total} line{'s' if total != 1 else ''} invalid; nothing was imported",
            hint="fix the lines above, or pass skip_invalid to import the rest", field="skip_invalid",
        )
        self.problems = problems

    def to_json(self) -> dict:
        doc = super().to_json()
        doc["problems"] = [p.to_json() for p in self.problems]
        return doc


@dataclass
class Prepared:
    head: dict
    versions: list[dict]
    line: int = 0
    text: str = ""  # the current version's search text


def _time(value: Any, field: str) -> datetime:
    return to_naive(schema.parse_time(field, value))


def _opt_time(value: Any, field: str) -> datetime | None:
    return None if value is None else _time(value, field)


def _count(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise InvalidData(f"{field}: {value!r} is not a whole number from 0 to {MAX_COUNT}")
    return value


def _text(value: Any, field: str) -> str:
    return check_name(value, field, error=InvalidData)


def _reason(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 1000 or "\x00" in value:
        raise InvalidData(f"{field}: must be text of 1-1000 characters")
    return value


def _list(value: Any, field: str) -> list:
    if not isinstance(value, list):
        raise InvalidData(f"{field}: must be a list")
    return value


def prepare(obj: Any, actor: str, now: datetime, *, keep_actors: bool = False) -> Prepared:
    """Check one import object and build its rows; raises InvalidData naming the field.

    A line owned by another actor is refused unless ``keep_actors``: one actor
    must not plant private memories in another's space by accident.
    """
    if not isinstance(obj, dict):
        raise InvalidData("expected a JSON object")
    type_name = obj.get("type")
    if type_name not in TYPE_CODES:
        raise InvalidData(f"type: {type_name!r} is not one of {', '.join(TYPES)}")
    export_form = "versions" in obj
    allowed = EXPORT_KEYS if export_form else SHORT_KEYS
    for key in obj:
        if key not in allowed:
            what = "an export record" if export_form else "a memory line"
            raise InvalidData(f"{key}: unknown key in {what} (keys: {', '.join(sorted(allowed))})")

    if obj.get("id") is not None:
        id_ = normalize_id_text(obj["id"]) if isinstance(obj["id"], str) else None
        if id_ is None or not is_id(id_):
            raise InvalidData(f"id: {obj['id']!r} is not a 26-character ID")
    else:
        id_ = None
    if obj.get("uri") is not None and (id_ is None or obj["uri"] != memory_uri(id_)):
        raise InvalidData(f"uri: {obj['uri']!r} does not match id")
    owner = _text(obj["actor"], "actor") if obj.get("actor") is not None else actor
    if owner != actor and not keep_actors:
        raise InvalidData(
            f"actor: {owner!r} is not the importing actor {actor!r} (--keep-actors imports other owners' memories)"
        )
    visibility = check_visibility(obj.get("visibility", "private"), error=InvalidData)
    tags = clean_tags(_list(obj.get("tags", []), "tags"), error=InvalidData)
    frames = clean_frames(_list(obj.get("frames", []), "frames"), error=InvalidData)
    importance = check_importance(obj.get("importance", 5), error=InvalidData)
    session = _text(obj["session"], "session") if obj.get("session") is not None else None

    if not export_form:
        data = obj.get("data", {})
        if not isinstance(data, dict):
            raise InvalidData("data: must be a JSON object")
        data = dict(data)
        if obj.get("text") is not None:
            data[schema.MAIN_FIELD[type_name]] = obj["text"]
        forms = obj.get("forms")
        if forms is not None and not isinstance(forms, dict):
            raise InvalidData("forms: must be an object with short and/or medium")
        body = build_version(type_name, data, forms)
        created = _time(obj["created_at"], "created_at") if obj.get("created_at") is not None else now
        if created.year < 1970:
            raise InvalidData("created_at: must be 1970 or later (it becomes the time part of the ID)")
        confidence = check_confidence(obj.get("confidence", 1.0))
        id_ = id_ or new_id(int(created.replace(tzinfo=timezone.utc).timestamp() * 1000) if obj.get("created_at") else None)
        version = version_row(id_=id_, version=1, body=body, created_at=created, created_by=owner,
                              confidence=confidence, provenance={"via": "import"})
        head = head_row(id_=id_, body=body, actor=owner, visibility=visibility, tags=tags, frames=frames,
                        importance=importance, session=session, version=1, created_at=created,
                        updated_at=created, confidence=confidence)
        return Prepared(head, [version], text=body.search_text)

    if id_ is None:
        raise InvalidData("id: an export record needs its id")
    raw_versions = _list(obj["versions"], "versions")
    if not raw_versions:
        raise InvalidData("versions: an export record needs at least one version")
    versions: list[dict] = []
    body: VersionBody | None = None
    for n, rv in enumerate(raw_versions, 1):
        where = f"versions[{n - 1}]"
        if not isinstance(rv, dict):
            raise InvalidData(f"{where}: expected an object")
        for key in rv:
            if key not in VERSION_KEYS:
                raise InvalidData(f"{where}.{key}: unknown key (keys: {', '.join(sorted(VERSION_KEYS))})")
        if rv.get("version") != n:
            raise InvalidData(f"{where}.version: expected {n}, versions must run 1, 2, 3, ...")
        forms = rv.get("forms")
        if forms is not None and not isinstance(forms, dict):
            raise InvalidData(f"{where}.forms: must be an object")
        if not isinstance(rv.get("data"), dict):
            raise InvalidData(f"{where}.data: must be a JSON object")
        body = build_version(type_name, rv["data"], forms)
        if rv.get("forms_override") is not None:
            if not isinstance(rv["forms_override"], bool):
                raise InvalidData(f"{where}.forms_override: must be true or false")
            body = replace(body, forms_override=rv["forms_override"])
        if rv.get("hash") is not None and rv["hash"] != body.hash.hex():
            raise InvalidData(f"{where}.hash: does not match the version's data (tampered or edited)")
        provenance = rv.get("provenance", {"via": "import"})
        if not isinstance(provenance, dict):
            raise InvalidData(f"{where}.provenance: must be an object")
        versions.append(version_row(
            id_=id_, version=n, body=body,
            created_at=_time(rv["created_at"], f"{where}.created_at") if rv.get("created_at") else now,
            created_by=_text(rv["created_by"], f"{where}.created_by") if rv.get("created_by") else owner,
            confidence=check_confidence(rv.get("confidence", 1.0), field=f"{where}.confidence"),
            provenance=provenance,
        ))
    assert body is not None
    tomb = obj.get("tombstone")
    tombstone = None
    if tomb is not None:
        if not isinstance(tomb, dict) or set(tomb) - {"reason", "at", "by"}:
            raise InvalidData("tombstone: must be an object with reason, at and by")
        tombstone = Tombstone(
            _reason(tomb.get("reason"), "tombstone.reason"),
            _time(tomb.get("at"), "tombstone.at"),
            _text(tomb.get("by"), "tombstone.by"),
        )
    sal = obj.get("salience") or {}
    if not isinstance(sal, dict) or set(sal) - {"access_count", "citations", "last_used"}:
        raise InvalidData("salience: must be an object with access_count, citations and last_used")
    created = _time(obj["created_at"], "created_at") if obj.get("created_at") else versions[0]["created_at"]
    updated = _time(obj["updated_at"], "updated_at") if obj.get("updated_at") else versions[-1]["created_at"]
    head = head_row(
        id_=id_, body=body, actor=owner, visibility=visibility, tags=tags, frames=frames,
        importance=importance, session=session, version=len(versions), created_at=created,
        updated_at=updated, confidence=versions[-1]["confidence"], tombstone=tombstone,
        access_count=_count(sal.get("access_count", 0), "salience.access_count"),
        citations=_count(sal.get("citations", 0), "salience.citations"),
        last_used=_opt_time(sal.get("last_used"), "salience.last_used"),
    )
    return Prepared(head, versions, text=body.search_text)


def read_prepared(
    ctx: Context, source: IO[bytes], *, keep_actors: bool = False
) -> tuple[list[Prepared], list[LineProblem], int]:
    import orjson

    now = ctx.clock()
    good: list[Prepared] = []
    problems: list[LineProblem] = []
    total = 0
    seen: dict[str, int] = {}
    for n, raw in enumerate(source, 1):
        if not raw.strip():
            continue
        total += 1
        try:
            if len(raw) > MAX_LINE_BYTES:
                raise InvalidData(f"line is longer than {MAX_LINE_BYTES} bytes")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InvalidData(f"not valid UTF-8 (byte {exc.start})") from None
            try:
                obj = orjson.loads(text)
            except orjson.JSONDecodeError as exc:
                raise InvalidData(f"not valid JSON ({str(exc).split(':')[0]})") from None
            p = prepare(obj, ctx.actor, now, keep_actors=keep_actors)
            id_ = p.head["id"]
            if id_ in seen:
                raise InvalidData(f"id {id_} appears again (first on line {seen[id_]})")
            seen[id_] = n
            p.line = n
            good.append(p)
        except CortexError as exc:
            problems.append(LineProblem(n, exc.message))
    if good:
        try:
            with ctx.storage.reading() as tx:
                taken = tx.existing_ids([p.head["id"] for p in good])
        except NoStore:
            taken = set()
        if taken:
            keep = []
            for p in good:
                if p.head["id"] in taken:
                    problems.append(LineProblem(p.line, f"memory {p.head['id']} already exists in the store"))
                else:
                    keep.append(p)
            good = keep
    problems.sort(key=lambda p: p.line)
    return good, problems, total


def import_jsonl(
    ctx: Context,
    source: IO[bytes],
    *,
    skip_invalid: bool = False,
    keep_actors: bool = False,
    batch_size: int = DEFAULT_BATCH,
    progress: Callable[[int, int], None] | None = None,
) -> ImportReport:
    """Import JSONL from a binary stream; see the module docstring for the rules."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= 1_000_000:
        raise UsageError(f"batch_size must be from 1 to 1000000 (got {batch_size!r})", field="batch_size")
    good, problems, total = read_prepared(ctx, source, keep_actors=keep_actors)
    if problems and not skip_invalid:
        raise ImportRejected(problems, total)
    first_seq = last_seq = None
    batches = 0
    done = 0
    warnings: list[str] = []
    pending = 0
    index = None
    builder = None
    if good:
        from cortexctl.engine import semantic

        builder = semantic.IndexBuilder(ctx)  # the index grows in the background, batch by batch
    try:
        for start in range(0, len(good), batch_size):
            batch = good[start : start + batch_size]
            try:
                seq, waiting, stored = _write_batch(ctx, batch, warnings)
            except CortexError as err:
                if done:
                    # Earlier batches are committed: say exactly what is in the store now.
                    err.message = (f"{err.message}; import stopped after {done} of {len(good)} memories "
                                   f"(lines 1-{good[start - 1].line} are imported)")
                    err.hint = f"import the rest from line {batch[0].line} on, e.g. tail -n +{batch[0].line} FILE"
                raise
            if stored is not None:
                builder.add(*stored)
            first_seq = seq if first_seq is None else first_seq
            last_seq = seq + len(batch) - 1
            pending += waiting
            batches += 1
            done += len(batch)
            if progress:
                progress(done, len(good))
        if done:
            try:
                index = semantic.fold(ctx, built=builder)  # one index build (or fold) for the whole import
            except (CortexError, OSError) as err:  # every memory is in; only the cache lags
                detail = err.message if isinstance(err, CortexError) else (err.strerror or type(err).__name__)
                warnings.append(f"index file not brought up to date ({detail}); run: cortexctl reindex")
                index = {"action": "none", "reason": "failed"}
    finally:
        if builder is not None:
            builder.close()
    return ImportReport(
        imported=done, skipped=len(problems), batches=batches, problems=problems,
        first_seq=first_seq, last_seq=last_seq, pending=pending, warnings=warnings,
        index=index,
    )


def _write_batch(ctx: Context, batch: list[Prepared], warnings: list[str]) -> tuple[int, int, tuple | None]:
    """One batch in one transaction; returns (first seq, memories left pending, stored vectors).

    The stored vectors are (last key, ids, versions, matrix), or None when none were stored.

    IDs are checked again inside the transaction (another import may have won).

    The batch is embedded first, with no connection open; when the embedder
    fails, the batch is imported all the same and waits for ``reindex``.
    """
    from cortexctl.engine import semantic
    from cortexctl.errors import ConfigError, ProviderUnreachable
    from cortexctl.memory.terms import text_terms

    now = ctx.clock()
    entries = [("write", now, ctx.actor, p.head["id"], write_payload(p.head, p.versions)) for p in batch]
    live = [p for p in batch if p.head["tombstoned_at"] is None]
    vectors = None
    if live and not warnings:
        try:
            vectors = semantic.embed_versions(
                ctx.embedder, [(p.head["id"], p.head["current_version"], p.text) for p in live])
        except (ProviderUnreachable, ConfigError) as exc:
            warnings.append(f"embedding pending: {exc.message}")
    postings = [(p.head["id"], text_terms(p.text)) for p in batch]
    with ctx.transaction() as tx:
        taken = tx.existing_ids([p.head["id"] for p in batch])
        if taken:
            clash = [LineProblem(p.line, f"memory {p.head['id']} already exists in the store")
                     for p in batch if p.head["id"] in taken]
            raise ImportRejected(clash, len(batch))
        tx.insert_memories([p.head for p in batch], [v for p in batch for v in p.versions])
        tx.add_postings(postings)
        last_key = semantic.store_or_warn(tx, ctx.embedder, *vectors, warnings) if vectors else 0
        seq = tx.append_journal(entries)
    return seq, (0 if last_key else len(live)), ((last_key, *vectors) if last_key else None)


def export_record(head: dict, versions: list[dict]) -> dict:
    """One memory in the export form (see the module docstring)."""

    return {
        "uri": memory_uri(head["id"]),
        "id": head["id"],
        "type": stored_type(head["type"]),
        "actor": head["actor"],
        "visibility": head["visibility"],
        "tags": list(head["tags"]),
        "frames": list(head["frames"]),
        "importance": head["importance"],
        "session": head["session"],
        "created_at": iso(head["created_at"]),
        "updated_at": iso(head["updated_at"]),
        "tombstone": None if head["tombstoned_at"] is None else {
            "reason": head["tombstone_reason"], "at": iso(head["tombstoned_at"]), "by": head["tombstoned_by"],
        },
        "salience": {
            "access_count": head["access_count"], "citations": head["citations"],
            "last_used": iso(head["last_used"]),
        },
        "versions": [
            {
                "version": v["version"],
                "data": codec.decode(v["data"]),
                "created_at": iso(v["created_at"]),
                "created_by": v["created_by"],
                "confidence": v["confidence"],
                "provenance": provenance_of(v),
                "forms": {"short": v["short"], "medium": v["medium"]},
                "forms_override": v["forms_override"],
                "hash": v["hash"].hex(),
            }
            for v in versions
        ],
    }


def export_jsonl(ctx: Context, sink: IO[bytes] | str | os.PathLike) -> int:
    """Write every memory the actor can see, in ID order; returns how many.

    A path is written atomically (a temp file beside it, then rename), so a
    failed export never leaves a partial file under the name asked for.
    """
    import orjson

    if isinstance(sink, (str, os.PathLike)):
        shown = Path(sink)
        path = Path(os.path.realpath(sink))  # through a symlink, the file it points to is replaced
        if path.is_dir():
            raise UsageError(f"out {shown} is a directory; give a file name", field="out")
        parent = path.parent
        if not parent.is_dir():
            raise UsageError(f"out {shown}: directory {parent} does not exist", field="out")
        from cortexctl.files import atomic_path

        if not os.access(parent, os.W_OK | os.X_OK):
            raise UsageError(f"out {shown}: cannot write in {parent} (Permission denied)", field="out")
        with atomic_path(path) as tmp:  # 0600, like the store: an export holds private memories
            with open(tmp, "wb") as fh:
                count = export_jsonl(ctx, fh)
        return count

    count = 0
    try:
        with ctx.storage.reading() as tx:
            for head, versions in tx.iter_visible(ctx.actor):
                sink.write(orjson.dumps(export_record(head, versions)) + b"\n")
                count += 1
    except NoStore:
        raise ctx.no_store() from None
    return count
