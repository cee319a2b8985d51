"""Kernel matrices of many small index sets of one input list, the graph kernels' pairs solved together.

The local correction of :class:`~mgkflow.learn.lowrank.LowRankGPR` needs, for every prediction, the
kernel matrix of the point and its k nearest training inputs: thousands of (k + 1) × (k + 1) matrices over
one training set. Calling the kernel on each set prepares and packs its k + 1 graphs every time (about
0.2 ms a graph and view on an H100's host: most of a prediction's time, ``mgkflow/gpu/NOTES.md`` S25-F).
:func:`set_grams` walks the kernel's tree instead. Every marginalized graph kernel in it solves the upper
triangles of many sets as one pair list over Z (:meth:`~mgkflow.MarginalizedGraphKernel.pair_values`,
Z's graphs prepared and packed once for all the calls on the same Z), and the rest of the tree combines
those values set by set: scikit-learn's ``Sum``, ``Product``, ``ConstantKernel`` and ``WhiteKernel`` (its
noise on each set's diagonal, as in ``kernel(Z[set])``), mgkflow's :class:`~.cached.Cached`,
:class:`~.exp_similarity.ExpSimilarity`, :class:`~.normalized.Normalized` and the vector kernel of a
:class:`~.feature_kernel.FeatureKernel` on Z's features. Any other kernel is called on each set's inputs.

Examples
--------
>>> import numpy as np
>>> from sklearn.gaussian_process.kernels import RBF, WhiteKernel
>>> Z = np.arange(5.0)[:, None]
>>> k = RBF(2.0) + WhiteKernel(0.1)
>>> sets = np.array([[0, 1, 4], [3, 2, 0]])
>>> [(r, G.shape) for r, G in set_grams(k, Z, sets)]
[(0, (2, 3, 3))]
>>> G = next(set_grams(k, Z, sets))[1]
>>> bool(np.allclose(G[1], k(Z[[3, 2, 0]])))
True
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import ConstantKernel, Product, Sum, WhiteKernel

from ..errors import ParameterError
from ..mgk import MarginalizedGraphKernel
from .cached import Cached
from .contract import _take
from .exp_similarity import ExpSimilarity
from .feature_kernel import FeatureKernel, _features
from .normalized import Normalized

__all__ = ["set_grams"]

#: pairs a graph kernel solves in one call (values: 8 bytes a pair and graph kernel, kept for the call's sets)
MAX_PAIRS = 2**24
#: entries of one (sets × s × s) array of the walk (8 bytes each)
MAX_ENTRIES = 2**22


def _graph_kernels(k: Any, out: list) -> list:
    """The marginalized graph kernels the walk reaches (through the kernels it knows), each once."""
    if isinstance(k, Sum | Product):
        _graph_kernels(k.k1, out)
        _graph_kernels(k.k2, out)
    elif isinstance(k, Cached | ExpSimilarity | Normalized):
        _graph_kernels(k.kernel, out)
    elif isinstance(k, MarginalizedGraphKernel) and not any(k is o for o in out):
        out.append(k)
    return out


class _Walk:
    """One batch of sets: the graph kernels' solved triangles and the other leaves' inputs."""

    def __init__(self, Z: Any, sets: np.ndarray, triangles: dict, features: dict) -> None:
        self.Z, self.sets, self.triangles = Z, sets, triangles
        self.s = sets.shape[1]
        self.iu, self.ju = np.triu_indices(self.s)
        self.features = features  # a FeatureKernel's feature rows of Z, made once for every batch

    def block(self, k: Any) -> Any:
        """The (sets × s × s) kernel matrices of k (a number for a constant)."""
        if isinstance(k, Sum):
            return self.block(k.k1) + self.block(k.k2)
        if isinstance(k, Product):
            return self.block(k.k1) * self.block(k.k2)
        if isinstance(k, ConstantKernel):
            return float(k.constant_value)
        if isinstance(k, WhiteKernel):
            return float(k.noise_level) * np.eye(self.s)
        if isinstance(k, Cached):
            return self.block(k.kernel)
        if isinstance(k, ExpSimilarity):
            return np.exp(k._check() * (self.block(k.kernel) - 1.0))
        if isinstance(k, Normalized):
            G = np.asarray(self.block(k.kernel), dtype=np.float64)
            d = np.einsum("bii->bi", G) if G.ndim == 3 else np.full((len(self.sets), self.s), float(G))
            if not np.all(d > 0):
                raise ParameterError("Normalized: k(x, x) must be positive")
            s = np.sqrt(d)
            return G / (s[:, :, None] * s[:, None, :])
        if isinstance(k, MarginalizedGraphKernel):
            tri = self.triangles[id(k)]
            G = np.empty((len(self.sets), self.s, self.s))
            G[:, self.iu, self.ju] = tri
            G[:, self.ju, self.iu] = tri
            return G
        if isinstance(k, FeatureKernel):
            F = self.features.get(id(k))
            if F is None:
                F = self.features[id(k)] = k._checked(_features(self.Z))
            return np.stack([np.asarray(k.kernel(F[S]), dtype=np.float64) for S in self.sets])
        return np.stack([np.asarray(k(_take(self.Z, S)), dtype=np.float64) for S in self.sets])


def _checked_sets(sets: Any, n: int) -> np.ndarray:
    arr = np.asarray(sets)
    if arr.ndim != 2 or arr.shape[1] < 1 or arr.dtype.kind not in "iu":
        raise ParameterError(f"sets must be a 2-D array of integer indices, got {arr.dtype} {arr.shape}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and (arr.min() < 0 or arr.max() >= n):
        raise ParameterError(f"sets index outside the {n} inputs of Z")
    return arr


def set_grams(
    kernel: Any, Z: Any, sets: Any, max_pairs: int = MAX_PAIRS, max_entries: int = MAX_ENTRIES
) -> Iterator[tuple[int, np.ndarray]]:
    """Yield ``(r, G)`` with ``G[i] = kernel(Z[sets[r + i]])`` (float64, sets × s × s) for every row of ``sets``.

    Parameters
    ----------
    kernel : scikit-learn kernel
        Any kernel; the parts named in the module docstring are evaluated pair-wise, the others per set.
    Z : sequence
        The inputs (graphs, or rows of an array) the sets index.
    sets : array of int, shape (n_sets, s)
        Each row the indices of one kernel matrix's inputs, in its order.
    max_pairs : int
        How many pairs a graph kernel solves in one call (its values are kept for those sets).
    max_entries : int
        The size of the blocks yielded (rows × s × s, at least one row).

    Yields
    ------
    r : int
        The row of ``sets`` of ``G[0]``.
    G : ndarray of shape (rows, s, s)
    """
    sets = _checked_sets(sets, len(Z))
    n_sets, s = sets.shape
    graph_kernels = _graph_kernels(kernel, [])
    tri = s * (s + 1) // 2
    per_call = max(1, int(max_pairs) // tri)
    per_block = max(1, int(max_entries) // (s * s))
    iu, ju = np.triu_indices(s)
    features: dict = {}
    for c0 in range(0, n_sets, per_call):
        chunk = sets[c0 : c0 + per_call]
        triangles = {}
        if graph_kernels:
            pairs = np.stack([chunk[:, iu].ravel(), chunk[:, ju].ravel()], axis=1)
            for g in graph_kernels:
                triangles[id(g)] = g.pair_values(Z, pairs).reshape(len(chunk), tri)
            del pairs
        for b0 in range(0, len(chunk), per_block):
            part = {key: t[b0 : b0 + per_block] for key, t in triangles.items()}
            walk = _Walk(Z, chunk[b0 : b0 + per_block], part, features)
            G = np.broadcast_to(np.asarray(walk.block(kernel), dtype=np.float64), (len(walk.sets), s, s))
            yield c0 + b0, np.array(G)
