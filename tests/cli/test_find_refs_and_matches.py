"""What find shows a person: short refs that resolve, exact matches first, no-match results marked,
hints instead of silence, and notes only when asked."""

from __future__ import annotations

import json
import random

import orjson
import pytest

from cortexctl import Cortex, FindQuery


@pytest.mark.slow
def test_every_short_ref_of_memories_imported_together_resolves_to_its_memory(cli, store, tmp_path):
    src = tmp_path / "many.jsonl"
    src.write_bytes(b"".join(orjson.dumps({"type": "fact", "text": f"note {i}"}) + b"\n" for i in range(10_000)))
    assert cli("import", str(src), "--quiet").code == 0
    cx = Cortex(store=store, actor="alice")
    ids = [h.id for h in cx.find(FindQuery(k=10_000))]
    assert len(ids) == 10_000 and len({i[:10] for i in ids}) < 10_000  # their starts do clash
    refs = cx.short_refs(ids)
    assert len(set(refs.values())) == 10_000 and all(len(r) >= 8 and i.endswith(r) for i, r in refs.items())
    for i in random.Random(7).sample(ids, 40):
        assert cx.show(refs[i]).id == i
    run = cli("show", refs[ids[0]], "--json")
    assert run.code == 0 and json.loads(run.out)["id"] == ids[0]


def test_a_clashing_short_ref_grows_until_it_names_one_memory(cli, store):
    cx = Cortex(store=store, actor="alice")
    a = cx.write("fact", "one").id
    b = cx.write("fact", "two").id
    with cx.context.reading() as tx:
        from cortexctl.engine.refs import short_refs

        assert short_refs(tx, [a, b]) == {a: a[-8:], b: b[-8:]}
    # a start of one ID that equals the end of another makes the short ref longer
    from tests import tamper

    tamper.rename_memory(store, b, b[:18] + a[:8])
    with cx.context.reading() as tx:
        got = short_refs(tx, [a, b[:18] + a[:8]])
    assert got[b[:18] + a[:8]] == (b[:18] + a[:8])[-10:]


def test_a_start_or_an_end_of_an_id_names_a_memory_unless_it_names_two(cli, store):
    cx = Cortex(store=store, actor="alice")
    a = cx.write("fact", "one").id
    assert cli("show", a[:6]).code == 0 and cli("show", a[-6:]).code == 0
    b = cx.write("fact", "two").id  # written within minutes: the same first 6 characters
    assert a[:6] == b[:6]
    run = cli("show", a[:6])
    assert run.code == 2 and "ambiguous" in run.err and a in run.err and b in run.err, run
    assert cli("show", a[-6:]).code == 0


def test_an_exact_match_comes_before_a_longer_memory_that_repeats_the_words(cli):
    assert cli("write", "fact", "the timing test of the timing test suite runs nightly").code == 0
    exact = cli("write", "fact", "timing-test").out.strip()
    assert cli("write", "fact", "tests of timing are elsewhere").code == 0
    run = cli("find", "--near", "timing-test", "-k", "1")
    assert run.out.split("\t")[0] == exact, run
    docs = json.loads(cli("find", "--near", "timing test", "--json").out)["results"]
    assert [d["text"] for d in docs[:2]] == ["timing-test", "the timing test of the timing test suite runs nightly"]


def test_results_nothing_matched_are_marked(cli):
    for t in ("The deploy key rotates monthly", "tabs over spaces", "ship v2 by december"):
        assert cli("write", "fact", t).code == 0
    doc = json.loads(cli("find", "--near", "kubernetes helm chart", "--json").out)
    assert doc["count"] == 3 and not any(r["matched"] for r in doc["results"])
    doc = json.loads(cli("find", "--near", "deploy key", "--json").out)
    assert doc["results"][0]["matched"] and doc["results"][0]["text"] == "The deploy key rotates monthly"
    assert not any(r["matched"] for r in doc["results"][1:])


def test_an_actor_who_sees_nothing_in_a_store_that_holds_memories_gets_a_hint(cli):
    assert cli("write", "fact", "alice's private fact").code == 0
    run = cli("find", "--actor", "bob")
    assert run.code == 1 and run.out == ""  # nothing to answer with: exit 1, as grep
    assert "'bob' sees no memories" in run.err and "--actor" in run.err and "1" not in run.err, run
    run = cli("find", "--near", "private", "--actor", "bob")
    assert "'bob' sees no memories" in run.err
    assert "sees no memories" not in cli("find").err  # alice sees hers


def test_notes_on_how_an_answer_was_found_show_only_with_verbose(cli, store, monkeypatch):
    from cortexctl.store import vector_index as semantic

    monkeypatch.setattr(semantic, "EXACT_MAX", 0)  # the index even for a small store (in-process CLI)
    for i in range(30):
        assert cli("write", "fact", f"fact number {i} about deployments").code == 0
    assert cli("reindex", "--rebuild").code == 0
    (store / semantic.INDEX_NAME).write_bytes(b"garbage")  # find rebuilds it, and says so only with -v
    quiet = cli("find", "--near", "deployments")
    assert quiet.code == 0 and quiet.err == "", quiet
    (store / semantic.INDEX_NAME).write_bytes(b"garbage")
    loud = cli("find", "--near", "deployments", "-v", "--json")
    assert loud.code == 0 and "rebuilt" in loud.err, loud
    assert any("rebuilt" in n for n in json.loads(loud.out)["notes"])


def test_writing_the_same_memory_twice_warns_and_dedupe_returns_the_first(cli, store):
    first = cli("write", "fact", "The deploy key rotates monthly", "--tag", "ops")
    assert first.code == 0 and first.err == ""
    again = cli("write", "fact", "the deploy key rotates monthly.")
    assert again.code == 0 and again.out.strip() != first.out.strip()
    assert first.out.strip() in again.err and "--dedupe" in again.err and again.err.count("\n") == 1, again
    journal = Cortex(store=store, actor="alice").verify().journal
    deduped = cli("write", "fact", "The deploy key rotates MONTHLY", "--dedupe", "--json")
    doc = json.loads(deduped.out)
    assert deduped.code == 0 and doc["uri"] == first.out.strip() and doc["changed"] is False, deduped
    assert Cortex(store=store, actor="alice").verify().journal == journal  # nothing written
    # not the same: another type, another actor's, a forgotten one, other words
    assert cli("write", "goal", "The deploy key rotates monthly").err == ""
    assert cli("write", "fact", "The deploy key rotates monthly", "--actor", "bob").err == ""
    assert cli("write", "fact", "The deploy key rotates yearly").err == ""
    for uri in (first.out.strip(), again.out.strip()):
        assert cli("forget", uri, "--reason", "gone").code == 0
    assert cli("write", "fact", "The deploy key rotates monthly").err == ""
