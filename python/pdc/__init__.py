"""pdc: numpy arrays in and out of pdc servers, and file staging, over libpdc.

    import numpy as np, pdc

    with pdc.connect(tmpdir="/scratch/pdc") as conn:      # or $PDC_TMPDIR
        cont = conn.create_container("run1")
        x = cont.create_object("x", (1024, 64), np.float32)
        x[0:16, :] = np.ones((16, 64), np.float32)         # a region write
        part = x[0:100, 0:64]                               # a region read
        x.tags["step"] = 10

Failing calls raise pdc.Error subclasses (pdc.NotFound, pdc.Exists,
pdc.Invalid, pdc.Timeout, ...) carrying libpdc's one-line report. The
package loads libpdc.so with ctypes (python/README.md says why and where it
is found); a process forked after import gets a fresh copy of libpdc's core
from libpdc's loader, so fork and multiprocessing work: connect in the child.
"""

from __future__ import annotations

import ctypes
import enum
import math
import os
import struct
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Optional, Sequence, Union

import numpy as np

from . import _lib
from ._lib import lib, u64

__all__ = [
    "Error", "NotFound", "Exists", "Invalid", "OutOfRange", "Timeout", "Closed", "Unavailable",
    "Type", "connect", "Connection", "Container", "Object", "Transfer", "wait_all",
    "produce", "consume", "open",
]


# --- errors -----------------------------------------------------------------

class Error(Exception):
    """A failing pdc call; str() is libpdc's report (or the package's reason)."""


class NotFound(Error, LookupError):
    """pdc: not found (a container, object, server list or staged path)."""


class Exists(Error):
    """pdc: already exists."""


class Invalid(Error, ValueError):
    """pdc: invalid argument, refused before or by libpdc."""


class OutOfRange(Invalid, IndexError):
    """pdc: out of range (a region outside the object's dims)."""


class Timeout(Error, TimeoutError):
    """A call ran out of time ($PDC_TIMEOUT, or its own timeout)."""


class Closed(Error):
    """The handle (connection, container, object) is closed."""


class Unavailable(Error, ConnectionError):
    """pdc: server unavailable."""


# The sentinels' texts (errors.go) that libpdc's report lines end with,
# most specific first.
_MATCH = [
    ("already exists", Exists),
    ("not found", NotFound),
    ("out of range", OutOfRange),
    ("deadline exceeded", Timeout),
    ("timed out", Timeout),
    ("server unavailable", Unavailable),
    ("pdc: closed", Closed),
    ("invalid argument", Invalid),
]


def _error(call: str) -> Error:
    msg = _lib.last_error() or f"libpdc: {call} failed"
    low = msg.lower()
    for text, cls in _MATCH:
        if text in low:
            return cls(msg)
    return Error(msg)


def _check(rc: int, call: str) -> None:
    if rc != 0:
        raise _error(call)


def _checkid(h: int, call: str) -> int:
    if h == 0:
        raise _error(call)
    return h


def _take_names(addr: Optional[int], n: int) -> list[str]:
    """The n NUL-ended names of a block libpdc malloc'd at addr, which is freed."""
    out, at = [], addr
    try:
        for _ in range(n):
            b = ctypes.string_at(at)
            out.append(b.decode("utf-8", "surrogateescape"))
            at += len(b) + 1
    finally:
        if addr:
            _lib.free(addr)
    return out


# --- types ------------------------------------------------------------------

class Type(enum.IntEnum):
    """PDC's element and tag types (pdc_var_type_t)."""
    INT = 0
    FLOAT = 1
    DOUBLE = 2
    CHAR = 3
    STRING = 4
    BOOLEAN = 5
    SHORT = 6
    UINT = 7
    INT64 = 8
    UINT64 = 9
    INT16 = 10
    INT8 = 11
    UINT8 = 12
    UINT16 = 13
    INT32 = 14
    UINT32 = 15
    LONG = 16
    VOID_PTR = 17
    SIZE_T = 18


_TO_NUMPY = {
    Type.INT: np.dtype(np.int32), Type.FLOAT: np.dtype(np.float32), Type.DOUBLE: np.dtype(np.float64),
    Type.CHAR: np.dtype("S1"), Type.STRING: np.dtype(np.uint8), Type.BOOLEAN: np.dtype(np.bool_),
    Type.SHORT: np.dtype(np.int16), Type.UINT: np.dtype(np.uint32), Type.INT64: np.dtype(np.int64),
    Type.UINT64: np.dtype(np.uint64), Type.INT16: np.dtype(np.int16), Type.INT8: np.dtype(np.int8),
    Type.UINT8: np.dtype(np.uint8), Type.UINT16: np.dtype(np.uint16), Type.INT32: np.dtype(np.int32),
    Type.UINT32: np.dtype(np.uint32), Type.LONG: np.dtype(np.int64), Type.VOID_PTR: np.dtype(np.uint8),
    Type.SIZE_T: np.dtype(np.uint64),
}

