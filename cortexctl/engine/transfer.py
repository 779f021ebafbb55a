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
     "valid": {"valid_from", "valid_to", "supersedes", "superseded_by"},
     "versions": [{"version", "data", "created_at", "created_by", "confidence",
                   "provenance", "forms": {"short", "medium"}, "forms_override", "hash"}]}

Every line is checked before anything is written. A file with any bad line is
rejected whole, with every bad line reported, unless ``skip_invalid``.

A memory whose ID the store already holds is a bad line, unless
``skip_existing`` and the stored memory has the same content: the same owner
and the same versions (as many, and each version's hash equal, in order; the
hash covers the type and the data). Such a line is skipped and counted, and
the stored memory is left as it is (its head fields, tombstone and salience
included). With ``skip_existing``, the same ID with other content is still a
bad line (a conflict), reported like any other. Good
records are then written in batches, one transaction each (heads, versions,
frames and one journal entry per memory); the store is released between
batches so that a concurrent reader waits at most one batch. A killed import
leaves only whole batches.

Both passes stream: the checking pass prepares the file chunk by chunk and
keeps the prepared chunks on disk in a private temp directory (removed at the
end), so the memory an import needs does not grow with the file; per memory it
keeps only its ID and line number (for IDs that appear twice) until the end.
The checking pass also makes each memory's journal payload, postings and, for
the built-in embedder, vector; a file of more than one chunk is checked by one
worker process per core, each writing its prepared chunks to the temp
directory. The writing pass then only inserts and commits, while the index
grows beside it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Iterator

from cortexctl.engine.context import Context
from cortexctl.engine.validtime import check_interval
from cortexctl.engine.reports import ImportReport, LineProblem
from cortexctl.engine.results import Tombstone, iso
from cortexctl.engine.rows import (
    clean_frames,
    clean_tags,
    head_row,
    provenance_of,
    to_naive,
    version_row,
    write_payload,
)
from cortexctl.errors import CortexError, InvalidData, UsageError, check_nesting, too_deep
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
from cortexctl.store.interface import VALID_FIELDS, NoStore

DEFAULT_BATCH = 5000
MAX_LINE_BYTES = 1 << 20

SHORT_KEYS = {"type", "text", "data", "tags", "frames", "importance", "visibility", "confidence",
              "actor", "session", "created_at", "forms", "id", "uri"}
EXPORT_KEYS = {"uri", "id", "type", "actor", "visibility", "tags", "frames", "importance", "session", "valid",
               "created_at", "updated_at", "tombstone", "salience", "versions"}
VERSION_KEYS = {"version", "data", "created_at", "created_by", "confidence", "provenance", "forms",
                "forms_override", "hash", "uri"}


ALREADY_STORED = "already exists in the store"  # the problem of a line whose ID the store holds


class ImportRejected(InvalidData):
    """A file with bad lines, rejected whole; ``problems`` lists every one."""

    def __init__(self, problems: list[LineProblem], total: int) -> None:
        n = len(problems)
        if problems and all(p.message.endswith(ALREADY_STORED) for p in problems):  # a re-run import
            hint, field = "pass skip_existing to skip the memories the store already holds", "skip_existing"
        else:
            hint, field = "fix the lines above, or pass skip_invalid to import the rest", "skip_invalid"
        super().__init__(
            f"import rejected: {n} of {total} line{'s' if total != 1 else ''} invalid; nothing was imported",
            hint=hint, field=field,
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
    # Made in the checking pass (see ``_finish_chunk``); None: made in the writing pass.
    payload: bytes | None = None  # the journal entry's payload
    terms: list[int] | None = None  # the postings' term IDs
    vector: Any = None  # the built-in embedder's vector (a float32 row)


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
    if not isinstance(type_name, str) or type_name not in TYPE_CODES:
        raise InvalidData(f"type: {schema.shown(type_name)} is not one of {', '.join(TYPES)}")
    export_form = "versions" in obj
    allowed = EXPORT_KEYS if export_form else SHORT_KEYS
    for key in obj:
        if key not in allowed:
            what = "an export record" if export_form else "a memory line"
            raise InvalidData(f"{key}: unknown key in {what} (keys: {', '.join(sorted(allowed))})")

    if obj.get("id") is not None:
        id_ = normalize_id_text(obj["id"]) if isinstance(obj["id"], str) else None
        if id_ is None or not is_id(id_):
            raise InvalidData(f"id: {schema.shown(obj['id'])} is not a 26-character ID")
    else:
        id_ = None
    if obj.get("uri") is not None and (id_ is None or obj["uri"] != memory_uri(id_)):
        raise InvalidData(f"uri: {schema.shown(obj['uri'])} does not match id")
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
        **_valid(obj.get("valid")),
    )
    return Prepared(head, versions, text=body.search_text)


