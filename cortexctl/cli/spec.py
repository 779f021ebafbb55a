"""How a command is declared: its words, arguments, options, help and examples, in one place.

A command module (``cli/cmd_*.py``) declares each of its commands once as a
``Command`` and registers its module in ``cli/registry.py``. Everything else is
derived from that declaration:

- the run-time parser (``cli/parser.py``), which runs every plain invocation
  without importing typer, click or pydantic;
- the Typer tree (``cli/tree.py``) that users meet for ``--help``, shell
  completion and the unusual forms (``--`` before positionals, say);
- the man pages (``cli/cmd_man.py``, checked against ``man/`` by a test).

Each command runs an operation of ``cortexctl/ops`` (``Command.op``), the
declaration the MCP server's tools come from too. ``command_for`` derives a
whole command from an operation: its parameters become the options (or the
arguments), each with its Param's one help text, and its body prints the
operation's result document (``--json``) or its human form; a command adds the
options only the shell has (files, ``--set``, progress) and, where it needs
one, its own body. Every command with parameters is derived this way.

This module imports nothing but the standard library, so declaring costs no
start-up time.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Any, Callable

from cortexctl.cli import complete
from cortexctl.config import ENV_ACTOR, ENV_STORE, ENV_WAIT

# The root command's help.
HELP = """Long-term memory for AI agents, over a local single-file store.

Write typed memories, find them again, change them with full history, and
move them in and out as JSONL. Exit codes: 0 ok, 1 failed, 2 usage, 3 not
found, 4 store busy, 5 rate limited, 6 budget unreachable, 7 integrity error,
8 refused, 9 provider unreachable, 10 invalid input data, 70 internal error,
130 interrupted. See cortexctl(1).
"""

EPILOG = """\b
Examples:
  cortexctl write fact "The deploy key rotates monthly" --tag ops
  cortexctl find --tag ops -k 5
  cortexctl show 01JD3K --form full
  cortexctl export --out memories.jsonl
"""

EXIT_MEANINGS = {
    0: "ok", 1: "failed", 2: "usage error", 3: "not found", 4: "store busy", 5: "rate limited",
    6: "budget unreachable", 7: "integrity error", 8: "refused", 9: "provider unreachable",
    10: "invalid input data",
}


@dataclass(frozen=True)
class Option:
    """One option. ``name`` is the parameter the command's body receives."""

    name: str
    flags: tuple[str, ...]
    help: str
    type: type = str  # str, int, float or bool (a flag)
    default: Any = None
    many: bool = False  # repeatable; the body receives a list
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    env: str | None = None  # the environment variable config reads for it (shown in help)
    required: bool = False
    complete: Callable[[dict[str, Any], str], list[str]] | None = None  # shell completion (cli/complete.py)
    param: Any = None  # the operation's Param it was derived from (command_for); None: the command line's own

    @property
    def is_flag(self) -> bool:
        return self.type is bool

    @property
    def initial(self) -> Any:
        """The value the body receives when the option is not given."""
        return [] if self.many else self.default


@dataclass(frozen=True)
class Argument:
    """One positional argument; ``many`` takes every remaining positional."""

    name: str
    metavar: str
    help: str
    required: bool = True
    many: bool = False
    complete: Callable[[dict[str, Any], str], list[str]] | None = None  # shell completion (cli/complete.py)
    param: Any = None  # the operation's Param it was derived from (command_for); None: the command line's own


