"""StartProbabilities and the size kernels (mgkflow.learn): K_p from the pooled nodal similarities
against the graph kernel with p given per node (the oracle), gradients against central
differences, the class map (deterministic, fixed, carried by clone and pickling), the caches,
scikit-learn composition, a GraphGPR fit, and clear errors."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.gaussian_process.kernels import WhiteKernel

from mgkflow import Graph, MarginalizedGraphKernel
from mgkflow.errors import ParameterError, ParameterTypeError
from mgkflow.kernels import KroneckerDelta
from mgkflow.learn import ExpSimilarity, GraphGPR
from mgkflow.learn import start_probability as spmod
from mgkflow.learn.contract import contracted_gradient, cross_kernel, kernel_diag
from mgkflow.learn.size_kernel import SizeKernel, SizeRatioKernel
from mgkflow.learn.start_probability import StartProbabilities, class_counts


def _graph(n, elements, seed, extra_edges=1):
    """A connected graph: a path over n nodes plus a random chord; node labels element and h."""
    rng = np.random.default_rng(seed)
    A = np.zeros((n, n))
    for i in range(n - 1):
        A[i, i + 1] = A[i + 1, i] = 1.0
    for _ in range(extra_edges):
        i, j = rng.choice(n, 2, replace=False) if n > 2 else (0, n - 1)
        if i != j:
            A[i, j] = A[j, i] = 1.0
    return Graph(A, node_labels={"element": np.asarray(elements, dtype=np.int64), "h": np.arange(n) % 2})


def _graphs(seed=0, count=5):
    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        n = int(rng.integers(2, 7))
        el = rng.choice([6, 6, 6, 7, 8, 9, 17], size=n)
        out.append(_graph(n, el, seed * 100 + k))
    return out


def _mgk(backend="exact", p=1.0, normalize=False, lmin=0):
    return MarginalizedGraphKernel(
        KroneckerDelta(0.4, "element", h_bounds="fixed") * KroneckerDelta(0.7, "h", h_bounds="fixed"),
        q=0.25,
        q_bounds="fixed",
        p=p,
        backend=backend,
        normalize=normalize,
        lmin=lmin,
    )


def _oracle(k: StartProbabilities, scale: float = 1.0):
    """The graph kernel with each node's p set from its class: the direct evaluation."""
    classes = list(k.classes)
    pfull = np.concatenate([[1.0], np.asarray(k._p_free())])

    def p_of(g):
        v = g.node_labels[k.field]
        idx = np.array([classes.index(x) if x in classes else k.max_classes for x in v.tolist()])
        return scale * pfull[idx]

    inner = k.kernel
    return MarginalizedGraphKernel(
        inner.node_kernel, inner.edge_kernel, q=inner.q, p=p_of, backend="exact", normalize=k.normalize, lmin=inner.lmin
    )


def _rel(a, b):
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))


def _set_theta_error(k, X, Y=None, eps=1e-6):
    """‖central differences − analytic‖ / ‖analytic‖ of dK/dθ (θ set in place, caches kept)."""
    K, dK = k(X, eval_gradient=True) if Y is None else k(X, Y, eval_gradient=True)
    th = k.theta.copy()
    num = np.empty_like(dK)
    for j in range(th.size):
        e = np.zeros_like(th)
        e[j] = eps
        k.theta = th + e
        up = k(X) if Y is None else k(X, Y)
        k.theta = th - e
        down = k(X) if Y is None else k(X, Y)
        num[:, :, j] = (up - down) / (2 * eps)
    k.theta = th
    return np.linalg.norm(num - dK) / np.linalg.norm(dK)


# ---------------------------------------------------------------------------- against the oracle
@pytest.mark.parametrize("normalize", [False, True])
def test_gram_and_cross_equal_the_graph_kernel_with_p_per_node(normalize):
    X, Y = _graphs(0, 5), _graphs(1, 3)
    k = StartProbabilities(_mgk(), max_classes=3, p=[0.3, 2.5, 0.7], normalize=normalize)
    K = k(X)
    oracle = _oracle(k)
    assert _rel(K, oracle(X)) <= 1e-10
    assert _rel(k(X, Y), oracle(X, Y)) <= 1e-10
    assert _rel(k(Y, X), oracle(Y, X)) <= 1e-10
    assert _rel(k.diag(Y), oracle.diag(Y)) <= 1e-10
    assert np.array_equal(K, K.T)


