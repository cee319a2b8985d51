"""Checks and array work behind :class:`mgkflow.graph.Graph` (numpy and scipy only; no Graph import).

The validation of label fields and weights and the CSR arrays of the ``Graph`` constructors and of
:meth:`~mgkflow.graph.Graph.permute`: functions that take and return arrays, so that ``graph.py``
holds the class and its documentation, and converters such as :mod:`mgkflow.io.networkx` share the
checks without importing :mod:`mgkflow.graph`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np
import scipy.sparse as sp

from .errors import GraphError, ParameterTypeError, describe_graph


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    if a.flags.writeable:
        a.setflags(write=False)
    return a


_INT64_MAX = np.iinfo(np.int64).max
_INT64_MIN = np.iinfo(np.int64).min
_EXACT_FLOAT_INT = 2**53  # integers above this are not all representable as float64


def _is_number(v: Any) -> bool:
    return isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating))


def _object_labels(values: Any, arr: np.ndarray, name: str, kind: str, who: str) -> np.ndarray:
    """Convert an object array of python scalars exactly (int64 or float64) or raise."""
    flat = arr.ravel()
    if not all(_is_number(v) for v in flat):
        bad = next(v for v in flat if not _is_number(v))
        raise GraphError(
            f"{who}: {kind} label field '{name}' must be numeric (int, float or bool), "
            f"got {type(bad).__name__} {bad!r}; encode categorical labels as integers"
        )
    if all(isinstance(v, (bool, int, np.bool_, np.integer)) for v in flat):
        big = [v for v in flat if not (_INT64_MIN <= int(v) <= _INT64_MAX)]
        if big:
            raise GraphError(
                f"{who}: {kind} label field '{name}' holds integer {int(big[0])} outside the int64 range; "
                "encode such labels as smaller integers"
            )
        return np.asarray([int(v) for v in flat], dtype=np.int64).reshape(arr.shape)
    _check_no_inexact_ints(flat, name, kind, who)
    return np.asarray([float(v) for v in flat], dtype=np.float64).reshape(arr.shape)


def _check_no_inexact_ints(flat: Any, name: str, kind: str, who: str) -> None:
    for v in flat:
        if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and abs(int(v)) > _EXACT_FLOAT_INT:
            raise GraphError(
                f"{who}: {kind} label field '{name}' mixes floats with integer {int(v)} > 2**53, "
                "which float64 cannot hold exactly (distinct labels would merge); use all integers or all floats"
            )


def _as_label_array(values: Any, name: str, kind: str, size: int, who: str) -> np.ndarray:
    """Validate one label field: shape (size,) int64/float64, or (size, d) float64 vectors."""
    try:
        arr = np.asarray(values)
    except (ValueError, TypeError) as exc:
        seq = [isinstance(v, list | tuple | np.ndarray) for v in values] if isinstance(values, list | tuple) else []
        if any(seq) and not all(seq):
            k, j = seq.index(False), seq.index(True)
            raise GraphError(
                f"{who}: {kind} label field '{name}' mixes numbers and sequences (entry {k} is "
                f"{values[k]!r}, entry {j} is {values[j]!r}); a field holds scalars or vectors of one length"
            ) from exc
        raise GraphError(
            f"{who}: {kind} label field '{name}' is ragged or not array-like "
            f"(vector labels need the same length d for every entry): {exc}"
        ) from exc
    if arr.ndim == 0 or arr.ndim > 2 or arr.shape[0] != size or (arr.ndim == 2 and arr.shape[1] == 0):
        raise GraphError(
            f"{who}: {kind} label field '{name}' has shape {arr.shape}, expected ({size},) "
            f"or ({size}, d) for vector labels"
        )
    if arr.dtype == bool:
        arr = arr.astype(np.int64)
    if arr.dtype == object:
        arr = _object_labels(values, arr, name, kind, who)
    if arr.dtype.kind == "u" and arr.size and arr.max() > _INT64_MAX:
        raise GraphError(
            f"{who}: {kind} label field '{name}' holds integer {int(arr.max())} >= 2**63, "
            "outside the int64 range; encode such labels as smaller integers"
        )
    if arr.dtype.kind in "fu" and arr.ndim == 1 and not isinstance(values, np.ndarray):
        # a python list of ints beyond int64, or mixing ints and floats: numpy would round silently
        arr = _object_labels(values, np.asarray(list(values), dtype=object), name, kind, who)
    if arr.dtype.kind not in "iuf":
        raise GraphError(
            f"{who}: {kind} label field '{name}' must be numeric (int, float or bool), "
            f"got dtype {arr.dtype}; encode categorical labels as integers"
        )
    if arr.ndim == 2:
        arr = arr.astype(np.float64)  # vector labels (coordinates, descriptors) are real vectors
    elif arr.dtype.kind in "iu":
        return arr.astype(np.int64)
    if not np.all(np.isfinite(arr)):
        raise GraphError(f"{who}: {kind} label field '{name}' holds NaN or infinite values")
    return arr.astype(np.float64)


def _as_weights(values: Any, what: str, who: str) -> np.ndarray:
    """Edge weights as float64, refusing strings, bytes, complex and other non-numbers."""
    try:
        arr = np.asarray(values)
    except (ValueError, TypeError) as exc:
        raise GraphError(f"{who}: {what} is not a numeric array: {exc}") from exc
    if arr.dtype == object:
        bad = [v for v in arr.ravel() if not (v is None or _is_number(v))]
        if bad:
            raise GraphError(f"{who}: {what} holds {type(bad[0]).__name__} {bad[0]!r}; expected numbers")
        arr = np.asarray([np.nan if v is None else float(v) for v in arr.ravel()], dtype=np.float64).reshape(arr.shape)
    if arr.dtype.kind not in "biuf":
        raise GraphError(f"{who}: {what} has dtype {arr.dtype}; expected real numbers (not text or complex)")
    return arr.astype(np.float64)


def frozen_csr(adj: sp.csr_array) -> sp.csr_array:
    """``adj`` with its data, indices and indptr arrays made read-only (in place)."""
    for a in (adj.data, adj.indices, adj.indptr):
        if a.flags.writeable:
            a.setflags(write=False)
    return adj


def frozen_fields(fields: Mapping[str, np.ndarray]) -> MappingProxyType:
    """A read-only mapping of read-only, contiguous label arrays."""
    return MappingProxyType({k: _frozen(v) for k, v in fields.items()})


def csr_from_matrices(
    adjacency: Any, edge_labels: Mapping[str, Any] | None, who: str
) -> tuple[sp.csr_array, dict[str, Any]]:
    """CSR adjacency and CSR-aligned edge labels from a (dense or sparse) matrix and label matrices.

    The work of ``Graph(adjacency, ...)``: weights checked as real numbers, duplicates summed,
    entries sorted; each label matrix (sparse, dense (n, n) or (n, n, d)) read at the stored entries.
    ``who`` names the graph in error messages.
    """
    if sp.issparse(adjacency):
        if adjacency.dtype.kind not in "biuf":
            raise GraphError(f"{who}: adjacency has dtype {adjacency.dtype}; weights must be real numbers")
        coo = sp.coo_array(adjacency, dtype=np.float64)
    else:
        dense = _as_weights(adjacency, "adjacency matrix", who)
        if dense.ndim != 2:
            raise GraphError(f"{who}: adjacency must be a 2-D matrix, got shape {dense.shape}")
        coo = sp.coo_array(dense)
    coo.sum_duplicates()
    n = coo.shape[0]
    if coo.shape[0] != coo.shape[1]:
        raise GraphError(f"{who}: adjacency matrix must be square, got {coo.shape}")
    rows, cols = coo.row.astype(np.int64), coo.col.astype(np.int64)
    order = np.lexsort((cols, rows))
    rows, cols, data = rows[order], cols[order], coo.data[order]
    labels = {}
    for name, mat in (edge_labels or {}).items():
        if sp.issparse(mat):
            if mat.shape != coo.shape:
                raise GraphError(f"{who}: edge label field '{name}' has shape {mat.shape}, expected {coo.shape}")
            lab = sp.csr_array(mat)
            vals = np.asarray(lab[rows, cols]).ravel() if len(rows) else np.zeros(0, dtype=lab.dtype)
        else:
            try:
                dense_lab = np.asarray(mat)
            except (ValueError, TypeError) as exc:
                raise GraphError(f"{who}: edge label field '{name}' is ragged or not array-like: {exc}") from exc
            if dense_lab.shape[:2] != coo.shape or dense_lab.ndim not in (2, 3):
                raise GraphError(
                    f"{who}: edge label field '{name}' has shape {dense_lab.shape}, "
                    f"expected {coo.shape} (or {coo.shape + ('d',)} for vector labels)"
                )
            vals = dense_lab[rows, cols]
        labels[name] = vals
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    adj = sp.csr_array((data, cols, indptr), shape=(n, n))
    return adj, labels


def checked_arguments(node_labels: Any, edge_labels: Any, title: Any) -> tuple[dict, Any, str | None]:
    """The label-field mappings (``None`` as empty) and the title of a graph constructor, checked
    for their types: a mapping of field name to values, and text or None."""
    if title is not None and not isinstance(title, str):
        raise ParameterTypeError(f"a graph's title must be text or None, got {type(title).__name__}")
    out = []
    for name, value in (("node_labels", node_labels), ("edge_labels", edge_labels)):
        if value is not None and not isinstance(value, Mapping):
            raise ParameterTypeError(
                f"{describe_graph(None, title)}: {name} must be a mapping of field name to values "
                f"(e.g. {{'label': [...]}}) or None, got {type(value).__name__}"
            )
        out.append({} if value is None else value)
    return out[0], out[1], title


def checked_features(features: Any, who: str) -> np.ndarray | None:
    """A graph's feature vector as a read-only float64 copy (None stays None), or a clear error.

    The vector must be 1-D, non-empty, of real numbers (int, float or bool; not text, bytes or
    complex) that are finite as float64. ``who`` names the graph in messages.
    """
    if features is None:
        return None
    if isinstance(features, str | bytes | Mapping):
        raise ParameterTypeError(
            f"{who}: features must be a 1-D array of real numbers or None, got {type(features).__name__}"
        )
    try:
        arr = np.asarray(features)
    except (ValueError, TypeError) as exc:
        raise GraphError(f"{who}: features are ragged or not array-like: {exc}") from exc
    if arr.ndim != 1:
        raise GraphError(f"{who}: features must be a 1-D array (one value per feature), got shape {arr.shape}")
    if arr.size == 0:
        raise GraphError(f"{who}: features must hold at least one value (use None for no features)")
    if arr.dtype == object:
        bad = [v for v in arr if not _is_number(v)]
        if bad:
            raise GraphError(f"{who}: features hold {type(bad[0]).__name__} {bad[0]!r:.40}; expected real numbers")
        try:
            arr = np.asarray([float(v) for v in arr], dtype=np.float64)
        except OverflowError as exc:
            raise GraphError(f"{who}: features hold a number too large for float64: {exc}") from exc
    if arr.dtype.kind not in "biuf":
        raise GraphError(f"{who}: features have dtype {arr.dtype}; expected real numbers (not text or complex)")
    out = np.array(arr, dtype=np.float64)  # a copy: the caller's array may change later
    if not np.all(np.isfinite(out)):
        k = int(np.flatnonzero(~np.isfinite(out))[0])
        raise GraphError(f"{who}: feature {k} is {out[k]} (features must be finite)")
    return _frozen(out)


def _as_index_array(values: Any, what: str, who: str) -> np.ndarray:
    try:
        arr = np.asarray(values)
        if arr.dtype.kind not in "iu" and not (
            arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))
        ):
            raise TypeError(f"values of kind {arr.dtype.kind!r}")
        return arr.astype(np.int64).ravel()
    except (TypeError, ValueError, OverflowError) as exc:
        raise GraphError(f"{who}: CSR {what} must be whole numbers ({exc})") from exc


def checked_csr(
    indptr: Any, indices: Any, data: Any, n_nodes: int, edge_labels: Mapping[str, Any] | None, who: str
) -> tuple[sp.csr_array, dict[str, np.ndarray]]:
    """CSR adjacency and edge labels for :meth:`mgkflow.graph.Graph.from_csr`, checked.

    Array lengths and index ranges are checked (scipy does not, and bad arrays corrupt memory
    later), unsorted rows are sorted with their labels, and a repeated entry is an error.
    """
    indptr = _as_index_array(indptr, "indptr", who)
    indices = _as_index_array(indices, "indices", who)
    data = _as_weights(data, "CSR data (edge weights)", who).ravel()
    if isinstance(n_nodes, bool) or not isinstance(n_nodes, int | np.integer):
        raise ParameterTypeError(f"{who}: n_nodes must be a whole number, got {n_nodes!r:.40}")
    n_nodes = int(n_nodes)
    # scipy does not check CSR arrays on construction; bad ones corrupt memory later
    if n_nodes < 0 or indptr.shape != (n_nodes + 1,):
        raise GraphError(f"{who}: CSR indptr has {indptr.size} entries, expected n_nodes + 1 = {n_nodes + 1}")
    if indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] != len(indices):
        raise GraphError(f"{who}: CSR indptr must rise from 0 to len(indices) = {len(indices)}")
    if len(data) != len(indices):
        raise GraphError(f"{who}: CSR data has {len(data)} entries, indices {len(indices)}")
    if len(indices) and (indices.min() < 0 or indices.max() >= n_nodes):
        raise GraphError(f"{who}: CSR column index out of range 0..{n_nodes - 1}")
    adj = sp.csr_array((data, indices, indptr), shape=(n_nodes, n_nodes))
    labels = {k: _as_label_array(v, k, "edge", len(data), who) for k, v in (edge_labels or {}).items()}
    if not adj.has_sorted_indices:
        # sort, carrying labels along
        order = np.empty(len(data), dtype=np.int64)
        for r in range(n_nodes):  # rare path (input not sorted)
            s, e = indptr[r], indptr[r + 1]
            order[s:e] = s + np.argsort(indices[s:e], kind="stable")
        adj = sp.csr_array((data[order], indices[order], indptr), shape=(n_nodes, n_nodes))
        labels = {k: v[order] for k, v in labels.items()}
        indices = indices[order]
    dup = np.flatnonzero(indices[1:] == indices[:-1]) + 1
    if dup.size:  # equal neighbours in different rows are fine: drop the positions that start a row
        dup = dup[indptr[np.searchsorted(indptr, dup)] != dup]
    if dup.size:
        k = int(dup[0])
        i = int(np.searchsorted(indptr, k, side="right") - 1)
        raise GraphError(f"{who}: CSR arrays hold entry ({i}, {int(indices[k])}) twice")
    return adj, labels


def _mirror_positions(rows: np.ndarray, cols: np.ndarray, n: int) -> np.ndarray:
    """For each stored entry (i, j) of a row-major sorted CSR matrix without repeated entries, the
    position of the entry (j, i), or -1 where there is none."""
    if not rows.size:
        return np.empty(0, dtype=np.int64)
    key = rows * n + cols  # ascending: rows in order, columns sorted within each row
    want = cols * n + rows
    pos = np.minimum(np.searchsorted(key, want), key.size - 1)
    return np.where(key[pos] == want, pos, -1)


def validated_parts(
    adj: sp.csr_array, node_labels: Mapping[str, Any], edge_labels: Mapping[str, Any], coords: Any, title: str | None
) -> tuple[sp.csr_array, MappingProxyType, MappingProxyType, np.ndarray | None]:
    """The checked, read-only (adjacency, node labels, edge labels, coords) of a graph.

    Weights finite and non-negative, no self loop, explicit zeros dropped (labels carried along),
    symmetric weights and edge labels, label fields and coordinates of the right shapes.
    """
    who = describe_graph(None, title)
    n = adj.shape[0]
    if adj.shape[0] != adj.shape[1]:
        raise GraphError(f"{who}: adjacency matrix must be square, got {adj.shape}")
    if n == 0:
        raise GraphError(f"{who}: empty graph (0 nodes)")
    data = adj.data
    indptr = np.asarray(adj.indptr, dtype=np.int64)
    indices = np.asarray(adj.indices, dtype=np.int64)
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    bad = ~np.isfinite(data) | (data < 0)
    if np.any(bad):
        k = int(np.flatnonzero(bad)[0])
        what = "negative" if data[k] < 0 else "NaN or infinite"
        raise GraphError(
            f"{who}: edge weight between nodes {int(rows[k])} and {int(indices[k])} is {what} ({data[k]}); "
            "edge weights must be finite and non-negative"
        )
    keep = data != 0
    loops = np.flatnonzero((rows == indices) & keep)
    if loops.size:
        raise GraphError(f"{who}: self loop at node {int(rows[loops[0]])}; self loops are not allowed")
    # drop explicit zeros, carrying labels along (numpy on the CSR arrays, which are sorted and
    # without repeated entries: scipy's sparse operations cost more than the checks on a molecule)
    labels = {name: _as_label_array(vals, name, "edge", len(data), who)[keep] for name, vals in edge_labels.items()}
    dropped = not np.all(keep)
    if dropped:
        data, indices, rows = data[keep], indices[keep], rows[keep]
        indptr = np.concatenate(([0], np.cumsum(np.bincount(rows, minlength=n)))).astype(np.int64)
    mirror = _mirror_positions(rows, indices, n)
    # symmetry, relative to each entry pair: |a_ij - a_ji| <= 1e-12 max(a_ij, a_ji) (a missing entry is 0)
    other = np.where(mirror >= 0, data[np.maximum(mirror, 0)], 0.0)
    bad_sym = np.abs(data - other) - 1e-12 * np.maximum(data, other) > 0
    if dropped:
        adj = sp.csr_array((data, indices, indptr), shape=adj.shape)
    adj.indices, adj.indptr = indices, indptr  # int64, whatever scipy chose
    if np.any(bad_sym):
        lo, hi = np.minimum(rows, indices)[bad_sym], np.maximum(rows, indices)[bad_sym]
        first = np.lexsort((hi, lo))[0]  # the first offending entry in row-major order
        i, j = int(lo[first]), int(hi[first])
        raise GraphError(
            f"{who}: adjacency matrix is not symmetric (graphs are undirected): "
            f"entry ({i}, {j}) is {float(adj[i, j])!r} but ({j}, {i}) is {float(adj[j, i])!r}"
        )
    for name, vals in labels.items():
        if not np.array_equal(vals, vals[mirror]):
            raise GraphError(f"{who}: edge label field '{name}' is not symmetric")
    nl = {name: _as_label_array(v, name, "node", n, who) for name, v in node_labels.items()}
    xyz = None
    if coords is not None:
        xyz = _as_weights(coords, "coords", who)  # real numbers only (no text, complex, ragged)
        if xyz.ndim != 2 or xyz.shape[0] != n:
            raise GraphError(f"{who}: coords must have shape (n_nodes, d), got {xyz.shape}")
        if not np.all(np.isfinite(xyz)):
            raise GraphError(f"{who}: coords hold NaN or infinite values")
        xyz = _frozen(xyz)
    return frozen_csr(adj), frozen_fields(nl), frozen_fields(labels), xyz


def permuted_parts(
    adj: sp.csr_array,
    node_labels: Mapping[str, np.ndarray],
    edge_labels: Mapping[str, np.ndarray],
    coords: np.ndarray | None,
    perm: Any,
    title: str | None,
) -> tuple[sp.csr_array, MappingProxyType, MappingProxyType, np.ndarray | None]:
    """The read-only (adjacency, node labels, edge labels, coords) of a graph with nodes reordered.

    ``perm[k]`` is the original index of the node placed at position k (checked to be a
    permutation of 0..n-1); see :meth:`mgkflow.graph.Graph.permute`.
    """
    n = adj.shape[0]
    try:
        perm = np.asarray(list(perm) if not isinstance(perm, np.ndarray) else perm)
    except (TypeError, ValueError) as exc:
        raise ParameterTypeError(
            f"{describe_graph(None, title)}: permutation must be a sequence of {n} integers, "
            f"got {type(perm).__name__} ({exc})"
        ) from exc
    if perm.shape != (n,) or perm.dtype.kind not in "iu":
        raise GraphError(f"{describe_graph(None, title)}: permutation must be {n} integers")
    perm = perm.astype(np.int64)
    if not np.array_equal(np.sort(perm), np.arange(n)):
        raise GraphError(f"{describe_graph(None, title)}: not a permutation of 0..{n - 1}")
    inv = np.empty(n, dtype=np.int64)
    inv[perm] = np.arange(n)
    rows, cols = np.repeat(np.arange(n, dtype=np.int64), np.diff(adj.indptr)), adj.indices  # Graph.coo()
    new_r, new_c = inv[rows], inv[cols]
    order = np.lexsort((new_c, new_r))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(new_r, minlength=n), out=indptr[1:])
    permuted = sp.csr_array((adj.data[order], new_c[order], indptr), shape=(n, n))
    return (
        frozen_csr(permuted),
        frozen_fields({k: v[perm] for k, v in node_labels.items()}),
        frozen_fields({k: v[order] for k, v in edge_labels.items()}),
        None if coords is None else _frozen(coords[perm]),
    )
