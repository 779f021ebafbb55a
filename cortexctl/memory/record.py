"""Building an immutable version from caller data: validate, encode, hash, render."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cortexctl.memory import codec, forms, schema
from cortexctl.memory.types import TYPE_CODES


@dataclass(frozen=True)
class VersionBody:
    """What a write or update computes before it touches the store."""

    type: str
    data: dict[str, Any]
    data_bytes: bytes
    hash: bytes
    short: str
    medium: str
    forms_override: bool

    @property
    def type_code(self) -> int:
        return TYPE_CODES[self.type]

    @property
    def search_text(self) -> str:
        return schema.search_text(self.type, self.data)


def build_version(
    type_name: str, data: dict[str, Any], form_override: dict[str, Any] | None = None
) -> VersionBody:
    """Validate ``data`` and compute the version's bytes, hash and forms.

    ``form_override`` may give ``short`` and/or ``medium``; each is checked
    against its budget, and a missing one is rendered from the template.
    """
    canonical = schema.normalize(type_name, data)
    data_bytes = codec.encode(canonical)
    if len(data_bytes) > schema.MAX_DATA_BYTES:
        raise schema.InvalidData(
            f"{type_name}: encoded data is {len(data_bytes)} bytes, over the {schema.MAX_DATA_BYTES}-byte limit"
        )
    override = form_override or {}
    for key in override:
        if key not in ("short", "medium"):
            raise schema.InvalidData(f"forms.{key}: unknown form (forms: short, medium)")
    short = forms.check_override("short", override["short"]) if override.get("short") is not None else forms.render_short(type_name, canonical)
    medium = forms.check_override("medium", override["medium"]) if override.get("medium") is not None else forms.render_medium(type_name, canonical)
    return VersionBody(
        type=type_name,
        data=canonical,
        data_bytes=data_bytes,
        hash=codec.version_hash(TYPE_CODES[type_name], data_bytes),
        short=short,
        medium=medium,
        forms_override=bool(override),
    )
