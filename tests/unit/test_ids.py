"""ULID identifiers, cortex:// URIs and reference resolution (SPEC §2, §13).

IDs are 16-byte ULIDs shown as 26 Crockford base32 characters, time-ordered
and monotonic within a process. A REF is a URI, a bare ID or a unique prefix
of at least 6 characters (lower case and the I/L/O aliases are forgiven).
"""

from __future__ import annotations

import time

import pytest

from cortexctl import FindQuery
from cortexctl.errors import AmbiguousRef, NotFound, UsageError
from cortexctl.memory import ids
from cortexctl.memory.ids import CROCKFORD, ID_LEN, MIN_PREFIX, Ref, id_time_ms, memory_uri, new_id, parse_ref
from tests import tamper

# -- new_id ----------------------------------------------------------------------------


def test_crockford_alphabet_has_32_symbols_without_i_l_o_u():
    assert len(CROCKFORD) == len(set(CROCKFORD)) == 32
    assert not set("ILOU") & set(CROCKFORD)
    assert list(CROCKFORD) == sorted(CROCKFORD)  # so string order is numeric order


def test_new_id_is_26_crockford_characters():
    for _ in range(200):
        id_ = new_id()
        assert len(id_) == ID_LEN == 26
        assert set(id_) <= set(CROCKFORD)
        assert ids.is_id(id_)
        assert id_[0] in "01234567"  # 128 bits: the first character holds only 3


def test_new_id_is_strictly_increasing_for_1000_in_a_row():
    made = [new_id() for _ in range(1000)]
    assert all(a < b for a, b in zip(made, made[1:]))
    assert len(set(made)) == 1000


def test_ids_made_in_the_same_millisecond_share_the_time_part_and_still_increase():
    made = [new_id() for _ in range(50)]
    same_ms = [(a, b) for a, b in zip(made, made[1:]) if a[:10] == b[:10]]
    assert same_ms, "expected at least two IDs in one millisecond"
    for a, b in same_ms:
        assert a < b


def test_time_part_decodes_to_the_creation_millisecond():
    before = int(time.time() * 1000)
    id_ = new_id()
    after = int(time.time() * 1000)
    assert before <= id_time_ms(id_) <= after + 1  # +1: monotonic carry-over at most


@pytest.mark.parametrize("ms", [0, 1, 1_700_000_000_000, (1 << 48) - 1])
def test_explicit_time_round_trips_through_the_id(ms):
    id_ = new_id(ms)
    assert id_time_ms(id_) == ms
    assert len(id_) == 26


@pytest.mark.parametrize("ms", [-1, 1 << 48])
def test_time_outside_48_bits_is_refused(ms):
    with pytest.raises(UsageError, match="outside"):
        new_id(ms)


def test_ids_sort_by_time():
    early, late = new_id(1_000_000), new_id(2_000_000)
    assert early < late


# -- memory_uri / parse_ref accepts ------------------------------------------------------


def test_memory_uri_forms():
    id_ = new_id()
    assert memory_uri(id_) == f"cortex://m/{id_}"
    assert memory_uri(id_, 3) == f"cortex://m/{id_}/v/3"


def test_parse_ref_accepts_a_uri():
    id_ = new_id()
    ref = parse_ref(f"cortex://m/{id_}")
    assert ref == Ref(id_, None) and ref.is_full


def test_parse_ref_accepts_a_uri_with_a_version():
    id_ = new_id()
    assert parse_ref(f"cortex://m/{id_}/v/7") == Ref(id_, 7)
    assert parse_ref(memory_uri(id_, 1)) == Ref(id_, 1)


def test_parse_ref_accepts_a_bare_id_and_surrounding_whitespace():
    id_ = new_id()
    assert parse_ref(id_) == Ref(id_, None)
    assert parse_ref(f"  {id_}\n") == Ref(id_, None)


