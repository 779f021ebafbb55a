"""Rendered forms: token budgets, UTF-8 safety, high-entropy tokens, overrides (SPEC §2).

Short is at most 50 tokens and medium at most 200, with tokens = ceil(UTF-8
bytes / 4). A shortened form ends with "…" and is never cut through a
high-entropy token (hex, 0x.., hashes, ULIDs, paths, URLs): the cut goes before it.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortexctl.errors import InvalidData
from cortexctl.memory import forms, schema
from cortexctl.memory.forms import ELLIPSIS, MEDIUM_TOKENS, SHORT_TOKENS, count_tokens, truncate
from cortexctl.memory.ids import CROCKFORD, new_id
from cortexctl.memory.record import build_version
from cortexctl.memory.schema import MAX_TEXT_BYTES
from cortexctl.memory.types import TYPES
from tests import tamper

FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
ADDRESS = "0x52908400098527886E0F7030069857D2E4169EE7"
URL = "https://example.com/deploy/keys?rotate=monthly#step-2"
PATH = "/var/lib/agents/brain/checkpoints/2026/session-17.json"
ULID = new_id()
HE_TOKENS = (SHA256, ADDRESS, URL, PATH, ULID)

# text fields of each type (every one may hold MAX_TEXT_BYTES)
TEXT_FIELDS = {
    "identity": ("name", "did"),
    "fact": ("statement", "subject", "predicate"),
    "preference": ("topic", "rationale"),
    "belief": ("statement", "stance"),
    "event": ("summary", "kind", "counterparty"),
    "goal": ("statement",),
    "constraint": ("statement",),
    "capability": ("description", "subject"),
    "pattern": ("statement",),
}
EXTRA = {  # non-text fields at their most verbose
    "fact": {"confidence": 0.123456789, "source": "consolidated", "observed_at": "2026-11-21T09:30:00.123456Z"},
    "preference": {"polarity": "neutral", "strength": 0.987654321},
    "belief": {"confidence": 0.333333333},
    "event": {"outcome": "partial", "cost": -1.2345678901234e300, "occurred_at": "2026-11-21T09:30:00.654321Z"},
    "goal": {"status": "abandoned", "horizon": "2027-01-01T00:00:00.000001Z"},
    "constraint": {"polarity": "dont", "strength": "hard", "source": "operator"},
    "capability": {"verified": True},
    "pattern": {"strength": 0.111111111, "coverage": 2**63 - 1},
}


def fill(unit: str, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """``unit`` repeated (space-separated) to as close to ``max_bytes`` as it fits."""
    piece = unit + " "
    n = max_bytes // len(piece.encode())
    text = (piece * n).rstrip()
    assert len(text.encode()) <= max_bytes
    return text


def maxed_data(type_name: str, unit: str) -> dict:
    """Every text, list and map field of the type filled to the per-field limit."""
    data = {f: fill(unit) for f in TEXT_FIELDS[type_name]}
    data.update(EXTRA.get(type_name, {}))
    if type_name == "identity":
        data["profile"] = {f"k{i:03d}": fill(unit) for i in range(3)}
    if type_name == "pattern":
        data["derived_from"] = [fill(unit, 1024) for _ in range(schema.MAX_LIST_ITEMS)]
    return data


def assert_within(text: str, budget: int) -> None:
    assert count_tokens(text) <= budget, (count_tokens(text), budget, text[:120])
    assert math.ceil(len(text.encode("utf-8")) / 4) == count_tokens(text)
    assert "\ufffd" not in text


def assert_no_partial(form: str, token: str) -> None:
    """``token`` is wholly present in ``form`` or no prefix of it is left at a cut."""
    if token in form:
        return
    for j in range(1, len(token)):
        assert token[:j] + ELLIPSIS not in form, (token, form)
    assert token[: min(10, len(token) - 1)] not in form, (token, form)


# -- count_tokens --------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, tokens",
    [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("é", 1), ("日本", 2), ("😀", 1), ("😀a", 2), ("x" * 200, 50),
     ("x" * 201, 51)],
)
def test_count_tokens_is_utf8_bytes_over_four_rounded_up(text, tokens):
    assert count_tokens(text) == tokens


# -- budgets for every type with huge inputs ---------------------------------------


@pytest.mark.parametrize("unit", ["deploy", "😀", "日本語", "ünïcödé", "x" * 40])
@pytest.mark.parametrize("type_name", TYPES)
def test_short_and_medium_fit_budget_when_every_field_is_at_its_32kib_limit(type_name, unit):
    data = schema.normalize(type_name, maxed_data(type_name, unit))
    short = forms.render_short(type_name, data)
    medium = forms.render_medium(type_name, data)
    assert_within(short, SHORT_TOKENS)
    assert_within(medium, MEDIUM_TOKENS)
    assert ELLIPSIS in short and ELLIPSIS in medium  # shortened (the template frame may follow the cut)
    # the full form is unbounded: nothing is lost there
    full = forms.render_full(type_name, data)
    assert data[schema.MAIN_FIELD[type_name]] in full


@pytest.mark.parametrize("type_name", TYPES)
def test_maxed_main_text_through_engine_stores_forms_within_budget(cx, type_name):
    data = {schema.MAIN_FIELD[type_name]: fill("長い😀text")}
    data.update(EXTRA.get(type_name, {}))
    m = cx.show(cx.write(type_name, data=data).uri)
    assert_within(m.short, SHORT_TOKENS)
    assert_within(m.medium, MEDIUM_TOKENS)
    assert ELLIPSIS in m.short and ELLIPSIS in m.medium
    assert m.data == schema.normalize(type_name, data)


@pytest.mark.parametrize("type_name", TYPES)
def test_small_data_renders_without_ellipsis(type_name):
    data = schema.normalize(type_name, {schema.MAIN_FIELD[type_name]: "keep it short", **EXTRA.get(type_name, {})})
    for text in (forms.render_short(type_name, data), forms.render_medium(type_name, data)):
        assert "keep it short" in text
        assert not text.endswith(ELLIPSIS)


# -- multibyte UTF-8 ---------------------------------------------------------------


@pytest.mark.parametrize("unit", ["😀", "👍🏽", "日本語のテキスト", "中文字符", "aé日😀", "🇯🇵"])
@pytest.mark.parametrize("budget", [1, 2, 3, 7, 50, 200])
def test_truncate_never_cuts_a_multibyte_character(unit, budget):
    # both as one long word (cut inside it) and as many short words
    for text in (unit * 400, fill(unit, 4000)):
        out = truncate(text, budget)
        assert_within(out, budget)
        assert out.endswith(ELLIPSIS)
        kept = out[: -len(ELLIPSIS)]
        assert text.startswith(kept)
        kept.encode("utf-8", "strict")  # no lone surrogates


@pytest.mark.parametrize("type_name", ["fact", "event", "pattern"])
def test_stored_forms_of_emoji_and_cjk_text_are_whole_characters(cx, type_name):
    main = schema.MAIN_FIELD[type_name]
    text = "開始 " + "😀漢字🎉" * 2000
    m = cx.show(cx.write(type_name, data={main: text, **EXTRA.get(type_name, {})}).uri)
    for form, budget in ((m.short, SHORT_TOKENS), (m.medium, MEDIUM_TOKENS)):
        assert_within(form, budget)
        assert "開始" in form
        # every kept character of the body is a whole character of the input
        body_chars = set(text)
        cut = form.rindex(ELLIPSIS)
        start = form.index("開始")
        assert set(form[start:cut]) <= body_chars


# -- high-entropy tokens -----------------------------------------------------------


@pytest.mark.parametrize("token", HE_TOKENS, ids=["sha256", "0x", "url", "path", "ulid"])
def test_sample_tokens_are_recognised_as_high_entropy(token):
    assert forms.high_entropy_tokens(f"see {token} now") == [token]


@pytest.mark.parametrize("token", HE_TOKENS, ids=["sha256", "0x", "url", "path", "ulid"])
@pytest.mark.parametrize("budget", [5, 12, 50])
def test_truncate_cuts_before_a_high_entropy_token_at_every_offset(token, budget):
    for n in range(0, budget * 4 // 2 + 2):
        text = "ab " * n + token + " and then some more words after it"
        out = truncate(text, budget)
        assert_within(out, budget)
        assert_no_partial(out, token)


@pytest.mark.parametrize("wrap", ["{}", "({})", "{},", "key={}", '"{}".'])
@pytest.mark.parametrize("token", HE_TOKENS, ids=["sha256", "0x", "url", "path", "ulid"])
def test_truncate_keeps_punctuation_wrapped_high_entropy_tokens_whole(token, wrap):
    word = wrap.format(token)
    for n in range(0, 60):
        out = truncate("w " * n + word + " tail", 20)
        assert_within(out, 20)
        assert_no_partial(out, token)


@pytest.mark.parametrize("type_name", TYPES)
def test_forms_of_every_type_never_hold_part_of_a_high_entropy_token(type_name):
    main = schema.MAIN_FIELD[type_name]
    fields = TEXT_FIELDS[type_name]
    tokens = " ".join(HE_TOKENS)
    for field in fields:
        for n in range(0, 260, 3):
            data = dict(EXTRA.get(type_name, {}))
            data[main] = "main text"
            data[field] = ("word " * n) + tokens + " trailing words"
            norm = schema.normalize(type_name, data)
            short = forms.render_short(type_name, norm)
            medium = forms.render_medium(type_name, norm)
            assert_within(short, SHORT_TOKENS)
            assert_within(medium, MEDIUM_TOKENS)
            for tok in HE_TOKENS:
                assert_no_partial(short, tok)
                assert_no_partial(medium, tok)


def test_high_entropy_tokens_in_list_and_map_fields_are_never_partial():
    for n in range(0, 200, 2):
        filler = "word " * n
        for type_name, data in (
            ("pattern", {"statement": "retry with backoff", "derived_from": [filler + SHA256, ULID, URL, PATH]}),
            ("identity", {"name": "alice", "did": "did:key:" + ADDRESS, "profile": {"home": filler + PATH, "site": URL}}),
        ):
            norm = schema.normalize(type_name, data)
            for form, budget in ((forms.render_short(type_name, norm), SHORT_TOKENS),
                                 (forms.render_medium(type_name, norm), MEDIUM_TOKENS)):
                assert_within(form, budget)
                for tok in HE_TOKENS:
                    assert_no_partial(form, tok)


def test_stored_forms_keep_high_entropy_tokens_whole(cx):
    text = "rotate the key " * 9 + SHA256 + " at " + URL
    m = cx.show(cx.write("fact", text, sets=["subject=deploy", "predicate=rotation"]).uri)
    for tok in (SHA256, URL):
        assert_no_partial(m.short, tok)
        assert_no_partial(m.medium, tok)
    assert SHA256 in m.medium and URL in m.medium


def test_a_long_unbroken_token_is_never_cut_inside_it_is_left_out_whole():
    # 24+ characters without a space may be a key or a hash: it is kept whole or not at all.
    assert truncate("x" * 1000, 10) == ELLIPSIS
    assert truncate("see " + "x" * 1000, 10) == "see" + ELLIPSIS
    assert truncate("word " * 20 + "sk_live_AbCdEfGhIjKlMnOpQrStUvWx", 30).endswith("word" + ELLIPSIS)


# -- forms override ----------------------------------------------------------------


def test_short_override_of_exactly_200_bytes_is_accepted_and_stored(cx):
    short = "s" * 200
    assert count_tokens(short) == SHORT_TOKENS
    m = cx.show(cx.write("fact", "overridden", forms={"short": short}).uri)
    assert m.short == short
    assert m.forms_override is True
    # medium was not overridden: rendered from the template
    assert m.medium == forms.render_medium("fact", m.data)


def test_short_override_of_exactly_budget_in_multibyte_text_is_accepted():
    short = "😀" * 50  # 200 bytes
    assert build_version("fact", {"statement": "x"}, {"short": short}).short == short


def test_medium_override_of_exactly_800_bytes_is_accepted(cx):
    medium = "m" * 800
    m = cx.show(cx.write("goal", "ship it", forms={"medium": medium}).uri)
    assert m.medium == medium
    assert m.short == forms.render_short("goal", m.data)


@pytest.mark.parametrize("short", ["s" * 201, "😀" * 50 + "s", "日" * 67])
def test_short_override_one_token_over_is_rejected_naming_forms_short(cx, store, short):
    assert count_tokens(short) == SHORT_TOKENS + 1
    with pytest.raises(InvalidData, match=r"forms\.short") as exc:
        cx.write("fact", "too long", forms={"short": short})
    assert "51" in str(exc.value) and "50" in str(exc.value)
    assert exc.value.exit_code == 10
    assert not tamper.db_file(store).exists() or cx.find(_query()) == []


def test_medium_override_one_token_over_is_rejected_naming_forms_medium():
    with pytest.raises(InvalidData, match=r"forms\.medium"):
        build_version("fact", {"statement": "x"}, {"medium": "m" * 801})


def test_override_on_update_is_validated_against_the_budget(cx):
    uri = cx.write("fact", "v1").uri
    with pytest.raises(InvalidData, match=r"forms\.short"):
        cx.update(uri, "v2", forms={"short": "s" * 201})
    assert cx.show(uri).current_version == 1
    cx.update(uri, "v2", forms={"short": "s" * 200})
    assert cx.show(uri).short == "s" * 200


@pytest.mark.parametrize("bad", ["", "   ", None, 42])
def test_empty_or_non_text_override_is_rejected(bad):
    if bad is None:  # None means "not overridden": rendered from the template
        assert build_version("fact", {"statement": "x"}, {"short": None}).short == "x"
        return
    with pytest.raises(InvalidData, match=r"forms\.short"):
        build_version("fact", {"statement": "x"}, {"short": bad})


def test_unknown_form_in_override_is_rejected():
    with pytest.raises(InvalidData, match=r"forms\.full"):
        build_version("fact", {"statement": "x"}, {"full": "whatever"})


def _query():
    from cortexctl.engine.results import FindQuery

    return FindQuery(include_tombstoned=True, k=100)


# -- property tests over random text ---------------------------------------------

_hex = st.text("0123456789abcdefABCDEF", min_size=8, max_size=64)
_segment = st.text("abcdefghijklmnopqrstuvwxyz0123456789-_.", min_size=1, max_size=12)
_he_token = st.one_of(
    _hex,
    st.builds(lambda h: "0x" + h, st.text("0123456789abcdefABCDEF", min_size=1, max_size=40)),
    st.builds(lambda host, segs: f"https://{host}.example/" + "/".join(segs), _segment, st.lists(_segment, max_size=4)),
    st.builds(lambda segs: "/" + "/".join(segs), st.lists(_segment, min_size=1, max_size=6)),
    st.builds(lambda segs: "~/" + "/".join(segs), st.lists(_segment, min_size=1, max_size=4)),
    st.builds(lambda a, b: a + b, st.sampled_from("01234567"), st.text(CROCKFORD, min_size=25, max_size=25)),
)
_plain_word = st.text(
    st.sampled_from(list("abcdefghijklmnopqrstuvwxyzABCXYZ,.!?;:'()é") + ["日", "本", "語", "😀", "🎉", "ß", "ω"]),
    min_size=1, max_size=30,
)
_sep = st.sampled_from([" ", " ", " ", "  ", "\t", "\n", " \n "])


@st.composite
def _text_with_tokens(draw):
    parts = draw(st.lists(st.one_of(_plain_word, _plain_word, _he_token), min_size=0, max_size=60))
    text = ""
    for p in parts:
        text += p + draw(_sep)
    return text.strip(), parts


@FAST
@given(_text_with_tokens(), st.integers(min_value=1, max_value=120))
def test_truncate_property_fits_budget_and_never_leaves_part_of_a_high_entropy_token(tp, budget):
    text, _parts = tp
    norm = " ".join(text.split()) if "\n" in text else text
    out = truncate(text, budget)
    assert count_tokens(out) <= budget
    if count_tokens(norm) <= budget:
        assert out == norm
        return
    assert out.endswith(ELLIPSIS)
    kept = out[: -len(ELLIPSIS)]
    assert norm.startswith(kept)
    # no high-entropy token of the input straddles the cut: each one is kept
    # in full or dropped in full, never left as a partial prefix
    for m in forms._HIGH_ENTROPY.finditer(norm):
        assert not (m.start() < len(kept) < m.end()), (m.group(0), out)


@FAST
@given(st.text(min_size=0, max_size=3000).filter(lambda s: "\x00" not in s), st.integers(min_value=1, max_value=250))
def test_truncate_property_arbitrary_unicode_fits_budget_and_is_a_prefix(text, budget):
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return
    norm = " ".join(text.split()) if "\n" in text else text
    out = truncate(text, budget)
    assert count_tokens(out) <= budget
    if out != norm:
        assert out.endswith(ELLIPSIS)
        assert norm.startswith(out[: -len(ELLIPSIS)])
        for m in forms._HIGH_ENTROPY.finditer(norm):
            assert not (m.start() < len(out) - len(ELLIPSIS) < m.end())


def _uncut(type_name: str, norm: dict) -> tuple[str, str]:
    """The short and medium forms as they would be with no budget at all."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(forms, "SHORT_TOKENS", 10**9)
        mp.setattr(forms, "MEDIUM_TOKENS", 10**9)
        return forms.render_short(type_name, norm), forms.render_medium(type_name, norm)


@FAST
@given(st.sampled_from(TYPES), _text_with_tokens())
def test_rendered_forms_property_within_budget_with_no_partial_tokens(type_name, tp):
    """A shortened form is (prefix of the whole) + "…" + (suffix of the whole), and
    neither cut point falls inside a high-entropy token of the whole."""
    text, _parts = tp
    main = schema.MAIN_FIELD[type_name]
    data = {main: text if text.strip() else "x", **EXTRA.get(type_name, {})}
    norm = schema.normalize(type_name, data)
    short = forms.render_short(type_name, norm)
    medium = forms.render_medium(type_name, norm)
    assert count_tokens(short) <= SHORT_TOKENS
    assert count_tokens(medium) <= MEDIUM_TOKENS
    for form, whole in zip((short, medium), _uncut(type_name, norm)):
        if form == whole:
            continue
        i = form.rindex(ELLIPSIS)
        head, tail = form[:i], form[i + len(ELLIPSIS):]
        assert whole.startswith(head) and whole.endswith(tail), (form, whole)
        cuts = (len(head), len(whole) - len(tail))
        for m in forms._HIGH_ENTROPY.finditer(whole):
            for c in cuts:
                assert not (m.start() < c < m.end()), (m.group(0), form)
