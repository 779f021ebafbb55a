"""Writing, changing and reading memories: write, update, tag, head, forget, show, history,
and checking a find query.

Every function validates everything first, then opens the store for as short a
time as it can (read-only where it only reads) and makes its change and its
journal entry in one transaction, so nothing is ever half-written. Each takes
the ``Context`` it runs in.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

from cortexctl.engine import semantic, validtime
from cortexctl.engine.context import Context
from cortexctl.engine.results import FindQuery, HeadResult, Memory, VersionInfo, WriteResult, iso
from cortexctl.engine.refs import check_owner, resolve
from cortexctl.engine.rows import (
    clean_frames,
    clean_tags,
    head_row,
    plain,
    provenance_of,
    tombstone_of,
    version_row,
    write_payload,
)
from cortexctl.errors import InvalidData, NotForgotten, NotFound, Tombstoned, UsageError
from cortexctl.memory import codec, schema
from cortexctl.memory.forms import FORMS
from cortexctl.memory.ids import memory_uri, new_id, parse_ref
from cortexctl.memory.record import build_version
from cortexctl.memory.terms import text_terms, words
from cortexctl.memory.types import (
    check_importance,
    check_name,
    check_visibility,
    parse_frame_filter,
    type_code,
    type_name as stored_type,
)
from cortexctl.store.interface import Filters, Tx

MAX_REASON_CHARS = 1000
MAX_K = 10_000
MAX_BUDGET_TOKENS = 10_000_000


def assemble(type_name: str, base: dict, text: str | None, data: dict | None, sets: Iterable[str] | None) -> dict:
    """Merge, in order: base data, ``data`` fields, ``sets`` (FIELD=VALUE), then ``text``."""
    out = {k: v for k, v in base.items() if k != "schema_version"}
    if data is not None:
        if not isinstance(data, dict):
            raise InvalidData(f"{type_name}: data must be a JSON object", field="data")
        out.update(data)
    for item in sets or ():
        field, sep, raw = item.partition("=")
        if not sep or not field:
            raise UsageError(f"set {item!r}: expected FIELD=VALUE", field="set")  # one of ``sets``; its flag is --set
        out[field] = schema.coerce_cli_value(type_name, field, raw)
    if text is not None:
        out[schema.MAIN_FIELD[type_name]] = text
    return out


# -- write side ------------------------------------------------------------------------------
def write(
    ctx: Context,
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
    dedupe: bool = False,
    supersedes: str | None = None,
) -> WriteResult:
    """Write a new memory; returns its URI, version 1 and journal seq.

    When a live memory of the actor has the same type and the same text (words compared
    in lower case), the result warns and names it; with ``dedupe`` it is returned instead
    and nothing is written. ``valid_from``/``valid_to`` among ``sets`` (or ``data``) are its valid
    time (head fields, see ``engine/validtime.py``); ``supersedes``: a memory of the actor this one
    replaces, in the same transaction (its interval ends where this one's begins: now by default)."""
    from cortexctl.memory.types import check_confidence

    type_code(type_name)
    data, sets, times = _valid_times(data, sets)
    body = build_version(type_name, assemble(type_name, {}, text, data, sets), forms)
    tag_list = clean_tags(tags)
    frame_list = clean_frames(frames)
    check_importance(importance)
    check_visibility(visibility)
    conf = check_confidence(confidence, error=UsageError)
    if session is not None:
        check_name(session, "session")
    if supersedes is not None:
        parse_ref(supersedes)
    now = ctx.clock()
    if supersedes is not None:
        times.setdefault("valid_from", now)
    validtime.check_interval(times.get("valid_from"), times.get("valid_to"))
    id_ = new_id()
    head = head_row(
        id_=id_, body=body, actor=ctx.actor, visibility=visibility, tags=tag_list,
        frames=frame_list, importance=importance, session=session, version=1,
        created_at=now, updated_at=now, confidence=conf, **times,
    )
    version = version_row(
        id_=id_, version=1, body=body, created_at=now, created_by=ctx.actor,
        confidence=conf, provenance=provenance or {"via": "write"},
    )
    warnings: list[str] = []
    vector = _embed_one(ctx, body.search_text, warnings)
    last_key = 0
    term_ids = text_terms(body.search_text)
    payload = write_payload(head, [version])  # before the writer lock: less of the turn others wait for
    with ctx.transaction(existing=supersedes is not None) as tx:
        old = None
        if supersedes is not None:
            old = resolve(tx, ctx.viewer, supersedes)
            check_owner(old, ctx.actor)
            validtime.check_old(tx, old, None, head["valid_from"])
            head["supersedes"] = old["id"]
            payload = write_payload(head, [version])
        twin = _twin(tx, ctx.actor, body, term_ids)
        if twin is not None and dedupe:
            return WriteResult(id=twin["id"], version=twin["current_version"], seq=None, changed=False,
                               warnings=[f"{type_name} already stored as {memory_uri(twin['id'])}: nothing written"])
        if twin is not None:
            warnings.append(f"the same {type_name} is already stored as {memory_uri(twin['id'])} "
                            "(write --dedupe returns it instead of writing another)")
        tx.insert_memories([head], [version])
        seq = tx.append_journal([("write", now, ctx.actor, id_, payload)])
        if old is not None:
            validtime.close_old(ctx, tx, old, id_, head["valid_from"], now)
        tx.add_terms([(id_, term_ids)])
        if vector is not None:
            last_key = semantic.store_or_warn(tx, ctx.embedder, [id_], [1], vector, warnings)
        catch_up = ctx.embedder.remote or tx.maybe_pending(ctx.embedder.model)
    ctx.after(lambda: _after_write(ctx, warnings, last_key, catch_up))
    return WriteResult(id=id_, version=1, seq=seq, embedded=bool(last_key), warnings=warnings)


def _valid_times(data: dict | None, sets: Iterable[str] | None) -> tuple[dict | None, list[str], dict]:
    """(data, sets) without the valid times, and the valid times given (``sets`` win over ``data``):
    head fields, not data (``engine/validtime.py``)."""
    sets, times = validtime.split_sets(sets)
    if isinstance(data, dict) and any(k in data for k in validtime.TIME_FIELDS):
        given = {k: validtime.parse_valid_time(k, data[k]) for k in validtime.TIME_FIELDS if k in data}
        data = {k: v for k, v in data.items() if k not in validtime.TIME_FIELDS}
        times = {**given, **times}
    return data, sets, times


def _twin(tx: Tx, actor: str, body, term_ids: list[int]) -> dict | None:
    """A live memory of ``actor`` with the same type and text as ``body``, or None."""
    if not term_ids:
        return None
    ids = tx.text_twins(actor, body.type_code, len(term_ids), min(term_ids))
    if not ids:
        return None
    want = words(body.search_text)
    kind = stored_type(body.type_code)
    current = tx.current_versions(ids)
    for id_ in ids:
        v = current.get(id_)
        if v is not None and words(schema.search_text(kind, codec.decode(v["data"]))) == want:
            return {"id": id_, "current_version": v["version"]}
    return None


def _embed_one(ctx: Context, text: str, warnings: list[str]):
    """The text's vector (as a one-item list of float32 bytes), or None when the embedder
    fails: the memory is stored all the same and waits for its embedding."""
    from cortexctl.errors import ConfigError, ProviderUnreachable

    embedder = ctx.embedder  # a misconfiguration (no model, say) fails here, before the write
    try:
        return [embedder.embed_bytes(text)]
    except (ProviderUnreachable, ConfigError) as exc:
        warnings.append(f"embedding pending: {exc.message}")
        return None


def _after_write(ctx: Context, warnings: list[str], last_key: int, catch_up: bool) -> None:
    """Embed a few memories that wait for a vector (after an outage, a change of model or
    a migration) and fold the unindexed vectors into the index once they are many; never fails the write."""
    from cortexctl.errors import CortexError

    if warnings:
        return  # the embedder just failed: leave the rest pending
    try:
        if catch_up:
            semantic.embed_pending(ctx, limit=semantic.LAZY_PENDING, warnings=[])
        if last_key:
            ctx.storage.after_vectors(ctx.embedder.model, last_key)
    except CortexError:
        pass


def update(
    ctx: Context,
    ref: str,
    text: str | None = None,
    *,
    data: dict | None = None,
    sets: Iterable[str] | None = None,
    confidence: float | None = None,
    forms: dict | None = None,
    provenance: dict | None = None,
    supersede: bool = False,
) -> WriteResult:
    """Write a new version from the current one with the given changes. ``valid_from``/``valid_to``
    among ``sets`` (or ``data``) change the valid time alone (an ``update_head``, no new version
    when nothing else changes). ``supersede``: write a new memory instead (the same type, tags,
    frames, importance, visibility and session; the current data with the changes) that
    supersedes this one (``engine/validtime.py``)."""
    from cortexctl.memory.types import check_confidence

    conf = None if confidence is None else check_confidence(confidence, error=UsageError)
    data, sets, times = _valid_times(data, sets)
    parse_ref(ref)
    if supersede:
        ctx.embedder  # built before the writer lock, not in the turn other writers wait for
        return _supersede_by_update(ctx, ref, text, data, sets, times, conf, forms, provenance)

    def change(tx: Tx, head: dict, type_name: str, current: dict):
        base = codec.decode(current["data"])
        body = build_version(type_name, assemble(type_name, base, text, data, sets), forms)
        return body, (current["confidence"] if conf is None else conf), bool(forms)

    return _new_version(ctx, ref, change, provenance or {"via": "update"}, times=times)


def revert(ctx: Context, ref: str, *, to: int) -> WriteResult:
    """Write a new version equal to version ``to`` (its data, forms and confidence), journaled as
    an ``update`` whose provenance says ``{"via": "revert", "reverted_to": to}``; every version is
    kept and the memory's counters and the learned weights are not touched. When the current
    version already equals it, nothing is written (``changed`` false)."""
    if isinstance(to, bool) or not isinstance(to, int) or to < 1:
        raise UsageError(f"to must be a version number, a whole number from 1 (got {to!r})", field="to")
    parse_ref(ref)

    def change(tx: Tx, head: dict, type_name: str, current: dict):
        rows = tx.versions(head["id"], to)
        if not rows:
            raise NotFound(f"memory {head['id']} has no version {to} (latest is {head['current_version']})")
        old = rows[0]
        forms = {"short": old["short"], "medium": old["medium"]} if old["forms_override"] else None
        return build_version(type_name, codec.decode(old["data"]), forms), old["confidence"], True

    return _new_version(ctx, ref, change, {"via": "revert", "reverted_to": to})


def _new_version(ctx: Context, ref: str, change, provenance: dict, *, times: dict | None = None) -> WriteResult:
    """The path every new version of an existing memory takes (update, revert): the memory
    resolved for the actor, its owner and tombstone checked, then ``change(tx, head, type name,
    current version)`` gives (body, confidence, whether its forms count); a body, confidence and
    (when they count) forms equal to the current version's write nothing (``changed`` false).
    Otherwise the version, the head, the journal's ``update`` entry, the terms and the vector
    change in one transaction. ``times``: valid times to set too (``validtime.set_times``, an
    ``update_head`` entry; alone when the version would not change)."""
    times = times or {}
    ctx.embedder  # built before the writer lock, not in the turn other writers wait for
    with ctx.transaction(existing=True) as tx:
        head = resolve(tx, ctx.viewer, ref)
        check_owner(head, ctx.actor)
        if head["tombstoned_at"] is not None:
            raise Tombstoned(
                f"memory {head['id']} was forgotten on {iso(head['tombstoned_at'])} "
                f"({head['tombstone_reason']}); it cannot be updated"
            )
        type_name = stored_type(head["type"])
        current = tx.versions(head["id"], head["current_version"])[0]
        body, new_conf, forms_count = change(tx, head, type_name, current)
        now = ctx.clock()
        if (
            body.data_bytes == current["data"]
            and new_conf == current["confidence"]
            and (not forms_count or (body.short, body.medium) == (current["short"], current["medium"]))
        ):
            seq = validtime.set_times(ctx, tx, head, times, now)
            return WriteResult(id=head["id"], version=head["current_version"], seq=seq, changed=seq is not None)
        if times:
            merged = {**head, **times}
            validtime.check_interval(merged["valid_from"], merged["valid_to"])
        n = head["current_version"] + 1
        version = version_row(
            id_=head["id"], version=n, body=body, created_at=now, created_by=ctx.actor,
            confidence=new_conf, provenance=provenance,
        )
        tx.insert_version(version)
        tx.update_head(
            head["id"],
            {"current_version": n, "updated_at": now, "short": body.short, "medium": body.medium,
             "confidence": new_conf},
        )
        payload = codec.encode({"id": head["id"], **plain({"updated_at": now}), "version": plain(version)})
        seq = tx.append_journal([("update", now, ctx.actor, head["id"], payload)])
        validtime.set_times(ctx, tx, {**head, "updated_at": now}, times, now)
        tx.replace_terms(head["id"], text_terms(body.search_text))
        tx.drop_vectors(head["id"])
        last_key = 0
        warnings: list[str] = []
        if not ctx.embedder.remote:  # local: embed inside the change; remote: after it, off the lock
            vector = [ctx.embedder.embed_bytes(body.search_text)]
            last_key = semantic.store_or_warn(tx, ctx.embedder, [head["id"]], [n], vector, warnings)
    if ctx.embedder.remote:  # after the commit (of the group, inside one: ``Context.after``)
        ctx.after(lambda: semantic.embed_pending(ctx, ids=[head["id"]], warnings=warnings))
    remote = ctx.embedder.remote
    ctx.after(lambda: _after_write(ctx, warnings, last_key, remote))
    return WriteResult(id=head["id"], version=n, seq=seq, embedded=not warnings, warnings=warnings)


def _supersede_by_update(ctx: Context, ref: str, text, data, sets, times: dict, conf, forms, provenance) -> WriteResult:
    """``update --supersede``: a new memory from the current one with the changes, superseding it."""
    with ctx.transaction(existing=True) as tx:
        old = resolve(tx, ctx.viewer, ref)
        check_owner(old, ctx.actor)
        now = ctx.clock()
        valid_from = times.get("valid_from") or now
        validtime.check_old(tx, old, None, valid_from)
        validtime.check_interval(valid_from, times.get("valid_to"))
        type_name = stored_type(old["type"])
        current = tx.versions(old["id"], old["current_version"])[0]
        body = build_version(type_name, assemble(type_name, codec.decode(current["data"]), text, data, sets), forms)
        new_conf = current["confidence"] if conf is None else conf
        id_ = new_id()
        head = head_row(
            id_=id_, body=body, actor=ctx.actor, visibility=old["visibility"], tags=list(old["tags"]),
            frames=list(old["frames"]), importance=old["importance"], session=old["session"], version=1,
            created_at=now, updated_at=now, confidence=new_conf, valid_from=valid_from,
            valid_to=times.get("valid_to"), supersedes=old["id"],
        )
        version = version_row(id_=id_, version=1, body=body, created_at=now, created_by=ctx.actor,
                              confidence=new_conf, provenance=provenance or {"via": "update", "supersedes": old["id"]})
        tx.insert_memories([head], [version])
        seq = tx.append_journal([("write", now, ctx.actor, id_, write_payload(head, [version]))])
        validtime.close_old(ctx, tx, old, id_, valid_from, now)
        tx.add_terms([(id_, text_terms(body.search_text))])
        last_key = 0
        warnings: list[str] = []
        if not ctx.embedder.remote:
            vector = [ctx.embedder.embed_bytes(body.search_text)]
            last_key = semantic.store_or_warn(tx, ctx.embedder, [id_], [1], vector, warnings)
    if ctx.embedder.remote:  # after the commit (of the group, inside one: ``Context.after``)
        ctx.after(lambda: semantic.embed_pending(ctx, ids=[id_], warnings=warnings))
    remote = ctx.embedder.remote
    ctx.after(lambda: _after_write(ctx, warnings, last_key, remote))
    return WriteResult(id=id_, version=1, seq=seq, embedded=not warnings, warnings=warnings, supersedes=old["id"])


def _change_head(ctx: Context, ref: str, change) -> HeadResult:
    with ctx.transaction(existing=True) as tx:
        head = resolve(tx, ctx.viewer, ref)
        check_owner(head, ctx.actor)
        fields = change(head)
        fields = {k: v for k, v in fields.items() if v != head[k]}
        seq = None
        if fields:
            now = ctx.clock()
            if "tombstoned_at" not in fields:
                fields["updated_at"] = now
            tx.update_head(head["id"], fields)
            head = {**head, **fields}
            kind = ("update_head" if "tombstoned_at" not in fields
                    else "tombstone" if fields["tombstoned_at"] is not None else "unforget")
            payload = codec.encode({"id": head["id"], **plain(fields)})
            seq = tx.append_journal([(kind, now, ctx.actor, head["id"], payload)])
    return HeadResult(
        id=head["id"], tags=list(head["tags"]), frames=list(head["frames"]),
        importance=head["importance"], visibility=head["visibility"],
        tombstone=tombstone_of(head), seq=seq, changed=seq is not None,
    )


def tag(ctx: Context, ref: str, *, add: Iterable[str] = (), remove: Iterable[str] = ()) -> HeadResult:
    """Add and remove tags (removals first, then additions)."""
    add_l, remove_l = clean_tags(add), clean_tags(remove)
    parse_ref(ref)
    return _change_head(ctx, ref, lambda h: {"tags": sorted((set(h["tags"]) - set(remove_l)) | set(add_l))})


def head(
    ctx: Context,
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

    return _change_head(ctx, ref, change)


def forget(ctx: Context, ref: str, *, reason: str) -> HeadResult:
    """Tombstone a memory: hidden from find, history kept, updates refused."""
    if not isinstance(reason, str) or not reason.strip():
        raise UsageError("forget needs a reason", field="reason")
    if len(reason) > MAX_REASON_CHARS:
        raise UsageError(f"reason is longer than {MAX_REASON_CHARS} characters ({len(reason)} given)", field="reason")
    parse_ref(ref)

    def change(h: dict) -> dict:
        if h["tombstoned_at"] is not None:
            raise Tombstoned(
                f"memory {h['id']} was already forgotten on {iso(h['tombstoned_at'])} ({h['tombstone_reason']})"
            )
        return {"tombstone_reason": reason, "tombstoned_at": ctx.clock(), "tombstoned_by": ctx.actor}

    return _change_head(ctx, ref, change)


def unforget(ctx: Context, ref: str) -> HeadResult:
    """Undo forget: the tombstone is cleared and the memory is found again with the salience
    it had (its counters are kept while it is forgotten). Journaled as ``unforget``."""
    parse_ref(ref)

    def change(h: dict) -> dict:
        if h["tombstoned_at"] is None:
            raise NotForgotten(f"memory {h['id']} is not forgotten")
        return {"tombstone_reason": None, "tombstoned_at": None, "tombstoned_by": None}

    return _change_head(ctx, ref, change)


# -- read side ----------------------------------------------------------------------------------
def wanted_version(ref: str, version: int | None) -> int | None:
    """The version ``show`` is asked for, by ``version`` or by a version URI (None: the current one)."""
    parsed = parse_ref(ref)
    if version is not None and parsed.version is not None and version != parsed.version:
        raise UsageError(f"version {version} disagrees with {ref!r}, which names version {parsed.version}",
                         field="version")
    want = version if version is not None else parsed.version
    if want is not None and want < 1:
        raise UsageError(f"version must be 1 or more (got {want})", field="version")
    return want


def show(ctx: Context, ref: str, *, version: int | None = None) -> Memory:
    """One memory at its current version, or at ``version``."""
    want = wanted_version(ref, version)
    with ctx.reading() as tx:
        head = resolve(tx, ctx.viewer, ref)
        n = want or head["current_version"]
        rows = tx.versions(head["id"], n)
        if not rows:
            raise NotFound(f"memory {head['id']} has no version {n} (latest is {head['current_version']})")
    return memory_of(head, rows[0])


def history(ctx: Context, ref: str) -> list[VersionInfo]:
    """Every version of a memory, oldest first."""
    parse_ref(ref)
    with ctx.reading() as tx:
        head = resolve(tx, ctx.viewer, ref)
        rows = tx.versions(head["id"])
    return [
        VersionInfo(
            id=r["id"], version=r["version"], type=stored_type(r["type"]),
            created_at=r["created_at"], created_by=r["created_by"], confidence=r["confidence"],
            hash=r["hash"].hex(), short=r["short"], current=r["version"] == head["current_version"],
        )
        for r in rows
    ]


def find_filters(ctx: Context, query: FindQuery) -> Filters:
    """Check a find query; its filters for the store."""
    types = tuple(type_code(t) for t in query.types)
    tags = tuple(clean_tags(query.tags))
    if query.summaries:  # sessions.SUMMARY_TAG on events
        types, tags = (type_code("event"),), tuple(sorted({*tags, "session-summary"}))
    if query.session is not None:
        check_name(query.session, "session")
    valid_at = query.valid_at
    if valid_at is not None and not isinstance(valid_at, datetime):
        from cortexctl.engine import when

        valid_at = when.parse(valid_at, ctx.clock(), field="valid_at")
    filters = Filters(
        actor=ctx.actor,
        types=types,
        tags=tags,
        frames=tuple(parse_frame_filter(f) for f in query.frames),
        include_tombstoned=query.include_tombstoned,
        session=query.session,
        valid_at=valid_at,
        # by default, what has ended (superseded, or past its valid_to) is left out; --valid-at asks instead
        ended_by=None if query.include_superseded or valid_at is not None else ctx.clock(),
    )
    if isinstance(query.k, bool) or not isinstance(query.k, int) or not 1 <= query.k <= MAX_K:
        raise UsageError(f"k must be from 1 to {MAX_K} (got {query.k!r})", field="k")
    if query.form not in FORMS:
        raise UsageError(f"form must be one of {', '.join(FORMS)} (got {query.form!r})", field="form")
    if query.budget_tokens is not None and (
        isinstance(query.budget_tokens, bool) or not isinstance(query.budget_tokens, int)
        or not 1 <= query.budget_tokens <= MAX_BUDGET_TOKENS
    ):
        raise UsageError(f"budget_tokens must be a whole number from 1 to {MAX_BUDGET_TOKENS} "
                         f"(got {query.budget_tokens!r})", field="budget_tokens")
    if query.near is not None:
        if not isinstance(query.near, str) or not query.near.strip():
            raise UsageError("near needs some text", field="near")
        if len(query.near.encode("utf-8", "surrogatepass")) > schema.MAX_TEXT_BYTES:
            raise UsageError(f"near text is longer than {schema.MAX_TEXT_BYTES} bytes", field="near")
    return filters


def memory_of(head: dict, v: dict) -> Memory:
    """A memory as ``show`` returns it: the head with version ``v``."""
    return Memory(
        id=head["id"], type=stored_type(v["type"]), version=v["version"],
        current_version=head["current_version"], data=codec.decode(v["data"]),
        short=v["short"], medium=v["medium"], tags=list(head["tags"]), frames=list(head["frames"]),
        importance=head["importance"], visibility=head["visibility"], actor=head["actor"],
        session=head["session"], created_at=head["created_at"], updated_at=head["updated_at"],
        version_created_at=v["created_at"], created_by=v["created_by"], confidence=v["confidence"],
        provenance=provenance_of(v), hash=v["hash"].hex(), forms_override=v["forms_override"],
        tombstone=tombstone_of(head), access_count=head["access_count"], citations=head["citations"],
        last_used=head["last_used"], valid_from=head["valid_from"], valid_to=head["valid_to"],
        supersedes=head["supersedes"], superseded_by=head["superseded_by"],
    )
