"""One output object for people and programs.

- ``--json``: exactly one JSON document on stdout; ``--jsonl``: one object per line.
- For people: rich tables only when stdout is a terminal; plain, undecorated
  text when piped; no colour when ``NO_COLOR`` is set.
- Hints, progress and diagnostics go to stderr.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Sequence


_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]}


def printable(text: str, *, keep_newlines: bool = False) -> str:
    """Text for a terminal: control characters (escape sequences included) shown as \\xNN."""
    table = dict(_CONTROL)
    if keep_newlines:
        del table[0x0A]
    return text.translate(table)


def _dumps(doc: Any, pretty: bool) -> bytes:
    import orjson

    opts = orjson.OPT_NON_STR_KEYS | (orjson.OPT_INDENT_2 if pretty else 0)
    return orjson.dumps(doc, option=opts, default=str)


class Output:
    def __init__(self, *, json: bool = False, jsonl: bool = False, quiet: bool = False) -> None:
        from cortexctl.errors import UsageError

        if json and jsonl:
            raise UsageError("--json and --jsonl cannot be used together")
        self.json = json
        self.jsonl = jsonl
        self.quiet = quiet
        self.tty = sys.stdout.isatty()
        self.err_tty = sys.stderr.isatty()
        self.color = self.tty and not os.environ.get("NO_COLOR")

    @property
    def machine(self) -> bool:
        return self.json or self.jsonl

    # -- data ----------------------------------------------------------------
    def emit(self, doc: Any) -> None:
        """One JSON document (``--json``) or one line of JSON (``--jsonl``)."""
        sys.stdout.buffer.write(_dumps(doc, self.json and self.tty) + b"\n")
        sys.stdout.flush()

    def emit_many(self, docs: Iterable[Any], envelope: Callable[[list], Any]) -> None:
        """A list: one object per line under ``--jsonl``, one enveloped document under ``--json``."""
        if self.jsonl:
            for d in docs:
                sys.stdout.buffer.write(_dumps(d, False) + b"\n")
            sys.stdout.flush()
        else:
            self.emit(envelope(list(docs)))

    def line(self, text: str = "") -> None:
        sys.stdout.write(printable(text, keep_newlines=True) + "\n")

    def table(self, columns: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str | None = None) -> None:
        """A rich table on a terminal; tab-separated lines (no header) when piped."""
        if not self.tty:
            for row in rows:
                sys.stdout.write("\t".join("" if c is None else printable(str(c).replace("\t", " ").replace("\n", " ")) for c in row) + "\n")
            return
        from rich.console import Console
        from rich.table import Table

        t = Table(title=title, show_edge=False, pad_edge=False, header_style="bold" if self.color else None)
        for c in columns:
            t.add_column(c, overflow="fold")
        for row in rows:
            t.add_row(*("" if c is None else printable(str(c), keep_newlines=True) for c in row))
        # Memory text is data, never markup or emoji codes: "[active]" and "did:x:1" print as written.
        Console(no_color=not self.color, highlight=False, markup=False, emoji=False).print(t)

    # -- diagnostics -------------------------------------------------------------
    def hint(self, text: str) -> None:
        if not self.quiet:
            sys.stderr.write(text + "\n")

    def warn(self, text: str) -> None:
        sys.stderr.write(f"cortexctl: {text}\n")

    @contextmanager
    def progress(self, label: str) -> Iterator[Callable[[int, int], None] | None]:
        """A progress callback (done, total), drawn only on a terminal and not with --quiet."""
        if self.quiet or not self.err_tty or self.machine:
            yield None
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
        from rich.console import Console

        with Progress(
            TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
            console=Console(stderr=True, no_color=bool(os.environ.get("NO_COLOR"))), transient=True,
        ) as bar:
            task = bar.add_task(label, total=None)

            def update(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            yield update
