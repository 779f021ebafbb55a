"""Loose JSON: the one object a chat model meant, from a reply that may wrap it.

Accepted around the object: code fences (```json ... ```), prose before and after, and
trailing commas before ``}`` or ``]``. The outermost ``{...}`` is taken (braces inside
strings are respected). A reply with no such object, or one that still does not parse,
is InvalidData quoting the reply's first 200 characters.
"""

from __future__ import annotations

import json

from cortexctl.errors import InvalidData, check_nesting, too_deep

SHOWN = 200


def _shown(reply: str) -> str:
    return json.dumps(reply[:SHOWN], ensure_ascii=False)


def _outside_strings(text: str, start: int = 0):
    """(index, character) of each character from ``start`` that is not inside a JSON string
    (the quotes themselves are skipped too)."""
    in_str = esc = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        else:
            yield i, ch


def _outermost(text: str) -> str | None:
    start = text.find("{")
    while start != -1:
        depth = 0
        for i, ch in _outside_strings(text, start):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[start : i + 1]
        start = text.find("{", start + 1)
    return None


def _without_trailing_commas(text: str) -> str:
    """Drop commas before } or ], outside strings."""
    drop = {i for i, ch in _outside_strings(text)
            if ch == "," and text[i + 1 :].lstrip(" \t\r\n")[:1] in ("}", "]") and text[i + 1 :].strip()}
    return "".join(ch for i, ch in enumerate(text) if i not in drop)


def parse_object(reply: str) -> dict:
    """The JSON object in ``reply``."""
    if not isinstance(reply, str):
        raise InvalidData("the model's reply is not text")
    candidate = _outermost(reply)
    if candidate is None:
        raise InvalidData(f"the model's reply holds no JSON object: {_shown(reply)}")
    for text in (candidate, _without_trailing_commas(candidate)):
        try:
            doc = check_nesting(json.loads(text), "the model's reply")
        except ValueError:
            continue
        except RecursionError:
            raise too_deep("the model's reply") from None
        if isinstance(doc, dict):
            return doc
    raise InvalidData(f"the model's reply is not the expected JSON: {_shown(reply)}")
