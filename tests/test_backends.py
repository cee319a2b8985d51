"""The backend registry (:mod:`mgkflow.backends`): protocol, agreement with the exact oracle, errors,
the deprecated old module paths and the direction of imports (kernel object -> evaluation -> backends)."""

from __future__ import annotations

import ast
import importlib
import pathlib
import sys

import numpy as np
import pytest

import mgkflow
from mgkflow import Graph, MarginalizedGraphKernel
from mgkflow.backends import Backend, GradientSolution, NodalSolution, Solution, available_backends, make_backend
from mgkflow.errors import BackendUnavailableError, ParameterError
from mgkflow.kernels import KroneckerDelta, SquareExponential
from mgkflow.system import prepare_graph

#: every registered backend that runs on any machine
CPU_BACKENDS = [name for name in available_backends() if name not in ("auto", "gpu")]
NK, EK = KroneckerDelta(0.5, "l"), SquareExponential(1.3, "e")


def random_graph(n: int, seed: int) -> Graph:
    """A random weighted graph with an int node label ``l`` and a float edge label ``e``."""
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.random((n, n)) < 0.4, 1)
    upper[np.arange(n - 1), np.arange(1, n)] = True  # connected: a path through every node
    W = np.where(upper, rng.uniform(0.5, 2.0, (n, n)), 0.0)
    E = np.triu(rng.uniform(0.0, 3.0, (n, n)), 1)
    return Graph(W + W.T, node_labels={"l": rng.integers(0, 3, n)}, edge_labels={"e": E + E.T}, title=f"r{seed}")


@pytest.fixture(scope="module")
def systems():
    graphs = [random_graph(n, seed) for seed, n in enumerate((5, 7, 9))]
    return [prepare_graph(g, i, NK, EK, q=0.1) for i, g in enumerate(graphs)]


def gram_pairs(n: int) -> np.ndarray:
    iu, ju = np.triu_indices(n)
    return np.stack([iu, ju], axis=1)


def test_registry_lists_the_built_in_backends():
    assert {"auto", "cpu", "exact", "gpu"} <= set(available_backends())
    assert {"cpu", "exact"} <= set(CPU_BACKENDS)


@pytest.mark.parametrize("name", CPU_BACKENDS)
def test_cpu_backends_satisfy_the_protocol(name):
    backend = make_backend(name)
    assert isinstance(backend, Backend)
    assert backend.name == name
    assert backend.rtol == 1e-12  # rtol=None: the backend's default
    assert make_backend(name, rtol=1e-9, max_iter=7).max_iter == 7


@pytest.mark.parametrize("name", CPU_BACKENDS)
def test_cpu_backends_agree_with_the_exact_one(name, systems):
    exact = make_backend("exact")
    backend = make_backend(name)
    pairs = gram_pairs(len(systems))
    ref = exact.solve(systems, systems, pairs, NK, EK)
    sol = backend.solve(systems, systems, pairs, NK, EK)
    assert isinstance(sol, Solution) and sol.converged.all()
    np.testing.assert_allclose(sol.values, ref.values, rtol=1e-9)
    values, iterations, residuals, converged = sol  # a record unpacks like the tuple it was
    assert values is sol.values and len(iterations) == len(residuals) == len(converged) == len(pairs)

    gref = exact.solve_gradient(systems, systems, pairs, NK, EK, wrt_q=True)
    grad = backend.solve_gradient(systems, systems, pairs, NK, EK, wrt_q=True)
    assert isinstance(grad, GradientSolution) and grad.gradient.shape == (len(pairs), 3)
    np.testing.assert_allclose(grad.values, gref.values, rtol=1e-9)
    np.testing.assert_allclose(grad.gradient, gref.gradient, rtol=1e-7, atol=1e-12 * np.abs(gref.gradient).max())

    nref = exact.solve_nodal(systems, systems[:2], [(0, 1), (2, 0)], NK, EK)
    nodal = backend.solve_nodal(systems, systems[:2], [(0, 1), (2, 0)], NK, EK)
    assert isinstance(nodal, NodalSolution)
    for b, r in zip(nodal.blocks, nref.blocks, strict=True):
        np.testing.assert_allclose(b, r, rtol=1e-8, atol=1e-14 * np.abs(r).max())


