"""The Cortex: open a store as an actor, and write, read, change and find memories.

Every method validates everything first, then opens the store for as short a
time as it can (read-only where it only reads) and makes its change and its
journal entry in one DuckDB transaction, so nothing is ever half-written.

    from cortexctl import Cortex
    cx = Cortex(store="/tmp/brain", actor="alice")
    uri = cx.write("fact", "The deploy key rotates monthly", tags=["ops"]).uri
    print(cx.show(uri).short)
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Iterator

from cortexctl import config as config_mod
from cortexctl.engine.models import (  # noqa: F401 - iso is re-used by transfer
    FindHit,
    FindQuery,
    HeadResult,
    Memory,
    Tombstone,
    VersionInfo,
    WriteResult,
    iso,
)
from cortexctl.errors import (
    AmbiguousRef,
    InvalidData,
    NotFound,
    Refused,
    Tombstoned,
    UsageError,
)
from cortexctl.memory import codec, schema
from cortexctl.memory.forms import FORMS
from cortexctl.memory.ids import new_id, parse_ref
from cortexctl.memory.record import VersionBody, build_version
from cortexctl.memory.types import (
    type_name as stored_type,
    Frame,
    check_importance,
    check_name,
    check_tag,
    check_visibility,
    parse_frame_filter,
    type_code,
)
from cortexctl.engine import semantic
from cortexctl.memory.terms import text_terms
from cortexctl.store import records
from cortexctl.store import search as search_sq
from cortexctl.store.db import NoStore, Store

MAX_REASON_CHARS = 1000
MAX_K = 10_000


def utcnow() -> datetime:
    """Now, as the naive UTC datetime the store keeps."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def to_naive(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc).replace(tzinfo=None)


# -- rows and journal payloads ---------------------------------------------------
def head_row(
    *, id_: str, body: VersionBody, actor: str, visibility: str, tags: list[str], frames: list[str],
    importance: int, session: str | None, version: int, created_at: datetime, updated_at: datetime,
    confidence: float, tombstone: Tombstone | None = None, access_count: int = 0, citations: int = 0,
    last_used: datetime | None = None,
) -> dict:
    return {
        "id": id_, "type": body.type_code, "actor": actor, "visibility": visibility,
        "tags": tags, "frames": frames, "importance": importance, "session": session,
        "current_version": version, "created_at": created_at, "updated_at": updated_at,
        "short": body.short, "medium": body.medium,
        "tombstone_reason": tombstone.reason if tombstone else None,
        "tombstoned_at": tombstone.at if tombstone else None,
        "tombstoned_by": tombstone.by if tombstone else None,
        "access_count": access_count, "citations": citations, "last_used": last_used,
        "confidence": confidence,  # the current version's, kept on the head for salience
    }


def version_row(
    *, id_: str, version: int, body: VersionBody, created_at: datetime, created_by: str,
    confidence: float, provenance: dict,
) -> dict:
    return {
        "id": id_, "version": version, "type": body.type_code, "data": body.data_bytes,
        "hash": body.hash, "created_at": created_at, "created_by": created_by,
        "confidence": confidence, "provenance": _provenance_text(provenance),
        "short": body.short, "medium": body.medium, "forms_override": body.forms_override,
    }


_PROVENANCE_TEXT: dict[tuple[str, str], str] = {}


def _provenance_text(provenance: dict) -> str:
    """Provenance as stored: compact JSON with sorted keys. The usual one-key forms
    ({"via": "import"}, ...) are made once."""
    if len(provenance) == 1:
        key = next(iter(provenance.items()))
        if type(key[1]) is str:
            text = _PROVENANCE_TEXT.get(key)
            if text is None:
                text = json.dumps(provenance, sort_keys=True, separators=(",", ":"))
                if len(_PROVENANCE_TEXT) < 64:
                    _PROVENANCE_TEXT[key] = text
            return text
    return json.dumps(provenance, sort_keys=True, separators=(",", ":"))


_EPOCH = datetime(1970, 1, 1)
_MICROSECOND = timedelta(microseconds=1)


