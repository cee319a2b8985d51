"""How many threads the host passes of a kernel call use (numba ``parallel=True`` loops).

The passes that move a call's per-pair results (:mod:`mgkflow.gpu.moves`) and assemble K, dK
or their contractions (:mod:`mgkflow.evaluation.assemble`) are memory-bound and short (a few
milliseconds for 10⁵ pairs). In a Gaussian process's fit they run between BLAS calls, and
OpenBLAS keeps its threads spinning for a while after each call: a numba region on every core
then waits for threads the scheduler has parked behind the spinning ones. Measured on the H200
machine (16 cores, session 14): one ``MolecularGPR(fit_graph_kernel=True)`` fit on FreeSolv took
59.3 s with the passes on 16 threads and 17.6 s on 2, while the same passes alone run in about
1 ms on 16 threads. The passes therefore run on at most :data:`HOST_PASS_THREADS` threads.

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
HOST_PASS_THREADS = 2


@contextmanager
def host_threads(n: int | None = None) -> Iterator[None]:
    """Run numba's parallel regions of the calling thread on at most ``n`` threads (default
    :data:`HOST_PASS_THREADS`), and restore the caller's setting afterwards (numba's thread count
    is per calling thread)."""
    import numba

    before = numba.get_num_threads()
    numba.set_num_threads(max(1, min(int(HOST_PASS_THREADS if n is None else n), before)))
    try:
        yield
    finally:
        numba.set_num_threads(before)
