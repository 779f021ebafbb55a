"""Conditions and numbers over a memory's head, stated once as data and compiled two ways.

The rules that decide what find returns (who sees what, the filters) and how it ranks
(salience) are written once, in ``store/rules.py``, as small expression trees built from the
nodes below. Two compilers read a tree:

- ``to_sql(expr, alias)``: SQL text over a heads alias and its parameters, for DuckDB;
- ``evaluate(expr, env)``: numpy arrays over the columns of the search snapshot (``env``
  says how a column is held: ``Columns``), for find's reads of ``store/snapshot/``.

Both compute the same thing operation by operation and in the same order, so the answers
agree bit for bit (``tests/unit/test_predicate.py`` holds them to it on random stores). A node
the snapshot cannot answer (``HasFrame``: the snapshot holds no frames) raises ``Unsupported``
from ``evaluate``, unless the columns answer ``has_frame``; find then asks DuckDB.

Columns are named for what they mean, not for where they are stored (``COLUMNS``):
``actor``, ``visibility``, ``type``, ``tags``, ``session``, ``tombstoned`` (a bool),
``importance``, ``access``, ``citations``, ``confidence`` and ``recent`` (the later of the
last change and the last use, in epoch seconds), and the nullable times ``valid_from`` and
``valid_to`` (compared with a time by ``Cmp`` alone, NULL never passing a comparison).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Protocol

# -- the nodes ---------------------------------------------------------------------------------
class _Node:
    """An immutable node, equal to another of the same class and fields (a key of ``evaluate``'s
    memo). Plain slotted classes: find imports this module on every cold start, and a frozen
    dataclass costs about half a millisecond to define."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def __init__(self, *args) -> None:
        if len(args) != len(self._fields):
            raise TypeError(f"{type(self).__name__} takes {', '.join(self._fields)}")
        for name, value in zip(self._fields, args):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value) -> None:
        raise AttributeError("expression nodes are immutable")

    def _key(self) -> tuple:
        return (type(self), *(getattr(self, f) for f in self._fields))

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(repr(getattr(self, f)) for f in self._fields)})"


class Col(_Node):
    """A head column by its meaning (see ``COLUMNS``)."""

    __slots__ = _fields = ("name",)


class Const(_Node):
    """A value: a string, a number or a time (a naive UTC ``datetime``)."""

    __slots__ = _fields = ("value",)


class Eq(_Node):
    __slots__ = _fields = ("col", "value")  # a Col, a Const


class In(_Node):
    """The column's value is one of ``values`` (never empty: leave the condition out instead)."""

    __slots__ = _fields = ("col", "values")


class HasAllTags(_Node):
    __slots__ = _fields = ("tags",)


class HasAnyTag(_Node):
    __slots__ = _fields = ("tags",)


class HasFrame(_Node):
    """The memory has a frame of ``verb`` (and ``kind``, ``ref`` when given). SQL only."""

    __slots__ = _fields = ("verb", "kind", "ref")

    def __init__(self, verb: str, kind: str | None = None, ref: str | None = None) -> None:
        super().__init__(verb, kind, ref)


class And(_Node):
    __slots__ = _fields = ("parts",)  # a tuple; empty: true


class Or(_Node):
    __slots__ = _fields = ("parts",)  # a tuple; empty: false


class Not(_Node):
    __slots__ = _fields = ("part",)


class Add(_Node):
    __slots__ = _fields = ("parts",)  # a tuple, summed left to right: ((a + b) + c) ...


class Sub(_Node):
    __slots__ = _fields = ("left", "right")


class Mul(_Node):
    __slots__ = _fields = ("left", "right")


class Div(_Node):
    __slots__ = _fields = ("left", "right")


class Pow(_Node):
    __slots__ = _fields = ("base", "exponent")


class Greatest(_Node):
    __slots__ = _fields = ("left", "right")


class Cmp(_Node):
    """A time column (``valid_from``, ``valid_to``) compared with a time (a ``Const`` datetime) by ``op``
    (``<``, ``<=``, ``>``, ``>=``); false where the column is NULL (two-valued, so ``Not`` of it is
    true there: an open end)."""

    __slots__ = _fields = ("col", "op", "value")


class Epoch(_Node):
    """A time (a ``Const`` datetime) in seconds since 1970, microseconds as the fraction."""

    __slots__ = _fields = ("time",)