@pytest.mark.parametrize("name", CPU_BACKENDS)
def test_the_kernel_gives_the_same_matrix_on_every_cpu_backend(name):
    graphs = [random_graph(n, 10 + n) for n in (4, 6)]
    K = MarginalizedGraphKernel(NK, EK, q=0.2, backend=name)(graphs)
    ref = MarginalizedGraphKernel(NK, EK, q=0.2, backend="exact")(graphs)
    np.testing.assert_allclose(K, ref, rtol=1e-9)


def test_unknown_backend_names_raise_parameter_error():
    with pytest.raises(ParameterError, match="unknown backend"):
        make_backend("fortran")
    with pytest.raises(ParameterError, match="backend must be"):
        MarginalizedGraphKernel(backend="fortran")


def test_gpu_without_a_device_raises_backend_unavailable():
    if mgkflow.gpu_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(BackendUnavailableError, match="backend='gpu'"):
        make_backend("gpu")
    kern = MarginalizedGraphKernel(backend="gpu")
    with pytest.raises(RuntimeError, match="PyCUDA"):  # BackendUnavailableError is a RuntimeError
        kern([random_graph(3, 0)])
    assert make_backend("auto").name == "cpu"


def test_kernel_keeps_its_backend_while_the_options_stay():
    kern = MarginalizedGraphKernel(backend="cpu")
    be = kern._get_backend()
    assert be is kern._get_backend() and be.rtol == 1e-12
    kern.set_params(max_iter=50)
    assert kern._get_backend() is not be and kern._get_backend().max_iter == 50
    exact = MarginalizedGraphKernel(backend="exact")
    assert exact._get_backend() is exact._oracle()


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("mgkflow.cpu_solver", "mgkflow.backends.exact"),
        ("mgkflow.cpu_engine", "mgkflow.backends.cpu"),
        ("mgkflow.gradient", "mgkflow.evaluation.gradient"),
    ],
)
def test_old_module_paths_are_deprecated_aliases(old, new, monkeypatch):
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=new):
        mod = importlib.import_module(old)
    assert mod is importlib.import_module(new)


def test_cpu_backend_is_a_deprecated_name_of_the_exact_backend():
    from mgkflow.backends import exact

    with pytest.warns(DeprecationWarning, match="ExactBackend"):
        cls = exact.CPUBackend
    assert cls is exact.ExactBackend
    with pytest.raises(AttributeError):
        exact.NoSuchBackend  # noqa: B018


def _imports(path: pathlib.Path, package: str) -> set[str]:
    """Absolute names of every module ``path`` imports, at module level or inside functions."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            out.add(name)
            out.update(f"{name}.{a.name}" for a in node.names)
    return out


@pytest.mark.parametrize(("folder", "forbidden"), [("backends", ("mgk", "evaluation")), ("evaluation", ("mgk",))])
def test_imports_run_one_way(folder, forbidden):
    """kernel object -> evaluation -> backends: no module imports one above it (inside functions neither)."""
    root = pathlib.Path(mgkflow.__file__).parent / folder
    for path in sorted(root.glob("*.py")):
        names = _imports(path, f"mgkflow.{folder}.{path.stem}")
        bad = {n for n in names for f in forbidden if n == f"mgkflow.{f}" or n.startswith(f"mgkflow.{f}.")}
        assert not bad, f"{path.name} imports {sorted(bad)}"


def test_register_and_unregister_a_backend():
    from mgkflow.backends import available_backends, make_backend, register, unregister
    from mgkflow.errors import ParameterError

    register("echo-test", lambda rtol, max_iter, options: make_backend("exact", rtol=rtol, max_iter=max_iter))
    try:
        assert "echo-test" in available_backends() and make_backend("echo-test").name == "exact"
        with pytest.raises(ParameterError):
            register("echo-test", lambda *a: None)
    finally:
        unregister("echo-test")
    assert "echo-test" not in available_backends()
    with pytest.raises(ParameterError):
        unregister("cpu")
