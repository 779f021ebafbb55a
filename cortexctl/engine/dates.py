"""Dates a find query names, as spans of days: what ``find --near`` lifts a memory's time by.

``periods(text, today)`` finds, in the query's words:

- a day: ``2023-05-23``, ``23 May 2023``, ``May 23, 2023`` (``23rd``, short month names too);
- a month: ``2023-05``, ``May 2023``, ``December, 2023``;
- a year: a four-digit year from 1900 to 2099 (``in 2023``), when no day or month of it is named;
- relative to ``today`` (the clock's date, UTC): ``today``, ``yesterday``, ``N days ago``,
  ``this`` or ``last`` ``week`` (Monday to Sunday), ``month`` or ``year``.

Each is an inclusive span (first day, last day). A year named inside a day or month counts once,
as that day or month. Nothing else is read: "May" alone is a word (it may be the verb).
"""

from __future__ import annotations

import re
from datetime import date, timedelta

MONTHS = {name: n for n, names in enumerate((
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
    ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
    ("december", "dec")), 1) for name in names}
_M = "(" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_D = r"(\d{1,2})(?:st|nd|rd|th)?"
_Y = r"((?:19|20)\d\d)"
_PATTERNS = (  # (regex, kind): kinds say which groups are year, month and day
    (re.compile(rf"\b{_Y}-(\d\d)-(\d\d)\b"), "ymd"),
    (re.compile(rf"\b{_D}\s+(?:of\s+)?{_M},?\s+{_Y}\b"), "dmy"),
    (re.compile(rf"\b{_M}\s+{_D},?\s+{_Y}\b"), "mdy"),
    (re.compile(rf"\b{_Y}-(\d\d)\b"), "ym"),
    (re.compile(rf"\b{_M},?\s+(?:of\s+)?{_Y}\b"), "my"),
    (re.compile(rf"\b{_Y}\b"), "y"),
)
_AGO = re.compile(r"\b(\d{1,4})\s+days?\s+ago\b")
_RELATIVE = re.compile(r"\b(today|yesterday|(?:this|last)\s+(?:week|month|year))\b")


def _month_end(y: int, m: int) -> date:
    return (date(y + m // 12, m % 12 + 1, 1)) - timedelta(days=1)


def _span(kind: str, groups: tuple[str, ...]) -> tuple[date, date] | None:
    part = dict(zip(kind, groups))
    try:
        y = int(part["y"])
        if "m" not in part:
            return date(y, 1, 1), date(y, 12, 31)
        m = int(part["m"]) if part["m"].isdigit() else MONTHS[part["m"]]
        if "d" not in part:
            return date(y, m, 1), _month_end(y, m)
        d = date(y, m, int(part["d"]))
        return d, d
    except (ValueError, KeyError):  # 2023-13, 31 February
        return None


def _relative(word: str, today: date) -> tuple[date, date]:
    word = " ".join(word.split())
    if word == "today":
        return today, today
    if word == "yesterday":
        return today - timedelta(days=1), today - timedelta(days=1)
    which, unit = word.split()
    if unit == "week":
        start = today - timedelta(days=today.weekday()) - timedelta(days=7 if which == "last" else 0)
        return start, start + timedelta(days=6)
    if unit == "month":
        y, m = (today.year, today.month) if which == "this" else \
            ((today.year, today.month - 1) if today.month > 1 else (today.year - 1, 12))
        return date(y, m, 1), _month_end(y, m)
    y = today.year - (which == "last")
    return date(y, 1, 1), date(y, 12, 31)


def periods(text: str, today: date) -> list[tuple[date, date]]:
    """The spans of days ``text`` names (module docstring), in the order found; [] for none."""
    low = text.lower()
    out: list[tuple[date, date]] = []
    taken: list[tuple[int, int]] = []  # what a longer form already read ("May 2023" is not also "2023")
    for pattern, kind in _PATTERNS:
        for m in pattern.finditer(low):
            if any(a < m.end() and m.start() < b for a, b in taken):
                continue
            span = _span(kind, m.groups())
            if span is not None:
                out.append(span)
                taken.append(m.span())
    for m in _AGO.finditer(low):
        d = today - timedelta(days=int(m.group(1)))
        out.append((d, d))
    out.extend(_relative(m.group(1), today) for m in _RELATIVE.finditer(low))
    return out


def within(day: date, spans: list[tuple[date, date]]) -> bool:
    """Whether ``day`` falls in any of ``spans``."""
    return any(a <= day <= b for a, b in spans)
