"""The two ways the tests run cortexctl agree, and the installed console script works.

Most tests use the ``cli`` fixture, which calls ``cortexctl.cli.app.main`` in the
test process (fast); ``cli_proc`` runs the installed console script as a
subprocess. Here the same argument vectors go through both and must give the
same exit code, stdout and stderr; and the console script is exercised on its
own for a write and a find, a usage error and --help.
"""

from __future__ import annotations

import os
import sys

import pytest

from tests.conftest import assert_clean_error

NOT_UTF8 = "\udcff"  # the byte 0xff on the command line, as Python decodes it

# (args, stdin, env): none of them writes, so both runners can share one store.
VECTORS = [
    (("--help",), None, {}),
    (("--version",), None, {}),
    (("find", "--help"), None, {}),
    (("checkpoint", "load", "--help"), None, {}),
    ((), None, {}),
    (("bogus",), None, {}),
    (("write", "bogus", "x"), None, {}),
    (("write", "fact", "x", "--colour", "red", "--json"), None, {}),
    (("write", "fact", "caf" + NOT_UTF8), None, {}),
    (("find", "--near", NOT_UTF8, "--json"), None, {}),
    (("write", "fact", "--data", "-"), b'{"statement": ', {}),
    (("write", "fact", "--data", "-"), b'{"statement": "caf\xe9"}', {}),
    (("import", "-"), b'{"type": "bogus", "text": "x"}\n{"type": "fact", "text": ""}\n', {}),
    (("import", "-", "--json"), "{\"type\": \"fact\", \"text\": \"ünïcödé ✓\", \"importance\": 11}\n", {}),
    (("find", "--json"), None, {}),
    (("find", "-k", "0"), None, {}),
    (("show", "01ZZZZZZ"), None, {}),
    (("show", "cortex://m/xyz", "--json"), None, {}),
    (("config", "show", "--json"), None, {"CORTEXCTL_ACTOR": "zed", "CORTEXCTL_WAIT": "3"}),
    (("config", "show"), None, {"CORTEXCTL_WAIT": "soon"}),
    (("find", "--near", "x"), None, {"CORTEXCTL_EMBED_PROVIDER": "magic"}),
    (("verify", "--json"), None, {"CORTEXCTL_DEBUG": "1"}),
]


@pytest.fixture
def written(cx):
    """A store with a memory in it, so the read-only vectors have something to read."""
    cx.write("fact", "The deploy key rotates monthly", tags=["ops"])
    return cx


@pytest.mark.parametrize("args, stdin, env", VECTORS, ids=[" ".join(v[0]).encode("ascii", "replace").decode()
                                                           or "(none)" for v in VECTORS])
def test_in_process_and_subprocess_give_the_same_result(args, stdin, env, written, cli, cli_proc):
    a = cli(*args, input=stdin, env=env)
    b = cli_proc(*args, input=stdin, env=env)
    assert (a.code, a.out, a.err) == (b.code, b.out, b.err)


def test_the_installed_console_script_writes_and_finds(cli_proc, store):
    written = cli_proc("write", "fact", "The deploy key rotates monthly", "--tag", "ops")
    assert written.code == 0 and written.err == "", written
    uri = written.out.strip()
    assert uri.startswith("cortex://m/")
    found = cli_proc("find", "--near", "deploy key", "--json")
    assert found.code == 0, found
    assert [r["uri"] for r in found.json()["results"]] == [uri]
    assert cli_proc("find", "--tag", "ops").out.startswith(uri + "\tfact\t")


def test_the_installed_console_script_reports_a_usage_error_with_exit_2(cli_proc):
    run = cli_proc("write", "fact", "x", "--colour", "red")
    assert_clean_error(run, 2)
    assert "--colour" in run.err


def test_the_installed_console_script_prints_help(cli_proc):
    run = cli_proc("--help", use_store=False)
    assert run.code == 0 and "Examples:" in run.out and "find" in run.out and run.err == ""


def test_the_in_process_runner_puts_everything_back(cli):
    streams, argv, env = (sys.stdin, sys.stdout, sys.stderr), sys.argv, dict(os.environ)
    run = cli("config", "show", env={"CORTEXCTL_WAIT": "7", "CORTEXCTL_NEW_VARIABLE": "x"}, input=b"unread")
    assert run.code == 0, run
    assert "wait\t7.0\tenv CORTEXCTL_WAIT" in run.out.splitlines()
    assert (sys.stdin, sys.stdout, sys.stderr) == streams and sys.argv is argv and dict(os.environ) == env


def test_the_in_process_runner_puts_everything_back_when_main_raises(cli, monkeypatch):
    import cortexctl.cli.app

    class Escaped(BaseException):
        pass

    seen = {}

    def explode(argv):
        seen["argv"], seen["env"] = list(sys.argv), os.environ.get("CORTEXCTL_WAIT")
        seen["tty"] = (sys.stdout.isatty(), sys.stderr.isatty())
        sys.stdout.write("half a line")
        raise Escaped()

    monkeypatch.setattr(cortexctl.cli.app, "main", explode)
    streams, argv, env = (sys.stdin, sys.stdout, sys.stderr), sys.argv, dict(os.environ)
    with pytest.raises(Escaped):
        cli("find", env={"CORTEXCTL_WAIT": "3"})
    assert seen["argv"][1:] == ["find"] and seen["env"] == "3" and seen["tty"] == (False, False)
    assert (sys.stdin, sys.stdout, sys.stderr) == streams and sys.argv is argv and dict(os.environ) == env


def test_system_exit_from_main_becomes_the_exit_code(cli, monkeypatch):
    import cortexctl.cli.app

    def leave(code):
        def main(argv):
            raise SystemExit(code)
        return main

    for code, expected, err in ((None, 0, ""), (3, 3, ""), ("bye", 1, "bye\n")):
        monkeypatch.setattr(cortexctl.cli.app, "main", leave(code))
        run = cli("find")
        assert (run.code, run.out, run.err) == (expected, "", err)


@pytest.mark.parametrize("closed", [">&-", "<&-", "2>&-"])
def test_a_command_started_with_a_standard_stream_closed_says_nothing_it_should_not(cli_proc, store, closed):
    """Started with stdout (or stdin, or stderr) closed, Python leaves ``sys.stdout`` None: every
    command's last flush was an internal error with a traceback, and the next file opened took
    descriptor 1. The closed stream is /dev/null now."""
    import subprocess

    from tests.conftest import cortexctl_argv

    assert cli_proc("write", "fact", "a memory to verify").code == 0
    done = subprocess.run(["sh", "-c", f'"$@" verify {closed}', "sh", *cortexctl_argv()], capture_output=True,
                          timeout=120, env={**os.environ, "CORTEXCTL_STORE": str(store)})
    assert done.returncode == 0 and b"Traceback" not in done.stderr and b"internal error" not in done.stderr, done


def test_export_into_a_descriptor_open_for_reading_is_a_usage_error(cli_proc, store):
    assert cli_proc("write", "fact", "a memory to export").code == 0
    run = cli_proc("export", "--out", "/dev/stdin", input=b"what stdin holds\n")
    assert run.code == 2 and "/dev/stdin" in run.err and "reading only" in run.err and run.err.count("\n") == 1, run
