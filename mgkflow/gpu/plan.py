"""Which pairs of a GPU call go to which launch (no PyCUDA needed: tested on CPU).

:class:`~mgkflow.gpu.backend.GPUBackend` splits the pairs of a call into:

* **wide** pairs, solved one at a time by the whole device (:mod:`mgkflow.gpu.solvers.wide`):
  every pair when ``wide=True``; with ``"auto"``, the big pairs (``products >=
  wide_min_products``) when there are fewer of them than SMs, plus any pair whose
  one-block scratch would not fit in the memory budget;
* **tiny** pairs (at most ``tiny_unknowns`` product unknowns, P in shared memory), run in
  ``small_block``-thread blocks, many per SM;
* **resident** size bins (value solves, ``resident_per_entry`` given: P, R and A in shared memory,
  no solution vector): two, up to half and up to all of the shared-memory capacity (either may be
  empty; the second runs one large block per SM);
* **shared** size bins (P, and A, in shared memory), up to a quarter, half and all of the
  shared-memory capacity, so that small pairs run at higher occupancy;
* **global**: the rest (every product vector in global memory).

Every pair lands in exactly one group; no group is empty.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["LaunchPlan", "plan_launches", "scratch_doubles", "waves", "GLOBAL_VECTORS", "WAVE_MIN_PAIRS"]

#: Product-vector doubles per entry always kept in global memory by the per-pair kernel: X, R, DG, DI.
GLOBAL_VECTORS = 4
#: Calls of at least this many pairs are routed and launched in waves (:func:`waves`).
WAVE_MIN_PAIRS = 1 << 18


def waves(npairs: int) -> list[tuple[int, int]]:
    """Index ranges in which a call's pairs are routed and launched: the device starts on a wave while
    the host routes the next. Calls of at least :data:`WAVE_MIN_PAIRS` pairs go in five waves that grow
    threefold from a sixty-fourth (1/64, 3/64, 9/64, 27/64, the rest): the first launch waits for the
    routing of a sixty-fourth of the pairs only, and each wave is routed in less time than the device
    takes on the one before (on the H100 machine, routing takes ~25 ns per pair plus a few ms per wave,
    the device ~200 ns per drug pair). Smaller calls go in one.

    Examples
    --------
    >>> waves(1000)
    [(0, 1000)]
    >>> waves(1 << 20)
    [(0, 16384), (16384, 65536), (65536, 212992), (212992, 655360), (655360, 1048576)]
    """
    if npairs < WAVE_MIN_PAIRS:
        return [(0, npairs)]
    cuts = [0] + [npairs * k // 64 for k in (1, 4, 13, 40)] + [npairs]
    return [(lo, hi) for lo, hi in zip(cuts[:-1], cuts[1:], strict=True) if hi > lo]


@dataclass
class LaunchPlan:
    """Pair indices per launch group (see the module docstring)."""

    wide: np.ndarray
    tiny: np.ndarray
    shared: list[np.ndarray] = field(default_factory=list)
    global_: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    resident: list[np.ndarray] = field(default_factory=list)

    def groups(self) -> list[np.ndarray]:
        """The per-block launch groups, none empty: tiny, resident bins, shared bins, global."""
        return [g for g in (self.tiny, *self.resident, *self.shared, self.global_) if g.size]

    def subset(self, rest: np.ndarray) -> LaunchPlan:
        """This plan of the pairs ``rest`` of a call, its indices mapped back to the call's."""
        return LaunchPlan(wide=rest[self.wide], tiny=rest[self.tiny], shared=[rest[s] for s in self.shared],
                          global_=rest[self.global_], resident=[rest[s] for s in self.resident])  # fmt: skip


def scratch_doubles(N: np.ndarray, fits_smem: np.ndarray, a_in_shared: bool, a_bytes: int) -> np.ndarray:
    """Global scratch (in doubles) one block needs for a pair of ``N`` product unknowns."""
    N = np.asarray(N, dtype=np.int64)
    a_words = (N * a_bytes + 7) // 8
    return np.where(
        fits_smem,
        GLOBAL_VECTORS * N + (0 if a_in_shared else a_words),
        (GLOBAL_VECTORS + 1) * N + a_words,
    )


