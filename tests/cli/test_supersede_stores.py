"""Valid times and supersede links in what outlives one command: bundles (a schema-5 bundle keeps them, a
schema-4 bundle from before them still restores and merges), stores from before them (migrated), and the
search snapshot and its delta (default find hides what a supersede ended, whichever answers)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from cortexctl import Cortex
from cortexctl.engine.results import FindQuery
from cortexctl.errors import IntegrityError
from cortexctl.store import migrations, snapshot
from tests import tamper
from tests.conftest import assert_store_verifies

META, MANIFEST = "bundle-meta.json", "manifest.json"
VALID_COLUMNS = ("valid_from", "valid_to", "supersedes", "superseded_by")


def _linked(cx: Cortex) -> tuple[str, str]:
    old = cx.write("fact", "The deploy key rotates monthly", tags=["ops"]).id
    new = cx.write("fact", "The deploy key rotates weekly", tags=["ops"], supersedes=old).id
    return old, new


def _found(cx: Cortex, **query) -> set[str]:
    return {h.id for h in cx.find(FindQuery(**query))}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# What each schema version added to a bundle, newest first: a bundle of an older one lacks them.
_ADDED = {5: ((), ("heads", VALID_COLUMNS)), 4: (("grants",), None),
          3: (("checkpoints", "learned_weights"), ("heads", ("confidence",)))}


def _as_schema(bundle: Path, version: int) -> None:
    """Make a bundle what a cortexctl of schema ``version`` wrote: without the tables and columns later
    versions added (the manifest and meta sealed again over the changed members)."""
    manifest = json.loads((bundle / MANIFEST).read_bytes())
    meta = json.loads((bundle / META).read_bytes())
    for later in (v for v in _ADDED if v > version):
        tables, cols = _ADDED[later]
        for table in tables:
            (bundle / f"{table}.parquet").unlink()
            manifest["members"] = [m for m in manifest["members"] if m["table"] != table]
            meta["counts"].pop(table)
        if cols is not None:
            member = bundle / f"{cols[0]}.parquet"
            tmp = member.with_name("member.tmp")
            tamper.rewrite_member(member, "; ".join(f"ALTER TABLE t DROP COLUMN {c}" for c in cols[1]), to=tmp)
            tmp.replace(member)
    for m in manifest["members"]:
        m["bytes"], m["sha256"] = (bundle / m["name"]).stat().st_size, _sha(bundle / m["name"])
    (bundle / MANIFEST).write_bytes(json.dumps(manifest, indent=2, sort_keys=True).encode() + b"\n")
    meta["schema_version"], meta["manifest_sha256"] = version, _sha(bundle / MANIFEST)
    (bundle / META).write_bytes(json.dumps(meta, indent=2, sort_keys=True).encode() + b"\n")


def test_a_bundle_keeps_valid_times_and_links_through_restore(tmp_path):
    cx = Cortex(store=tmp_path / "source", actor="alice")
    old, new = _linked(cx)
    bundle = Path(cx.backup(dest=tmp_path / "bundles").path)
    back = Cortex(store=tmp_path / "restored", actor="alice")
    back.restore(bundle, mode="replace", force=True)
    assert back.show(old).superseded_by == new and back.show(new).supersedes == old
    assert back.show(old).valid_to == back.show(new).valid_from == cx.show(new).valid_from
    assert _found(back) == {new}
    assert_store_verifies(tmp_path / "restored")


def test_a_bundle_of_schema_4_still_restores_and_merges(tmp_path):
    cx = Cortex(store=tmp_path / "source", actor="alice")
    kept = cx.write("fact", "Staging is db-stg-2").id
    cx.update(kept, "Staging is db-stg-3")
    bundle = Path(cx.backup(dest=tmp_path / "bundles").path)
    _as_schema(bundle, 4)
    cx.verify_bundle(bundle)  # raises when the bundle does not hold together

    replaced = Cortex(store=tmp_path / "replaced", actor="alice")
    replaced.restore(bundle, mode="replace", force=True)
    assert replaced.show(kept).valid_from is None and replaced.show(kept).superseded_by is None
    assert_store_verifies(tmp_path / "replaced")

    merged = Cortex(store=tmp_path / "merged", actor="alice")
    old, new = _linked(merged)
    result = merged.restore(bundle, mode="merge")
    assert result.added["memories"] == 1
    assert merged.show(kept).data["statement"] == "Staging is db-stg-3"
    assert merged.show(old).superseded_by == new  # this store's links stay
    assert _found(merged) == {kept, new}
    assert_store_verifies(tmp_path / "merged")


def test_a_bundle_of_schema_2_merges_as_it_restores(tmp_path):
    """A bundle from before checkpoints, learned weights, grants and a head's confidence: merge read
    tables it lacks (exit 70: bundle_checkpoints does not exist); it merges now, and a head's
    confidence is its current version's, as the migration that added it fills a restored store."""
    cx = Cortex(store=tmp_path / "source", actor="alice")
    kept = cx.write("fact", "Staging is db-stg-2", confidence=0.7).id
    bundle = Path(cx.backup(dest=tmp_path / "bundles").path)
    _as_schema(bundle, 2)
    cx.verify_bundle(bundle)
    assert cx.drill_bundle(bundle).problems == []
    replaced = Cortex(store=tmp_path / "replaced", actor="alice")
    replaced.restore(bundle, mode="replace", force=True)
    merged = Cortex(store=tmp_path / "merged", actor="alice")
    merged.write("fact", "the target store's own")
    assert merged.restore(bundle, mode="merge").added["memories"] == 1
    assert merged.show(kept).confidence == replaced.show(kept).confidence == 0.7
    assert_store_verifies(tmp_path / "merged")