def micros(at: datetime) -> int:
    """A stored time as integer microseconds since the epoch (UTC), as journal payloads hold it."""
    return (at - _EPOCH) // _MICROSECOND


def _plain(row: dict) -> dict:
    """A row with times as integer microseconds since the epoch (UTC), for canonical CBOR payloads."""
    return {k: (micros(v) if isinstance(v, datetime) else v) for k, v in row.items()}


MISSING, AMBIGUOUS, NO_VERSION = "missing", "ambiguous", "no such version"


def look_up(con, actor: str, refs: dict[str, Any], columns=records.HEAD_COLUMNS) -> dict[str, dict | str]:
    """Each parsed reference's visible head (with ``columns``), or why there is none:
    MISSING, AMBIGUOUS, or NO_VERSION for a version URI past the memory's latest version.
    Full IDs are looked up together, in one query."""
    full = [r.id_or_prefix for r in refs.values() if r.is_full]
    known = {h["id"]: h for h in records.heads_by_ids(con, full, actor, columns)}
    out: dict[str, dict | str] = {}
    for text, ref in refs.items():
        if ref.is_full:
            found = [known[ref.id_or_prefix]] if ref.id_or_prefix in known else []
        else:
            found = records.heads_by_prefix(con, ref.id_or_prefix, actor, limit=2)
        if not found:
            out[text] = MISSING
        elif len(found) > 1:
            out[text] = AMBIGUOUS
        elif ref.version is not None and ref.version > found[0]["current_version"]:
            out[text] = NO_VERSION
        else:
            out[text] = found[0]
    return out


def write_payload(head: dict, versions: list[dict]) -> bytes:
    """The journal payload of a write or import: the whole head and every version."""
    return codec.encode_plain({"head": _plain(head), "versions": [_plain(v) for v in versions]})


def clean_tags(tags: Iterable[str], *, error=UsageError) -> list[str]:
    return sorted({check_tag(t, error=error) for t in tags})


def clean_frames(frames: Iterable[str], *, error=UsageError) -> list[str]:
    return sorted({str(Frame.parse(f, error=error)) for f in frames})


