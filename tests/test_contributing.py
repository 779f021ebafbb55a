"""CONTRIBUTING.md's "Adding a command" example works as written: the operation and the command it
declares, pasted in and registered as the steps say, appear in --help, in the man pages and in the
MCP server's tools, and answer (a scalar, as a result document) without a change to serve/."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def example_files() -> dict[str, str]:
    """The python blocks of "Adding a command" that start with the path of the file they are."""
    text = (ROOT / "CONTRIBUTING.md").read_text()
    section = text[text.index("## Adding a command"):text.index("## Adding an engine use case")]
    files = {}
    for block in re.findall(r"```python\n(.*?)```", section, re.S):
        block = "\n".join(line[3:] if line.startswith("   ") else line for line in block.splitlines()) + "\n"
        first = block.splitlines()[0]
        if first.startswith("# cortexctl/"):
            files[first[2:]] = block
    return files


# What the steps do, in a fresh process: register the two modules (under names of the test's own, on
# sys.path) where the steps say, then look for the operation everywhere it should appear, and run it.
PROBE = """
import asyncio, contextlib, io, json, sys
sys.path.insert(0, sys.argv[1])
from cortexctl import ops
ops.MODULES.append("example.ops_versions")
from cortexctl.cli import registry
registry.MODULES = (*registry.MODULES, "example.cmd_versions")

from cortexctl.cli.app import main
from cortexctl.cli.cmd_man import render_all
from cortexctl.engine.cortex import Cortex
from cortexctl.serve.server import build

store = sys.argv[2]
seen = {}

def run(*argv):
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8")
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
        out.flush()
    return code, raw.getvalue().decode()

seen["help"] = run("--help")[1]
seen["command_help"] = run("versions", "--help")[1]
seen["man"] = render_all().get("cortexctl-versions.1", "")
seen["main_man"] = render_all()["cortexctl.1"]
cx = Cortex(store, actor="alice")
uri = cx.write("fact", "The deploy key rotates monthly").uri
cx.update(uri, "The deploy key rotates weekly")
seen["human"] = run("versions", uri, "--store", store, "--actor", "alice")
seen["json"] = run("versions", uri, "--store", store, "--actor", "alice", "--json")
app = build(Cortex(store, actor="alice"))
tools = {t.name: t for t in asyncio.run(app.list_tools())}
seen["tool"] = tools["versions"].model_dump(mode="json", by_alias=True) if "versions" in tools else None
result = asyncio.run(app.call_tool("versions", {"ref": uri}))
seen["tool_answer"] = result.structured_content
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def seen(tmp_path_factory):
    pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install -e '.[test]'")
    files = example_files()
    assert set(files) == {"cortexctl/ops/versions.py", "cortexctl/cli/cmd_versions.py"}, set(files)
    where = tmp_path_factory.mktemp("example")
    (where / "example").mkdir()
    (where / "example" / "__init__.py").write_text("")
    (where / "example" / "ops_versions.py").write_text(files["cortexctl/ops/versions.py"])
    (where / "example" / "cmd_versions.py").write_text(files["cortexctl/cli/cmd_versions.py"])
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEXCTL_")}
    env["HOME"] = str(where)
    env["XDG_CONFIG_HOME"] = str(where / "config")
    proc = subprocess.run([sys.executable, "-c", PROBE, str(where), str(where / "store")], capture_output=True,
                          text=True, env=env, cwd=where, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_the_example_command_is_in_help_and_the_man_pages(seen):
    assert re.search(r"^\s+versions\s+How many versions a memory has\.", seen["help"], re.M), seen["help"]
    assert "Examples:" in seen["command_help"] and "cortexctl versions 01JD3K --json" in seen["command_help"]
    assert "cortexctl-versions \\- How many versions a memory has." in seen["man"]
    assert "\\fBcortexctl versions\\fR" in seen["main_man"]


def test_the_example_command_answers_a_scalar_for_people_and_as_json(seen):
    assert seen["human"] == [0, "2\n"]
    assert seen["json"][0] == 0 and json.loads(seen["json"][1]) == {"versions": 2}


def test_the_example_operation_is_an_mcp_tool_without_a_change_to_serve(seen):
    tool = seen["tool"]
    assert tool is not None, "no versions tool"
    assert tool["inputSchema"]["required"] == ["ref"]
    assert tool["annotations"]["readOnlyHint"] is True and tool["annotations"]["title"] == "Count versions"
    assert seen["tool_answer"] == {"versions": 2}