def test_a_store_from_schema_4_is_migrated_and_its_memories_hold_forever(tmp_path):
    store = tmp_path / "store"
    cx = Cortex(store=store, actor="alice")
    before = cx.write("fact", "Written before valid time existed").id
    tamper.rewind_schema(store, 4)
    assert tamper.schema(store)[0] == "4"
    cx = Cortex(store=store, actor="alice")
    assert cx.show(before).valid_from is None and cx.show(before).valid_to is None
    assert tamper.schema(store)[0] == str(migrations.latest())
    after = cx.write("fact", "Written after", supersedes=before).id
    assert _found(cx) == {after} and _found(cx, include_superseded=True) == {before, after}
    assert_store_verifies(store)


def test_the_search_snapshot_and_its_delta_hide_what_a_supersede_ended(tmp_path):
    store = tmp_path / "store"
    cx = Cortex(store=store, actor="alice")
    a = cx.write("fact", "Builds run on runner-1").id
    b = cx.write("fact", "Builds run on runner-2").id
    dated = cx.write("fact", "The freeze ends soon", sets=["valid_to=2001-01-01"]).id
    cx.reindex(rebuild=True)  # builds the snapshot
    assert snapshot.state(store) == "current"
    assert _found(cx) == {a, b}
    assert _found(cx, valid_at="2000-06-01") == {a, b, dated}
    cx.supersede(a, by=b)  # a writer's delta follows
    assert snapshot.state(store) == "current" and (store / snapshot.DELTA_NAME).exists()
    assert _found(cx) == {b}
    hits = {h.id: h for h in cx.find(FindQuery(include_superseded=True, near="runner"))}
    assert hits[a].superseded_by == b and hits[a].ended and not hits[b].ended
    snapshot.remove(store)  # and DuckDB alone answers the same
    assert _found(cx) == {b} and _found(cx, include_superseded=True) == {a, b, dated}


def test_export_then_import_keeps_valid_times_and_links(tmp_path):
    cx = Cortex(store=tmp_path / "source", actor="alice")
    old, new = _linked(cx)
    dated = cx.write("fact", "Office closed", sets=["valid_from=2026-12-24", "valid_to=2026-12-27"]).id
    cx.export_jsonl(tmp_path / "out.jsonl")
    back = Cortex(store=tmp_path / "copy", actor="alice")
    with open(tmp_path / "out.jsonl", "rb") as fh:
        back.import_jsonl(fh)
    for id_ in (old, new, dated):
        a, b = cx.show(id_), back.show(id_)
        assert (a.valid_from, a.valid_to, a.supersedes, a.superseded_by) == \
            (b.valid_from, b.valid_to, b.supersedes, b.superseded_by)
    assert back.show(old).superseded_by == new and _found(back) == {new, dated}
    assert_store_verifies(tmp_path / "copy")


