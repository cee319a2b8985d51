"""validated_parts (numpy on the CSR arrays) against the same checks written with scipy's sparse operations."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from mgkflow import GraphError
from mgkflow._graph_checks import checked_csr, validated_parts


def _reference(adj: sp.csr_array, labels: dict) -> tuple[sp.csr_array, dict] | str:
    """The checks as scipy's sparse algebra states them: (adjacency, labels), or the error's text."""
    data = adj.data
    if np.any(~np.isfinite(data) | (data < 0)):
        return "weight"
    if np.any(adj.diagonal() != 0):
        return f"self loop at node {int(np.flatnonzero(adj.diagonal())[0])}"
    keep = data != 0
    labels = {k: v[keep] for k, v in labels.items()}
    if not np.all(keep):
        coo = adj.tocoo()
        adj = sp.csr_array((data[keep], (coo.row[keep], coo.col[keep])), shape=adj.shape)
    excess = (abs(adj - adj.T) - 1e-12 * adj.maximum(adj.T)).tocoo()
    bad = excess.data > 0
    if np.any(bad):
        k = int(np.flatnonzero(bad)[0])
        return f"entry ({int(excess.row[k])}, {int(excess.col[k])}) is"
    pos = sp.csr_array((np.arange(1, adj.nnz + 1, dtype=np.float64), adj.indices, adj.indptr), shape=adj.shape)
    mirror = pos.T.tocsr()
    mirror.sort_indices()
    idx = mirror.data.astype(np.int64) - 1
    for name, v in labels.items():
        if not np.array_equal(v, v[idx]):
            return f"edge label field '{name}' is not symmetric"
    return adj, labels


@st.composite
def _matrices(draw):
    n = draw(st.integers(1, 7))
    dense = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            if draw(st.booleans()):
                dense[i, j] = dense[j, i] = draw(st.sampled_from([0.0, 1.0, 2.5]))
    for _ in range(draw(st.integers(0, 2))):  # a few perturbations: asymmetry, loops, zeros
        i, j = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        dense[i, j] = draw(st.sampled_from([0.0, 1.0, 1.0 + 1e-13, 1.0 + 1e-9, 3.0]))
    mask = (dense != 0) | (np.triu(np.ones((n, n)), 1) * draw(st.booleans()) > 0)  # explicit zeros too
    rows, cols = np.nonzero(mask)
    label = np.array([min(i, j) * 10 + max(i, j) for i, j in zip(rows, cols)], dtype=np.int64)
    if draw(st.booleans()) and label.size:
        label[draw(st.integers(0, label.size - 1))] += 1  # maybe no longer symmetric
    indptr = np.concatenate(([0], np.cumsum(np.bincount(rows, minlength=n))))
    return indptr, cols, dense[rows, cols], n, {"bond": label}


@settings(max_examples=300, deadline=None, derandomize=True)
@given(_matrices())
def test_validated_parts_agrees_with_the_sparse_algebra(case):
    indptr, indices, data, n, labels = case
    adj, lab = checked_csr(indptr, indices, data, n, labels, "g")
    ref = _reference(sp.csr_array((adj.data.copy(), adj.indices.copy(), adj.indptr.copy()), shape=adj.shape),
                     {k: v.copy() for k, v in lab.items()})  # fmt: skip
    if isinstance(ref, str):
        with pytest.raises(GraphError, match=ref.replace("(", r"\(").replace(")", r"\)")):
            validated_parts(adj, {}, lab, None, "g")
        return
    got, _, got_labels, _ = validated_parts(adj, {}, lab, None, "g")
    want, want_labels = ref
    want.sort_indices()
    assert got.indices.dtype == got.indptr.dtype == np.int64
    np.testing.assert_array_equal(got.indptr, want.indptr)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_array_equal(got.data, want.data)
    np.testing.assert_array_equal(got_labels["bond"], want_labels["bond"])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.lists(st.integers(0, 5), max_size=4), min_size=1, max_size=6))
def test_checked_csr_refuses_an_entry_held_twice_in_a_row_only(rows):
    n = max(6, len(rows))
    rows = rows + [[] for _ in range(n - len(rows))]
    indices = [c for r in rows for c in sorted(r)]
    indptr = np.concatenate(([0], np.cumsum([len(r) for r in rows])))
    twice = [(i, c) for i, r in enumerate(rows) for c in sorted(set(r)) if r.count(c) > 1]
    if twice:
        with pytest.raises(GraphError, match=rf"entry \({twice[0][0]}, {twice[0][1]}\) twice"):
            checked_csr(indptr, indices, np.ones(len(indices)), n, None, "g")
    else:
        adj, _ = checked_csr(indptr, indices, np.ones(len(indices)), n, None, "g")
        assert adj.nnz == len(indices)
