"""The operation registry (cortexctl/ops): every operation has an MCP tool or says why not, every
command runs a declared operation, and no command builds its output document by hand."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cortexctl import ops
from cortexctl.cli.registry import commands
from cortexctl.ops import Operation, Param, Tool

CLI = Path(__file__).resolve().parents[2] / "cortexctl" / "cli"
EMITTERS = {"emit", "emit_many", "emit_result"}


def literal_dicts_emitted(source: str) -> list[int]:
    """Lines where a literal dict (``{...}``, a dict comprehension or ``dict(...)``) is passed to an
    output emitter (``out.emit``, ``out.emit_many``, ``emit_result``), anywhere in its arguments
    (lambdas and generators included)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if name not in EMITTERS:
            continue
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            for inner in ast.walk(arg):
                if isinstance(inner, (ast.Dict, ast.DictComp)) or (
                        isinstance(inner, ast.Call) and getattr(inner.func, "id", None) == "dict"):
                    found.append(inner.lineno)
    return found


@pytest.mark.parametrize("path", sorted(CLI.glob("cmd_*.py")), ids=lambda p: p.name)
def test_no_command_module_builds_a_literal_dict_for_output(path):
    """Output documents are the engine's results (to_json()), so the CLI and the MCP tools print the
    same ones: a command module passes none of its own making to the emitters."""
    assert literal_dicts_emitted(path.read_text()) == [], f"{path.name} builds a dict for output"


@pytest.mark.parametrize("source", [
    "out.emit({'count': n})",
    "out.emit_many(docs, lambda docs: {'count': len(docs), 'items': docs})",
    "out.emit_many(({'turn': i} for i in x), envelope)",
    "emit_result(json, jsonl, dict(uri=u), u)",
    "out.emit({k: v for k, v in rows})",
])
def test_the_literal_dict_check_sees_each_way_of_building_one(source):
    assert literal_dicts_emitted(source) == [1]


def test_the_literal_dict_check_passes_a_result_document():
    assert literal_dicts_emitted("out.emit(result.to_json())\nout.emit_many(r.docs(), r.to_json)") == []


@pytest.mark.parametrize("op", ops.operations(), ids=lambda op: op.name)
def test_every_operation_has_a_tool_or_says_why_not(op):
    assert (op.tool is not None) != bool(op.no_tool.strip()), op.name
    if op.tool is not None:
        assert op.tool.title and len(op.tool.description) > 40, op.name
    else:
        assert len(op.no_tool) > 10, f"{op.name}: say why it has no tool"


def test_an_operation_with_neither_a_tool_nor_a_reason_is_refused():
    with pytest.raises(ValueError, match="no_tool"):
        Operation("nameless", lambda cx: None)
    with pytest.raises(ValueError, match="no_tool"):
        Operation("both", lambda cx: None, tool=Tool("Both", "a tool and a reason at once"), no_tool="because")


def test_operation_names_are_unique_and_fit_mcp():
    names = [op.name for op in ops.operations()]
    assert len(set(names)) == len(names)
    assert all(n.replace("_", "").isalnum() and n.islower() for n in names), names


def test_every_command_runs_a_declared_operation_and_every_operation_is_reachable():
    declared = {op.name for op in ops.operations()}
    named = set()
    for command in commands():
        assert command.operations, f"{command.name}: names no operation (Command.op)"
        assert set(command.operations) <= declared, command.name
        named |= set(command.operations)
    served = {op.name for op in ops.tools()}
    assert declared <= named | served, declared - named - served


def test_a_tool_parameter_says_what_it_is():
    """Each served parameter is a type the schema can say: text, a number, a flag, an object, a list
    of text; a choice lists its values."""
    for op in ops.tools():
        for p in op.params:
            assert p.type in (str, int, float, bool, dict), (op.name, p.name)
            assert p.choices is None or (p.type is str and p.choices), (op.name, p.name)
            assert not (p.required and p.default is not None), (op.name, p.name)


def test_run_fills_the_declared_defaults():
    got = {}
    op = Operation("probe", lambda cx, **v: got.update(v), (Param("k", type=int, default=10), Param("tags", many=True),
                                                              Param("near")), no_tool="a test's own")
    op.run(None, near="x")
    assert got == {"k": 10, "tags": [], "near": "x"}


# Where a command takes an operation's parameter under another name (the command line's shape).
RENAMED = {("write", "type"): "type_name", ("compact", "in_context"): "refs"}


def test_every_command_takes_its_operations_parameters():
    """A command whose shape differs from its operation's (files, --set, progress) still takes each
    parameter of its operation, by the same name (or its one named rename), so the shell and the
    tools cannot drift apart."""
    for command in commands():
        takes = {a.name for a in command.arguments} | {o.name for o in command.options}
        for name in command.operations:
            for p in ops.lookup(name).params:
                assert RENAMED.get((name, p.name), p.name) in takes, (command.name, name, p.name)


def test_no_parameter_help_is_declared_twice():
    """Every option or argument that takes an operation's parameter was derived from its Param
    (command_for): its help is the Param's (help_of), its default and choices too, so a parameter's
    help is written once, for the tool and the shell alike."""
    from cortexctl.cli.spec import help_of

    for command in commands():
        takers = {a.name: a for a in command.arguments} | {o.name: o for o in command.options}
        for name in command.operations:
            for p in ops.lookup(name).params:
                taker = takers[RENAMED.get((name, p.name), p.name)]
                assert taker.param is p, (command.name, p.name, "declared by hand")
                positional = taker in command.arguments
                assert taker.help == help_of(p, positional=positional), (command.name, p.name)
                if not positional:
                    assert (taker.default, taker.choices, taker.many) == (p.default, p.choices, p.many), \
                        (command.name, p.name)



def test_an_operation_taking_a_json_object_takes_it_as_a_tool_would_send_it(cx):
    """pattern_write's spec is a JSON object (a dict), as any front end sends it: the operation
    makes it a spec itself, and a bad one is InvalidData naming the field, not a crash."""
    from cortexctl.errors import InvalidData

    written = ops.lookup("pattern_write").run(cx, spec={"name": "rotate", "steps": ["stage", "swap"]})
    assert written.to_json()["type"] == "pattern" and written.to_json()["action"] == "written"
    reinforced = ops.lookup("pattern_reinforce").run(cx, spec={"name": "rotate", "steps": ["stage", "swap"]})
    assert reinforced.to_json()["id"] == written.to_json()["id"]
    with pytest.raises(InvalidData, match="name"):
        ops.lookup("pattern_write").run(cx, spec={"steps": ["x"]})
