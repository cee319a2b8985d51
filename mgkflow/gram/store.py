"""The on-disk Gram matrix: a Zarr array with one chunk per block, and done markers.

Layout of ``K.zarr`` (a Zarr v3 array on the local file system)::

    K.zarr/zarr.json        array metadata; attribute "mgkflow": ids, kernel, digests
    K.zarr/c/BI/BJ          chunk of block (BI, BJ): only blocks on or above the diagonal
    K.zarr/done/BI.BJ.json  done marker of block (BI, BJ), written after its chunk is on disk

A block is recorded as done only once its data is durable: the chunk is written (Zarr
writes a temporary file and renames it), the file and its directory are fsync'ed, then
the marker is written the same way (temporary file, fsync, rename, fsync of ``done/``).
A run killed at any moment leaves every block either done (chunk and marker) or not
done (maybe a chunk without a marker, recomputed on resume). Blocks not yet written
read as NaN (the fill value).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .._version import __version__
from ..errors import FileFormatError, MgkflowError
from ..io._common import PathNotFoundError
from ..io._files import check_writable
from .blocks import Block, plan_blocks
from .digest import params_digest

__all__ = ["GramStore", "StoreMismatchError", "StoreExistsError", "IncompleteStoreError", "FORMAT", "FORMAT_VERSION"]

FORMAT = "mgkflow.gram"
FORMAT_VERSION = 1
DONE_DIR = "done"


class StoreMismatchError(MgkflowError, ValueError):
    """An existing store was made for other graphs, another kernel or other parameters."""


class IncompleteStoreError(MgkflowError, ValueError):
    """A store is read before all of its blocks were computed."""


class StoreExistsError(MgkflowError, ValueError):
    """The output path exists and may not be resumed into or replaced."""


def _fsync_path(path: Path, directory: bool = False) -> None:
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return  # e.g. directories on platforms that cannot open them
    try:
        os.fsync(fd)
    except OSError:
        pass  # file systems without fsync on directories
    finally:
        os.close(fd)


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".tmp-{uuid.uuid4().hex}-{path.name}.part")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_path(path.parent, directory=True)


def block_checksum(values: np.ndarray) -> str:
    """BLAKE2b digest (64 bits) of a block's stored values."""
    import hashlib

    return hashlib.blake2b(np.ascontiguousarray(values).data, digest_size=8).hexdigest()


