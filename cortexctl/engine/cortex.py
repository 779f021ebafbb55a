"""The Cortex: open a store as an actor, and write, read, change and find memories.

A thin facade: it builds the ``Context`` (settings, actor, storage, clock,
embedder) and hands each call to its use-case module: ``memories`` (write,
update, tag, head, forget, show, history), ``find``, ``semantic`` (reindex),
``attest``, ``compact``, ``transfer`` (import, export) and ``verify``.

    from cortexctl import Cortex
    cx = Cortex(store="/tmp/brain", actor="alice")
    uri = cx.write("fact", "The deploy key rotates monthly", tags=["ops"]).uri
    print(cx.show(uri).short)
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Iterable

from cortexctl import config as config_mod
from cortexctl.engine import memories
from cortexctl.engine.context import Context
from cortexctl.engine.results import (AsOf, FindHit, FindQuery, HeadResult, Memory, SupersedeResult, VersionInfo,
                                      WriteResult)
from cortexctl.store import open_storage
from cortexctl.store.interface import Storage


class Cortex:
    """A store opened as one actor. Cheap to make; every call opens and closes the store."""

    def __init__(
        self,
        store: str | os.PathLike | None = None,
        *,
        actor: str | None = None,
        wait: float | None = None,
        config: str | os.PathLike | None = None,
        settings: config_mod.Settings | None = None,
        resident: bool = False,
    ) -> None:
        """``resident``: for a long-lived process making many calls (``cortexctl mcp``): keep the
        index file's view and the search snapshot's mapping between calls while they are the same
        files, and what find worked out from them while the snapshot and its delta are the same
        (``store/snapshot/query.py``: ``SnapshotTx``); each call still opens and closes the store,
        sees every other process's writes, and answers as a fresh Cortex would."""
        settings = settings or config_mod.load(config_path=config, store=store, actor=actor, wait=wait)
        self.context = Context(settings, open_storage(settings.location, wait=settings.wait, resident=resident))

    @property
    def settings(self) -> config_mod.Settings:
        return self.context.settings

    @property
    def actor(self) -> str:
        return self.context.actor

    @property
    def store(self) -> Storage:
        """The store's ``Storage`` (``store.interface``): what the engine reaches the store through."""
        return self.context.storage

    @property
    def embedder(self):
        """The active embedder (built on first use; see ``cortexctl.embed``)."""
        return self.context.embedder

    # -- write side ------------------------------------------------------------
    def write(self, type_name: str, text: str | None = None, *, data: dict | None = None,
              sets: Iterable[str] | None = None, tags: Iterable[str] = (), frames: Iterable[str] = (),
              importance: int = 5, visibility: str = "private", confidence: float = 1.0,
              forms: dict | None = None, session: str | None = None, provenance: dict | None = None,
              dedupe: bool = False, supersedes: str | None = None) -> WriteResult:
        """Write a new memory; returns its URI, version 1 and journal seq. A live memory of the same
        type and text is named in a warning; with ``dedupe`` it is returned and nothing is written.
        ``supersedes``: a memory this one replaces (its valid interval ends where this one's begins)."""
        return memories.write(self.context, type_name, text, data=data, sets=sets, tags=tags, frames=frames,
                              importance=importance, visibility=visibility, confidence=confidence,
                              forms=forms, session=session, provenance=provenance, dedupe=dedupe,
                              supersedes=supersedes)

    def update(self, ref: str, text: str | None = None, *, data: dict | None = None,
               sets: Iterable[str] | None = None, confidence: float | None = None,
               forms: dict | None = None, supersede: bool = False) -> WriteResult:
        """Write a new version from the current one with the given changes (``supersede``: a new
        memory that supersedes this one instead)."""
        return memories.update(self.context, ref, text, data=data, sets=sets, confidence=confidence, forms=forms,
                               supersede=supersede)

    def supersede(self, old: str, *, by: str) -> SupersedeResult:
        """Link two memories of the actor: ``by`` supersedes ``old`` (see ``engine/validtime.py``)."""
        from cortexctl.engine import validtime

        return validtime.supersede(self.context, old, by)

    def tag(self, ref: str, *, add: Iterable[str] = (), remove: Iterable[str] = ()) -> HeadResult:
        """Add and remove tags (removals first, then additions)."""
        return memories.tag(self.context, ref, add=add, remove=remove)

    def head(self, ref: str, *, importance: int | None = None, visibility: str | None = None,
             add_frames: Iterable[str] = (), remove_frames: Iterable[str] = ()) -> HeadResult:
        """Change importance, visibility and frames; the data and versions stay as they are."""
        return memories.head(self.context, ref, importance=importance, visibility=visibility,
                             add_frames=add_frames, remove_frames=remove_frames)

    def unforget(self, ref: str) -> HeadResult:
        """Undo forget: found again, with the salience it had."""
        return memories.unforget(self.context, ref)

    def forget(self, ref: str, *, reason: str) -> HeadResult:
        """Tombstone a memory: hidden from find, history kept, updates refused."""
        return memories.forget(self.context, ref, reason=reason)

    # -- write-back (SPEC §8) ----------------------------------------------------------
    def remember(self, text: str, *, user: bool = False):
        """A fact about the world, or a user fact (a repeat touches the existing one)."""
        from cortexctl.engine import writeback

        return writeback.remember(self.context, text, user=user)

    def outcome(self, text: str, *, status: str, intent: str | None = None):
        """An event recording how a task ended: success, failure or partial."""
        from cortexctl.engine import writeback

        return writeback.outcome(self.context, text, status=status, intent=intent)

    def pattern_write(self, spec, **kwargs):
        """A new pattern holding ``spec`` (a ``memory.pattern.PatternSpec``)."""
        from cortexctl.engine import writeback

        return writeback.pattern_write(self.context, spec, **kwargs)

    def pattern_reinforce(self, spec, *, derived_from=()):
        """Reinforce the same pattern (coverage + 1, strength nudged up) or write a new candidate."""
        from cortexctl.engine import writeback

        return writeback.pattern_reinforce(self.context, spec, derived_from=derived_from)

    # -- the pager (SPEC §8) -------------------------------------------------------------
    def pinned(self, goal: str, *, budget_tokens: int | None = None):
        """The pinned block: identity, rules, hard constraints, user profile, goal."""
        from cortexctl.engine import pager

        return pager.pinned(self.context, goal, budget_tokens=budget_tokens)

    def context_block(self, goal: str, *, query: str | None = None, budget_tokens: int | None = None):
        """Everything for the prompt: pinned, retrieved memories, proven patterns."""
        from cortexctl.engine import pager

        return pager.context(self.context, goal, query=query, budget_tokens=budget_tokens)

    def patterns(self, goal: str):
        """Proven patterns whose trigger matches the goal, by confidence."""
        from cortexctl.engine import pager

        return pager.patterns(self.context, goal)

    # -- sessions (SPEC §10) ----------------------------------------------------------------
    def session_add(self, session: str, prompt: str, response: str, thought: str | None = None, *,
                    reopen: bool = False) -> WriteResult:
        """Save one turn of a session; a summarized session refuses it unless ``reopen``."""
        from cortexctl.engine import sessions

        return sessions.add_turn(self.context, session, prompt, response, thought, reopen=reopen)

    def session_add_many(self, lines: list, *, reopen: bool = False) -> list[WriteResult]:
        """Many turns at once (JSON objects); all checked before any is written."""
        from cortexctl.engine import sessions

        return sessions.add_turns(self.context, lines, reopen=reopen)

    def session_show(self, session: str) -> list[Memory]:
        """A session's turns, in order."""
        from cortexctl.engine import sessions

        return sessions.show(self.context, session)

    def session_list(self) -> list[dict]:
        """Every session: turns, first and last activity, summarized or not."""
        from cortexctl.engine import sessions

        return sessions.listing(self.context)

    def session_summarize(self, session: str | None = None, *, pending: bool = False) -> list[dict]:
        """Summarize one session, or (``pending``) every session with turns and no summary."""
        from cortexctl.engine import sessions

        return sessions.summarize_many(self.context, session, pending=pending)

    def consolidate(self, transcript: str, *, dry_run: bool = False, again: bool = False) -> dict:
        """File a transcript's durable learnings through the chat model (SPEC §9)."""
        from cortexctl.engine.consolidate import consolidate

        return consolidate(self.context, transcript, dry_run=dry_run, again=again)

    def consolidate_many(self, transcripts, *, dry_run: bool = False, again: bool = False, jobs: int = 1,
                         on_done=None) -> list[dict]:
        """Each (source, text) consolidated in order, one transaction each; those consolidated before
        are skipped, so a killed run resumes (``engine/consolidate.py``)."""
        from cortexctl.engine.consolidate import consolidate_many

        return consolidate_many(self.context, transcripts, dry_run=dry_run, again=again, jobs=jobs,
                                on_done=on_done)

    # -- read side -------------------------------------------------------------
    def show(self, ref: str, *, version: int | None = None) -> Memory:
        """One memory at its current version, or at ``version``."""
        return memories.show(self.context, ref, version=version)

    def history(self, ref: str) -> list[VersionInfo]:
        """Every version of a memory, oldest first."""
        return memories.history(self.context, ref)

    def chain(self, ref: str) -> list:
        """The supersede chain through a memory, oldest first ([] when it has no link)."""
        from cortexctl.engine import validtime

        return validtime.chain(self.context, ref)

    def diff(self, ref: str, from_version: int | None = None, to_version: int | None = None):
        """How two versions of a memory differ (default: the current one against the one before)."""
        from cortexctl.engine import changes

        return changes.diff(self.context, ref, from_version, to_version)

    def changes(self, *, since: str, until: str | None = None, kinds: Iterable[str] = (),
                limit: int | None = None):
        """What was written, updated, superseded, forgotten, un-forgotten or changed in
        ``(since, until]`` (record time), of the memories this actor may see; oldest first."""
        from cortexctl.engine import changes

        return changes.changes(self.context, since=since, until=until, kinds=kinds, limit=limit)

    def revert(self, ref: str, *, to: int) -> WriteResult:
        """A new version equal to version ``to`` (history kept; no change when it is the current one)."""
        return memories.revert(self.context, ref, to=to)

    def find(self, query: FindQuery) -> list[FindHit]:
        """The best memories for the query by the three lanes (see ``engine/find.py``)."""
        return self.find_with_warnings(query)[0]

    def find_with_warnings(self, query: FindQuery) -> tuple[list[FindHit], list[str]]:
        """``find``, plus warnings about lanes that could not run (e.g. an unreachable endpoint)."""
        from cortexctl.engine import find

        return find.run(self.context, query, memories.find_filters(self.context, query))

    def find_as_of(self, query: FindQuery, at: str | datetime) -> tuple[list[FindHit], list[str], AsOf]:
        """``find_with_warnings`` as the store stood at record time ``at`` (RFC 3339 text, a date, an
        age like ``2d``, or a naive UTC ``datetime``; never after now): see ``engine/asof.py``."""
        from dataclasses import replace

        from cortexctl.engine import asof, find

        filters = memories.find_filters(self.context, query)
        stood: list[AsOf] = []
        hits, warnings = find.run(self.context, replace(query, as_of=asof.moment(self.context, at)), filters, stood)
        return hits, warnings, stood[0]

    def show_as_of(self, ref: str, at: str | datetime, *, version: int | None = None) -> tuple[Memory, AsOf]:
        """``show`` as the memory stood at record time ``at`` (as ``find_as_of`` takes it): NotFound
        when it did not exist then, or the actor could not see it then."""
        from cortexctl.engine import asof

        return asof.show(self.context, ref, at, version=version)

    def short_refs(self, ids) -> dict[str, str]:
        """id -> the shortest ending of the ID (8+ characters) that names only that memory."""
        from cortexctl.engine.refs import short_refs

        with self.context.reading() as tx:
            return short_refs(tx, list(ids))

    def reindex(self, *, rebuild: bool = False, progress=None) -> dict:
        """Embed what the active model has not embedded, drop other models' vectors, bring the index up to date."""
        from cortexctl.engine import semantic

        return semantic.reindex(self.context, rebuild=rebuild, progress=progress)

    # -- feedback and context ------------------------------------------------------
    def attest(self, intent: str, outcome: str, cited: Iterable[str], *, reason: str | None = None):
        """Feed an intent's outcome back into the salience of the memories it cited (SPEC §6)."""
        from cortexctl.engine.attest import attest

        return attest(self.context, intent, outcome, cited, reason=reason)

    def compact(self, intent: str, step: str, budget_tokens: int, in_context: Iterable[str], *,
                load_bearing: Iterable[str] = (), checkpoint_dir: str | os.PathLike | None = None):
        """Split the memories in context into kept and stubs within a budget; store a checkpoint (SPEC §7)."""
        from cortexctl.engine.compact import compact

        return compact(self.context, intent, step, budget_tokens, in_context, load_bearing=load_bearing,
                       checkpoint_dir=checkpoint_dir)

    def checkpoint_kept_forms(self, record):
        """(uri, medium form or None) of each kept memory of a checkpoint record."""
        from cortexctl.engine.compact import kept_forms

        return kept_forms(self.context, record)

    def checkpoints(self, intent: str | None = None):
        """The acting actor's checkpoints (of one intent, if given), newest first."""
        from cortexctl.engine.compact import checkpoints

        return checkpoints(self.context, intent)

    def load_checkpoint(self, intent: str, step: str):
        """The checkpoint record stored by compact for (intent, step), or NotFound."""
        from cortexctl.engine.compact import load

        return load(self.context, intent, step)

    # -- scoped grants for sub-agents ----------------------------------------------
    def grant(self, subagent: str, *, types: Iterable[str] = (), tags: Iterable[str] = (),
              expires: str | None = None):
        """Let ``subagent`` see the acting actor's scoped memories this scope covers (SPEC §5)."""
        from cortexctl.engine import grants

        return grants.grant(self.context, subagent, types=types, tags=tags, expires=expires)

    def grants(self):
        """The grants the acting actor gave and those it holds (revoked and expired included)."""
        from cortexctl.engine import grants

        return grants.list_grants(self.context)

    def revoke(self, target: str, *, types: Iterable[str] = (), tags: Iterable[str] = ()):
        """Take back a live grant the acting actor gave or holds: by its ID (or a unique start of
        it), or by its sub-agent and exact scope (``engine/grants.py``)."""
        from cortexctl.engine import grants

        return grants.revoke(self.context, target, types=types, tags=tags)

    # -- bulk and checks ----------------------------------------------------------
    def import_jsonl(self, source, **kwargs):
        from cortexctl.engine.transfer import import_jsonl

        return import_jsonl(self.context, source, **kwargs)

    def export_jsonl(self, sink, **kwargs) -> int:
        from cortexctl.engine.transfer import export_jsonl

        return export_jsonl(self.context, sink, **kwargs)

    def verify(self, *, jobs: int | None = None):
        """Prove the store sound (SPEC §3); ``jobs`` worker processes (None: the setting ``verify.jobs``)."""
        from cortexctl.engine.verify import verify

        return verify(self.context, jobs)

    def healthcheck(self, *, probe: bool = True) -> dict:
        """The healthcheck payload (SPEC §12); ``probe=False`` skips the embedding endpoint's probe."""
        from cortexctl.engine import health

        return health.report(lambda: self.settings, probe=probe)

    # -- backup bundles (SPEC §11) ---------------------------------------------------
    def backup(self, *, dest=None, keep: int | None = None, max_age_days: float | None = None,
               encrypt: bool = False, progress=None):
        """Write one bundle of the whole store into ``dest`` and apply retention."""
        from cortexctl.engine import bundle

        return bundle.backup(self.context, dest=dest, keep=keep, max_age_days=max_age_days, encrypt=encrypt,
                             progress=progress)

    def restore(self, path, *, mode: str, force: bool = False, force_topology_mismatch: bool = False,
                dry_run: bool = False, confirm: str | None = None, progress=None):
        """Restore a bundle into the store: merge (idempotent union) or replace (destructive, guarded)."""
        from cortexctl.engine import bundle

        return bundle.restore(self.context, path, mode=mode, force=force,
                              force_topology_mismatch=force_topology_mismatch, dry_run=dry_run,
                              confirm=confirm, progress=progress)

    def verify_bundle(self, path):
        """Check a bundle completely; touches no store."""
        from cortexctl.engine import bundle
        from cortexctl.store import scratch

        return bundle.check(path, scratch.areas(self.context.storage), passphrase=bundle.passphrase(self.settings))

    def drill_bundle(self, path, *, progress=None):
        """Restore a bundle into a throwaway store, verify it and compare it with the bundle."""
        from cortexctl.engine import bundle
        from cortexctl.store import scratch

        return bundle.drill(self.settings, path, scratch.areas(self.context.storage), clock=self.context.clock,
                            progress=progress)


__all__ = ["Cortex"]
