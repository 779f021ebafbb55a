"""What a newcomer trips on (issue 12): each item held by a test that failed before its fix."""

from __future__ import annotations

import re


def test_show_labels_the_version_confidence_apart_from_the_data_confidence(cli):
    uri = cli("write", "fact", "The deploy key rotates monthly").out.strip()
    cli("update", uri, "--set", "confidence=0.9")
    out = cli("show", uri).out
    header, _, body = out.partition("\n\n")
    assert "version confidence: 1" in header
    assert not re.search(r"(?<!version )confidence: ", header)
    assert "confidence: 0.9" in body


def test_a_failure_attest_that_affected_nothing_says_citations_0(cli):
    cli("write", "fact", "x")
    r = cli("attest", "--intent", "i-1", "--outcome", "failure", "--reason", "factual_error",
            "cortex://m/01JD3KQ5ZC8M3V6W4Y2T7N9R0B")
    assert r.code == 0, r
    assert "0 memories affected, citations 0" in r.out
    assert "citations -1" not in r.out


def test_a_failure_attest_that_affected_a_memory_says_citations_minus_1(cli):
    uri = cli("write", "fact", "x").out.strip()
    r = cli("attest", "--intent", "i-1", "--outcome", "failure", "--reason", "factual_error", uri)
    assert "1 memory affected, citations -1" in r.out