def test_scalar_inner_p_and_lmin_and_normalized_inner():
    """The inner kernel's scalar p multiplies every class's p; lmin=1 stays bilinear in p; an inner
    normalize=True is ignored (the kernel is called unnormalized)."""
    X = _graphs(2, 4)
    k = StartProbabilities(_mgk(p=1.5, lmin=1, normalize=True), max_classes=2, p=[0.4, 3.0], normalize=False)
    assert _rel(k(X), _oracle(k, scale=1.5)(X)) <= 1e-10


def test_value_with_cpu_backend():
    X = _graphs(3, 4)
    k = StartProbabilities(_mgk("cpu"), max_classes=2, p=[0.5, 2.0])
    assert _rel(k(X), _oracle(k)(X)) <= 1e-9


def test_row_blocks_give_the_same_matrix(monkeypatch):
    X, Y = _graphs(4, 6), _graphs(5, 3)
    k = StartProbabilities(_mgk(), max_classes=3, p=[0.3, 2.5, 0.7], normalize=False)
    K, Kc = k(X), k(Y, X)
    monkeypatch.setattr(spmod, "NODAL_BLOCK_BYTES", 8 * 20)
    k2 = StartProbabilities(_mgk(), max_classes=3, p=[0.3, 2.5, 0.7], normalize=False, classes=k.classes)
    assert np.allclose(k2(X), K, rtol=1e-12, atol=0)
    assert np.allclose(k2(Y, X), Kc, rtol=1e-12, atol=0)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(
    st.lists(st.tuples(st.integers(1, 5), st.integers(0, 10**6)), min_size=2, max_size=4),
    st.lists(st.floats(0.1, 5.0), min_size=2, max_size=2),
    st.booleans(),
)
def test_random_graphs_match_the_oracle(specs, p, normalize):
    gs = []
    for n, seed in specs:
        rng = np.random.default_rng(seed)
        gs.append(_graph(n, rng.choice([6, 7, 8], size=n), seed))
    k = StartProbabilities(_mgk(), max_classes=2, p=p, normalize=normalize)
    assert _rel(k(gs), _oracle(k)(gs)) <= 1e-10


# ---------------------------------------------------------------------------- gradients
@pytest.mark.parametrize("normalize", [False, True])
def test_gradient_against_central_differences(normalize):
    X = _graphs(6, 5)
    k = StartProbabilities(_mgk(), max_classes=3, p=[0.3, 2.5, 0.7], normalize=normalize)
    K, dK = k(X, eval_gradient=True)
    assert dK.shape == (5, 5, 3)
    assert _set_theta_error(k, X) <= 1e-6


def test_cross_gradient_against_central_differences():
    X, Y = _graphs(7, 4), _graphs(8, 3)
    k = StartProbabilities(_mgk(), max_classes=3, p=[0.3, 2.5, 0.7])
    k(X)
    assert _set_theta_error(k, Y, X) <= 1e-6


def test_gradient_through_exp_similarity_and_composition():
    X = _graphs(9, 5)
    k = C(1.3) * ExpSimilarity(StartProbabilities(_mgk(), max_classes=2, p=[0.5, 1.7]), gamma=3.0) + WhiteKernel(0.1)
    names = [h.name for h in k.hyperparameters if not h.fixed]
    assert names == ["k1__k1__constant_value", "k1__k2__gamma", "k1__k2__kernel__p", "k2__noise_level"]
    assert k.n_dims == 5
    assert _set_theta_error(k, X) <= 1e-6


def test_fixed_p_has_no_hyperparameter():
    X = _graphs(10, 3)
    k = StartProbabilities(_mgk(), max_classes=2, p_bounds="fixed")
    K, dK = k(X, eval_gradient=True)
    assert k.n_dims == 0 and k.theta.size == 0 and dK.shape == (3, 3, 0)


def test_contract_functions_handle_the_kernel():
    """cross_kernel, kernel_diag and contracted_gradient (a low-rank GP's pieces) agree with the
    kernel's own Gram matrix."""
    X = _graphs(11, 6)
    k = C(1.3) * ExpSimilarity(StartProbabilities(_mgk(), max_classes=2, p=[0.5, 1.7])) + WhiteKernel(0.1)
    J, dJ = k(X, eval_gradient=True)
    Kc, dKc = cross_kernel(k, X[:4], X[4:], eval_gradient=True)
    assert np.allclose(Kc, J[:4, 4:], rtol=1e-12) and np.allclose(dKc, dJ[:4, 4:], rtol=1e-10, atol=1e-14)
    d = kernel_diag(k, X, eval_gradient=True)
    assert np.allclose(d.value, np.diag(J)) and np.allclose(d.gradient, np.einsum("iih->ih", dJ), atol=1e-14)
    W = np.arange(8.0).reshape(4, 2)
    _, g = contracted_gradient(k, X[:4], X[4:], W, block_rows=2)
    assert np.allclose(g, np.einsum("ij,ijh->h", W, dJ[:4, 4:]), rtol=1e-10)


