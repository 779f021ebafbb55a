"""Words of memory text: the one tokenizer shared by the lexical lane and the hash embedder.

``terms(text)`` lowercases, takes Unicode words (inner apostrophes kept, a
possessive ``'s`` dropped), drops stopwords and stems each word with the
Porter (1980) stemmer; a stem that is itself a stopword is dropped too. A query
and a memory go through the same function, so "painted", "painting" and
"paints" all meet at "paint". Term IDs are stable 63-bit hashes (blake2b), the
same in every process and on every machine, so postings are stored as integers.
"""

from __future__ import annotations

import functools
import re
from hashlib import blake2b

WORD_RE = re.compile(r"\w+(?:['\u2019]\w+)*")   # unicode words, inner apostrophes kept

STOPWORDS = frozenset("""
a about above after again against all also am an and any are aren as at be because been before being
below between both but by can cannot could couldn d did didn do does doesn doing don done down during
each else few for from further get gets got had hadn has hasn have haven having he her here hers herself
him himself his how i id if im in into is isn it its itself ive just let ll m me might mine more most
must mustn my myself no nor not now o of off on once only or other ought our ours ourselves out over own
re s same shall she should shouldn so some such t than that thats the their theirs them themselves then
there these they theyre this those through to too under until up us ve very was wasn we were weren what
whats when where which while who whom whose why will with won would wouldn y you youre your yours
yourself yourselves dont cant wont didnt doesnt ain
""".split())


MAX_STEM = 40  # longer "words" are IDs, hashes or noise: kept whole, and stemming stays cheap


def _cons(w, i):
    """Porter's consonant test: a "y" is a consonant at the start or after a vowel, so in a run
    of "y"s the answer alternates from the first one's (found without recursion)."""
    c = w[i]
    if c in "aeiou":
        return False
    if c != "y":
        return True
    j = i
    while j > 0 and w[j - 1] == "y":
        j -= 1
    first = j == 0 or w[j - 1] in "aeiou"
    return first if (i - j) % 2 == 0 else not first


def _m(s):                        # Porter's measure: number of VC sequences
    n, i, L = 0, 0, len(s)
    while i < L and _cons(s, i):
        i += 1
    while i < L:
        while i < L and not _cons(s, i):
            i += 1
        if i >= L:
            break
        n += 1
        while i < L and _cons(s, i):
            i += 1
    return n


def _hasv(s):
    return any(not _cons(s, i) for i in range(len(s)))


def _dbl(s):
    return len(s) >= 2 and s[-1] == s[-2] and _cons(s, len(s) - 1)


def _cvc(s):
    return (len(s) >= 3 and _cons(s, len(s) - 3) and not _cons(s, len(s) - 2)
            and _cons(s, len(s) - 1) and s[-1] not in "wxy")


_S2 = sorted([("ational", "ate"), ("tional", "tion"), ("enci", "ence"), ("anci", "ance"),
              ("izer", "ize"), ("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"),
              ("ousli", "ous"), ("ization", "ize"), ("ation", "ate"), ("ator", "ate"),
              ("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous"),
              ("aliti", "al"), ("iviti", "ive"), ("biliti", "ble"), ("logi", "log")],
             key=lambda p: -len(p[0]))
_S3 = sorted([("icate", "ic"), ("ative", ""), ("alize", "al"), ("iciti", "ic"), ("ical", "ic"),
              ("ful", ""), ("ness", "")], key=lambda p: -len(p[0]))
_S4 = sorted(["al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent",
              "ion", "ou", "ism", "ate", "iti", "ous", "ive", "ize"], key=len, reverse=True)


def _rules(w, rules):
    for suf, rep in rules:
        if w.endswith(suf):
            s = w[:-len(suf)]
            return s + rep if _m(s) > 0 else w
    return w


# The last letters of every suffix the steps below look at: a word ending in anything
# else (a digit, most often) matches no step and is its own stem.
_SUFFIX_ENDS = frozenset("sdgylirnmectu")


@functools.lru_cache(maxsize=200_000)
def stem(w):
    """Porter (1980) stemmer, steps 1a-5b. Words over MAX_STEM characters are left as they are."""
    if len(w) <= 2 or len(w) > MAX_STEM or w[-1] not in _SUFFIX_ENDS:
        return w
    if w.endswith(("sses", "ies")):                                   # 1a
        w = w[:-2]
    elif w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    if w.endswith("eed"):                                             # 1b
        if _m(w[:-3]) > 0:
            w = w[:-1]
    else:
        for suf in ("ed", "ing"):
            if w.endswith(suf) and _hasv(w[:-len(suf)]):
                w = w[:-len(suf)]
                if w.endswith(("at", "bl", "iz")):
                    w += "e"
                elif _dbl(w) and w[-1] not in "lsz":
                    w = w[:-1]
                elif _m(w) == 1 and _cvc(w):
                    w += "e"
                break
    if w.endswith("y") and _hasv(w[:-1]):                             # 1c
        w = w[:-1] + "i"
    w = _rules(_rules(w, _S2), _S3)                                   # 2, 3
    for suf in _S4:                                                   # 4
        if w.endswith(suf):
            s = w[:-len(suf)]
            if _m(s) > 1 and (suf != "ion" or s[-1:] in ("s", "t")):
                w = s
            break
    if w.endswith("e"):                                               # 5a
        s = w[:-1]
        if _m(s) > 1 or (_m(s) == 1 and not _cvc(s)):
            w = s
    if w.endswith("ll") and _m(w) > 1:                                # 5b
        w = w[:-1]
    return w


def normalize_word(raw: str) -> str | None:
    """A lowercased word without its possessive and apostrophes, or None for a stopword."""
    w = raw.replace("\u2019", "'")
    if w.endswith("'s"):
        w = w[:-2]
    w = w.replace("'", "")
    return None if not w or w in STOPWORDS else w


@functools.lru_cache(maxsize=200_000)
def _term(raw):
    w = normalize_word(raw)
    if w is None:
        return None
    s = stem(w)
    return None if s in STOPWORDS else s


def terms(text: str) -> list[str]:
    """The stemmed, stopword-free words of ``text``, in order (repeats kept)."""
    return [t for t in map(_term, WORD_RE.findall(text.lower())) if t is not None]


@functools.lru_cache(maxsize=500_000)
def term_id(term: str) -> int:
    """A stable 63-bit ID for a term (fits DuckDB BIGINT)."""
    return int.from_bytes(blake2b(term.encode("utf-8"), digest_size=8).digest(), "little") >> 1


def words(text: str) -> list[str]:
    """The words of ``text`` in lower case, in order: how find's phrase match and write's
    duplicate check compare two texts (no stemming, no stopwords dropped)."""
    return _WORD.findall(text.lower())


_WORD = re.compile(r"\w+")


@functools.lru_cache(maxsize=500_000)
def _word_id(raw):
    """The term ID of one raw word of lowercased text, or None for a stopword."""
    t = _term(raw)
    return None if t is None else term_id(t)


def text_terms(text: str) -> list[int]:
    """The term IDs of ``text`` in order, repeats kept (what the postings count)."""
    return [i for i in map(_word_id, WORD_RE.findall(text.lower())) if i is not None]
