"""python3 -m pdc import|export: what `pdc import` and `pdc export` run.

    python3 -m pdc import run.h5[:/particles/x] [--container C] [--name OBJ]
    python3 -m pdc import a.npy [--container C] [--name OBJ]
    python3 -m pdc export OBJ out.h5 [--dataset /x]
    python3 -m pdc export OBJ out.npy

Copies go in chunks of rows (--chunk-bytes, default 64 MiB), so files and
objects larger than memory copy in bounded memory. HDF5 attributes become
tags and tags attributes. Record 0027 says why the command line goes
through this package.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Any, Optional, Sequence

import numpy as np

import pdc

_HDF5 = (".h5", ".hdf5", ".he5", ".hdf")
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gib": 1 << 30}


def _size(s: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", s)
    if not m or m.group(2).lower() not in _UNITS or int(m.group(1)) < 1:
        raise argparse.ArgumentTypeError(f"{s!r}: want a size such as 4MiB, 65536 or 1GiB")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def _kind(path: str) -> str:
    low = path.lower()
    if low.endswith(".npy"):
        return "npy"
    if low.endswith(_HDF5):
        return "hdf5"
    raise pdc.Invalid(f"pdc: {path}: want a .npy file or an HDF5 file ({', '.join(_HDF5)})")


def _split(src: str) -> tuple[str, Optional[str]]:
    """FILE[:/DATASET]: the last ':' followed by a '/' splits (a path may hold ':')."""
    i = src.rfind(":/")
    if i > 0 and not os.path.exists(src):
        return src[:i], src[i + 1:]
    return src, None


def _chunks(shape: Sequence[int], itemsize: int, chunk_bytes: int) -> int:
    step = pdc._rows(shape, itemsize, chunk_bytes)
    return -(-shape[0] // step)


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def cmd_import(a: argparse.Namespace, out: Any) -> None:
    path, dataset = _split(a.src)
    kind = _kind(path)
    if not os.path.exists(path):
        raise pdc.NotFound(f"pdc: {path}: no such file")
    if kind == "npy" and dataset:
        raise pdc.Invalid(f"pdc: {a.src}: a .npy file holds one array; drop :{dataset}")
    stem = os.path.splitext(os.path.basename(path))[0]
    with pdc.connect(tmpdir=a.tmpdir) as conn:
        cont = conn.create_container(a.container or stem)
        if kind == "npy":
            obj = pdc.from_npy(cont, a.name or stem, path, chunk_bytes=a.chunk_bytes)
            _said_import(out, path, obj, cont, a.chunk_bytes, 0)
            return
        import h5py

        with h5py.File(path, "r") as f:
            if dataset:
                names = [dataset]
            else:
                names = []
                f.visititems(lambda n, o: names.append("/" + n) if isinstance(o, h5py.Dataset) else None)
                if not names:
                    raise pdc.NotFound(f"pdc: {path}: holds no datasets")
            if a.name and len(names) > 1:
                raise pdc.Invalid(f"pdc: {path} holds {len(names)} datasets; --name names one: give FILE:/DATASET")
            skipped_all = []
            for ds in names:
                if ds not in f:
                    raise pdc.NotFound(f"pdc: {path}: no dataset {ds}")
                skipped = [k for k, v in f[ds].attrs.items() if isinstance(v, np.ndarray) and v.ndim > 0]
                skipped_all += skipped
        for ds in names:
            obj = pdc.from_hdf5(path, ds, cont, a.name or ds.lstrip("/"), chunk_bytes=a.chunk_bytes)
            _said_import(out, f"{path}:{ds}", obj, cont, a.chunk_bytes, len(obj.tags.keys()))
        if skipped_all:
            print(f"  attributes not copied (arrays; tags hold scalars): {', '.join(sorted(set(skipped_all)))}", file=out)


def _said_import(out: Any, src: str, obj: pdc.Object, cont: pdc.Container, chunk: int, ntags: int) -> None:
    shape = obj.shape
    n = int(np.prod(shape)) * obj.dtype.itemsize
    print(f"imported {src} as object {obj.name} in container {cont.name}: {shape} {obj.dtype}, "
          f"{_mib(n)} in {_chunks(shape, obj.dtype.itemsize, chunk)} chunks, {ntags} tags", file=out)


def cmd_export(a: argparse.Namespace, out: Any) -> None:
    kind = _kind(a.dst)
    with pdc.connect(tmpdir=a.tmpdir) as conn:
        obj = conn.object(a.obj)
        keys = obj.tags.keys()
        shape = obj.shape
        if kind == "npy":
            if a.dataset:
                raise pdc.Invalid(f"pdc: {a.dst}: a .npy file has no datasets; drop --dataset")
            if os.path.exists(a.dst) and not a.force:
                raise pdc.Exists(f"pdc: {a.dst}: already exists (--force replaces it)")
            obj.to_npy(a.dst, chunk_bytes=a.chunk_bytes)
            where, ntags = a.dst, 0
        else:
            dataset = a.dataset or "/" + obj.name
            if a.force and os.path.exists(a.dst):
                import h5py

                with h5py.File(a.dst, "a") as f:
                    if dataset in f:
                        del f[dataset]
            obj.to_hdf5(a.dst, dataset, tags=keys, chunk_bytes=a.chunk_bytes)
            where, ntags = f"{a.dst}:{dataset}", len(keys)
        n = int(np.prod(shape)) * obj.dtype.itemsize
        print(f"exported object {obj.name} to {where}: {shape} {obj.dtype}, {_mib(n)} in "
              f"{_chunks(shape, obj.dtype.itemsize, a.chunk_bytes)} chunks, {ntags} tags as attributes", file=out)
        if kind == "npy" and keys:
            print(f"  tags not written (.npy has no attributes): {', '.join(sorted(keys))}", file=out)


def main(argv: Optional[Sequence[str]] = None, prog: str = "python3 -m pdc") -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:  # pdc bench python's side (not a user command)
        from ._bench import main as bench

        try:
            return bench(argv[1:])
        except pdc.Error as err:
            print(f"{prog} bench python: {err}", file=sys.stderr)
            return 1
    p = argparse.ArgumentParser(prog=prog, description="Copy HDF5 datasets and .npy files into pdc objects and back.")
    sub = p.add_subparsers(dest="cmd", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--tmpdir", help="where the server list is (default $PDC_TMPDIR, else ./pdc_tmp)")
    common.add_argument("--chunk-bytes", type=_size, default=64 << 20, metavar="SIZE",
                        help="copy this much at a time, in whole rows (default 64MiB)")
    i = sub.add_parser("import", parents=[common], help="FILE.h5[:/DATASET] or FILE.npy into an object",
                       description="Creates an object from an HDF5 dataset (every dataset of the file if none "
                                   "is named; scalar attributes become tags) or a .npy file.")
    i.add_argument("src", metavar="FILE[:/DATASET]")
    i.add_argument("--container", help="the container (created if missing; default the file's name without extension)")
    i.add_argument("--name", help="the object's name (default the dataset's path, or the .npy file's name)")
    e = sub.add_parser("export", parents=[common], help="an object into FILE.h5 or FILE.npy",
                       description="Writes an object to an HDF5 dataset (its tags as attributes) or a .npy file.")
    e.add_argument("obj", metavar="OBJECT")
    e.add_argument("dst", metavar="FILE")
    e.add_argument("--dataset", help="the HDF5 dataset (default /OBJECT); the file is created or added to")
    e.add_argument("--force", action="store_true", help="replace an existing .npy file or dataset")
    a = p.parse_args(argv)
    try:
        (cmd_import if a.cmd == "import" else cmd_export)(a, sys.stdout)
    except pdc.Error as err:
        print(f"{prog} {a.cmd}: {err}", file=sys.stderr)
        return 1
    except ImportError as err:
        print(f"{prog} {a.cmd}: {err}: HDF5 files need h5py (Debian: apt-get install python3-h5py)", file=sys.stderr)
        return 1
    except (OSError, ValueError, KeyError) as err:
        print(f"{prog} {a.cmd}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(prog=os.environ.get("PDC_PROG", "python3 -m pdc")))
