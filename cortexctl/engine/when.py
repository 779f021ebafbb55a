"""Times a user gives on the command line or to a tool (``--as-of``, ``--since``, ``--until``,
``--valid-at``): an RFC 3339 time, a date, or an age.

- RFC 3339 / ISO 8601: ``2026-11-21T09:30:00Z``, ``2026-11-21T10:30:00+01:00``; a time without
  a zone is UTC.
- A date: ``2026-11-21`` is midnight UTC at its start.
- An age, counted back from now: a whole number and a unit, ``90s``, ``30m``, ``3h``, ``2d``,
  ``1w`` (``2d ago`` reads the same); ``now`` is now.

Answers are naive UTC ``datetime`` objects, as the store keeps times.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from cortexctl.errors import UsageError

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_AGE = re.compile(r"(\d{1,9})\s*([smhdw])(?:\s+ago)?")
FORMS = "an RFC 3339 time like 2026-11-21T09:30:00Z, a date like 2026-11-21, or an age like 3h, 2d, 1w"


def parse(text: str, now: datetime, *, field: str) -> datetime:
    """``text`` as a naive UTC time; ``now`` (naive UTC) anchors an age. UsageError (exit 2)
    naming ``field`` for anything else."""
    from cortexctl.memory.schema import shown

    raw = text.strip().lower() if isinstance(text, str) else ""
    if raw == "now":
        return now
    age = _AGE.fullmatch(raw)
    if age:
        try:
            return now - timedelta(seconds=int(age.group(1)) * UNITS[age.group(2)])
        except OverflowError:
            raise UsageError(f"{field}: {shown(text)} reaches back before the year 1", field=field) from None
    value = raw.upper()
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(value) if raw else None
    except ValueError:
        dt = None
    if dt is None:
        raise UsageError(f"{field}: {shown(text)} is not a time ({FORMS})", field=field)
    if dt.tzinfo is not None:
        try:
            dt = dt.astimezone(timezone.utc).replace(tzinfo=None)
        except (OverflowError, ValueError):
            raise UsageError(f"{field}: {shown(text)} is out of range once converted to UTC", field=field) from None
    return dt


def parse_past(text: str, now: datetime, *, field: str) -> datetime:
    """``parse``, refusing a time after ``now``: the store cannot say what it will hold."""
    at = parse(text, now, field=field)
    if at > now:
        raise UsageError(f"{field}: {text.strip()} is in the future (now is {now.isoformat(timespec='seconds')}Z)",
                         field=field)
    return at