# The PDC type a numpy dtype becomes (the first PDC type of that layout).
_FROM_NUMPY = {
    np.dtype(np.float32): Type.FLOAT, np.dtype(np.float64): Type.DOUBLE, np.dtype(np.bool_): Type.BOOLEAN,
    np.dtype(np.int8): Type.INT8, np.dtype(np.uint8): Type.UINT8, np.dtype(np.int16): Type.INT16,
    np.dtype(np.uint16): Type.UINT16, np.dtype(np.int32): Type.INT, np.dtype(np.uint32): Type.UINT,
    np.dtype(np.int64): Type.INT64, np.dtype(np.uint64): Type.UINT64, np.dtype("S1"): Type.CHAR,
}


def pdc_type(dtype: Any) -> Type:
    """The PDC type of a numpy dtype (or a pdc.Type, returned as is)."""
    if isinstance(dtype, Type):
        return dtype
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise Invalid(f"pdc: dtype {dtype!r}: {e}") from None
    dt = dt.newbyteorder("=") if dt.byteorder == "<" else dt
    t = _FROM_NUMPY.get(dt)
    if t is None:
        raise Invalid(f"pdc: dtype {dt}: no PDC type holds it (PDC types: "
                      + ", ".join(str(d) for d in _FROM_NUMPY) + ", or a pdc.Type)")
    return t


# --- connections --------------------------------------------------------------

def _name(s: Union[str, bytes, os.PathLike], what: str = "name") -> bytes:
    b = s if isinstance(s, bytes) else os.fsencode(s)
    return _cstr(b, what)


def _cstr(b: bytes, what: str) -> bytes:
    # C strings end at the first NUL: "a\0b" would reach the servers as
    # "a", and the call act on another name than the one given. (0 in b,
    # not b"\0" in b: bytes.__contains__ first tries its argument as an
    # int, and a bytes one costs a TypeError formatted and dropped.)
    if 0 in b:
        raise Invalid(f"{what} {b!r} has a NUL byte, which a C string cannot hold")
    return b


_env_lock = threading.Lock()

# This process's pid, for the fork checks of every call on a handle.
# os.getpid() is a system call (0.4 us here, more with the caches cold
# after a round trip), paid once per tag put; the hook keeps _pid right for
# every fork Python runs on (os.fork, multiprocessing, C code that calls
# PyOS_AfterFork_Child). After a fork it does not see, libpdc's loader
# still gives the child a core of its own, which refuses the parent's
# handles ("a handle of the process this one was forked from").
_pid = os.getpid()


def _after_fork_in_child() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_after_fork_in_child)


class Connection:
    """A connection to pdc servers (PDCinit). Use pdc.connect."""

    def __init__(self, tmpdir: Optional[str] = None, name: str = "python") -> None:
        # libpdc reads $PDC_TMPDIR with C's getenv at PDCinit.
        with _env_lock:
            old = os.environ.get("PDC_TMPDIR")
            if tmpdir is not None:
                os.environ["PDC_TMPDIR"] = os.fspath(tmpdir)
            try:
                lib.pdc_report_errors(_lib.report_errors)
                self._id = _checkid(lib.PDCinit(_cstr(name.encode(), "connection name")), f"PDCinit({name!r})")
            finally:
                if tmpdir is not None:
                    if old is None:
                        del os.environ["PDC_TMPDIR"]
                    else:
                        os.environ["PDC_TMPDIR"] = old
        self._pid = _pid

    @property
    def id(self) -> int:
        if self._id == 0:
            raise Closed("pdc: connection closed")
        if self._pid != _pid:
            raise Closed("pdc: connection made in process %d, before a fork: "
                         "call pdc.connect in the child" % self._pid)
        return self._id

    def close(self) -> None:
        """Closes the connection and every handle opened through it (idempotent)."""
        if self._id != 0 and self._pid == _pid:
            h, self._id = self._id, 0
            _check(lib.PDCclose(h), "PDCclose")
        self._id = 0

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def create_container(self, name: str, transient: bool = False) -> "Container":
        """Creates the container name and opens it; if it exists, opens it (as
        PDC does, so that every rank of a job may create the same one)."""
        prop = _checkid(lib.PDCprop_create(0, self.id), "PDCprop_create")
        try:
            if transient:
                _check(lib.PDCprop_set_cont_lifetime(prop, 1), "PDCprop_set_cont_lifetime")
            h = _checkid(lib.PDCcont_create(_name(name), prop), f"PDCcont_create({name!r})")
        finally:
            lib.PDCprop_close(prop)
        return Container(self, name, h)

    def container(self, name: str) -> "Container":
        """Opens the container name (pdc.NotFound if there is none)."""
        return Container(self, name, _checkid(lib.PDCcont_open(_name(name), self.id), f"PDCcont_open({name!r})"))

    def object(self, name: str) -> "Object":
        """Opens the object name (pdc.NotFound if there is none)."""
        return Object(self, name, _checkid(lib.PDCobj_open(_name(name), self.id), f"PDCobj_open({name!r})"))

    def produce(self, path: Union[str, os.PathLike]) -> None:
        """Publishes the staged file path (complete) to consumers (pdc_stage_produce)."""
        _check(lib.pdc_stage_produce(self.id, _name(path, "path")), f"pdc_stage_produce({path!r})")

    def consume(self, path: Union[str, os.PathLike], timeout: Optional[float] = None) -> None:
        """Waits until path is produced and brings it here (pdc_stage_consume).

        timeout: seconds; None is the connection's default ($PDC_TIMEOUT),
        float('inf') waits without limit; pdc.Timeout when it runs out."""
        t = 0.0 if timeout is None else float(timeout)
        if timeout is not None and not t > 0:
            raise Invalid(f"pdc: consume({path!r}): timeout {timeout!r} is not a positive number of seconds")
        _check(lib.pdc_stage_consume(self.id, _name(path, "path"), t), f"pdc_stage_consume({path!r})")