class If(_Node):
    __slots__ = _fields = ("cond", "then", "otherwise")


def all_of(*parts) -> And:
    return And(tuple(parts))


def any_of(*parts) -> Or:
    return Or(tuple(parts))


class Unsupported(Exception):
    """``evaluate`` met a node its columns cannot answer (a frame filter on the snapshot)."""


# -- SQL -----------------------------------------------------------------------------------------
# Each column's SQL over a heads alias ``{a}``.
COLUMNS = {
    "actor": "{a}.actor", "visibility": "{a}.visibility", "type": "{a}.type", "tags": "{a}.tags",
    "session": "{a}.session", "tombstoned": "({a}.tombstoned_at IS NOT NULL)", "importance": "{a}.importance",
    "access": "{a}.access_count", "citations": "{a}.citations", "confidence": "{a}.confidence",
    "recent": "epoch(greatest({a}.updated_at, {a}.last_used))",
    "valid_from": "{a}.valid_from", "valid_to": "{a}.valid_to",
}
TIME_COLUMNS = ("valid_from", "valid_to")  # nullable times: compared by ``Cmp`` alone
_OPS = ("<", "<=", ">", ">=")


def column_sql(name: str, alias: str = "h", dialect: str = "duckdb") -> str:
    """A column's SQL over ``alias`` (an empty alias: the bare columns of ``heads``)."""
    sql = COLUMNS[name]
    if dialect == "postgres" and name == "recent":
        sql = _DIALECTS[dialect].epoch.format(x="greatest({a}.updated_at, {a}.last_used)")
    return sql.replace("{a}.", f"{alias}." if alias else "")


class _Dialect:
    """How one database spells what ``to_sql`` writes: its parameter marker and the functions
    that differ between DuckDB and PostgreSQL."""

    def __init__(self, name: str) -> None:
        pg = name == "postgres"
        self.name = name
        self.mark = "%s" if pg else "?"
        self.time = "%s::timestamp" if pg else "CAST(? AS TIMESTAMP)"
        self.is_in = "{col} = ANY({p})" if pg else "list_contains({p}, {col})"
        self.has_all = "{col} @> {p}::text[]" if pg else "list_has_all({col}, {p})"
        self.has_any = "{col} && {p}::text[]" if pg else "list_has_any({col}, {p})"
        self.pow = "power" if pg else "pow"
        # date_part: float8, computed as microseconds / 1e6, the same double as DuckDB's epoch() and
        # as extract(...)::float8 (whose numeric costs a third of a salience scan's time at 100k)
        self.epoch = "date_part('epoch', {x})" if pg else "epoch({x})"


_DIALECTS = {"duckdb": _Dialect("duckdb"), "postgres": _Dialect("postgres")}


def to_sql(expr, alias: str = "h", dialect: str = "duckdb") -> tuple[str, list[Any]]:
    """``expr`` as SQL over a heads alias, with its parameters in order, in ``dialect``
    (``duckdb``: ``?`` markers; ``postgres``: psycopg's ``%s``)."""
    params: list[Any] = []
    return _sql(expr, alias, params, _DIALECTS[dialect]), params


