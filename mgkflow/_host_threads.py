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
numba's threads (never on every core).

Examples
--------
>>> import numba
>>> before = numba.get_num_threads()
>>> with host_threads():
...     inside = numba.get_num_threads()
>>> inside <= HOST_PASS_THREADS, numba.get_num_threads() == before
(True, True)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["HOST_PASS_THREADS", "host_threads"]

#: The most threads a host pass uses (see the module docstring).
HOST_PASS_THREADS = 8


@contextmanager
def host_threads(n: int | None = None) -> Iterator[None]:
    """Run numba's parallel regions of the calling thread on at most ``n`` threads (default
    :data:`HOST_PASS_THREADS`) and at most half of numba's threads, and restore the caller's
    setting afterwards (numba's thread count is per calling thread)."""
    import numba

    before = numba.get_num_threads()
    cap = max(1, min(before, numba.config.NUMBA_NUM_THREADS // 2))
    numba.set_num_threads(max(1, min(int(HOST_PASS_THREADS if n is None else n), cap)))
    try:
        yield
    finally:
        numba.set_num_threads(before)