def connect(tmpdir: Optional[str] = None, name: str = "python") -> Connection:
    """Connects to the servers whose list is in tmpdir (default $PDC_TMPDIR,
    else ./pdc_tmp). A context manager: `with pdc.connect() as conn:`."""
    return Connection(tmpdir, name)


# --- tags ---------------------------------------------------------------------

_INT64, _DOUBLE = int(Type.INT64), int(Type.DOUBLE)
_I64_LIMIT = 1 << 63
_pack_double = struct.Struct("=d").pack  # as np.float64(v).tobytes()


def _tag_value(v: Any) -> tuple[Type, bytes]:
    if isinstance(v, np.generic):
        if isinstance(v, np.bytes_):
            return Type.VOID_PTR, bytes(v)
        if isinstance(v, np.str_):
            return Type.STRING, str(v).encode()
        t = pdc_type(v.dtype)
        return t, v.tobytes()
    if isinstance(v, bool):
        return Type.BOOLEAN, bytes([int(v)])
    if isinstance(v, int):
        try:
            return Type.INT64, int(v).to_bytes(8, "little", signed=True)
        except OverflowError:
            raise Invalid(f"pdc: tag value {v}: does not fit in 64 bits") from None
    if isinstance(v, float):
        return Type.DOUBLE, np.float64(v).tobytes()
    if isinstance(v, str):
        return Type.STRING, v.encode()
    if isinstance(v, (bytes, bytearray, memoryview)):
        return Type.VOID_PTR, bytes(v)
    raise Invalid(f"pdc: tag value {v!r}: of type {type(v).__name__}; tags hold str, int, float, bool, bytes or numpy scalars")


def _from_tag(t: int, raw: bytes) -> Any:
    if t == Type.STRING:
        return raw.rstrip(b"\0").decode("utf-8", "surrogateescape")
    if t in (Type.VOID_PTR, Type.CHAR):
        return raw
    # A value not of its type's size (C may put one of 0 bytes) is its bytes.
    dt = _TO_NUMPY.get(Type(t)) if t in Type._value2member_map_ else None
    if dt is None or len(raw) != dt.itemsize:
        return raw
    if t == Type.INT64:
        return int.from_bytes(raw, "little", signed=True)
    if t == Type.DOUBLE:
        return float(np.frombuffer(raw, np.float64)[0])
    if t == Type.BOOLEAN:
        return bool(raw[0])
    return np.frombuffer(raw, dt)[0]


class Tags:
    """A container's or object's tags as a mapping: values keep their type."""

    def __init__(self, owner: "_Handle", put: Any, get: Any, delete: Any, names: Any = None) -> None:
        self._owner, self._put, self._get, self._del, self._names = owner, put, get, delete, names

    def keys(self) -> list[str]:
        """The tags' names, sorted (objects only: PDC cannot list a container's)."""
        if self._names is None:
            raise Invalid(f"pdc: {self._owner.name!r}: a {self._owner._what}'s tags cannot be listed")
        n, names = ctypes.c_int(), ctypes.c_void_p()
        _check(self._names(self._owner.id, ctypes.byref(n), ctypes.byref(names)), f"pdc_obj_tag_names({self._owner.name!r})")
        return _take_names(names.value, n.value)

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def items(self) -> list[tuple[str, Any]]:
        return [(k, self[k]) for k in self.keys()]

    def __setitem__(self, key: str, value: Any) -> None:
        # Once per tag in a loop of puts, so kept lean: the value's bytes go
        # as they are (libpdc copies them before it returns), a plain int or
        # float skips _tag_value's tests, and the call is named only when it
        # failed.
        name = key.encode()
        if 0 in name:
            _cstr(name, "tag name")
        tv = type(value)
        if tv is int and -_I64_LIMIT <= value < _I64_LIMIT:
            t, raw = _INT64, value.to_bytes(8, "little", signed=True)
        elif tv is float:
            t, raw = _DOUBLE, _pack_double(value)
        else:
            tt, raw = _tag_value(value)
            t = int(tt)
        # The owner's id property's checks (handle or connection closed, a
        # fork), inline: two property calls were a third of this method.
        o = self._owner
        h, c = o._id, o.conn
        if h == 0 or c._id == 0 or c._pid != _pid:
            h = o.id  # raises the check's pdc.Closed
        if self._put(h, name, raw, t, len(raw)) != 0:
            raise _error(f"put_tag({key!r})")

    def __getitem__(self, key: str) -> Any:
        val, typ, size = ctypes.c_void_p(), ctypes.c_int(), ctypes.c_ulonglong()
        _check(self._get(self._owner.id, _cstr(key.encode(), "tag name"), ctypes.byref(val), ctypes.byref(typ), ctypes.byref(size)),
               f"get_tag({key!r})")
        if not val.value:
            raise KeyError(key)
        try:
            raw = ctypes.string_at(val.value, size.value)
        finally:
            _lib.free(val)
        return _from_tag(typ.value, raw)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __delitem__(self, key: str) -> None:
        _check(self._del(self._owner.id, _cstr(key.encode(), "tag name")), f"del_tag({key!r})")


