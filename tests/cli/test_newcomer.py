"""What a newcomer trips on (issue 12): each item held by a test that failed before its fix."""

from __future__ import annotations

import re

import pytest


def test_show_labels_the_version_confidence_apart_from_the_data_confidence(cli):
    uri = cli("write", "fact", "The deploy key rotates monthly").out.strip()
    cli("update", uri, "--set", "confidence=0.9")
    out = cli("show", uri).out
    header, _, body = out.partition("\n\n")
    assert "version confidence: 1" in header
    assert not re.search(r"(?<!version )confidence: ", header)
    assert "confidence: 0.9" in body


def test_a_failure_attest_that_affected_nothing_says_citations_0(cli):
    cli("write", "fact", "x")
    r = cli("attest", "--intent", "i-1", "--outcome", "failure", "--reason", "factual_error",
            "cortex://m/01JD3KQ5ZC8M3V6W4Y2T7N9R0B")
    assert r.code == 0, r
    assert "0 memories affected, citations 0" in r.out
    assert "citations -1" not in r.out


def test_a_failure_attest_that_affected_a_memory_says_citations_minus_1(cli):
    uri = cli("write", "fact", "x").out.strip()
    r = cli("attest", "--intent", "i-1", "--outcome", "failure", "--reason", "factual_error", uri)
    assert "1 memory affected, citations -1" in r.out


def test_store_actor_and_wait_before_the_command_name_work_on_the_parser_path(cli, tmp_path):
    other = tmp_path / "other"
    uri = cli("--store", str(other), "--actor", "bob", "--wait", "2", "write", "fact", "hello there",
              use_store=False).out.strip()
    assert uri.startswith("cortex://m/")
    found = cli("--store=" + str(other), "--actor=bob", "find", "--near", "hello", "--json", use_store=False).json()
    assert [r["uri"] for r in found["results"]] == [uri]
    (tmp_path / "c.toml").write_text("")
    assert cli("-c", str(tmp_path / "c.toml"), "--store", str(other), "--actor", "bob", "show", uri,
               "--json", use_store=False).json()["actor"] == "bob"


def test_store_before_the_command_name_works_on_the_typer_path(cli, tmp_path):
    from cortexctl.cli import parser

    other = tmp_path / "other"
    cli("--store", str(other), "write", "fact", "x", use_store=False)
    # help, and a usage error, are Typer's: the leading --store is not what it complains about
    assert parser.plan(["--store", str(other), "show", "--help"]) is None
    r = cli("--store", str(other), "show", "--help", use_store=False)
    assert r.code == 0 and "cortexctl show" in r.out
    r = cli("--store", str(other), "find", "-k", "many", use_store=False)
    assert r.code == 2 and "--store" not in r.err and "-k" in r.err


def test_hoist_moves_only_leading_store_options_after_the_command_words():
    from cortexctl.cli.parser import hoist

    assert hoist(["--store", "X", "checkpoint", "load", "--intent", "i"]) == \
        ["checkpoint", "load", "--store", "X", "--intent", "i"]
    assert hoist(["-c", "c.toml", "--wait=3", "find"]) == ["-c", "c.toml", "find", "--wait=3"]
    assert hoist(["find", "--store", "X"]) == ["find", "--store", "X"]
    assert hoist(["--store", "X", "nosuch"]) == ["--store", "X", "nosuch"]
    assert hoist(["--store"]) == ["--store"]


def _visible_commands():
    from cortexctl.cli.registry import commands

    return [c for c in commands() if not c.hidden]


@pytest.mark.parametrize("command", _visible_commands(), ids=lambda c: " ".join(c.words))
def test_help_shows_declared_metavars_never_python_types(cli, command):
    r = cli(*command.words, "--help", use_store=False)
    assert r.code == 0, r
    assert not re.search(r"<(?:str|int|float|bool|text|list\[\w+\])>", r.out, re.I), r.out
    for arg in command.arguments:
        assert re.search(rf"^\s+{re.escape(arg.metavar)}\s", r.out, re.M), (arg.metavar, r.out)
    for opt in command.options:
        if opt.metavar and not opt.is_flag:
            assert re.search(rf"(?:{'|'.join(map(re.escape, opt.flags))}) {re.escape(opt.metavar)}(?:\s|$)", r.out, re.M), \
                (opt.flags, opt.metavar, r.out)
