"""fork.py LIBPDC: libpdc in processes that Python's multiprocessing forks.

The parent loads libpdc with ctypes, connects and makes a container, then
hands work to a pool of forked workers (the default start method on Linux,
as PyTorch's data loaders use): each connects anew and writes objects. The
parent reads them all back. Then the same with spawned workers.
"""

import ctypes
import multiprocessing
import os
import sys

SIZE = 4096
u64 = ctypes.c_uint64
lib = None


def load(path):
    global lib
    lib = ctypes.CDLL(path)
    lib.PDCinit.restype = u64
    lib.PDCinit.argtypes = [ctypes.c_char_p]
    lib.PDCclose.argtypes = [u64]
    lib.PDCprop_create.restype = u64
    lib.PDCprop_create.argtypes = [ctypes.c_int, u64]
    lib.PDCcont_create.restype = u64
    lib.PDCcont_create.argtypes = [ctypes.c_char_p, u64]
    lib.PDCcont_open.restype = u64
    lib.PDCcont_open.argtypes = [ctypes.c_char_p, u64]
    lib.PDCcont_close.argtypes = [u64]
    lib.PDCobj_put_data.restype = u64
    lib.PDCobj_put_data.argtypes = [ctypes.c_char_p, ctypes.c_void_p, u64, u64]
    lib.PDCobj_open.restype = u64
    lib.PDCobj_open.argtypes = [ctypes.c_char_p, u64]
    lib.PDCobj_get_data.argtypes = [u64, ctypes.c_void_p, u64]
    lib.PDCobj_close.argtypes = [u64]


def payload(name):
    return bytes((i * 131 + len(name) + sum(name.encode())) % 251 for i in range(SIZE))


def work(args):
    path, run, name = args
    if lib is None:  # a spawned worker starts without it
        load(path)
    pdc = lib.PDCinit(b"pdc")
    assert pdc != 0, "worker %d: PDCinit failed" % os.getpid()
    cont = lib.PDCcont_open(run.encode(), pdc)
    assert cont != 0, "worker %d: PDCcont_open(%s) failed" % (os.getpid(), run)
    data = payload(name)
    obj = lib.PDCobj_put_data(name.encode(), data, len(data), cont)
    assert obj != 0, "worker %d: PDCobj_put_data(%s) failed" % (os.getpid(), name)
    assert lib.PDCobj_close(obj) == 0
    assert lib.PDCcont_close(cont) == 0 and lib.PDCclose(pdc) == 0
    return os.getpid()


def check(pdc, name):
    obj = lib.PDCobj_open(name.encode(), pdc)
    assert obj != 0, "parent: PDCobj_open(%s) failed" % name
    buf = ctypes.create_string_buffer(SIZE)
    assert lib.PDCobj_get_data(obj, buf, SIZE) == 0, "parent: get_data(%s)" % name
    assert buf.raw == payload(name), "parent: %s differs" % name
    assert lib.PDCobj_close(obj) == 0


def main():
    path = os.path.abspath(sys.argv[1])
    load(path)
    run = "pyfork-%d" % os.getpid()
    pdc = lib.PDCinit(b"pdc")
    assert pdc != 0, "parent: PDCinit failed"
    cont = lib.PDCcont_create(run.encode(), lib.PDCprop_create(0, pdc))
    assert cont != 0, "parent: PDCcont_create failed"
    for method in ("fork", "spawn"):
        names = ["%s-%s-%d" % (run, method, i) for i in range(8)]
        with multiprocessing.get_context(method).Pool(3) as pool:
            pids = pool.map(work, [(path, run, n) for n in names])
        assert os.getpid() not in pids
        for n in names:
            check(pdc, n)
        print("fork.py: %d objects from %d %s workers read back" % (len(names), len(set(pids)), method))
    assert lib.PDCcont_close(cont) == 0 and lib.PDCclose(pdc) == 0


if __name__ == "__main__":
    main()