# --- containers and objects ------------------------------------------------

class _Handle:
    _what = "handle"

    def __init__(self, conn: Connection, name: str, h: int) -> None:
        self.conn, self.name, self._id = conn, name, h

    @property
    def id(self) -> int:
        if self._id == 0:
            raise Closed(f"pdc: {self._what} {self.name!r} is closed")
        self.conn.id  # closed connection, or a fork
        return self._id

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<pdc.{type(self).__name__} {self.name!r}{'' if self._id else ' closed'}>"


class Container(_Handle):
    """An open container (PDCcont_*)."""
    _what = "container"

    @property
    def tags(self) -> Tags:
        return Tags(self, lib.PDCcont_put_tag, lib.PDCcont_get_tag, lib.PDCcont_del_tag)

    def create_object(self, name: str, shape: Sequence[int], dtype: Any = np.float64) -> "Object":
        """Creates the object name of shape and dtype (a numpy dtype, or a
        pdc.Type for the types numpy shares, such as pdc.Type.SIZE_T) and opens it."""
        t = pdc_type(dtype)
        dims = _dims(shape)
        prop = _checkid(lib.PDCprop_create(1, self.conn.id), "PDCprop_create")
        try:
            arr = (u64 * len(dims))(*dims)
            _check(lib.PDCprop_set_obj_dims(prop, len(dims), arr), f"PDCprop_set_obj_dims({shape})")
            _check(lib.PDCprop_set_obj_type(prop, int(t)), f"PDCprop_set_obj_type({t.name})")
            h = _checkid(lib.PDCobj_create(self.id, _name(name), prop), f"PDCobj_create({name!r})")
        finally:
            lib.PDCprop_close(prop)
        return Object(self.conn, name, h)

    def delete(self) -> None:
        """Deletes the container and closes it."""
        _check(lib.PDCcont_del(self.id), f"PDCcont_del({self.name!r})")
        self.close()

    def close(self) -> None:
        if self._id != 0:
            h, self._id = self._id, 0
            if self.conn._id and self.conn._pid == _pid:
                _check(lib.PDCcont_close(h), f"PDCcont_close({self.name!r})")


def _dims(shape: Sequence[int]) -> list[int]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    dims = [int(d) for d in shape]
    if not dims or any(d < 1 for d in dims):
        raise Invalid(f"pdc: shape {tuple(shape)}: needs 1 or more dims, each at least 1")
    return dims


class _ObjInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("meta_id", u64), ("local_id", u64), ("server_id", ctypes.c_int),
                ("metadata_server_id", ctypes.c_uint32), ("obj_pt", ctypes.c_void_p)]


class _ObjProp(ctypes.Structure):
    _fields_ = [("obj_prop_id", u64), ("ndim", ctypes.c_size_t), ("dims", ctypes.POINTER(u64)),
                ("type", ctypes.c_int), ("region_partition", ctypes.c_int), ("consistency", ctypes.c_int)]


Box = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]  # offset, size, result shape


