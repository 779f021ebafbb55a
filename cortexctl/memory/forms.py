"""Render forms: short (<= 50 tokens), medium (<= 200 tokens), full (unbounded).

Tokens are estimated as UTF-8 bytes / 4, rounded up, everywhere.

Short and medium are rendered at write time from per-type templates and
stored; full is rendered on demand. When a form has to be shortened it is cut
at a word boundary and ends with "…"; a high-entropy token (hex, hashes, IDs,
keys, paths, URLs, any unbroken run of 24+ characters) is never cut in half:
the cut goes before it.
"""

from __future__ import annotations

import re
from typing import Any

from cortexctl.errors import InvalidData

SHORT_TOKENS = 50
MEDIUM_TOKENS = 200
ELLIPSIS = "…"
FORMS = ("short", "medium", "full")
RENDERING = 1  # bump when a change here changes any rendered form: the snapshot leaves out the forms
# equal to these renderings (a snapshot made under another rendering is out of date, and rebuilt)

_HIGH_ENTROPY = re.compile(
    r"""
    [A-Za-z][A-Za-z0-9+.\-]*://\S+         # URLs
    | \b0x[0-9A-Fa-f]+\b                    # 0x... hex
    | \b[0-9A-Fa-f]{8,}\b                   # bare hex runs, hashes
    | (?:~|\.{1,2})?/\S+                    # absolute and relative paths
    | \S+/\S+                               # a/b/c paths
    | [A-Za-z]:\\\S*                        # Windows paths
    | \b(?=[A-Za-z0-9_+=-]*\d)(?=[A-Za-z0-9_+=-]*[A-Za-z])[A-Za-z0-9_+=-]{16,}  # IDs, keys
    | \b(?=[A-Za-z0-9_+=-]*[a-z])(?=[A-Za-z0-9_+=-]*[A-Z])[A-Za-z0-9_+=-]{16,}  # mixed-case keys
    | [A-Za-z0-9_+=-]{24,}                  # any long unbroken token
    """,
    re.VERBOSE,
)
_WORD = re.compile(r"\S+")