class GramStore:
    """A kernel matrix being written to (or read from) a Zarr store, block by block.

    Use :meth:`open` (create, or resume into, a store) or :meth:`read` (an existing one);
    :func:`mgkflow.gram.tiled_gram` and :func:`mgkflow.load_gram` do so for you.

    Attributes
    ----------
    path : Path
    meta : dict
        The ``mgkflow`` attribute of the array: ``symmetric``, ``shape``, ``block_size``,
        ``dtype``, ``ids``, ``ids_y``, ``kernel`` (repr), ``params``, ``digests``,
        ``fingerprint``, ``n_blocks``, ``mgkflow_version``.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> meta = dict(symmetric=True, shape=[3, 3], block_size=2, dtype="float64", ids=["a", "b", "c"],
    ...             ids_y=None, kernel="k", params={}, digests={"graphs_x": "0"})
    >>> st = GramStore.open(Path(tempfile.mkdtemp()) / "K.zarr", meta)
    >>> [b.key for b in st.missing_blocks()]
    ['0.0', '0.1', '1.1']
    >>> st.write_block(st.blocks()[0], np.ones((2, 2)), {"run": "doc"})["block"]
    '0.0'
    >>> [b.key for b in st.missing_blocks()]
    ['0.1', '1.1']
    """

    def __init__(self, path: str | os.PathLike, meta: Mapping[str, Any], array: Any = None) -> None:
        self.path = Path(path)
        self.meta = dict(meta)
        self._array = array

    # ------------------------------------------------------------------ open
    @staticmethod
    def fingerprint(meta: Mapping[str, Any]) -> str:
        """Digest of everything a stored value depends on (graphs, ids, kernel, layout)."""
        parts = {k: meta["digests"][k] for k in sorted(meta["digests"])}
        parts.update(
            shape=meta["shape"], block_size=meta["block_size"], dtype=meta["dtype"], symmetric=meta["symmetric"]
        )
        return params_digest(parts)

    @classmethod
    def read(cls, path: str | os.PathLike, mode: str = "r") -> GramStore:
        """Open an existing store.

        Raises :class:`~mgkflow.io.PathNotFoundError` (a ``FileNotFoundError``) when ``path`` does not
        exist or holds no ``zarr.json``, and :class:`~mgkflow.errors.FileFormatError` (a ``ValueError``)
        when it is not an mgkflow Gram store.
        """
        import zarr

        path = Path(path)
        if not path.exists():
            raise PathNotFoundError(f"{path}: no such Gram store (write one with mgkflow gram ... --out {path.name})")
        if not (path / "zarr.json").is_file():
            raise PathNotFoundError(f"{path} is not a Zarr store (no zarr.json)")
        try:
            arr = zarr.open_array(store=str(path), mode=mode)
        except Exception as exc:  # noqa: BLE001 - zarr raises several types for foreign stores
            raise FileFormatError(f"not a Zarr array: {exc}", path=path) from exc
        meta = arr.attrs.get("mgkflow")
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise FileFormatError("a Zarr array but not an mgkflow Gram store (no 'mgkflow' attribute)", path=path)
        if int(meta.get("format_version", 0)) > FORMAT_VERSION:
            raise FileFormatError(
                f"written by a newer mgkflow (store format {meta['format_version']}, "
                f"this version reads {FORMAT_VERSION})", path=path,
            )
        return cls(path, meta, arr)

    @classmethod
    def open(
        cls, path: str | os.PathLike, meta: Mapping[str, Any], resume: bool = True, overwrite: bool = False
    ) -> GramStore:
        """Create the store for ``meta``, or resume into an existing one made for the same work.

        Parameters
        ----------
        path : path-like
            Directory of the Zarr array (``K.zarr``).
        meta : mapping
            Keys ``symmetric, shape, block_size, dtype, ids, ids_y, kernel, params, digests``.
        resume : bool
            Resume into an existing store made with the same graphs, kernel and layout
            (its done blocks are kept). False: refuse an existing store.
        overwrite : bool
            Delete an existing mgkflow Gram store at ``path`` first.

        Raises
        ------
        StoreMismatchError
            The existing store was made for other graphs, ids, kernel parameters, block
            size, dtype or shape (the message names which).
        StoreExistsError
            ``path`` exists and ``resume`` and ``overwrite`` are both False, or it is not
            an mgkflow Gram store (never deleted).
        mgkflow.errors.OutputPathError
            ``path`` cannot be created (under a file, a name too long, a directory not writable).
        """
        import zarr

        path = Path(path)
        meta = dict(meta)
        meta.update(format=FORMAT, format_version=FORMAT_VERSION, mgkflow_version=__version__)
        shape = [int(v) for v in meta["shape"]]
        bs = int(meta["block_size"])
        meta["n_blocks"] = len(plan_blocks(shape[0], None if meta["symmetric"] else shape[1], bs))
        meta["fingerprint"] = cls.fingerprint(meta)
        if path.exists():
            try:
                old = cls.read(path, mode="r+")
            except (FileNotFoundError, ValueError) as exc:
                if path.is_dir() and not any(path.iterdir()):
                    path.rmdir()
                    return cls.open(path, meta, resume=resume, overwrite=False)
                raise StoreExistsError(
                    f"{path} exists and is not an mgkflow Gram store ({exc}); choose another output path"
                ) from None
            if overwrite:
                shutil.rmtree(path)
                return cls.open(path, meta, resume=resume, overwrite=False)
            if not resume:
                raise StoreExistsError(f"{path} exists; resume into it or pass overwrite=True to start again")
            old.check_same(meta)
            old.clean_partial()
            return old
        check_writable(path, "Gram store")  # under a file, name too long, directory not writable: OutputPathError
        arr = zarr.create_array(
            store=str(path),
            shape=tuple(shape),
            chunks=(bs, bs),
            dtype=meta["dtype"],
            fill_value=np.nan,
            attributes={"mgkflow": meta},
            compressors=None,  # kernel values barely compress (5-13% measured); raw chunks write faster
            config={"write_empty_chunks": True},
        )
        (path / DONE_DIR).mkdir(exist_ok=True)
        _fsync_path(path, directory=True)
        return cls(path, meta, arr)

    def check_same(self, meta: Mapping[str, Any]) -> None:
        """Raise :class:`StoreMismatchError` unless ``meta`` describes the same work as this store."""
        if meta["fingerprint"] == self.meta.get("fingerprint"):
            return
        old, what = self.meta, []
        names = {
            "graphs_x": "graphs (X)",
            "graphs_y": "graphs (Y)",
            "ids": "graph ids",
            "params": "kernel parameters",
        }
        for key, label in names.items():
            if old["digests"].get(key) != meta["digests"].get(key):
                if key == "params":
                    diff = [f"{k}: {old['params'].get(k)} -> {meta['params'].get(k)}" for k in sorted(meta["params"])
                            if old["params"].get(k) != meta["params"].get(k)]
                    label += f" ({'; '.join(diff)})" if diff else ""
                what.append(label)
        for key in ("shape", "block_size", "dtype", "symmetric"):
            if list(np.atleast_1d(old[key])) != list(np.atleast_1d(meta[key])):
                what.append(f"{key} {old[key]} -> {meta[key]}")
        raise StoreMismatchError(
            f"{self.path} holds another computation ({', '.join(what) or 'fingerprint'} differ); "
            "refusing to resume into it: use another output path or delete it (overwrite=True in Python)"
        )

    def clean_partial(self) -> None:
        """Remove temporary files a killed run may have left (Zarr's ``*.partial``, markers' ``.tmp-*``)."""
        for p in self.path.rglob("*.partial"):
            p.unlink(missing_ok=True)
        for p in (self.path / DONE_DIR).glob(".tmp-*"):
            p.unlink(missing_ok=True)

    # ------------------------------------------------------------------ blocks
    @property
    def array(self) -> Any:
        """The Zarr array (opened on first use in each process)."""
        if self._array is None:
            import zarr

            self._array = zarr.open_array(store=str(self.path), mode="r+")
        return self._array

    def __getstate__(self) -> dict:
        return {"path": self.path, "meta": self.meta, "_array": None}

    def blocks(self) -> list[Block]:
        n, m = self.meta["shape"]
        return plan_blocks(n, None if self.meta["symmetric"] else m, int(self.meta["block_size"]))

    def done(self) -> dict[str, dict]:
        """Markers of the finished blocks, by block key; unreadable markers count as not done."""
        out = {}
        d = self.path / DONE_DIR
        if not d.is_dir():
            return out
        for p in d.glob("*.json"):
            try:
                rec = json.loads(p.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(rec, dict) and rec.get("block") == p.stem:
                out[p.stem] = rec
        return out

    def missing_blocks(self) -> list[Block]:
        done = self.done()
        return [b for b in self.blocks() if b.key not in done]

    def write_block(self, block: Block, values: np.ndarray, info: Mapping[str, Any]) -> dict:
        """Write a block's values durably, then its done marker (``info`` + checksum); returns the marker."""
        arr = self.array
        vals = np.ascontiguousarray(values, dtype=np.dtype(self.meta["dtype"]))
        if vals.shape != block.shape:
            raise ValueError(f"block {block.key}: values of shape {vals.shape}, expected {block.shape}")
        arr[block.r0 : block.r1, block.c0 : block.c1] = vals
        chunk = self.path / arr.metadata.encode_chunk_key((block.bi, block.bj))
        _fsync_path(chunk)
        _fsync_path(chunk.parent, directory=True)
        rec = {
            "block": block.key,
            "checksum": block_checksum(vals),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            **info,
        }
        _atomic_write_bytes(self.path / DONE_DIR / f"{block.key}.json", json.dumps(rec).encode())
        return rec

    def read_block(self, block: Block) -> np.ndarray:
        return np.asarray(self.array[block.r0 : block.r1, block.c0 : block.c1])