class Object(_Handle):
    """An open object: an n-dimensional array on the data servers.

    obj[key] reads and obj[key] = value writes a region: key is integers
    and slices without steps (a step is refused with pdc.Invalid)."""
    _what = "object"

    def __init__(self, conn: Connection, name: str, h: int) -> None:
        super().__init__(conn, name, h)
        # An object created without dims and type (C's PDCobj_create allows
        # it: an object for its tags) has PDC_UNKNOWN (-1): no type, no data.
        try:
            t, shape = self._prop()
        except BaseException:
            self.close()  # the handle just opened is not left behind
            raise
        self.type: Optional[Type] = Type(t) if t in Type._value2member_map_ else None
        self.dtype: Optional[np.dtype] = _TO_NUMPY[self.type] if self.type is not None else None
        # The dims indexing resolves against (obj[:], bounds): those of the
        # last look (open, obj.shape, set_dims), not asked of the servers
        # per region, which cost a round trip each (a quarter of a 1 MiB
        # write), as a C program's transfers use its handle's dims. An
        # index past them looks again (another process may have grown the
        # object); a shrink elsewhere is seen at the next obj.shape.
        self._shape: Optional[tuple[int, ...]] = shape

    def _prop(self) -> tuple[int, tuple[int, ...]]:
        """The object's PDC type and dims, as its server has them now."""
        p = lib.PDCobj_get_info(self.id)
        if not p:
            raise _error(f"PDCobj_get_info({self.name!r})")
        try:
            prop = _ObjProp.from_address(_ObjInfo.from_address(p).obj_pt)
            return int(prop.type), tuple(int(prop.dims[i]) for i in range(prop.ndim))
        finally:
            _lib.free(p)  # one block, name and property included (pdc_obj.h)

    @property
    def shape(self) -> tuple[int, ...]:
        nd, dims = ctypes.c_int(), ctypes.POINTER(u64)()
        _check(lib.PDCobj_get_dims(self.id, ctypes.byref(nd), ctypes.byref(dims)), f"PDCobj_get_dims({self.name!r})")
        try:
            self._shape = tuple(int(dims[i]) for i in range(nd.value))
        finally:
            _lib.free(ctypes.cast(dims, ctypes.c_void_p))
        return self._shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def set_dims(self, shape: Sequence[int]) -> None:
        """Changes the object's dims (PDCobj_set_dims)."""
        dims = _dims(shape)
        self._shape = None
        _check(lib.PDCobj_set_dims(self.id, len(dims), (u64 * len(dims))(*dims)), f"PDCobj_set_dims({shape})")
        self._shape = tuple(dims)

    def info(self) -> dict[str, Any]:
        """The object's name, shape, dtype, PDC type and server."""
        p = lib.PDCobj_get_info(self.id)
        if not p:
            raise _error(f"PDCobj_get_info({self.name!r})")
        try:
            i = _ObjInfo.from_address(p)
            server_id, meta_id = int(i.server_id), int(i.meta_id)
        finally:
            _lib.free(p)
        return {"name": self.name, "shape": self.shape, "dtype": self.dtype, "type": self.type,
                "server_id": server_id, "meta_id": meta_id}

    @property
    def tags(self) -> Tags:
        return Tags(self, lib.PDCobj_put_tag, lib.PDCobj_get_tag, lib.PDCobj_del_tag, lib.pdc_obj_tag_names)

    def delete(self) -> None:
        """Deletes the object (its data too) and closes it."""
        _check(lib.PDCobj_del(self.id), f"PDCobj_del({self.name!r})")
        self.close()

    def close(self) -> None:
        """Closes the object, which flushes it (idempotent)."""
        if self._id != 0:
            h, self._id = self._id, 0
            if self.conn._id and self.conn._pid == _pid:
                _check(lib.PDCobj_close(h), f"PDCobj_close({self.name!r})")

    # regions

    def _box(self, key: Any) -> Box:
        if self.type is None:
            raise Invalid(f"pdc: {self.name}: the object has no element type (made without dims and type, "
                          "for its tags): it holds no data")
        if self._shape is not None:
            try:
                return self._box_in(key, self._shape)
            except OutOfRange:
                pass  # the dims may have grown since: look again
        return self._box_in(key, self.shape)

    def _box_in(self, key: Any, shape: tuple[int, ...]) -> Box:
        if not isinstance(key, tuple):
            key = (key,)
        if any(k is Ellipsis for k in key):
            i = key.index(Ellipsis)
            if key.count(Ellipsis) > 1:
                raise Invalid(f"pdc: {self.name}[{key}]: more than one ...")
            key = key[:i] + (slice(None),) * (len(shape) - len(key) + 1) + key[i + 1:]
        if len(key) > len(shape):
            raise OutOfRange(f"pdc: {self.name}: {len(key)} indices for an object of {len(shape)} dims {shape}")
        key = key + (slice(None),) * (len(shape) - len(key))
        off, size, out = [], [], []
        for d, (k, n) in enumerate(zip(key, shape)):
            if isinstance(k, slice):
                if k.step not in (None, 1):
                    raise Invalid(f"pdc: {self.name}: slice {k.start}:{k.stop}:{k.step} in dim {d}: "
                                  "regions are boxes; slices with steps are not supported (read the box, then step in numpy)")
                start, stop, _ = k.indices(n)
                for v in (k.start, k.stop):
                    if v is not None and not (-n <= int(v) <= n):
                        raise OutOfRange(f"pdc: {self.name}: slice {k.start}:{k.stop} in dim {d} is outside 0:{n}")
                if stop <= start:
                    raise Invalid(f"pdc: {self.name}: slice {k.start}:{k.stop} in dim {d} is empty")
                off.append(start)
                size.append(stop - start)
                out.append(stop - start)
            elif isinstance(k, (int, np.integer)):
                i = int(k)
                if i < 0:
                    i += n
                if not 0 <= i < n:
                    raise OutOfRange(f"pdc: {self.name}: index {int(k)} in dim {d} is outside 0:{n}")
                off.append(i)
                size.append(1)
            else:
                raise Invalid(f"pdc: {self.name}: index {k!r} in dim {d}: use integers and slices")
        return tuple(off), tuple(size), tuple(out)

    def _now(self, buf: np.ndarray, box: Box, access: int) -> None:
        """Moves the region and returns once done: one libpdc call, one
        request per data server (pdc_region_transfer_now)."""
        off, size, _ = box
        nd = len(off)
        rc = lib.pdc_region_transfer_now(self.id, buf.ctypes.data, access, nd, (u64 * nd)(*off), (u64 * nd)(*size))
        if rc != 0:
            err = _error(f"pdc_region_transfer_now({self.name}[{_fmt(off, size)}])")
            if isinstance(err, OutOfRange):
                self._shape = None  # shrunk by another process: the next index looks again
            raise err

    def _transfer(self, buf: np.ndarray, box: Box, access: int) -> "Transfer":
        off, size, _ = box
        nd = len(off)
        zeros = (u64 * nd)()
        local = _checkid(lib.PDCregion_create(nd, zeros, (u64 * nd)(*size)), "PDCregion_create")
        try:
            remote = _checkid(lib.PDCregion_create(nd, (u64 * nd)(*off), (u64 * nd)(*size)), "PDCregion_create")
        except Error:
            lib.PDCregion_close(local)
            raise
        what = f"{self.name}[{_fmt(off, size)}]"
        try:
            t = _checkid(lib.PDCregion_transfer_create(buf.ctypes.data, access, self.id, local, remote),
                         f"PDCregion_transfer_create({what})")
        except OutOfRange:
            self._shape = None  # shrunk by another process: the next index looks again
            raise
        finally:
            lib.PDCregion_close(local)
            lib.PDCregion_close(remote)
        return Transfer(self, t, buf, what)

    def _wbuf(self, key: Any, value: Any) -> tuple[np.ndarray, Box]:
        box = self._box(key)
        a = np.asarray(value)
        if a.dtype != self.dtype:
            if a.dtype.kind in "OUSV" or not np.can_cast(a.dtype, self.dtype, "same_kind"):
                raise Invalid(f"pdc: {self.name}: cannot write {a.dtype} values into an object of {self.dtype} "
                              f"({self.type.name}) without losing values: convert with arr.astype(...) first")
            if a.ndim > 0 and not np.can_cast(a.dtype, self.dtype, "safe"):
                raise Invalid(f"pdc: {self.name}: writing {a.dtype} into {self.dtype} would lose values: "
                              f"convert with arr.astype({self.dtype}) first")
        n = math.prod(box[1])
        if a.size == n and a.shape in (box[2], box[1]) or a.ndim == 1 and a.size == n:
            a = a.reshape(box[1]) if a.shape != box[1] else a
        else:
            try:
                a = np.broadcast_to(a, box[2]).reshape(box[1])
            except ValueError:
                raise Invalid(f"pdc: {self.name}: cannot write shape {a.shape} into region of shape {box[2]}") from None
        # Zero-copy when the caller's array is already C-ordered of the object's type.
        return np.ascontiguousarray(a, dtype=self.dtype), box

    def __setitem__(self, key: Any, value: Any) -> None:
        buf, box = self._wbuf(key, value)
        self._now(buf, box, 2)

    def __getitem__(self, key: Any) -> np.ndarray:
        box = self._box(key)
        out = np.empty(box[1], self.dtype)
        self._now(out, box, 1)
        return out.reshape(box[2])

    def write(self, key: Any, value: Any) -> None:
        """obj.write(np.s_[0:16, :], arr) is obj[0:16, :] = arr."""
        self[key] = value

    def read(self, key: Any = (), out: Optional[np.ndarray] = None) -> np.ndarray:
        """Reads a region (np.s_[...], or () for all of it), into out if
        given: a C-contiguous, writable array of the object's dtype with the
        region's number of elements, filled in place (no copy)."""
        box = self._box(key)
        buf = self._outbuf(box, out)
        self._now(buf, box, 1)
        return out if out is not None else buf.reshape(box[2])

    def _outbuf(self, box: Box, out: Optional[np.ndarray]) -> np.ndarray:
        if out is None:
            return np.empty(box[1], self.dtype)
        if not isinstance(out, np.ndarray):
            raise Invalid(f"pdc: {self.name}: out must be a numpy array, not {type(out).__name__}")
        if out.dtype != self.dtype:
            raise Invalid(f"pdc: {self.name}: out has dtype {out.dtype}; the object holds {self.dtype}")
        if not out.flags.c_contiguous or not out.flags.writeable:
            raise Invalid(f"pdc: {self.name}: out must be C-contiguous and writable (pdc reads into it in place)")
        if out.size != math.prod(box[1]):
            raise Invalid(f"pdc: {self.name}: out has {out.size} elements; the region {box[2]} has {math.prod(box[1])}")
        return out

    def start_write(self, key: Any, value: Any) -> "Transfer":
        """Starts writing value into the region; wait with t.wait() or
        pdc.wait_all. The array is kept (and must not change) until then."""
        buf, box = self._wbuf(key, value)
        t = self._transfer(buf, box, 2)
        t.start()
        return t

    def start_read(self, key: Any = (), out: Optional[np.ndarray] = None) -> "Transfer":
        """Starts reading the region; t.wait() returns the array."""
        box = self._box(key)
        buf = self._outbuf(box, out)
        t = self._transfer(buf, box, 1)
        t.result = out if out is not None else buf.reshape(box[2])
        t.start()
        return t