@dataclass(frozen=True)
class Command:
    """One command: ``run(config, **values)`` gets the global config path and one value per
    argument and option, by name."""

    words: tuple[str, ...]
    summary: str
    run: Callable[..., Any]
    arguments: tuple[Argument, ...] = ()
    options: tuple[Option, ...] = ()
    notes: str = ""
    examples: tuple[str, ...] = ()
    exits: tuple[int, ...] = (0, 2)
    exit_notes: dict[int, str] = field(default_factory=dict)
    group_help: str = ""  # for the first word of a two-word command
    hidden: bool = False
    op: str | tuple[str, ...] | None = None  # the operation(s) of cortexctl/ops whose engine call the body runs

    @property
    def operations(self) -> tuple[str, ...]:
        return (self.op,) if isinstance(self.op, str) else tuple(self.op or ())


    @property
    def name(self) -> str:
        return " ".join(self.words)

    @property
    def epilog(self) -> str:
        """Notes, examples and exit status, as ``--help`` and the man page show them."""
        parts = []
        if self.notes:
            parts.append("\b\n" + self.notes.strip("\n") + "\n")
        if self.examples:
            parts.append("\b\nExamples:\n" + "".join(f"  {e}\n" for e in self.examples))
        if self.exits:
            parts.append(exit_status(*self.exits, notes=self.exit_notes))
        return "".join(parts)

    def invoke(self, config: Any, values: dict[str, Any]) -> int:
        """Check the declared choices, then run the body: the one way both parsers run a command.
        The exit status is the int the body returns (find's 1 when nothing matched), else 0."""
        for opt in self.options:
            if opt.choices is None:
                continue
            given = values.get(opt.name)
            for value in given if opt.many else [given]:
                if value is not None and value not in opt.choices:
                    from cortexctl.errors import UsageError

                    raise UsageError(f"{opt.flags[0]} must be one of {', '.join(opt.choices)}, not {value!r}")
        rv = self.run(config, **values)
        return rv if isinstance(rv, int) and not isinstance(rv, bool) else 0

    def option(self, flag: str) -> Option | None:
        for opt in self.options:
            if flag in opt.flags:
                return opt
        return None

    def flag_of(self, name: str) -> str | None:
        """The first flag of the option (or the metavar of the argument) that holds ``name``."""
        for opt in self.options:
            if opt.name == name:
                return opt.flags[0]
        for arg in self.arguments:
            if arg.name == name:
                return arg.metavar
        return None

    def defaults(self) -> dict[str, Any]:
        values: dict[str, Any] = {a.name: ([] if a.many else None) for a in self.arguments}
        values.update({o.name: (list(o.initial) if o.many else o.initial) for o in self.options})
        return values


def exit_status(*codes: int, notes: dict[int, str] | None = None) -> str:
    """The "Exit status" paragraph of a command's help."""
    notes = notes or {}
    parts = [f"{c} {notes.get(c, EXIT_MEANINGS[c])}" for c in codes]
    text = "Exit status: " + ", ".join(parts) + "; 70 internal error, 130 interrupted (see cortexctl(1))."
    return "\b\n" + "\n".join(textwrap.wrap(text, 76)) + "\n"


# -- options many commands share -------------------------------------------------------
STORE = Option("store", ("--store",), f"Store directory or postgresql:// URI [env {ENV_STORE}; default: user data "
                                     "dir].",
               metavar="PATH", env=ENV_STORE)
ACTOR = Option("actor", ("--actor",), f"Acting agent [env {ENV_ACTOR}; default: OS user].", metavar="NAME",
               env=ENV_ACTOR)
WAIT = Option("wait", ("--wait",), f"Seconds to wait for a busy store before exit 4 [env {ENV_WAIT}; default 5].",
              type=float, metavar="SECONDS", env=ENV_WAIT)
JSON = Option("json", ("--json",), "Print one JSON document.", type=bool, default=False)
JSONL = Option("jsonl", ("--jsonl",), "Print one JSON object per line.", type=bool, default=False)
QUIET = Option("quiet", ("--quiet", "-q"), "No progress bar or hints.", type=bool, default=False)
COMMON = (STORE, ACTOR, WAIT, JSON, JSONL)
# Operations an agent asks every turn that read and leave nothing to finish (no output file, no
# worker processes, no scratch): on a local store their process ends once it has printed
# (``common.end_without_teardown``), as find's does.
ENDS_WITHOUT_TEARDOWN = frozenset({"show", "history", "context", "pinned", "patterns", "checkpoint_load"})

SETS = Option("sets", ("--set",), "Set one data field (repeatable).", many=True, metavar="FIELD=VALUE",
              complete=complete.data_fields)


# -- a command derived from an operation -------------------------------------------------
def _dashed(name: str) -> str:
    return "--" + name.replace("_", "-")


def _one_of(choices: tuple[str, ...]) -> str:
    return ", ".join(choices[:-1]) + " or " + choices[-1] if len(choices) > 1 else choices[0]


DATA_INPUT = "JSON|@FILE|-"


def help_of(p, *, positional: bool = False) -> str:
    """A parameter's help on the command line, derived from its one declaration (``Param``): its
    ``help`` (the tool's), then its choices (unless it names them), "repeatable" for a list
    option, and how a JSON object is given (text, a file or stdin)."""
    text = p.help
    if p.choices and not all(c in text for c in p.choices):
        text = (text.rstrip(".") + ": " if text else "") + _one_of(p.choices) + "."
    if p.type is dict:
        text = text.rstrip(".") + "; JSON, @FILE, or - for stdin."
    if p.many and not positional and "repeatable" not in text:
        text = text + " Repeatable." if text.endswith(").") else text.rstrip(".") + " (repeatable)."
    return text