def test_parse_ref_folds_lower_case():
    id_ = new_id()
    assert parse_ref(id_.lower()) == Ref(id_, None)
    assert parse_ref(f"cortex://m/{id_.lower()}/v/2") == Ref(id_, 2)


def test_parse_ref_folds_crockford_aliases_i_l_o():
    id_ = new_id(1_700_000_000_000)  # time part has 0s and 1s
    assert "0" in id_ and "1" in id_
    for alias_1 in ("I", "i", "L", "l"):
        for alias_0 in ("O", "o"):
            typed = id_.replace("1", alias_1).replace("0", alias_0)
            assert typed != id_
            assert parse_ref(typed) == Ref(id_, None)
            assert parse_ref(f"cortex://m/{typed}") == Ref(id_, None)


@pytest.mark.parametrize("n", [6, 7, 10, 25])
def test_parse_ref_accepts_prefixes_of_six_or_more(n):
    id_ = new_id()
    ref = parse_ref(id_[:n])
    assert ref == Ref(id_[:n], None)
    assert not ref.is_full


def test_parse_ref_accepts_a_prefix_with_aliases_and_lower_case():
    id_ = new_id(1_700_000_000_000)
    typed = id_[:8].lower().replace("0", "o").replace("1", "l")
    assert parse_ref(typed) == Ref(id_[:8], None)


# -- parse_ref rejects ----------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 5])
def test_parse_ref_rejects_prefixes_shorter_than_six(n):
    assert MIN_PREFIX == 6
    with pytest.raises(UsageError, match="too short"):
        parse_ref(new_id()[:n])


@pytest.mark.parametrize(
    "text",
    [
        "01HZZU",  # U is not Crockford
        "01HZZ-X7",
        "01HZZ X7A",
        "01HZ!ZZZ",
        "01HZZÄZZ",
        "*",
        "01ARZ3NDEKTSV4RRFFQ69G5FAVX",  # 27 characters
        "8ZZZZZZZZZZZZZZZZZZZZZZZZZ",  # over 128 bits
    ],
)
def test_parse_ref_rejects_bad_characters_and_lengths(text):
    with pytest.raises(UsageError):
        parse_ref(text)


@pytest.mark.parametrize("bad", ["", "   ", None, 42])
def test_parse_ref_rejects_empty_or_non_text(bad):
    with pytest.raises(UsageError):
        parse_ref(bad)


@pytest.mark.parametrize("suffix", ["/v/0", "/v/-1", "/v/x", "/v/", "/v/1.5", "/v/1/extra", "/x/1"])
def test_parse_ref_rejects_bad_versions_in_uris(suffix):
    with pytest.raises(UsageError, match="malformed URI"):
        parse_ref(f"cortex://m/{new_id()}{suffix}")


@pytest.mark.parametrize("digit", ["²", "³", "¹", "①"])
def test_parse_ref_rejects_non_ascii_digit_versions_with_usage_error(digit):
    # str.isdigit() is true for superscripts but int() cannot parse them
    with pytest.raises(UsageError, match="malformed URI"):
        parse_ref(f"cortex://m/{new_id()}/v/{digit}")


@pytest.mark.parametrize(
    "uri",
    [
        "http://m/{id}",
        "https://example.com/{id}",
        "file:///{id}",
        "cortex://x/{id}",
        "cortex://journal/logs/intent/1",
        "cortex://m/",
        "cortex://m/{short}",
        "cortex://m/{id}X",
        "CORTEX://m/{id}",
    ],
)
def test_parse_ref_rejects_other_schemes_and_malformed_uris(uri):
    id_ = new_id()
    with pytest.raises(UsageError):
        parse_ref(uri.format(id=id_, short=id_[:8]))


def test_parse_ref_errors_are_usage_errors_with_exit_code_2():
    with pytest.raises(UsageError) as exc:
        parse_ref("abc")
    assert exc.value.exit_code == 2
    assert "abc" in str(exc.value)


# -- resolution through the engine ------------------------------------------------------


