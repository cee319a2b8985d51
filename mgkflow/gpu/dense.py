"""An exact Gaussian process's dense algebra on the device: cuSOLVER's Cholesky factor, solve and inverse.

A step of an exact GP's hyperparameter fit factors the n × n training covariance K and forms the
weights W = ½ (a aᵀ − K⁻¹) of its gradient (:func:`mgkflow.learn.objectives.lml_weights`): n³ flops,
17–29 s on a 16-core GPU host at n = 20,000 (LAPACK potrf + potri, ``mgkflow/gpu/NOTES.md`` S21-3, S21-4),
which made a fit at that size take most of an hour. :class:`DeviceDense` does the same on the GPU
with cuSOLVER (``potrf``, ``potrs``, ``potri``), finishes W with the kernels of ``mgk_dense.cu`` and
sends back W (into K's own memory when the caller allows); the contraction with ∂K stays where ∂K
is (:func:`mgkflow.learn.contract.gram_contraction`).

cuSOLVER is the CUDA toolkit's library; it is loaded with :mod:`ctypes` (``libcusolver.so``, found by
the dynamic loader or under ``$CUDA_HOME``) and runs in the context of :func:`mgkflow.gpu.device.ensure_context`
(the device's primary context, which the CUDA runtime under cuSOLVER uses too). Nothing here imports
PyCUDA or loads a library before a :class:`DeviceDense` is made; :func:`available` never raises.

Matrices travel in their host bytes: a symmetric C-ordered array is the same matrix read column-major,
which is cuSOLVER's order, so nothing is transposed on either side.

Examples
--------
>>> isinstance(available(), bool)
True
>>> device_bytes(20000, 1) / 2**30  # doctest: +ELLIPSIS
2.98...
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BackendUnavailableError, ProblemTooLargeError
from . import device
from .source import template_text

__all__ = ["DeviceDense", "available", "device_bytes", "MAX_N", "SOURCE", "KERNELS", "reset"]

#: The CUDA source of the two kernels that finish cuSOLVER's results.
SOURCE = "mgk_dense.cu"
KERNELS = ("dense_diagonal", "dense_fill")
#: Largest n: cuSOLVER's 32-bit interface indexes the n × n matrix with int (n² < 2³¹).
MAX_N = 46340
#: cublasFillMode_t: the lower triangle.
_LOWER = 0
#: Tile edge and threads per block (32 × 8) of ``dense_fill``.
_TILE, _ROWS = 32, 8

_state: dict[str, Any] = {"solver": None, "available": None}
_LOCK = threading.Lock()


def reset() -> None:
    """Forget the cuSOLVER handle and the availability answer (tests with fake drivers)."""
    _state.update(solver=None, available=None)


def device_bytes(n: int, m: int = 1) -> int:
    """Device memory of a :class:`DeviceDense` for n points and m target columns, cuSOLVER's workspace aside."""
    return 8 * (n * n + n * m + n) + 4


def _library() -> ctypes.CDLL:
    """``libcusolver.so``: as the dynamic loader finds it, else under ``$CUDA_HOME`` / ``$CUDA_PATH`` or
    /usr/local/cuda."""
    tried = []
    name = ctypes.util.find_library("cusolver")
    if name:
        try:
            return ctypes.CDLL(name)
        except OSError as exc:
            tried.append(f"{name}: {exc}")
    roots = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH")] + ["/usr/local/cuda"]
    for root in filter(None, roots):
        for sub in ("lib64", "lib", "targets/x86_64-linux/lib"):
            for path in sorted(Path(root, sub).glob("libcusolver.so*"), reverse=True):
                try:
                    return ctypes.CDLL(str(path))
                except OSError as exc:
                    tried.append(f"{path}: {exc}")
    raise BackendUnavailableError(
        "the exact GP's dense algebra on the GPU needs cuSOLVER (libcusolver.so from the CUDA toolkit), "
        f"which was not found ({'; '.join(tried) or 'not on the loader path, $CUDA_HOME or /usr/local/cuda'}); "
        "linalg='cpu' runs it on the host"
    )