def _sql(e, a: str, p: list, d: _Dialect) -> str:
    t = type(e)
    if t is Col:
        return column_sql(e.name, a, d.name)
    if t is Const:
        p.append(e.value)
        return d.time if isinstance(e.value, datetime) else d.mark
    if t is Eq:
        return f"{_sql(e.col, a, p, d)} = {_sql(e.value, a, p, d)}"
    if t is In:
        p.append(list(e.values))
        return d.is_in.format(p=d.mark, col=_sql(e.col, a, p, d))
    if t is HasAllTags or t is HasAnyTag:
        form = d.has_all if t is HasAllTags else d.has_any
        p.append(list(e.tags))
        return form.format(col=column_sql("tags", a, d.name), p=d.mark)
    if t is HasFrame:
        cond = [f"f.verb = {d.mark}"]
        p.append(e.verb)
        for name, v in (("kind", e.kind), ("ref", e.ref)):
            if v is not None:
                cond.append(f"f.{name} = {d.mark}")
                p.append(v)
        return f"{a}.id IN (SELECT f.id FROM frames f WHERE {' AND '.join(cond)})"
    if t is And or t is Or:
        if not e.parts:
            return "TRUE" if t is And else "FALSE"
        return "(" + (" AND " if t is And else " OR ").join(_sql(x, a, p, d) for x in e.parts) + ")"
    if t is Not:
        return f"(NOT {_sql(e.part, a, p, d)})"
    if t is Cmp:
        if e.op not in _OPS or e.col.name not in TIME_COLUMNS:
            raise TypeError(f"not a comparison of a time column: {e!r}")
        col = _sql(e.col, a, p, d)
        return f"({col} IS NOT NULL AND {col} {e.op} {_sql(e.value, a, p, d)})"
    if t is Add:
        return "(" + " + ".join(_sql(x, a, p, d) for x in e.parts) + ")"
    if t in _INFIX:
        left = _sql(e.left, a, p, d)
        return f"({left} {_INFIX[t]} {_sql(e.right, a, p, d)})"
    if t is Pow:
        base = _sql(e.base, a, p, d)
        return f"{d.pow}({base}, {_sql(e.exponent, a, p, d)})"
    if t is Greatest:
        left = _sql(e.left, a, p, d)
        return f"greatest({left}, {_sql(e.right, a, p, d)})"
    if t is Epoch:
        return d.epoch.format(x=_sql(e.time, a, p, d))
    if t is If:
        cond = _sql(e.cond, a, p, d)
        then = _sql(e.then, a, p, d)
        return f"CASE WHEN {cond} THEN {then} ELSE {_sql(e.otherwise, a, p, d)} END"
    raise TypeError(f"not an expression node: {e!r}")


def id_range(column: str, after: str | None, upto: str | None, dialect: str = "duckdb",
             collate: str = "") -> tuple[str, list[Any]]:
    """A condition for ``after < column <= upto`` (either end open when None) in ``dialect``, with its
    parameters; ``collate`` follows the column (PostgreSQL's ``COLLATE "C"`` for bytewise order)."""
    mark = _DIALECTS[dialect].mark
    parts, params = [], []
    if after is not None:
        parts.append(f"{column}{collate} > {mark}")
        params.append(after)
    if upto is not None:
        parts.append(f"{column}{collate} <= {mark}")
        params.append(upto)
    return (" AND ".join(parts) or "true"), params


_INFIX = {Sub: "-", Mul: "*", Div: "/"}


# -- numpy ---------------------------------------------------------------------------------------
class Columns(Protocol):
    """How a store's columns are held as arrays (the snapshot's ``_Part``): what ``evaluate`` reads."""

    def array(self, name: str):
        """A numeric or bool column as an array (numbers as float64)."""

    def equals(self, name: str, value) -> Any:
        """Bool array: the column equals ``value``."""

    def isin(self, name: str, values: tuple) -> Any:
        """Bool array: the column's value is one of ``values``."""

    def has_tag(self, tag: str) -> Any:
        """Bool array: the memory carries ``tag``."""

    def times(self, name: str) -> tuple[Any, Any]:
        """A nullable time column (``TIME_COLUMNS``): (int64 microseconds since 1970, bool array: NULL)."""
    # Optional: ``has_frame(verb, kind, ref)``, a bool array: the memory has such a frame (``kind``
    # and ``ref`` None: any). Without it a frame filter raises ``Unsupported``.


_EPOCH = datetime(1970, 1, 1)


