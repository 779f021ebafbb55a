"""The closed vocabularies of the taxonomy: memory types, enumerations, verbs,
object kinds and frames.

Codes are persisted (in version hashes, in the journal, in exports) and are
never renumbered; new members are only ever appended.
"""

from __future__ import annotations

from dataclasses import dataclass

from cortexctl.errors import InvalidData, UsageError

# type name -> one-byte code (SPEC §2). Never renumber.
TYPE_CODES: dict[str, int] = {
    "identity": 0x01,
    "fact": 0x02,
    "preference": 0x03,
    "belief": 0x04,
    "event": 0x05,
    "goal": 0x06,
    "constraint": 0x07,
    "capability": 0x08,
    "pattern": 0x09,
}
TYPE_NAMES: dict[int, str] = {code: name for name, code in TYPE_CODES.items()}
TYPES: tuple[str, ...] = tuple(TYPE_CODES)

POLARITY = ("prefer", "avoid", "neutral", "do", "dont")
CONSTRAINT_STRENGTH = ("soft", "firm", "hard")
GOAL_STATUS = ("active", "paused", "completed", "abandoned")
SOURCE_KIND = ("stated", "observed", "inferred", "imported", "consolidated")
CONSTRAINT_SOURCE = ("user", "operator", "system", "learned")
EVENT_OUTCOME = ("success", "failure", "partial", "unknown")
VISIBILITY = ("private", "scoped", "public")

# Verbs: the closed 10-value enum, code = position + 1 (append only).
VERBS = (
    "find", "acquire", "build", "modify", "deliver",
    "analyze", "negotiate", "schedule", "monitor", "delegate",
)
# Object kinds: closed and append-only.
OBJ_KINDS = (
    "token", "address", "skill", "tool", "file", "repo", "url", "person",
    "service", "document", "task", "host", "dataset", "model", "account",
)

MAX_FRAME_REF_BYTES = 512
MAX_TAG_CHARS = 64


def type_code(name: str) -> int:
    try:
        return TYPE_CODES[name]
    except KeyError:
        raise UsageError(
            f"unknown memory type {name!r} (types: {', '.join(TYPES)})"
        ) from None


def type_name(code: int) -> str:
    """The name of a stored type code; an unknown code means a damaged store."""
    from cortexctl.errors import IntegrityError

    try:
        return TYPE_NAMES[code]
    except KeyError:
        raise IntegrityError(f"stored type code {code!r} is not a known memory type (damaged store)") from None


@dataclass(frozen=True, order=True)
class Frame:
    """A (verb, object kind, object ref) binding, written ``verb:kind:ref``."""

    verb: str
    kind: str
    ref: str

    def __str__(self) -> str:
        return f"{self.verb}:{self.kind}:{self.ref}"

    @classmethod
    def parse(cls, text: str, *, error=UsageError) -> "Frame":
        parts = text.split(":", 2) if isinstance(text, str) else []
        if len(parts) != 3 or not all(parts):
            raise error(f"frame {text!r}: expected VERB:KIND:REF, e.g. build:repo:github.com/acme/api")
        verb, kind, ref = parts
        if verb not in VERBS:
            raise error(f"frame {text!r}: unknown verb {verb!r} (verbs: {', '.join(VERBS)})")
        if kind not in OBJ_KINDS:
            raise error(f"frame {text!r}: unknown object kind {kind!r} (kinds: {', '.join(OBJ_KINDS)})")
        if len(ref.encode()) > MAX_FRAME_REF_BYTES or any(c in ref for c in "\n\r\t"):
            raise error(f"frame {text!r}: ref must be one line of at most {MAX_FRAME_REF_BYTES} bytes")
        return cls(verb, kind, ref)


def parse_frame_filter(text: str) -> tuple[str, str | None, str | None]:
    """A find filter: ``verb``, ``verb:kind`` or ``verb:kind:ref``."""
    parts = text.split(":", 2)
    if not parts[0] or any(p == "" for p in parts):
        raise UsageError(f"frame {text!r}: expected VERB[:KIND[:REF]]")
    verb = parts[0]
    if verb not in VERBS:
        raise UsageError(f"frame {text!r}: unknown verb {verb!r} (verbs: {', '.join(VERBS)})")
    kind = parts[1] if len(parts) > 1 else None
    if kind is not None and kind not in OBJ_KINDS:
        raise UsageError(f"frame {text!r}: unknown object kind {kind!r} (kinds: {', '.join(OBJ_KINDS)})")
    ref = parts[2] if len(parts) > 2 else None
    return verb, kind, ref


def check_tag(tag: object, *, error=UsageError) -> str:
    if (
        not isinstance(tag, str)
        or not tag
        or len(tag) > MAX_TAG_CHARS
        or any(c.isspace() or c == "," for c in tag)
        or not tag.isprintable()
    ):
        raise error(
            f"tag {tag!r}: must be 1-{MAX_TAG_CHARS} printable characters without spaces or commas"
        )
    return tag


MAX_NAME_CHARS = 256


def check_name(value: object, field: str, *, error=UsageError) -> str:
    """An actor, session or similar name: 1-256 printable characters."""
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME_CHARS or not value.isprintable():
        raise error(f"{field}: must be 1-{MAX_NAME_CHARS} printable characters")
    return value


MAX_COUNT = 2**53 - 1  # salience counters (access, citations) stop here: exact as doubles, never overflowing
MAX_LABEL_CHARS = 128
_LABEL_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-")


def check_label(value: object, field: str, *, error=UsageError) -> str:
    """An intent or step ID: 1-128 letters, digits, '.', '_', ':' or '-', not starting with
    '.'. Such IDs name checkpoint mirror files, so they can never climb out of a directory."""
    if not isinstance(value, str) or not value:
        raise error(f"{field} must not be empty", field=field)
    if len(value) > MAX_LABEL_CHARS or not _LABEL_CHARS.issuperset(value) or value.startswith("."):
        raise error(f"{field} {value!r}: must be 1-{MAX_LABEL_CHARS} letters, digits, '.', '_', ':' or '-'"
                    " and not start with '.'", field=field)
    return value


def check_importance(value: object, *, error=UsageError) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10:
        raise error(f"importance: {value!r} is not a whole number from 0 to 10")
    return value


def check_visibility(value: object, *, error=UsageError) -> str:
    if value not in VISIBILITY:
        raise error(f"visibility: {value!r} is not one of {', '.join(VISIBILITY)}")
    return value  # type: ignore[return-value]


def check_confidence(value: object, *, field: str = "confidence", error=InvalidData) -> float:
    ok = not isinstance(value, bool) and isinstance(value, (int, float))
    try:
        number = float(value) if ok else -1.0  # type: ignore[arg-type]
    except OverflowError:
        number = -1.0
    if not 0.0 <= number <= 1.0:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise error(f"{field}: {shown} is not a number from 0 to 1")
    return number + 0.0