def _fmt(off: Sequence[int], size: Sequence[int]) -> str:
    return ", ".join(f"{o}:{o + s}" for o, s in zip(off, size))


# The buffers of transfers dropped unwaited whose close failed: libpdc may
# still use them (Transfer.__del__).
_held: list[np.ndarray] = []


class Transfer:
    """A region transfer (PDCregion_transfer_*), which keeps its buffer
    alive until it is waited, or closed when dropped."""

    def __init__(self, obj: Object, h: int, buf: np.ndarray, what: str) -> None:
        self.obj, self._id, self.buf, self.what = obj, h, buf, what
        self.result: Optional[np.ndarray] = None
        self._started = False

    def start(self) -> None:
        try:
            _check(lib.PDCregion_transfer_start(self._id), f"PDCregion_transfer_start({self.what})")
        except Error:
            self._close()
            raise
        self._started = True

    def wait(self) -> Optional[np.ndarray]:
        """Waits until the transfer is done; returns the read array (None for a write)."""
        if self._id == 0:
            return self.result
        try:
            if not self._started:
                self.start()
            _check(lib.PDCregion_transfer_wait(self._id), f"PDCregion_transfer_wait({self.what})")
        except OutOfRange:
            self.obj._shape = None  # see Object.__init__
            raise
        finally:
            self._close()
        return self.result

    def __del__(self) -> None:
        # Dropped before its wait, the transfer may still use the buffer,
        # which goes with this object: a write's bytes leave after start
        # returns, a read's land at the wait PDCobj_close or PDCclose does.
        # Close it here, which waits for it; a close that fails keeps the
        # buffer for good. A connection closed or of the parent of a fork
        # uses the buffer no more.
        try:
            conn = self.obj.conn
            if self._id == 0 or conn._id == 0 or conn._pid != _pid:
                return
            try:
                self._close()
            except Error:
                _held.append(self.buf)
        except Exception:
            pass  # at interpreter exit: nothing runs transfers any more

    def _close(self) -> None:
        if self._id != 0:
            h, self._id = self._id, 0
            rc = lib.PDCregion_transfer_close(h)
            if rc != 0:
                # libpdc keeps the transfer (and uses the buffer) until a later close succeeds.
                self._id = h
                raise _error(f"PDCregion_transfer_close({self.what})")


