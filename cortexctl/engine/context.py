"""The context every use case runs in: who acts, on which store, by which clock and embedder.

``Cortex`` builds one ``Context`` and hands it to the use-case modules
(``memories``, ``find``, ``semantic``, ``attest``, ``compact``, ``transfer``,
``verify``). They reach the store only through it: ``ctx.transaction()`` for a
change (all or nothing) and ``ctx.reading()`` for a read, each yielding a
``store.interface.Tx``.
"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime
from typing import Callable, Iterator

from cortexctl.engine.rows import utcnow
from cortexctl.errors import NotFound
from cortexctl.store.interface import Holding, NoStore, Storage, Tx, Viewer


class Context:
    """Settings, actor, storage, clock and (built on first use) embedder of one ``Cortex``."""

    def __init__(self, settings, storage: Storage, *, clock: Callable[[], datetime] = utcnow,
                 embedder=None) -> None:
        self.settings = settings
        self.actor: str = settings.actor
        self.storage = storage
        self.clock = clock  # now, as the naive UTC datetime the store keeps
        self._embedder = embedder
        self._open: list[list] = []  # [tx, its Viewer or None] of the views open, innermost last
        self._group: Tx | None = None  # the transaction of ``group()``, while one is open
        self._later: list[Callable[[], None]] = []  # what its writes do once it commits (``after``)
        self._holding = False  # inside ``holding``: ``after`` waits for its end

    def viewer_for(self, tx: Tx) -> Viewer:
        """Who the acting actor is to ``tx``: its name and the scopes of the live grants it holds
        now (``engine/grants.py``; expiry read against ``clock``)."""
        now = self.clock()
        return Viewer(self.actor, tuple((g["granter"], tuple(g["types"]), tuple(g["tags"]))
                                        for g in tx.live_grants(self.actor, now) if g["granter"] != self.actor))

    @property
    def viewer(self) -> Viewer:
        """``viewer_for`` the innermost view open through this context (read once per view);
        the actor alone when none is open."""
        for entry in reversed(self._open):
            if entry[0] is not None:
                if entry[1] is None:
                    entry[1] = self.viewer_for(entry[0])
                return entry[1]
        return Viewer(self.actor)

    @contextmanager
    def _seeing(self, tx) -> Iterator:
        self._open.append([tx, None])
        try:
            yield tx
        finally:
            self._open.pop()

    @property
    def embedder(self):
        """The active embedder (built on first use; see ``cortexctl.embed``)."""
        if self._embedder is None:
            from cortexctl.embed import from_settings

            self._embedder = from_settings(self.settings)
        return self._embedder

    @property
    def chat(self):
        """The chat-completions client (``embed/chat.py``); ConfigError when none is configured."""
        from cortexctl.embed.chat import ChatClient

        return ChatClient.from_settings(self.settings)

    def no_store(self) -> NotFound:
        """The error of every command that reads a store that does not exist (only writes create one)."""
        return NotFound(f"no store at {self.storage.location}",
                        hint="check --store, CORTEXCTL_STORE and the config; a write creates a store")

    def require_store(self) -> None:
        """NotFound ("no store at ...") when there is no store yet; nothing is created."""
        if not self.storage.exists():
            self.storage.check_location()
            raise self.no_store()

    @contextmanager
    def transaction(self, *, existing: bool = False, bulk: bool = False, tidy: bool = True) -> Iterator[Tx]:
        """A write transaction; with ``existing``, NotFound when there is no store yet (none is made).
        ``bulk``, ``tidy``: one of a bulk load's transactions, and whether it tidies (``Storage.transaction``)."""
        if self._group is not None:  # joins the group: committed with it
            with self._seeing(self._group) as tx:
                yield tx
            return
        if existing:
            self.require_store()
        with self.storage.transaction(bulk=bulk, tidy=tidy) as tx, self._seeing(tx):
            yield tx

    @contextmanager
    def group(self) -> Iterator[Tx]:
        """One write transaction that every transaction and read opened through this context inside
        it joins (the use cases it calls write and read through it): all of them or none. What those
        writes do after their commit (``after``) runs once it has committed."""
        if self._group is not None:
            raise RuntimeError("a group is already open")
        mark = len(self._later)
        with self.storage.transaction() as tx, self._seeing(tx):
            self._group = tx
            try:
                yield tx
            except BaseException:
                del self._later[mark:]  # rolled back: nothing of its to follow up
                raise
            finally:
                self._group = None
        if not self._holding:
            self._run_later()

    def reclaim_space(self) -> dict:
        """After a bulk load: the space its transactions left unused given back (``Holding.reclaim_space``)."""
        held: Holding = self.storage  # type: ignore[assignment]  # every backend is both
        return held.reclaim_space()

    @contextmanager
    def holding(self) -> Iterator[None]:
        """Consecutive groups on the store kept open (``Storage.holding``): each commits on its own;
        what their writes do after the commit (``after``) runs at the end. Read only through them."""
        if self._holding:
            yield
            return
        self._holding = True
        held: Holding = self.storage  # type: ignore[assignment]  # every backend is both
        try:
            with held.holding():
                yield
        except BaseException:
            self._later.clear()  # the follow-ups are upkeep (``memories._after_write``): a later write does it
            raise
        finally:
            self._holding = False
        self._run_later()

    def _run_later(self) -> None:
        later, self._later = self._later, []
        for fn in later:
            fn()

    def after(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` after the write just made is committed: now, or when the group (and the
        holding around it) ends."""
        if self._group is not None or self._holding:
            self._later.append(fn)
        else:
            fn()

    @contextmanager
    def peek(self) -> Iterator[Tx | None]:
        """A read-only view, or None when there is no store yet: for a writer that looks before it
        writes (its write then creates the store)."""
        if self._group is not None:
            with self._seeing(self._group) as tx:
                yield tx
            return
        try:
            with self.storage.reading() as tx, self._seeing(tx):
                yield tx
        except NoStore:
            yield None

    @contextmanager
    def searching(self, *, held: bool = False) -> Iterator[Tx]:
        """A read-only view for find, which the search snapshot may answer (``Storage.searching``);
        NotFound ("no store at ...") when there is no store. ``held``: the backend holds it to what
        the actor may see now (``Storage.reading``'s ``as_actor``)."""
        try:
            with self.storage.searching(as_actor=self.actor if held else None) as tx, self._seeing(tx):
                yield tx
        except NoStore:
            raise self.no_store() from None

    @contextmanager
    def reading(self, *, held: bool = False) -> Iterator[Tx]:
        """A read-only view; NotFound ("no store at ...") when there is no store. ``held``: as for
        ``searching`` (not inside a ``group``, whose transaction writes)."""
        if self._group is not None:
            with self._seeing(self._group) as tx:
                yield tx
            return
        try:
            with self.storage.reading(as_actor=self.actor if held else None) as tx, self._seeing(tx):
                yield tx
        except NoStore:
            raise self.no_store() from None


__all__ = ["Context"]