class Cortex:
    """A store opened as one actor. Cheap to make; every call opens and closes the store."""

    def __init__(
        self,
        store: str | os.PathLike | None = None,
        *,
        actor: str | None = None,
        wait: float | None = None,
        config: str | os.PathLike | None = None,
        settings: config_mod.Settings | None = None,
    ) -> None:
        self.settings = settings or config_mod.load(config_path=config, store=store, actor=actor, wait=wait)
        self.actor: str = self.settings.actor
        self.store = Store(self.settings.store, wait=self.settings.wait)
        self._embedder = None

    @property
    def embedder(self):
        """The active embedder (built on first use; see ``cortexctl.embed``)."""
        if self._embedder is None:
            from cortexctl.embed import from_settings

            self._embedder = from_settings(self.settings)
        return self._embedder

    # -- plumbing ------------------------------------------------------------
    @contextmanager
    def _transaction(self, *, existing: str | None = None) -> Iterator[Any]:
        """A write transaction; with ``existing``, NotFound(existing) when there is no store yet."""
        if existing is not None and not self.store.exists():
            self.store._check_path()
            raise NotFound(existing)
        with self.store.write() as con:
            con.execute("BEGIN")
            try:
                yield con
            except BaseException:
                try:
                    con.execute("ROLLBACK")
                except Exception:  # a broken connection: closing it discards the transaction anyway
                    pass
                raise
            con.execute("COMMIT")

    def _resolve(self, con, text: str) -> dict:
        ref = parse_ref(text)
        heads = records.heads_by_prefix(con, ref.id_or_prefix, self.actor)
        if not heads:
            raise NotFound(f"no memory {text!r}", hint="list memories with: cortexctl find")
        if len(heads) > 1:
            shown = ", ".join(h["id"] for h in heads[:5])
            raise AmbiguousRef(
                f"ID prefix {text!r} is ambiguous: it matches {shown}{' and more' if len(heads) > 5 else ''}",
                hint="give more characters of the ID",
            )
        return heads[0]

    def _own(self, head: dict) -> None:
        if head["actor"] != self.actor:
            raise Refused(
                f"memory {head['id']} belongs to actor {head['actor']!r}; only its owner can change it"
            )

    @staticmethod
    def _assemble(type_name: str, base: dict, text: str | None, data: dict | None, sets: Iterable[str] | None) -> dict:
        """Merge, in order: base data, --data fields, --set FIELD=VALUE, then TEXT."""
        out = {k: v for k, v in base.items() if k != "schema_version"}
        if data is not None:
            if not isinstance(data, dict):
                raise InvalidData(f"{type_name}: --data must be a JSON object")
            out.update(data)
        for item in sets or ():
            field, sep, raw = item.partition("=")
            if not sep or not field:
                raise UsageError(f"--set {item!r}: expected FIELD=VALUE")
            out[field] = schema.coerce_cli_value(type_name, field, raw)
        if text is not None:
            out[schema.MAIN_FIELD[type_name]] = text
        return out

    # -- write side ------------------------------------------------------------
    def write(
        self,
        type_name: str,
        text: str | None = None,
        *,
        data: dict | None = None,
        sets: Iterable[str] | None = None,
        tags: Iterable[str] = (),
        frames: Iterable[str] = (),
        importance: int = 5,
        visibility: str = "private",
        confidence: float = 1.0,
        forms: dict | None = None,
        session: str | None = None,
        provenance: dict | None = None,
    ) -> WriteResult:
        """Write a new memory; returns its URI, version 1 and journal seq."""
        from cortexctl.memory.types import check_confidence

        type_code(type_name)
        body = build_version(type_name, self._assemble(type_name, {}, text, data, sets), forms)
        tag_list = clean_tags(tags)
        frame_list = clean_frames(frames)
        check_importance(importance)
        check_visibility(visibility)
        conf = check_confidence(confidence, error=UsageError)
        if session is not None:
            check_name(session, "session")
        now = utcnow()
        id_ = new_id()
        head = head_row(
            id_=id_, body=body, actor=self.actor, visibility=visibility, tags=tag_list,
            frames=frame_list, importance=importance, session=session, version=1,
            created_at=now, updated_at=now, confidence=conf,
        )
        version = version_row(
            id_=id_, version=1, body=body, created_at=now, created_by=self.actor,
            confidence=conf, provenance=provenance or {"via": "write"},
        )
        warnings: list[str] = []
        vector = self._embed_one(body.search_text, warnings)
        last_key = 0
        with self._transaction() as con:
            records.insert_memories(con, [head], [version])
            seq = records.append_journal(con, [("write", now, self.actor, id_, write_payload(head, [version]))])
            search_sq.lex_add(con, [(id_, text_terms(body.search_text))])
            if vector is not None:
                last_key = semantic.store_or_warn(con, self.embedder, [id_], [1], vector, warnings)
            catch_up = self.embedder.remote or search_sq.maybe_pending(con, self.embedder.model)
        self._after_write(warnings, last_key, catch_up)
        return WriteResult(id=id_, version=1, seq=seq, embedded=bool(last_key), warnings=warnings)

    # -- embedding upkeep ---------------------------------------------------------------
    def _embed_one(self, text: str, warnings: list[str]):
        """The text's vector (as a one-item list of float32 bytes), or None when the embedder
        fails: the memory is stored all the same and waits for its embedding."""
        from cortexctl.errors import ConfigError, ProviderUnreachable

        embedder = self.embedder  # a misconfiguration (no model, say) fails here, before the write
        try:
            return [embedder.embed_bytes(text)]
        except (ProviderUnreachable, ConfigError) as exc:
            warnings.append(f"embedding pending: {exc.message}")
            return None

    def _after_write(self, warnings: list[str], last_key: int, catch_up: bool) -> None:
        """Embed a few memories that wait for a vector (after an outage, a change of model or
        a migration) and fold a grown delta; never fails the write."""
        from cortexctl.errors import CortexError

        if warnings:
            return  # the embedder just failed: leave the rest pending
        try:
            if catch_up:
                semantic.embed_pending(self, limit=semantic.LAZY_PENDING, warnings=[])
            if last_key:
                semantic.maybe_fold(self, last_key)
        except CortexError:
            pass

    def update(
        self,
        ref: str,
        text: str | None = None,
        *,
        data: dict | None = None,
        sets: Iterable[str] | None = None,
        confidence: float | None = None,
        forms: dict | None = None,
    ) -> WriteResult:
        """Write a new version from the current one with the given changes."""
        from cortexctl.memory.types import check_confidence

        conf = None if confidence is None else check_confidence(confidence, error=UsageError)
        parse_ref(ref)
        with self._transaction(existing=f"no memory {ref!r}") as con:
            head = self._resolve(con, ref)
            self._own(head)
            if head["tombstoned_at"] is not None:
                raise Tombstoned(
                    f"memory {head['id']} was forgotten on {iso(head['tombstoned_at'])} "
                    f"({head['tombstone_reason']}); it cannot be updated"
                )
            type_name = stored_type(head["type"])
            current = records.versions_of(con, head["id"], head["current_version"])[0]
            base = codec.decode(current["data"])
            body = build_version(type_name, self._assemble(type_name, base, text, data, sets), forms)
            new_conf = current["confidence"] if conf is None else conf
            if (
                body.data_bytes == current["data"]
                and new_conf == current["confidence"]
                and (not forms or (body.short, body.medium) == (current["short"], current["medium"]))
            ):
                return WriteResult(id=head["id"], version=head["current_version"], seq=None, changed=False)
            now = utcnow()
            n = head["current_version"] + 1
            version = version_row(
                id_=head["id"], version=n, body=body, created_at=now, created_by=self.actor,
                confidence=new_conf, provenance={"via": "update"},
            )
            records.insert_version(con, version)
            records.update_head(
                con, head["id"],
                {"current_version": n, "updated_at": now, "short": body.short, "medium": body.medium,
                 "confidence": new_conf},
            )
            payload = codec.encode({"id": head["id"], **_plain({"updated_at": now}), "version": _plain(version)})
            seq = records.append_journal(con, [("update", now, self.actor, head["id"], payload)])
            search_sq.lex_replace(con, head["id"], text_terms(body.search_text))
            search_sq.drop_vectors(con, head["id"])
            last_key = 0
            warnings: list[str] = []
            if not self.embedder.remote:  # local: embed inside the change; remote: after it, off the lock
                vector = [self.embedder.embed_bytes(body.search_text)]
                last_key = semantic.store_or_warn(con, self.embedder, [head["id"]], [n], vector, warnings)
        if self.embedder.remote:
            semantic.embed_pending(self, ids=[head["id"]], warnings=warnings)
        self._after_write(warnings, last_key, self.embedder.remote)
        return WriteResult(id=head["id"], version=n, seq=seq, embedded=not warnings, warnings=warnings)

    def _change_head(self, ref: str, change) -> HeadResult:
        with self._transaction(existing=f"no memory {ref!r}") as con:
            head = self._resolve(con, ref)
            self._own(head)
            fields = change(head)
            fields = {k: v for k, v in fields.items() if v != head[k]}
            seq = None
            if fields:
                now = utcnow()
                if "tombstoned_at" not in fields:
                    fields["updated_at"] = now
                records.update_head(con, head["id"], fields)
                head = {**head, **fields}
                kind = "tombstone" if "tombstoned_at" in fields else "update_head"
                payload = codec.encode({"id": head["id"], **_plain(fields)})
                seq = records.append_journal(con, [(kind, now, self.actor, head["id"], payload)])
        return HeadResult(
            id=head["id"], tags=list(head["tags"]), frames=list(head["frames"]),
            importance=head["importance"], visibility=head["visibility"],
            tombstone=_tombstone(head), seq=seq, changed=seq is not None,
        )

    def tag(self, ref: str, *, add: Iterable[str] = (), remove: Iterable[str] = ()) -> HeadResult:
        """Add and remove tags (removals first, then additions)."""
        add_l, remove_l = clean_tags(add), clean_tags(remove)
        parse_ref(ref)
        return self._change_head(
            ref, lambda h: {"tags": sorted((set(h["tags"]) - set(remove_l)) | set(add_l))}
        )

    def head(
        self,
        ref: str,
        *,
        importance: int | None = None,
        visibility: str | None = None,
        add_frames: Iterable[str] = (),
        remove_frames: Iterable[str] = (),
    ) -> HeadResult:
        """Change importance, visibility and frames; the data and versions stay as they are."""
        if importance is not None:
            check_importance(importance)
        if visibility is not None:
            check_visibility(visibility)
        add_f, remove_f = clean_frames(add_frames), clean_frames(remove_frames)
        parse_ref(ref)

        def change(h: dict) -> dict:
            fields: dict[str, Any] = {}
            if importance is not None:
                fields["importance"] = importance
            if visibility is not None:
                fields["visibility"] = visibility
            if add_f or remove_f:
                fields["frames"] = sorted((set(h["frames"]) - set(remove_f)) | set(add_f))
            return fields

        return self._change_head(ref, change)

    def forget(self, ref: str, *, reason: str) -> HeadResult:
        """Tombstone a memory: hidden from find, history kept, updates refused."""
        if not isinstance(reason, str) or not reason.strip():
            raise UsageError("forget needs a --reason")
        if len(reason) > MAX_REASON_CHARS:
            raise UsageError(f"--reason is longer than {MAX_REASON_CHARS} characters")
        parse_ref(ref)

        def change(h: dict) -> dict:
            if h["tombstoned_at"] is not None:
                raise Tombstoned(
                    f"memory {h['id']} was already forgotten on {iso(h['tombstoned_at'])} ({h['tombstone_reason']})"
                )
            return {"tombstone_reason": reason, "tombstoned_at": utcnow(), "tombstoned_by": self.actor}

        return self._change_head(ref, change)

    # -- read side -------------------------------------------------------------
    @contextmanager
    def _reading(self, missing: str | None = None) -> Iterator[Any]:
        """A read-only connection; with no store yet, NotFound(missing) or None."""
        try:
            with self.store.read() as con:
                yield con
        except NoStore:
            if missing is None:
                yield None
            else:
                raise NotFound(missing) from None

    def show(self, ref: str, *, version: int | None = None) -> Memory:
        """One memory at its current version, or at ``version``."""
        parsed = parse_ref(ref)
        if version is not None and parsed.version is not None and version != parsed.version:
            raise UsageError(f"{ref!r} names version {parsed.version} but --version says {version}")
        want = version if version is not None else parsed.version
        if want is not None and want < 1:
            raise UsageError("--version must be 1 or more")
        with self._reading(f"no memory {ref!r}") as con:
            head = self._resolve(con, ref)
            n = want or head["current_version"]
            rows = records.versions_of(con, head["id"], n)
            if not rows:
                raise NotFound(f"memory {head['id']} has no version {n} (latest is {head['current_version']})")
        return _memory(head, rows[0])

    def history(self, ref: str) -> list[VersionInfo]:
        """Every version of a memory, oldest first."""
        parse_ref(ref)
        with self._reading(f"no memory {ref!r}") as con:
            head = self._resolve(con, ref)
            rows = records.versions_of(con, head["id"])
        return [
            VersionInfo(
                id=r["id"], version=r["version"], type=stored_type(r["type"]),
                created_at=r["created_at"], created_by=r["created_by"], confidence=r["confidence"],
                hash=r["hash"].hex(), short=r["short"], current=r["version"] == head["current_version"],
            )
            for r in rows
        ]

    def find(self, query: FindQuery) -> list[FindHit]:
        """The best memories for the query by the three lanes (see ``engine/find.py``)."""
        return self.find_with_warnings(query)[0]

    def find_with_warnings(self, query: FindQuery) -> tuple[list[FindHit], list[str]]:
        """``find``, plus warnings about lanes that could not run (e.g. an unreachable endpoint)."""
        from cortexctl.engine import find as finder

        filters = dict(
            types=[type_code(t) for t in query.types],
            tags=clean_tags(query.tags),
            frames=[parse_frame_filter(f) for f in query.frames],
            include_tombstoned=query.include_tombstoned,
        )
        if isinstance(query.k, bool) or not isinstance(query.k, int) or not 1 <= query.k <= MAX_K:
            raise UsageError(f"-k must be from 1 to {MAX_K}")
        if query.form not in FORMS:
            raise UsageError(f"--form must be one of {', '.join(FORMS)}")
        if query.budget_tokens is not None and (
            isinstance(query.budget_tokens, bool) or not isinstance(query.budget_tokens, int)
            or not 1 <= query.budget_tokens <= 10_000_000
        ):
            raise UsageError("--budget-tokens must be a whole number from 1 to 10000000")
        if query.near is not None:
            if not isinstance(query.near, str) or not query.near.strip():
                raise UsageError("--near needs some text")
            if len(query.near.encode("utf-8", "surrogatepass")) > schema.MAX_TEXT_BYTES:
                raise UsageError(f"--near text is longer than {schema.MAX_TEXT_BYTES} bytes")
        return finder.run(self, query, filters)

    def reindex(self, *, rebuild: bool = False, progress=None) -> dict:
        """Embed what the active model has not embedded, drop other models' vectors, bring the index up to date."""
        return semantic.reindex(self, rebuild=rebuild, progress=progress)

    # -- feedback and context ------------------------------------------------------
    def attest(self, intent: str, outcome: str, cited: Iterable[str], *, reason: str | None = None):
        """Feed an intent's outcome back into the salience of the memories it cited (SPEC §6)."""
        from cortexctl.engine.attest import attest

        return attest(self, intent, outcome, cited, reason=reason)

    def compact(self, intent: str, step: str, budget_tokens: int, in_context: Iterable[str], *,
                load_bearing: Iterable[str] = (), checkpoint_dir: str | os.PathLike | None = None):
        """Split the memories in context into kept and stubs within a budget; store a checkpoint (SPEC §7)."""
        from cortexctl.engine.compact import compact

        return compact(self, intent, step, budget_tokens, in_context, load_bearing=load_bearing,
                       checkpoint_dir=checkpoint_dir)

    def load_checkpoint(self, intent: str, step: str):
        """The checkpoint record stored by compact for (intent, step), or NotFound."""
        from cortexctl.engine.compact import load

        return load(self, intent, step)

    # -- bulk and checks ----------------------------------------------------------
    def import_jsonl(self, source, **kwargs):
        from cortexctl.engine.transfer import import_jsonl

        return import_jsonl(self, source, **kwargs)

    def export_jsonl(self, sink, **kwargs) -> int:
        from cortexctl.engine.transfer import export_jsonl

        return export_jsonl(self, sink, **kwargs)

    def verify(self):
        from cortexctl.engine.verify import verify

        return verify(self)