def command_for(operation, words: tuple[str, ...], summary: str, /, *, positional: tuple[str, ...] = (),
                flags: dict[str, tuple[str, ...]] | None = None,
                completers: dict[str, Callable[[dict[str, Any], str], list[str]]] | None = None,
                names: dict[str, str] | None = None, optional: tuple[str, ...] = (),
                envs: dict[str, str] | None = None,
                arguments: tuple[Argument, ...] = (), options: tuple[Option, ...] = (),
                run: Callable[..., Any] | None = None,
                common: tuple[Option, ...] = COMMON, human: Callable[[Any, Any], None] | None = None,
                **declared: Any) -> Command:
    """The command of an operation (``cortexctl.ops.Operation``): its parameters, in order, as
    options ``--name-with-dashes`` (``flags`` names others) or, for those in ``positional``,
    arguments, each with the parameter's help, type, default and choices (``help_of``); a JSON
    object parameter (``dict``) is an option taking JSON, @FILE or - for stdin. Then the
    command's own ``arguments`` and ``options`` (what only the shell has: files, ``--set``,
    ``-v``), then the ``common`` options. ``names`` gives a parameter another name in the body
    (``{"type": "type_name"}``); those in ``optional`` are not required on the command line (the
    body checks them, with its own message); ``envs`` names the environment variable config
    reads for one (shown in its help).

    Its body (unless ``run`` gives the command's own, called with every value by name) opens the
    store, runs the operation and prints the result's warnings on stderr, then its ``to_json()``
    under ``--json`` (its ``docs()`` one a line under ``--jsonl``, when it is a list) or, for
    people, ``human(out, result)`` (default: the result's ``text()``). ``declared`` are the rest
    of the ``Command`` (notes, examples, exits, exit_notes, group_help; ``op`` when the command
    runs more operations than this one)."""
    op = operation
    flags, completers, names, envs = flags or {}, completers or {}, names or {}, envs or {}
    derived_args, derived_opts = [], []
    for p in op.params:
        if p.type not in (str, int, float, bool, dict):
            raise ValueError(f"{op.name}: parameter {p.name} ({p.type.__name__}) needs a command of its own")
        name = names.get(p.name, p.name)
        required = p.required and p.name not in optional
        if p.name in positional:
            derived_args.append(Argument(name, p.metavar or p.name.upper(), help_of(p, positional=True),
                                         required=required, many=p.many, complete=completers.get(p.name),
                                         param=p))
        else:
            metavar = None if p.type is bool else DATA_INPUT if p.type is dict else (p.metavar or p.name.upper())
            derived_opts.append(Option(name, flags.get(p.name, (_dashed(p.name),)), help_of(p),
                                       type=str if p.type is dict else p.type, default=p.default, many=p.many,
                                       choices=p.choices, metavar=metavar, required=required,
                                       env=envs.get(p.name), complete=completers.get(p.name), param=p))
    common_names = {o.name for o in common}
    objects = {names.get(p.name, p.name): flags.get(p.name, (_dashed(p.name),))[0] for p in op.params
               if p.type is dict}

    def derived_run(config, **values: Any) -> None:
        from cortexctl.cli.common import end_without_teardown, open_cortex, read_data
        from cortexctl.cli.output import Output

        given = {k: values.pop(k) for k in list(values) if k in common_names}
        out = Output(json=given.get("json", False), jsonl=given.get("jsonl", False), quiet=given.get("quiet", False))
        cx = open_cortex(config, given.get("store"), given.get("actor"), given.get("wait"))
        if op.name in ENDS_WITHOUT_TEARDOWN and cx.context.storage.local_dir() is not None:
            end_without_teardown()
        for k, flag in objects.items():
            values[k] = read_data(values[k], flag)
        result = op.run(cx, **{p.name: values[names.get(p.name, p.name)] for p in op.params})
        for w in getattr(result, "warnings", None) or ():
            out.warn(w)
        if out.machine:
            if hasattr(result, "docs"):
                out.emit_many(result.docs(), result.to_json)
            else:
                out.emit(result.to_json())
        elif human is not None:
            human(out, result)
        else:
            out.line(result.text())

    declared.setdefault("op", op.name)
    return Command(tuple(words), summary, run or derived_run, arguments=(*derived_args, *arguments),
                   options=(*derived_opts, *options, *common), **declared)