def _valid(valid: Any) -> dict:
    """An export record's ``valid`` object (valid time and supersede links) as head fields."""
    if valid is None:
        return {}
    if not isinstance(valid, dict) or set(valid) - set(VALID_FIELDS):
        raise InvalidData(f"valid: must be an object with {', '.join(VALID_FIELDS)}")
    out = {k: _opt_time(valid.get(k), f"valid.{k}") for k in ("valid_from", "valid_to")}
    check_interval(out["valid_from"], out["valid_to"])
    for k in ("supersedes", "superseded_by"):
        v = valid.get(k)
        if v is not None and not (isinstance(v, str) and is_id(v)):
            raise InvalidData(f"valid.{k}: {schema.shown(v)} is not a 26-character ID")
        out[k] = v
    return out


class _Spill:
    """Prepared chunks waiting for the write pass, kept on disk so memory does not grow with the file.

    The newest chunk stays in memory (an import of one chunk never touches the
    disk); older ones are pickled into a private directory in the store's scratch
    space (``store/scratch.py``: what a killed import leaves is removed by the next
    writer), and each file is removed as soon as it has been read back.
    """

    def __init__(self, areas: list[Path]) -> None:
        self._dir: str | None = None
        self._areas = areas
        self._files: list[str] = []
        self._last: list[Prepared] | None = None
        self.bad_lines: set[int] = set()  # lines dropped after their chunk was prepared (IDs seen twice or taken)
        self.existing = 0  # of those, lines skipped as already in the store (skip_existing)

    def directory(self) -> str:
        """The private directory (0700), made on first use."""
        if self._dir is None:
            from cortexctl.store import scratch

            self._dir = str(scratch.make(self._areas, "import"))
        return self._dir

    def push(self, chunk: list[Prepared]) -> None:
        if self._last is not None:
            self._files.append(_dump_chunk(self._last, self.directory(), len(self._files)))
        self._last = chunk

    def push_file(self, name: str) -> None:
        """A chunk a worker process wrote (``_dump_chunk``), next in file order."""
        if self._last is not None:
            self.push([])  # keep file order: what was held in memory goes to disk first
            self._last = None
        self._files.append(name)

    def __iter__(self):
        import pickle

        for name in self._files:
            with open(name, "rb") as fh:
                chunk = pickle.load(fh)
            os.unlink(name)
            yield chunk
        self._files = []
        if self._last is not None:
            last, self._last = self._last, None
            yield last

    def close(self) -> None:
        from cortexctl.store import scratch

        self._files = []
        self._last = None
        if self._dir is not None:
            scratch.remove(self._dir)
            self._dir = None


