"""pinned, context and patterns (SPEC §8): budgets, cut order, the pattern gate, stable --json."""

from __future__ import annotations

import pytest

from cortexctl.memory.forms import count_tokens
from tests.conftest import assert_clean_error

PINNED_KEYS = {"budget_tokens", "tokens", "identity", "rules", "hard_constraints", "user_profile", "goal",
               "omitted", "text"}
CONTEXT_KEYS = {"goal", "query", "budget_tokens", "tokens", "pinned", "memories", "patterns", "omitted",
                "warnings", "text"}
SPEC = ("--name", "rotate deploy key", "--trigger", "deploy key expired", "--step", "vault write keys/deploy")


def _user_fact(cx, text):
    return cx.write("fact", text, data={"subject": "cortex://knowledge/user"}, tags=["user"]).uri


def test_pinned_has_every_section_and_stable_json(cli, cx):
    ident = cx.write("identity", "Neo", data={"did": "did:key:z6MkExample"}).uri
    hard = cx.write("constraint", "never push to main", data={"strength": "hard"}).uri
    cx.write("constraint", "prefer small commits")  # soft: not pinned
    r = cli("remember", "--user", "Prefers answers in French", "--json").json()
    doc = cli("pinned", "--goal", "rotate the deploy key", "--json").json()
    assert set(doc) == PINNED_KEYS
    assert doc["identity"]["uri"] == ident and doc["identity"]["text"] == "Neo (did:key:z6MkExample)"
    assert [c["uri"] for c in doc["hard_constraints"]] == [hard]
    assert [u["uri"] for u in doc["user_profile"]] == [r["uri"]]
    assert doc["goal"] == "rotate the deploy key" and doc["omitted"] == [] and doc["budget_tokens"] == 2000
    assert len(doc["rules"]) == 6 and doc["tokens"] == count_tokens(doc["text"])
    text = cli("pinned", "--goal", "rotate the deploy key").out
    for heading in ("## Identity", "## Rules", "## Hard constraints", "## User profile", "## Goal"):
        assert heading in text
    assert f"[{hard.rsplit('/', 1)[1]}] never push to main" in text


def test_user_profile_is_capped_at_12_and_deduplicated(cli, cx):
    for i in range(14):
        _user_fact(cx, f"User fact number {i}")
    _user_fact(cx, "user fact NUMBER 13.")  # same as one above after normalization
    doc = cli("pinned", "--goal", "g", "--json").json()
    texts = [u["text"].lower().rstrip(".") for u in doc["user_profile"]]
    assert len(texts) == 12 and len(set(texts)) == 12


def test_pinned_budget_2000_cuts_user_facts_then_constraints(cli, cx):
    for i in range(12):
        _user_fact(cx, f"user fact {i} " + "word " * 60)
    for i in range(12):
        cx.write("constraint", f"hard rule {i} " + "word " * 60, data={"strength": "hard"})
    doc = cli("pinned", "--goal", "g", "--json").json()
    assert doc["tokens"] <= 2000 and count_tokens(doc["text"]) <= 2000
    sections = [o["section"] for o in doc["omitted"]]
    assert sections and sections[0] == "user_profile"
    assert sections == sorted(sections, key=["user_profile", "hard_constraints"].index)
    assert doc["hard_constraints"] or not doc["user_profile"]  # constraints go only once the profile is gone
    assert "Left out" not in cli("pinned", "--goal", "g").out  # pinned alone lists nothing in text
    assert cli("pinned", "--goal", "g", "--budget-tokens", "400", "--json").json()["tokens"] <= 400


def test_a_high_entropy_token_in_the_goal_is_never_cut(cli):
    token = "0x" + "ab12" * 10
    goal = "check the transfer " + "please " * 20 + token + " and report"
    for budget in range(200, 320, 3):
        doc = cli("pinned", "--goal", goal, "--budget-tokens", str(budget), "--json").json()
        assert doc["tokens"] <= budget
        assert token in doc["goal"] or "0x" not in doc["goal"], doc["goal"]


def test_pinned_budget_unreachable_is_exit_6(cli):
    assert_clean_error(cli("pinned", "--goal", "g", "--budget-tokens", "3"), 6)


def test_pattern_gate_at_2_versus_3_and_plain_statement(cli, cx):
    cli("pattern", "reinforce", *SPEC)
    cli("pattern", "reinforce", *SPEC)
    assert cli("patterns", "--goal", "the deploy key expired", "--json").json()["count"] == 0
    cli("pattern", "reinforce", *SPEC)
    doc = cli("patterns", "--goal", "the deploy key expired", "--json").json()
    assert doc["count"] == 1 and doc["patterns"][0]["coverage"] == 3
    assert cli("patterns", "--goal", "bake bread", "--json").json()["count"] == 0
    plain = cx.write("pattern", "run make test before pushing", data={"coverage": 5}).uri
    got = {p["uri"]: p for p in cli("patterns", "--goal", "pushing to the repo", "--json").json()["patterns"]}
    assert got[plain]["steps"] == ["run make test before pushing"] and got[plain]["structured"] is False


