"""Bad input of every kind, for every command (SPEC §13).

Every case runs cortexctl's entry point (``main``, in the test process through the ``cli``
fixture; tests/cli/test_runner.py checks that it answers as the installed console script
does) and pins down three things:

- the message: exactly one line on stderr starting ``cortexctl: `` (or, with
  ``--json``/``--jsonl`` on the command line, exactly one JSON object with
  ``error``, ``message`` and ``exit_code``), no traceback, nothing on stdout;
- the documented exit code (2 usage, 3 not found, 8 refused, 10 invalid data,
  1 failed; 7 for a store that is not a DuckDB file);
- nothing was written: every table of the store (heads, versions, frames,
  journal, ...) and the file names in the store directory are identical before
  and after, and so is every input file and directory the case points at. A
  case against a store that does not exist leaves no store behind (or, for the
  commands that open it for writing, an empty one).

``import`` is the one command whose rejection is more than one line: one
``cortexctl: line N: ...`` per bad line, then one summary line.

The store with the memories the cases refer to is built once per module with
the engine and copied into each test's store directory, which keeps the file
fast (the cost is the command itself, one per case).
"""

from __future__ import annotations

import io
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest

from cortexctl import Cortex
from cortexctl.engine.results import FindQuery
from tests import tamper
from tests.conftest import Run, assert_clean_error, assert_store_verifies

# -- the shared store ------------------------------------------------------------------

# Two memories whose IDs share the 6-character prefix "01JAMB": that prefix is ambiguous.
AMBIG_PREFIX = "01JAMB"
AMBIG_A = AMBIG_PREFIX + "0" * 19 + "A"
AMBIG_B = AMBIG_PREFIX + "0" * 19 + "B"
UNKNOWN_ID = "7" + "Z" * 25  # a valid ID that no memory has
UNKNOWN_PREFIX = "7ZZZZZ"
MAX_TEXT = 32 * 1024


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A store with one memory of each kind the cases need, built once with the engine."""
    root = tmp_path_factory.mktemp("bad-input-template")
    with pytest.MonkeyPatch.context() as mp:
        for key in list(os.environ):
            if key.startswith("CORTEXCTL_"):
                mp.delenv(key)
        mp.setenv("HOME", str(root / "home"))
        mp.setenv("XDG_CONFIG_HOME", str(root / "home" / ".config"))
        mp.setenv("XDG_DATA_HOME", str(root / "home" / ".local" / "share"))
        path = root / "store"
        cx = Cortex(store=path, actor="alice")
        ids = {
            "fact": cx.write("fact", "The deploy key rotates monthly", tags=["ops"],
                             frames=["deliver:repo:acme/api"]).id,
            "pref": cx.write("preference", "tabs over spaces").id,
            "constraint": cx.write("constraint", "never push to main", sets=["strength=hard"]).id,
            "goal": cx.write("goal", "ship v2").id,
            "public": cx.write("fact", "The office wifi is guest-net", visibility="public").id,
            "gone": cx.write("fact", "The old deploy key is in vault A").id,
        }
        cx.update(ids["fact"], "The deploy key rotates weekly")  # two versions
        cx.forget(ids["gone"], reason="superseded by the new key policy")
        lines = b"".join(
            orjson.dumps({"type": "fact", "text": f"ambiguous {i}", "id": id_}) + b"\n"
            for i, id_ in enumerate((AMBIG_A, AMBIG_B))
        )
        assert cx.import_jsonl(io.BytesIO(lines)).imported == 2
        assert_store_verifies(path)
    ids["ambig"] = AMBIG_PREFIX
    ids["unknown"] = UNKNOWN_ID
    ids["unknown_prefix"] = UNKNOWN_PREFIX
    return path, ids, store_state(path)


@pytest.fixture
def world(template, store) -> dict[str, str]:
    """The template store copied into this test's store; returns the memory IDs by role."""
    path, ids, _ = template
    shutil.copytree(path, store)
    return dict(ids)


@pytest.fixture
def before(template, world) -> dict:
    """The state of this test's store before the command: the template's, which it is a copy of."""
    return template[2]


BIG_DATA = orjson.dumps({"statement": "a" * (MAX_TEXT + 1)})
DEEP = "[" * 10_000 + "]" * 10_000
DEEP_65 = '{"statement": "x", "source": ' + "[" * 64 + "]" * 64 + "}"
DEEP_DATA = ('{"statement": "x", "source": ' + DEEP + "}").encode()
DEEP_LINE = ('{"type": "fact", "data": {"statement": "x", "source": ' + DEEP + "}}\n").encode()


