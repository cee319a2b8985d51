"""The exact GP's dense algebra on the device (mgkflow/gpu/dense.py, mgk_dense.cu) against the host's LAPACK
path (mgkflow/learn/objectives.py): on the fake driver with cuSOLVER and the two kernels emulated in numpy
(layouts, triangles, the weights' fill, the device buffers' reuse), and on a real GPU where there is one."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.linalg as sla
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C
from test_wide import FakeAlloc, fake_backend  # noqa: F401  (fixture)

from mgkflow.errors import BackendUnavailableError, ParameterError, ProblemTooLargeError
from mgkflow.gpu import dense, device
from mgkflow.learn import GraphGPR
from mgkflow.learn.objectives import lml_weights


def _spd(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, n + 5))
    return A @ A.T / n + 0.1 * np.eye(n)


class FakeSolver:
    """cuSOLVER's potrf / potrs / potri on the fake driver's memory (column-major, lower triangle), with
    scipy; like cuSOLVER, the upper triangle is never touched."""

    LWORK = {"potrf": 7, "potri": 5}

    def __init__(self) -> None:
        self.calls: list[str] = []

    @staticmethod
    def _mat(ptr: int, n: int) -> np.ndarray:
        return FakeAlloc.at(ptr, np.float64)[: n * n].reshape(n, n).T  # [r, c] = element r + c n

    def _work(self, work: int, lwork: int, name: str) -> None:
        assert lwork >= self.LWORK[name] and FakeAlloc.at(work, np.float64).size >= lwork

    def potrf_lwork(self, n: int, A: int) -> int:
        return self.LWORK["potrf"]

    def potri_lwork(self, n: int, A: int) -> int:
        return self.LWORK["potri"]

    def potrf(self, n: int, A: int, work: int, lwork: int, info: int) -> None:
        self.calls.append("potrf")
        self._work(work, lwork, "potrf")
        M = self._mat(A, n)
        low = np.tril(M)
        try:
            L = np.linalg.cholesky(low + np.tril(low, -1).T)
            code = 0
        except np.linalg.LinAlgError:
            code = 1
        if code == 0:
            M[np.tril_indices(n)] = L[np.tril_indices(n)]
        FakeAlloc.at(info, np.int32)[0] = code

    def potrs(self, n: int, m: int, A: int, B: int, info: int) -> None:
        self.calls.append("potrs")
        L = np.tril(self._mat(A, n))
        Bv = FakeAlloc.at(B, np.float64)[: n * m].reshape(m, n).T
        Bv[:] = sla.cho_solve((L, True), Bv.copy())
        FakeAlloc.at(info, np.int32)[0] = 0

    def potri(self, n: int, A: int, work: int, lwork: int, info: int) -> None:
        self.calls.append("potri")
        self._work(work, lwork, "potri")
        M = self._mat(A, n)
        inv = sla.cho_solve((np.tril(M), True), np.eye(n))
        M[np.tril_indices(n)] = inv[np.tril_indices(n)]
        FakeAlloc.at(info, np.int32)[0] = 0


class FakeDenseModule(device.Module):
    """``mgk_dense.cu`` emulated in numpy; arguments bound by the names and types its source declares."""

    def __init__(self, source: str) -> None:
        super().__init__(self, source)
        assert "dense_fill" in source

    def get_function(self, name: str) -> Any:
        mod = self

        class Func:
            num_regs = 32
            shared_size_bytes = 8 * 32 * 33

            def __call__(self, *args: Any, block: tuple, grid: tuple, shared: int = 0) -> None:
                mod.launch(name, args, block, grid)

        return Func()

    def launch(self, name: str, args: tuple, block: tuple, grid: tuple) -> None:
        params = self.signatures[name]
        assert len(args) == len(params)
        kw = {}
        for p, v in zip(params, args, strict=True):
            if p.kind == "P":
                assert isinstance(v, FakeAlloc), p
                kw[p.name] = v.view(p.dtype)
            else:
                assert type(v) is p.dtype.type, (p, type(v))
                kw[p.name] = v.item()
        n = kw["n"]
        if name == "dense_diagonal":
            assert grid[0] * block[0] >= n
            kw["d"][:n] = kw["A"][: n * n].reshape(n, n).diagonal()
            return
        assert name == "dense_fill" and block == (32, 8, 1) and grid[0] == grid[1] and grid[0] * 32 >= n
        m = kw["m"]
        W = kw["W"][: n * n].reshape(n, n).T  # [r, c] = element r + c n
        a = kw["a"][: n * m].reshape(m, n).T
        low = np.tril(kw["scale"] * W + 0.5 * (a @ a.T))
        W[:] = low + np.tril(low, -1).T


@pytest.fixture
def fake_dense(fake_backend, monkeypatch):  # noqa: F811
    import sys

    sys.modules["pycuda.compiler"].factory = FakeDenseModule
    solver = FakeSolver()
    dense.reset()
    dense._state.update(solver=solver, available=True)
    yield solver
    dense.reset()


@pytest.mark.parametrize("m", [1, 2])
@pytest.mark.parametrize("order", ["C", "F", "copy"])
def test_lml_weights_on_the_device_equal_the_host(fake_dense, m, order) -> None:
    n = 37  # not a multiple of the 32-wide tiles
    K0 = _spd(n, m)
    y = np.random.default_rng(5).normal(size=(n, m) if m > 1 else n)
    want_value, want_W = lml_weights(K0.copy(), y)
    dd = dense.DeviceDense(n, m)
    for _step in range(2):  # the buffers are reused from one step to the next
        K = np.array(K0, order="F" if order == "F" else "C")
        value, W = dd.lml_weights(K, y, overwrite=order != "copy")
        assert value == pytest.approx(want_value, rel=1e-12)
        np.testing.assert_allclose(W, want_W, rtol=1e-10, atol=1e-12)
        assert W.flags.c_contiguous
        if order == "copy":
            np.testing.assert_array_equal(K, K0)  # left alone
        else:
            assert np.shares_memory(W, K)
    assert fake_dense.calls == ["potrf", "potrs", "potri"] * 2


def test_not_positive_definite_is_none_and_leaves_k(fake_dense) -> None:
    n = 20
    K = _spd(n)
    K[3, 3] = -1.0
    before = K.copy()
    dd = dense.DeviceDense(n)
    assert dd.lml_weights(K, np.ones(n), overwrite=True) is None
    assert dd.cholesky(K, np.ones(n)) is None
    np.testing.assert_array_equal(K, before)


def test_cholesky_on_the_device_equals_scipy(fake_dense) -> None:
    n = 45
    K = _spd(n, 3)
    y = np.random.default_rng(1).normal(size=n)
    L, a, logdet = dense.DeviceDense(n).cholesky(K, y)
    want = sla.cholesky(K, lower=True)
    np.testing.assert_allclose(L, want, rtol=1e-12, atol=1e-14)
    assert np.all(np.triu(L, 1) == 0.0) and L.flags.f_contiguous
    np.testing.assert_allclose(a, sla.cho_solve((want, True), y), rtol=1e-10)
    assert logdet == pytest.approx(np.log(np.diag(want)).sum(), rel=1e-12)


def test_too_large_is_refused(fake_dense) -> None:
    with pytest.raises(ProblemTooLargeError, match="at most"):
        dense.DeviceDense(dense.MAX_N + 1)


def _fit(linalg: str, n: int = 60, **kw: Any) -> GraphGPR:
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(n, 2))
    y = np.sin(4 * X[:, 0]) + 0.1 * rng.normal(size=n)
    kernel = C(1.0) * RBF(0.5) + WhiteKernel(0.05)
    kw.setdefault("verbose", 0)
    return GraphGPR(kernel, linalg=linalg, max_iter=20, **kw).fit(X, y)


def test_a_fit_on_the_device_equals_the_host_fit(fake_dense, monkeypatch, capsys) -> None:
    host = _fit("cpu")
    gpu = _fit("gpu")
    assert host.linalg_ == "cpu" and gpu.linalg_ == "gpu"
    assert gpu.n_evaluations_ == host.n_evaluations_
    np.testing.assert_allclose(gpu.kernel_.theta, host.kernel_.theta, rtol=1e-8)
    assert gpu.objective_value_ == pytest.approx(host.objective_value_, rel=1e-10)
    np.testing.assert_allclose(gpu.alpha_, host.alpha_, rtol=1e-8)
    np.testing.assert_allclose(gpu.L_, host.L_, rtol=1e-10, atol=1e-13)
    X = np.random.default_rng(2).uniform(size=(5, 2))
    for a, b in zip(gpu.predict(X, return_std=True), host.predict(X, return_std=True), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-8)
    n_calls = len(fake_dense.calls)
    monkeypatch.setattr("mgkflow.learn.gpr.DEVICE_MIN_N", 50)
    auto = _fit("auto", verbose=1)  # at least DEVICE_MIN_N points: the device, and the fit says so
    assert auto.linalg_ == "gpu" and len(fake_dense.calls) > n_calls
    assert "the 60 × 60 algebra of each step runs on the GPU" in capsys.readouterr().err
    monkeypatch.setattr("mgkflow.learn.gpr.DEVICE_MIN_N", 61)
    assert _fit("auto").linalg_ == "cpu"


def test_a_cusolver_that_does_not_start(fake_backend, monkeypatch, capsys) -> None:  # noqa: F811
    """cusolverDnCreate failing: "auto" falls back to the host and says why, "gpu" raises an mgkflow error."""

    class Lib:
        def cusolverDnCreate(self, handle):
            return 7  # CUSOLVER_STATUS_INTERNAL_ERROR

    dense.reset()
    dense._state["available"] = True
    monkeypatch.setattr(dense, "_library", lambda: Lib())
    monkeypatch.setattr("mgkflow.learn.gpr.DEVICE_MIN_N", 10)
    try:
        gp = GraphGPR(C(1.0) * RBF(0.5) + WhiteKernel(0.05), linalg="auto", max_iter=3, verbose=1)
        X = np.linspace(0, 1, 20)[:, None]
        assert gp.fit(X, np.sin(5 * X[:, 0])).linalg_ == "cpu"
        assert "runs on the host: cuSOLVER did not start" in capsys.readouterr().err
        with pytest.raises(BackendUnavailableError, match="cusolverStatus_t 7"):
            _fit("gpu", n=20)
    finally:
        dense.reset()


def test_the_posterior_evidence_is_the_objective_at_the_fitted_theta() -> None:
    gp = _fit("cpu")
    K = gp.kernel_(gp.X_train_)
    K[np.diag_indices_from(K)] += gp.alpha
    assert gp.objective_value_ == pytest.approx(lml_weights(K, gp._y)[0], rel=1e-12)


def test_linalg_choices_without_a_gpu(monkeypatch) -> None:
    dense.reset()
    monkeypatch.setattr(dense, "available", lambda: False)
    try:
        assert _fit("auto", n=30).linalg_ == "cpu"
        with pytest.raises(BackendUnavailableError, match="linalg='cpu'"):
            _fit("gpu", n=30)
        with pytest.raises(ParameterError, match="linalg must be one of"):
            _fit("cuda", n=30)
        with pytest.raises(ParameterError, match="objective='lml'"):
            _fit("gpu", n=30, objective="loo")
        assert _fit("auto", n=30, objective="loo").linalg_ == "cpu"
    finally:
        dense.reset()


def test_a_model_pickled_before_linalg_loads() -> None:
    import pickle

    gp = _fit("cpu", n=20)
    state = gp.__getstate__()
    state.pop("linalg")
    old = GraphGPR.__new__(GraphGPR)
    old.__setstate__(state)
    assert old.get_params()["linalg"] == "auto"
    np.testing.assert_allclose(pickle.loads(pickle.dumps(old)).predict(gp.X_train_[:3]), gp.predict(gp.X_train_[:3]))


def test_the_dense_bench_times_the_host_without_a_gpu(tmp_path) -> None:
    import pandas as pd

    from mgkflow.bench.dense import main

    assert main(["--sizes", "40,70", "--reps", "2", "--no-gpu", "--out", str(tmp_path)]) == 0
    rows = pd.read_csv(tmp_path / "dense.csv")
    assert list(rows.n) == [40, 70] and set(rows["where"]) == {"cpu"} and bool((rows.seconds > 0).all())
    with pytest.raises(SystemExit):
        main(["--sizes", "1"])


# ---------------------------------------------------------------------------- a real device
def _gpu() -> bool:
    from mgkflow.backends.gpu import available

    return available()


@pytest.mark.skipif(not _gpu(), reason="needs PyCUDA and a CUDA device")
@pytest.mark.parametrize("n", [300, 2500])
def test_cusolver_weights_equal_lapack(n) -> None:
    dense.reset()
    if not dense.available():
        pytest.skip("cuSOLVER not found")
    K0 = _spd(n, 1)
    y = np.random.default_rng(4).normal(size=n)
    want_value, want_W = lml_weights(K0.copy(), y)
    dd = dense.DeviceDense(n)
    for _ in range(2):
        K = K0.copy()
        value, W = dd.lml_weights(K, y, overwrite=True)
        assert value == pytest.approx(want_value, rel=1e-10)
        assert np.linalg.norm(W - want_W) <= 1e-9 * np.linalg.norm(want_W)
        np.testing.assert_array_equal(W, W.T)
    L, a, logdet = dd.cholesky(K0, y)
    want = sla.cholesky(K0, lower=True)
    assert np.linalg.norm(L - want) <= 1e-11 * np.linalg.norm(want) and np.all(np.triu(L, 1) == 0.0)
    K = K0.copy()
    K[7, 7] = -5.0
    assert dd.lml_weights(K, y) is None
    dd.free()


@pytest.mark.skipif(not _gpu(), reason="needs PyCUDA and a CUDA device")
def test_gpu_fit_equals_cpu_fit() -> None:
    dense.reset()
    if not dense.available():
        pytest.skip("cuSOLVER not found")
    host, gpu = _fit("cpu", n=300), _fit("gpu", n=300)
    assert gpu.linalg_ == "gpu"
    np.testing.assert_allclose(gpu.kernel_.theta, host.kernel_.theta, rtol=1e-6)
    assert gpu.objective_value_ == pytest.approx(host.objective_value_, rel=1e-9)
