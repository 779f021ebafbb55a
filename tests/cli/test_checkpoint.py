"""checkpoint load gives the context back (kept items with their forms), and checkpoint list
(issue 12, item 9)."""

from __future__ import annotations

from tests.conftest import assert_clean_error


def _compact(cli, intent, step, *uris):
    r = cli("compact", "--intent", intent, "--step", step, "--budget-tokens", "800", *uris)
    assert r.code == 0, r
    return r


def test_checkpoint_load_shows_kept_items_with_their_forms(cli):
    rule = cli("write", "constraint", "never push to main", "--set", "strength=hard").out.strip()
    fact = cli("write", "fact", "the deploy key rotates monthly").out.strip()
    _compact(cli, "rel-1", "1", rule, fact)
    out = cli("checkpoint", "load", "--intent", "rel-1", "--step", "1").out
    kept = [line for line in out.splitlines() if line.startswith("kept")]
    assert len(kept) == 1 and rule in kept[0]
    assert "constraint: never push to main (strength: hard" in kept[0]
    doc = cli("checkpoint", "load", "--intent", "rel-1", "--step", "1", "--json").json()
    assert doc["kept"] == [rule]
    medium = cli("show", rule, "--json").json()["forms"]["medium"]
    assert kept[0].endswith(medium)


def test_checkpoint_load_marks_a_kept_memory_forgotten_since(cli):
    rule = cli("write", "constraint", "never push to main", "--set", "strength=hard").out.strip()
    _compact(cli, "rel-1", "1", rule)
    cli("forget", rule, "--reason", "r")
    out = cli("checkpoint", "load", "--intent", "rel-1", "--step", "1").out
    assert "(forgotten since)" in out


def test_checkpoint_list_is_the_actors_checkpoints_newest_first(cli):
    fact = cli("write", "fact", "x").out.strip()
    _compact(cli, "rel-1", "1", fact)
    _compact(cli, "rel-1", "2", fact)
    _compact(cli, "rel-2", "1", fact)
    bob = cli("write", "fact", "y", env={"CORTEXCTL_ACTOR": "bob"}).out.strip()
    cli("compact", "--intent", "bob-1", "--step", "1", "--budget-tokens", "800", bob,
        env={"CORTEXCTL_ACTOR": "bob"})
    docs = cli("checkpoint", "list", "--json").json()
    assert docs["count"] == 3
    assert [(d["intent"], d["step"]) for d in docs["checkpoints"]] == [("rel-2", "1"), ("rel-1", "2"), ("rel-1", "1")]
    lines = cli("checkpoint", "list", "--intent", "rel-1", "--jsonl").jsonl()
    assert [d["step"] for d in lines] == ["2", "1"]
    plain = cli("checkpoint", "list").out.splitlines()
    assert plain[0].startswith("rel-2") and "bob-1" not in "\n".join(plain)
    assert cli("checkpoint", "list", "--intent", "nothing").out.strip() == ""


def test_checkpoint_list_on_a_missing_store_is_exit_3(cli, tmp_path):
    r = cli("checkpoint", "list", "--store", str(tmp_path / "nosuch"), use_store=False)
    assert_clean_error(r, 3)
    assert not (tmp_path / "nosuch").exists()