@pytest.fixture
def inputs(tmp_path) -> Path:
    """Files and directories the cases point at; none may change."""
    d = tmp_path / "in"
    d.mkdir()
    (d / "adir").mkdir()
    (d / "afile").write_text("a regular file, not a store\n")
    (d / "big.json").write_bytes(BIG_DATA)
    (d / "huge.json").write_bytes(orjson.dumps(
        {"statement": "s" * 30000, "subject": "u" * 30000, "predicate": "p" * 30000}))
    (d / "good.jsonl").write_bytes(b'{"type": "fact", "text": "a good line"}\n')
    (d / "bad.toml").write_text("wait = [\n")
    (d / "wait.toml").write_text("wait = -1\n")
    (d / "unknown.toml").write_text('colour = "red"\n')
    (d / "bad.json").write_text('{"wait": \n')
    (d / "deep.json").write_text('{"statement": "x", "source": ' + DEEP + "}")
    (d / "deep.toml").write_text("wait = " + DEEP + "\n")
    (d / "deep-tables.toml").write_text("[" + ".".join(["a"] * 100) + "]\nb = 1\n")
    xdg = d / "xdg" / "cortexctl"
    xdg.mkdir(parents=True)
    (xdg / "config.toml").write_text("wait = [\n")
    with open(d / "sparse.toml", "wb") as fh:  # past the bound on a config file; read whole, 16 MiB of NULs
        fh.truncate(16 * 1024 * 1024 + 1)
    noperm = d / "noperm.toml"
    noperm.write_text("wait = 1\n")
    noperm.chmod(0)
    return d


# -- state before and after ------------------------------------------------------------

DATA_TABLES = ("heads", "versions", "frames", "journal")
# Stronger than comparing `cortexctl export` and the journal length: export shows only what
# one actor may see and leaves out the frame index and the schema tables.


def store_state(path: Path) -> dict | None:
    """Every row of every table, and the file names in the store directory; None if no store."""
    if not path.exists():
        return None
    state: dict = {"files": sorted(p.name for p in path.iterdir()), "tables": {}}
    if tamper.db_file(path).is_file():
        state["tables"] = tamper.every_table(path)
    return state


