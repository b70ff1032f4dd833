"""Finding and loading libpdc, with the signatures of the calls pdc uses."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path
from typing import Optional

u64 = ctypes.c_uint64
c_int = ctypes.c_int
c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p
P = ctypes.POINTER

ENV = "PDC_LIBPDC"

_here = Path(__file__).resolve().parent


def candidates() -> list[Path]:
    """Where libpdc.so is looked for, in order (after $PDC_LIBPDC)."""
    return [
        _here / "_libpdc" / "lib" / "libpdc.so",  # installed by pip install ./python
        _here.parent.parent / "build" / "capi" / "lib" / "libpdc.so",  # a source checkout after make capi
    ]


def find() -> str:
    env = os.environ.get(ENV)
    if env:
        if not os.path.exists(env):
            raise OSError(f"pdc: ${ENV}={env}: no such file")
        return env
    for c in candidates():
        if c.exists():
            return str(c)
    found = ctypes.util.find_library("pdc")
    if found:
        return found
    raise OSError(
        "pdc: libpdc.so not found: set $PDC_LIBPDC, install the package with "
        "`pip install ./python` from a pdc checkout (it builds libpdc), or run `make capi` "
        "(looked in: " + ", ".join(str(c) for c in candidates()) + ")"
    )


def bindir() -> Optional[Path]:
    """The bin directory of libpdc's install (where `pdc` is), if any."""
    b = Path(path).resolve().parent.parent / "bin"
    return b if (b / "pdc").exists() else None


_SIGS = {
    "PDCinit": (u64, [c_char_p]),
    "PDCclose": (c_int, [u64]),
    "pdc_last_error": (ctypes.c_size_t, [c_char_p, ctypes.c_size_t]),
    "pdc_report_errors": (None, [c_int]),
    "PDCprop_create": (u64, [c_int, u64]),
    "PDCprop_close": (c_int, [u64]),
    "PDCprop_set_cont_lifetime": (c_int, [u64, c_int]),
    "PDCprop_set_obj_dims": (c_int, [u64, c_int, P(u64)]),
    "PDCprop_set_obj_type": (c_int, [u64, c_int]),
    "PDCcont_create": (u64, [c_char_p, u64]),
    "PDCcont_open": (u64, [c_char_p, u64]),
    "PDCcont_close": (c_int, [u64]),
    "PDCcont_del": (c_int, [u64]),
    "PDCcont_put_tag": (c_int, [u64, c_char_p, c_void_p, c_int, ctypes.c_ulonglong]),
    "PDCcont_get_tag": (c_int, [u64, c_char_p, P(c_void_p), P(c_int), P(ctypes.c_ulonglong)]),
    "PDCcont_del_tag": (c_int, [u64, c_char_p]),
    "PDCobj_create": (u64, [u64, c_char_p, u64]),
    "PDCobj_open": (u64, [c_char_p, u64]),
    "PDCobj_close": (c_int, [u64]),
    "PDCobj_del": (c_int, [u64]),
    "PDCobj_get_info": (c_void_p, [u64]),
    "PDCobj_get_dims": (c_int, [u64, P(c_int), P(P(u64))]),
    "PDCobj_set_dims": (c_int, [u64, c_int, P(u64)]),
    "PDCobj_put_tag": (c_int, [u64, c_char_p, c_void_p, c_int, ctypes.c_ulonglong]),
    "PDCobj_get_tag": (c_int, [u64, c_char_p, P(c_void_p), P(c_int), P(ctypes.c_ulonglong)]),
    "PDCobj_del_tag": (c_int, [u64, c_char_p]),
    "PDCregion_create": (u64, [ctypes.c_ulonglong, P(u64), P(u64)]),
    "PDCregion_close": (c_int, [u64]),
    "PDCregion_transfer_create": (u64, [c_void_p, c_int, u64, u64, u64]),
    "PDCregion_transfer_start": (c_int, [u64]),
    "PDCregion_transfer_start_all": (c_int, [P(u64), c_int]),
    "PDCregion_transfer_wait": (c_int, [u64]),
    "PDCregion_transfer_wait_all": (c_int, [P(u64), c_int]),
    "PDCregion_transfer_close": (c_int, [u64]),
    "pdc_region_transfer_now": (c_int, [u64, c_void_p, c_int, ctypes.c_ulonglong, P(u64), P(u64)]),
    "pdc_stage_produce": (c_int, [u64, c_char_p]),
    "pdc_stage_consume": (c_int, [u64, c_char_p, ctypes.c_double]),
    "pdc_query_tags": (c_int, [u64, c_char_p, P(c_int), P(P(u64)), P(c_void_p)]),
    "pdc_obj_tag_names": (c_int, [u64, P(c_int), P(c_void_p)]),
    "pdc_cont_obj_names": (c_int, [u64, P(c_int), P(c_void_p)]),
    "PDCquery_create": (c_void_p, [u64, c_int, c_int, c_void_p]),
    "PDCquery_and": (c_void_p, [c_void_p, c_void_p]),
    "PDCquery_or": (c_void_p, [c_void_p, c_void_p]),
    "PDCquery_sel_region": (c_int, [c_void_p, c_void_p]),
    "PDCquery_get_nhits": (c_int, [c_void_p, P(u64)]),
    "PDCquery_get_selection": (c_int, [c_void_p, c_void_p]),
    "PDCquery_get_data": (c_int, [u64, c_void_p, c_void_p]),
    "PDCquery_free": (None, [c_void_p]),
    "PDCselection_free": (None, [c_void_p]),
}

path = find()
lib = ctypes.CDLL(path)
for _name, (_res, _args) in _SIGS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args

# Every failure becomes an exception carrying libpdc's line
# (last_error): printed on stderr too, it would say it twice, and say it
# for a NotFound the program catches. PDC_REPORT_ERRORS=1 keeps the lines.
# Set at each connect (not here: the first call loads libpdc's core, and a
# process forked after that gets a core of its own, with the default).
report_errors = 1 if os.environ.get("PDC_REPORT_ERRORS") == "1" else 0

_libc = ctypes.CDLL(None)
free = _libc.free
free.argtypes = [c_void_p]
free.restype = None


def last_error() -> str:
    buf = ctypes.create_string_buffer(1024)
    n = lib.pdc_last_error(buf, len(buf))
    if n >= len(buf):
        buf = ctypes.create_string_buffer(n + 1)
        lib.pdc_last_error(buf, len(buf))
    return buf.value.decode("utf-8", "replace")
