"""find --near: the three lanes, their fusion, every filter, visibility in every lane, -k and
the token budget, and a lexical lane that follows every update, forget and import."""

from __future__ import annotations

import orjson
import pytest

from cortexctl import Cortex, FindQuery
from tests.conftest import assert_clean_error, assert_store_verifies


def _corpus(store):
    alice = Cortex(store=store, actor="alice")
    bob = Cortex(store=store, actor="bob")
    ids = {
        "key": alice.write("fact", "The deploy key for billing rotates every 90 days", tags=["ops"],
                           frames=["modify:repo:acme/billing"]).id,
        "pager": alice.write("fact", "The pager rota changes every Monday", tags=["oncall"]).id,
        "tabs": alice.write("preference", "tabs over spaces", tags=["style"]).id,
        "goal": alice.write("goal", "Rotate every deploy key before the audit", tags=["ops"]).id,
        "pub": alice.write("fact", "The public status page lives at status.acme.io", visibility="public").id,
        "bob_secret": bob.write("fact", "Bob's deploy key passphrase hint is the cat's name").id,
        "bob_public": bob.write("fact", "Bob's public note: deploy key rotation uses vault", visibility="public").id,
    }
    return ids


@pytest.fixture
def corpus(store_once):
    """Seven memories of alice and bob, written once per session and copied per test."""
    return store_once(_corpus)


def _find(cli, *args, actor=None):
    extra = ["--actor", actor] if actor else []
    run = cli("find", *args, "--json", *extra)
    assert run.code == (0 if run.json()["matched"] else 1), run  # find exits like grep
    return run.json()


def _ids(doc):
    return [r["id"] for r in doc["results"]]


def test_near_ranks_the_matching_memory_first_and_explains_why(cli, corpus):
    doc = _find(cli, "--near", "when does the billing deploy key rotate")
    top = doc["results"][0]
    assert top["id"] == corpus["key"]
    assert set(top["lanes"]) == {"lexical", "semantic", "salience"}
    assert top["lexical"] > 0 and 0 < top["similarity"] <= 1 and top["salience"] > 0
    assert top["score"] >= doc["results"][1]["score"]
    assert top["tokens"] == len(top["text"].encode()) // 4 + (len(top["text"].encode()) % 4 > 0)


def test_stemming_meets_other_forms_of_a_word(cli, corpus):
    # "rotating" meets "rotates", "Rotate" and "rotation"
    doc = _find(cli, "--near", "rotating", "-k", "100")
    assert {r["id"] for r in doc["results"][:3]} == {corpus["key"], corpus["goal"], corpus["bob_public"]}
    assert all("lexical" in r["lanes"] for r in doc["results"][:3])


def test_a_misspelt_query_still_finds_through_the_semantic_lane(cli, corpus):
    doc = _find(cli, "--near", "pagerrota mondy", "-k", "1")
    assert _ids(doc) == [corpus["pager"]]
    assert "semantic" in doc["results"][0]["lanes"] and "lexical" not in doc["results"][0]["lanes"]


def test_memories_of_no_lane_but_salience_rank_below_every_text_match(cli, corpus):
    for query in ("deploy key", "status page", "zzz qqq"):
        lanes = [r["lanes"] for r in _find(cli, "--near", query, "-k", "10")["results"]]
        first = next((i for i, l in enumerate(lanes) if l == ["salience"]), len(lanes))
        assert all(l == ["salience"] for l in lanes[first:]), (query, lanes)


@pytest.mark.parametrize("actor", ["alice", "bob", "carol"])
def test_no_lane_shows_another_actors_private_memory(cli, corpus, actor):
    # "passphrase hint cat" matches Bob's private memory lexically and semantically
    seen = _ids(_find(cli, "--near", "deploy key passphrase hint cat name", "-k", "100", actor=actor))
    assert (corpus["bob_secret"] in seen) == (actor == "bob")
    assert corpus["bob_public"] in seen and corpus["pub"] in seen
    assert (corpus["key"] in seen) == (actor == "alice")


