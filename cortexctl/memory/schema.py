"""Per-type data schemas, defaults and write-time validation.

``normalize(type_name, data)`` takes what a caller gave (a dict from flags, JSON
or an import line), fills defaults, checks every field and returns the
canonical dict that is CBOR-encoded. Every error names the field and the rule,
e.g. ``fact.confidence: 1.5 is not a number from 0 to 1``.

Every canonical dict carries every field of its type (absent optional values
are ``None``) plus ``schema_version``, so equal memories encode to equal bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

from cortexctl.errors import InvalidData, check_nesting, too_deep
from cortexctl.memory.types import (
    CONSTRAINT_SOURCE,
    CONSTRAINT_STRENGTH,
    EVENT_OUTCOME,
    GOAL_STATUS,
    POLARITY,
    SOURCE_KIND,
    TYPES,
)

SCHEMA_VERSION = 1
MAX_TEXT_BYTES = 32 * 1024  # one text field
MAX_DATA_BYTES = 64 * 1024  # one encoded version
MAX_LIST_ITEMS = 256


@dataclass(frozen=True)
class Field:
    name: str
    check: Callable[[str, Any], Any]
    default: Any = None
    required: bool = False
    # A callable default is evaluated per write (e.g. "now").
    dynamic_default: Callable[[], Any] | None = None


def _text(field: str, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidData(f"{field}: must be text, got {type(value).__name__}")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_TEXT_BYTES:
        raise InvalidData(f"{field}: text is longer than {MAX_TEXT_BYTES} bytes")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidData(f"{field}: text is not valid Unicode") from None
    if "\x00" in value:
        raise InvalidData(f"{field}: text must not contain NUL characters")
    return value


def _main_text(field: str, value: Any) -> str:
    value = _text(field, value)
    if not value.strip():
        raise InvalidData(f"{field}: is required and must not be empty")
    return value


def _opt_text(field: str, value: Any) -> str | None:
    return None if value is None else _text(field, value)


def _float(value: Any) -> float | None:
    """A finite float from an int or float (-0.0 folded to 0.0), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number + 0.0 if math.isfinite(number) else None


def _unit(field: str, value: Any) -> float:
    number = _float(value)
    if number is None or not 0 <= number <= 1:
        raise InvalidData(f"{field}: {shown(value)} is not a number from 0 to 1")
    return number


def _opt_number(field: str, value: Any) -> float | None:
    if value is None:
        return None
    number = _float(value)
    if number is None:
        raise InvalidData(f"{field}: {shown(value)} is not a number")
    return number