# ---------------------------------------------------------------------------- classes, caches, API
def test_class_rule_is_deterministic_and_pooled():
    g1 = _graph(4, [8, 6, 6, 17], 0)
    g2 = _graph(3, [7, 8, 6], 1)
    assert class_counts([g1, g2], "element") == [(6, 3), (8, 2), (7, 1), (17, 1)]
    k = StartProbabilities(_mgk(), max_classes=3)
    k([g1, g2])
    assert k.classes == (6, 8, 7)  # 17 ties with 7 and is larger: pooled in "other"
    assert k._class_index([g1, g2]).tolist() == [1, 0, 0, 3, 2, 1, 0]


def test_classes_fixed_after_first_call_and_carried_by_clone_and_pickle():
    X, Z = _graphs(12, 4), [_graph(3, [9, 9, 9], 5)]
    k = StartProbabilities(_mgk(), max_classes=2, p=[0.5, 3.0])
    K = k(X)
    classes = k.classes
    k(Z)  # another set: the classes stay
    assert k.classes == classes
    k2 = pickle.loads(pickle.dumps(k))
    assert k2.classes == classes and np.allclose(k2(X), K, rtol=1e-13)
    assert clone(k).classes == classes and k.clone_with_theta(k.theta).classes == classes
    assert k2 == k
    k.set_params(classes=None)
    k(Z)
    assert k.classes == (9,)


def test_cache_solves_once_per_set(monkeypatch):
    X, Y = _graphs(13, 4), _graphs(14, 2)
    k = StartProbabilities(_mgk(), max_classes=2)
    calls = []
    real = k._nodal
    monkeypatch.setattr(k, "_nodal", lambda A, B: calls.append((len(A), None if B is None else len(B))) or real(A, B))
    k(X, eval_gradient=True)
    n = len(calls)
    k.theta = k.theta + 0.3
    k(X, eval_gradient=True)
    k.diag(X)
    assert len(calls) == n  # no new solve: S kept, self-similarities from the Gram matrix
    k(Y, X)
    k(Y, X)
    # the cross block once, and one self solve per graph of Y (those of X are kept)
    assert calls[n:] == [(2, 4), (1, None), (1, None)]


def test_graph_gpr_fits_with_it():
    X = _graphs(15, 10)
    y = np.array([g.n_nodes + 0.5 * np.sum(g.node_labels["element"] == 8) for g in X], dtype=np.float64)
    k = C(1.0) * ExpSimilarity(StartProbabilities(_mgk("cpu"), max_classes=2)) + WhiteKernel(0.1)
    gp = GraphGPR(k, verbose=0, max_iter=20).fit(X, y)
    sp = gp.kernel_.k1.k2.kernel
    assert sp.classes is not None and np.asarray(sp.p).shape == (2,)
    mean, std = gp.predict(_graphs(16, 3), return_std=True)
    assert mean.shape == (3,) and np.all(np.isfinite(std))
    assert k.k1.k2.kernel.classes is None  # the template is not touched (the fit clones it)


def test_errors():
    free = MarginalizedGraphKernel(KroneckerDelta(0.5, "element"), backend="exact")
    with pytest.raises(ParameterError, match="must be fixed"):
        StartProbabilities(free)
    with pytest.raises(ParameterError, match="scalar"):
        StartProbabilities(_mgk(p="element"))
    with pytest.raises(ParameterTypeError, match="MarginalizedGraphKernel"):
        StartProbabilities(SizeKernel())
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ParameterError, match="max_classes"):
            StartProbabilities(_mgk(), max_classes=bad)
    with pytest.raises(ParameterError, match="p must be one number"):
        StartProbabilities(_mgk(), max_classes=2, p=[1.0, 2.0, 3.0])
    with pytest.raises(ParameterError, match="> 0"):
        StartProbabilities(_mgk(), max_classes=2, p=[1.0, 0.0])
    with pytest.raises(ParameterError, match="p_bounds"):
        StartProbabilities(_mgk(), p_bounds=(2.0, 1.0))
    with pytest.raises(ParameterError, match="classes"):
        StartProbabilities(_mgk(), max_classes=2, classes=(6, 7, 8))
    with pytest.raises(ParameterError, match="no node label field 'charge'"):
        StartProbabilities(_mgk(), field="charge")(_graphs(0, 2))
    with pytest.raises(ParameterTypeError, match="sequence"):
        StartProbabilities(_mgk())(_graphs(0, 1)[0])
    with pytest.raises(ParameterError, match="max_memory_gb"):
        StartProbabilities(_mgk(), max_memory_gb=1e-12)(_graphs(0, 2))
    with pytest.raises(ParameterError, match="invalid parameter"):
        StartProbabilities(_mgk()).set_params(nope=1)


