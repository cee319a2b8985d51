"""The hyperparameter search shared by the Gaussian processes: L-BFGS-B ascent with restarts."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.optimize

#: ``evaluate(θ) -> (objective value, gradient)``; larger is better, -inf where undefined.
Evaluate = Callable[[np.ndarray], tuple[float, np.ndarray]]


def maximize(
    evaluate: Evaluate,
    theta0: np.ndarray,
    bounds: np.ndarray,
    max_iter: int,
    say: Callable[[str], None],
    label: str,
    objective: str,
) -> tuple[float, np.ndarray]:
    """(best value, θ) of an L-BFGS-B ascent from θ₀ within ``bounds``; ``say`` gets a line per step,
    ``"{label}step K: {objective} = VALUE, hyperparameters [...] (SECONDS s)"``."""
    t0 = time.perf_counter()
    step = [0]
    last: dict = {}

    def fun(theta):
        value, grad = evaluate(theta)
        last["value"] = value
        if not np.isfinite(value):
            return 1e300, np.zeros_like(theta)
        return -value, -grad

    def callback(xk):
        step[0] += 1
        theta = ", ".join(f"{v:.3g}" for v in np.exp(xk))
        say(f"{label}step {step[0]}: {objective} = {last.get('value', float('nan')):.6g}, hyperparameters [{theta}] "
            f"({time.perf_counter() - t0:.1f} s)")  # fmt: skip

    res = scipy.optimize.minimize(
        fun, theta0, jac=True, method="L-BFGS-B", bounds=bounds, callback=callback, options={"maxiter": int(max_iter)}
    )
    return -float(res.fun), np.asarray(res.x, dtype=np.float64)


def fit_hyperparameters(
    kernel: Any,
    evaluate: Evaluate,
    n_restarts: int,
    max_iter: int,
    rng: np.random.Generator,
    say: Callable[[str], None],
    label: str,
    objective: str,
) -> None:
    """Set ``kernel.theta`` to the best of a search from its θ and ``n_restarts`` searches from θ
    drawn uniformly (log space) within its bounds."""
    bounds = np.asarray(kernel.bounds, dtype=np.float64)
    best = maximize(evaluate, kernel.theta.copy(), bounds, max_iter, say, label, objective)
    for r in range(int(n_restarts)):
        cand = maximize(evaluate, rng.uniform(bounds[:, 0], bounds[:, 1]), bounds, max_iter, say,
                        f"{label}restart {r + 1}, ", objective)  # fmt: skip
        if cand[0] > best[0]:
            best = cand
    kernel.theta = best[1]
