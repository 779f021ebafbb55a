"""restore --mode merge into a store that holds data: a union that can be run twice.

- A memory the store does not have is added as it is in the bundle (head, every
  version, salience counters), with one ``write`` journal entry, as ``import`` does.
- A memory both have: versions are unioned by (id, version). When the bundle is
  ahead, its newer versions are added (one ``update`` entry each) and the head takes
  the bundle's fields (one ``update_head`` entry); a tombstone on either side stays.
- The same (id, version) with another hash is a conflict: reported, and the memory
  is left as it is here (none of the bundle's versions of it are added).
- A checkpoint the store does not have is added with a ``checkpoint`` entry.
- A grant the store does not have is added with a ``grant`` entry (and a ``revoke``
  entry when the bundle has it revoked); a grant both have that the bundle has
  revoked and this store has not is revoked here (a ``revoke`` entry). A revocation
  on either side stays.
- Learned weights stay this store's: they are learned from its own journal of
  attests (restore --mode replace takes the bundle's).
- Supersede links and valid times this store lacks are taken from the bundle. When
  the union would not hold together (each side superseded the same memory by one
  of its own, or linked two memories the other way round), the merge is refused
  (exit 7) before it commits, with nothing written.

Before anything is written the bundle is restored into a throwaway store and
verified there, so a bundle whose rows hash correctly but do not agree with each
other is refused (exit 7) with nothing written. Postings are made from each added
version's text; vectors are made by the active embedder afterwards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cortexctl.engine.rows import plain, write_payload
from cortexctl.errors import IntegrityError
from cortexctl.memory import codec
from cortexctl.store.interface import VALID_FIELDS

if TYPE_CHECKING:
    from cortexctl.engine.context import Context

# ``b`` below is an ``engine.bundle.Opened`` (a checked bundle) and ``result`` its ``RestoreResult``;
# bundle.py calls merge, so merge does not import it back.
Opened = RestoreResult = object

# Every state table a bundle carries, and how merge treats it. A table missing here fails
# tests/cli/test_backup.py: decide its merge rule when adding it.
MERGED_TABLES = {
    "heads": "union by id; the newer side's head fields, and the bundle's valid times and links this store lacks",
    "versions": "union by (id, version); a different hash is a conflict",
    "frames": "follows the heads",
    "journal": "entries appended for what changed",
    "lex_docs": "made from the added versions' text",
    "lex_postings": "made from the added versions' text",
    "vectors": "made by the active embedder after the merge",
    "learned_weights": "this store's stay",
    "checkpoints": "union by (actor, intent, step); this store's kept",
    "grants": "union by id; a revocation on either side stays",
}
BATCH = 2000
_HEAD_KEEP = ("id", "type", "actor", "session", "created_at", "current_version", "short", "medium", "confidence")


def _preflight(ctx: Context, b: Opened) -> None:
    """Restore the bundle into a throwaway store and verify it there; IntegrityError when it fails."""
    from cortexctl.engine.context import Context as Ctx
    from cortexctl.engine.verify import verify
    from cortexctl.store import open_storage, scratch

    def check(storage) -> None:
        report = verify(Ctx(ctx.settings, storage, clock=ctx.clock, embedder=ctx.embedder))
        if not report.ok:
            p = report.problems[0]
            raise IntegrityError(f"the bundle does not verify as a store ({p.check}: {p.message}); nothing written")

    with scratch.space(scratch.areas(ctx.storage), "merge") as tmp:
        open_storage(tmp / "store").restore_bundle(b.files, b.meta["schema_version"], check)


def merge(ctx: Context, b: Opened, result: RestoreResult, *, dry_run: bool) -> None:
    """Merge a checked bundle into the store (see the module docstring); fills ``result``."""
    _preflight(ctx, b)
    try:
        _merge(ctx, b, result, dry_run=dry_run)
    except _DryRun:
        pass


def _merge(ctx: Context, b: Opened, result: RestoreResult, *, dry_run: bool) -> None:
    from cortexctl.memory import schema
    from cortexctl.memory.terms import text_terms
    from cortexctl.memory.types import type_name

    with ctx.transaction() as tx:
        tx.attach_bundle(b.files)
        new, conflicts, ahead = tx.bundle_plan()
        clashing = {id_ for id_, _ in conflicts}
        ahead = [(id_, mine, theirs) for id_, mine, theirs in ahead if id_ not in clashing]
        missing_cps = tx.bundle_missing_checkpoints()
        have_grants = tx.all_grants()
        new_grants = [g for g in tx.bundle_grants() if g["id"] not in have_grants]
        revoked_there = [g for g in tx.bundle_grants() if g["id"] in have_grants and g["revoked_at"] is not None
                         and have_grants[g["id"]]["revoked_at"] is None]
        result.conflicts = [{"id": id_, "version": v, "kept": "local"} for id_, v in conflicts]
        result.added = {"memories": len(new), "versions": 0, "updated_memories": len(ahead),
                        "checkpoints": len(missing_cps), "grants": len(new_grants),
                        "revocations": len(revoked_there) + sum(g["revoked_at"] is not None for g in new_grants)}
        now = ctx.clock()
        for start in range(0, len(new), BATCH):
            chunk = new[start:start + BATCH]
            got = tx.bundle_memories(chunk, {})
            result.added["versions"] += sum(len(vs) for _h, vs in got)
            if dry_run:
                continue
            tx.insert_memories([h for h, _ in got], [v for _, vs in got for v in vs])
            tx.add_terms([(h["id"], text_terms(_text(vs[-1], schema, type_name))) for h, vs in got])
            tx.append_journal([("write", now, ctx.actor, h["id"], write_payload(h, vs)) for h, vs in got])
        for start in range(0, len(ahead), BATCH):
            chunk = ahead[start:start + BATCH]
            mine = tx.heads_of([i for i, _, _ in chunk])
            got = tx.bundle_memories([i for i, _, _ in chunk], {i: m for i, m, _ in chunk})
            result.added["versions"] += sum(len(vs) for _h, vs in got)
            if dry_run:
                continue
            for theirs, versions in got:
                _advance(tx, ctx, now, mine[theirs["id"]], theirs, versions)
                tx.replace_terms(theirs["id"], text_terms(_text(versions[-1], schema, type_name)))
                tx.drop_vectors(theirs["id"])
        if not dry_run:
            _merge_links(tx, ctx, now)
            for row in missing_cps:
                seq = tx.append_journal([("checkpoint", row["created_at"], row["actor"],
                                          f"{row['intent']}/{row['step']}", row["record"])])
                tx.put_checkpoint({**row, "seq": seq})
            _merge_grants(tx, new_grants, revoked_there)
            _check_links(tx)
        if dry_run:
            raise _DryRun()


def _check_links(tx) -> None:
    """The merged supersede links and valid times, checked before the transaction commits: each side
    may have superseded the same memory by a memory of its own (or linked two memories the other way
    round), and the union of both is not a store that verifies. Refused with nothing written."""
    from cortexctl.engine.verify import valid_problems

    problems = valid_problems(tx.valid_links())
    if problems:
        id_, message = problems[0]
        raise IntegrityError(f"the bundle's valid times or supersede links clash with this store's"
                             f" (memory {id_}: {message}); nothing written")


def _merge_links(tx, ctx: Context, now) -> None:
    """The bundle's valid times and supersede links that this store's memories lack (a supersede made on
    the other side: the new memory came in whole, the old one has no new version to bring its head
    fields); each an ``update_head``. A link or time this store holds stays as it is."""
    links = tx.bundle_links()
    mine = tx.heads_of([r[0] for r in links]) if links else {}
    for id_, *theirs in links:
        head = mine.get(id_)
        if head is None:
            continue
        fields = {k: v for k, v in zip(VALID_FIELDS, theirs) if v is not None and head[k] is None}
        if fields:
            tx.update_head(id_, fields)
            tx.append_journal([("update_head", now, ctx.actor, id_, codec.encode({"id": id_, **plain(fields)}))])


def _merge_grants(tx, new: list[dict], revoked: list[dict]) -> None:
    """Add the bundle's grants this store lacks and the revocations it has not seen, each with
    its journal entry, stamped with the grant's (or the revocation's) own time and actor."""
    from cortexctl.engine.grants import grant_payload, revoke_payload

    for g in new:
        tx.insert_grant({**g, "revoked_at": None, "revoked_by": None})
        tx.append_journal([("grant", g["created_at"], g["granter"], g["id"], grant_payload(g))])
    for g in [*(g for g in new if g["revoked_at"] is not None), *revoked]:
        tx.revoke_grant(g["id"], at=g["revoked_at"], by=g["revoked_by"])
        tx.append_journal([("revoke", g["revoked_at"], g["revoked_by"], g["id"],
                            revoke_payload(g["id"], g["revoked_at"], g["revoked_by"]))])


class _DryRun(Exception):
    """Rolls the transaction back after a dry run counted what it would do."""


def _text(version: dict, schema, type_name) -> str:
    return schema.search_text(type_name(version["type"]), codec.decode(version["data"]))


def _advance(tx, ctx: Context, now, mine: dict, theirs: dict, versions: list[dict]) -> None:
    """Add the bundle's newer versions of a memory and take its head fields (tombstones stay)."""
    for v in versions:
        tx.insert_version(v)
        payload = codec.encode({"id": v["id"], **plain({"updated_at": v["created_at"]}), "version": plain(v)})
        tx.append_journal([("update", now, ctx.actor, v["id"], payload)])
    top = versions[-1]
    moved = {"current_version": top["version"], "updated_at": top["created_at"], "short": top["short"],
             "medium": top["medium"], "confidence": top["confidence"]}
    tx.update_head(mine["id"], moved)
    state = {**mine, **moved}
    fields = {k: theirs[k] for k in theirs if k not in _HEAD_KEEP and theirs[k] != state[k]}
    if mine["tombstoned_at"] is not None:  # forgotten here: stays forgotten
        for k in ("tombstone_reason", "tombstoned_at", "tombstoned_by"):
            fields.pop(k, None)
    for k in VALID_FIELDS:  # a valid time or link set here stays (a bundle from before them has none)
        if fields.get(k, 0) is None:
            fields.pop(k)
    if fields:
        tx.update_head(mine["id"], fields)
        kind = "tombstone" if "tombstoned_at" in fields else "update_head"
        tx.append_journal([(kind, now, ctx.actor, mine["id"], codec.encode({"id": mine["id"], **plain(fields)}))])


__all__ = ["merge", "MERGED_TABLES"]