def tree_state(root: Path) -> dict:
    """Every path under root with its kind, size, mode and mtime."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            out[str(p.relative_to(root))] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


def assert_no_store_or_empty(path: Path, *, may_create: bool) -> None:
    state = store_state(path)
    if state is None:
        return
    assert may_create, f"a failed command created a store at {path}: {state['files']}"
    for t in DATA_TABLES:
        assert not state["tables"].get(t), f"a failed command wrote to {t} in a new store at {path}"


def _expand(text: str, values: dict[str, str]) -> str:
    return re.sub(r"<(\w+)>", lambda m: values[m.group(1)], text)


# -- the table -----------------------------------------------------------------------

@dataclass(frozen=True)
class Bad:
    args: tuple[str, ...]
    code: int
    words: tuple[str, ...] = ()  # each must appear in stderr (case-insensitive)
    env: dict[str, str] = field(default_factory=dict)
    stdin: bytes | None = None
    kind: str | None = None  # the "error" of the JSON report
    may_create: bool = False  # against a missing store: an empty store may be left behind


def bad(id_: str, args: str | tuple, code: int, *words: str, marks=(), **kw):
    return pytest.param(Bad(tuple(args.split()) if isinstance(args, str) else args, code, words, **kw),
                        id=id_, marks=marks)


NOT_ROOT = pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                              reason="root can read a mode-000 file")
SHORT_OVER = "x" * 201  # 51 tokens: over the 50-token short budget
# A byte that is not UTF-8 in argv: Python hands it to cortexctl as a lone surrogate.
NOT_UTF8 = "\udcff"

CASES = [
    # write: types, frames, head fields on the command line (usage, 2)
    bad("write-unknown-type", "write bogus x", 2, "unknown memory type", "bogus", "fact"),
    bad("write-frame-malformed", "write fact x --frame bad", 2, "frame", "VERB:KIND:REF"),
    bad("write-frame-unknown-verb", "write fact x --frame fly:repo:acme/api", 2, "unknown verb", "fly"),
    bad("write-frame-unknown-kind", "write fact x --frame build:spaceship:x", 2, "unknown object kind", "spaceship"),
    bad("write-importance-11", "write fact x --importance 11", 2, "importance", "11"),
    bad("write-importance-negative", "write fact x --importance -1", 2, "importance", "-1"),
    bad("write-visibility", "write fact x --visibility secret", 2, "visibility", "secret"),
    bad("write-confidence-flag-over-1", "write fact x --confidence 1.5", 2, "confidence"),
    bad("write-set-without-equals", "write fact x --set confidence", 2, "FIELD=VALUE"),
    bad("write-unknown-option", "write fact x --colour red", 2, "--colour"),
    bad("write-missing-type", "write", 2, "missing argument"),
    bad("write-store-is-a-file", "write fact x --store <in>/afile", 2, "not a directory"),
    # write: --data sources (a missing file or a directory is usage, bad content is data)
    bad("write-data-missing-file", "write fact --data @<in>/nope.json", 2, "no such file"),
    bad("write-data-directory", "write fact --data @<in>/adir", 2, "directory"),
    bad("write-data-bad-json", ("write", "fact", "--data", '{"statement": '), 10, "JSON"),
    bad("write-data-json-array", ("write", "fact", "--data", '["x"]'), 10, "object"),
    bad("write-data-control-character", ("write", "fact", "--data", '{"statement": "a\tb"}'), 10,
        "invalid control character at line 1 column"),
    # write: data that breaks the type's schema (invalid data, 10)
    bad("write-preference-polarity", "write preference x --set polarity=sideways", 10, "polarity", "sideways"),
    bad("write-constraint-strength", "write constraint x --set strength=extreme", 10, "strength", "extreme"),
    bad("write-goal-status", "write goal x --set status=done", 10, "status", "done"),
    bad("write-confidence-set-over-1", "write fact x --set confidence=1.5", 10, "confidence", "1.5"),
    bad("write-unknown-field-set", "write fact x --set colour=red", 10, "colour", "unknown field"),
    bad("write-unknown-field-data", ("write", "fact", "x", "--data", '{"colour": "red"}'), 10, "colour"),
    bad("write-oversized-text-data-file", "write fact --data @<in>/big.json", 10, "statement", str(MAX_TEXT)),
    bad("write-oversized-text-stdin", "write fact --data -", 10, "statement", str(MAX_TEXT), stdin=BIG_DATA),
    # a path no file can have (found by fuzzing: an internal error, exit 70)
    bad("consolidate-file-name-too-long", ("consolidate", "x" * 5000), 2, "File name too long"),
    bad("import-file-name-too-long", ("import", "x" * 5000), 2, "File name too long"),
    bad("export-out-name-too-long", ("export", "--out", "x" * 5000), 2, "File name too long"),
    bad("store-name-too-long", ("find", "--store", "x" * 5000), 2, "File name too long"),
    # nested past the one limit (errors.MAX_NESTING): 10 with the input named, never a RecursionError
    bad("write-data-nested-10000-deep", "write fact x --data @<in>/deep.json", 10, "deep.json", "nested more than 64"),
    bad("write-data-nested-65-deep", ("write", "fact", "x", "--data", DEEP_65), 10, "--data", "nested more than 64"),
    bad("write-data-nested-stdin", "write fact --data -", 10, "nested more than 64", stdin=DEEP_DATA),
    bad("update-set-nested-10000-deep", ("update", "<fact>", "--set", "source=" + DEEP), 10, "source",
        "is not one of"),  # a text field takes the text as it is, and its message shows only its start
    bad("write-set-list-nested", ("write", "pattern", "p", "--set", "derived_from=" + DEEP), 10,
        "derived_from", "nested more than 64"),
    bad("write-set-map-nested", ("write", "identity", "bob", "--set", "profile=" + DEEP), 10, "profile",
        "nested more than 64"),
    bad("compact-in-context-nested", "compact --intent i --step s --budget-tokens 100 --in-context-file -", 10,
        "line 1", "nested more than 64", stdin=b'{"uri": ' + DEEP.encode() + b"}\n"),
    bad("config-toml-nested", "-c <in>/deep.toml config show", 2, "deep.toml", "nested more than 64"),
    bad("config-json-nested", "-c <in>/deep.json config show", 2, "deep.json", "nested more than 64"),
    bad("config-toml-nested-tables", "-c <in>/deep-tables.toml config show", 2, "nested more than 64"),
    bad("write-oversized-encoded-data", "write fact --data @<in>/huge.json", 10, "65536"),
    bad("write-empty-text", ("write", "fact", ""), 10, "statement"),
    bad("write-no-text", "write fact", 10, "statement", "required"),
    bad("write-short-form-51-tokens", ("write", "fact", "x", "--short-form", SHORT_OVER), 10, "forms.short", "51"),
    # write: bytes that are not UTF-8 on the command line
    # (every argument is checked once, at the boundary: invalid data, 10, naming the argument)
    bad("write-text-not-utf8", ("write", "fact", "caf" + NOT_UTF8), 10, "argument 3", "UTF-8"),
    bad("write-frame-ref-not-utf8", ("write", "fact", "x", "--frame", "build:repo:a" + NOT_UTF8), 10, "argument 5", "UTF-8"),
    bad("write-actor-not-utf8", ("write", "fact", "x", "--actor", "b" + NOT_UTF8), 10, "argument 5", "UTF-8"),
    bad("write-session-not-utf8", ("write", "fact", "x", "--session", "s" + NOT_UTF8), 10, "argument 5", "UTF-8"),
    bad("write-short-form-not-utf8", ("write", "fact", "x", "--short-form", "s" + NOT_UTF8), 10, "argument 5", "UTF-8"),
    # update: references
    bad("update-malformed-uri", "update cortex://x/.. x", 2, "malformed URI"),
    bad("update-prefix-too-short", "update 01ABC x", 2, "at least 6"),
    bad("update-prefix-not-crockford", "update 01ABCU x", 2, "01ABCU"),
    bad("update-ambiguous-prefix", "update <ambig> x", 2, "ambiguous", AMBIG_A, AMBIG_B),
    bad("update-unknown-id", "update <unknown> x", 3, "no memory"),
    bad("update-unknown-prefix", "update <unknown_prefix> x", 3, "no memory"),
    # update: whose memory, and forgotten memories
    bad("update-forgotten", "update <gone> x", 1, "forgotten"),
    bad("update-private-of-another-actor", "update <fact> x --actor bob", 3, "no memory"),
    bad("update-public-of-another-actor", "update <public> x --actor bob", 8, "alice"),
    # update: data
    bad("update-confidence-set-over-1", "update <fact> --set confidence=1.5", 10, "confidence"),
    bad("update-confidence-flag-over-1", "update <fact> --confidence 2", 2, "confidence"),
    bad("update-empty-text", ("update", "<fact>", ""), 10, "statement"),
    # show
    bad("show-malformed-uri", "show cortex://x/..", 2, "malformed URI"),
    bad("show-ref-not-utf8", ("show", "<fact>" + NOT_UTF8), 10, "UTF-8"),
    bad("show-ambiguous-prefix", "show <ambig>", 2, "ambiguous"),
    bad("show-unknown-id", "show <unknown>", 3, "no memory"),
    bad("show-version-99", "show <fact> --version 99", 3, "99"),
    bad("show-version-0", "show <fact> --version 0", 2, "version"),
    bad("show-uri-and-flag-disagree", "show cortex://m/<fact>/v/1 --version 2", 2, "version"),
    bad("show-bad-form", "show <fact> --form huge", 2, "form"),
    bad("show-private-of-another-actor", "show <fact> --actor bob", 3, "no memory"),
    # history
    bad("history-malformed-uri", "history cortex://m/short", 2, "malformed URI"),
    bad("history-unknown-id", "history <unknown>", 3, "no memory"),
    # tag
    bad("tag-with-space", ("tag", "<fact>", "--add", "two words"), 2, "tag"),
    bad("tag-unknown-id", "tag <unknown> --add x", 3, "no memory"),
    bad("tag-public-of-another-actor", "tag <public> --add x --actor bob", 8, "alice"),
    # head
    bad("head-importance-11", "head <fact> --importance 11", 2, "importance"),
    bad("head-visibility", "head <fact> --visibility secret", 2, "visibility"),
    bad("head-frame-malformed", "head <fact> --frame build", 2, "frame"),
    bad("head-public-of-another-actor", "head <public> --importance 1 --actor bob", 8, "alice"),
    # forget
    bad("forget-without-reason", "forget <fact>", 2, "--reason"),
    bad("forget-empty-reason", ("forget", "<fact>", "--reason", ""), 2, "reason"),
    bad("forget-reason-too-long", ("forget", "<fact>", "--reason", "r" * 1001), 2, "reason", "1000"),
    bad("forget-reason-not-utf8", ("forget", "<fact>", "--reason", "r" + NOT_UTF8), 10, "UTF-8"),
    bad("forget-forgotten", "forget <gone> --reason again", 1, "already forgotten"),
    bad("forget-public-of-another-actor", "forget <public> --reason x --actor bob", 8, "alice"),
    # find
    bad("find-k-0", "find -k 0", 2, "-k"),
    bad("find-k-10001", "find -k 10001", 2, "-k", "10000"),
    bad("find-k-not-a-number", "find -k many", 2, "-k"),
    bad("find-bad-form", "find --form huge", 2, "form"),
    bad("find-unknown-type", "find --type bogus", 2, "bogus"),
    bad("find-frame-unknown-verb", "find --frame fly", 2, "fly"),
    bad("find-frame-ref-not-utf8", ("find", "--frame", "build:repo:a" + NOT_UTF8), 10, "UTF-8"),
    bad("find-store-is-a-file", "find --store <in>/afile", 2, "not a directory"),
    # import (the file-level problems; bad lines are tested below)
    bad("import-missing-file", "import <in>/nope.jsonl", 2, "no such file"),
    bad("import-directory", "import <in>/adir", 2, "directory"),
    bad("import-batch-size-0", "import <in>/good.jsonl --batch-size 0", 2, "batch-size"),
    # export
    bad("export-out-directory", "export --out <in>/adir", 2, "directory"),
    bad("export-out-parent-missing", "export --out <in>/nope/out.jsonl", 2, "does not exist"),
    bad("export-unknown-option", "export --form short", 2, "--form"),
    # find --near and reindex
    bad("find-near-empty", ("find", "--near", ""), 2, "--near"),
    bad("find-budget-zero", "find --near x --budget-tokens 0", 2, "--budget-tokens"),
    bad("find-budget-not-a-number", "find --near x --budget-tokens many", 2, "budget"),
    bad("find-near-not-utf8", ("find", "--near", NOT_UTF8), 10, "UTF-8"),
    bad("reindex-extra-argument", "reindex extra", 2, "extra"),
    bad("reindex-unknown-option", "reindex --model x", 2, "--model"),
    bad("reindex-store-is-a-file", "reindex --store <in>/afile", 2, "not a directory"),
    bad("embed-provider-unknown", "find --near x", 2, "provider", env={"CORTEXCTL_EMBED_PROVIDER": "magic"}),
    bad("embed-dimensions-not-a-number", "find --near x", 2, "CORTEXCTL_EMBED_DIMENSIONS",
        env={"CORTEXCTL_EMBED_DIMENSIONS": "wide"}),
    bad("embed-openai-without-url", "write fact x", 2, "base_url", env={"CORTEXCTL_EMBED_PROVIDER": "openai"}),
    bad("embed-url-bad-ipv6", "find --near x", 2, "base_url",
        env={"CORTEXCTL_EMBED_BASE_URL": "http://[::1", "CORTEXCTL_EMBED_MODEL": "m"}),
    bad("embed-url-bad-port", "find --near x", 2, "base_url",
        env={"CORTEXCTL_EMBED_BASE_URL": "http://127.0.0.1:99999/v1", "CORTEXCTL_EMBED_MODEL": "m"}),
    bad("embed-api-key-not-ascii", "write fact x", 2, "CORTEXCTL_EMBED_API_KEY", "ASCII",
        env={"CORTEXCTL_EMBED_BASE_URL": "http://127.0.0.1:9/v1", "CORTEXCTL_EMBED_MODEL": "m",
             "CORTEXCTL_EMBED_API_KEY": "ключ"}),
    bad("embed-url-without-model", "write fact x", 2, "model",
        env={"CORTEXCTL_EMBED_BASE_URL": "http://127.0.0.1:9/v1"}),
    # verify
    bad("verify-store-is-a-file", "verify --store <in>/afile", 2, "not a directory"),
    bad("verify-extra-argument", "verify extra", 2, "extra"),
    # config: unreadable or invalid config files and values
    bad("config-bad-toml", "-c <in>/bad.toml config show", 2, "TOML"),
    bad("config-bad-json", "-c <in>/bad.json config show", 2, "JSON"),
    bad("config-is-a-directory", "-c <in>/adir config show", 2, "directory"),
    bad("config-missing-file", "-c <in>/nope.toml config show", 2, "no such file"),
    bad("config-unreadable-file", "-c <in>/noperm.toml config show", 2, "cannot be read", marks=NOT_ROOT),
    bad("config-wait-negative", "-c <in>/wait.toml config show", 2, "wait", "-1"),
    bad("config-unknown-setting", "-c <in>/unknown.toml config show", 2, "colour", "unknown setting"),
    bad("config-from-env-var", "config show", 2, "TOML", env={"CORTEXCTL_CONFIG": "<in>/bad.toml"}),
    bad("config-from-user-config-dir", "config show", 2, "TOML", env={"XDG_CONFIG_HOME": "<in>/xdg"}),
    bad("config-env-wait-not-a-number", "config show", 2, "CORTEXCTL_WAIT", env={"CORTEXCTL_WAIT": "soon"}),
    bad("config-store-flag-empty", ("config", "show", "--store", ""), 2, "store"),
    bad("config-bad-file-blocks-write", "-c <in>/bad.toml write fact x", 2, "TOML"),
    bad("config-missing-subcommand", "config", 2),
    # an integer past Python's 4300 digits: a ValueError that is not a JSONDecodeError (exit 70 before)
    bad("write-data-number-too-long",
        ("write", "fact", "--data", '{"statement": "a", "confidence": ' + "9" * 5000 + "}"), 10, "--data",
        "too many digits"),
    bad("session-turns-number-too-long", "session add --turns -", 10, "stdin", "line 1", "too many digits",
        stdin=b'{"session": "s", "prompt": ' + b"9" * 5000 + b"}\n"),
    # digits int() does not take ('²'.isdigit() is true: exit 70 before; '٣' was read as 3)
    bad("diff-superscript-version", ("diff", "<fact>", "\u00b2"), 2, "version"),
    bad("diff-arabic-indic-version", ("diff", "<fact>", "1", "\u0663"), 2, "version"),
    bad("mcp-listen-superscript-port", ("mcp", "--transport", "http", "--listen", "127.0.0.1:\u00b2"), 2,
        "--listen", env={"CORTEXCTL_MCP_TOKEN": "t0ken-for-the-test"}),
    # an empty path (an unset shell variable) is not the current directory
    bad("backup-dest-empty", ("backup", "--dest", ""), 2, "dest", "empty"),
    bad("restore-path-empty", ("restore", "", "--mode", "merge"), 2, "path", "empty"),
    bad("bundle-verify-path-empty", ("bundle", "verify", ""), 2, "path", "empty"),
    bad("bundle-drill-path-empty", ("bundle", "drill", ""), 2, "path", "empty"),
    bad("export-out-empty", ("export", "--out", ""), 2, "out", "empty"),
    bad("import-file-empty", ("import", ""), 2, "FILE", "empty"),
    bad("config-flag-empty", ("-c", "", "config", "show"), 2, "config", "empty"),
    bad("generate-man-into-a-file", "generate-man <in>/afile", 2, "not a directory"),
    # an endless file read whole (exit 70 once memory ran out, or the machine's memory taken)
    bad("config-file-too-large", "-c <in>/sparse.toml config show", 2, "sparse.toml", "larger than 16 MiB"),
    # the command line itself
    bad("unknown-command", "bogus", 2, "bogus"),
    bad("unknown-global-option", "--bogus write fact x", 2, "--bogus"),
]


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_clean_line_with_its_exit_code_and_writes_nothing(case, cli, store, world, before, inputs):
    values = {**world, "in": str(inputs)}
    args = [_expand(a, values) for a in case.args]
    env = {k: _expand(v, values) for k, v in case.env.items()}
    before_inputs = tree_state(inputs)

    run = cli(*args, input=case.stdin, env=env)

    assert_clean_error(run, case.code)
    for word in case.words:
        assert word.lower() in run.err.lower(), (word, run)
    assert store_state(store) == before, f"store changed: {run!r}"
    assert tree_state(inputs) == before_inputs, f"input files changed: {run!r}"


# -- against a store that does not exist --------------------------------------------------

NO_STORE_CASES = [
    bad("verify", "verify", 3, "no store"),
    bad("reindex", "reindex", 3, "no store"),
    bad("show", "show <unknown>", 3, "no store"),
    bad("find", "find", 3, "no store"),
    bad("find-near", "find --near x", 3, "no store"),
    bad("export", "export", 3, "no store"),
    bad("write-unknown-type", "write bogus x", 2, "bogus"),
    bad("write-invalid-data", "write fact x --set confidence=1.5", 10, "confidence"),
    bad("bad-config", "-c <in>/bad.toml write fact x", 2, "TOML"),
    # Only writing commands create a store; these change a memory, so there must be one.
    bad("update", "update <unknown> x", 3, "no store"),
    bad("forget", "forget <unknown> --reason x", 3, "no store"),
]


@pytest.mark.parametrize("case", NO_STORE_CASES)
def test_bad_input_against_a_missing_store_leaves_no_store(case, cli, tmp_path, inputs):
    absent = tmp_path / "absent"
    values = {"unknown": UNKNOWN_ID, "unknown_prefix": UNKNOWN_PREFIX, "in": str(inputs)}
    args = [_expand(a, values) for a in case.args]
    before_inputs = tree_state(inputs)

    run = cli(*args, env={"CORTEXCTL_STORE": str(absent)})

    assert_clean_error(run, case.code)
    for word in case.words:
        assert word.lower() in run.err.lower(), (word, run)
    assert_no_store_or_empty(absent, may_create=case.may_create)
    assert tree_state(inputs) == before_inputs


def test_bad_import_file_against_a_missing_store_creates_nothing(cli, tmp_path):
    absent = tmp_path / "absent"
    src = tmp_path / "bad.jsonl"
    src.write_bytes(b'{"type": "fact", "text": "good"}\n{"type": "bogus", "text": "x"}\n')

    run = cli("import", src, env={"CORTEXCTL_STORE": str(absent)})

    assert_import_rejected(run, {2: "bogus"}, total=2)
    assert_no_store_or_empty(absent, may_create=False)


def test_a_store_file_that_is_not_duckdb_is_an_integrity_error_and_stays_untouched(cli, tmp_path):
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    db = tamper.db_file(garbage)
    db.write_bytes(b"not a duckdb file at all\n" * 200)

    for args in (("write", "fact", "x"), ("find",)):
        run = cli(*args, "--store", garbage)
        assert_clean_error(run, 7)
        assert "not a valid duckdb" in run.err.lower() or "cannot be read" in run.err, run
    assert db.read_bytes() == b"not a duckdb file at all\n" * 200


# -- --json: the error is one JSON object -------------------------------------------------

JSON_CASES = [
    bad("write-invalid-data", "write fact x --set confidence=1.5 --json", 10, kind="invalid"),
    bad("write-json-and-jsonl", "write fact x --json --jsonl", 2, kind="usage"),
    bad("write-unknown-option", "write fact x --colour red --json", 2, kind="usage"),
    bad("write-unknown-field-not-utf8", ("write", "fact", "x", "--set", NOT_UTF8 + "=1", "--json"), 10,
        kind="invalid"),
    bad("update-forgotten", "update <gone> x --json", 1, kind="tombstoned"),
    bad("update-public-of-another-actor", "update <public> x --actor bob --json", 8, kind="refused"),
    bad("show-ambiguous-prefix", "show <ambig> --json", 2, kind="ambiguous"),
    bad("show-unknown-id", "show <unknown> --json", 3, kind="not_found"),
    bad("find-json-and-jsonl", "find --json --jsonl", 2, kind="usage"),
    bad("import-json-and-jsonl", "import <in>/good.jsonl --json --jsonl", 2, kind="usage"),
    bad("export-out-directory", "export --out <in>/adir --jsonl", 2, kind="usage"),
    bad("verify-missing-store", "verify --json", 3, kind="not_found", env={"CORTEXCTL_STORE": "<in>/absent"}),
    bad("config-bad-toml", "-c <in>/bad.toml config show --json", 2, kind="config"),
    bad("config-json-and-jsonl", "config show --json --jsonl", 2, kind="usage"),
]


@pytest.mark.parametrize("case", JSON_CASES)
def test_bad_input_with_json_reports_one_json_object_and_writes_nothing(case, cli, store, world, before, inputs):
    values = {**world, "in": str(inputs)}
    args = [_expand(a, values) for a in case.args]
    env = {k: _expand(v, values) for k, v in case.env.items()}
    before_inputs = tree_state(inputs)

    run = cli(*args, env=env)

    assert run.code == case.code, run
    assert run.out == "", run
    assert "Traceback" not in run.err, run
    lines = [l for l in run.err.splitlines() if l.strip()]
    assert len(lines) == 1, run
    doc = orjson.loads(lines[0])
    assert isinstance(doc, dict), run
    assert {"error", "message", "exit_code"} <= set(doc), doc
    assert doc["exit_code"] == case.code, doc
    assert doc["error"] == case.kind, doc
    assert isinstance(doc["message"], str) and doc["message"].strip(), doc
    assert store_state(store) == before, f"store changed: {run!r}"
    assert tree_state(inputs) == before_inputs, f"input files changed: {run!r}"


# -- import: a file with bad lines is rejected whole -------------------------------------------

NEW_ID = "01JB" + "0" * 21 + "1"


def _bad_lines_file(existing_id: str) -> tuple[bytes, dict[int, str], int, int]:
    """JSONL with good and bad lines: (content, {line: word in its report}, non-blank lines, good lines)."""
    def j(obj) -> bytes:
        return orjson.dumps(obj)

    lines: list[tuple[bytes, str | None]] = [
        (j({"type": "fact", "text": "imported fact one", "tags": ["bulk"]}), None),   # 1
        (b'{"type": "fact", "text": "caf\xe9"}', "UTF-8"),                            # 2
        (j({"type": "goal", "text": "imported goal", "importance": 7}), None),          # 3
        (b'{"type": "fact", "text": "unterminated', "JSON"),                            # 4
        (j({"type": "bogus", "text": "x"}), "bogus"),                                   # 5
        (j({"type": "fact", "text": "x", "importance": 11}), "importance"),             # 6
        (b"", None),                                                                    # 7 blank
        (j({"type": "preference", "text": "x", "data": {"polarity": "sideways"}}), "polarity"),  # 8
        (j({"type": "fact", "text": "x", "data": {"confidence": 1.5}}), "confidence"),  # 9
        (j({"type": "fact", "text": "x", "data": {"colour": "red"}}), "colour"),        # 10
        (j({"type": "fact", "text": "a" * (MAX_TEXT + 1)}), str(MAX_TEXT)),             # 11
        (j({"type": "fact", "text": ""}), "statement"),                                 # 12
        (b"[1, 2]", "object"),                                                          # 13
        (j({"type": "fact", "text": "x", "id": existing_id}), "already exists"),        # 14
        (j({"type": "belief", "text": "imported belief", "id": NEW_ID}), None),         # 15
        (j({"type": "fact", "text": "dup", "id": NEW_ID}), "line 15"),                  # 16
        (j({"type": "fact", "text": "x", "forms": {"short": SHORT_OVER}}), "forms.short"),  # 17
        (j({"type": "fact", "text": "x", "visibility": "secret"}), "visibility"),       # 18
        (j({"type": "fact", "text": "x", "frames": ["fly:repo:x"]}), "fly"),            # 19
        (j({"type": "fact", "text": "x", "colour": "red"}), "colour"),                  # 20
        (DEEP_LINE.strip(), "nested more than 64"),                                      # 21
        (b'{"type": "fact", "data": ' + b"[" * 65 + b"]" * 65 + b"}", "nested more than 64"),  # 22
    ]
    content = b"".join(line + b"\n" for line, _ in lines)
    bad_lines = {n: word for n, (_, word) in enumerate(lines, 1) if word is not None}
    total = sum(1 for line, _ in lines if line.strip())
    good = total - len(bad_lines)
    return content, bad_lines, total, good


def assert_import_rejected(run: Run, bad_lines: dict[int, str], *, total: int) -> None:
    """Exit 10; one 'cortexctl: line N: ...' per bad line, in order, then one summary line."""
    assert run.code == 10, run
    assert run.out == "", run
    assert "Traceback" not in run.err, run
    lines = [l for l in run.err.splitlines() if l.strip()]
    assert len(lines) == len(bad_lines) + 1, run
    for line, (n, word) in zip(lines, sorted(bad_lines.items())):
        assert line.startswith(f"cortexctl: line {n}: "), (line, run)
        assert word.lower() in line.lower(), (n, word, line)
    summary = lines[-1]
    assert summary.startswith("cortexctl: "), run
    assert f"{len(bad_lines)} of {total}" in summary, summary
    assert "nothing was imported" in summary, summary


@pytest.mark.parametrize("source", ["file", "stdin"])
def test_import_with_bad_lines_is_rejected_whole_listing_every_bad_line(source, cli, store, world, before, tmp_path):
    content, bad_lines, total, _ = _bad_lines_file(world["fact"])
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(content)

    if source == "file":
        run = cli("import", path)
    else:
        run = cli("import", "-", input=content)

    assert_import_rejected(run, bad_lines, total=total)
    assert store_state(store) == before
    assert path.read_bytes() == content


def test_import_rejection_with_json_is_one_object_listing_every_bad_line(cli, store, world, before, tmp_path):
    content, bad_lines, total, _ = _bad_lines_file(world["fact"])
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(content)

    run = cli("import", path, "--json")

    assert run.code == 10, run
    assert run.out == "", run
    lines = [l for l in run.err.splitlines() if l.strip()]
    assert len(lines) == 1, run
    doc = orjson.loads(lines[0])
    assert doc["error"] == "invalid" and doc["exit_code"] == 10, doc
    assert "nothing was imported" in doc["message"], doc
    assert [p["line"] for p in doc["problems"]] == sorted(bad_lines), doc
    assert store_state(store) == before


def test_import_skip_invalid_imports_the_good_lines_and_reports_the_bad(cli, cx, store, world, before, tmp_path):
    content, bad_lines, total, good = _bad_lines_file(world["fact"])
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(content)
    journal_before = cx.verify().journal

    run = cli("import", path, "--skip-invalid")

    assert run.code == 0, run
    assert "Traceback" not in run.err, run
    assert f"imported {good} memories" in run.out, run
    assert f"skipped {len(bad_lines)} invalid lines" in run.out, run
    reported = [l for l in run.err.splitlines() if l.strip()]
    assert len(reported) == len(bad_lines), run
    for line, n in zip(reported, sorted(bad_lines)):
        assert line.startswith(f"cortexctl: skipped line {n}: "), (line, run)
    after = store_state(store)
    for t in DATA_TABLES:
        assert set(before["tables"][t]) <= set(after["tables"][t]), f"{t}: existing rows changed"
    assert len(after["tables"]["heads"]) == len(before["tables"]["heads"]) + good
    assert cx.verify().journal == journal_before + good  # one journal entry per imported memory
    texts = {cx.show(h.id).data["statement"] for h in cx.find(FindQuery(types=["fact", "goal", "belief"], k=100))}
    assert {"imported fact one", "imported goal", "imported belief"} <= texts
    assert_store_verifies(store)


def test_import_line_with_a_created_at_before_year_1000_is_reported_not_a_crash(cli, store, world, before, tmp_path):
    path = tmp_path / "old.jsonl"
    path.write_bytes(b'{"type": "fact", "text": "good"}\n'
                     b'{"type": "fact", "text": "ancient", "created_at": "0999-01-01T00:00:00Z"}\n')

    run = cli("import", path)

    assert_import_rejected(run, {2: ""}, total=2)
    assert store_state(store) == before


class _LongLine(io.RawIOBase):
    """A stream of a good line, a line of ``size`` zero bytes (made as it is read, never held), and
    another good line."""

    def __init__(self, size: int) -> None:
        self.parts = [b'{"type": "fact", "text": "before"}\n', size, b'\n{"type": "fact", "text": "after"}\n']

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        while self.parts:
            part = self.parts[0]
            if isinstance(part, int):
                n = min(part, len(buf))
                buf[:n] = bytes(n)
                self.parts[0] = part - n
                if not self.parts[0]:
                    self.parts.pop(0)
                return n
            n = min(len(part), len(buf))
            buf[:n] = part[:n]
            self.parts[0] = part[n:]
            if not self.parts[0]:
                self.parts.pop(0)
            return n
        return 0


def test_an_overlong_line_is_refused_by_its_number_without_being_held_whole(tmp_path):
    """A line past the 1 MiB limit is reported as too long (skipped with --skip-invalid, the lines
    after it imported), and is never held whole: a line with no end (`import - < /dev/zero`) took
    every byte of memory until the kernel killed the process. Here 64 MiB of it: the import's
    Python allocations stay under a few MiB."""
    import tracemalloc

    from cortexctl.errors import InvalidData

    cx = Cortex(store=tmp_path / "store", actor="alice")
    with pytest.raises(InvalidData, match="import rejected"):
        cx.import_jsonl(io.BufferedReader(_LongLine(3 << 20)))
    tracemalloc.start()
    try:
        report = cx.import_jsonl(io.BufferedReader(_LongLine(64 << 20)), skip_invalid=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report.imported == 2
    assert [(p.line, p.message) for p in report.problems] == [(2, "line is longer than 1048576 bytes")]
    assert peak < 16 << 20, peak


@pytest.mark.parametrize("source", ["stdin", "file"])
def test_an_input_larger_than_the_limit_is_refused_without_being_read_whole(source, cli, store, world, before,
                                                                            monkeypatch, tmp_path):
    """``--data``, ``--spec``, ``--turns`` and the other options that read a file or stdin read at most
    ``MAX_INPUT_BYTES`` (256 MiB; 2 MiB here): /dev/zero or a runaway pipe was read until memory ran out."""
    from cortexctl.cli import common

    monkeypatch.setattr(common, "MAX_INPUT_BYTES", 2 * 1024 * 1024)
    if source == "stdin":
        run = cli("write", "fact", "--data", "-", input=b" " * (2 * 1024 * 1024 + 1))
    else:  # a sparse file past the limit: a bound lost reads 2 MiB + 1 and fails, never /dev/zero until memory runs out
        big = tmp_path / "big.json"
        with open(big, "wb") as fh:
            fh.truncate(2 * 1024 * 1024 + 1)
        run = cli("write", "fact", "--data", f"@{big}")
    assert_clean_error(run, 10)
    assert "larger than 2 MiB" in run.err
    assert store_state(store) == before


def test_export_into_a_fifo_writes_into_it_and_leaves_it_a_fifo(cli, store, world, tmp_path):
    """A FIFO (or a device, or /dev/stdout on a pipe) is written into, never replaced by a renamed
    file: export made the FIFO a regular file (and as root would have replaced /dev/null)."""
    import stat
    import threading

    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    run = cli("export", "--out", str(fifo))
    reader.join(timeout=30)
    assert run.code == 0, run
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert got and got[0] == cli("export").out.encode()
