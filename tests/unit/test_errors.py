"""Every error class carries the exit code SPEC.md documents."""

from __future__ import annotations

import inspect
import os

import pytest

import cortexctl.errors as errors

DOCUMENTED = {
    "CortexError": 1, "UsageError": 2, "AmbiguousRef": 2, "ConfigError": 2, "NotFound": 3, "StoreBusy": 4,
    "RateLimited": 5, "BudgetUnreachable": 6, "IntegrityError": 7, "Refused": 8, "ProviderUnreachable": 9, "StoreUnreachable": 9,
    "InvalidData": 10, "NoSpace": 1, "Tombstoned": 1, "SchemaTooNew": 1, "NotForgotten": 1,
}


def test_every_error_class_has_its_documented_exit_code():
    classes = {n: c for n, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, errors.CortexError)}
    assert set(classes) == set(DOCUMENTED)
    for name, cls in classes.items():
        assert cls.exit_code == DOCUMENTED[name], name
        assert cls.exit_code in errors.EXIT_CODES.values()
        if cls.kind in errors.EXIT_CODES:
            assert errors.EXIT_CODES[cls.kind] == cls.exit_code, name


def test_error_json_names_kind_message_and_code():
    err = errors.StoreBusy("store /x is busy", hint="retry")
    assert err.to_json() == {"error": "busy", "message": "store /x is busy", "exit_code": 4, "hint": "retry"}


def test_a_write_that_ran_out_of_room_is_no_space_however_it_arrives():
    import errno

    for code in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
        err = errors.no_space(OSError(code, os.strerror(code), "/s/cortex.duckdb"))
        assert isinstance(err, errors.NoSpace) and err.exit_code == 1
        assert "/s/cortex.duckdb" in err.message and os.strerror(code) in err.message
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise RuntimeError("worker failed") from inner
    except RuntimeError as outer:
        assert isinstance(errors.no_space(outer), errors.NoSpace)  # found through the chain
    duck = Exception('IO Error: Could not write file "x.wal": No space left on device')
    assert "No space left on device" in errors.no_space(duck).message
    assert errors.no_space(OSError(errno.EACCES, "Permission denied")) is None
    assert errors.no_space(ValueError("bad")) is None


def test_nesting_past_the_limit_is_refused_at_any_depth_without_recursion():
    import pytest

    value: list = []
    for _ in range(100_000):
        value = [value]
    with pytest.raises(errors.InvalidData, match=f"^x: nested more than {errors.MAX_NESTING} levels deep$"):
        errors.check_nesting(value, "x")
    ok: dict = {}
    for _ in range(errors.MAX_NESTING - 1):
        ok = {"a": ok}  # MAX_NESTING maps, one in another: the most allowed
    assert errors.check_nesting(ok, "x") is ok
    with pytest.raises(errors.ConfigError, match="^cfg: nested"):
        errors.check_nesting([ok], "cfg", errors.ConfigError)


def test_a_path_that_cannot_name_a_file_is_a_usage_error_with_the_path_shortened():
    import errno

    err = errors.bad_path(OSError(errno.ENAMETOOLONG, "File name too long", "x" * 5000))
    assert isinstance(err, errors.UsageError) and err.exit_code == 2
    assert err.message.endswith(": File name too long") and len(err.message) < 120
    assert errors.bad_path(OSError(errno.ENOENT, "No such file or directory", "x")) is None


def test_a_file_in_the_way_is_one_line_naming_it_the_rename_by_its_destination():
    import errno

    err = errors.blocked_path(OSError(errno.EISDIR, "Is a directory", "/s/.x.tmp", None, "/s/cortex.usearch.json"))
    assert type(err) is errors.CortexError and err.exit_code == 1
    assert err.message == "/s/cortex.usearch.json: Is a directory"
    for code, text in ((errno.ENOTDIR, "Not a directory"), (errno.EACCES, "Permission denied"),
                       (errno.EROFS, "Read-only file system")):
        assert errors.blocked_path(OSError(code, text, "/s/f")).message == f"/s/f: {text}"
    long = errors.blocked_path(OSError(errno.EACCES, "Permission denied", "/" + "d" * 5000))
    assert len(long.message) < 200 and "..." in long.message
    assert errors.blocked_path(OSError(errno.EACCES, "Permission denied")) is None  # no path to name
    assert errors.blocked_path(OSError(errno.EIO, "Input/output error", "/s/f")) is None


