"""The bodies of the commands that must start fast, free of Typer: find, show, history, write, and
the agent-loop commands attest, compact and checkpoint load.

Both the Typer commands and the fast path (``cli/fast.py``) call these, so the
two can never drift apart in what they do or print.
"""

from __future__ import annotations

from typing import Optional

from cortexctl.cli.common import open_cortex
from cortexctl.cli.output import Output
from cortexctl.errors import UsageError

FORMS = ("short", "medium", "full")


def run_find(
    config, *, types: list[str], tags: list[str], frames: list[str], include_tombstoned: bool, k: int,
    form: str, near: Optional[str], budget_tokens: Optional[int], store: Optional[str], actor: Optional[str],
    wait: Optional[float], json: bool, jsonl: bool,
) -> None:
    from cortexctl.engine.models import FindQuery

    out = Output(json=json, jsonl=jsonl)
    query = FindQuery(types=types, tags=tags, frames=frames, include_tombstoned=include_tombstoned, k=k, form=form,
                      near=near, budget_tokens=budget_tokens)
    hits, warnings = open_cortex(config, store, actor, wait).find_with_warnings(query)
    for w in warnings:
        out.warn(w)
    if out.machine:
        out.emit_many((h.to_json() for h in hits),
                      lambda docs: {"count": len(docs), "tokens": sum(h.tokens for h in hits),
                                    "warnings": warnings, "results": docs})
        return
    if out.tty:
        lanes = {"lexical": "L", "semantic": "S", "salience": "R"}
        if near is not None:
            out.table(["#", "id", "type", "score", "lanes", form],
                      [(h.rank, h.id[:10] + ("†" if h.tombstoned else ""), h.type, f"{h.score:.3f}",
                        "".join(lanes[x] for x in h.lanes), h.text) for h in hits])
        else:
            out.table(["#", "id", "type", form],
                      [(h.rank, h.id[:10] + ("†" if h.tombstoned else ""), h.type, h.text) for h in hits])
        if not hits:
            out.hint("no memories match")
    else:
        out.table([], [(f"cortex://m/{h.id}", h.type, h.text) for h in hits])


def run_show(
    config, ref: str, *, version: Optional[int], form: str, store: Optional[str], actor: Optional[str],
    wait: Optional[float], json: bool, jsonl: bool,
) -> None:
    from cortexctl.engine.models import iso

    out = Output(json=json, jsonl=jsonl)
    if form not in FORMS:
        raise UsageError(f"--form must be short, medium or full, not {form!r}")
    m = open_cortex(config, store, actor, wait).show(ref, version=version)
    if out.machine:
        out.emit(m.to_json(form))
        return
    out.line(f"{m.uri}  (version {m.version} of {m.current_version})")
    out.line(f"type: {m.type}   actor: {m.actor}   visibility: {m.visibility}   importance: {m.importance}")
    if m.tags:
        out.line(f"tags: {', '.join(m.tags)}")
    if m.frames:
        out.line(f"frames: {', '.join(m.frames)}")
    out.line(f"created: {iso(m.version_created_at)} by {m.created_by}   confidence: {m.confidence:g}")
    out.line(f"hash: {m.hash}")
    if m.tombstone:
        out.line(f"forgotten: {iso(m.tombstone.at)} by {m.tombstone.by}: {m.tombstone.reason}")
    out.line()
    out.line(m.form(form))


def run_history(
    config, ref: str, *, store: Optional[str], actor: Optional[str], wait: Optional[float], json: bool, jsonl: bool,
) -> None:
    from cortexctl.engine.models import iso

    out = Output(json=json, jsonl=jsonl)
    versions = open_cortex(config, store, actor, wait).history(ref)
    if out.machine:
        out.emit_many((v.to_json() for v in versions),
                      lambda docs: {"uri": f"cortex://m/{versions[0].id}", "versions": docs})
        return
    out.table(
        ["version", "created", "by", "hash", "short form"],
        [(f"{v.version}{'*' if v.current else ''}", iso(v.created_at), v.created_by, v.hash[:12], v.short)
         for v in versions],
    )