class CuSolver:
    """The cuSOLVER calls :class:`DeviceDense` makes, on one handle (device pointers as integers).

    Every call is checked: a status other than CUSOLVER_STATUS_SUCCESS raises RuntimeError naming it.
    """

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        self.handle = ctypes.c_void_p()
        self._check("cusolverDnCreate", lib.cusolverDnCreate(ctypes.byref(self.handle)))

    @staticmethod
    def _check(name: str, status: int) -> None:
        if status != 0:
            raise RuntimeError(f"internal: {name} returned cusolverStatus_t {status}")

    def _lwork(self, name: str, n: int, A: int) -> int:
        lwork = ctypes.c_int()
        fn = getattr(self.lib, name)
        self._check(name, fn(self.handle, _LOWER, n, ctypes.c_void_p(A), n, ctypes.byref(lwork)))
        return int(lwork.value)

    def potrf_lwork(self, n: int, A: int) -> int:
        return self._lwork("cusolverDnDpotrf_bufferSize", n, A)

    def potri_lwork(self, n: int, A: int) -> int:
        return self._lwork("cusolverDnDpotri_bufferSize", n, A)

    def potrf(self, n: int, A: int, work: int, lwork: int, info: int) -> None:
        """A's lower Cholesky factor in its lower triangle (its upper triangle untouched); ``info`` > 0 where
        A is not positive definite."""
        v = ctypes.c_void_p
        self._check("cusolverDnDpotrf", self.lib.cusolverDnDpotrf(self.handle, _LOWER, n, v(A), n, v(work), lwork,
                                                                  v(info)))  # fmt: skip

    def potrs(self, n: int, m: int, A: int, B: int, info: int) -> None:
        """B ← (L Lᵀ)⁻¹ B for the factor L in A's lower triangle (B: n × m, column-major)."""
        v = ctypes.c_void_p
        self._check("cusolverDnDpotrs", self.lib.cusolverDnDpotrs(self.handle, _LOWER, n, m, v(A), n, v(B), n, v(info)))

    def potri(self, n: int, A: int, work: int, lwork: int, info: int) -> None:
        """(L Lᵀ)⁻¹'s lower triangle over the factor L in A's lower triangle."""
        v = ctypes.c_void_p
        self._check("cusolverDnDpotri", self.lib.cusolverDnDpotri(self.handle, _LOWER, n, v(A), n, v(work), lwork,
                                                                  v(info)))  # fmt: skip


def _solver() -> Any:
    """The process's cuSOLVER handle, made once in the device context (a test may put a fake in ``_state``)."""
    with _LOCK:
        if _state["solver"] is None:
            device.ensure_context()
            try:
                _state["solver"] = CuSolver(_library())
            except RuntimeError as exc:  # cusolverDnCreate failed (no memory, a driver mismatch)
                raise BackendUnavailableError(
                    f"cuSOLVER did not start ({exc}); linalg='cpu' runs the dense algebra on the host"
                ) from exc
        return _state["solver"]


def available() -> bool:
    """True when a CUDA device is present and cuSOLVER loads (answered once per process; never raises)."""
    if _state["available"] is None:
        from ..backends.gpu import available as gpu_available

        ok = False
        if gpu_available():
            try:
                _library()
                ok = True
            except BackendUnavailableError:
                pass
        _state["available"] = ok
    return bool(_state["available"])


def _module() -> device.Module:
    return device.build_module(lambda: template_text(SOURCE), ("dense", SOURCE))


