"""A state machine of random writes, supersedes, forgets and valid times by two actors, on a fixed clock
that moves on each step.

A plain model keeps each memory's valid interval and links, and says what each supersede must do (link,
change nothing, or which refusal); after every step find (plain, --include-superseded and --valid-at)
must return what the model says, and at the end verify must find the store sound.
"""

from __future__ import annotations

import shutil
import tempfile
from datetime import datetime, timedelta

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, multiple, rule

from cortexctl import Cortex
from cortexctl.engine.results import FindQuery
from cortexctl.errors import InvalidData, NotFound, Tombstoned, UsageError

pytestmark = pytest.mark.slow  # many random steps on a real store

ACTORS = ("alice", "bob")
T0 = datetime(2026, 5, 1, 12, 0)
OFFSETS = (None, timedelta(days=-2), timedelta(hours=-1), timedelta(hours=1))


class Chains(RuleBasedStateMachine):
    memories = Bundle("memories")

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="cortex-chains-")
        self.now = T0
        self.cx = {a: Cortex(store=self.dir, actor=a) for a in ACTORS}
        for cx in self.cx.values():
            cx.context.clock = lambda: self.now
        self.model: dict[str, dict] = {}  # id -> owner, forgotten, vf, vt, sup, sup_by

    def _tick(self) -> None:
        self.now += timedelta(minutes=10)

    def _write(self, actor: str, n: int, offset, supersedes: str | None = None) -> str:
        vf = None if offset is None else self.now + offset
        sets = [] if vf is None else [f"valid_from={vf.isoformat()}Z"]
        r = self.cx[actor].write("fact", f"fact number {n} of {actor}", sets=sets, supersedes=supersedes)
        self.model[r.id] = {"owner": actor, "forgotten": False, "vf": vf, "vt": None, "sup": None, "sup_by": None}
        return r.id

    @initialize(target=memories)
    def a_few(self):
        return multiple(*(self._write(actor, n, None) for actor in ACTORS for n in range(3)))

    @rule(target=memories, actor=st.sampled_from(ACTORS), n=st.integers(0, 10**6), offset=st.sampled_from(OFFSETS))
    def write(self, actor, n, offset):
        self._tick()
        return self._write(actor, n, offset)

    @rule(target=memories, a=memories, n=st.integers(0, 10**6), offset=st.sampled_from(OFFSETS))
    def write_superseding(self, a, n, offset):
        """write --supersedes A, by A's owner."""
        self._tick()
        ma = self.model[a]
        new_from = self.now if offset is None else self.now + offset
        want = (Tombstoned if ma["forgotten"] else InvalidData if ma["sup_by"] is not None
                or (ma["vf"] is not None and ma["vf"] > new_from) else "link")
        event(f"write --supersedes: {want if isinstance(want, str) else want.__name__}")
        if isinstance(want, type):
            with pytest.raises(want):
                self.cx[ma["owner"]].write("fact", f"fact number {n}", supersedes=a,
                                           sets=[] if offset is None else [f"valid_from={new_from.isoformat()}Z"])
            return multiple()
        b = self._write(ma["owner"], n, offset, supersedes=a)  # no offset: valid from now, by default
        ma["vt"], ma["sup_by"] = new_from, b
        self.model[b].update(sup=a, vf=new_from)
        return b

    def _expect(self, actor: str, a: str, b: str):
        """What ``supersede a --by b`` must do: an error class, "same" (already linked) or "link"."""
        ma, mb = self.model[a], self.model[b]
        if ma["owner"] != actor or mb["owner"] != actor:
            return NotFound  # another actor's private memory is not seen
        if a == b:
            return UsageError
        if mb["forgotten"]:
            return Tombstoned
        if ma["sup_by"] == b and mb["sup"] == a:
            return Tombstoned if ma["forgotten"] else "same"
        if mb["sup"] is not None and mb["sup"] != a:
            return InvalidData
        if ma["forgotten"]:
            return Tombstoned
        if ma["sup_by"] is not None and ma["sup_by"] != b:
            return InvalidData
        new_from = mb["vf"] or self.now
        if ma["vf"] is not None and ma["vf"] > new_from:
            return InvalidData
        at = b
        while self.model[at]["sup_by"] is not None:
            at = self.model[at]["sup_by"]
            if at == a:
                return InvalidData
        if mb["vt"] is not None and mb["vt"] <= new_from:
            return InvalidData
        return "link"

    @rule(a=memories, b=memories, stranger=st.integers(0, 9))
    def supersede(self, a, b, stranger):
        """supersede A --by B, by B's owner (or, now and then, by the other actor)."""
        self._tick()
        actor = self.model[b]["owner"]
        if stranger == 0:
            actor = next(x for x in ACTORS if x != actor)
        want = self._expect(actor, a, b)
        event(f"supersede: {want if isinstance(want, str) else want.__name__}")
        if isinstance(want, type):
            with pytest.raises(want):
                self.cx[actor].supersede(a, by=b)
            return
        r = self.cx[actor].supersede(a, by=b)
        assert r.changed is (want == "link")
        if want == "link":
            ma, mb = self.model[a], self.model[b]
            mb["vf"] = mb["vf"] or self.now
            ma["vt"], ma["sup_by"], mb["sup"] = mb["vf"], b, a

    @rule(m=memories)
    def forget(self, m):
        self._tick()
        state = self.model[m]
        if state["forgotten"]:
            with pytest.raises(Tombstoned):
                self.cx[state["owner"]].forget(m, reason="random")
        else:
            self.cx[state["owner"]].forget(m, reason="random")
            state["forgotten"] = True

    @rule(m=memories, offset=st.sampled_from(OFFSETS[1:]))
    def end(self, m, offset):
        self._tick()
        state = self.model[m]
        vt = self.now + offset
        cx = self.cx[state["owner"]]
        if state["forgotten"]:
            with pytest.raises(Tombstoned):
                cx.update(m, sets=[f"valid_to={vt.isoformat()}Z"])
        elif state["vf"] is not None and vt <= state["vf"]:
            with pytest.raises(InvalidData):
                cx.update(m, sets=[f"valid_to={vt.isoformat()}Z"])
        else:
            cx.update(m, sets=[f"valid_to={vt.isoformat()}Z"])
            state["vt"] = vt

    def _find(self, actor: str, **query) -> set[str]:
        return {h.id for h in self.cx[actor].find(FindQuery(k=10_000, **query))}

    @invariant()
    def find_answers_as_the_model(self):
        if not self.model:
            return
        at = self.now - timedelta(hours=1)
        for actor in ACTORS:
            mine = {i: m for i, m in self.model.items() if m["owner"] == actor and not m["forgotten"]}
            assert self._find(actor) == {i for i, m in mine.items() if m["vt"] is None or m["vt"] > self.now}
            assert self._find(actor, include_superseded=True) == set(mine)
            assert self._find(actor, valid_at=at) == {
                i for i, m in mine.items()
                if (m["vf"] is None or m["vf"] <= at) and (m["vt"] is None or m["vt"] > at)}

    def teardown(self) -> None:
        try:
            if self.model:
                report = self.cx["alice"].verify()
                assert report.ok, [str(p) for p in report.problems]
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


TestChains = Chains.TestCase
TestChains.settings = settings(max_examples=25, stateful_step_count=20, deadline=None)
