"""The row-pair XMV's loads of P from shared memory, mirrored on the host: wavefronts per warp request.

In the per-block solver's row-pair XMV (``xmv_row_pair.cuh``), lane ``l`` of a warp owns output
``(x, u) = (l // 8, l % 8)`` of a tile pair (then ``(7 - x, 7 - u)``) and walks row ``8 I + x`` of G1
against row ``8 I2 + u`` of G2: at trip ``(s, t)`` it loads the double of P at G1's ``s``-th column ``a``
and G2's ``t``-th column ``b`` (in the layout's order within the rows, :func:`~mgkflow.gpu.strategies.
row_pair.row_arrays`), at the blocked address ``((a // 8) * nt2 + b // 8) * 64 + (a % 8) * 8 + b % 8``.
Lanes past the end of either row idle. Shared memory serves a request in wavefronts of 32 four-byte banks:
equal addresses are one broadcast, distinct addresses on the same bank take a wavefront each, so a warp's
32 distinct doubles take at least 2. :func:`load_wavefronts` counts requests and wavefronts over a pair's
tile pairs, the model that ``python -m mgkflow.bench banks`` runs on the paper workloads (ncu's "bank
conflicts" of the resident kernel are these, mgkflow/gpu/NOTES.md, session 24).

Examples
--------
>>> import numpy as np
>>> wavefronts(np.arange(32))  # 32 consecutive doubles: two wavefronts
2
>>> wavefronts(np.zeros(32, np.int64))  # one address: a broadcast
1
>>> wavefronts(16 * np.arange(4))  # four doubles 128 bytes apart share their banks
4
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["wavefronts", "layout_rows", "load_wavefronts"]

#: Four-byte banks of the shared memory.
BANKS = 32


def wavefronts(doubles: np.ndarray) -> int:
    """Wavefronts of one warp request of 64-bit shared loads at ``doubles`` (double addresses, one per
    active lane): the most distinct 4-byte words on one bank (0 for no lane)."""
    d = np.unique(np.asarray(doubles, dtype=np.int64))
    if not d.size:
        return 0
    words = np.concatenate([2 * d, 2 * d + 1])
    return int(np.bincount(words % BANKS, minlength=BANKS).max())


def layout_rows(arrays: dict[str, np.ndarray], g: int, n_nodes: int) -> list[np.ndarray]:
    """The columns of each row of graph ``g`` (``n_nodes`` nodes, padded to whole tiles) in the order the
    kernel walks them, from :func:`~mgkflow.gpu.strategies.row_pair.row_arrays`' ``rrowptr``,
    ``rcoff`` (blocked offsets: tile << 6 | column % 8) and ``rrow_off``."""
    side = 8 * (-(-n_nodes // 8))
    off = int(arrays["rrow_off"][g])
    ptr = arrays["rrowptr"][off : off + side + 1].astype(np.int64)
    coff = arrays["rcoff"].astype(np.int64)
    cols = (coff >> 6) * 8 + (coff & 7)
    return [cols[ptr[i] : ptr[i + 1]] for i in range(side)]


def load_wavefronts(
    rows1: Sequence[np.ndarray], rows2: Sequence[np.ndarray], max_tile_pairs: int | None = None
) -> tuple[int, int]:
    """(requests, wavefronts) of the P loads of one XMV pass over the tile pairs of graphs with rows
    ``rows1`` (G1) and ``rows2`` (G2) (each a multiple of 8 rows: :func:`layout_rows`), the first
    ``max_tile_pairs`` of them if given, both outputs of every lane.

    Examples
    --------
    >>> import numpy as np
    >>> ring = [np.array([(i - 1) % 8, (i + 1) % 8]) for i in range(8)]  # one tile: an 8-cycle
    >>> load_wavefronts(ring, ring)  # 2 outputs x 2 x 2 trips; distinct residues: 2 wavefronts each
    (8, 16)
    >>> star = [np.array([1, 2, 3])] + [np.array([0])] * 7  # a hub and seven leaves: few distinct addresses
    >>> load_wavefronts(star, star)  # each request on distinct banks: one wavefront
    (12, 12)
    >>> g2 = [np.array([8 * u + 1]) for u in range(8)] + [np.array([], np.int64)] * 56
    >>> load_wavefronts([np.array([0])] * 8, g2)  # G2's rows at column 1 of 8 tiles: 8 addresses, one bank
    (2, 16)
    """
    nt1, nt2 = len(rows1) // 8, len(rows2) // 8
    lanes = np.arange(32)
    rx, ru = lanes >> 3, lanes & 7
    requests = waves = 0
    done = 0
    for i1 in range(nt1):
        for i2 in range(nt2):
            if max_tile_pairs is not None and done >= max_tile_pairs:
                return requests, waves
            done += 1
            for xs, us in ((rx, ru), (7 - rx, 7 - ru)):
                ra = [rows1[8 * i1 + x] for x in xs]
                rb = [rows2[8 * i2 + u] for u in us]
                la = np.array([r.size for r in ra])
                lb = np.array([r.size for r in rb])
                for s in range(int(la.max())):
                    on_s = la > s
                    for t in range(int(lb[on_s].max())):
                        act = np.flatnonzero(on_s & (lb > t))
                        if not act.size:
                            continue
                        a = np.array([ra[k][s] for k in act])
                        b = np.array([rb[k][t] for k in act])
                        d = ((a >> 3) * nt2 + (b >> 3)) * 64 + (a & 7) * 8 + (b & 7)
                        requests += 1
                        waves += wavefronts(d)
    return requests, waves
