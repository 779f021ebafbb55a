"""A state machine of random writes, updates, forgets, attests and compacts by two actors.

A plain model keeps what each memory's salience counters must be; at the end of every
run, verify's replay of the journal must agree with the live store, and the store with
the model.
"""

from __future__ import annotations

import shutil
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, rule
import pytest

from cortexctl import Cortex
from cortexctl.errors import AmbiguousRef, BudgetUnreachable, NotFound, Refused, Tombstoned, UsageError

pytestmark = pytest.mark.slow  # many random steps on a real store

ACTORS = ("alice", "bob")
words = st.text(alphabet="abcdefghij klmnop", min_size=1, max_size=30).filter(lambda t: t.strip())


class Memories(RuleBasedStateMachine):
    memories = Bundle("memories")

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="cortex-sm-")
        self.cx = {a: Cortex(store=self.dir, actor=a) for a in ACTORS}
        self.model: dict[str, dict] = {}  # id -> owner, public, forgotten, access, citations
        self.calls = 0

    def _visible(self, actor: str, id_: str) -> bool:
        m = self.model[id_]
        return m["owner"] == actor or m["public"]

    @rule(target=memories, actor=st.sampled_from(ACTORS),
          type_=st.sampled_from(["fact", "goal", "constraint", "identity", "preference"]),
          text=words, importance=st.integers(0, 10), public=st.booleans(),
          confidence=st.floats(min_value=0.0, max_value=1.0))
    def write(self, actor, type_, text, importance, public, confidence):
        sets = ["strength=hard"] if type_ == "constraint" and importance > 5 else []
        r = self.cx[actor].write(type_, text, sets=sets, importance=importance,
                                 visibility="public" if public else "private", confidence=confidence)
        self.model[r.id] = {"owner": actor, "public": public, "forgotten": False, "access": 0, "citations": 0}
        return r.uri

    @rule(m=memories, actor=st.sampled_from(ACTORS), text=words,
          confidence=st.none() | st.floats(min_value=0.0, max_value=1.0))
    def update(self, m, actor, text, confidence):
        state = self.model[m.rsplit("/", 1)[1]]
        try:
            self.cx[actor].update(m, text, confidence=confidence)
        except NotFound:
            assert not self._visible(actor, m.rsplit("/", 1)[1])
        except Refused:
            assert state["owner"] != actor
        except Tombstoned:
            assert state["forgotten"]
        else:
            assert state["owner"] == actor and not state["forgotten"]

    @rule(m=memories, actor=st.sampled_from(ACTORS))
    def forget(self, m, actor):
        state = self.model[m.rsplit("/", 1)[1]]
        try:
            self.cx[actor].forget(m, reason="no longer true")
        except (NotFound, Refused, Tombstoned):
            assert state["owner"] != actor or state["forgotten"]
        else:
            assert state["owner"] == actor and not state["forgotten"]
            state["forgotten"] = True

    @rule(actor=st.sampled_from(ACTORS),
          cited=st.lists(memories | st.sampled_from(["cortex://m/xyz", "cortex://m/01JD3K00000000000000000000"]),
                         min_size=1, max_size=6),
          outcome=st.sampled_from(["success", "failure"]),
          reason=st.sampled_from([None, "factual_error", "wrong_assumption", "tool_error"]))
    def attest_often(self, actor, cited, outcome, reason):
        """A second rule for attest, so runs hold more attests on the same memories."""
        self.attest(actor, cited, outcome, reason)

    @rule(actor=st.sampled_from(ACTORS),
          cited=st.lists(memories | st.sampled_from(["cortex://m/xyz", "cortex://m/01JD3K00000000000000000000"]),
                         min_size=1, max_size=6),
          outcome=st.sampled_from(["success", "failure"]),
          reason=st.sampled_from([None, "factual_error", "wrong_assumption", "tool_error"]))
    def attest(self, actor, cited, outcome, reason):
        self.calls += 1
        try:
            r = self.cx[actor].attest(f"intent-{self.calls}", outcome, cited, reason=reason)
        except NotFound:
            assert not self.model  # nothing written yet, so there is no store
            return
        want = []
        for uri in cited:
            id_ = uri.rsplit("/", 1)[1]
            if id_ in self.model and self._visible(actor, id_) and not self.model[id_]["forgotten"] \
                    and id_ not in want:
                want.append(id_)
        assert r.affected == want
        assert r.learn_seq == r.seq + 1
        for id_ in want:
            state = self.model[id_]
            if outcome == "success":
                state["access"] += 1
                state["citations"] += 1
            elif reason in ("factual_error", "wrong_assumption"):
                state["citations"] = max(0, state["citations"] - 1)

    @rule(actor=st.sampled_from(ACTORS), context=st.lists(memories, min_size=1, max_size=6),
          budget=st.integers(1, 120), bearing=st.booleans())
    def compact(self, actor, context, budget, bearing):
        self.calls += 1
        ids = [u.rsplit("/", 1)[1] for u in context]
        try:
            r = self.cx[actor].compact(f"intent-{self.calls}", "step-1", budget, context,
                                       load_bearing=context[:1] if bearing else ())
        except NotFound:
            assert any(not self._visible(actor, i) for i in ids)
        except (UsageError, AmbiguousRef):
            assert all(self.model[i]["forgotten"] for i in ids)
        except BudgetUnreachable:
            pass
        else:
            assert r.total_tokens <= budget
            loaded = self.cx[actor].load_checkpoint(f"intent-{self.calls}", "step-1")
            assert loaded.kept == r.checkpoint.kept and loaded.compacted == r.checkpoint.compacted

    def teardown(self) -> None:
        try:
            if not self.model:
                return  # nothing was written: no store to verify
            report = Cortex(store=self.dir, actor="verifier").verify()
            assert report.ok, [str(p) for p in report.problems]
            for id_, state in self.model.items():
                m = self.cx[state["owner"]].show(id_)
                assert (m.access_count, m.citations) == (state["access"], state["citations"]), id_
                assert (m.tombstone is not None) == state["forgotten"]
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


TestMemories = Memories.TestCase
TestMemories.settings = settings(max_examples=25, stateful_step_count=25, deadline=None)