def wait_all(transfers: Sequence[Transfer]) -> None:
    """Waits for every transfer (PDCregion_transfer_wait_all), then releases them."""
    live = [t for t in transfers if t._id != 0]
    for t in live:
        if not t._started:
            t.start()
    if not live:
        return
    ids = (u64 * len(live))(*[t._id for t in live])
    try:
        _check(lib.PDCregion_transfer_wait_all(ids, len(live)), f"PDCregion_transfer_wait_all({len(live)} transfers)")
    finally:
        errs = []
        for t in live:
            try:
                t._close()
            except Error as e:
                errs.append(e)
        if errs:
            raise errs[0]


# --- staging -------------------------------------------------------------------

_default: Optional[Connection] = None
_default_lock = threading.Lock()


def _conn() -> Connection:
    global _default
    with _default_lock:
        if _default is None or _default._id == 0 or _default._pid != _pid:
            _default = Connection()
        return _default


def produce(path: Union[str, os.PathLike], conn: Optional[Connection] = None) -> None:
    """Publishes the finished file path in a staging dir to its consumers."""
    (conn or _conn()).produce(path)


def consume(path: Union[str, os.PathLike], timeout: Optional[float] = None, conn: Optional[Connection] = None) -> None:
    """Waits until path is produced (by any task) and brings it here."""
    (conn or _conn()).consume(path, timeout)


_open = open


@contextmanager
def open(path: Union[str, os.PathLike], mode: str = "r", timeout: Optional[float] = None,
         conn: Optional[Connection] = None, **kw: Any) -> Iterator[Any]:
    """Opens a staged file as builtins.open does: a read mode consumes
    path first; a write mode produces it once the file is closed."""
    reading = "r" in mode and "+" not in mode
    if reading:
        consume(path, timeout, conn)
    f = _open(path, mode, **kw)
    try:
        yield f
    except BaseException:
        f.close()
        raise
    f.close()
    if not reading:
        produce(path, conn)