@pytest.mark.parametrize("args, expected", [
    (["--type", "goal"], ["goal"]),
    (["--tag", "ops"], ["key", "goal"]),
    (["--tag", "ops", "--type", "fact"], ["key"]),
    (["--frame", "modify:repo:acme/billing"], ["key"]),
    (["--frame", "modify"], ["key"]),
    (["--frame", "build:repo"], []),
    (["--tag", "nothing-has-this"], []),
])
def test_every_filter_applies_to_every_lane(cli, corpus, args, expected):
    got = _ids(_find(cli, "--near", "deploy key rotation", "-k", "100", *args))
    assert sorted(got) == sorted(corpus[k] for k in expected)


def test_k_bounds_the_results(cli, corpus):
    assert len(_find(cli, "--near", "deploy key", "-k", "2")["results"]) == 2
    assert len(_find(cli, "--near", "deploy key", "-k", "1")["results"]) == 1


def test_the_token_budget_keeps_the_longest_prefix_of_the_ranking_that_fits(cli, corpus):
    full = _find(cli, "--near", "deploy key", "-k", "10")["results"]
    budget = full[0]["tokens"] + full[1]["tokens"]
    doc = _find(cli, "--near", "deploy key", "-k", "10", "--budget-tokens", str(budget))
    assert _ids(doc) == [r["id"] for r in full[:2]]
    assert doc["tokens"] == budget
    one_less = _find(cli, "--near", "deploy key", "-k", "10", "--budget-tokens", str(budget - 1))
    assert _ids(one_less) == [full[0]["id"]]
    assert _find(cli, "--near", "deploy key", "--budget-tokens", "1")["results"] == []


def test_the_budget_counts_the_form_shown(cli, corpus):
    short = _find(cli, "--near", "deploy key", "-k", "3", "--form", "short")["results"]
    medium = _find(cli, "--near", "deploy key", "-k", "3", "--form", "medium")["results"]
    assert [r["id"] for r in short] == [r["id"] for r in medium]
    assert all(m["tokens"] >= s["tokens"] for s, m in zip(short, medium))
    assert all(m["form"] == "medium" for m in medium)


def test_the_lexical_lane_follows_update_forget_and_import(cli, corpus, store):
    assert _ids(_find(cli, "--near", "pager rota Monday", "-k", "1")) == [corpus["pager"]]
    assert cli("update", corpus["pager"], "The escalation ladder is reviewed each quarter").code == 0
    after = _find(cli, "--near", "pager rota Monday", "-k", "10")["results"]
    assert all("lexical" not in r["lanes"] for r in after if r["id"] == corpus["pager"])
    doc = _find(cli, "--near", "escalation ladder quarter", "-k", "1")
    assert _ids(doc) == [corpus["pager"]] and "lexical" in doc["results"][0]["lanes"]

    assert cli("forget", corpus["pager"], "--reason", "obsolete").code == 0
    assert corpus["pager"] not in _ids(_find(cli, "--near", "escalation ladder quarter", "-k", "100"))
    gone = _find(cli, "--near", "escalation ladder quarter", "-k", "1", "--include-tombstoned")
    assert _ids(gone) == [corpus["pager"]] and gone["results"][0]["tombstoned"] is True

    lines = "".join(orjson.dumps({"type": "fact", "text": t}).decode() + "\n" for t in
                    ("Quokkas live on Rottnest Island", "The kettle in room 4 is broken"))
    assert cli("import", "-", input=lines).code == 0
    hit = _find(cli, "--near", "where do quokkas live", "-k", "1")["results"][0]
    assert hit["text"].startswith("Quokkas") and "lexical" in hit["lanes"] and "semantic" in hit["lanes"]
    assert_store_verifies(store)