def provenance_of(version: dict) -> dict:
    """A version's stored provenance; text that is not a JSON object means a damaged store."""
    from cortexctl.errors import IntegrityError

    try:
        value = json.loads(version["provenance"])
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise IntegrityError(
            f"memory {version['id']} version {version['version']} has unreadable provenance (damaged store)"
        )
    return value


def _tombstone(head: dict) -> Tombstone | None:
    if head["tombstoned_at"] is None:
        return None
    return Tombstone(head["tombstone_reason"], head["tombstoned_at"], head["tombstoned_by"])


def _memory(head: dict, v: dict) -> Memory:
    return Memory(
        id=head["id"], type=stored_type(v["type"]), version=v["version"],
        current_version=head["current_version"], data=codec.decode(v["data"]),
        short=v["short"], medium=v["medium"], tags=list(head["tags"]), frames=list(head["frames"]),
        importance=head["importance"], visibility=head["visibility"], actor=head["actor"],
        session=head["session"], created_at=head["created_at"], updated_at=head["updated_at"],
        version_created_at=v["created_at"], created_by=v["created_by"], confidence=v["confidence"],
        provenance=provenance_of(v), hash=v["hash"].hex(), forms_override=v["forms_override"],
        tombstone=_tombstone(head), access_count=head["access_count"], citations=head["citations"],
        last_used=head["last_used"],
    )


__all__ = ["Cortex"]
