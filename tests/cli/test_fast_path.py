"""The run-time parser (plain forms, without Typer) and the Typer tree, both built from the one
declaration of each command, run the same bodies and print the same."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cortexctl import Cortex
from cortexctl.cli import parser as fast


def _ids(store):
    alice = Cortex(store=store, actor="alice")
    f = alice.write("fact", "the deploy key rotates monthly", tags=["ops"], frames=["modify:file:/etc/key"])
    alice.update(f.uri, "the deploy key rotates weekly")
    g = alice.write("goal", "ship v2", tags=["ops", "q4"], visibility="public")
    gone = alice.write("fact", "forgotten")
    alice.forget(gone.uri, reason="x")
    Cortex(store=store, actor="bob").write("fact", "bob only")
    return {"f": f.id, "g": g.id}


@pytest.fixture
def ids(store_once):
    return store_once(_ids)


# (command, positionals, options): the fast path gets them as typed; Typer gets
# `command options -- positionals`, a form the fast path always leaves to Typer.
VECTORS = [
    ("find", [], []),
    ("find", [], ["--json"]),
    ("find", [], ["--jsonl", "-k", "1"]),
    ("find", [], ["--type", "fact", "--type", "goal", "--form", "medium"]),
    ("find", [], ["--tag", "ops", "--tag=q4", "--json"]),
    ("find", [], ["--frame", "modify:file", "--form=full"]),
    ("find", [], ["--include-tombstoned", "--json", "--wait", "2.5"]),
    ("find", [], ["--actor", "bob", "--json"]),
    ("find", [], ["--type", "bogus"]),
    ("find", [], ["--frame", "nope:x"]),
    ("find", [], ["--near", "deploy key"]),
    ("find", [], ["--near=rotates weekly", "--tag", "ops", "-k", "1"]),
    ("find", [], ["--near", "ship", "--budget-tokens", "3", "--form", "medium"]),
    ("find", [], ["--near", ""]),
    ("find", [], ["--near", "x", "--budget-tokens", "0"]),
    ("show", ["{f}"], []),
    ("show", ["{f}"], ["--version", "1", "--form", "short"]),
    ("show", ["cortex://m/{f}/v/2"], ["--json"]),
    ("show", ["{g}"], ["--actor", "bob", "--jsonl"]),
    ("show", ["{f}"], ["--actor", "bob"]),
    ("show", ["{f}"], ["--version", "9"]),
    ("show", ["{f}"], ["--form", "tiny"]),
    ("show", ["01ZZZZZZ"], []),
    ("history", ["{f}"], []),
    ("history", ["{f}"], ["--json"]),
]


@pytest.mark.parametrize("command, positionals, options", VECTORS,
                         ids=[" ".join([c, *p, *o]) for c, p, o in VECTORS])
def test_fast_path_and_typer_print_the_same(command, positionals, options, ids, cli):
    positionals = [a.format(**ids) for a in positionals]
    quick = [command, *positionals, *options]
    slow = [command, *options, "--", *positionals]
    assert fast.plan(quick) is not None, "the fast path should take this"
    assert fast.plan(slow) is None, "the Typer form should bypass the fast path"
    a, b = cli(*quick), cli(*slow)
    assert (a.code, a.out, a.err) == (b.code, b.out, b.err)


@pytest.mark.parametrize("argv", [
    ["find", "--help"], ["find", "-k", "ten"], ["find", "--bogus"], ["find", "-k"], ["find", "extra"],
    ["show"], ["show", "a", "b"], ["show", "x", "--version", "1.5"], ["find", "--json=yes"], ["--version"],
    ["write", "fact", "x", "y"], ["update", "abcdef", "x", "y"], ["find", "-k=3"],
    ["checkpoint load", "--intent", "i", "--step", "s"], ["checkpoint"], ["checkpoint", "load", "extra"],
    ["checkpoint", "LOAD", "--intent", "i", "--step", "s"],
])
def test_anything_unusual_goes_to_typer(argv):
    assert fast.plan(argv) is None


def test_global_config_option_is_understood(tmp_path):
    assert fast.plan(["-c", "x.toml", "find"])[1] == "x.toml"
    assert fast.plan(["--config=y.json", "show", "abcdef"])[1:3] == ("y.json", ["abcdef"])


def _heavy_modules_after(argv: list[str]) -> str:
    """Run main(argv) in a fresh interpreter; return "rc [heavy modules it loaded]"."""
    code = (
        "import sys\nfrom cortexctl.cli.app import main\n"
        f"rc = main({argv!r})\n"
        "print(rc, sorted(m for m in ('typer', 'rich', 'pydantic', 'click', 'numpy', 'httpx') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return out.strip().splitlines()[-1]


def test_find_on_the_fast_path_imports_neither_typer_nor_rich_nor_pydantic(ids, store):
    assert _heavy_modules_after(["find", "--store", str(store), "--json"]) == "0 []"


WRITES = [
    (["fact", "hello"], []),
    (["preference", "tabs"], ["--set", "polarity=avoid", "--set=strength=0.8", "--json"]),
    (["goal"], ["--data", '{"statement": "ship", "status": "paused"}', "--tag", "a", "--frame", "build:repo:x"]),
    (["fact", "x"], ["--confidence", "0.5", "--visibility", "public", "--session", "s1", "--short-form", "xx",
                     "--medium-form", "fact: x", "--importance", "7", "--jsonl"]),
    (["fact", "x"], ["--importance", "11"]),
    (["fact", "x"], ["--importance", "-1"]),
    (["bogus", "x"], []),
    (["fact"], []),
    (["fact", "x"], ["--set", "polarity=avoid"]),
    (["fact", "x"], ["--data", "[1]"]),
]
VOLATILE = {"id", "uri", "version_uri", "created_at", "updated_at", "version_created_at"}


def _written(run, store_env: dict, cli) -> dict | None:
    if run.code != 0:
        return None
    uri = run.out.strip() if run.out.startswith("cortex://") else __import__("orjson").loads(run.out)["uri"]
    doc = cli("show", uri, "--json", env=store_env).json()
    return {k: v for k, v in doc.items() if k not in VOLATILE}


@pytest.mark.parametrize("positionals, options", WRITES, ids=[" ".join(p + o) for p, o in WRITES])
def test_fast_write_and_typer_write_store_the_same_memory(positionals, options, tmp_path, cli):
    quick = ["write", *positionals, *options]
    slow = ["write", *options, "--", *positionals]
    assert fast.plan(quick) is not None and fast.plan(slow) is None
    env_a, env_b = {"CORTEXCTL_STORE": str(tmp_path / "a")}, {"CORTEXCTL_STORE": str(tmp_path / "b")}
    a, b = cli(*quick, env=env_a), cli(*slow, env=env_b)
    assert (a.code, a.err) == (b.code, b.err)
    assert _written(a, env_a, cli) == _written(b, env_b, cli)


def test_a_plain_write_loads_neither_typer_nor_numpy(store):
    argv = ["write", "fact", "lean", "--tag", "x", "--frame", "build:repo:y", "--store", str(store)]
    assert _heavy_modules_after(argv) == "0 []"


ATTEST_VECTORS = [
    ([], ["--intent", "i", "--outcome", "success"]),
    (["{f}"], ["--intent", "", "--outcome", "success"]),
    (["{f}"], ["--intent", "i", "--outcome", "maybe"]),
    (["{f}"], ["--outcome", "success"]),
    (["{f}", "cortex://m/xyz"], ["--intent", "a1", "--outcome", "failure", "--reason", "timeout", "--json"]),
    (["{f}", "{g}", "{f}"], ["--intent=a2", "--outcome", "success", "--jsonl"]),
    (["{g}"], ["--intent", "a3", "--outcome", "failure", "--reason=factual_error", "--actor", "bob", "--json"]),
]
CLOCKED = ("seq", "learn_seq", "previous_weights", "new_weights")  # differ between two runs one after the other


@pytest.mark.parametrize("positionals, options", ATTEST_VECTORS,
                         ids=[" ".join([*p, *o]) for p, o in ATTEST_VECTORS])
def test_fast_path_and_typer_attest_alike(positionals, options, ids, cli):
    import orjson

    positionals = [a.format(**ids) for a in positionals]
    quick = ["attest", *positionals, *options]
    slow = ["attest", *options, "--", *positionals]
    assert fast.plan(quick) is not None and fast.plan(slow) is None
    a, b = cli(*quick), cli(*slow)
    assert (a.code, a.err) == (b.code, b.err)
    if a.code == 0:
        docs = [{k: v for k, v in orjson.loads(r.out).items() if k not in CLOCKED} for r in (a, b)]
        assert docs[0] == docs[1]
    else:
        assert a.out == b.out == ""


COMPACT_VECTORS = [
    ([], ["--intent", "i", "--step", "s", "--budget-tokens", "100"]),
    (["{f}"], ["--intent", "i", "--step", "s"]),
    (["{f}"], ["--intent", "i", "--step", "s", "--budget-tokens", "1"]),
    (["{f}"], ["--intent", "../i", "--step", "s", "--budget-tokens", "100"]),
    (["{f}", "{g}"], ["--intent", "c1", "--step", "s", "--budget-tokens", "1000", "--json"]),
    (["{g}"], ["--intent", "c2", "--step=s", "--budget-tokens=1000", "--load-bearing", "{f}", "--jsonl"]),
    (["{g}"], ["--intent", "c3", "--step", "s", "--budget-tokens", "1000", "--actor", "bob"]),
]


@pytest.mark.parametrize("positionals, options", COMPACT_VECTORS,
                         ids=[" ".join([*p, *o]) for p, o in COMPACT_VECTORS])
def test_fast_path_and_typer_compact_alike(positionals, options, ids, cli):
    import orjson

    positionals = [a.format(**ids) for a in positionals]
    options = [a.format(**ids) for a in options]
    quick = ["compact", *positionals, *options]
    slow = ["compact", *options, "--", *positionals]
    assert fast.plan(quick) is not None and fast.plan(slow) is None
    a, b = cli(*quick), cli(*slow)
    assert (a.code, a.err) == (b.code, b.err)
    if a.code == 0 and a.out.startswith("{"):
        def plain(doc):  # without what the clock changes between the two runs
            doc = {k: v for k, v in doc.items() if k not in ("seq", "checkpoint")}
            doc["compacted"] = [{k: v for k, v in c.items() if k != "salience"} for c in doc["compacted"]]
            return doc
        assert plain(orjson.loads(a.out)) == plain(orjson.loads(b.out))
    else:
        assert a.out == b.out


@pytest.mark.parametrize("options", [["--json"], [], ["--jsonl"], ["--step", "none"], ["--actor", "bob"],
                                     ["--intent", "a/b"]])
def test_fast_path_and_typer_load_checkpoints_alike(options, ids, cli, store):
    Cortex(store=store, actor="alice").compact("c1", "s", 1000, [ids["f"], ids["g"]])
    base = ["--intent", "c1", "--step", "s"]
    quick = ["checkpoint", "load", *base, *options]
    slow = ["checkpoint", "load", *base, *options, "--"]
    assert fast.plan(quick) is not None and fast.plan(slow) is None
    a, b = cli(*quick), cli(*slow)
    assert (a.code, a.out, a.err) == (b.code, b.out, b.err)