def test_find_without_near_is_the_salience_lane_alone(cli, corpus, store):
    Cortex(store=store, actor="alice").head(corpus["tabs"], importance=10)
    doc = _find(cli, "-k", "3")
    assert doc["results"][0]["id"] == corpus["tabs"]
    assert all(r["lanes"] == ["salience"] for r in doc["results"])
    sal = [r["salience"] for r in doc["results"]]
    assert sal == sorted(sal, reverse=True)


def test_find_near_does_not_change_the_store(cli, corpus, store):
    before = cli("export").out
    _find(cli, "--near", "deploy key")
    assert cli("export").out == before


@pytest.mark.parametrize("args, code, message", [
    (["--near", ""], 2, "--near"),
    (["--near", "   "], 2, "--near"),
    (["--near", "x", "--budget-tokens", "0"], 2, "--budget-tokens"),
    (["--near", "x", "--budget-tokens", "-5"], 2, "--budget-tokens"),
    (["--near", "x", "--budget-tokens", "lots"], 2, "budget"),
    (["--near", "x", "-k", "0"], 2, "-k"),
    (["--near"], 2, "--near"),
    (["--near", "x" * 40000], 2, "longer"),
])
def test_bad_find_input_is_one_clear_line(cli, corpus, args, code, message):
    run = cli("find", *args)
    assert_clean_error(run, code)
    assert message in run.err


def test_near_on_a_store_that_does_not_exist_says_so(cli, store):
    r = cli("find", "--near", "anything", "--json")
    assert r.code == 3 and "no store at" in r.err and not store.exists(), r


def test_the_engine_api_finds_by_meaning_too(store, corpus):
    hits = Cortex(store=store, actor="alice").find(FindQuery(near="billing deploy key", k=1))
    assert hits[0].id == corpus["key"] and hits[0].uri.endswith(corpus["key"])


def test_a_word_of_thousands_of_ys_is_stored_and_found(cli):
    word = "y" * 3000 + "ing"
    uri = cli("write", "fact", f"{word} marks the spot").out.strip()
    run = cli("find", "--near", word, "--json")
    assert run.code == 0, run
    assert run.json()["results"][0]["uri"] == uri


def test_scores_reveal_nothing_of_another_actors_private_words(cli, store):
    alice = Cortex(store=store, actor="alice")
    alice.write("fact", "the zyxwv protocol is documented in the wiki")
    alice.write("fact", "unrelated words about lunch")
    before = _find(cli, "--near", "zyxwv protocol")["results"][0]["lexical"]
    Cortex(store=store, actor="bob").write("fact", "bob's private zyxwv notes")
    assert _find(cli, "--near", "zyxwv protocol")["results"][0]["lexical"] == before
    Cortex(store=store, actor="bob").write("fact", "bob's public zyxwv notes", visibility="public")
    assert _find(cli, "--near", "zyxwv protocol")["results"][0]["lexical"] != before  # public words count


def test_after_a_change_of_model_find_says_so_and_writes_catch_up(cli, store):
    for text in ("alpha walrus", "beta walrus", "gamma walrus"):
        assert cli("write", "fact", text).code == 0
    other = {"CORTEXCTL_EMBED_DIMENSIONS": "128"}  # another hash model: hash-v1/128
    doc = _find_env(cli, other, "--near", "walrus")
    assert any("reindex" in w for w in doc["warnings"])
    assert all("semantic" not in r["lanes"] for r in doc["results"])
    assert cli("write", "fact", "delta walrus", env=other).code == 0  # embeds the waiting ones on the side
    doc = _find_env(cli, other, "--near", "walrus", "-k", "4")
    assert doc["warnings"] == [] and all("semantic" in r["lanes"] for r in doc["results"])
    assert_store_verifies(store)


def _find_env(cli, env, *args):
    run = cli("find", *args, "--json", env=env)
    assert run.code == (0 if run.json()["matched"] else 1), run
    return run.json()