def test_patterns_are_ordered_by_confidence(cli, cx):
    low = cli("pattern", "write", "--name", "a", "--trigger", "deploy", "--step", "s", "--coverage", "3",
              "--json").json()["uri"]
    high = cx.write("pattern", 'cortex.pattern.v1:{"name":"b","trigger":"deploy","steps":["t"]}',
                    data={"coverage": 9}, confidence=0.9).uri
    cx.update(low, confidence=0.4)
    assert [p["uri"] for p in cli("patterns", "--goal", "deploy", "--json").json()["patterns"]] == [high, low]


def test_context_sections_dedup_and_stable_json(cli, cx):
    user = cli("remember", "--user", "Works on the deploy pipeline", "--json").json()["uri"]
    fact = cli("remember", "The deploy key lives in vault at secret/deploy", "--json").json()["uri"]
    for _ in range(3):
        cli("pattern", "reinforce", *SPEC)
    doc = cli("context", "--goal", "rotate the deploy key", "--json").json()
    assert set(doc) == CONTEXT_KEYS and set(doc["pinned"]) == PINNED_KEYS
    mem = [m["uri"] for m in doc["memories"]]
    pats = [p["uri"] for p in doc["patterns"]]
    assert fact in mem and user not in mem  # the user fact is pinned, not repeated
    assert len(pats) == 1 and pats[0] not in mem
    every = [doc["pinned"]["identity"]["uri"], *(u["uri"] for u in doc["pinned"]["user_profile"]), *mem, *pats]
    every = [u for u in every if u]
    assert len(every) == len(set(every))
    text = cli("context", "--goal", "rotate the deploy key").out
    assert text.index("# Pinned") < text.index("# Relevant memories") < text.index("# Proven patterns")
    assert f"[{fact.rsplit('/', 1)[1]}]" in text


def test_context_budget_6000_and_cut_order(cli, cx):
    for i in range(8):
        cx.write("fact", f"deploy note {i} " + "detail " * 150)
    doc = cli("context", "--goal", "deploy note", "--json").json()
    assert doc["budget_tokens"] == 6000
    used = sum(count_tokens(f"- [{m['ref']}] {m['text']}") + 1 for m in doc["memories"])
    assert used <= 6000 and len(doc["memories"]) <= 8
    small = cli("context", "--goal", "deploy note", "--budget-tokens", "500", "--json").json()
    assert len(small["memories"]) < len(doc["memories"])
    ranks = [m["rank"] for m in small["memories"]]
    assert ranks == list(range(1, len(ranks) + 1))  # the best are kept, the rest left out
    assert {o["section"] for o in small["omitted"]} == {"memories"}
    assert "# Left out (budget)" in cli("context", "--goal", "deploy note", "--budget-tokens", "500").out


def test_context_query_overrides_goal(cli, cx):
    cx.write("fact", "the kettle is in the kitchen")
    doc = cli("context", "--goal", "rotate keys", "--query", "kettle kitchen", "--json").json()
    assert doc["query"] == "kettle kitchen" and doc["memories"][0]["text"].startswith("fact: the kettle")


def test_pinned_and_context_on_no_store_create_nothing(cli, store):
    assert cli("pinned", "--goal", "g").code == 0
    assert cli("context", "--goal", "g", "--json").json()["memories"] == []
    assert not store.exists()


@pytest.mark.parametrize(
    "args",
    [
        ("pinned",),
        ("pinned", "--goal", ""),
        ("pinned", "--goal", "g", "--budget-tokens", "0"),
        ("pinned", "--goal", "g", "--budget-tokens", "x"),
        ("context", "--goal", "  "),
        ("context", "--goal", "g", "--query", ""),
        ("context", "--goal", "g", "--budget-tokens", "-1"),
        ("patterns",),
        ("pinned", "--goal", "x" * 40000),
    ],
)
def test_bad_input_is_one_line_exit_2(cli, args):
    assert_clean_error(cli(*args), 2)


def test_pager_settings_come_from_config(cli, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[pager]\nmin_pattern_successes = 2\nrules = ["Be kind."]\npinned_budget_tokens = 300\n')
    cli("pattern", "reinforce", *SPEC)
    cli("pattern", "reinforce", *SPEC)
    assert cli("-c", str(cfg), "patterns", "--goal", "deploy key", "--json").json()["count"] == 1
    doc = cli("-c", str(cfg), "pinned", "--goal", "g", "--json").json()
    assert doc["rules"] == ["Be kind."] and doc["budget_tokens"] == 300
    bad = tmp_path / "bad.toml"
    bad.write_text("[pager]\nretrieval_top_k = 0\n")
    assert_clean_error(cli("-c", str(bad), "context", "--goal", "g"), 2)