def run_write(
    config, type_name: str, text: Optional[str] = None, *, sets: list[str], data: Optional[str], tags: list[str],
    frames: list[str], importance: int, visibility: str, confidence: float, session: Optional[str],
    short_form: Optional[str], medium_form: Optional[str], store: Optional[str], actor: Optional[str],
    wait: Optional[float], json: bool, jsonl: bool,
) -> None:
    from cortexctl.cli.common import read_data

    out = Output(json=json, jsonl=jsonl)
    forms = {k: v for k, v in (("short", short_form), ("medium", medium_form)) if v is not None}
    result = open_cortex(config, store, actor, wait).write(
        type_name, text, data=read_data(data), sets=sets, tags=tags, frames=frames, importance=importance,
        visibility=visibility, confidence=confidence, forms=forms or None, session=session,
    )
    for w in result.warnings:
        out.warn(w)
    if out.machine:
        out.emit(result.to_json())
    else:
        out.line(result.uri)


def run_attest(
    config, cited: list[str], *, intent: Optional[str], outcome: Optional[str], reason: Optional[str],
    store: Optional[str], actor: Optional[str], wait: Optional[float], json: bool, jsonl: bool,
) -> None:
    from cortexctl.engine.salience import FACTORS

    out = Output(json=json, jsonl=jsonl)
    if intent is None:
        raise UsageError("attest needs --intent ID")
    if outcome is None:
        raise UsageError("attest needs --outcome success|failure")
    result = open_cortex(config, store, actor, wait).attest(intent, outcome, cited, reason=reason)
    if out.machine:
        out.emit(result.to_json())
        return
    delta = f"{result.citations_delta:+d}" if result.citations_delta else "0"
    out.line(f"attest {result.seq} (learn-weights {result.learn_seq}): {result.outcome}, "
             f"{len(result.affected)} memor{'y' if len(result.affected) == 1 else 'ies'} affected, citations {delta}")
    for uri, why in result.skipped:
        out.line(f"skipped {uri} ({why})")
    if result.step_skipped:
        out.line(f"weights unchanged: {result.step_skipped}")
    else:
        out.line("weights: " + ", ".join(f"{f} {a:.3f}->{b:.3f}" for f, a, b in
                                          zip(FACTORS, result.previous_weights, result.new_weights)))


def _read_refs(value: str) -> list[str]:
    from cortexctl.cli.common import read_input
    from cortexctl.engine.compact import refs_from_text
    from cortexctl.errors import InvalidData

    raw, where = read_input(value, "--in-context-file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidData(f"{where}: not valid UTF-8") from None
    return refs_from_text(text, where)


def run_compact(
    config, refs: list[str], *, intent: Optional[str], step: Optional[str], budget_tokens: Optional[int],
    load_bearing: list[str], in_context_file: Optional[str], checkpoint_dir: Optional[str], store: Optional[str],
    actor: Optional[str], wait: Optional[float], json: bool, jsonl: bool,
) -> None:
    out = Output(json=json, jsonl=jsonl)
    if intent is None or step is None or budget_tokens is None:
        raise UsageError("compact needs --intent ID, --step STEP and --budget-tokens N")
    in_context = list(refs)
    if in_context_file is not None:
        in_context += _read_refs(in_context_file)
    result = open_cortex(config, store, actor, wait).compact(
        intent, step, budget_tokens, in_context, load_bearing=load_bearing, checkpoint_dir=checkpoint_dir,
    )
    if result.mirror_error:
        out.warn(f"checkpoint stored, but its mirror was not written: {result.mirror_error}")
    if out.machine:
        out.emit(result.to_json())
        return
    out.line(result.checkpoint.uri)
    out.table(["", "uri", "tokens", "why / short form"],
              [*(("kept", k.uri, k.tokens, k.why) for k in result.kept),
               *(("stub", c.ref, t, c.short) for c, t in zip(result.checkpoint.compacted, result.compacted_tokens))])
    for uri, why in result.dropped:
        out.hint(f"dropped {uri} ({why})")
    out.hint(f"{result.total_tokens} of {budget_tokens} tokens; {len(result.kept)} kept, "
             f"{len(result.compacted_tokens)} compacted"
             + (f"; mirror: {result.snapshot_path}" if result.snapshot_path else ""))


def run_checkpoint_load(
    config, *, intent: Optional[str], step: Optional[str], store: Optional[str], actor: Optional[str],
    wait: Optional[float], json: bool, jsonl: bool,
) -> None:
    out = Output(json=json, jsonl=jsonl)
    if intent is None or step is None:
        raise UsageError("checkpoint load needs --intent ID and --step STEP")
    record = open_cortex(config, store, actor, wait).load_checkpoint(intent, step)
    if out.machine:
        out.emit(record.to_json())
        return
    out.line(record.uri)
    out.table(["", "uri", "salience", "short form"],
              [*(("kept", u, "", "") for u in record.kept),
               *(("stub", c.ref, f"{c.salience:.3f}", c.short) for c in record.compacted)])
