"""Reading a Gram store back: :func:`load_gram`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ParameterError
from .store import GramStore, IncompleteStoreError

__all__ = ["GramMatrix", "load_gram"]


@dataclass
class GramMatrix:
    """A kernel matrix read from a store, with its graph ids.

    Attributes
    ----------
    matrix : ndarray or dask.array.Array
        The full matrix (the Gram matrix of one set is symmetric: its lower blocks are
        the transposes of the stored upper ones).
    ids : list of str
        Row graph ids.
    ids_y : list of str
        Column graph ids (equal to ``ids`` for a Gram matrix).
    meta : dict
        The store's ``mgkflow`` attribute (kernel repr, parameters, digests, layout).
    missing : list of str
        Blocks not computed yet (NaN in ``matrix``; only with ``allow_incomplete=True``).
    """

    matrix: Any
    ids: list[str]
    ids_y: list[str]
    meta: dict
    missing: list[str]

    def __iter__(self):
        """``K, ids = load_gram(path)``."""
        return iter((self.matrix, self.ids))


def load_gram(
    path: str | os.PathLike,
    lazy: bool = False,
    normalize: bool = False,
    allow_incomplete: bool = False,
) -> GramMatrix:
    """Read a kernel matrix written by :func:`mgkflow.gram.tiled_gram` (``mgkflow gram ... --out K.zarr``).

    Parameters
    ----------
    path : path-like
        The Zarr store.
    lazy : bool
        Return a Dask array (chunks = blocks; nothing read until computed) instead of
        a numpy array.
    normalize : bool
        Return K(G, G') / sqrt(K(G, G) K(G', G')) (Gram matrices of one set only: a
        cross matrix does not hold the diagonals it needs).
    allow_incomplete : bool
        Read a store whose run has not finished (missing blocks are NaN); by default
        that raises :class:`~mgkflow.gram.store.IncompleteStoreError`.

    Raises
    ------
    mgkflow.errors.ParameterTypeError
        ``path`` is not a path, or ``lazy``, ``normalize``, ``allow_incomplete`` not True or False.
    mgkflow.io.PathNotFoundError
        ``path`` does not exist or is not a Zarr store (a ``FileNotFoundError`` too).
    mgkflow.errors.FileFormatError
        ``path`` is not an mgkflow Gram store.

    Returns
    -------
    GramMatrix
        ``.matrix`` and ``.ids`` (it unpacks as ``K, ids``), ``.ids_y``, ``.meta``.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> from pathlib import Path
    >>> from mgkflow import MarginalizedGraphKernel
    >>> from mgkflow.datasets import molecules
    >>> from mgkflow.gram import tiled_gram
    >>> gs = molecules(5, seed=2, max_atoms=10)
    >>> kern = MarginalizedGraphKernel(q=0.2, backend="cpu")
    >>> path = Path(tempfile.mkdtemp()) / "K.zarr"
    >>> _ = tiled_gram(gs, kernel=kern, out=path, block_size=2)
    >>> K, ids = load_gram(path)
    >>> ids[:2], bool(np.array_equal(K, kern(gs)))
    (['mol-0', 'mol-1'], True)
    >>> float(load_gram(path, lazy=True, normalize=True).matrix[1, 1].compute())
    1.0
    """
    from ..io._args import as_path, check_flag

    path = as_path(path, "path")
    lazy = check_flag("lazy", lazy)
    normalize = check_flag("normalize", normalize)
    allow_incomplete = check_flag("allow_incomplete", allow_incomplete)
    store = GramStore.read(path)
    meta = store.meta
    blocks = store.blocks()
    done = store.done()
    missing = [b.key for b in blocks if b.key not in done]
    if missing and not allow_incomplete:
        raise IncompleteStoreError(
            f"{path}: {len(missing)} of {len(blocks)} blocks are not computed yet (first: {missing[0]}); "
            "run the same command again to finish it, or pass allow_incomplete=True (missing blocks read as NaN)"
        )
    symmetric = bool(meta["symmetric"])
    if normalize and not symmetric:
        raise ParameterError(
            f"normalize=True: {path} holds a cross matrix X x Y; normalizing needs K(G, G) of both sets (not stored)"
        )
    n, m = (int(v) for v in meta["shape"])
    B = int(meta["block_size"])
    arr = store.array
    ids = list(meta["ids"])
    ids_y = ids if symmetric else list(meta["ids_y"])
    if lazy:
        import dask.array as da

        A = da.from_zarr(arr)
        if symmetric:
            bi = da.arange(n, chunks=B) // B
            A = da.where(bi[:, None] > bi[None, :], A.T, A)
        if normalize:
            d = da.sqrt(da.diagonal(A))
            A = A / (d[:, None] * d[None, :])
        return GramMatrix(A, ids, ids_y, meta, missing)
    K = np.asarray(arr[...])
    if symmetric:
        for r0 in range(B, n, B):  # fill the blocks left of the diagonal from their mirror images
            r1 = min(r0 + B, n)
            K[r0:r1, :r0] = K[:r0, r0:r1].T
    if normalize:
        d = np.sqrt(np.diagonal(K)).astype(K.dtype)
        K = K / np.outer(d, d)
    return GramMatrix(K, ids, ids_y, meta, missing)
