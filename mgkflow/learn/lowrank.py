"""Low-rank Gaussian-process regression on graphs: :class:`LowRankGPR`, O(n·m²) time, O(n·m) memory.

An exact GP on n graphs needs the n × n kernel matrix: n²/2 graph-kernel solves and an O(n³)
factorization. With m landmarks Z chosen among the training graphs (:mod:`.landmarks`), the
Nyström approximation Q = K_nm K_mm⁻¹ K_mn needs only the n·m entries K(X, Z), the m × m block
K(Z, Z) and the n diagonal entries k(x, x). Three covariances of the training targets build on
it (Quiñonero-Candela & Rasmussen 2005; Titsias 2009; Bauer et al. 2016), all with the same
Woodbury algebra and analytic gradients:

``"dtc"`` (default)
    The deterministic-training-conditional (subset-of-regressors) evidence log N(y | 0, Q + Λ),
    Λ the white noise.
``"vfe"``
    Titsias's variational bound: the same minus ½ Σᵢ (kᵢᵢ − Qᵢᵢ) / λᵢ. A lower bound of the exact
    evidence that tightens as landmarks are added; the penalty favours hyperparameters under which
    the landmarks explain the kernel, so with few landmarks it underfits (on FreeSolv it gave a
    descriptor kernel of high rank no weight; docs/learning.md). The same predictions as ``"dtc"``.
``"fitc"``
    The fully independent training conditional: Λ also takes the diagonal Q misses,
    λᵢ = k(xᵢ, xᵢ) + noise − Qᵢᵢ (heteroscedastic), and its evidence; known to underestimate the
    noise when its hyperparameters are fitted (Bauer et al.).

All three equal the exact GP when every training point is a landmark. Predictive mean
K_*m B⁻¹ K_mn Λ⁻¹ y and variance k(x*, x*) − Q_** + K_*m B⁻¹ K_m* with B = K_mm + K_mn Λ⁻¹ K_nm
(the standard deviation of a noisy observation, like :class:`GraphGPR`: the kernel's white noise
is included).

**Local correction** (``n_neighbors=k``, off by default). Q drops the kernel's small eigenvalues, and
labels that are exact functions of the molecule (RDKit's logP, TPSA, QED) are interpolated with just
those (docs/learning.md). With k > 0 a prediction at x* adds the exact GP of the training residuals
r = y − μ(X) on x*'s k nearest training points N (nearest by the cosine of the landmark features
V = L_A⁻¹ K_mn, which every point has), under the covariance Q misses: with R = K − Q,
μ(x*) += R(x*, N) (R(N, N) + Λ_N)⁻¹ r_N and the variance loses R(x*, N) (R(N, N) + Λ_N)⁻¹ R(N, x*)
(a local GP on the low-rank model's residuals, in two stages: unlike the partially independent
conditional of Snelson & Ghahramani 2007 with x*'s neighbourhood as its block, it does not become the
exact GP at k = n, but it came closer to it at the k that one can afford: on 3,500 MOSES molecules,
logP, m = 70, the test RMSE 0.300 → 0.144 with k = 512, where the exact GP on 700 scored 0.198 and on
3,500 0.117; on 100,000 with m = 2,000 and k = 256, 0.108 → 0.079, where the exact GP on 20,000 scored
0.072 on the same molecules; docs/learning.md). The white noise of that local GP is the fitted one plus the
level, among :data:`LOCAL_NOISE_GRID`, whose leave-one-out corrections of :data:`LOCAL_NOISE_SAMPLE` training
points (each from its k nearest other training points) fit their residuals best, or none at all where the plain
low-rank mean fits them better, each only by a margin (:data:`LOCAL_NOISE_MARGIN`; ``local_noise="auto"``): with
a fitted noise near zero the local systems are ill-conditioned, and the correction of a smooth toy function went
from 0.046 (noise 1e-3) to 0.56 (noise 1e-7), 9 times the plain model's error (0.046 with the chosen noise). It
costs one kernel matrix of k + 1 graphs per predicted
point (made by :func:`~mgkflow.learn.set_grams.set_grams` for thousands of points at once: the graph kernels'
pairs as pair lists over the points and their neighbours), and the fitted model keeps the training inputs and
V (float32, a row per training point). With the hyperparameters from an exact GP on a sample
(``hyperparameter_sample``, below) and k = 512, 100,000 MOSES molecules scored 0.072 where the exact GP on
20,000 scored 0.074 (all 2,000 test molecules).

**Noise.** The kernel holds its noise as a ``WhiteKernel`` (as for :class:`GraphGPR`), anywhere in
a sum or product: λᵢ is ``kernel.diag`` minus the kernel's value on the pair (xᵢ, xᵢ) taken as
a cross entry (what a ``WhiteKernel`` leaves out). K(Z, Z) is such a cross block: no noise,
off the diagonal or on it. A kernel without white noise is refused.

**Stability.** K_mm gets a jitter (``jitter`` times its mean diagonal; part of the model, so the
gradient is exact); with K_mm = L Lᵀ and V = L⁻¹ K_mn, every solve is with L or with the
Cholesky factor of I + V Λ⁻¹ Vᵀ (eigenvalues ≥ 1).

**Gradients.** The objective's θ-gradient is Σᵢⱼ W_ij ∂K(X, Z)_ij + Σ W'_ij ∂K(Z, Z)_ij plus
weighted derivatives of the diagonal, for weights W, W' from m × m algebra. The first sum comes
from one walk of the kernel's tree over K(X, Z) (:func:`~mgkflow.learn.contract.cross_contraction`):
products pass the weights down, the fixed graph kernels' block and the descriptors' distances are
made once per fit, and no n × m × H array is made. The landmarks are chosen once, with the
kernel's starting hyperparameters, and kept while the hyperparameters are fitted.

Examples
--------
>>> import numpy as np
>>> from sklearn.gaussian_process.kernels import RBF, WhiteKernel
>>> X = np.linspace(0, 6, 40)[:, None]
>>> y = np.sin(X[:, 0])
>>> gp = LowRankGPR(RBF(1.0) + WhiteKernel(1e-2), n_landmarks=10, verbose=0).fit(X, y)
>>> mean, std = gp.predict(X[:3], return_std=True)
>>> gp.landmark_indices_.shape, bool(np.abs(mean - y[:3]).max() < 0.1), bool(np.all(std > 0))
((10,), True, True)
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.linalg as sla
from sklearn.base import BaseEstimator, RegressorMixin, clone
from threadpoolctl import threadpool_limits

from ..errors import ParameterError, ParameterTypeError
from ._gram_tree import check_fit_memory
from ._passes import half_outer_minus_scaled, scaled_transpose
from ._search import fit_hyperparameters
from .cached import Cached
from .contract import _check_sets, _concat, _take, cross_contraction, kernel_diag
from .gpr import GraphGPR, blas_threads
from .landmarks import LANDMARK_METHODS, select_landmarks
from .objectives import NotPositiveDefiniteError
from .set_grams import set_grams

__all__ = ["LowRankGPR", "lowrank_log_likelihood", "APPROXIMATIONS", "EXTRA_NM_ARRAYS"]

#: The low-rank covariances of the training targets (see the module docstring).
APPROXIMATIONS = ("dtc", "vfe", "fitc")
#: n × m float64 arrays a fit keeps beside the kernel walk's (``_gram_tree.block_arrays``): K(X, Z), V, the
#: weights, the landmark selection's factor and the step's temporaries. With the default two-view
#: molecular kernel (11 + 6 = 17 arrays) this matches the 28.1 GB peak of a fit on 100,000 molecules with
#: 2,000 landmarks (1.6 GB an array; gpu/NOTES.md, S21-5).
EXTRA_NM_ARRAYS = 6
#: points the local correction takes together: their neighbours' union is prepared and packed once
CORRECTION_CHUNK = 4096
#: training points whose leave-one-out corrections choose the local correction's noise (``local_noise="auto"``)
LOCAL_NOISE_SAMPLE = 128
#: the noise levels tried there, added to the fitted noise, as fractions of the kernel's signal variance
LOCAL_NOISE_GRID = (0.0, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2)
#: how much less (a fraction of the fitted noise's summed squared left-out residual) another level, or no
#: correction, must leave to be chosen
LOCAL_NOISE_MARGIN = 0.1


def _chol(A: np.ndarray, what: str) -> np.ndarray:
    try:
        return sla.cholesky(A, lower=True, check_finite=False)
    except np.linalg.LinAlgError as exc:
        raise NotPositiveDefiniteError(
            f"{what} is not positive definite at these hyperparameters; raise jitter or choose other landmarks"
        ) from exc


def _solve_l(L: np.ndarray, B: np.ndarray, trans: int = 0) -> np.ndarray:
    return sla.solve_triangular(L, B, lower=True, trans=trans, check_finite=False)


class _Factors:
    """The m × m factors of one low-rank covariance: L_A L_Aᵀ = K_mm + εI, V = L_A⁻¹ K_mn,
    λ (the diagonal Λ), L_C L_Cᵀ = I + V Λ⁻¹ Vᵀ."""

    def __init__(self, Knm: np.ndarray, Kmm: np.ndarray, value: np.ndarray, signal: np.ndarray, approximation: str,
                 jitter: float) -> None:
        m = Kmm.shape[0]
        scale = float(np.mean(np.diag(Kmm)))
        if not (scale > 0 and np.isfinite(scale)):
            raise NotPositiveDefiniteError(f"the landmarks' kernel matrix has diagonal mean {scale}")
        self.m, self.jitter = m, jitter
        A = Kmm + (jitter * scale) * np.eye(m)
        self.L_A = _chol(A, "the landmarks' kernel matrix K(Z, Z)")
        self.Knm = Knm  # (L_A V = K_mn: weights() reads diag(Vᵀ C⁻¹ V) off it)
        self.V = _solve_l(self.L_A, Knm.T)
        self.q = np.einsum("ij,ij->j", self.V, self.V)  # diag of Q
        self.t = signal - self.q  # what Q misses of the diagonal (≥ 0 up to the jitter)
        noise = value - signal
        self.lam = noise + self.t if approximation == "fitc" else noise
        if not np.all(self.lam > 0):
            raise NotPositiveDefiniteError("the low-rank covariance's diagonal Λ is not positive; add noise")
        Vs = self.V / np.sqrt(self.lam)
        self.L_C = _chol(np.eye(m) + Vs @ Vs.T, "I + V Λ⁻¹ Vᵀ")

    def objective(self, y: np.ndarray, approximation: str) -> tuple[float, np.ndarray]:
        """The log evidence (vfe: the bound) and β = L_C⁻¹ V Λ⁻¹ y."""
        n = len(y)
        yl = y / self.lam
        beta = _solve_l(self.L_C, self.V @ yl)
        quad = float(y @ yl - beta @ beta)
        logdet = float(np.sum(np.log(self.lam)) + 2.0 * np.sum(np.log(np.diag(self.L_C))))
        value = -0.5 * quad - 0.5 * logdet - 0.5 * n * np.log(2 * np.pi)
        if approximation == "vfe":
            value -= 0.5 * float(np.sum(self.t / self.lam))
        return value, beta

    def weights(self, y: np.ndarray, beta: np.ndarray, approximation: str):
        """(W_nm, W_mm, w_value, w_signal): the objective's gradient is Σ W_nm ∘ ∂K(X, Z) +
        Σ W_mm ∘ ∂K(Z, Z) + w_value · ∂diag + w_signal · ∂diag_signal."""
        V, lam, L_A, L_C, m = self.V, self.lam, self.L_A, self.L_C, self.m
        I = np.eye(m)
        cb = _solve_l(L_C, beta, trans=1)  # C⁻¹ V Λ⁻¹ y
        alpha = y / lam - (V.T @ cb) / lam  # Σ⁻¹ y
        Cinv = sla.cho_solve((L_C, True), I, check_finite=False)
        Va = V @ alpha
        # R = ½ (α αᵀ − Σ⁻¹): V R = ½ ((Vα) αᵀ − C⁻¹ V Λ⁻¹), V R Vᵀ = ½ ((Vα)(Vα)ᵀ − I + C⁻¹), and what the
        # gradient needs is L_A⁻ᵀ V R = ½ ((L_A⁻ᵀ Vα) αᵀ − (L_A⁻ᵀ C⁻¹) V Λ⁻¹): one n·m² product (M V, M =
        # L_A⁻ᵀ C⁻¹ of m × m), not C⁻¹ V and then an n·m² triangular solve; diag(Vᵀ C⁻¹ V) = diag(K_nm M V)
        # since L_A V = K_mn. M V in V's layout (column-major from the triangular solve: W_nm is then a
        # scaled copy of the same memory, with no transposed pass).
        M = _solve_l(L_A, Cinv, trans=1)
        MV = (V.T @ M.T).T if V.flags.f_contiguous else M @ V
        W = half_outer_minus_scaled(MV, lam, _solve_l(L_A, Va, trans=1), alpha)  # L_A⁻ᵀ V R
        VRVt = 0.5 * (np.outer(Va, Va) - I + Cinv)
        dq = np.einsum("ij,ij->i", self.Knm, MV.T)  # diag(Vᵀ C⁻¹ V)
        r = 0.5 * (alpha * alpha - (1.0 / lam - dq / (lam * lam)))
        if approximation == "dtc":
            c, w_value, w_signal = np.zeros_like(lam), r, -r
        elif approximation == "fitc":  # λ = diag − diag Q: R − diag(r) meets ∂Q
            c, w_value, w_signal = -r, r, np.zeros_like(r)
        else:  # vfe: the trace term −½ Σ tᵢ/λᵢ adds diag(1/2λ) to what meets ∂Q
            s = 0.5 / lam
            e = self.t / (2.0 * lam * lam)
            c, w_value, w_signal = s, r + e, -r - s - e
        if c.any():  # V R + V diag(c) (dtc: c = 0, no further n·m² product)
            W += _solve_l(L_A, V * c, trans=1)
            N = VRVt + (V * c) @ V.T
        else:
            N = VRVt
        W_nm = scaled_transpose(W, 2.0)  # 2 R Vᵀ L_A⁻¹ (n × m)
        W_mm = -_solve_l(L_A, _solve_l(L_A, N, trans=1).T, trans=1).T  # −L_A⁻ᵀ N L_A⁻¹
        W_mm = 0.5 * (W_mm + W_mm.T)
        W_mm += (self.jitter / m) * np.trace(W_mm) * I  # the jitter ε = jitter · mean diag K_mm
        return W_nm, W_mm, w_value, w_signal


def _lowrank(
    kernel: Any,
    X: Sequence,
    Z: Sequence,
    y: np.ndarray,
    approximation: str,
    jitter: float,
    gradient: bool,
    cache: dict | None,
    workspaces: tuple[dict, dict] | None = None,
) -> tuple[float, np.ndarray | None, _Factors, np.ndarray]:
    """(objective, gradient or None, factors, β) at the kernel's θ.

    K(X, Z), K(Z, Z) and their gradients' contractions come from walks of the kernel's tree
    (:func:`~mgkflow.learn.contract.cross_contraction`): fixed leaves kept in ``cache``, the step's
    n × m and m × m arrays in ``workspaces``, never an n × m × H or m × m × H array."""
    ws_nm, ws_mm = workspaces if workspaces is not None else (None, None)
    d = kernel_diag(kernel, X, eval_gradient=gradient, cache=cache)
    Kmm, contract_mm = cross_contraction(kernel, Z, Z, cache=cache, workspace=ws_mm, gradient=gradient)
    Knm, contract_nm = cross_contraction(kernel, X, Z, cache=cache, workspace=ws_nm, gradient=gradient)
    f = _Factors(Knm, Kmm, d.value, d.signal, approximation, jitter)
    value, beta = f.objective(y, approximation)
    if not gradient:
        return value, None, f, beta
    W_nm, W_mm, w_value, w_signal = f.weights(y, beta, approximation)
    g = contract_nm(W_nm) + contract_mm(W_mm) + w_value @ d.gradient + w_signal @ d.signal_gradient
    return value, g, f, beta


def lowrank_log_likelihood(
    kernel: Any,
    X: Sequence,
    Z: Sequence,
    y: Any,
    approximation: str = "dtc",
    jitter: float = 1e-8,
    eval_gradient: bool = False,
    cache: dict | None = None,
) -> float | tuple[float, np.ndarray]:
    """The low-rank GP's log evidence of y (``"vfe"``: Titsias's lower bound) at the kernel's θ,
    and with ``eval_gradient`` its gradient over θ (log space).

    Parameters
    ----------
    kernel : scikit-learn kernel (with white noise)
    X : sequence of graphs or 2-D array, the training inputs
    Z : the landmarks (any inputs of the kernel; usually some of X)
    y : array (n,), the targets
    approximation : {"dtc", "vfe", "fitc"}
    jitter : float
        Added to K(Z, Z)'s diagonal, times its mean diagonal.
    eval_gradient : bool
    cache : dict, optional
        Kept blocks of ``Cached`` kernels (:func:`~mgkflow.learn.contract.cross_kernel`).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    >>> X = np.linspace(0, 1, 6)[:, None]; y = X[:, 0] ** 2
    >>> value, grad = lowrank_log_likelihood(RBF(1.0) + WhiteKernel(0.1), X, X[::2], y, eval_gradient=True)
    >>> grad.shape
    (2,)
    """
    if approximation not in APPROXIMATIONS:
        raise ParameterError(f"approximation must be one of {', '.join(APPROXIMATIONS)}, got {approximation!r:.60}")
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 1 or len(y) != len(X):
        raise ParameterError(f"y must be one number per sample of X, got shape {y.shape} for {len(X)}")
    value, g, _, _ = _lowrank(kernel, X, Z, y, approximation, float(jitter), bool(eval_gradient), cache)
    return (value, g) if eval_gradient else value


def _int(value: Any, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise ParameterError(f"{name} must be an integer >= {low}, got {value!r:.60}")
    return int(value)


class LowRankGPR(RegressorMixin, BaseEstimator):
    """Gaussian-process regression with a low-rank (Nyström) covariance on m landmarks.

    For training sets where the exact :class:`GraphGPR` is too slow: the kernel is evaluated on
    n·m pairs (plus m² and the n diagonal entries) per optimizer step instead of n²/2, and the
    algebra costs O(n·m²) instead of O(n³). The hyperparameters are fitted by the chosen
    approximation's log evidence (L-BFGS-B, analytic gradients, restarts), with the landmarks
    fixed. See :mod:`mgkflow.learn.lowrank` for the mathematics.

    Parameters
    ----------
    kernel : scikit-learn kernel
        The prior covariance with its noise as a ``WhiteKernel``, e.g.
        ``molecular_kernel()`` or ``C(1.0) * MarginalizedGraphKernel(..., normalize=True) +
        WhiteKernel(1e-2)``.
    n_landmarks : int
        m; more than the training points takes them all.
    landmarks : {"pivoted_cholesky", "kmeans++", "random"} or array of int
        How the landmarks are chosen among the training points (:mod:`.landmarks`), or their
        indices (``n_landmarks`` is then ignored).
    approximation : {"dtc", "vfe", "fitc"}
        The low-rank covariance and its objective: the DTC / subset-of-regressors evidence
        (default), Titsias's variational bound, or FITC's evidence.
    jitter : float
        Added to the landmarks' kernel matrix diagonal, times its mean diagonal.
    normalize_y : bool
        Fit to targets scaled to zero mean and unit variance (predictions are scaled back).
    n_restarts : int
        Further searches started from θ drawn uniformly within the bounds (log space).
    max_iter : int
        L-BFGS-B iterations per search.
    optimize : bool
        False keeps the kernel's hyperparameters as given.
    hyperparameter_sample : int or None
        None (default): the hyperparameters maximize the approximation's evidence on all training points.
        s: they maximize the exact evidence of s training points drawn at random (:class:`GraphGPR` on them,
        its algebra on the GPU when present), and the landmarks are chosen and the posterior built on all
        points with them. The DTC evidence explains what the landmarks miss as noise (on 20,000 MOSES
        molecules it fitted 10× the exact GP's noise and the smoothest kernel its bounds allow,
        ``mgkflow/gpu/NOTES.md`` S21-4): an exact fit on a few thousand points costs less than the low-rank
        one on 10⁵ and suits the local correction better (docs/learning.md). Needs ``optimize=True``.
    n_neighbors : int
        0 (default): the low-rank posterior. k > 0: each prediction adds the exact GP of the training
        residuals on its k nearest training points, with the covariance the landmarks miss (module
        docstring): closer to the exact GP on labels without noise, at one kernel matrix of k + 1
        graphs per predicted point (use a GPU), and a model that keeps its training inputs.
    local_noise : {"auto", "fitted"}
        The local correction's white noise: ``"auto"`` (default) the fitted noise plus the level that fits the
        leave-one-out corrections of a sample of training points best, or no correction where the plain mean
        fits them better (module docstring; it costs the kernel matrices of predicting 128 points, at the fit);
        ``"fitted"`` the kernel's fitted noise as it is.
    block_rows : int
        Training points per evaluation of K(X, Z) (memory O(block_rows · m · H) for gradients).
    random_state : int or None
        Seed of the landmarks (``"kmeans++"``, ``"random"``) and of the restarts.
    verbose : int
        1: a line per optimizer step on stderr; 0: silent.

    Attributes
    ----------
    kernel_ : the fitted kernel
    landmark_indices_ : ndarray of int, the landmarks' positions in the training set
    X_landmarks_ : the landmarks (all that prediction needs of the training inputs)
    objective_value_ : float, the objective at ``kernel_.theta``
    n_evaluations_ : int, objective evaluations during the fit
    landmark_seconds_, sample_seconds_, fit_seconds_ : float, time to choose the landmarks, to fit the
        hyperparameters on ``hyperparameter_sample`` points (0 without), and for the whole fit
    local_noise_ : float, the noise the local correction adds to the fitted one (in the kernel's units, like
        its noise level; ``inf``: no correction, the plain mean fitted the left-out points better; 0 without
        ``n_neighbors``)

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    >>> X = np.linspace(0, 6, 30)[:, None]
    >>> y = np.cos(X[:, 0])
    >>> gp = LowRankGPR(RBF(1.0) + WhiteKernel(1e-2), n_landmarks=8, verbose=0).fit(X, y)
    >>> bool(gp.score(X, y) > 0.95), gp.n_landmarks_
    (True, 8)
    """

    def __init__(
        self,
        kernel: Any,
        n_landmarks: int = 100,
        landmarks: Any = "pivoted_cholesky",
        approximation: str = "dtc",
        jitter: float = 1e-8,
        normalize_y: bool = True,
        n_restarts: int = 0,
        max_iter: int = 100,
        optimize: bool = True,
        hyperparameter_sample: int | None = None,
        n_neighbors: int = 0,
        local_noise: str = "auto",
        block_rows: int = 512,
        random_state: int | None = None,
        verbose: int = 1,
    ) -> None:
        self.kernel = kernel
        self.n_landmarks = n_landmarks
        self.landmarks = landmarks
        self.approximation = approximation
        self.jitter = jitter
        self.normalize_y = normalize_y
        self.n_restarts = n_restarts
        self.max_iter = max_iter
        self.optimize = optimize
        self.hyperparameter_sample = hyperparameter_sample
        self.n_neighbors = n_neighbors
        self.local_noise = local_noise
        self.block_rows = block_rows
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ checks
    def _check(self) -> None:
        k = self.kernel
        if not callable(k) or not hasattr(k, "diag") or not hasattr(k, "theta"):
            raise ParameterTypeError(f"kernel must be a scikit-learn kernel, got {type(k).__name__}")
        _int(self.n_landmarks, "n_landmarks", 1)
        if isinstance(self.landmarks, str):
            if self.landmarks not in LANDMARK_METHODS:
                raise ParameterError(
                    f"landmarks must be one of {', '.join(LANDMARK_METHODS)} or indices, got {self.landmarks!r:.60}"
                )
        elif not isinstance(self.landmarks, Sequence | np.ndarray):
            raise ParameterTypeError(
                f"landmarks must be a method name or a sequence of indices, got {type(self.landmarks).__name__}"
            )
        if not isinstance(self.approximation, str) or self.approximation not in APPROXIMATIONS:
            raise ParameterError(
                f"approximation must be one of {', '.join(APPROXIMATIONS)}, got {self.approximation!r:.60}"
            )
        j = self.jitter
        if isinstance(j, bool) or not isinstance(j, int | float | np.floating | np.integer) or not 0 <= j < 1:
            raise ParameterError(f"jitter must be a number in [0, 1), got {j!r:.60}")
        for name in ("normalize_y", "optimize"):
            if not isinstance(getattr(self, name), bool | np.bool_):
                raise ParameterTypeError(f"{name} must be True or False, got {getattr(self, name)!r:.60}")
        _int(self.n_restarts, "n_restarts", 0)
        _int(self.max_iter, "max_iter", 1)
        _int(self.n_neighbors, "n_neighbors", 0)
        if not isinstance(self.local_noise, str) or self.local_noise not in ("auto", "fitted"):
            raise ParameterError(f"local_noise must be 'auto' or 'fitted', got {self.local_noise!r:.60}")
        if self.hyperparameter_sample is not None:
            _int(self.hyperparameter_sample, "hyperparameter_sample", 2)
            if not self.optimize:
                raise ParameterError(
                    "hyperparameter_sample fits the hyperparameters on a sample: it needs optimize=True"
                )
        _int(self.block_rows, "block_rows", 1)
        _int(self.verbose, "verbose", 0)
        r = self.random_state
        if r is not None:
            _int(r, "random_state", 0)

    def _landmark_indices(self, X: Sequence, rng: np.random.Generator) -> np.ndarray:
        n = len(X)
        if isinstance(self.landmarks, str):
            return select_landmarks(self.landmarks, self.kernel_, X, min(int(self.n_landmarks), n), rng,
                                    cache=self._cache, block_rows=int(self.block_rows))
        try:
            idx = np.asarray(self.landmarks)
        except (TypeError, ValueError):
            raise ParameterTypeError("landmarks must be a method name or a sequence of indices") from None
        if idx.ndim != 1 or idx.size == 0 or idx.dtype.kind not in "iu":
            raise ParameterTypeError(f"landmark indices must be a non-empty 1-D sequence of integers, got {idx!r:.60}")
        if idx.min() < 0 or idx.max() >= n or len(np.unique(idx)) != idx.size:
            raise ParameterError(f"landmark indices must be distinct and in [0, {n}), got {idx!r:.60}")
        return idx.astype(np.int64)

    def _check_memory(self, n: int) -> None:
        """Refuse, before any kernel is evaluated, a fit whose n × m arrays cannot fit the host's available
        memory (the kernel walk's arrays and :data:`EXTRA_NM_ARRAYS`)."""
        if isinstance(self.landmarks, str):
            m = min(int(self.n_landmarks), n)
        else:  # given indices (checked with the landmarks; anything but a 1-D sequence fails there)
            m = int(np.asarray(self.landmarks).size)
        extra = EXTRA_NM_ARRAYS + (1 if int(self.n_neighbors) > 0 else 0)  # the local correction's V (float32), kept
        check_fit_memory(
            self.kernel, n, m, extra, f"a low-rank Gaussian process on {n} points with {m} landmarks",
            "use fewer landmarks or fit on a sample of the points (a fitted model screens any number of "
            "molecules: mgkflow predict)",
        )  # fmt: skip

    def _say(self, text: str) -> None:
        if self.verbose:
            print(f"mgkflow: {text}", file=sys.stderr, flush=True)

    # ------------------------------------------------------------------ fitting
    def _run(self, gradient: bool):
        return _lowrank(
            self.kernel_, self._X, self.X_landmarks_, self._y, self.approximation, float(self.jitter), gradient,
            self._cache, self._workspace,
        )

    def _evaluate(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        self.kernel_.theta = theta
        self.n_evaluations_ += 1
        try:
            value, g, _, _ = self._run(True)
        except NotPositiveDefiniteError:
            return -np.inf, np.zeros_like(theta)
        return value, g

    def fit(self, X: Sequence, y: Any) -> LowRankGPR:
        """Choose the landmarks, fit the hyperparameters (unless ``optimize=False``) and the posterior."""
        self._check()
        _check_sets(X, X)
        try:
            y = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError):
            raise ParameterTypeError(f"y must be numbers, one per sample, got {y!r:.60}") from None
        if y.ndim != 1 or len(y) != len(X) or len(y) < 2:
            raise ParameterError(f"y must be one number per sample of X (at least 2), got shape {y.shape} for {len(X)}")
        if not np.all(np.isfinite(y)):
            raise ParameterError("y has NaN or infinite values")
        self._check_memory(len(y))
        t0 = time.perf_counter()
        self._y_mean = float(y.mean()) if self.normalize_y else 0.0
        self._y_std = float(y.std()) if self.normalize_y and y.std() > 0 else 1.0
        self._X = X if isinstance(X, np.ndarray) else list(X)
        self._y = (y - self._y_mean) / self._y_std
        self.kernel_ = clone(self.kernel)
        self.n_evaluations_ = 0
        self.sample_seconds_ = 0.0
        self._cache: dict | None = {}
        self._workspace: tuple | None = ({}, {})  # the n × m and m × m arrays of a step, kept for the next
        rng = np.random.default_rng(self.random_state)
        try:
            d = kernel_diag(self.kernel_, self._X, cache=self._cache)
            if not np.all(d.value - d.signal > 0):
                raise ParameterError(
                    "LowRankGPR needs white noise in the kernel (e.g. kernel + WhiteKernel(1e-2)): "
                    "its low-rank covariance is singular without"
                )
            sample = self.hyperparameter_sample is not None and bool(self.kernel_.n_dims)
            if sample:
                self._fit_on_sample(rng)
            idx = self._landmark_indices(self._X, rng)
            self.landmark_indices_ = idx
            self.n_landmarks_ = len(idx)
            self.X_landmarks_ = _take(self._X, idx)
            self.landmark_seconds_ = time.perf_counter() - t0 - self.sample_seconds_
            how = self.landmarks if isinstance(self.landmarks, str) else "given"
            self._say(f"low-rank fit: {len(idx)} landmarks ({how}) of {len(y)} in {self.landmark_seconds_:.1f} s")
            if self.optimize and self.kernel_.n_dims and not sample:
                fit_hyperparameters(self.kernel_, self._evaluate, self.n_restarts, self.max_iter, rng, self._say,
                                    "low-rank fit ", self.approximation)  # fmt: skip
            self._posterior()
        finally:
            self._cache = self._workspace = None
            del self._X, self._y
        self.fit_seconds_ = time.perf_counter() - t0
        self._say(f"low-rank fit done: {self.approximation} = {self.objective_value_:.6g} after {self.n_evaluations_} "
                  f"evaluations in {self.fit_seconds_:.1f} s; kernel {self.kernel_}")
        return self

    def _fit_on_sample(self, rng: np.random.Generator) -> None:
        """``kernel_``'s hyperparameters from an exact GP on ``hyperparameter_sample`` random training points (the
        scaled targets as they are: the hyperparameters keep their meaning on all points)."""
        n = len(self._y)
        rows = np.sort(rng.choice(n, size=min(int(self.hyperparameter_sample), n), replace=False))
        t0 = time.perf_counter()
        gp = GraphGPR(self.kernel_, normalize_y=False, n_restarts=int(self.n_restarts), max_iter=int(self.max_iter),
                      random_state=int(rng.integers(2**31)), verbose=int(self.verbose))  # fmt: skip
        gp.fit(_take(self._X, rows), self._y[rows])
        self.kernel_ = gp.kernel_
        for part in (self.kernel_, *self.kernel_.get_params(deep=True).values()):
            if isinstance(part, Cached):
                part._last = None  # the sample's s × s blocks (3.2 GB a view at s = 20,000): not needed again
        self.n_evaluations_ += int(gp.n_evaluations_)
        self.sample_seconds_ = time.perf_counter() - t0
        self._say(f"low-rank fit: hyperparameters from the exact GP on {len(rows)} of {n} points in "
                  f"{self.sample_seconds_:.1f} s: {self.kernel_}")  # fmt: skip

    def _posterior(self) -> None:
        try:
            value, _, f, beta = self._run(False)
        except NotPositiveDefiniteError as exc:
            raise NotPositiveDefiniteError(
                f"the fitted low-rank covariance is not positive definite ({exc}); raise jitter or add noise"
            ) from exc
        self.objective_value_ = float(value)
        self._L_A, self._L_C = f.L_A, f.L_C
        self._w_mean = _solve_l(f.L_A, _solve_l(f.L_C, beta, trans=1), trans=1)  # B⁻¹ K_mn Λ⁻¹ y
        self._local = None
        if int(self.n_neighbors) > 0:
            # the local correction's training side: inputs, landmark features V as rows (n × m, float32: the
            # neighbour search and Q(N, N) only; a row per point, so a neighbourhood's rows are one gather),
            # their norms and the residuals of the low-rank mean (scaled targets)
            VT = np.ascontiguousarray(f.V.T, dtype=np.float32)
            norm = np.sqrt(np.einsum("ij,ij->i", VT, VT, dtype=np.float64))
            resid = self._y - f.Knm @ self._w_mean
            self._local = (self._X, VT, norm, resid)
            self._local_rows = True
        self.local_noise_ = 0.0
        if self._local is not None and self.local_noise == "auto":
            self.local_noise_ = _local_noise(self.kernel_, self._local, f.V, int(self.n_neighbors),
                                             self.random_state, self._say)  # fmt: skip

    # ------------------------------------------------------------------ pickling
    _FACTORS = ("_L_A", "_L_C")

    def __getstate__(self) -> dict:
        # the two m × m Cholesky factors as their lower triangles (zeros above): half a model file's bytes
        # at m = 2,000 (64 MB of 73); the solves read the lower triangle only, so predictions are unchanged
        state = self.__dict__.copy()
        for name in self._FACTORS:
            L = state.get(name)
            if isinstance(L, np.ndarray) and L.ndim == 2:
                state[name] = ("lower triangle", L.shape[0], L[np.tril_indices(L.shape[0])])
        return state

    def __setstate__(self, state: dict) -> None:
        state.setdefault("n_neighbors", 0)  # a model pickled before the local correction
        state.setdefault("local_noise", "fitted")  # ... or before its noise was chosen (session 28)
        state.setdefault("local_noise_", 0.0)
        local = state.get("_local")
        if local is not None and not state.get("_local_rows"):  # session 25's models kept V as m × n
            X_train, V, norm, resid = local
            state["_local"] = (X_train, np.ascontiguousarray(V.T), norm, resid)
            state["_local_rows"] = True
        for name in self._FACTORS:  # a model pickled before the triangles keeps its full matrices
            packed = state.get(name)
            if isinstance(packed, tuple) and len(packed) == 3 and packed[0] == "lower triangle":
                L = np.zeros((packed[1], packed[1]))
                L[np.tril_indices(packed[1])] = packed[2]
                state[name] = L
        self.__dict__.update(state)

    # ------------------------------------------------------------------ prediction
    def predict(self, X: Sequence, return_std: bool = False):
        """Posterior mean (and standard deviation of a noisy observation with ``return_std``) at X."""
        if not hasattr(self, "_w_mean"):
            raise ParameterError("this LowRankGPR is not fitted yet: call fit(X, y) first")
        if not isinstance(return_std, bool | np.bool_):
            raise ParameterTypeError(f"return_std must be True or False, got {return_std!r:.60}")
        _check_sets(X, X)
        Ks = np.asarray(self.kernel_(X, self.X_landmarks_), dtype=np.float64)
        mean = Ks @ self._w_mean
        local = getattr(self, "_local", None)
        if not return_std and local is None:
            return mean * self._y_std + self._y_mean
        v = _solve_l(self._L_A, Ks.T)
        var = None
        if return_std:
            w = _solve_l(self._L_C, v)
            var = self.kernel_.diag(X) - np.einsum("ij,ij->j", v, v) + np.einsum("ij,ij->j", w, w)
        if local is not None:
            self._correct(X, v, mean, var, local)
        mean = mean * self._y_std + self._y_mean
        if not return_std:
            return mean
        return mean, np.sqrt(np.clip(var, 0.0, None)) * self._y_std

    def _correct(self, X: Sequence, v: np.ndarray, mean: np.ndarray, var: np.ndarray | None, local: tuple) -> None:
        """Add the local correction (module docstring) to ``mean`` and ``var`` in place (scaled units); ``v``:
        the points' landmark features L_A⁻¹ K(Z, X).

        The points go in chunks of :data:`CORRECTION_CHUNK`: the chunk's points and the union of their
        neighbours make one input list, whose kernel matrices (one per point: its neighbours, then itself)
        come from :func:`~mgkflow.learn.set_grams.set_grams`, the graph kernels' pairs solved as pair lists over
        that list (its graphs prepared and packed once a chunk, not once a point)."""
        X_train, VT, norm, resid = local
        k = min(int(self.n_neighbors), VT.shape[0])
        extra = float(getattr(self, "local_noise_", 0.0))
        if k < 1 or not np.isfinite(extra):  # (n_neighbors set to 0 after the fit, or the correction fitted the
            return  # left-out training points worse than the plain mean: the low-rank prediction)
        n_pred = v.shape[1]
        t0 = said = time.perf_counter()
        for c0 in range(0, n_pred, CORRECTION_CHUNK):
            c1 = min(c0 + CORRECTION_CHUNK, n_pred)
            near = _neighbours(v[:, c0:c1], VT, norm, k)
            used, inverse = np.unique(near, return_inverse=True)
            Z = _concat(_take(X_train, used), _take(X, range(c0, c1)))
            sets = np.concatenate([inverse.reshape(near.shape), len(used) + np.arange(c1 - c0)[:, None]], axis=1)
            for r, G in set_grams(self.kernel_, Z, sets):
                # a few BLAS threads: both BLAS libraries (numpy's products, scipy's factors) on every core
                # spun against each other, 34 ms a 512 × 512 Cholesky factor on a 16-core host (S26-C)
                with threadpool_limits(limits=blas_threads(k), user_api="blas"):
                    for j in range(len(G)):
                        t, N = c0 + r + j, near[r + j]
                        # the neighbours' block has the white noise on its diagonal (R(N, N) + Λ_N once Q is
                        # taken off), the point's row none (a cross entry)
                        A, rr = _residual_system(G[j], VT[N], v[:, t])
                        A[np.diag_indices(k)] += extra
                        try:
                            L = sla.cho_factor(0.5 * (A + A.T), lower=True, check_finite=False)
                        except np.linalg.LinAlgError:
                            continue  # (R(N, N) + Λ_N not positive definite in float32 features: the low-rank value)
                        mean[t] += rr @ sla.cho_solve(L, resid[N], check_finite=False)
                        if var is not None:
                            var[t] -= rr @ sla.cho_solve(L, rr, check_finite=False)
                done = c0 + r + len(G)
                if self.verbose and time.perf_counter() - said > 30:
                    said = time.perf_counter()
                    rate = done / (said - t0)
                    self._say(f"local correction: {done} of {n_pred} points in {said - t0:.0f} s ({rate:.3g}/s, "
                              f"{(n_pred - done) / rate:.0f} s left)")  # fmt: skip


def _residual_system(G: np.ndarray, VN: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The local GP's system of one point: R(N, N) + Λ_N and R(x, N) from its (k + 1) × (k + 1) kernel matrix ``G``
    (neighbours, then the point), the neighbours' landmark features ``VN`` (rows) and the point's ``v``."""
    k = len(VN)
    VN = VN.astype(np.float64)
    return G[:k, :k] - VN @ VN.T, G[k, :k] - VN @ v


def _local_noise(kernel: Any, local: tuple, V: np.ndarray, n_neighbors: int, seed: int | None, say: Any) -> float:
    """The noise the local correction adds to the fitted one (``inf``: no correction): the level of
    :data:`LOCAL_NOISE_GRID` (times the signal variance) whose leave-one-out corrections of up to
    :data:`LOCAL_NOISE_SAMPLE` training points, each from its k nearest other training points, leave the least
    squared residual, unless the plain low-rank mean (residual r_i itself) leaves less; ``local``: the fitted
    model's (X_train, V as float32 rows, their norms, residuals), ``V`` the training points' landmark features."""
    X_train, VT, norm, resid = local
    n = VT.shape[0]
    k = min(n_neighbors, n - 1)
    if k < 1:
        return 0.0
    t0 = time.perf_counter()
    # (seed 0 without random_state: a fit's predictions do not change from run to run)
    rng = np.random.default_rng(0 if seed is None else seed)
    rows = np.sort(rng.choice(n, size=min(LOCAL_NOISE_SAMPLE, n), replace=False))
    d = kernel_diag(kernel, _take(X_train, rows))
    levels = np.array(LOCAL_NOISE_GRID) * max(float(np.mean(d.signal)), 0.0)
    near = _neighbours(V[:, rows], VT, norm, k, exclude=rows)
    used, inverse = np.unique(np.concatenate([near.ravel(), rows]), return_inverse=True)
    sets = np.concatenate([inverse[: near.size].reshape(near.shape), inverse[near.size :, None]], axis=1)
    errors = np.zeros(len(levels))
    plain = 0.0
    for r, G in set_grams(kernel, _take(X_train, used), sets):
        with threadpool_limits(limits=blas_threads(k), user_api="blas"):
            for j in range(len(G)):
                i, N = rows[r + j], near[r + j]
                A, rr = _residual_system(G[j], VT[N], V[:, i])
                w, Q = np.linalg.eigh(0.5 * (A + A.T))
                a, b = Q.T @ rr, Q.T @ resid[N]
                plain += resid[i] ** 2
                for h, lev in enumerate(levels):
                    lam = w + lev
                    # (not positive definite: the correction keeps the low-rank value, as in _correct)
                    pred = float(np.sum(a * b / lam)) if lam.min() > 0 else 0.0
                    errors[h] += (resid[i] - pred) ** 2
    # a level above the fitted noise, or no correction, only where it leaves LOCAL_NOISE_MARGIN less (the sample's
    # sum is noisy: on FreeSolv, one 128-point sample preferred a level that lost 6% on the test set)
    best = int(np.argmin(errors))
    if errors[best] > (1.0 - LOCAL_NOISE_MARGIN) * errors[0]:
        best = 0
    chosen = float(levels[best]) if plain >= (1.0 - LOCAL_NOISE_MARGIN) * errors[best] else float("inf")
    rms = ", ".join(f"{lev:.2g}: {np.sqrt(e / len(rows)):.4g}" for lev, e in zip(levels, errors, strict=True))
    say(f"local correction: noise {'+ ' + format(chosen, '.3g') if np.isfinite(chosen) else 'none: off'} "
        f"(left-out residuals by added noise {rms}; plain {np.sqrt(plain / len(rows)):.4g}; {len(rows)} "
        f"points in {time.perf_counter() - t0:.1f} s)")
    return chosen


def _neighbours(
    v: np.ndarray, VT: np.ndarray, norm: np.ndarray, k: int, exclude: np.ndarray | None = None
) -> np.ndarray:
    """The k training points nearest each column of ``v`` by the cosine of the landmark features (the rows of
    ``VT``, their norms ``norm``): a (columns × k) array of indices, in no particular order; ``exclude``: one
    training point per column that is not its neighbour (leave-one-out)."""
    n = VT.shape[0]
    out = np.empty((v.shape[1], k), dtype=np.int64)
    for b0 in range(0, v.shape[1], 256):
        vb = v[:, b0 : b0 + 256]
        cos = (vb.T.astype(np.float32) @ VT.T) / np.maximum(np.outer(np.linalg.norm(vb, axis=0), norm), 1e-300)
        if exclude is not None:
            cos[np.arange(len(cos)), exclude[b0 : b0 + 256]] = -np.inf
        if k < n - (exclude is not None):
            out[b0 : b0 + len(cos)] = np.argpartition(-cos, k - 1, axis=1)[:, :k]
        else:  # every (other) training point
            out[b0 : b0 + len(cos)] = np.argsort(-cos, axis=1)[:, :k]
    return out
