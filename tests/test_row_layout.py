"""The row-pair layout's host side: each row's entries in spread_order, unit weights in the kernel config."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mgkflow.gpu.pack import weights_all_one
from mgkflow.gpu.source import kernel_source, label_macros, make_config
from mgkflow.gpu.strategies.row_pair import row_arrays, spread_order
from mgkflow.graph import Graph
from mgkflow.kernels import Constant, KroneckerDelta, SquareExponential
from mgkflow.system import prepare_graph


def _tile_conflicts(rows: list[list[int]]) -> int:
    """Extra shared-memory passes of one 8-row tile: per position, the largest count of distinct columns
    that share a residue mod 8, less one (0 when every column differs mod 8 or coincides)."""
    extra = 0
    for pos in range(max(len(r) for r in rows)):
        cols = {r[pos] for r in rows if pos < len(r)}
        extra += max(np.bincount([c & 7 for c in cols], minlength=8)) - 1
    return extra


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 63), max_size=12, unique=True), min_size=1, max_size=24))
def test_spread_order_permutes_within_rows_and_never_adds_conflicts(rows: list[list[int]]) -> None:
    rows = [sorted(r) for r in rows]
    n = len(rows)
    row_len = np.array([len(r) for r in rows], dtype=np.int64)
    row_start = np.cumsum(row_len) - row_len
    cols = np.array([c for r in rows for c in r], dtype=np.int64)
    tile_rows = np.append(np.arange(0, n, 8), n)
    order = spread_order(tile_rows, row_start, row_len, cols)
    new = [cols[order[s : s + k]].tolist() for s, k in zip(row_start, row_len, strict=True)]
    assert [sorted(r) for r in new] == rows  # a permutation within each row
    for t in range(0, n, 8):
        before, after = rows[t : t + 8], new[t : t + 8]
        if any(before):
            assert _tile_conflicts(after) <= _tile_conflicts(before)


def test_spread_order_separates_a_tile_whose_rows_collide() -> None:
    # row u of a tile holds columns 8u .. 8u + 7: in column order position k holds 8 distinct columns of
    # residue k (7 extra passes each); the spread order gives every position 8 residues
    rows = [sorted(8 * u + (c % 8) for c in range(8)) for u in range(8)]  # row u: columns 8u .. 8u+7
    row_len = np.full(8, 8)
    order = spread_order(np.array([0, 8]), np.arange(0, 64, 8), row_len, np.array(sum(rows, [])))
    cols = np.array(sum(rows, []))[order]
    new = [cols[8 * u : 8 * u + 8].tolist() for u in range(8)]
    assert _tile_conflicts(rows) == 8 * 7 and _tile_conflicts(new) == 0


def test_row_arrays_keep_each_entry_with_its_weight_and_labels() -> None:
    rng = np.random.default_rng(3)
    A = np.triu((rng.random((20, 20)) < 0.4) * rng.uniform(1, 2, (20, 20)), 1)
    L = np.triu(rng.integers(1, 5, (20, 20)), 1)
    g = Graph(A + A.T, edge_labels={"order": L + L.T})
    s = prepare_graph(g, 0, Constant(1.0), KroneckerDelta(0.5, "order"))
    rows = row_arrays([s], ["order"], np.float64)
    Ad = s.graph.adjacency.toarray()
    Ld = s.graph.edge_labels["order"]
    csr = s.graph.adjacency
    lab = {}
    for i in range(20):
        for k in range(csr.indptr[i], csr.indptr[i + 1]):
            lab[i, int(csr.indices[k])] = Ld[k]
    ptr, coff = rows["rrowptr"], rows["rcoff"]
    for i in range(20):
        for k in range(ptr[i], ptr[i + 1]):
            j = (int(coff[k]) >> 6) * 8 + (int(coff[k]) & 7)
            assert rows["rweight"][k] == Ad[i, j]
            assert rows["relab"][k] == np.int32(lab[i, j]).view(np.uint32)
        assert ptr[i + 1] - ptr[i] == csr.indptr[i + 1] - csr.indptr[i]


def test_unit_weights_drop_the_weight_loads() -> None:
    def system(w: float):
        return prepare_graph(Graph(np.array([[0, 1, 0], [1, 0, w], [0, w, 0]])), 0, Constant(1.0), Constant(1.0))

    assert weights_all_one([system(1.0)]) and not weights_all_one([system(1.0), system(3.0)])
    ek = SquareExponential(1.0, "length")
    unit = make_config(Constant(1.0), ek, unit_weight=True)
    assert unit.unit_weight and unit != make_config(Constant(1.0), ek)
    assert not make_config(Constant(1.0), ek, weight_double=True, unit_weight=True).unit_weight
    assert "#define UNIT_W 1" in label_macros(unit)
    assert "#define UNIT_W 0" in label_macros(make_config(Constant(1.0), ek))
    assert "LOAD_W(weight, kb)" in kernel_source(unit)