def count_tokens(text: str) -> int:
    """Estimated tokens: UTF-8 bytes / 4, rounded up."""
    return -(-len(text.encode("utf-8")) // 4)


def high_entropy_tokens(text: str) -> list[str]:
    return [m.group(0) for m in _HIGH_ENTROPY.finditer(text)]


def truncate(text: str, max_tokens: int) -> str:
    """``text`` cut to fit ``max_tokens``, never through a high-entropy token."""
    text = " ".join(text.split()) if "\n" in text else text
    if count_tokens(text) <= max_tokens:
        return text
    budget = max_tokens * 4 - len(ELLIPSIS.encode())
    # Longest character prefix within the byte budget.
    used = 0
    cut = 0
    for i, ch in enumerate(text):
        used += len(ch.encode("utf-8"))
        if used > budget:
            cut = i
            break
    for m in _WORD.finditer(text):
        if m.start() < cut < m.end():
            # Cut before the word. A word long enough that this costs much is an
            # unbroken token of 24+ characters, which counts as high-entropy anyway.
            cut = m.start()
            break
    return text[:cut].rstrip() + ELLIPSIS


def _fit(prefix: str, body: str, suffix: str, max_tokens: int) -> str:
    """Fit prefix+body+suffix, shortening the body first so the frame survives."""
    whole = f"{prefix}{body}{suffix}"
    if count_tokens(whole) <= max_tokens:
        return whole
    frame_tokens = count_tokens(prefix + suffix + ELLIPSIS) + 1
    if frame_tokens < max_tokens // 2:
        room = max_tokens * 4 - len((prefix + suffix).encode())
        body_cut = truncate(body, room // 4)
        candidate = f"{prefix}{body_cut}{suffix}"
        if count_tokens(candidate) <= max_tokens:
            return candidate
    return truncate(whole, max_tokens)


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:g}"


# Words a constraint's statement may start with that already say how to follow it.
_DIRECTIVE = re.compile(r"(?i)^(?:always|never|do|don't|dont|must|mustn't|should|shouldn't|only|avoid|"
                        r"no|not|cannot|can't|keep|use|prefer)\b")
_NEGATED = re.compile(r"(?i)^(?:never|do not|don't|dont|must not|mustn't|should not|shouldn't|"
                      r"not|no|cannot|can't|avoid)\b")
_CAN = re.compile(r"(?i)^(?:can|cannot|can't|could|is able to|are able to|able to)\b")
_PREFERENCE_VERB = {"prefer": "prefers ", "do": "prefers ", "avoid": "avoids ", "dont": "avoids ",
                    "neutral": "has no preference about "}
_OUTCOME_WORD = {"success": "succeeded", "failure": "failed", "partial": "partly succeeded", "unknown": ""}


def _constraint_lead(polarity: str, statement: str) -> str:
    """What goes before a constraint's statement so that it reads as the rule it is."""
    text = statement.lstrip()
    if polarity in ("dont", "avoid"):
        if _NEGATED.match(text):
            return ""  # "do not run migrations ..." already says it
        return "must not: " if polarity == "dont" else "avoid: "
    if polarity == "prefer":
        return "" if _DIRECTIVE.match(text) else "preferably: "
    if polarity == "do":
        return "" if _DIRECTIVE.match(text) else "must: "
    return ""  # neutral


def _sentence(type_name: str, d: dict[str, Any]) -> tuple[str, str, list[str], set[str]]:
    """(prefix, main text, notes, detail labels the sentence already says) of the short form."""
    if type_name == "identity":
        return "", d["name"], [d["did"]] if d.get("did") else [], {"did"}
    if type_name == "fact":
        if d["predicate"] and d["subject"]:
            return f"{d['predicate']}({d['subject']})=", d["statement"], [], {"subject", "predicate"}
        if d["subject"] or d["predicate"]:
            return f"{d['subject'] or d['predicate']}: ", d["statement"], [], {"subject", "predicate"}
        return "", d["statement"], [], set()
    if type_name == "preference":
        return (_PREFERENCE_VERB[d["polarity"]], d["topic"], [f"strength {d['strength']:.2f}"],
                {"polarity", "strength"})
    if type_name == "belief":
        stance = d["stance"].strip()
        return (f"{stance} " if stance else ""), d["statement"], [], {"stance"}
    if type_name == "event":
        head = d["kind"].strip()
        if d["counterparty"]:
            head += f" with {d['counterparty']}"
        notes = [_OUTCOME_WORD[d["outcome"]]] if _OUTCOME_WORD[d["outcome"]] else []
        if d["cost"] is not None:
            notes.append(f"cost {_num(d['cost'])}")
        return head + ": ", d["summary"], notes, {"kind", "outcome", "with", "cost"}
    if type_name == "goal":
        return f"[{d['status']}] ", d["statement"], [], {"status"}
    if type_name == "constraint":
        return (f"[{d['strength']}] {_constraint_lead(d['polarity'], d['statement'])}", d["statement"], [],
                {"strength", "polarity"})
    if type_name == "capability":
        who = f"{d['subject']} " if d["subject"] else ""
        if not _CAN.match(d["description"].lstrip()):
            who += "can "
        return who, d["description"], ["verified" if d["verified"] else "unverified"], {"subject", "verified"}
    if type_name == "pattern":
        return "", d["statement"], [f"strength {d['strength']:.2f}", f"coverage {d['coverage']}"], \
            {"strength", "coverage"}
    raise AssertionError(type_name)


def _details(type_name: str, d: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) pairs beyond the main text, in display order, non-empty only."""
    pairs: list[tuple[str, Any]]
    if type_name == "identity":
        pairs = [("did", d.get("did"))] + [(k, v) for k, v in sorted(d["profile"].items())]
    elif type_name == "fact":
        pairs = [("subject", d["subject"]), ("predicate", d["predicate"]),
                 ("confidence", _num(d["confidence"])), ("source", d["source"]),
                 ("observed", d["observed_at"])]
    elif type_name == "preference":
        pairs = [("polarity", d["polarity"]), ("strength", f"{d['strength']:.2f}"),
                 ("rationale", d["rationale"])]
    elif type_name == "belief":
        pairs = [("stance", d["stance"]), ("confidence", _num(d["confidence"]))]
    elif type_name == "event":
        pairs = [("kind", d["kind"]), ("outcome", d["outcome"]),
                 ("with", d["counterparty"]), ("cost", _num(d["cost"])),
                 ("at", d["occurred_at"])]
    elif type_name == "goal":
        pairs = [("status", d["status"]), ("horizon", d["horizon"])]
    elif type_name == "constraint":
        pairs = [("strength", d["strength"]), ("polarity", d["polarity"]), ("source", d["source"])]
    elif type_name == "capability":
        pairs = [("subject", d["subject"]), ("verified", "yes" if d["verified"] else "no")]
    elif type_name == "pattern":
        pairs = [("strength", f"{d['strength']:.2f}"), ("coverage", str(d["coverage"])),
                 ("derived from", ", ".join(d["derived_from"]))]
    else:
        raise AssertionError(type_name)
    return [(k, str(v)) for k, v in pairs if v not in (None, "")]


def render_short(type_name: str, data: dict[str, Any]) -> str:
    prefix, body, notes, _ = _sentence(type_name, data)
    suffix = f" ({', '.join(notes)})" if notes else ""
    return _fit(prefix, " ".join(body.split()), suffix, SHORT_TOKENS)


def render_medium(type_name: str, data: dict[str, Any]) -> str:
    """The short form's sentence, then every detail it does not already say."""
    prefix, body, notes, said = _sentence(type_name, data)
    if type_name == "goal":  # "goal: ship v2 (status: active; ...)" reads better than "goal: [active] ..."
        prefix, said = "", set()
    elif type_name == "constraint":  # "constraint: never push to main (strength: hard; ...)"
        prefix, said = _constraint_lead(data["polarity"], data["statement"]), {"polarity"}
    details = notes + [f"{k}: {' '.join(v.split())}" for k, v in _details(type_name, data) if k not in said]
    suffix = f" ({'; '.join(details)})" if details else ""
    return _fit(f"{type_name}: {prefix}", " ".join(body.split()), suffix, MEDIUM_TOKENS)


def render_full(type_name: str, data: dict[str, Any]) -> str:
    from cortexctl.memory.schema import MAIN_FIELD

    lines = [f"{type_name}: {data[MAIN_FIELD[type_name]]}"]
    lines += [f"{k}: {v}" for k, v in _details(type_name, data)]
    return "\n".join(lines)


def render(type_name: str, data: dict[str, Any], form: str) -> str:
    if form == "short":
        return render_short(type_name, data)
    if form == "medium":
        return render_medium(type_name, data)
    return render_full(type_name, data)


def check_override(form: str, text: Any) -> str:
    """A caller-supplied form, validated against its budget."""
    limit = SHORT_TOKENS if form == "short" else MEDIUM_TOKENS
    if not isinstance(text, str) or not text.strip():
        raise InvalidData(f"forms.{form}: must be non-empty text")
    tokens = count_tokens(text)
    if tokens > limit:
        raise InvalidData(f"forms.{form}: {tokens} tokens is over the {limit}-token budget")
    return text
