"""What a kernel call reports: :class:`SolveStats` (``kern.last_stats``) and :class:`DegenerateKernelWarning`.

Examples
--------
>>> import numpy as np
>>> st = SolveStats("cpu", (2, 2), 3, np.zeros((2, 2), dtype=np.int64), np.zeros((2, 2)), np.ones((2, 2), bool), 0.5)
>>> st.pairs_per_second, st.summary()["direct_solves"]
(6.0, 4)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["SolveStats", "DegenerateKernelWarning"]


class DegenerateKernelWarning(UserWarning):
    """The requested kernel is constant for mathematical reasons (e.g. a normalized kernel
    without any label field): the values are right but carry no information."""


@dataclass
class SolveStats:
    """Statistics of the last kernel call.

    Attributes
    ----------
    backend : str
        "cpu" or "gpu".
    shape : tuple
        Shape of the returned matrix.
    pairs : int
        Number of distinct pairs solved (upper triangle for symmetric calls,
        plus diagonal solves needed for normalization).
    iterations, residual, converged : ndarray
        Per entry of the returned matrix: CG iterations, final relative residual
        ||b - M x|| / ||b|| and convergence flag (mirrored for symmetric calls).
        Iterations 0 means the CPU backend solved the pair directly (sparse LU, used for
        product graphs of up to 2,500 nodes): no CG ran, and the entry counts as converged
        when the LU solution's backward error is at float64 rounding level, so its relative
        residual may exceed ``rtol`` on ill-conditioned systems (tiny q) while the value is
        exact to the conditioning. For gradient calls the figures are the worse of the two
        solves (M x = b and M y = p_x).
    seconds : float
        Wall time of the solve.
    """

    backend: str
    shape: tuple[int, int]
    pairs: int
    iterations: np.ndarray
    residual: np.ndarray
    converged: np.ndarray
    seconds: float
    extra: dict = field(default_factory=dict)

    @property
    def pairs_per_second(self) -> float:
        return self.pairs / self.seconds if self.seconds > 0 else float("inf")

    def summary(self) -> dict:
        """A flat dict of the figures (for DataFrames and reports)."""
        it = self.iterations
        return {
            "backend": self.backend,
            "pairs": self.pairs,
            "seconds": self.seconds,
            "pairs_per_s": self.pairs_per_second,
            "cg_iter_min": int(it.min()) if it.size else 0,
            "cg_iter_median": float(np.median(it)) if it.size else 0.0,
            "cg_iter_max": int(it.max()) if it.size else 0,
            "direct_solves": int((it == 0).sum()),  # cg_iter 0 = solved directly by sparse LU
            "residual_max": float(self.residual.max()) if self.residual.size else 0.0,
            "not_converged": int((~self.converged).sum()),
            **self.extra,
        }