def test_a_merge_brings_a_supersede_made_on_the_other_side(tmp_path):
    here = Cortex(store=tmp_path / "here", actor="alice")
    old = here.write("fact", "The deploy key rotates monthly").id
    shutil.copytree(tmp_path / "here", tmp_path / "there")
    there = Cortex(store=tmp_path / "there", actor="alice")
    new = there.write("fact", "The deploy key rotates weekly", supersedes=old).id
    bundle = Path(there.backup(dest=tmp_path / "bundles").path)
    here.restore(bundle, mode="merge")
    assert here.show(old).superseded_by == new and here.show(new).supersedes == old
    assert here.show(old).valid_to == here.show(new).valid_from
    assert _found(here) == {new}
    assert_store_verifies(tmp_path / "here")
    here.restore(bundle, mode="merge")  # twice is once
    assert_store_verifies(tmp_path / "here")


def test_being_superseded_does_not_make_the_old_memory_recent(tmp_path):
    from datetime import datetime, timedelta

    cx = Cortex(store=tmp_path / "store", actor="alice")
    t0 = datetime(2026, 1, 1)
    cx.context.clock = lambda: t0
    old = cx.write("fact", "Builds run on runner-1").id
    cx.context.clock = lambda: t0 + timedelta(days=30)
    new = cx.write("fact", "Builds run on runner-2", supersedes=old).id
    assert cx.show(old).updated_at == t0 and cx.show(old).valid_to == t0 + timedelta(days=30)
    assert cx.show(new).valid_from == t0 + timedelta(days=30)
    assert_store_verifies(tmp_path / "store")



def _diverged(tmp_path) -> tuple[Cortex, Cortex, str]:
    """Two copies of one store holding one memory: (here, there, its ID)."""
    here = Cortex(store=tmp_path / "here", actor="alice")
    old = here.write("fact", "The deploy key rotates monthly").id
    shutil.copytree(tmp_path / "here", tmp_path / "there")
    return here, Cortex(store=tmp_path / "there", actor="alice"), old


def test_a_merge_whose_supersede_clashes_with_this_stores_is_refused_with_nothing_written(tmp_path):
    """Each side superseded the same memory by a memory of its own: the union of both links is not a
    store that verifies (the old memory can link back to one of them only). The merge committed and
    then its own verify refused the store it had left (exit 7 after the write): now nothing is written."""
    here, there, old = _diverged(tmp_path)
    mine = here.write("fact", "The deploy key rotates weekly", supersedes=old).id
    there.write("fact", "The deploy key rotates daily", supersedes=old)
    bundle = Path(there.backup(dest=tmp_path / "bundles").path)
    before = tamper.every_table(tmp_path / "here")
    with pytest.raises(IntegrityError, match="clash with this store's .*nothing written"):
        here.restore(bundle, mode="merge")
    assert tamper.every_table(tmp_path / "here") == before
    assert here.show(old).superseded_by == mine
    assert_store_verifies(tmp_path / "here")


def test_a_merge_that_would_close_a_cycle_of_supersedes_is_refused_with_nothing_written(tmp_path):
    here = Cortex(store=tmp_path / "here", actor="alice")
    a = here.write("fact", "Staging is db-stg-2").id
    b = here.write("fact", "Staging is db-stg-3").id
    shutil.copytree(tmp_path / "here", tmp_path / "there")
    there = Cortex(store=tmp_path / "there", actor="alice")
    here.supersede(a, by=b)
    there.supersede(b, by=a)  # the other way round
    bundle = Path(there.backup(dest=tmp_path / "bundles").path)
    before = tamper.every_table(tmp_path / "here")
    with pytest.raises(IntegrityError, match="nothing written"):
        here.restore(bundle, mode="merge")
    assert tamper.every_table(tmp_path / "here") == before
    assert_store_verifies(tmp_path / "here")
