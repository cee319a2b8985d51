"""Tables of the staged wide XMV (mgkflow.gpu.strategies.staged) and its numpy emulation (no GPU needed)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mgkflow.backends.exact import _offdiag_operator
from mgkflow.format import pack_batch
from mgkflow.gpu.emulate import from_blocked, to_blocked, xmv_blocked, xmv_staged
from mgkflow.gpu.strategies.staged import StagedG2, staged_g2
from mgkflow.graph import Graph
from mgkflow.kernels import Constant, KroneckerDelta, SquareExponential
from mgkflow.system import prepare_graph


def _graph(n: int, p: float, seed: int) -> Graph:
    rng = np.random.default_rng(seed)
    G = nx.gnp_random_graph(n, p, seed=seed)
    for e in G.edges:
        G.edges[e]["length"] = float(rng.uniform(1, 2))
        G.edges[e]["order"] = int(rng.integers(1, 3))
        G.edges[e]["weight"] = float(np.float32(rng.uniform(0.5, 2)))
    for v in G.nodes:
        G.nodes[v]["label"] = int(v % 3)
    return Graph.from_networkx(G, node_labels=["label"], edge_labels=["length", "order"])


def _check_tables(t: StagedG2, graph: Graph) -> None:
    """Every nonzero sits in exactly one slot of a thread of its row; groups tile the rows."""
    A = graph.adjacency.tocsr()
    n = A.shape[0]
    nt = -(-n // 8)
    g = t.groups
    assert g[:, 0].tolist() == np.concatenate([[0], np.cumsum(g[:, 1])[:-1]]).tolist()  # consecutive rows
    assert int(g[:, 1].sum()) == 8 * nt
    assert (g[:, 3] <= t.block).all() and int(g[:, 3].sum()) == t.n_threads
    deg = np.diff(A.indptr)
    # greedy: a group ends only where its next row's threads would not fit (column sets of these
    # small graphs never reach MAX_GROUP_COLS, the other reason to close a group)
    for row0, nrows, _, nthreads, *_rest in g.tolist()[:-1]:
        next_thr = -(-deg[row0 + nrows] // t.slots) if row0 + nrows < n else 0
        assert nthreads + next_thr > t.block
    seen = np.zeros((n, n), dtype=np.int64)
    for row0, nrows, thread0, nthreads, col0, ncol, rt0, _ in g.tolist():
        cset = t.colset[col0 : col0 + ncol]
        assert (np.diff(cset) > 0).all()
        rt = t.row_thread[rt0 : rt0 + nrows + 1]
        assert rt[0] == 0 and rt[-1] == nthreads and (np.diff(rt) >= 0).all()
        for k in range(nrows):
            row = row0 + k
            for th in range(thread0 + rt[k], thread0 + rt[k + 1]):
                for sl in range(t.slots):
                    w = t.slot_weight[sl, th]
                    if w == 0:
                        continue
                    c = int(cset[t.slot_col[sl, th] >> 3]) * 8 + int(t.slot_col[sl, th] & 7)
                    assert row < n and c < n
                    assert w == np.float32(A[row, c])
                    seen[row, c] += 1
    assert (seen == (A.toarray() != 0)).all()
    assert t.nnz == A.nnz and 0 < t.fill() <= 1


@pytest.mark.parametrize("n,p,slots,block", [(9, 0.6, 4, 32), (40, 0.3, 3, 64), (70, 0.2, 8, 64), (5, 0.0, 8, 32)])
def test_tables_hold_every_nonzero_once(n, p, slots, block) -> None:
    g = _graph(n, p, n)
    t = staged_g2(pack_batch([g]).graph(0), slots=slots, block=block)
    _check_tables(t, g)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 60), p=st.floats(0.0, 0.9), slots=st.integers(1, 9), block=st.sampled_from([8, 16, 64, 256]),
       seed=st.integers(0, 10_000))  # fmt: skip
def test_tables_property(n, p, slots, block, seed) -> None:
    g = _graph(n, p, seed)
    try:
        t = staged_g2(pack_batch([g]).graph(0), slots=slots, block=block)
    except ValueError as exc:  # a tile row that needs more threads than a block
        assert "more than a block" in str(exc)
        assert (-(-np.diff(g.adjacency.indptr) // slots)).max() > block
        return
    _check_tables(t, g)


def test_too_many_columns_or_threads_raise() -> None:
    g = Graph.from_networkx(nx.complete_graph(64))
    og = pack_batch([g]).graph(0)
    with pytest.raises(ValueError, match="more than a block"):
        staged_g2(og, slots=1, block=32)  # a row of 63 nonzeros needs 63 threads
    with pytest.raises(ValueError, match="column tiles"):
        staged_g2(og, slots=8, block=256, max_cols=4)


@pytest.mark.parametrize(
    "edge_kernel",
    [Constant(1.0), SquareExponential(1.0, "length"), KroneckerDelta(0.3, "order") * SquareExponential(0.7, "length")],
    ids=repr,
)
@pytest.mark.parametrize(
    "sizes,slots,block", [((13, 21), 8, 256), ((30, 41), 3, 64), ((3, 17), 3, 32), ((50, 9), 8, 64)]
)
def test_staged_xmv_matches_cpu(edge_kernel, sizes, slots, block) -> None:
    n, m = sizes
    g1, g2 = _graph(n, 0.3, n), _graph(m, 0.25, m + 100)
    nk = KroneckerDelta(0.5, "label")
    s1, s2 = prepare_graph(g1, 0, nk, edge_kernel), prepare_graph(g2, 1, nk, edge_kernel)
    fields = list(edge_kernel.fields)
    b = pack_batch([s1, s2], node_fields=["label"], edge_fields=fields)
    t = staged_g2(b.graph(1), fields, slots=slots, block=block)
    mv, _ = _offdiag_operator(s1, s2, edge_kernel, False)
    X = np.random.default_rng(0).standard_normal((n, m))
    nt1, nt2 = -(-n // 8), -(-m // 8)
    side1 = {"rowptr": b.rowptr, "tile_col": b.tile_col, "bitmap": b.bitmap, "toff": b.offset, "weight": b.weight,
             "labels": {f: b.edge_labels[f] for f in fields}}  # fmt: skip
    side2 = {"groups": t.groups, "colset": t.colset, "row_thread": t.row_thread, "slot_col": t.slot_col,
             "slot_w": t.slot_weight, "labels": {}}  # fmt: skip
    for k, f in enumerate(fields):
        words = t.slot_labels[k]
        side2["labels"][f] = words.view(np.int32) if b.edge_labels[f].dtype.kind == "i" else words.view(np.float32)
    ek = edge_kernel if fields else None
    scale = 1.0 if fields else edge_kernel.c
    ref = mv(X)
    pb = to_blocked(X, nt1, nt2)
    y = xmv_staged(side1, int(b.rowptr_offset[0]), nt1, side2, nt2, pb, ek, single=False)
    # exactly the octile emulation on the same packed (float32) labels ...
    np.testing.assert_allclose(y, xmv_blocked(b, 0, 1, pb, ek), rtol=1e-12, atol=1e-12 * np.abs(y).max())
    # ... and the CPU operator (float64 labels) up to the label rounding, also with float32 products
    y32 = xmv_staged(side1, int(b.rowptr_offset[0]), nt1, side2, nt2, pb, ek, single=True)
    for v in (y, y32):
        np.testing.assert_allclose(from_blocked(v * scale, n, m, nt2), ref, rtol=0, atol=1e-5 * np.abs(ref).max())
