"""MolecularGPR and molecular_kernel (mgkflow.learn.molecular): fit and predict on SMILES and on
graphs, the scikit-learn estimator API, pickling, progress lines, the errors."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone

from mgkflow.errors import ParameterError, ParameterTypeError
from mgkflow.learn import MolecularFeaturizer, MolecularGPR

pytest.importorskip("rdkit")

SMILES = ["C", "CC", "CCC", "CCCC", "CCO", "CCCO", "c1ccccc1", "Cc1ccccc1", "CC(C)C", "C1CCCCC1", "CCN", "CCCCCC"]
TEST = ["CCCCC", "Cc1ccccc1C", "OCCO"]


def _target(smiles, seed=0):
    carbons = np.array([s.upper().count("C") for s in smiles], dtype=float)
    return carbons + 0.1 * np.random.default_rng(seed).normal(size=len(smiles))


Y = _target(SMILES)
FAST = {"backend": "cpu", "n_restarts": 0, "max_iter": 30, "verbose": 0}


@pytest.fixture(scope="module")
def model():
    return MolecularGPR(**FAST).fit(SMILES, Y)


def test_fit_predict_score(model):
    mean, std = model.predict(TEST, return_std=True)
    assert mean.shape == std.shape == (3,) and np.all(np.isfinite(mean)) and np.all(std > 0)
    assert np.array_equal(model.predict(TEST), mean)
    assert mean[0] == pytest.approx(5.0, abs=1.5)  # pentane between butane and hexane
    assert model.score(SMILES, Y) > 0.9
    assert model.featurizer_.n_features_ > 0 and model.kernel_ is model.gpr_.kernel_
    assert model.gpr_.n_evaluations_ > 1
    # the fitted kernel moved from the default start
    assert not np.allclose(model.kernel_.theta, clone(model.gpr_.kernel).theta)


def test_params_and_clone(model):
    params = model.get_params()
    assert params["backend"] == "cpu" and params["descriptors"] is True and params["kernel"] is None
    c = clone(model)
    assert c.get_params() == params and not hasattr(c, "gpr_")
    assert c.set_params(q=0.3).q == 0.3


def test_featurized_inputs_give_the_same_predictions(model):
    """featurize(X) is what predict builds from X: predicting from it gives the same numbers (a screen
    featurizes its next chunk while it predicts the current one)."""
    graphs = model.featurize(TEST)
    assert len(graphs) == len(TEST) and all(g.features is not None for g in graphs)
    m0, s0 = model.predict(TEST, return_std=True)
    m1, s1 = model.predict(graphs, return_std=True)
    assert np.array_equal(m0, m1) and np.array_equal(s0, s1)
    with pytest.raises(ParameterError, match="not fitted"):
        MolecularGPR(**FAST).featurize(TEST)


def test_pickle_gives_the_same_predictions(model):
    loaded = pickle.loads(pickle.dumps(model))
    m0, s0 = model.predict(TEST, return_std=True)
    m1, s1 = loaded.predict(TEST, return_std=True)
    assert np.array_equal(m0, m1) and np.array_equal(s0, s1)


def test_without_descriptors():
    m = MolecularGPR(descriptors=False, **FAST).fit(SMILES, Y)
    assert m.featurizer_.n_features_ == 0
    assert "FeatureKernel" not in repr(m.kernel_)
    mean, std = m.predict(TEST, return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(std >= 0)


def test_fit_and_predict_on_graphs(model):
    f = MolecularFeaturizer().fit(SMILES)
    G, T = f.transform(SMILES), f.transform(TEST)
    m = MolecularGPR(**FAST).fit(G, Y)
    assert not hasattr(m, "featurizer_")
    mean, std = m.predict(T, return_std=True)
    # the same graphs, features and kernel as the SMILES model: the same fit
    assert np.allclose(mean, model.predict(TEST), rtol=1e-6, atol=1e-8)
    assert np.all(std > 0)
    with pytest.raises(ParameterTypeError, match="fitted on Graphs"):
        m.predict(TEST)
    with pytest.raises(ParameterTypeError, match="mixes"):
        m.predict([T[0], "CCO"])
    with pytest.raises(ParameterTypeError, match="mixes"):
        MolecularGPR(**FAST).fit([G[0], *SMILES[1:]], Y)
    # without features, graphs need descriptors=False
    plain = MolecularFeaturizer(descriptors=False).fit_transform(SMILES)
    with pytest.raises(ParameterError, match="need features"):
        MolecularGPR(**FAST).fit(plain, Y)
    assert MolecularGPR(descriptors=False, **FAST).fit(plain, Y).predict(plain[:2]).shape == (2,)


def test_refit_on_graphs_forgets_the_featurizer():
    f = MolecularFeaturizer(descriptors=False).fit(SMILES)
    m = MolecularGPR(descriptors=False, **FAST).fit(SMILES, Y)
    m.fit(f.transform(SMILES), Y)
    with pytest.raises(ParameterTypeError, match="fitted on Graphs"):
        m.predict(TEST)


def test_fit_graph_kernel_and_a_custom_kernel():
    m = MolecularGPR(descriptors=False, fit_graph_kernel=True, **{**FAST, "max_iter": 5}).fit(SMILES[:8], Y[:8])
    assert m.kernel_.theta.size == (2 + 7 + 1) + (2 + 11 + 1) + 1  # per view C, γ, deltas, q; noise
    from sklearn.gaussian_process.kernels import WhiteKernel

    from mgkflow.learn import FeatureKernel

    m = MolecularGPR(kernel=FeatureKernel() + WhiteKernel(0.1), **FAST).fit(SMILES, Y)
    assert np.all(np.isfinite(m.predict(TEST)))


def test_predict_before_fit_raises():
    with pytest.raises(ParameterError, match="not fitted"):
        MolecularGPR().predict(TEST)


@pytest.mark.parametrize(
    ("kw", "X", "y", "error"),
    [
        ({}, "CCO", [1.0], ParameterTypeError),
        ({}, 7, [1.0], ParameterTypeError),
        ({}, [], [], ParameterError),
        ({}, SMILES, Y[:-1], ParameterError),
        ({}, SMILES, ["a"] * len(SMILES), ParameterTypeError),
        ({"objective": ["lml"]}, SMILES, Y, ParameterTypeError),
        ({"objective": "best"}, SMILES, Y, ParameterError),
        ({"verbose": "loud"}, SMILES, Y, ParameterError),
        ({"random_state": "abc"}, SMILES, Y, ParameterError),
        ({"kernel": 7}, SMILES, Y, ParameterTypeError),
        ({"kernel": "abc", "views": 7}, SMILES, Y, ParameterTypeError),
        ({"views": ((("colour",), ("bond_order",)),)}, SMILES, Y, ParameterError),
        ({"h": 2.0}, SMILES, Y, ParameterError),
        ({"descriptors": "yes"}, SMILES, Y, ParameterTypeError),
        ({"extensive": 1}, SMILES, Y, ParameterTypeError),
        ({"n_restarts": -1}, SMILES, Y, ParameterError),
    ],
)
def test_bad_arguments(kw, X, y, error):
    with pytest.raises(error):
        MolecularGPR(**{**FAST, **kw}).fit(X, y)


def test_bad_return_std(model):
    with pytest.raises(ParameterTypeError):
        model.predict(TEST, return_std="yes")


def test_verbose_0_is_silent(capsys):
    MolecularGPR(descriptors=False, **FAST).fit(SMILES, Y).predict(TEST)
    out = capsys.readouterr()
    assert out.err == "" and out.out == ""


def test_verbose_1_prints_a_line_per_step(capsys):
    m = MolecularGPR(descriptors=False, **{**FAST, "verbose": 1}).fit(SMILES, Y)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip() and "compiling" not in line]  # a first build
    steps = [line for line in lines if line.startswith("mgkflow: fit step ")]
    assert steps and all(line.startswith("mgkflow: fit") for line in lines)
    assert len(steps) >= 2 and "lml =" in steps[0]
    assert lines[-1].startswith("mgkflow: fit done")
    assert m.gpr_.n_evaluations_ >= len(steps)


def test_n_landmarks_fits_a_low_rank_gp():
    """n_landmarks: a LowRankGPR inside MolecularGPR (its equality with the exact GP at m = n is
    tested in test_learn_lowrank.py); bad values and a leave-one-out objective are refused."""
    from mgkflow.learn import GraphGPR, LowRankGPR

    kw = {**FAST, "descriptors": False, "max_iter": 1}
    exact = MolecularGPR(**kw).fit(SMILES, Y)
    low = MolecularGPR(n_landmarks=len(SMILES), **kw).fit(SMILES, Y)
    assert isinstance(exact.gpr_, GraphGPR) and isinstance(low.gpr_, LowRankGPR)
    small = MolecularGPR(n_landmarks=5, **kw).fit(SMILES, Y)
    assert small.gpr_.n_landmarks_ == 5 and np.all(np.isfinite(small.predict(TEST)))
    with pytest.raises(ParameterError, match="n_landmarks"):
        MolecularGPR(n_landmarks=0, **kw).fit(SMILES, Y)
    with pytest.raises(ParameterError, match="exact GP"):
        MolecularGPR(n_landmarks=5, objective="loo", **kw).fit(SMILES, Y)
    # n_neighbors: the low-rank GP's local correction (tested in test_learn_lowrank.py), passed through; with every
    # training molecule a neighbour the test predictions move, and it needs n_landmarks
    local = MolecularGPR(n_landmarks=5, n_neighbors=len(SMILES), **kw).fit(SMILES, Y)
    assert local.gpr_.n_neighbors == len(SMILES)
    assert np.array_equal(local.gpr_.landmark_indices_, small.gpr_.landmark_indices_)
    assert np.all(np.isfinite(local.predict(TEST))) and not np.allclose(local.predict(TEST), small.predict(TEST))
    for bad, match in ((-1, "n_neighbors"), (3, "give n_landmarks")):
        with pytest.raises(ParameterError, match=match):
            MolecularGPR(n_neighbors=bad, **kw).fit(SMILES, Y)
    # hyperparameter_sample: the low-rank GP's hyperparameters from the exact GP on a sample, passed through
    sampled = MolecularGPR(n_landmarks=5, hyperparameter_sample=8, **kw).fit(SMILES, Y)
    assert sampled.gpr_.hyperparameter_sample == 8 and sampled.gpr_.sample_seconds_ > 0
    for bad, match in ((1, "hyperparameter_sample"), (True, "hyperparameter_sample")):
        with pytest.raises(ParameterError, match=match):
            MolecularGPR(n_landmarks=5, hyperparameter_sample=bad, **kw).fit(SMILES, Y)
    with pytest.raises(ParameterError, match="give n_landmarks"):
        MolecularGPR(hyperparameter_sample=8, **kw).fit(SMILES, Y)


def test_extensive_adds_the_unnormalized_graph_kernel():
    """extensive=True: each view's term gains C · MGK unnormalized, a sum over pairs of atoms that grows with the
    molecules. On a target that adds up over atoms it extrapolates to larger molecules, which the normalized
    kernels (k(x, x) = 1 for every molecule) cannot; old pickles without the parameter load as extensive=False."""
    from mgkflow.learn import molecular_kernel
    from mgkflow.mgk import MarginalizedGraphKernel

    kernel = molecular_kernel(descriptors=False, extensive=True, backend="cpu")
    graphs = MolecularFeaturizer(descriptors=False).fit_transform(["C", "CC", "CCC", "CCCC"])
    raw = [v for v in kernel.get_params(deep=True).values() if isinstance(v, MarginalizedGraphKernel)
           and not v.normalize]  # fmt: skip
    assert len(raw) == 2  # one per view
    signal = np.diag(kernel.k1(graphs))
    assert np.all(np.diff(signal) > 0)  # grows with the molecule
    assert np.ptp(np.diag(molecular_kernel(descriptors=False, backend="cpu").k1(graphs))) < 1e-12
    train = ["C", "CC", "CCC", "CCCC", "CCCCC", "CCO", "CCCO", "CCCCO", "CCN", "CCCN", "CCCCN", "CC(C)C"]
    test = ["CCCCCCCC", "CCCCCCO", "CCCCCCCN"]

    def carbons(smiles):
        return np.array([s.count("C") + 0.5 * s.count("O") for s in smiles])

    errors = {}
    for extensive in (False, True):
        m = MolecularGPR(descriptors=False, extensive=extensive, **FAST).fit(train, carbons(train))
        errors[extensive] = np.abs(m.predict(test) - carbons(test)).max()
    assert errors[True] < 0.5 < 2.0 < errors[False]
    state = MolecularGPR().__getstate__()
    del state["extensive"]
    old = MolecularGPR.__new__(MolecularGPR)
    old.__setstate__(state)
    assert old.extensive is False
