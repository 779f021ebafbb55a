"""find in shell scripts: grep's exit status, matched rows only down a pipe, one stderr line when
nothing matched, and -q. Every case runs the installed script with stdout a pipe, as a script does."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from tests.conftest import cortexctl_argv

DEPLOY = "The deploy key rotates monthly"
TABS = "tabs over spaces"


@pytest.fixture
def two(cli):
    """Two memories of the default actor: the deploy key fact and a preference; name -> URI."""
    uris = {}
    for name, args in (("deploy", ("fact", DEPLOY, "--tag", "ops")), ("tabs", ("preference", TABS))):
        r = cli("write", *args)
        assert r.code == 0, r
        uris[name] = r.out.strip()
    return uris


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_a_match_exits_0_and_the_pipe_gets_only_matched_rows(cli_proc, two):
    r = cli_proc("find", "--near", "deploy key", "-k", "10")
    assert r.code == 0, r
    assert _lines(r.out) == [f"{two['deploy']}\tfact\t{DEPLOY}"]  # the preference came by salience alone
    assert r.err == ""
    r = cli_proc("find", "--near", "deploy key", "-k", "10", "--include-unmatched")
    assert r.code == 0, r
    assert [line.split("\t")[0] for line in _lines(r.out)] == [two["deploy"], two["tabs"]]


def test_nothing_matched_exits_1_prints_no_row_and_says_so_in_one_stderr_line(cli_proc, two):
    r = cli_proc("find", "--near", "zebra quantum pancake")
    assert r.code == 1, r
    assert r.out == ""
    (line,) = _lines(r.err)
    assert line.startswith("cortexctl: nothing matched 'zebra quantum pancake'") and "--include-unmatched" in line
    r = cli_proc("find", "--near", "zebra quantum pancake", "--include-unmatched")
    assert r.code == 1, r  # asked for, the rows are printed; still nothing matched
    assert {line.split("\t")[0] for line in _lines(r.out)} == set(two.values())
    assert len(_lines(r.err)) == 1 and "nothing matched" in r.err


def test_without_near_any_result_is_a_match_and_none_exits_1(cli_proc, two):
    r = cli_proc("find", "--tag", "ops")
    assert r.code == 0 and _lines(r.out) == [f"{two['deploy']}\tfact\t{DEPLOY}"], r
    r = cli_proc("find", "--tag", "nothing-has-this")
    assert r.code == 1 and r.out == "", r
    assert _lines(r.err) == ["cortexctl: no memories match"]


def test_quiet_prints_nothing_and_answers_with_the_status_alone(cli_proc, two):
    for args, code in ((["--near", "deploy key"], 0), (["--near", "zebra quantum pancake"], 1),
                       (["--tag", "ops"], 0), (["--tag", "nothing-has-this"], 1),
                       (["--near", "zebra quantum pancake", "--json"], 1), (["--near", "deploy key", "--jsonl"], 0)):
        for quiet in ("-q", "--quiet"):
            r = cli_proc("find", quiet, *args)
            assert (r.code, r.out, r.err) == (code, "", ""), r


def test_json_and_jsonl_keep_every_row_with_matched_and_exit_as_the_answer(cli_proc, two):
    r = cli_proc("find", "--near", "zebra quantum pancake", "--json")
    assert r.code == 1 and r.err == "", r
    doc = r.json()
    assert doc["matched"] is False and doc["count"] == 2
    assert [h["matched"] for h in doc["results"]] == [False, False]
    r = cli_proc("find", "--near", "deploy key", "--json")
    assert r.code == 0 and r.json()["matched"] is True, r
    assert {h["uri"]: h["matched"] for h in r.json()["results"]} == {two["deploy"]: True, two["tabs"]: False}
    r = cli_proc("find", "--near", "zebra quantum pancake", "--jsonl")
    assert r.code == 1 and [h["matched"] for h in r.jsonl()] == [False, False], r
    r = cli_proc("find", "--tag", "nothing-has-this", "--json")
    assert r.code == 1 and r.json()["matched"] is False and r.json()["results"] == [], r


def test_errors_keep_their_own_codes(cli_proc, store, two):
    r = cli_proc("find", "-q", "--near", "deploy key", "--store", str(store.parent / "no-store-here"))
    assert r.code == 3 and "no store" in r.err, r  # an error is never silenced by -q
    r = cli_proc("find", "-q", "--near", "deploy key", "-k", "0")
    assert r.code == 2, r
    r = cli_proc("find", "-q", "--near", "deploy key", "--", "extra")  # the Typer path answers the same way
    assert r.code == 2, r
    r = cli_proc("find", "--near", "zebra quantum pancake", "--")  # and exits 1 for nothing matched too
    assert r.code == 1 and r.out == "", r


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_shell_reads_the_status_through_if_and_a_pipe(store, two, tmp_path):
    script = """
    if cortexctl find -q --near "deploy key"; then echo yes-deploy; fi
    if cortexctl find -q --near "zebra quantum pancake"; then echo yes-zebra; else echo no-zebra; fi
    cortexctl find --near "zebra quantum pancake" | head -1; echo "status ${PIPESTATUS[0]}"
    cortexctl find --near "deploy key" | cut -f3
    """
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "cortexctl").write_text("#!/bin/sh\nexec " + " ".join(f"'{a}'" for a in cortexctl_argv()) + ' "$@"\n')
    (bindir / "cortexctl").chmod(0o755)
    env = dict(os.environ, CORTEXCTL_STORE=str(store), PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc
    assert proc.stdout.splitlines() == ["yes-deploy", "no-zebra", "status 1", DEPLOY], proc
    assert _lines(proc.stderr) == ["cortexctl: nothing matched 'zebra quantum pancake' by words or meaning "
                                   "(--include-unmatched prints the most salient memories instead)"], proc


def test_a_find_ends_its_process_with_every_row_written_and_the_pipe_closed_early_is_quiet(cli_proc, store, tmp_path):
    """A find ends its process without the interpreter's teardown (``common.end_without_teardown``):
    output larger than a pipe holds is all there, and a reader that stops early is no error."""
    lines = tmp_path / "many.jsonl"
    lines.write_text("".join(f'{{"type": "fact", "text": "walrus note {i} {"padding " * 120}"}}\n' for i in range(300)))
    assert cli_proc("import", lines).code == 0
    r = cli_proc("find", "--near", "walrus note", "-k", "300", "--form", "full", "--jsonl")
    assert r.code == 0 and r.err == "", r
    docs = r.jsonl()
    assert len(docs) == 300 and len(r.out) > 4 * 65536
    assert {re.search(r"walrus note (\d+) ", d["text"])[1] for d in docs} == {str(i) for i in range(300)}
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "cortexctl").write_text("#!/bin/sh\nexec " + " ".join(f"'{a}'" for a in cortexctl_argv()) + ' "$@"\n')
    (bindir / "cortexctl").chmod(0o755)
    env = dict(os.environ, CORTEXCTL_STORE=str(store), PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}")
    script = 'cortexctl find --near "walrus note" -k 300 --form full | head -1 | cut -f2; echo "status ${PIPESTATUS[0]}"'
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert proc.stdout.splitlines() == ["fact", "status 0"] and proc.stderr == "", proc


def test_the_commands_an_agent_runs_every_turn_end_their_process_with_everything_printed(cli_proc, two):
    """show, history, context and pinned end like find (``spec.ENDS_WITHOUT_TEARDOWN``): the whole
    answer on stdout, the exit status, and an error still one line with its code."""
    deploy = two["deploy"]
    r = cli_proc("show", deploy, "--json")
    assert r.code == 0 and r.err == "" and r.json()["data"]["statement"] == DEPLOY, r
    r = cli_proc("history", deploy)
    assert r.code == 0 and len(_lines(r.out)) == 1 and DEPLOY in r.out, r
    r = cli_proc("context", "--goal", "rotate the deploy key", "--json")
    assert r.code == 0 and DEPLOY in r.json()["text"], r
    r = cli_proc("pinned", "--goal", "rotate the deploy key")
    assert r.code == 0 and "rotate the deploy key" in r.out, r
    r = cli_proc("show", "cortex://m/01ARZ3NDEKTSV4RRFFQ69G5FAV")
    assert r.code == 3 and r.out == "" and len(_lines(r.err)) == 1, r


def test_a_command_that_ends_without_teardown_runs_on_without_the_cyclic_collector(store):
    """Once a read-only command asks to end without teardown, the cyclic garbage collector is off
    (its passes over every imported object cost a cold find about 3%; the process ends soon). Run
    by ``app.main`` given its arguments (the process goes on), the collector is back on after."""
    import gc

    from cortexctl.cli import common
    from cortexctl.cli.app import main

    seen = []
    real = common.end_without_teardown

    def spy():
        real()
        seen.append(gc.isenabled())

    was = gc.isenabled()
    try:
        gc.enable()
        common.end_without_teardown = spy
        assert main(["write", "fact", "walrus deploy note", "--store", str(store)]) == 0
        assert main(["find", "--near", "walrus deploy", "--store", str(store)]) == 0
        assert main(["show", "cortex://m/01ARZ3NDEKTSV4RRFFQ69G5FAV", "--store", str(store)]) == 3
        assert seen == [False, False] and gc.isenabled() and not common._quick_exit
    finally:
        common.end_without_teardown = real
        common._quick_exit = False
        if was:
            gc.enable()
