"""Gaussian-process regression on graphs with a choice of objective, restarts and progress lines.

:class:`GraphGPR` is a scikit-learn regressor (``fit``, ``predict(return_std=True)``, ``score``,
``get_params``, pickling) for any scikit-learn kernel, :class:`~mgkflow.MarginalizedGraphKernel`
and its compositions included. Beside scikit-learn's ``GaussianProcessRegressor`` it offers:

- the objective: the log marginal likelihood (``"lml"``), or the closed-form leave-one-out log
  predictive probability (``"loo"``) or squared error (``"loo_mse"``), all with analytic
  gradients (:mod:`mgkflow.learn.objectives`);
- restarts from θ drawn uniformly (in log space) within the bounds, with a seed;
- the gradient as one contraction Σ W ∘ ∂K/∂θⱼ through the kernel's sums and products
  (:func:`~mgkflow.learn.contract.gram_contraction`), never the n × n × H array;
- one kernel object for the whole search: θ is set in place at each step, so what a graph
  kernel keeps between calls on the same graphs (prepared systems, a GPU backend with its packed
  graphs) is reused instead of rebuilt (scikit-learn clones the kernel at every step);
- a progress line per optimizer step on stderr (``verbose=1``; silent with ``verbose=0``).

The optimizer is scipy's L-BFGS-B over θ (the logarithms of the free hyperparameters) within
the kernel's bounds.

Examples
--------
>>> import numpy as np
>>> from sklearn.gaussian_process.kernels import RBF, WhiteKernel
>>> X = np.linspace(0, 1, 12)[:, None]
>>> y = np.sin(6 * X[:, 0])
>>> gp = GraphGPR(RBF(0.5) + WhiteKernel(1e-2), objective="loo", verbose=0).fit(X, y)
>>> mean, std = gp.predict(X[:3], return_std=True)
>>> mean.shape, bool(np.all(std > 0)), gp.n_evaluations_ > 1
((3,), True, True)
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.linalg as sla
from sklearn.base import BaseEstimator, RegressorMixin, clone
from threadpoolctl import threadpool_limits

from ..errors import BackendUnavailableError, ParameterError, ProblemTooLargeError
from ._gram_tree import check_fit_memory
from ._search import fit_hyperparameters
from .contract import gram_contraction
from .objectives import OBJECTIVES, WEIGHTS, NotPositiveDefiniteError, lml_value

__all__ = ["GraphGPR", "blas_threads", "DEVICE_MIN_N", "LINALG"]

#: ``GraphGPR(linalg=...)`` choices.
LINALG = ("auto", "cpu", "gpu")
#: Smallest n whose dense algebra ``linalg="auto"`` sends to the GPU (S21-4, H100: a step at n = 1,000 took
#: 5 ms there against 27 ms on the host at best, at 2,000 16 ms against 81–131 ms).
DEVICE_MIN_N = 1000


def blas_threads(n: int) -> int:
    """BLAS threads for the dense algebra of a Gaussian process on ``n`` points.

    The Cholesky factor, K⁻¹ and the gradient's products of an exact GP are a few milliseconds at
    n ≈ 500. BLAS's own default (one thread per core, in each of numpy's and scipy's BLAS
    libraries) made them 10–20× slower on a 16-core GPU host: the two libraries' threads spun
    against each other (``mgkflow/gpu/NOTES.md``, session 12). About one thread per 128 points,
    at most half the cores (two libraries share them), was measured best.

    Examples
    --------
    >>> blas_threads(100)
    1
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return int(min(max(1, round(n / 128)), max(1, cores // 2)))


class GraphGPR(RegressorMixin, BaseEstimator):
    """Gaussian-process regression whose hyperparameters maximize a chosen objective.

    Parameters
    ----------
    kernel : scikit-learn kernel
        The prior covariance, e.g. ``C(1.0) * MarginalizedGraphKernel(..., normalize=True) +
        WhiteKernel(1e-2)``. Its free hyperparameters are fitted unless ``optimize=False``.
    objective : {"lml", "loo", "loo_mse"}
        What the fit maximizes: the log marginal likelihood, the leave-one-out log predictive
        probability, or minus the leave-one-out squared error.
    alpha : float
        Added to the diagonal of the training covariance (jitter; noise belongs in the kernel
        as a ``WhiteKernel`` so that it is fitted).
    normalize_y : bool
        Fit to targets scaled to zero mean and unit variance (predictions are scaled back).
    n_restarts : int
        Further searches started from θ drawn uniformly within the bounds (log space).
    max_iter : int
        L-BFGS-B iterations per search.
    optimize : bool
        False keeps the kernel's hyperparameters as given.
    random_state : int or None
        Seed of the restarts' starting points.
    verbose : int
        1: a line per optimizer step on stderr (objective, θ, seconds); 0: silent.
    linalg : {"auto", "cpu", "gpu"}
        Where the n × n dense algebra of ``objective="lml"`` runs (the Cholesky factor, K⁻¹ and the
        gradient's weights at every step, n³ flops): ``"gpu"`` with cuSOLVER
        (:class:`mgkflow.gpu.dense.DeviceDense`), ``"cpu"`` with LAPACK, ``"auto"`` on the GPU when
        one is present, cuSOLVER loads and n ≥ :data:`DEVICE_MIN_N` (else, or when the device lacks
        the memory, on the host). The leave-one-out objectives run on the host.

    Attributes
    ----------
    kernel_ : the fitted kernel
    objective_value_ : float, the objective at ``kernel_.theta``
    n_evaluations_ : int, kernel evaluations (K and dK) during the fit
    fit_seconds_ : float
    linalg_ : str, where the dense algebra ran ("cpu" or "gpu")
    """

    def __init__(
        self,
        kernel: Any,
        objective: str = "lml",
        alpha: float = 1e-10,
        normalize_y: bool = True,
        n_restarts: int = 0,
        max_iter: int = 100,
        optimize: bool = True,
        random_state: int | None = None,
        verbose: int = 1,
        linalg: str = "auto",
    ) -> None:
        self.kernel = kernel
        self.objective = objective
        self.alpha = alpha
        self.normalize_y = normalize_y
        self.n_restarts = n_restarts
        self.max_iter = max_iter
        self.optimize = optimize
        self.random_state = random_state
        self.verbose = verbose
        self.linalg = linalg

    def __setstate__(self, state: dict) -> None:
        state.setdefault("linalg", "auto")  # a model pickled before linalg existed
        self.__dict__.update(state)
        if "X_train_" in state:
            self._X = state["X_train_"]

    # ------------------------------------------------------------------ fitting
    def _check(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ParameterError(f"objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")
        for name in ("n_restarts", "max_iter"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < (0 if name == "n_restarts" else 1):
                raise ParameterError(f"{name} must be an integer >= {0 if name == 'n_restarts' else 1}, got {v!r}")
        if not (isinstance(self.alpha, int | float) and self.alpha >= 0 and np.isfinite(self.alpha)):
            raise ParameterError(f"alpha must be a finite number >= 0, got {self.alpha!r}")
        if self.linalg not in LINALG:
            raise ParameterError(f"linalg must be one of {', '.join(LINALG)}, got {self.linalg!r:.60}")
        if self.linalg == "gpu" and self.objective != "lml":
            raise ParameterError(
                f"linalg='gpu' runs objective='lml'; objective={self.objective!r} runs on the host (linalg='cpu')"
            )

    def _say(self, text: str) -> None:
        if self.verbose:
            print(f"mgkflow: {text}", file=sys.stderr, flush=True)

    def _evaluate(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        """Objective and gradient at θ, with the kernel's θ set in place (caches kept)."""
        self.kernel_.theta = theta
        K, contract = gram_contraction(self.kernel_, self._X, self._workspace)
        K[np.diag_indices_from(K)] += self.alpha
        self.n_evaluations_ += 1
        if self._dense is not None:
            got = self._dense.lml_weights(K, self._y, overwrite=True)
            if got is None:  # not positive definite
                return -np.inf, np.zeros_like(theta)
            value, W = got
            return value, contract(W)
        try:
            value, W = WEIGHTS[self.objective](K, self._y, overwrite=True)
        except NotPositiveDefiniteError:
            return -np.inf, np.zeros_like(theta)
        return value, contract(W)

    def _check_memory(self, n: int) -> None:
        """Refuse, before any kernel is evaluated, a fit whose n × n arrays cannot fit the host's available
        memory (:func:`~mgkflow.learn._gram_tree.block_arrays` of the kernel, and K itself)."""
        check_fit_memory(
            self.kernel, n, n, 1, f"an exact Gaussian process on {n} points",
            "use a low-rank GP (MolecularGPR(n_landmarks=m), mgkflow fit --low-rank M, LowRankGPR) or fewer points",
        )  # fmt: skip

    def _device_dense(self, n: int) -> Any:
        """The device's dense algebra for n points (:class:`mgkflow.gpu.dense.DeviceDense`), or None for the
        host's, as ``linalg`` says."""
        if self.linalg == "cpu" or self.objective != "lml":
            return None
        if self.linalg == "auto" and n < DEVICE_MIN_N:
            return None
        from ..gpu import dense

        if self.linalg == "auto" and not dense.available():
            return None
        if self.linalg == "gpu" and not dense.available():
            dense._library()  # raises BackendUnavailableError naming what is missing
            raise BackendUnavailableError("linalg='gpu' needs PyCUDA and a CUDA device; linalg='cpu' runs on the host")
        try:
            return dense.DeviceDense(n)
        except (ProblemTooLargeError, BackendUnavailableError) as exc:
            if self.linalg == "gpu":
                raise
            self._say(f"the {n} × {n} dense algebra runs on the host: {exc}")
            return None

    def fit(self, X: Sequence, y: np.ndarray) -> GraphGPR:
        """Fit the hyperparameters (unless ``optimize=False``) and the posterior to (X, y)."""
        self._check()
        y = np.asarray(y, dtype=np.float64)
        if y.ndim != 1 or len(y) != len(X) or len(y) < 2:
            raise ParameterError(f"y must be one number per sample of X (at least 2), got shape {y.shape} for {len(X)}")
        if not np.all(np.isfinite(y)):
            raise ParameterError("y has NaN or infinite values")
        self._check_memory(len(y))
        t0 = time.perf_counter()
        self._y_mean = float(y.mean()) if self.normalize_y else 0.0
        self._y_std = float(y.std()) if self.normalize_y and y.std() > 0 else 1.0
        self._X = list(X) if not isinstance(X, np.ndarray) else X
        self._y = (y - self._y_mean) / self._y_std
        self.kernel_ = clone(self.kernel)
        self.n_evaluations_ = 0
        self._workspace: dict = {}  # the steps' n × n arrays, reused (see gram_contraction)
        self._dense = self._device_dense(len(y))
        self.linalg_ = "cpu" if self._dense is None else "gpu"
        if self._dense is not None:
            self._say(f"the {len(y)} × {len(y)} algebra of each step runs on the GPU (cuSOLVER)")
        try:
            with threadpool_limits(limits=blas_threads(len(y)), user_api="blas"):
                self._fit_hyperparameters()
                self._posterior()
        finally:
            del self._workspace
            if self._dense is not None:
                self._dense.free()
            del self._dense
        self.fit_seconds_ = time.perf_counter() - t0
        self._say(f"fit done: {self.objective} = {self.objective_value_:.6g} after {self.n_evaluations_} "
                  f"kernel evaluations in {self.fit_seconds_:.1f} s; kernel {self.kernel_}")
        return self

    def _fit_hyperparameters(self) -> None:
        if self.optimize and self.kernel_.n_dims:
            rng = np.random.default_rng(self.random_state)
            fit_hyperparameters(self.kernel_, self._evaluate, self.n_restarts, self.max_iter, rng, self._say, "fit ",
                                self.objective)  # fmt: skip

    def _posterior(self) -> None:
        """K's Cholesky factor ``L_`` and ``alpha_`` = K⁻¹ y at the fitted θ, and the objective there (the
        evidence from the factor alone: no inverse). K is made in the arrays the fit's steps used (a fresh
        ``kernel_(X)`` beside them made this the fit's peak of host memory)."""
        K, _ = gram_contraction(self.kernel_, self._X, self._workspace, gradient=False)
        K[np.diag_indices_from(K)] += self.alpha
        if self.objective != "lml":
            self.objective_value_ = float(WEIGHTS[self.objective](K, self._y)[0])
        got = self._dense.cholesky(K, self._y) if self._dense is not None else None
        if got is None:
            try:  # in K's memory (symmetric: K.T is K in Fortran order)
                L = sla.cholesky(K.T if K.flags.c_contiguous else K, lower=True, check_finite=False, overwrite_a=True)
            except np.linalg.LinAlgError as exc:
                raise NotPositiveDefiniteError(
                    "the fitted training covariance is not positive definite; add noise (a WhiteKernel) or raise alpha"
                ) from exc
            got = L, sla.cho_solve((L, True), self._y, check_finite=False), float(np.log(np.diag(L)).sum())
        self.L_, self.alpha_, logdet = got
        if self.objective == "lml":
            self.objective_value_ = lml_value(self._y, self.alpha_, logdet)
        self.X_train_ = self._X

    # ------------------------------------------------------------------ prediction
    def predict(self, X: Sequence, return_std: bool = False):
        """Posterior mean (and standard deviation with ``return_std``) at X."""
        if not hasattr(self, "alpha_"):
            raise ParameterError("this GraphGPR is not fitted yet: call fit(X, y) first")
        Ks = self.kernel_(X, self.X_train_)
        mean = Ks @ self.alpha_ * self._y_std + self._y_mean
        if not return_std:
            return mean
        v = sla.solve_triangular(self.L_, Ks.T, lower=True, check_finite=False)
        var = self.kernel_.diag(X) - np.einsum("ij,ij->j", v, v)
        return mean, np.sqrt(np.clip(var, 0.0, None)) * self._y_std

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.pop("_X", None)  # X_train_ holds the same graphs
        return state

