"""Remember a kernel's last Gram matrix: :class:`Cached`, for kernels whose hyperparameters stay fixed."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._wrap import KernelWrapper, check_flag, input_key, kept_inputs

__all__ = ["Cached"]


class Cached(KernelWrapper):
    """A kernel that returns its last result again when called with the same inputs and θ.

    A Gaussian-process fit evaluates the whole covariance at every optimizer step. Where one
    factor of it is expensive and has no free hyperparameter (a marginalized graph kernel with
    fixed label kernels, say), ``C * Cached(mgk) * FeatureKernel()`` computes the graph kernel
    once per fit instead of once per step. The result of the last call (with or without
    gradient) is kept with θ and the identities of the inputs (their items, for sequences of
    graphs, which are kept alive; the values, for arrays); copies are returned, so callers may
    change what they get.

    Parameters
    ----------
    kernel : sklearn.gaussian_process.kernels.Kernel
        The kernel to remember; its hyperparameters are this kernel's (``kernel__NAME``).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.gaussian_process.kernels import RBF
    >>> k = Cached(RBF(1.0))
    >>> X = np.array([[0.0], [1.0]])
    >>> k(X) is not k(X), bool(np.all(k(X) == RBF(1.0)(X)))
    (True, True)
    """

    def __init__(self, kernel: Any) -> None:
        super().__init__(kernel)
        self._last: tuple | None = None

    @property
    def requires_vector_input(self) -> bool:
        return bool(getattr(self.kernel, "requires_vector_input", True))

    def __call__(self, X, Y=None, eval_gradient=False):
        eval_gradient = check_flag(eval_gradient, "eval_gradient", "Cached")
        K, dK = self._kept(X, Y, eval_gradient)
        return (K.copy(), dK.copy()) if eval_gradient else K.copy()

    def gram_view(self, X: Any) -> np.ndarray:
        """K(X, X) as a read-only view of the kept result, without the copy a call returns
        (for callers that only read it, such as a fit's gradient contraction)."""
        view = self._kept(X, None, False)[0].view()
        view.flags.writeable = False
        return view

    def _kept(self, X, Y, eval_gradient: bool) -> tuple:
        """(K, dK or None): the kept result when inputs and θ match, else a fresh one (kept)."""
        kx, ky = input_key(X), None if Y is None else input_key(Y)
        cacheable = kx is not None and (Y is None or ky is not None)
        key = (kx, ky, self.kernel.theta.tobytes(), repr(self.kernel))  # repr: fixed hyperparameters too
        last = getattr(self, "_last", None)
        if cacheable and last is not None and last[0] == key and (last[2] is not None or not eval_gradient):
            return last[1], last[2]
        if eval_gradient:
            K, dK = self.kernel(X, eval_gradient=True) if Y is None else self.kernel(X, Y, eval_gradient=True)
        else:
            K, dK = self.kernel(X) if Y is None else self.kernel(X, Y), None
        if cacheable:
            self._last = (key, K, dK, kept_inputs(X), kept_inputs(Y))
        return K, dK

    def diag(self, X):
        return self.kernel.diag(X)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_last"] = None
        return state
