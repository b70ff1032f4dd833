"""Queries: objects by tag (Connection.query) and elements by value
(obj.query((obj > 0.5) & (obj < 2))), over libpdc's pdc_query_tags and
PDCquery_* (record 0027, Queries)."""

from __future__ import annotations

import ctypes
import math
from typing import Any, NamedTuple, Optional

import numpy as np

from . import Box, Connection, Invalid, Object, _check, _cstr, _error, _lib
from ._lib import lib, u64

__all__ = ["Match", "Expr", "Query"]


class Match(NamedTuple):
    """An object a tag query found: its id (meta id) and name."""
    id: int
    name: str


def _query_tags(conn: Connection, query: str) -> list[Match]:
    """The objects with a tag matching query, in `pdc query`'s language:
    KEY, KEY=VALUE (exact, prefix*, *suffix or *infix* on either side) and
    KEY=LO..HI for numbers ("step=10..20"); sorted by id."""
    if not isinstance(query, str) or not query:
        raise Invalid(f"pdc: query {query!r}: want a non-empty string such as 'step=10..20' or 'name=ab*'")
    n, ids, names = ctypes.c_int(), ctypes.POINTER(u64)(), ctypes.c_void_p()
    _check(lib.pdc_query_tags(conn.id, _cstr(query.encode(), "query"), ctypes.byref(n), ctypes.byref(ids), ctypes.byref(names)),
           f"pdc_query_tags({query!r})")
    try:
        got = [int(ids[i]) for i in range(n.value)]
        raw = ctypes.string_at(names.value, _block_len(names.value, n.value)) if n.value else b""
    finally:
        _lib.free(ctypes.cast(ids, ctypes.c_void_p))
        _lib.free(names)
    parts = raw.split(b"\0")[:n.value]
    return [Match(i, p.decode("utf-8", "surrogateescape")) for i, p in zip(got, parts)]


def _block_len(addr: int, n: int) -> int:
    """The length of n NUL-ended strings back to back at addr."""
    size = 0
    for _ in range(n):
        size += len(ctypes.string_at(addr + size)) + 1
    return size


Connection.query = _query_tags  # type: ignore[attr-defined]


# --- value queries --------------------------------------------------------------

# pdc_query_op_t
_GT, _LT, _GTE, _LTE, _EQ = 1, 2, 3, 4, 5
_OPS = {_GT: ">", _LT: "<", _GTE: ">=", _LTE: "<=", _EQ: "=="}


class Expr:
    """A condition on an object's elements, made by comparing the object
    with a number (obj > 0.5) and combined with & and |. It is evaluated
    on the data servers by obj.query(expr)."""

    def __init__(self, obj: Object, op: int, value: Any = None,
                 left: Optional["Expr"] = None, right: Optional["Expr"] = None) -> None:
        self.obj, self.op, self.value, self.left, self.right = obj, op, value, left, right

    def _combine(self, other: Any, op: str) -> "Expr":
        if not isinstance(other, Expr):
            return NotImplemented
        if other.obj is not self.obj:
            raise Invalid(f"pdc: a query is over one object: {self.obj.name!r} {op} {other.obj.name!r}")
        return Expr(self.obj, 0, op, self, other)

    def __and__(self, other: Any) -> "Expr":
        return self._combine(other, "&")

    def __or__(self, other: Any) -> "Expr":
        return self._combine(other, "|")

    def __bool__(self) -> bool:
        raise TypeError("pdc: a query condition has no truth value: combine with & and | (not and/or), "
                        "in parentheses: (obj > 0) & (obj < 1)")

    def __repr__(self) -> str:
        if self.left is not None:
            return f"({self.left!r} {self.value} {self.right!r})"
        return f"({self.obj.name} {_OPS[self.op]} {self.value!r})"

    def _build(self, made: list[int]) -> int:
        """Makes the libpdc query (pdc_query_t *), recording every one made in made."""
        if self.left is not None:
            a, b = self.left._build(made), self.right._build(made)  # type: ignore[union-attr]
            f = lib.PDCquery_and if self.value == "&" else lib.PDCquery_or
            q = f(a, b)
        else:
            buf = np.array([self.value], self.obj.dtype)
            q = lib.PDCquery_create(self.obj.id, self.op, int(self.obj.type), buf.ctypes.data)
        if not q:
            raise _error(f"PDCquery ({self!r})")
        made.append(q)
        return q


def _operand(obj: Object, op: int, v: Any) -> Expr:
    """obj op v, with v made a value of the object's dtype: for integer
    objects a fraction is rounded the way that keeps the condition's
    meaning (x > 0.5 is x > 0, x >= 0.5 is x >= 1)."""
    if isinstance(v, (Object, Expr)) or isinstance(v, np.ndarray) and v.ndim > 0:
        raise Invalid(f"pdc: {obj.name} {_OPS[op]} {type(v).__name__}: compare an object with a number")
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise Invalid(f"pdc: {obj.name} {_OPS[op]} {v!r}: compare an object with a number")
    dt = obj.dtype
    if dt.kind in "iu":
        f = float(v)
        if math.isnan(f):
            raise Invalid(f"pdc: {obj.name} {_OPS[op]} nan: no element of {dt} is nan")
        if not float(v).is_integer():
            if op == _EQ:
                raise Invalid(f"pdc: {obj.name} == {v}: the object holds {dt}, which is never {v}")
            v = math.floor(f) if op in (_GT, _LTE) else math.ceil(f)
        v = int(v)
        info = np.iinfo(dt)
        if not info.min <= v <= info.max:
            raise Invalid(f"pdc: {obj.name} {_OPS[op]} {v}: outside the range of {dt} ({info.min}..{info.max})")
    elif dt.kind == "f":
        v = float(v)
    else:
        raise Invalid(f"pdc: {obj.name}: an object of {dt} ({obj.type.name}) cannot be queried by value")
    return Expr(obj, op, v)


