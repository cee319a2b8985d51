"""set_grams (mgkflow.learn.set_grams): the kernel matrices of many index sets against the kernel called on each
set, for the default molecular kernel (graph kernels as pair lists, descriptors, noise) and for kernels the walk
does not know (called per set); chunking; bad sets; the local correction of LowRankGPR on graphs, whose
kernel matrices come from it, against the kernel called per prediction."""

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF, DotProduct, Exponentiation, Matern, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from mgkflow.errors import ParameterError
from mgkflow.learn import FeatureKernel, LowRankGPR, MolecularFeaturizer, Normalized, molecular_kernel
from mgkflow.learn import lowrank as lowrank_module
from mgkflow.learn.contract import _take
from mgkflow.learn.set_grams import set_grams

SMILES = ["C", "CC", "CCC", "CCCC", "CCO", "CCCO", "c1ccccc1", "Cc1ccccc1", "CC(C)C", "C1CCCCC1", "CCN", "CCCCCC",
          "CCCCC", "Cc1ccccc1C", "OCCO", "CC(=O)O", "CCOC(=O)C", "c1ccncc1", "ClCCl", "CC(C)(C)O", "NCCN", "C=CC=C",
          "OC1CCCCC1", "CSC"]  # fmt: skip


@pytest.fixture(scope="module")
def molecules():
    pytest.importorskip("rdkit")
    return MolecularFeaturizer().fit(SMILES).transform(SMILES)  # the default views' labels, descriptors


def _sets(n, n_sets, s, seed=0):
    rng = np.random.default_rng(seed)
    return np.stack([rng.permutation(n)[:s] for _ in range(n_sets)])


def _all(kernel, Z, sets, **kw):
    out = np.empty((len(sets), sets.shape[1], sets.shape[1]))
    rows = []
    for r, G in set_grams(kernel, Z, sets, **kw):
        out[r : r + len(G)] = G
        rows.append((r, len(G)))
    assert sum(n for _, n in rows) == len(sets) and [r for r, _ in rows] == sorted(r for r, _ in rows)
    return out


def test_molecular_kernel_sets_equal_the_kernel_on_each_set(molecules):
    kernel = molecular_kernel(backend="cpu")  # two graph views, descriptors, white noise
    kernel.set_params(k1__k1__k1__k1__constant_value=0.7, k1__k1__k1__k2__gamma=3.0, k2__noise_level=0.05)
    sets = _sets(len(molecules), 7, 6)
    sets[0, :2] = [3, 3]  # an input twice: no noise between the two (kernel(Z[set]) puts it on the diagonal only)
    G = _all(kernel, molecules, sets, max_pairs=50, max_entries=80)  # several solve calls and blocks
    for S, g in zip(sets, G, strict=True):
        assert np.allclose(g, kernel(_take(molecules, S)), rtol=1e-12, atol=1e-14)
    assert G[0, 0, 1] != G[0, 0, 0]


def test_feature_kernels_in_batches(molecules):
    """A FeatureKernel's vector kernel on Z's feature rows (made once for all blocks), isotropic and ARD RBF and a
    Matérn, against the kernel on each set."""
    d = len(molecules[0].features)
    sets = _sets(len(molecules), 6, 7, seed=2)
    for inner in (RBF(3.0), RBF(np.linspace(1.0, 4.0, d)), Matern(2.0, nu=1.5)):
        kernel = C(0.5) * FeatureKernel(inner) + WhiteKernel(0.01)
        G = _all(kernel, molecules, sets, max_entries=100)
        for S, g in zip(sets, G, strict=True):
            assert np.allclose(g, kernel(_take(molecules, S)), rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize(
    "kernel",
    [
        C(2.0) * Normalized(DotProduct(1.0)) + WhiteKernel(0.3),  # Normalized of a kernel the walk calls per set
        Exponentiation(RBF(1.5), 2.0) + C(0.5),  # a kernel the walk does not know: per set
        RBF(0.7),
    ],
)
def test_vector_kernels(kernel):
    Z = np.random.default_rng(4).normal(size=(30, 3))
    sets = _sets(30, 9, 5, seed=1)
    G = _all(kernel, Z, sets, max_entries=30)
    for S, g in zip(sets, G, strict=True):
        assert np.allclose(g, kernel(Z[S]), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("sets", [np.zeros((2, 2, 2), dtype=int), np.array([[0, 1.0]]), np.array([[0, 30]]),
                                  np.array([[-1, 2]])])  # fmt: skip
def test_bad_sets_are_refused(sets):
    with pytest.raises(ParameterError, match="sets"):
        next(set_grams(RBF(1.0), np.zeros((30, 2)), sets))


def test_local_correction_on_graphs_matches_the_kernel_per_prediction(molecules, monkeypatch):
    """The correction's kernel matrices (set_grams over the neighbours' union, in chunks) give the predictions
    of the earlier code, which called the kernel on each prediction's neighbours and itself."""
    X, Xs = molecules[:18], molecules[18:]
    y = np.array([g.n_nodes for g in X], dtype=float) + np.linspace(0, 1, len(X))
    kernel = molecular_kernel(backend="cpu", descriptors=False)
    gp = LowRankGPR(kernel, n_landmarks=4, optimize=False, n_neighbors=6, verbose=0).fit(X, y)
    monkeypatch.setattr(lowrank_module, "CORRECTION_CHUNK", 4)  # two chunks: neighbour unions of each
    mean, std = gp.predict(Xs, return_std=True)
    # the reference: the low-rank prediction, then per point the kernel on its neighbours and itself
    X_train, VT, norm, resid = gp._local
    plain = LowRankGPR(kernel, n_landmarks=4, optimize=False, verbose=0).fit(X, y)
    base, base_std = plain.predict(Xs, return_std=True)
    Ks = gp.kernel_(Xs, gp.X_landmarks_)
    v = lowrank_module._solve_l(gp._L_A, Ks.T)
    near = lowrank_module._neighbours(v, VT, norm, 6)
    ref = (base - gp._y_mean) / gp._y_std
    var = (base_std / gp._y_std) ** 2
    for t, N in enumerate(near):
        G = gp.kernel_(_take(X_train, N) + [Xs[t]])
        VN = VT[N].astype(np.float64)
        A = G[:6, :6] - VN @ VN.T
        r = G[6, :6] - VN @ v[:, t]
        ref[t] += r @ np.linalg.solve(A, resid[N])
        var[t] -= r @ np.linalg.solve(A, r)
    assert np.allclose(mean, ref * gp._y_std + gp._y_mean, rtol=1e-9, atol=1e-9)
    assert np.allclose(std, np.sqrt(var) * gp._y_std, rtol=1e-7, atol=1e-9)
    assert np.abs(mean - base).max() > 1e-3