def _dump_chunk(chunk: list[Prepared], directory: str, number: int) -> str:
    import pickle

    name = os.path.join(directory, f"{number:08d}.pickle")
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        pickle.dump(chunk, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return name


def _bounded_lines(source: Iterable[bytes]) -> Iterator[bytes]:
    """The lines of ``source``, none held past ``MAX_LINE_BYTES`` + 1 bytes: a longer line is cut
    there (so that it fails ``_parse_line``'s length check, with its number) and the rest of it is
    read and dropped. Iterating a stream line by line would hold a line whole: one without an end
    (``import - < /dev/zero``, a binary file) took every byte of memory until the kernel killed
    the process. A source without ``readline`` (an iterable of lines) is taken as it comes."""
    readline = getattr(source, "readline", None)
    if readline is None:
        yield from source
        return
    while raw := readline(MAX_LINE_BYTES + 1):
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while (rest := readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                pass
        yield raw


def _parse_line(raw: bytes) -> Any:
    import orjson

    if len(raw) > MAX_LINE_BYTES:
        raise InvalidData(f"line is longer than {MAX_LINE_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidData(f"not valid UTF-8 (byte {exc.start})") from None
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        if str(exc).startswith("depth limit exceeded"):
            raise too_deep("") from None
        raise InvalidData(f"not valid JSON ({str(exc).split(':')[0]})") from None
    return check_nesting(doc, "")


def _conflict(key: tuple, stored: tuple[str, list[bytes]] | None) -> str | None:
    """Why the line of ``key`` (see ``_keys``) is not the memory the store holds under its ID
    (None when it is the same)."""
    if stored is None:
        return None
    owner, hashes = stored
    id_, _, mine_owner, mine = key
    if owner != mine_owner:
        return f"memory {id_} already exists in the store with another owner"
    if len(mine) != len(hashes):
        return (f"memory {id_} already exists in the store with other content "
                f"({len(hashes)} version{'s' if len(hashes) != 1 else ''} stored, {len(mine)} in the line)")
    for v, (a, b) in enumerate(zip(mine, hashes), 1):
        if a != b:
            return f"memory {id_} already exists in the store with other content (version {v} differs)"
    return None


def _keys(chunk: list[Prepared]) -> list[tuple]:
    """What the parent needs of each prepared line: (id, line, owner, version hashes)."""
    return [(p.head["id"], p.line, p.head["actor"], [v["hash"] for v in p.versions]) for p in chunk]


def _prepare_lines(lines: list[tuple[int, bytes]], actor: str, now: datetime, keep_actors: bool,
                   dim: int | None) -> tuple[list[Prepared], list[LineProblem]]:
    """Parse and check numbered raw lines; the good ones get their extras (``_finish_chunk``)."""
    chunk: list[Prepared] = []
    problems: list[LineProblem] = []
    for n, raw in lines:
        try:
            p = prepare(_parse_line(raw), actor, now, keep_actors=keep_actors)
        except CortexError as exc:
            problems.append(LineProblem(n, exc.message))
            continue
        p.line = n
        chunk.append(p)
    _finish_chunk(chunk, dim)
    return chunk, problems


def _finish_chunk(chunk: list[Prepared], dim: int | None) -> None:
    """What the writing pass would otherwise make per memory, made here where it can run on
    every core: the journal payload, the postings' term IDs and, for the built-in embedder
    (``dim``), the vector of each live memory. An endpoint is never called from here."""
    from cortexctl.memory.terms import text_terms

    for p in chunk:
        p.payload = write_payload(p.head, p.versions)
        p.terms = text_terms(p.text)
    if dim is not None:
        from cortexctl.embed.hashing import embed

        live = [p for p in chunk if p.head["tombstoned_at"] is None]
        if live:
            matrix = embed([p.text for p in live], dim)
            for p, row in zip(live, matrix):
                p.vector = row.copy()  # its own 1.5 KB, not a view that pickles the whole matrix


def _worker_chunk(lines: list[tuple[int, bytes]], actor: str, now: datetime, keep_actors: bool,
                  dim: int | None, directory: str, number: int):  # pragma: no cover - in the workers
    """One chunk in a worker: prepared, spilled to its own file; returns what the parent keeps."""
    chunk, problems = _prepare_lines(lines, actor, now, keep_actors, dim)
    name = _dump_chunk(chunk, directory, number) if chunk else None
    return _keys(chunk), problems, name


# Every this many batches (and at the last), a batch's commit lets the store compact what the
# batches before it wrote; the others defer it. Measured at 20k memories in batches of 1,000: the
# closes took 33.6 s compacting each time, 19.2 s compacting every 8th, and a write just after
# the import still found about 1 s of compaction left (bench/README.md).
COMPACT_EVERY = 8
POOL_MIN_CHUNK = 2000  # lines per worker job, at least (a job costs a few ms of pickling and IPC)
POOL_AHEAD = 2  # jobs queued per worker: bounds the raw lines held in memory


def _workers() -> int:
    from cortexctl.parallel import cores

    return cores()


def read_prepared(
    ctx: Context, source: IO[bytes], *, keep_actors: bool = False, chunk_size: int = DEFAULT_BATCH,
    skip_existing: bool = False,
) -> tuple[_Spill, list[LineProblem], int, int]:
    """The checking pass: every line parsed and checked, chunk by chunk.

    Returns the prepared chunks (spilled to disk past the first), every problem
    in line order, the number of non-blank lines and the number of good memories.
    Lines skipped as already in the store (``skip_existing``) are in ``spill.existing``.
    Nothing per memory is kept in memory past its chunk but its ID and line
    (two numpy columns), for finding IDs that appear twice in the file.

    A file of more than one chunk is prepared by worker processes, one per core,
    each writing its prepared chunks to the temp directory itself; this process
    reads the lines, hands them out in order and checks the IDs against the store.
    """
    import numpy as np

    now = ctx.clock()
    problems: list[LineProblem] = []
    bad_lines: set[int] = set()
    existing: set[int] = set()  # lines whose memory the store already holds as it is
    total = 0
    id_cols: list = []
    line_cols: list = []
    from cortexctl.store import scratch

    spill = _Spill(scratch.areas(ctx.storage))
    try:
        from cortexctl.embed.hashing import HashEmbedder

        embedder = ctx.embedder
        dim = embedder.dim if type(embedder) is HashEmbedder else None  # vectors made with the file's check
    except CortexError:
        dim = None  # a misconfigured endpoint: the writing pass reports it, as before

    def check(keys: list[tuple]) -> None:
        if not keys:
            return
        ids = [k[0] for k in keys]
        stored: dict = {}
        try:
            with ctx.storage.reading() as tx:
                taken = tx.existing_ids(ids)
                if taken and skip_existing:
                    stored = tx.stored_hashes(sorted(taken))
        except NoStore:
            taken = set()
        for k in keys:
            id_, line = k[0], k[1]
            if id_ in taken:
                if skip_existing:
                    why = _conflict(k, stored.get(id_, ("", [])))
                    if why is None:
                        existing.add(line)
                        continue
                else:
                    why = f"memory {id_} {ALREADY_STORED}"
                problems.append(LineProblem(line, why))
                bad_lines.add(line)
        id_cols.append(np.array(ids, dtype="S26"))
        line_cols.append(np.array([k[1] for k in keys], dtype=np.int64))

    def numbered():
        nonlocal total
        for n, raw in enumerate(_bounded_lines(source), 1):
            if not raw.strip():
                continue
            total += 1
            yield n, raw

    try:
        lines_iter = numbered()
        job = chunk_size * -(-POOL_MIN_CHUNK // chunk_size)  # whole batches, so batches stay whole
        first = list(_take(lines_iter, job))
        more = list(_take(lines_iter, 1))
        if more:
            import itertools

            lines_iter = itertools.chain(more, lines_iter)
        workers = _workers()
        if not more or workers < 2:
            # One chunk (or one core): in this process, the newest chunk kept in memory.
            pending = first
            while pending:
                chunk, bad = _prepare_lines(pending[:chunk_size], ctx.actor, now, keep_actors, dim)
                problems.extend(bad)
                check(_keys(chunk))
                spill.push(chunk)
                pending = pending[chunk_size:]
                if not pending:
                    pending = list(_take(lines_iter, job))
        else:
            from cortexctl.parallel import ordered_map

            directory = spill.directory()

            def jobs():
                lines, number = first, 0
                while lines:
                    yield lines, ctx.actor, now, keep_actors, dim, directory, number
                    lines, number = list(_take(lines_iter, job)), number + 1

            with ordered_map(_worker_chunk, jobs(), workers=workers, ahead=POOL_AHEAD) as chunks:
                for keys, bad, name in chunks:
                    problems.extend(bad)
                    check(keys)
                    if name is not None:
                        spill.push_file(name)
        good = sum(len(c) for c in line_cols)
        if good:
            ids = np.concatenate(id_cols)
            lines_col = np.concatenate(line_cols)
            id_cols.clear()
            line_cols.clear()
            order = np.argsort(ids, kind="stable")  # lines increase within equal IDs
            sids = ids[order]
            starts = np.ones(len(sids), dtype=bool)
            starts[1:] = sids[1:] != sids[:-1]
            group = np.maximum.accumulate(np.where(starts, np.arange(len(sids)), 0))  # each one's first
            for j in np.flatnonzero(~starts):
                first_at = group[j]
                line = int(lines_col[order[j]])
                if line not in bad_lines and line not in existing:
                    problems.append(LineProblem(
                        line, f"id {sids[j].decode()} appears again (first on line {int(lines_col[order[first_at]])})"))
                    bad_lines.add(line)
            good -= len(bad_lines) + len(existing)
    except BaseException:
        spill.close()
        raise
    problems.sort(key=lambda p: p.line)
    spill.bad_lines = bad_lines | existing
    spill.existing = len(existing)
    return spill, problems, total, good


def _take(it, n: int):
    import itertools

    return itertools.islice(it, n)


def import_jsonl(
    ctx: Context,
    source: IO[bytes],
    *,
    skip_invalid: bool = False,
    skip_existing: bool = False,
    keep_actors: bool = False,
    batch_size: int = DEFAULT_BATCH,
    progress: Callable[[int, int], None] | None = None,
) -> ImportReport:
    """Import JSONL from a binary stream; see the module docstring for the rules.

    Two passes, both streaming: the first parses and checks every line, chunk
    by chunk, and keeps the prepared chunks on disk (see ``_Spill``); the second
    writes them batch by batch while the index grows beside.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= 1_000_000:
        raise UsageError(f"batch_size must be from 1 to 1000000 (got {batch_size!r})", field="batch_size")
    spill, problems, total, n_good = read_prepared(ctx, source, keep_actors=keep_actors, chunk_size=batch_size,
                                                   skip_existing=skip_existing)
    try:
        if problems and not skip_invalid:
            raise ImportRejected(problems, total)
        report = _write_chunks(ctx, spill, problems, n_good, batch_size, progress)
        report.existing = spill.existing
        return report
    finally:
        spill.close()


def _write_chunks(ctx: Context, spill: _Spill, problems: list[LineProblem], n_good: int, batch_size: int,
                  progress: Callable[[int, int], None] | None) -> ImportReport:
    """The writing pass, pipelined: while one batch is inserted and committed in a writer thread
    (DuckDB works without the GIL), the next one is embedded and its postings and journal
    entries are made. Batches still commit one after the other, in file order."""
    from concurrent.futures import ThreadPoolExecutor

    first_seq = last_seq = None
    batches = 0
    done = 0
    last_line = 0
    warnings: list[str] = []
    pending = 0
    index = None
    builder = None
    if n_good:
        # The index may grow batch by batch. The checking pass made the vectors, postings and
        # payloads: this thread only reads chunks back and hands them on, so the index may use
        # every core beside the store's writer.
        builder = ctx.storage.index_loader(ctx.embedder.model, threads=_workers(), expected=n_good)
    writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cortexctl-import")
    running = None  # (future, batch) of the batch being committed
    number = done_before = 0  # batches and memories handed to the writer

    def settle() -> None:
        nonlocal running, first_seq, last_seq, pending, batches, done, last_line
        if running is None:
            return
        future, batch = running
        running = None
        try:
            seq, waiting, stored = future.result()
        except CortexError as err:
            if done:
                # Earlier batches are committed: say exactly what is in the store now.
                err.message = (f"{err.message}; import stopped after {done} of {n_good} memories "
                               f"(lines 1-{last_line} are imported)")
                err.hint = (f"import the rest from line {batch[0].line} on, e.g. tail -n +{batch[0].line} FILE, "
                            "or the whole file again, skipping the memories already in")
            raise
        if stored is not None:
            owner = {p.head["id"]: (p.head["visibility"], p.head["actor"]) for p in batch}
            builder.add(*stored, owners=[owner[i] for i in stored[1]])
        first_seq = seq if first_seq is None else first_seq
        last_seq = seq + len(batch) - 1
        pending += waiting
        batches += 1
        done += len(batch)
        last_line = batch[-1].line
        if progress:
            progress(done, n_good)

    try:
        for chunk in spill:
            good = [p for p in chunk if p.line not in spill.bad_lines] if spill.bad_lines else chunk
            for start in range(0, len(good), batch_size):
                batch = good[start : start + batch_size]
                ready = _ready_batch(ctx, batch, warnings)
                settle()
                if ready.warned_at != len(warnings):  # the batch before stored no vectors: nor does this one
                    ready.vectors = None
                number += 1
                compact = number % COMPACT_EVERY == 0 or done_before + len(batch) >= n_good
                done_before += len(batch)
                running = (writer.submit(_commit_batch, ctx, batch, ready, warnings, compact), batch)
        settle()
        if done:
            # What the batches' checkpoints left free in the store's files, given back before the
            # search structures are built from them (the search snapshot follows the file).
            ctx.reclaim_space()
            try:
                index = ctx.storage.update_index(ctx.embedder.model, loader=builder)  # once for the whole import
            except (CortexError, OSError) as err:  # every memory is in; only the cache lags
                detail = err.message if isinstance(err, CortexError) else (err.strerror or type(err).__name__)
                warnings.append(f"index file not brought up to date ({detail}); run: cortexctl reindex")
                index = {"action": "none", "reason": "failed"}
    finally:
        if running is not None:
            running[0].exception()  # let a failed pipeline's last commit finish before leaving
        writer.shutdown(wait=True)
        if builder is not None:
            builder.close()
    return ImportReport(
        imported=done, skipped=len(problems), batches=batches, problems=problems,
        first_seq=first_seq, last_seq=last_seq, pending=pending, warnings=warnings,
        index=index,
    )


@dataclass
class _Ready:
    """What a batch needs besides its rows, made with no connection open."""

    entries: list
    postings: list
    live: int
    vectors: tuple | None
    warned_at: int


def _ready_batch(ctx: Context, batch: list[Prepared], warnings: list[str]) -> _Ready:
    """Embed the batch and make its postings and journal entries.

    When the embedder fails, the batch is imported all the same and waits for ``reindex``.
    """
    from cortexctl.engine import semantic
    from cortexctl.errors import ConfigError, ProviderUnreachable
    from cortexctl.memory.terms import text_terms

    now = ctx.clock()
    warned_at = len(warnings)
    entries = [("write", now, ctx.actor, p.head["id"],
                p.payload if p.payload is not None else write_payload(p.head, p.versions)) for p in batch]
    live = [p for p in batch if p.head["tombstoned_at"] is None]
    vectors = None
    if live and not warnings:
        if all(p.vector is not None for p in live):  # made by the checking pass (the built-in embedder)
            import numpy as np

            vectors = ([p.head["id"] for p in live], [p.head["current_version"] for p in live],
                       np.vstack([p.vector for p in live]))
        else:
            try:
                vectors = semantic.embed_versions(
                    ctx.embedder, [(p.head["id"], p.head["current_version"], p.text) for p in live])
            except (ProviderUnreachable, ConfigError) as exc:
                warnings.append(f"embedding pending: {exc.message}")
                warned_at = len(warnings)
    postings = [(p.head["id"], p.terms if p.terms is not None else text_terms(p.text)) for p in batch]
    for p in batch:
        p.vector = p.payload = p.terms = None  # held by the batch's rows from here on
    return _Ready(entries, postings, len(live), vectors, warned_at)


def _commit_batch(ctx: Context, batch: list[Prepared], ready: _Ready,
                  warnings: list[str], compact: bool = True) -> tuple[int, int, tuple | None]:
    """One batch in one transaction; returns (first seq, memories left pending, stored vectors).

    The stored vectors are (last key, ids, versions, matrix), or None when none were stored.
    IDs are checked again inside the transaction (another import may have won). The transaction
    is one of a bulk load's, tidying when ``compact`` (``Storage.transaction(bulk=True, tidy=...)``);
    a batch too big for the memory the store holds those to is committed again in an ordinary one.
    """
    from cortexctl.store.interface import OverBudget

    said = len(warnings)
    try:
        return _commit_in(ctx, batch, ready, warnings, bulk=True, tidy=compact)
    except OverBudget:
        del warnings[said:]  # said again by the second try, if still so
        return _commit_in(ctx, batch, ready, warnings, bulk=False, tidy=True)


def _commit_in(ctx: Context, batch: list[Prepared], ready: _Ready, warnings: list[str], *,
               bulk: bool, tidy: bool) -> tuple[int, int, tuple | None]:
    from cortexctl.engine import semantic

    vectors = ready.vectors
    with ctx.transaction(bulk=bulk, tidy=tidy) as tx:
        taken = tx.existing_ids([p.head["id"] for p in batch])
        if taken:
            clash = [LineProblem(p.line, f"memory {p.head['id']} {ALREADY_STORED}")
                     for p in batch if p.head["id"] in taken]
            raise ImportRejected(clash, len(batch))
        tx.insert_memories([p.head for p in batch], [v for p in batch for v in p.versions])
        tx.add_terms(ready.postings)
        last_key = semantic.store_or_warn(tx, ctx.embedder, *vectors, warnings) if vectors else 0
        seq = tx.append_journal(ready.entries)
    return seq, (0 if last_key else ready.live), ((last_key, *vectors) if last_key else None)


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
        "valid": {"valid_from": iso(head["valid_from"]), "valid_to": iso(head["valid_to"]),
                  "supersedes": head["supersedes"], "superseded_by": head["superseded_by"]},
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


def _special(path) -> bool:
    """Whether ``path`` is there and is neither a regular file nor a directory (a FIFO, a device)."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _descriptor(path) -> int | None:
    """The descriptor ``path`` names in this process (/dev/stdout, /dev/fd/N, /proc/self/fd/N), else
    None: its real path is the file behind the descriptor, not a name to rename a new file over."""
    import re

    text = os.path.abspath(str(path))
    named = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}.get(text)
    if named is not None:
        return named
    m = re.fullmatch(rf"/(?:dev/fd|proc/(?:self|{os.getpid()})/fd)/(\d+)", text, re.ASCII)
    return int(m.group(1)) if m else None


def export_jsonl(ctx: Context, sink: IO[bytes] | str | os.PathLike) -> int:
    """Write every memory the actor can see, in ID order; returns how many.

    A path is written atomically (a temp file beside it, then rename), so a
    failed export never leaves a partial file under the name asked for; a FIFO
    or a device is written into as it is.
    """
    import orjson

    if isinstance(sink, (str, os.PathLike)):
        if not str(sink).strip():
            raise UsageError("out must not be empty", field="out")
        shown = Path(sink)
        fd = _descriptor(sink)
        if fd is not None or _special(sink):
            # a descriptor this process holds (/dev/stdout redirected to a file: the shell's file, at
            # the shell's offset), a FIFO or a device (/dev/null, a tty): written into, never renamed over
            try:
                fh = os.fdopen(os.dup(fd), "wb") if fd is not None else open(sink, "wb")
            except OSError as exc:
                raise UsageError(f"out {shown}: cannot be written ({exc.strerror})", field="out") from None
            import fcntl

            if fcntl.fcntl(fh.fileno(), fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
                fh.close()  # /dev/stdin, or a descriptor the shell opened for reading (`1<file`)
                raise UsageError(f"out {shown}: cannot be written (descriptor {fd} is open for reading only)",
                                 field="out")
            with fh:
                return export_jsonl(ctx, fh)  # a full disk or a closed pipe is said as export to stdout says it
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
            for head, versions in tx.iter_visible(ctx.viewer_for(tx)):
                sink.write(orjson.dumps(export_record(head, versions)) + b"\n")
                count += 1
    except NoStore:
        raise ctx.no_store() from None
    return count