# --- iteration, .npy and HDF5 ------------------------------------------------

def _object_names(cont: Container) -> list[str]:
    """The names of the container's objects (in meta id order)."""
    # Not PDCobj_iter_*: their NULL means both "no more" and "failed", so
    # a listing cut short by a server would look complete.
    n, names = ctypes.c_int(), ctypes.c_void_p()
    _check(lib.pdc_cont_obj_names(cont.id, ctypes.byref(n), ctypes.byref(names)), f"pdc_cont_obj_names({cont.name!r})")
    return _take_names(names.value, n.value)


Container.object_names = _object_names  # type: ignore[attr-defined]


def _rows(shape: Sequence[int], itemsize: int, chunk_bytes: int) -> int:
    row = itemsize * int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else itemsize
    return max(1, chunk_bytes // max(1, row))


def from_npy(cont: Container, name: str, path: Union[str, os.PathLike], chunk_bytes: int = 64 << 20) -> Object:
    """Creates object name from a .npy file, copied in chunks of rows (the
    file is memory-mapped: it may be larger than memory)."""
    a = np.load(os.fspath(path), mmap_mode="r")
    return _import(cont, name, a, a.shape, a.dtype, chunk_bytes)


def _import(cont: Container, name: str, src: Any, shape: tuple[int, ...], dtype: np.dtype, chunk_bytes: int) -> Object:
    if len(shape) == 0:
        raise Invalid(f"pdc: {name}: a scalar (0 dims) is not an object; store it as a tag")
    native = dtype.newbyteorder("=") if dtype.byteorder not in ("=", "|") else dtype
    obj = cont.create_object(name, shape, native)
    step = _rows(shape, native.itemsize, chunk_bytes)
    for r in range(0, shape[0], step):
        obj[r:min(r + step, shape[0])] = np.ascontiguousarray(src[r:r + step], dtype=native)
    return obj


def to_npy(obj: Object, path: Union[str, os.PathLike], chunk_bytes: int = 64 << 20) -> None:
    """Writes the object to a .npy file, read in chunks of rows straight
    into the file's memory map (no copy in Python)."""
    shape = obj.shape
    mm = np.lib.format.open_memmap(os.fspath(path), mode="w+", dtype=obj.dtype, shape=shape)
    step = _rows(shape, obj.dtype.itemsize, chunk_bytes)
    for r in range(0, shape[0], step):
        obj.read(np.s_[r:min(r + step, shape[0])], out=mm[r:r + step])
    mm.flush()
    del mm


def from_hdf5(path: Union[str, os.PathLike], dataset: str, cont: Container, name: str,
              chunk_bytes: int = 64 << 20) -> Object:
    """Creates object name from an HDF5 dataset (h5py), in chunks of rows;
    the dataset's scalar and string attributes become tags (array
    attributes are not copied)."""
    import h5py  # only for HDF5

    with h5py.File(os.fspath(path), "r") as f:
        ds = f[dataset]
        if not isinstance(ds, h5py.Dataset):
            raise Invalid(f"pdc: {path}:{dataset}: not a dataset")
        obj = _import(cont, name, ds, ds.shape, ds.dtype, chunk_bytes)
        for k, v in ds.attrs.items():
            if isinstance(v, np.ndarray) and v.ndim > 0:
                continue
            obj.tags[k] = v
    return obj


def to_hdf5(obj: Object, path: Union[str, os.PathLike], dataset: Optional[str] = None,
            tags: Optional[Sequence[str]] = None, chunk_bytes: int = 64 << 20) -> None:
    """Writes the object to an HDF5 dataset (default its name), in chunks of
    rows, with its tags as attributes (tags=[...]: only those). The file is
    created or added to; a dataset already there raises pdc.Exists."""
    import h5py

    shape = obj.shape
    step = _rows(shape, obj.dtype.itemsize, chunk_bytes)
    with h5py.File(os.fspath(path), "a") as f:
        if (dataset or obj.name) in f:
            raise Exists(f"pdc: {path}: already holds {dataset or obj.name}")
        ds = f.create_dataset(dataset or obj.name, shape=shape, dtype=obj.dtype)
        buf = np.empty((min(step, shape[0]),) + shape[1:], obj.dtype)
        for r in range(0, shape[0], step):
            n = min(step, shape[0] - r)
            obj.read(np.s_[r:r + n], out=buf[:n])
            ds[r:r + n] = buf[:n]
        for t in obj.tags.keys() if tags is None else tags:
            ds.attrs[t] = obj.tags[t]


Object.to_npy = to_npy  # type: ignore[attr-defined]
Object.to_hdf5 = to_hdf5  # type: ignore[attr-defined]
__all__ += ["from_npy", "to_npy", "from_hdf5", "to_hdf5"]


from ._query import Expr, Match, Query  # noqa: E402  (adds Connection.query, Object.query)

__all__ += ["Expr", "Match", "Query"]
