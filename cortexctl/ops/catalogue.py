"""Every operation, declared once (see ``ops/spec.py``): the MCP server's tools are built from
these, and the commands (``cli/cmd_*.py``) run their engine calls.

Adding an operation: declare it here (or in a module listed in ``ops.MODULES``)
with its parameters, hints, engine call and either its ``Tool`` or why it has
none; derive its command with ``cli.spec.command_for`` in a ``cli/cmd_*.py``.
CONTRIBUTING.md, "Adding a command", walks through one.
"""

from __future__ import annotations

from cortexctl.memory.types import TYPES
from cortexctl.ops.spec import Operation, Param, Tool

# -- parameters several operations share (their help is what a model reads) ------------------------
REF = Param("ref", "A memory: its URI (cortex://m/<ID>), its ID, a unique start of its ID, or the short ref find "
            "shows.", required=True, metavar="REF")
FORMS = ("short", "medium", "full")
GOAL = Param("goal", "The current task, as the agent would state it.", required=True, metavar="TEXT")
BUDGET = Param("budget_tokens", "Token budget (default from config).", type=int, metavar="N")
INTENT = Param("intent", "The intent's ID.", required=True, metavar="ID")
STEP = Param("step", "The step's ID.", required=True, metavar="STEP")
SHORT_FORM = Param("short_form", "Your own short form (<= 50 tokens).", metavar="TEXT")
MEDIUM_FORM = Param("medium_form", "Your own medium form (<= 200 tokens).", metavar="TEXT")
BUNDLE = Param("path", "The bundle directory (backup-<timestamp>).", required=True, metavar="PATH")
SPEC = Param("spec", "The whole spec as an object.", type=dict)
AS_OF = Param("as_of", "Answer as the store stood at this past time (record time): the versions, tags, tombstones "
              "and grants of then. An RFC 3339 time, a date (2026-11-21) or an age (3h, 2d, 1w).", metavar="TIME")

ADMIN = "admin-only: for the operator at the shell, not for an agent over MCP"
LOCAL_FILES = "reads or writes files on the server's machine, which an agent over MCP must not name"


def _forms(short: str | None, medium: str | None) -> dict | None:
    forms = {k: v for k, v in (("short", short), ("medium", medium)) if v is not None}
    return forms or None


# -- engine calls: functions of a Cortex and the parameters, answering a result document ------------
def _find(cx, *, near, types, tags, frames, k, budget_tokens, form, session, summaries, include_tombstoned,
          include_superseded=False, valid_at=None, as_of=None):
    from cortexctl.engine.documents import FindAnswer
    from cortexctl.engine.results import FindQuery

    query = FindQuery(types=types, tags=tags, frames=frames, include_tombstoned=include_tombstoned, k=k, form=form,
                      near=near, budget_tokens=budget_tokens, session=session, summaries=summaries,
                      include_superseded=include_superseded, valid_at=valid_at)
    if as_of is not None:
        return FindAnswer(*cx.find_as_of(query, as_of))
    return FindAnswer(*cx.find_with_warnings(query))


def _show(cx, *, ref, version, form, as_of=None):
    from cortexctl.engine.documents import Shown

    if as_of is not None:
        memory, stood = cx.show_as_of(ref, as_of, version=version)
        return Shown(memory, form, stood)
    return Shown(cx.show(ref, version=version), form)


def _write(cx, *, type, text, data, tags, frames, importance, visibility, confidence, session, short_form,
           medium_form, dedupe, supersedes=None, sets=()):
    return cx.write(type, text, data=data, sets=sets, tags=tags, frames=frames, importance=importance,
                    visibility=visibility, confidence=confidence, forms=_forms(short_form, medium_form),
                    session=session, dedupe=dedupe, supersedes=supersedes)


def _update(cx, *, ref, text, data, confidence, short_form, medium_form, supersede=False, sets=()):
    return cx.update(ref, text, data=data, sets=sets, confidence=confidence, forms=_forms(short_form, medium_form),
                     supersede=supersede)


def _pattern_spec(spec):
    """The spec parameter as the engine takes it: a JSON object is checked and made a spec
    (InvalidData naming the field when it is not one); a made spec passes through."""
    if isinstance(spec, dict) or spec is None:
        from cortexctl.engine.writeback import spec_of

        return spec_of(spec)
    return spec