def epoch_seconds(t: datetime) -> float:
    """What DuckDB's ``epoch(TIMESTAMP)`` gives: microseconds since 1970 over 1e6."""
    return ((t - _EPOCH) // timedelta(microseconds=1)) / 1e6


def evaluate(expr, env: Columns, *, exact: bool = True, memo: dict | None = None):
    """``expr`` over ``env``'s columns: a bool array for a condition, a float64 array for a number
    (a constant alone stays a Python value). ``exact``: each power as ``math.pow`` computes it,
    element by element, which is what DuckDB's ``pow`` gives; otherwise a vectorised power (a few
    ulps off at times: for picking candidates, never for an answer). ``memo``: conditions
    already evaluated over the same columns, by node (a cache the caller keeps)."""
    return _eval(expr, env, exact, memo)


def _eval(e, env, exact: bool, memo):
    import numpy as np

    t = type(e)
    if memo is not None and t in _BOOL_NODES:
        got = memo.get(e)
        if got is not None:
            return got
    if t is Col:
        out = env.array(e.name)
    elif t is Const:
        v = e.value
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
    elif t is Eq:
        out = env.equals(e.col.name, e.value.value)
    elif t is In:
        out = env.isin(e.col.name, tuple(e.values))
    elif t is HasAllTags or t is HasAnyTag:
        tags = list(dict.fromkeys(e.tags))
        if not tags:
            return _full(env, t is HasAllTags)
        out = env.has_tag(tags[0]).copy()
        for tag in tags[1:]:
            if t is HasAllTags:
                out &= env.has_tag(tag)
            else:
                out |= env.has_tag(tag)
    elif t is HasFrame:
        has_frame = getattr(env, "has_frame", None)  # the snapshot holds no frames; heads in hand do
        if has_frame is None:
            raise Unsupported("frame filters")
        out = has_frame(e.verb, e.kind, e.ref)
    elif t is And or t is Or:
        if not e.parts:
            return _full(env, t is And)
        out = _eval(e.parts[0], env, exact, memo).copy()
        for x in e.parts[1:]:
            if t is And:
                out &= _eval(x, env, exact, memo)
            else:
                out |= _eval(x, env, exact, memo)
    elif t is Not:
        out = ~_eval(e.part, env, exact, memo)
    elif t is Cmp:
        if e.op not in _OPS or e.col.name not in TIME_COLUMNS:
            raise TypeError(f"not a comparison of a time column: {e!r}")
        at, null = env.times(e.col.name)
        v = (e.value.value - _EPOCH) // timedelta(microseconds=1)
        cmp = at < v if e.op == "<" else at <= v if e.op == "<=" else at > v if e.op == ">" else at >= v
        out = cmp & ~null
    elif t is Add:
        out = _eval(e.parts[0], env, exact, memo)
        for x in e.parts[1:]:
            out = out + _eval(x, env, exact, memo)
    elif t is Sub:
        out = _eval(e.left, env, exact, memo) - _eval(e.right, env, exact, memo)
    elif t is Mul:
        out = _eval(e.left, env, exact, memo) * _eval(e.right, env, exact, memo)
    elif t is Div:
        out = _eval(e.left, env, exact, memo) / _eval(e.right, env, exact, memo)
    elif t is Pow:
        base, exp = _eval(e.base, env, exact, memo), _eval(e.exponent, env, exact, memo)
        if exact:
            import math

            b, x = np.broadcast_arrays(np.asarray(base, dtype=np.float64), np.asarray(exp, dtype=np.float64))
            out = np.fromiter((math.pow(p, q) for p, q in zip(b.ravel().tolist(), x.ravel().tolist())),
                              dtype=np.float64, count=b.size).reshape(b.shape)
        elif isinstance(base, float) and base > 0.0:  # a constant base (recency's half-life factor)
            import math

            out = np.exp2(np.multiply(exp, math.log2(base)))  # a third of np.power's time
        else:
            out = np.power(base, exp)
    elif t is Greatest:
        out = np.maximum(_eval(e.left, env, exact, memo), _eval(e.right, env, exact, memo))
    elif t is Epoch:
        return epoch_seconds(e.time.value)
    elif t is If:
        cond = _eval(e.cond, env, exact, memo)
        out = np.where(cond, _eval(e.then, env, exact, memo), _eval(e.otherwise, env, exact, memo))
    else:
        raise TypeError(f"not an expression node: {e!r}")
    if memo is not None and t in _BOOL_NODES:
        memo[e] = out
    return out


_BOOL_NODES = (Eq, In, HasAllTags, HasAnyTag, And, Or, Not, Cmp)


def _full(env, value: bool):
    import numpy as np

    return np.full(len(env.array("tombstoned")), value, dtype=np.bool_)


__all__ = ["Col", "Const", "Eq", "In", "HasAllTags", "HasAnyTag", "HasFrame", "And", "Or", "Not", "Add", "Sub", "Mul",
           "Div", "Pow", "Greatest", "Cmp", "Epoch", "If", "all_of", "any_of", "Unsupported", "COLUMNS", "column_sql",
           "to_sql", "evaluate", "epoch_seconds", "Columns"]