def _shared_prefix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def test_unique_six_character_prefix_resolves(cx):
    id_ = cx.write("fact", "only one").id
    m = cx.show(id_[:6])
    assert m.id == id_
    assert cx.history(id_[:6])[0].id == id_


def test_lower_case_and_aliased_prefix_resolves(cx):
    id_ = cx.write("fact", "aliases").id
    typed = id_[:10].lower().replace("0", "o").replace("1", "i")
    assert cx.show(typed).id == id_


def test_uri_with_version_resolves_that_version(cx):
    id_ = cx.write("fact", "first").id
    cx.update(id_, "second")
    assert cx.show(memory_uri(id_, 1)).data["statement"] == "first"
    assert cx.show(memory_uri(id_, 2)).data["statement"] == "second"
    assert cx.show(f"cortex://m/{id_.lower()}").data["statement"] == "second"
    with pytest.raises(NotFound):
        cx.show(memory_uri(id_, 3))


def test_shortest_distinguishing_prefix_resolves_among_close_ids(cx):
    written = [cx.write("fact", f"close {i}").id for i in range(4)]
    for id_ in written:
        others = [o for o in written if o != id_]
        n = max(MIN_PREFIX, max(len(_shared_prefix(id_, o)) for o in others) + 1)
        assert cx.show(id_[:n]).id == id_


def test_prefix_shared_by_several_memories_is_ambiguous(cx):
    written = [cx.write("fact", f"same moment {i}").id for i in range(4)]
    # IDs written close in time share their leading (time) characters
    pairs = [(a, b) for i, a in enumerate(written) for b in written[i + 1:]]
    shared = max((_shared_prefix(a, b) for a, b in pairs), key=len)
    assert len(shared) >= MIN_PREFIX, written
    matching = [w for w in written if w.startswith(shared)]
    assert len(matching) >= 2
    with pytest.raises(AmbiguousRef) as exc:
        cx.show(shared)
    assert exc.value.exit_code == 2
    assert isinstance(exc.value, UsageError)
    for w in matching[:5]:
        assert w in str(exc.value)
    # the same prefix is ambiguous for every command that takes a REF
    with pytest.raises(AmbiguousRef):
        cx.update(shared, "changed")
    with pytest.raises(AmbiguousRef):
        cx.history(shared)
    with pytest.raises(AmbiguousRef):
        cx.forget(shared, reason="which one?")
    # ...and nothing was changed
    assert all(cx.show(w).current_version == 1 and cx.show(w).tombstone is None for w in written)


def test_ambiguous_six_character_prefix(cx):
    # created in the same millisecond (an import keeps created_at in the ID's time part), so no
    # 2^20 ms boundary can fall between them
    import json

    lines = [json.dumps({"type": "fact", "text": f"six {i}", "created_at": "2026-01-02T03:04:05Z"}).encode() + b"\n"
             for i in range(2)]
    assert cx.import_jsonl(iter(lines)).imported == 2
    written = [h.id for h in cx.find(FindQuery())]
    assert len(written) == 2 and written[0][:6] == written[1][:6]
    with pytest.raises(AmbiguousRef):
        cx.show(written[0][:6])


def test_prefix_matching_nothing_is_not_found(cx):
    id_ = cx.write("fact", "x").id
    other = "7ZZZZZZZ" if not id_.startswith("7ZZZZZZZ") else "000000"
    with pytest.raises(NotFound):
        cx.show(other)


def test_full_id_resolves_even_when_it_is_a_prefix_of_nothing_else(cx):
    written = [cx.write("fact", f"full {i}").id for i in range(3)]
    for id_ in written:
        assert cx.show(id_).id == id_
        assert cx.show(id_.lower()).id == id_


def test_short_prefix_is_refused_before_touching_the_store(cx, store):
    with pytest.raises(UsageError, match="too short"):
        cx.show("01ABC")
    assert not tamper.db_file(store).exists()