def _patterns(cx, *, goal):
    from cortexctl.engine.documents import PatternsAnswer

    return PatternsAnswer(goal, cx.patterns(goal))


def _session_summarize(cx, *, session, pending):
    from cortexctl.engine.documents import summaries

    return summaries(cx.session_summarize(session, pending=pending))


def _healthcheck(cx):
    from cortexctl.engine.reports import HealthReport

    return HealthReport(cx.healthcheck())


def _history(cx, *, ref):
    from cortexctl.engine.documents import History

    return History(cx.history(ref), cx.chain(ref))


def _checkpoint_list(cx, *, intent):
    from cortexctl.engine.documents import Listing

    return Listing("checkpoints", cx.checkpoints(intent))


def _grant_list(cx):
    from cortexctl.engine.documents import Listing

    return Listing("grants", cx.grants())


def _session_show(cx, *, session):
    from cortexctl.engine.documents import SessionTurns

    return SessionTurns(session, cx.session_show(session))


def _session_list(cx):
    from cortexctl.engine.documents import Listing

    return Listing("sessions", cx.session_list())


def _session_add_many(cx, *, turns, reopen):
    from cortexctl.engine.documents import Listing

    return Listing("turns", cx.session_add_many(turns, reopen=reopen))


def _consolidate(cx, *, transcripts, dry_run, again, jobs, on_done=None):
    """One (source, text): its result; several: the run's, each result passed to ``on_done`` as it is written."""
    from cortexctl.engine.reports import ConsolidateResult, ConsolidateRun

    each = None if on_done is None else (lambda doc: on_done(ConsolidateResult.of(doc)))
    docs = cx.consolidate_many(transcripts, dry_run=dry_run, again=again, jobs=jobs, on_done=each)
    if len(transcripts) == 1:
        return ConsolidateResult.of(docs[0])
    return ConsolidateRun(dry_run, [ConsolidateResult.of(d) for d in docs])


def _reindex(cx, *, rebuild, progress=None):
    from cortexctl.engine.reports import ReindexResult

    return ReindexResult.of(cx.reindex(rebuild=rebuild, progress=progress))


def _export(cx, *, sink):
    from cortexctl.engine.reports import Count

    return Count("memories", cx.export_jsonl(sink))


def _config_show(cx):
    from cortexctl.engine.documents import ConfigAnswer

    return ConfigAnswer.of(cx.settings)


RO = {"read_only": True, "idempotent": True}