_SIGNAL_IN_IMPORT = """\
import signal, sys, time
from cortexctl.errors import interrupt_on_signals, signalled

interrupt_on_signals()
sys.path.insert(0, sys.argv[1])
try:
    import sends_itself_a_signal
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the signal, sent again once the import is over, lands here
        time.sleep(0.001)
    print("never interrupted")
except KeyboardInterrupt as exc:
    print(type(exc).__name__, "sends_itself_a_signal" in sys.modules, signalled() == int(sys.argv[2]))
"""

_MODULE = """\
import os, sys, time
kept = sys.modules.get("threading")
sys.modules["threading"] = None  # a module half made by this import: importing it now fails
os.kill(os.getpid(), {signum})
for _ in range(20):
    time.sleep(0.005)  # Python code of the import, where the handler would otherwise raise
if kept is None:
    del sys.modules["threading"]
else:
    sys.modules["threading"] = kept
DONE = True
"""


_SIGNAL_IN_HELD_BLOCK = """\
import os, sys, time
from cortexctl.errors import interrupt_on_signals, interrupts_held, signalled

interrupt_on_signals()
said = []
try:
    with interrupts_held():
        os.kill(os.getpid(), int(sys.argv[1]))
        for _ in range(20):
            time.sleep(0.005)  # Python code, where the handler would otherwise raise
        said.append("the block ran to its end")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the signal, sent again once the block is over, lands here
        time.sleep(0.001)
    print("never interrupted")
except KeyboardInterrupt as exc:
    print(*said, type(exc).__name__, signalled() == int(sys.argv[1]), sep="; ")
"""


@pytest.mark.parametrize("signum, raised", [(2, "KeyboardInterrupt"), (15, "Terminated")])
def test_a_signal_that_lands_in_a_block_holding_interrupts_is_raised_once_the_block_is_over(signum, raised):
    """Starting a worker process must not be left half done (its start-up data half written): a
    signal that lands in ``interrupts_held`` waits for the block, then stops the command."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _SIGNAL_IN_HELD_BLOCK, str(signum)], cwd=root,
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"the block ran to its end; {raised}; True\n", "")


_TWICE = """\
import os, time
os.kill(os.getpid(), 15)
time.sleep(0.05)  # in the import still: the first is put off
os.kill(os.getpid(), 15)
for _ in range(200):
    time.sleep(0.005)
print("the import went on", flush=True)
DONE = True
"""


def test_a_second_sigterm_while_the_first_waits_for_an_import_ends_the_process_at_once(tmp_path):
    """SIGTERM put off until an import is over is still the first: a second one ends the process by
    its default action, as a second SIGTERM does anywhere else."""
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "sends_itself_a_signal.py").write_text(_TWICE)
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _SIGNAL_IN_IMPORT, str(tmp_path), "15"], cwd=root,
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (-15, "", "")


@pytest.mark.parametrize("signum, raised", [(2, "KeyboardInterrupt"), (15, "Terminated")])
def test_a_signal_that_lands_while_a_module_is_imported_is_raised_once_the_import_is_over(tmp_path, signum, raised):
    """Ctrl-C or SIGTERM raised inside a compiled module's initialisation aborts the process (DuckDB's
    makes enums through Python code: "Critical nanobind error"); so a signal that lands during any
    import waits for it to end, and is raised after, as the command's interrupt. The wait imports
    nothing: the module being made may be one the handler would import."""
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "sends_itself_a_signal.py").write_text(_MODULE.format(signum=signum))
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _SIGNAL_IN_IMPORT, str(tmp_path), str(signum)], cwd=root,
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{raised} True True\n", "")