def shown(value: Any) -> str:
    """A value as an error line quotes it: its repr, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _count(field: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value >= 2**63:
        raise InvalidData(f"{field}: {shown(value)} is not a whole number of 0 or more")
    return value


def _flag(field: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidData(f"{field}: {shown(value)} is not true or false")
    return value


def _enum(allowed: tuple[str, ...]) -> Callable[[str, Any], str]:
    def check(field: str, value: Any) -> str:
        if value not in allowed:
            raise InvalidData(f"{field}: {shown(value)} is not one of {', '.join(allowed)}")
        return value

    check.allowed = allowed  # type: ignore[attr-defined]  # read by enum_fields (shell completion)
    return check


def parse_time(field: str, value: Any) -> str:
    """An ISO 8601 time, normalized to UTC as ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``.

    A time without a zone is taken as UTC; a bare date means midnight UTC.
    """
    if not isinstance(value, str):
        raise InvalidData(f"{field}: {shown(value)} is not an ISO 8601 time")
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidData(f"{field}: {shown(value)} is not an ISO 8601 time (e.g. 2026-11-21T09:30:00Z)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    try:
        return format_time(dt)
    except (OverflowError, ValueError):
        raise InvalidData(f"{field}: {shown(value)} is out of range once converted to UTC") from None


def format_time(dt: datetime) -> str:
    """UTC, four-digit year, microseconds only when there are some: 2026-11-21T09:30:00Z."""
    dt = dt.astimezone(timezone.utc)
    text = (f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}"
            f"T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}")
    if dt.microsecond:
        text += f".{dt.microsecond:06d}"
    return text + "Z"


def iso(dt: datetime | None) -> str | None:
    """A stored time (naive UTC) as ISO 8601 text with a Z (``format_time``); None stays None."""
    if dt is None:
        return None
    return format_time(dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc))


def now_text() -> str:
    return format_time(datetime.now(timezone.utc))


def _opt_time(field: str, value: Any) -> str | None:
    return None if value is None else parse_time(field, value)


def _text_list(field: str, value: Any) -> list[str]:
    if not isinstance(value, list):
        raise InvalidData(f"{field}: must be a list of text")
    if len(value) > MAX_LIST_ITEMS:
        raise InvalidData(f"{field}: at most {MAX_LIST_ITEMS} items")
    return [_text(f"{field}[{i}]", v) for i, v in enumerate(value)]


def _text_map(field: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise InvalidData(f"{field}: must be an object of text values")
    if len(value) > MAX_LIST_ITEMS:
        raise InvalidData(f"{field}: at most {MAX_LIST_ITEMS} entries")
    out = {}
    for k, v in value.items():
        _text(f"{field} key", k)
        out[k] = _text(f"{field}.{k}", v)
    return out


SCHEMAS: dict[str, tuple[Field, ...]] = {
    "identity": (
        Field("name", _main_text, required=True),
        Field("did", _opt_text),
        Field("profile", _text_map, default={}),
    ),
    "fact": (
        Field("statement", _main_text, required=True),
        Field("subject", _text, default=""),
        Field("predicate", _text, default=""),
        Field("confidence", _unit, default=1.0),
        Field("source", _enum(SOURCE_KIND), default="stated"),
        Field("observed_at", _opt_time),
    ),
    "preference": (
        Field("topic", _main_text, required=True),
        Field("polarity", _enum(POLARITY), default="prefer"),
        Field("strength", _unit, default=0.5),
        Field("rationale", _text, default=""),
    ),
    "belief": (
        Field("statement", _main_text, required=True),
        Field("stance", _text, default="believes"),
        Field("confidence", _unit, default=0.5),
    ),
    "event": (
        Field("summary", _main_text, required=True),
        Field("kind", _main_text, default="observation"),
        Field("outcome", _enum(EVENT_OUTCOME), default="unknown"),
        Field("counterparty", _text, default=""),
        Field("cost", _opt_number),
        Field("occurred_at", parse_time, dynamic_default=now_text),
    ),
    "goal": (
        Field("statement", _main_text, required=True),
        Field("status", _enum(GOAL_STATUS), default="active"),
        Field("horizon", _opt_time),
    ),
    "constraint": (
        Field("statement", _main_text, required=True),
        Field("polarity", _enum(POLARITY), default="do"),
        Field("strength", _enum(CONSTRAINT_STRENGTH), default="soft"),
        Field("source", _enum(CONSTRAINT_SOURCE), default="user"),
    ),
    "capability": (
        Field("description", _main_text, required=True),
        Field("subject", _text, default=""),
        Field("verified", _flag, default=False),
    ),
    "pattern": (
        Field("statement", _main_text, required=True),
        Field("strength", _unit, default=0.5),
        Field("coverage", _count, default=1),
        Field("derived_from", _text_list, default=[]),
    ),
}

MAIN_FIELD: dict[str, str] = {name: fields[0].name for name, fields in SCHEMAS.items()}
FIELD_NAMES: dict[str, tuple[str, ...]] = {
    name: tuple(f.name for f in fields) for name, fields in SCHEMAS.items()
}
assert tuple(SCHEMAS) == TYPES

# The free-text fields each type is found by (find --near: the lexical and semantic lanes).
SEARCH_FIELDS: dict[str, tuple[str, ...]] = {
    "identity": ("name", "did", "profile"),
    "fact": ("statement", "subject", "predicate"),
    "preference": ("topic", "rationale"),
    "belief": ("statement",),
    "event": ("summary", "counterparty"),
    "goal": ("statement",),
    "constraint": ("statement",),
    "capability": ("description", "subject"),
    "pattern": ("statement",),
}


def search_text(type_name: str, data: dict[str, Any]) -> str:
    """The text a memory is found by: its free-text fields, main text first, one per line."""
    parts: list[str] = []
    for name in SEARCH_FIELDS[type_name]:
        value = data.get(name)
        if isinstance(value, dict):
            parts.extend(f"{k} {v}" for k, v in value.items())
        elif isinstance(value, str) and value.strip():
            parts.append(value)
    return "\n".join(parts)


def normalize(type_name: str, data: dict[str, Any]) -> dict[str, Any]:
    """Validate ``data`` for ``type_name`` and return its canonical form."""
    fields = SCHEMAS[type_name]
    if not isinstance(data, dict):
        raise InvalidData(f"{type_name}: data must be a JSON object")
    known = FIELD_NAMES[type_name]
    for key in data:
        if key != "schema_version" and key not in known:
            raise InvalidData(
                f"{type_name}.{key}: unknown field (fields: {', '.join(known)})"
            )
    sv = data.get("schema_version", SCHEMA_VERSION)
    if sv != SCHEMA_VERSION or isinstance(sv, bool):
        raise InvalidData(f"{type_name}.schema_version: {shown(sv)} is not {SCHEMA_VERSION}")
    out: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
    for f in fields:
        path = f"{type_name}.{f.name}"
        if f.name in data and data[f.name] is not None:
            out[f.name] = f.check(path, data[f.name])
        elif f.required:
            raise InvalidData(f"{path}: is required")
        elif f.dynamic_default is not None:
            out[f.name] = f.dynamic_default()
        else:
            default = f.default
            out[f.name] = type(default)(default) if isinstance(default, (list, dict)) else default
    return out


def coerce_cli_value(type_name: str, field: str, raw: str) -> Any:
    """Turn a ``--set FIELD=VALUE`` string into the field's JSON type.

    Numbers and booleans are parsed for fields that hold them; a value that
    starts with ``[`` or ``{`` is parsed as JSON for list and map fields.
    """
    import json

    if field not in FIELD_NAMES[type_name]:
        raise InvalidData(
            f"{type_name}.{field}: unknown field (fields: {', '.join(FIELD_NAMES[type_name])})"
        )
    check = next(f.check for f in SCHEMAS[type_name] if f.name == field)
    if check in (_unit, _opt_number):
        try:
            return float(raw)
        except ValueError:
            raise InvalidData(f"{type_name}.{field}: {shown(raw)} is not a number") from None
    if check is _count:
        try:
            return int(raw)
        except ValueError:
            raise InvalidData(f"{type_name}.{field}: {shown(raw)} is not a whole number") from None
    if check is _flag:
        low = raw.lower()
        if low in ("true", "yes", "1"):
            return True
        if low in ("false", "no", "0"):
            return False
        raise InvalidData(f"{type_name}.{field}: {shown(raw)} is not true or false")
    if check in (_text_list, _text_map):
        try:
            return check_nesting(json.loads(raw), f"{type_name}.{field}")
        except RecursionError:
            raise too_deep(f"{type_name}.{field}") from None
        except ValueError:
            if check is _text_list:
                return [s for s in raw.split(",") if s]
            raise InvalidData(f"{type_name}.{field}: {shown(raw)} is not a JSON object") from None
    return raw


def enum_fields(type_name: str) -> dict[str, tuple[str, ...]]:
    """The fields of ``type_name`` that take one of a closed set of values, with those values."""
    return {f.name: f.check.allowed for f in SCHEMAS.get(type_name, ()) if hasattr(f.check, "allowed")}


def field_names(type_name: str) -> tuple[str, ...]:
    """The data fields of ``type_name``, main text first."""
    return tuple(f.name for f in SCHEMAS.get(type_name, ()))