OPERATIONS: list[Operation] = [
    # -- the tools an agent uses ---------------------------------------------------------------
    Operation(
        "find", _find, (
            Param("near", "Find by meaning: text to search for. Omit for salience order.", metavar="TEXT"),
            Param("types", f"Only these types ({', '.join(TYPES)}).", many=True, metavar="TYPE"),
            Param("tags", "Every tag given must be present.", many=True, metavar="TAG"),
            Param("frames", "Frames VERB, VERB:KIND or VERB:KIND:REF; all must match.", many=True, metavar="FRAME"),
            Param("k", "At most this many results.", type=int, default=10, metavar="N"),
            Param("budget_tokens", "At most this many tokens of results, each at the form shown.", type=int,
                  metavar="N"),
            Param("form", "The form of each result's text.", default="short", choices=FORMS, metavar="FORM"),
            Param("session", "Only this session's memories (zoom in).", metavar="ID"),
            Param("summaries", "Only session summaries (zoom out).", type=bool, default=False),
            Param("include_tombstoned", "Also forgotten memories.", type=bool, default=False),
            Param("include_superseded", "Also memories whose valid time has ended (superseded, or past their "
                  "valid_to); each result says superseded_by and ended.", type=bool, default=False),
            Param("valid_at", "Only memories valid at this time (RFC 3339, a date, or an age like 2d): valid_from at or before it, "
                  "valid_to after it (unset ends are open).", metavar="T"),
            AS_OF,
        ), **RO,
        tool=Tool("Find memories", "Find memories by meaning (near), type, tag and frame. Three lanes (lexical, "
                  "semantic, salience) are merged; each result says which lanes found it and why it ranked, and "
                  "whether it matched the query's words or meaning (matched: false when only its salience brought "
                  "it); the answer's matched says whether any result did. Without near: salience order, every "
                  "result matched. With as_of: as the store stood at that past time (the answer's as_of names the "
                  "journal entry). Read-only: find never changes salience.")),
    Operation(
        "show", _show, (
            REF,
            Param("version", "This version instead of the latest.", type=int, metavar="N"),
            Param("form", "The form of the text field.", default="full", choices=FORMS, metavar="FORM"),
            AS_OF,
        ), **RO,
        tool=Tool("Show a memory", "Read one memory: its data, forms, head fields and history position, at its "
                  "latest version or a given one; with as_of, as it stood at that past time.")),
    Operation(
        "write", _write, (
            Param("type", "The memory's type.", required=True, choices=TYPES, metavar="TYPE"),
            Param("text", "The main text (statement, name, topic, summary or description, by type).",
                  metavar="TEXT"),
            Param("data", "The type's other fields as an object (text wins over its main field); valid_from and "
                  "valid_to (RFC 3339 or a date) set when it holds in the world.", type=dict),
            Param("tags", "Tags.", many=True, metavar="TAG"),
            Param("frames", "Frames VERB:KIND:REF.", many=True, metavar="VERB:KIND:REF"),
            Param("importance", "Declared importance 0-10.", type=int, default=5, metavar="N"),
            Param("visibility", default="private", choices=("private", "scoped", "public"), metavar="V"),
            Param("confidence", "Confidence in this version, 0-1.", type=float, default=1.0, metavar="X"),
            Param("session", "The session this memory belongs to.", metavar="ID"),
            SHORT_FORM, MEDIUM_FORM,
            Param("dedupe", "When a live memory of yours has the same type and text, answer with it and write "
                  "nothing.", type=bool, default=False),
            Param("supersedes", "A memory of yours this one replaces: its valid time ends where this one's "
                  "begins (now unless valid_from is given) and both are linked; nothing is deleted.",
                  metavar="REF"),
        ),
        tool=Tool("Write a memory", "Write a new typed memory; answers with its URI. A live memory of yours "
                  "with the same type and text is named in warnings (dedupe: answer with it instead).")),
    Operation(
        "update", _update, (
            REF,
            Param("text", "New main text.", metavar="TEXT"),
            Param("data", "Fields to replace, as an object; valid_from and valid_to (RFC 3339 or a date) change "
                  "when it holds in the world, without a new version.", type=dict),
            Param("confidence", "Confidence in the new version, 0-1.", type=float, metavar="X"),
            SHORT_FORM, MEDIUM_FORM,
            Param("supersede", "Instead of a new version, write a new memory (same type, tags, frames, importance, "
                  "visibility and session; the current data with the changes) that supersedes this one.",
                  type=bool, default=False),
        ),
        tool=Tool("Update a memory", "Write a new version of a memory (given fields replace the current ones); "
                  "old versions stay readable with show(version=N).")),
    Operation(
        "forget", lambda cx, *, ref, reason: cx.forget(ref, reason=reason), (
            REF, Param("reason", "Why it is forgotten.", required=True, metavar="TEXT"),
        ), destructive=True,
        tool=Tool("Forget a memory", "Tombstone a memory: hidden from find, history kept, updates refused (the "
                  "shell's `cortexctl unforget` undoes it).")),
    Operation(
        "remember", lambda cx, *, text, user: cx.remember(text, user=user), (
            Param("text", "The fact.", required=True, metavar="TEXT"),
            Param("user", "A fact about the user (part of the pinned user profile; a repeat touches the "
                  "existing one).", type=bool, default=False),
        ),
        tool=Tool("Remember a fact", "Remember a fact about the world, or about the user (user=true; a repeat "
                  "is not written again).")),
    Operation(
        "outcome", lambda cx, *, text, status, intent: cx.outcome(text, status=status, intent=intent), (
            Param("text", "What was done and how it ended.", required=True, metavar="TEXT"),
            Param("status", required=True, choices=("success", "failure", "partial"), metavar="STATUS"),
            Param("intent", "The intent this outcome belongs to (kept in the provenance).", metavar="ID"),
        ),
        tool=Tool("Record an outcome", "Record how a task ended: an event with status success, failure or "
                  "partial.")),
    Operation(
        "attest", lambda cx, *, intent, outcome, cited, reason: cx.attest(intent, outcome, cited, reason=reason), (
            INTENT,
            Param("outcome", required=True, choices=("success", "failure"), metavar="OUTCOME"),
            Param("cited", "The memories the intent relied on (URIs, IDs or refs), 1 to 256.", many=True,
                  required=True, metavar="URI..."),
            Param("reason", "Why it failed (factual_error and wrong_assumption lower citations).", metavar="R"),
        ),
        tool=Tool("Attest an outcome", "Tell the store which memories an intent relied on and whether it "
                  "succeeded: their use counts and citations change and salience learns (rate limited per "
                  "intent).")),
    Operation(
        "compact", lambda cx, *, intent, step, budget_tokens, in_context, load_bearing, checkpoint_dir=None:
        cx.compact(intent, step, budget_tokens, in_context, load_bearing=load_bearing,
                   checkpoint_dir=checkpoint_dir), (
            INTENT, STEP,
            Param("budget_tokens", "The token budget for kept memories and stubs.", type=int, required=True,
                  metavar="N"),
            Param("in_context", "The memories in context (URIs, IDs or refs).", many=True, required=True,
                  metavar="URI..."),
            Param("load_bearing", "Memories to keep whole.", many=True, metavar="URI"),
        ), destructive=True, idempotent=True,
        tool=Tool("Compact the context", "Fit the memories in context into a token budget: load-bearing ones, "
                  "identities, hard constraints and active goals kept whole, the rest as stubs {ref, short form, "
                  "salience}; stores a checkpoint (replacing one for the same intent and step). Over budget: an "
                  "error, nothing stored.")),
    Operation(
        "checkpoint_load", lambda cx, *, intent, step: cx.load_checkpoint(intent, step), (INTENT, STEP), **RO,
        tool=Tool("Load a checkpoint", "Reload the checkpoint compact stored for an intent and step.")),
    Operation(
        "context", lambda cx, *, goal, query, budget_tokens: cx.context_block(goal, query=query,
                                                                              budget_tokens=budget_tokens), (
            GOAL,
            Param("query", "Retrieve by this text instead of the goal.", metavar="TEXT"),
            BUDGET,
        ), **RO,
        tool=Tool("Context for a task", "Everything for the prompt in one call: the pinned block, the memories "
                  "relevant to the goal (or query), and proven procedural patterns, within a token budget; 'text' "
                  "is ready to paste.")),
    Operation(
        "pinned", lambda cx, *, goal, budget_tokens: cx.pinned(goal, budget_tokens=budget_tokens), (GOAL, BUDGET),
        **RO,
        tool=Tool("Pinned block", "The block to keep in every turn: identity, inviolable rules, hard "
                  "constraints, user profile and the goal, within the pinned budget.")),
    Operation(
        "patterns", _patterns, (GOAL,), **RO,
        tool=Tool("Proven patterns", "Proven procedural patterns (reinforced enough times) whose trigger matches "
                  "the goal, best first.")),
    Operation(
        "session_add", lambda cx, *, session, prompt, response, thought, reopen:
        cx.session_add(session, prompt, response, thought, reopen=reopen), (
            Param("session", "The session's ID.", required=True, metavar="ID"),
            Param("prompt", "What the user asked.", required=True, metavar="TEXT"),
            Param("response", "What the agent answered.", required=True, metavar="TEXT"),
            Param("thought", "The agent's reasoning.", metavar="TEXT"),
            Param("reopen", "Add to a summarized session (its summary is forgotten).", type=bool, default=False),
        ),
        tool=Tool("Save a session turn", "Save one turn (prompt, thought, response) of a session as a memory.")),
    Operation(
        "session_summarize", _session_summarize, (
            Param("session", "The session to summarize.", metavar="ID"),
            Param("pending", "Every session with turns and no summary.", type=bool, default=False),
        ), open_world=True,
        tool=Tool("Summarize a session", "Summarize a session (or every pending one) with the configured chat "
                  "model and store the summary; find(summaries=true) searches them.")),
    Operation(
        "healthcheck", _healthcheck, (), **RO,
        tool=Tool("Health check", "Is the store fine? Status (healthy, degraded, unhealthy), counts, index, "
                  "providers and last backup; secrets never appear.")),

    # -- operations without a tool, each saying why ------------------------------------------------
    Operation("history", _history, (REF,), **RO,
              no_tool="not served yet: show(version=N) reads any version; the version list is for people"),
    Operation("tag", lambda cx, *, ref, add, remove: cx.tag(ref, add=add, remove=remove), (
        REF,
        Param("add", "Add a tag (repeatable).", many=True, metavar="TAG"),
        Param("remove", "Remove a tag (repeatable).", many=True, metavar="TAG"),
    ), idempotent=True,
              no_tool="not served yet: an agent gives tags when it writes; retagging is curation at the shell"),
    Operation("head", lambda cx, *, ref, importance, visibility, frames, remove_frames:
              cx.head(ref, importance=importance, visibility=visibility, add_frames=frames,
                      remove_frames=remove_frames), (
        REF,
        Param("importance", "Declared importance 0-10.", type=int, metavar="N"),
        Param("visibility", "Who may see the memory.", choices=("private", "scoped", "public"), metavar="V"),
        Param("frames", "A frame VERB:KIND:REF (repeatable).", many=True, metavar="VERB:KIND:REF"),
        Param("remove_frames", "Remove a frame (repeatable).", many=True, metavar="VERB:KIND:REF"),
    ), idempotent=True,
              no_tool="not served yet: visibility decides who sees a memory, a change the operator makes"),
    Operation("unforget", lambda cx, *, ref: cx.unforget(ref), (REF,),
              no_tool="undoing a forget is the person's decision at the shell (forget's tool says so)"),
    Operation("pattern_write", lambda cx, *, spec, strength, coverage:
              cx.pattern_write(_pattern_spec(spec), strength=strength, coverage=coverage), (
        SPEC,
        Param("strength", "How strong the pattern is, 0-1.", type=float, default=0.5, metavar="X"),
        Param("coverage", "Successes it already covers.", type=int, default=1, metavar="N"),
    ), no_tool="not served yet: agents learn patterns through consolidate and outcome"),
    Operation("pattern_reinforce", lambda cx, *, spec: cx.pattern_reinforce(_pattern_spec(spec)), (SPEC,),
              no_tool="not served yet: agents learn patterns through consolidate and outcome"),
    Operation("session_add_many", _session_add_many,
              no_tool="a JSONL file of turns (session_add takes one turn)"),
    Operation("session_show", _session_show, (Param("session", "The session's ID.", required=True, metavar="ID"),),
              **RO,
              no_tool="not served yet: find(session=ID) searches one session's turns"),
    Operation("session_list", _session_list, **RO, no_tool="not served yet: for people, at the shell"),
    Operation("consolidate", _consolidate, (
        Param("dry_run", "Show what would be written; write nothing.", type=bool, default=False),
        Param("again", "Consolidate transcripts consolidated before too (they are skipped otherwise).", type=bool,
              default=False),
        Param("jobs", "Ask the chat model about up to N transcripts at once (1-32); writes stay in order.",
              type=int, default=4, metavar="N"),
    ), open_world=True,
              no_tool="not served yet: an agent calls remember, outcome and session_add itself"),
    Operation("checkpoint_list", _checkpoint_list, (Param("intent", "Only this intent's checkpoints.", metavar="ID"),),
              **RO,
              no_tool="not served yet: an agent reloads the checkpoint it names (checkpoint_load)"),
    Operation("grant", lambda cx, *, subagent, types, tags, expires:
              cx.grant(subagent, types=types, tags=tags, expires=expires), (
        Param("subagent", "The sub-agent's actor name, or list to list grants.", required=True, metavar="SUBAGENT"),
        Param("types", "Only memories of this type (repeatable; any type when none).", many=True, metavar="TYPE"),
        Param("tags", "Only memories carrying this tag (repeatable: any one of them; any tags when none).",
              many=True, metavar="TAG"),
        Param("expires", "End the grant after this long: 30m, 2h, 7d or 2w (default: until revoked).",
              metavar="DURATION"),
    ),
              no_tool=ADMIN + " (a grant widens what another actor sees)"),
    Operation("grant_list", _grant_list, **RO, no_tool=ADMIN),
    Operation("revoke", lambda cx, *, target, types, tags: cx.revoke(target, types=types, tags=tags), (
        Param("target", "The grant's ID (grant list shows it) or a unique start of it, 6 characters or more; or "
              "the sub-agent it was given to, with the grant's types and tags (none given: its grant of any type "
              "and tag).", required=True, metavar="GRANT_ID|SUBAGENT"),
        Param("types", "The types of the grant to revoke, as it was given (repeatable).", many=True, metavar="TYPE"),
        Param("tags", "The tags of the grant to revoke, as it was given (repeatable).", many=True, metavar="TAG"),
    ), destructive=True, no_tool=ADMIN),
    Operation("import", lambda cx, *, source, skip_invalid, skip_existing, keep_actors, batch_size, progress=None:
              cx.import_jsonl(source, skip_invalid=skip_invalid, skip_existing=skip_existing,
                              keep_actors=keep_actors, batch_size=batch_size, progress=progress), (
        Param("skip_invalid", "Import the good lines, report the bad.", type=bool, default=False),
        Param("skip_existing", "Skip lines whose memory the store holds with the same content (a re-run, a "
              "re-import).", type=bool, default=False),
        Param("keep_actors", "Keep lines owned by other actors as theirs (else refused).", type=bool, default=False),
        Param("batch_size", "Memories per transaction.", type=int, default=5000, metavar="N"),
    ),
              no_tool=LOCAL_FILES),
    Operation("export", _export, read_only=True, no_tool=LOCAL_FILES),
    Operation("reindex", _reindex, (
        Param("rebuild", "Build the index file from scratch.", type=bool, default=False),
    ), idempotent=True, no_tool=ADMIN + " (re-embeds the store; long-running)"),
    Operation("verify", lambda cx, *, jobs: cx.verify(jobs=jobs), (
        Param("jobs", "Worker processes for the per-memory checks (0: one per CPU).", type=int, metavar="N"),
    ), **RO,
              no_tool=ADMIN + " (reads every record; long-running)"),
    Operation("backup", lambda cx, *, dest, keep, max_age_days, encrypt, progress=None:
              cx.backup(dest=dest, keep=keep, max_age_days=max_age_days, encrypt=encrypt, progress=progress), (
        Param("dest", "Directory for bundles [config backup.dest; default: backups/ beside the store].",
              metavar="DIR"),
        Param("keep", "Keep at least the newest K bundles [config backup.keep; default 3].", type=int, metavar="K"),
        Param("max_age_days", "Prune bundles beyond the newest K once older than N days [config "
              "backup.max_age_days; default 7].", type=float, metavar="N"),
        Param("encrypt", "Seal every member (AES-256-GCM) under the passphrase in $CORTEXCTL_BACKUP_KEY [config "
              "backup.key_env].", type=bool, default=False),
    ),
              no_tool=ADMIN + "; " + LOCAL_FILES),
    Operation("restore", lambda cx, *, path, mode, force, force_topology_mismatch, dry_run, confirm, progress=None:
              cx.restore(path, mode=mode, force=force, force_topology_mismatch=force_topology_mismatch,
                         dry_run=dry_run, confirm=confirm, progress=progress), (
        BUNDLE,
        Param("mode", "merge: union with what the store holds; replace: the bundle's store instead of this one.",
              choices=("merge", "replace"), required=True, metavar="MODE"),
        Param("force", "replace: overwrite a store that holds data.", type=bool, default=False),
        Param("force_topology_mismatch", "Restore a bundle whose topology differs from this store's.", type=bool,
              default=False),
        Param("dry_run", "Say what would change; write nothing.", type=bool, default=False),
        Param("confirm", "replace at the default store location: the word REPLACE (with "
              "CORTEXCTL_ALLOW_DESTRUCTIVE=1).", metavar="WORD"),
    ),
              destructive=True, no_tool=ADMIN + "; " + LOCAL_FILES),
    Operation("bundle_verify", lambda cx, *, path: cx.verify_bundle(path), (BUNDLE,), **RO, no_tool=LOCAL_FILES),
    Operation("bundle_drill", lambda cx, *, path, progress=None: cx.drill_bundle(path, progress=progress), (BUNDLE,),
              read_only=True, no_tool=LOCAL_FILES),
    Operation("config_show", _config_show, **RO,
              no_tool="the server's own configuration, for its operator (API key variables included)"),
    Operation("mcp", None, no_tool="the MCP server itself"),
    Operation("generate_man", None, no_tool="writes the man pages; a step of building cortexctl"),
]