def plan_launches(
    N: np.ndarray,
    products: np.ndarray,
    *,
    per_entry: int,
    smem_cap: int,
    budget: int,
    n_sm: int,
    wide: bool | str = "auto",
    wide_min_products: float = 1e7,
    small_block: int = 128,
    tiny_unknowns: int = 16 * 64,
    a_in_shared: bool = True,
    a_bytes: int = 4,
    resident_per_entry: int = 0,
    resident_min_unknowns: int = 0,
) -> LaunchPlan:
    """Split pairs into launch groups.

    Parameters
    ----------
    N : int array
        Product unknowns of each pair (tile pairs x 64).
    products : float array
        Nonzero products per XMV of each pair (nnz1 * nnz2).
    per_entry : int
        Shared-memory bytes per product unknown when P (and A) live there.
    smem_cap : int
        Dynamic shared memory available to one block (bytes).
    budget : int
        Global scratch memory for all blocks of a launch (bytes).
    n_sm : int
        Streaming multiprocessors of the device.
    wide : {"auto", True, False}
        See the module docstring.
    wide_min_products, small_block, tiny_unknowns, a_in_shared, a_bytes :
        Thresholds and storage settings (``small_block=0``: no tiny group).
    resident_per_entry : int
        Shared-memory bytes per product unknown of the resident solver (value solves: P, R, A;
        gradient solves: both systems' vectors); 0: no resident bins (nodal solves).
    resident_min_unknowns : int
        Pairs with fewer unknowns stay out of the resident bins (gradient solves: only pairs that
        take more than half an SM's shared memory run resident).

    Returns
    -------
    LaunchPlan

    Examples
    --------
    >>> p = plan_launches(np.array([1024, 9216, 10**7]), np.array([1e4, 1e6, 1e9]), per_entry=12,
    ...                   smem_cap=200_000, budget=10**9, n_sm=132)
    >>> p.wide.tolist(), p.tiny.tolist(), [s.tolist() for s in p.shared], p.global_.tolist()
    ([2], [0], [[1]], [])
    >>> p = plan_launches(np.array([1024, 9216, 16384, 10**7]), np.array([1e4, 1e6, 1e6, 1e9]), per_entry=12,
    ...                   smem_cap=200_000, budget=10**9, n_sm=132, resident_per_entry=20)
    >>> [s.tolist() for s in p.resident], [s.tolist() for s in p.shared]
    ([[], [1]], [[2]])
    """
    N = np.asarray(N, dtype=np.int64)
    products = np.asarray(products, dtype=np.float64)
    n = N.size
    fits_smem = N * per_entry <= smem_cap
    if wide is True:
        is_wide = np.ones(n, dtype=bool)
    elif wide is False:
        is_wide = np.zeros(n, dtype=bool)
    elif wide == "auto":
        big = products >= wide_min_products
        is_wide = big if big.sum() < n_sm else np.zeros(n, dtype=bool)
        # pairs whose one-block scratch exceeds the budget (none when the largest fits: skip the per-pair pass)
        if n and 8 * int(scratch_doubles(np.array([N.max()]), np.array([False]), a_in_shared, a_bytes)[0]) > budget:
            is_wide = is_wide | (8 * scratch_doubles(N, fits_smem, a_in_shared, a_bytes) > budget)
    else:
        raise ValueError(f"wide must be True, False or 'auto', got {wide!r}")
    rest = ~is_wide
    small = fits_smem & rest
    tiny = small & (N <= tiny_unknowns) if small_block else np.zeros(n, dtype=bool)
    small &= ~tiny
    resident = []
    if resident_per_entry:  # two bins, either may be empty: up to half, and up to all of the capacity
        fits = small & (N * resident_per_entry <= smem_cap) & (N >= resident_min_unknowns)
        small &= ~fits
        half = N * resident_per_entry <= smem_cap // 2
        resident = [np.flatnonzero(fits & half), np.flatnonzero(fits & ~half)]
    shared = []
    lo = 0
    for bound in (smem_cap // 4, smem_cap // 2, smem_cap):
        sel = np.flatnonzero(small & (N * per_entry > lo) & (N * per_entry <= bound))
        if sel.size:
            shared.append(sel)
        lo = bound
    return LaunchPlan(
        wide=np.flatnonzero(is_wide),
        tiny=np.flatnonzero(tiny),
        shared=shared,
        global_=np.flatnonzero(rest & ~fits_smem),
        resident=resident,
    )