class DeviceDense:
    """The device buffers of one n-point exact GP, kept from one step of its fit to the next.

    Parameters
    ----------
    n : int
        Training points (at most :data:`MAX_N`).
    m : int
        Target columns.

    Raises
    ------
    mgkflow.errors.ProblemTooLargeError
        n is above :data:`MAX_N`, or the device has not the memory (:func:`device_bytes`).
    mgkflow.errors.BackendUnavailableError
        No cuSOLVER.
    """

    def __init__(self, n: int, m: int = 1) -> None:
        if n > MAX_N:
            raise ProblemTooLargeError(f"the device's dense algebra takes at most {MAX_N} points, got {n}")
        self.n, self.m = int(n), int(m)
        self._solver = _solver()
        cuda = device.driver()
        try:
            self._A = cuda.mem_alloc(8 * n * n)
            lwork = max(self._solver.potrf_lwork(n, int(self._A)), self._solver.potri_lwork(n, int(self._A)), 1)
            self._lwork = lwork
            self._work = cuda.mem_alloc(8 * lwork)
            self._B = cuda.mem_alloc(8 * n * m)
            self._d = cuda.mem_alloc(8 * n)
            self._info = cuda.mem_alloc(4)
        except cuda.MemoryError as exc:
            raise ProblemTooLargeError(
                f"the exact GP's {n} × {n} covariance does not fit the device's free memory "
                f"({device_bytes(n, m) / 2**30:.1f} GiB and cuSOLVER's workspace); linalg='cpu' runs it on the host"
            ) from exc
        fn = _module().function
        self._fill, self._diagonal = fn("dense_fill"), fn("dense_diagonal")

    # ------------------------------------------------------------------ steps
    def _arr(self, alloc: Any, size: int, dtype: Any = np.float64) -> device.DeviceArray:
        return device.DeviceArray(alloc, np.dtype(dtype), size)

    def _info_ok(self) -> bool:
        info = np.zeros(1, dtype=np.int32)
        device.driver().memcpy_dtoh(info, self._info)
        return int(info[0]) == 0

    def _factor(self, K: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, float] | None:
        """Upload K and Y, factor K, solve for a = K⁻¹ Y; (a, Σ log Lᵢᵢ), or None where K is not positive
        definite."""
        n, m = self.n, Y.shape[1]
        if K.shape != (n, n) or m != self.m:
            raise ValueError(f"internal: DeviceDense({n}, {self.m}) got K {K.shape} and {m} target columns")
        device.ensure_context()
        cuda = device.driver()
        cuda.memcpy_htod(self._A, K if K.flags.c_contiguous else np.ascontiguousarray(K))
        self._solver.potrf(n, int(self._A), int(self._work), self._lwork, int(self._info))
        if not self._info_ok():
            return None
        cuda.memcpy_htod(self._B, np.ascontiguousarray(Y.T))  # column-major n × m
        self._solver.potrs(n, m, int(self._A), int(self._B), int(self._info))
        a = np.empty((m, n))
        cuda.memcpy_dtoh(a, self._B)
        block = 256
        self._diagonal(grid=((n + block - 1) // block, 1), block=(block, 1, 1), A=self._arr(self._A, n * n),
                       d=self._arr(self._d, n), n=n)  # fmt: skip
        d = np.empty(n)
        cuda.memcpy_dtoh(d, self._d)
        return a.T, float(np.log(d).sum())

    def lml_weights(self, K: np.ndarray, y: np.ndarray, overwrite: bool = False) -> tuple[float, np.ndarray] | None:
        """log p(y | θ) and the weights W of its gradient, as :func:`mgkflow.learn.objectives.lml_weights`;
        None where K is not positive definite (K untouched then). With ``overwrite`` W is written into K's
        memory (K must then be contiguous)."""
        Y = np.asarray(y, dtype=np.float64)
        Y = Y[:, None] if Y.ndim == 1 else Y
        got = self._factor(K, Y)
        if got is None:
            return None
        a, logdet = got
        n, m = Y.shape
        value = -0.5 * float(np.sum(Y * a)) - m * logdet - 0.5 * n * m * np.log(2 * np.pi)
        self._solver.potri(n, int(self._A), int(self._work), self._lwork, int(self._info))
        if not self._info_ok():
            return None
        t = (n + _TILE - 1) // _TILE
        self._fill(grid=(t, t), block=(_TILE, _ROWS, 1), W=self._arr(self._A, n * n), a=self._arr(self._B, n * m),
                   n=n, m=m, scale=-0.5 * m)  # fmt: skip
        if overwrite and (K.flags.c_contiguous or K.flags.f_contiguous) and K.flags.writeable:
            out = K if K.flags.c_contiguous else K.T  # symmetric: either order holds W
        else:
            out = np.empty((n, n))
        device.driver().memcpy_dtoh(out, self._A)
        return value, out

    def cholesky(self, K: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, float] | None:
        """(L, a, Σ log Lᵢᵢ): K's lower Cholesky factor on the host (Fortran order, zero above the diagonal),
        a = K⁻¹ y and the half log-determinant; None where K is not positive definite."""
        Y = np.asarray(y, dtype=np.float64)
        got = self._factor(K, Y[:, None] if Y.ndim == 1 else Y)
        if got is None:
            return None
        a, logdet = got
        n = self.n
        L = np.empty((n, n), order="F")
        device.driver().memcpy_dtoh(L.T, self._A)  # L.T is C-ordered: the device's column-major bytes
        for j in range(1, n):  # the upper triangle still holds K
            L[:j, j] = 0.0
        return L, (a[:, 0] if Y.ndim == 1 else a), logdet

    def free(self) -> None:
        """Give the device memory back now (PyCUDA frees it too when the object is collected)."""
        for name in ("_A", "_work", "_B", "_d", "_info"):
            alloc = self.__dict__.pop(name, None)
            if alloc is not None and hasattr(alloc, "free"):
                alloc.free()
