"""How many threads the host passes of a kernel call use (numba ``parallel=True`` loops).

The passes that move a call's per-pair results (:mod:`mgkflow.gpu.moves`) and assemble K, dK
or their contractions (:mod:`mgkflow.evaluation.assemble`) are memory-bound and short (a few
milliseconds for 10⁵ pairs). In a Gaussian process's fit they run between BLAS calls, and
OpenBLAS keeps its threads spinning for a while after each call: a numba region on every core
then waits for threads the scheduler has parked behind the spinning ones. Measured on the H200
machine (16 cores, session 14, ``mgkflow/gpu/NOTES.md``): one ``MolecularGPR(fit_graph_kernel=True)``
fit on FreeSolv took 56–59 s with the passes on all 16 threads, 14–16 s on 2 to 8, 20 s on 1; a
warm K + dK step alone (no BLAS between) took 15–17 ms on 8 or 16 threads, 19 ms on 4, 25–29 ms
on 2. The passes therefore run on :data:`HOST_PASS_THREADS` threads, and on at most half of
numba's threads (never on every core). A short pass runs on fewer: one thread for every
:data:`ITEMS_PER_THREAD` items it moves (``items``), since waking a thread costs about as much as one moves
in that time (a labeled NWS Gram of 12,880 pairs: `gpu/NOTES.md`, session 32).

Examples
--------
>>> import numba
>>> before = numba.get_num_threads()
>>> with host_threads():
...     inside = numba.get_num_threads()
>>> inside <= HOST_PASS_THREADS, numba.get_num_threads() == before
(True, True)
>>> with host_threads(items=ITEMS_PER_THREAD):   # a short pass: one thread
...     numba.get_num_threads()
1
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["HOST_PASS_THREADS", "ITEMS_PER_THREAD", "host_threads", "pass_threads"]

#: The most threads a host pass uses (see the module docstring).
HOST_PASS_THREADS = 8

#: Items (pairs, or pairs times derivative columns) a pass moves per thread it wakes.
ITEMS_PER_THREAD = 16384


def pass_threads(before: int, numba_threads: int, n: int | None = None, items: int | None = None) -> int:
    """The threads of a host pass: at most ``n`` (default :data:`HOST_PASS_THREADS`), the caller's ``before``,
    half of numba's ``numba_threads`` and one per :data:`ITEMS_PER_THREAD` of ``items`` (when given); at least one.

    Examples
    --------
    >>> pass_threads(16, 16), pass_threads(16, 16, items=12880), pass_threads(16, 16, items=132355)
    (8, 1, 8)
    >>> pass_threads(16, 16, n=2, items=10**6), pass_threads(1, 16), pass_threads(4, 4, items=40000)
    (2, 1, 2)
    """
    cap = max(1, min(before, numba_threads // 2))
    if items is not None:
        cap = min(cap, -(-int(items) // ITEMS_PER_THREAD))
    return max(1, min(int(HOST_PASS_THREADS if n is None else n), cap))


@contextmanager
def host_threads(n: int | None = None, items: int | None = None) -> Iterator[None]:
    """Run numba's parallel regions of the calling thread on :func:`pass_threads` threads (at most ``n``, and one
    per :data:`ITEMS_PER_THREAD` of the pass's ``items`` when given) and restore the caller's setting afterwards
    (numba's thread count is per calling thread)."""
    import numba

    before = numba.get_num_threads()
    numba.set_num_threads(pass_threads(before, numba.config.NUMBA_NUM_THREADS, n, items))
    try:
        yield
    finally:
        numba.set_num_threads(before)