def _cmp(op: int) -> Any:
    def f(self: Object, v: Any) -> Any:
        if isinstance(v, Object):
            return NotImplemented if op != _EQ else self is v
        return _operand(self, op, v)
    return f


Object.__gt__ = _cmp(_GT)  # type: ignore[assignment]
Object.__lt__ = _cmp(_LT)  # type: ignore[assignment]
Object.__ge__ = _cmp(_GTE)  # type: ignore[assignment]
Object.__le__ = _cmp(_LTE)  # type: ignore[assignment]
Object.__eq__ = _cmp(_EQ)  # type: ignore[assignment]
Object.__hash__ = object.__hash__  # type: ignore[assignment]


def _ne(self: Object, v: Any) -> Any:
    if isinstance(v, Object):
        return self is not v
    raise Invalid(f"pdc: {self.name} != {v!r}: queries have no !=; use ({self.name} < v) | ({self.name} > v)")


Object.__ne__ = _ne  # type: ignore[assignment]


class _RegionInfo(ctypes.Structure):
    _fields_ = [("local_id", u64), ("obj", ctypes.c_void_p), ("ndim", ctypes.c_size_t),
                ("offset", ctypes.POINTER(u64)), ("size", ctypes.POINTER(u64)), ("mapping", ctypes.c_bool),
                ("registered_op", ctypes.c_int), ("buf", ctypes.c_void_p), ("unit", ctypes.c_size_t)]


class _Selection(ctypes.Structure):
    _fields_ = [("query_id", u64), ("ndim", ctypes.c_size_t), ("nhits", u64),
                ("coords", ctypes.POINTER(u64)), ("coords_alloc", u64)]


class Query:
    """A value query over an object (obj.query(expr)), run on the data
    servers each time one of its methods is called: nhits() counts the
    elements that satisfy it, selection() gives their coordinates, values()
    their values (of this object, or of another of the same dims)."""

    def __init__(self, obj: Object, expr: Expr, within: Optional[Box] = None) -> None:
        self.obj, self.expr, self.within = obj, expr, within

    def __repr__(self) -> str:
        return f"<pdc.Query {self.expr!r}>"

    def _run(self, fn: Any) -> Any:
        made: list[int] = []
        try:
            q = self.expr._build(made)
            if self.within is not None:
                off, size, _ = self.within
                nd = len(off)
                info = _RegionInfo(ndim=nd, offset=(u64 * nd)(*off), size=(u64 * nd)(*size))
                _check(lib.PDCquery_sel_region(q, ctypes.byref(info)), f"PDCquery_sel_region({self!r})")
            return fn(q)
        finally:
            for q in made:
                lib.PDCquery_free(q)

    def nhits(self) -> int:
        """How many elements satisfy the query."""
        def run(q: int) -> int:
            n = u64()
            _check(lib.PDCquery_get_nhits(q, ctypes.byref(n)), f"PDCquery_get_nhits({self!r})")
            return int(n.value)
        return self._run(run)

    def selection(self) -> np.ndarray:
        """The hits' coordinates: an array of shape (nhits, ndim), in row-major order."""
        def run(q: int) -> np.ndarray:
            coords, sel = self._selection(q)
            lib.PDCselection_free(ctypes.byref(sel))
            return coords
        return self._run(run)

    def _selection(self, q: int) -> tuple[np.ndarray, _Selection]:
        sel = _Selection()
        _check(lib.PDCquery_get_selection(q, ctypes.byref(sel)), f"PDCquery_get_selection({self!r})")
        n, nd = int(sel.nhits), int(sel.ndim) or len(self.obj.shape)
        coords = np.empty((n, nd), np.uint64)
        if n:
            ctypes.memmove(coords.ctypes.data, sel.coords, coords.nbytes)
        return coords, sel

    def values(self, of: Optional[Object] = None) -> np.ndarray:
        """The values at the hits, in the selection's order: of this object,
        or of the object of (of the same number of dims: PDC's way of
        reading one variable where another matched)."""
        src = self.obj if of is None else of
        if not isinstance(src, Object):
            raise Invalid(f"pdc: values(of={of!r}): want a pdc.Object")

        def run(q: int) -> np.ndarray:
            coords, sel = self._selection(q)
            try:
                out = np.empty(len(coords), src.dtype)
                _check(lib.PDCquery_get_data(src.id, ctypes.byref(sel), out.ctypes.data),
                       f"PDCquery_get_data({src.name!r}, {self!r})")
                return out
            finally:
                lib.PDCselection_free(ctypes.byref(sel))
        return self._run(run)


def _obj_query(self: Object, expr: Expr, within: Any = None) -> Query:
    """A query over this object's elements: obj.query((obj > 0.5) & (obj < 2)),
    restricted to the region within (np.s_[0:100, :]) if given. Its
    nhits(), selection() and values() run it on the data servers."""
    if not isinstance(expr, Expr):
        raise Invalid(f"pdc: {self.name}.query({expr!r}): want a condition such as ({self.name} > 0.5) & ({self.name} < 2)")
    if expr.obj is not self:
        raise Invalid(f"pdc: {self.name}.query: the condition is over {expr.obj.name!r}; a query is over one object")
    self.id  # closed, or a fork: say so now
    return Query(self, expr, None if within is None else self._box(within))


Object.query = _obj_query  # type: ignore[attr-defined]