# ---------------------------------------------------------------------------- size kernels
@pytest.mark.parametrize("kernel", [SizeKernel(3.0), SizeRatioKernel(0.7)])
def test_size_kernels_gradient_psd_and_api(kernel):
    rng = np.random.default_rng(0)
    X = [Graph(np.zeros((n, n))) for n in rng.integers(1, 40, size=12)]
    assert _set_theta_error(kernel, X) <= 1e-6
    assert _set_theta_error(kernel, X[:5], X[5:]) <= 1e-6
    K = kernel(X)
    assert np.linalg.eigvalsh(K).min() >= -1e-12 and np.allclose(kernel.diag(X), 1.0)
    assert clone(kernel) == kernel and pickle.loads(pickle.dumps(kernel)) == kernel
    comp = C(2.0) * kernel + WhiteKernel(0.1)
    Kc, dKc = cross_kernel(comp, X[:3], X[3:], eval_gradient=True)
    J, dJ = comp(X, eval_gradient=True)
    assert np.allclose(Kc, J[:3, 3:]) and np.allclose(dKc, dJ[:3, 3:])


def test_size_ratio_equals_min_over_max():
    X = [Graph(np.zeros((n, n))) for n in (3, 7, 10)]
    n = np.array([3.0, 7.0, 10.0])
    assert np.allclose(SizeRatioKernel(1.3)(X), (np.minimum.outer(n, n) / np.maximum.outer(n, n)) ** 1.3)


def test_size_kernel_errors():
    with pytest.raises(ParameterError, match="length_scale"):
        SizeKernel(-1.0)([Graph(np.zeros((1, 1)))])
    with pytest.raises(ParameterError, match="alpha_bounds"):
        SizeRatioKernel(1.0, alpha_bounds=(0.0, 1.0))([Graph(np.zeros((1, 1)))])
    with pytest.raises(ParameterTypeError, match="not a Graph"):
        SizeKernel()([Graph(np.zeros((1, 1))), "C"])


# ---------------------------------------------------------------------------- wiring
def test_molecular_gpr_options():
    pytest.importorskip("rdkit")
    from mgkflow.learn import MolecularGPR, molecular_kernel

    smiles = ["CCO", "CCCO", "CCN", "c1ccccc1", "Cc1ccccc1", "CC(=O)O", "CCCl", "OCCO"]
    y = np.array([1.0, 1.4, 0.8, 3.0, 3.3, 0.2, 1.9, 0.5])
    m = MolecularGPR(
        descriptors=False, start_probabilities=True, size_kernel=True, n_restarts=0, max_iter=5, backend="cpu",
        verbose=0,
    ).fit(smiles, y)  # fmt: skip
    names = [h.name for h in m.kernel_.hyperparameters if not h.fixed]
    assert sum(n.endswith("kernel__p") for n in names) == 2 and sum(n.endswith("length_scale") for n in names) == 2
    assert m.predict(["CCCCO"]).shape == (1,)
    with pytest.raises(ParameterError, match="fit_graph_kernel=False"):
        molecular_kernel(start_probabilities=True, fit_graph_kernel=True)
    with pytest.raises(ParameterError, match="'element'"):
        molecular_kernel(views=[(("charge",), ("bond_order",))], start_probabilities=True)
    with pytest.raises(ParameterTypeError, match="size_kernel"):
        molecular_kernel(size_kernel=1)


def test_benchmark_study_models():
    pytest.importorskip("rdkit")
    from mgkflow.examples import property_benchmark as pb

    p = pb.prepare("freesolv", n_molecules=12)
    folds, _ = pb.benchmark(
        [p], models=("molecular_p", "molecular_size", "graph_p"), folds=2, seeds=(0,), backend="cpu"
    )
    assert len(folds) == 6 and np.all(np.isfinite(folds.rmse))
    assert "StartProbabilities" in folds.kernel[folds.model == "graph_p"].iloc[0]
