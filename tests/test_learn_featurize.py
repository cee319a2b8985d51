"""MolecularFeaturizer and molecular_descriptors (mgkflow.learn.featurize): every atom and bond
field on molecules whose answers are known, the descriptors' standardization, the errors."""

import pickle

import numpy as np
import pytest

from mgkflow import Graph
from mgkflow.errors import GraphError, ParameterError, ParameterTypeError
from mgkflow.learn import MolecularFeaturizer, molecular_descriptors
from mgkflow.learn.featurize import ATOM_FIELDS, BOND_FIELDS, CLIP, NEIGHBOUR_ELEMENTS

Chem = pytest.importorskip("rdkit.Chem")

SMILES = ["C1CC1", "CCO", "C[C@H](N)C(=O)O", "c1ccccc1O", "CC(C)(C)C", "C/C=C/C", "ClCC(=O)[O-]", "CCN", "CCCC"]


def _all(smiles, **kw):
    f = MolecularFeaturizer(atom_fields=ATOM_FIELDS, bond_fields=BOND_FIELDS, **kw)
    return f, f.fit_transform(smiles)


@pytest.fixture(scope="module")
def graphs():
    return dict(zip(SMILES, _all(SMILES, descriptors=False)[1], strict=True))


def _nodes(g, field):
    return np.asarray(g.node_labels[field]).tolist()


def test_cyclopropane(graphs):
    g = graphs["C1CC1"]
    assert g.n_nodes == 3  # hydrogens are counted, not nodes
    assert _nodes(g, "element") == [6, 6, 6]
    assert _nodes(g, "ring_size") == [3, 3, 3]
    assert _nodes(g, "degree") == [2, 2, 2]
    assert _nodes(g, "hydrogens") == [2, 2, 2]
    assert _nodes(g, "aromatic") == [0, 0, 0]
    assert _nodes(g, "hybridization") == [int(Chem.HybridizationType.SP3)] * 3
    assert len(set(_nodes(g, "morgan1"))) == 1 and len(set(_nodes(g, "morgan2"))) == 1
    assert np.all(np.asarray(g.edge_labels["in_ring"]) == 1)
    assert np.all(np.asarray(g.edge_labels["bond_order"]) == 1.0)


def test_ethanol_and_neopentane(graphs):
    g = graphs["CCO"]
    assert _nodes(g, "element") == [6, 6, 8]
    assert _nodes(g, "hydrogens") == [3, 2, 1]
    assert _nodes(g, "degree") == [1, 2, 1]
    assert _nodes(g, "ring_size") == [0, 0, 0]
    g = graphs["CC(C)(C)C"]
    assert _nodes(g, "degree") == [1, 4, 1, 1, 1]
    assert _nodes(g, "hydrogens") == [3, 0, 3, 3, 3]
    m1 = _nodes(g, "morgan1")
    assert m1[0] == m1[2] == m1[3] == m1[4] != m1[1]  # the four methyls are equivalent


def test_neighbours_counts(graphs):
    col = {z: k for k, z in enumerate(NEIGHBOUR_ELEMENTS)}
    n = np.asarray(graphs["CCO"].node_labels["neighbours"])
    assert n.shape == (3, len(NEIGHBOUR_ELEMENTS) + 1)
    assert n[1, col[6]] == 1 and n[1, col[8]] == 1 and n[1].sum() == 2
    assert n[2, col[6]] == 1 and n[2].sum() == 1
    n = np.asarray(graphs["CC(C)(C)C"].node_labels["neighbours"])
    assert n[1, col[6]] == 4
    # silicon is no listed element: it goes to the last column
    (g,) = MolecularFeaturizer(atom_fields=("element", "neighbours"), descriptors=False).fit_transform(["C[Si](C)C"])
    n = np.asarray(g.node_labels["neighbours"])
    assert n[1, -1] == 0 and n[0, -1] == 1 and n[1, col[6]] == 3


def test_phenol_aromatic_and_morgan(graphs):
    g = graphs["c1ccccc1O"]
    assert _nodes(g, "aromatic") == [1] * 6 + [0]
    assert _nodes(g, "ring_size") == [6] * 6 + [0]
    assert _nodes(g, "hydrogens") == [1, 1, 1, 1, 1, 0, 1]
    m1, m2 = _nodes(g, "morgan1"), _nodes(g, "morgan2")
    # atom 5 carries the OH; 0 and 4 are ortho, 1 and 3 meta, 2 para
    assert m1[0] == m1[4] and m2[0] == m2[4]
    assert m1[1] == m1[2] == m1[3]  # radius 1 sees an aromatic CH between two aromatic CH
    assert m2[1] == m2[3] != m2[2]  # radius 2 tells meta from para
    assert m1[5] not in (m1[0], m1[1])
    ar = np.asarray(g.edge_labels["aromatic"])
    order = np.asarray(g.edge_labels["bond_order"])
    assert set(order[ar == 1].tolist()) == {1.5} and set(order[ar == 0].tolist()) == {1.0}


def test_chirality_r_and_s():
    f = MolecularFeaturizer(atom_fields=("element", "chirality"), descriptors=False).fit(["C"])
    l_ala, d_ala, achiral = f.transform(["C[C@H](N)C(=O)O", "C[C@@H](N)C(=O)O", "CC(N)C(=O)O"])
    assert _nodes(l_ala, "chirality") == [0, 2, 0, 0, 0, 0]  # L-alanine is (S)
    assert _nodes(d_ala, "chirality") == [0, 1, 0, 0, 0, 0]  # D-alanine is (R)
    assert _nodes(achiral, "chirality") == [0] * 6


def test_charge_and_bonds(graphs):
    g = graphs["ClCC(=O)[O-]"]
    assert _nodes(g, "charge") == [0, 0, 0, 0, -1]
    assert _nodes(g, "element") == [17, 6, 6, 8, 8]
    g = graphs["C/C=C/C"]
    order = np.asarray(g.edge_labels["bond_order"])
    stereo = np.asarray(g.edge_labels["stereo"])
    assert sorted(set(order.tolist())) == [1.0, 2.0]
    assert np.all(stereo[order == 2.0] == int(Chem.BondStereo.STEREOE)) and np.all(stereo[order == 1.0] == 0)
    conj = np.asarray(graphs["C[C@H](N)C(=O)O"].edge_labels["conjugated"])
    assert conj.sum() > 0 and conj.sum() < conj.size


def test_rdkit_molecule_with_explicit_hydrogens_equals_smiles():
    f = MolecularFeaturizer(descriptors=False).fit(["C"])
    a, b = f.transform(["CC(=O)O", Chem.AddHs(Chem.MolFromSmiles("CC(=O)O"))])
    assert a.n_nodes == b.n_nodes == 4
    assert "morgan1" in a.node_labels  # Morgan environments of the heavy atoms, hydrogens or not
    for k in a.node_labels:
        assert np.array_equal(a.node_labels[k], b.node_labels[k]), k
    assert np.array_equal(a.adjacency.toarray(), b.adjacency.toarray())


def test_default_fields_and_titles():
    f = MolecularFeaturizer(descriptors=False)
    (g,) = f.fit_transform(["CCO"])
    assert sorted(g.node_labels) == sorted(
        ["element", "charge", "aromatic", "hybridization", "hydrogens", "degree", "ring_size", "morgan1"]
    )
    assert sorted(g.edge_labels) == ["aromatic", "bond_order", "in_ring"]
    assert g.features is None and f.n_features_ == 0 and f.descriptor_names_ == ()
    (g,) = f.transform(["CCO"], titles=["ethanol"])
    assert g.title == "ethanol"
    with pytest.raises(ParameterError):
        f.transform(["CCO"], titles=["a", "b"])
    with pytest.raises(ParameterTypeError):
        f.transform(["CCO"], titles=7)


# ---------------------------------------------------------------------------- descriptors
TRAIN = ["CCO", "CCCO", "CCCCO", "c1ccccc1", "Cc1ccccc1", "CC(=O)O", "CCN", "C1CCCCC1", "CCOC", "OCCO"]


@pytest.fixture(scope="module")
def fitted():
    f = MolecularFeaturizer(descriptors=True)
    return f, f.fit_transform(TRAIN)


def test_descriptors_are_standardized_on_the_fit_data(fitted):
    f, graphs = fitted
    F = np.vstack([g.features for g in graphs])
    assert F.shape == (len(TRAIN), f.n_features_) == (len(TRAIN), len(f.descriptor_names_))
    assert np.allclose(F.mean(axis=0), 0.0, atol=1e-9)
    assert np.allclose(F.std(axis=0), 1.0, atol=1e-9)  # nothing reaches the clip on ten molecules
    assert np.array_equal(f.features(TRAIN), F)
    assert f.center_.shape == f.scale_.shape == (f.n_features_,) and np.all(f.scale_ > 0)


def test_constant_columns_are_dropped(fitted):
    f, _ = fitted
    D, names = molecular_descriptors(TRAIN)
    const = [n for j, n in enumerate(names) if np.all(D[:, j] == D[0, j])]
    assert "NumRadicalElectrons" in const  # no radicals in the set
    assert not set(const) & set(f.descriptor_names_)
    kept = [n for j, n in enumerate(names) if np.all(np.isfinite(D[:, j])) and np.ptp(D[:, j]) > 0]
    assert set(f.descriptor_names_) == set(kept)


def test_new_molecules_are_clipped(fitted):
    f, _ = fitted
    F = f.features(["C" * 40, "c1ccc2ccccc2c1"])
    assert F.shape == (2, f.n_features_)
    assert np.all(np.abs(F) <= CLIP) and np.any(np.abs(F) == CLIP)


def test_molecular_descriptors():
    X, names = molecular_descriptors(["CCO", Chem.MolFromSmiles("c1ccccc1")])
    assert X.shape == (2, len(names)) and X.dtype == np.float64
    j = names.index("MolWt")
    assert X[0, j] == pytest.approx(46.069, abs=0.01) and X[1, j] == pytest.approx(78.114, abs=0.01)
    assert X[1, names.index("NumAromaticRings")] == 1
    with pytest.raises(ParameterTypeError):
        molecular_descriptors(7)
    with pytest.raises(ParameterTypeError):
        molecular_descriptors("CCO")
    with pytest.raises(GraphError):
        molecular_descriptors(["C1CC"])


# ---------------------------------------------------------------------------- errors and API
def test_molecular_descriptors_are_rdkits_values():
    """The shared E-state indices and Crippen contributions give CalcMolDescriptors' values, bit for bit
    (NaN where RDKit cannot compute one), on molecules with charges, metals, radicals, isotopes and stereo."""
    from rdkit.Chem import Descriptors

    smiles = ["CCO", "c1ccccc1O", "C[N+](C)(C)C.[Cl-]", "[Na+].[O-]C(=O)C", "C[C@H](N)C(=O)O", "[13CH4]",
              "[CH3]", "O=S(=O)(O)c1ccc(F)cc1", "F/C=C/F", "C1CC2CCC1C2", "[Fe]", "B(O)(O)c1ccccc1",
              "CN1C=NC2=C1C(=O)N(C(=O)N2C)C", "ClC(Cl)(Cl)Cl", "N#Cc1ccc(Br)cc1I", "[Si](C)(C)(C)C", "O"]  # fmt: skip
    X, names = molecular_descriptors(smiles)
    for i, s in enumerate(smiles):
        ref = Descriptors.CalcMolDescriptors(Chem.MolFromSmiles(s), missingVal=np.nan)
        row = np.array([float(ref[k]) for k in names])
        row[~np.isfinite(row)] = np.nan
        np.testing.assert_array_equal(X[i], row, err_msg=s)


def test_transform_before_fit_raises():
    with pytest.raises(ParameterError, match="not fitted"):
        MolecularFeaturizer().transform(["CCO"])
    with pytest.raises(ParameterError, match="not fitted"):
        MolecularFeaturizer().features(["CCO"])


@pytest.mark.parametrize("smiles", ["C1CC", "not a smiles", "", "   ", "[H][H]"])
def test_bad_smiles_raise_graph_error(smiles):
    f = MolecularFeaturizer(descriptors=False).fit(["C"])
    with pytest.raises(GraphError):
        f.transform([smiles])


@pytest.mark.parametrize(
    "kw",
    [
        {"atom_fields": ("element", "colour")},
        {"bond_fields": ("bond_order", "length")},
        {"atom_fields": ("element", "element")},
        {"atom_fields": (7,)},
    ],
)
def test_unknown_fields_raise_parameter_error(kw):
    with pytest.raises(ParameterError):
        MolecularFeaturizer(descriptors=False, **kw).fit(["CCO"])


@pytest.mark.parametrize("X", [7, "CCO", None, 3.5, b"CCO"])
def test_non_sequence_x_raises_parameter_type_error(X):
    with pytest.raises(ParameterTypeError):
        MolecularFeaturizer(descriptors=False).fit(X)
    f = MolecularFeaturizer(descriptors=False).fit(["C"])
    with pytest.raises(ParameterTypeError):
        f.transform(X)


def test_other_argument_errors():
    with pytest.raises(ParameterTypeError):
        MolecularFeaturizer(atom_fields="element").fit(["C"])
    with pytest.raises(ParameterTypeError):
        MolecularFeaturizer(descriptors="yes").fit(["C"])
    with pytest.raises(ParameterTypeError):
        MolecularFeaturizer(descriptors=False).fit(["C", 7])
    with pytest.raises(ParameterError):
        MolecularFeaturizer(descriptors=False).fit([])


def test_pickle_round_trip(fitted):
    f, graphs = fitted
    g = pickle.loads(pickle.dumps(f))
    assert g.get_params() == f.get_params() and g.descriptor_names_ == f.descriptor_names_
    new = ["CCCCCO", "c1ccncc1"]
    for a, b in zip(f.transform(new), g.transform(new), strict=True):
        assert np.array_equal(a.features, b.features)
        assert all(np.array_equal(a.node_labels[k], b.node_labels[k]) for k in a.node_labels)
    h = pickle.loads(pickle.dumps(graphs[0]))
    assert isinstance(h, Graph) and np.array_equal(h.features, graphs[0].features)


def test_sklearn_clone_and_params():
    from sklearn.base import clone

    f = MolecularFeaturizer(atom_fields=("element",), bond_fields=("in_ring",), descriptors=False)
    g = clone(f)
    assert g.get_params() == f.get_params() and not hasattr(g, "n_features_")
    assert g.set_params(descriptors=True).descriptors is True


def test_morgan_ids_fit_int32_and_stay_distinct():
    """Morgan identifiers are 32-bit unsigned in RDKit; as labels they must fit the GPU's int32
    storage (they did not: `pack_batch` refused FreeSolv's morgan1), one value per environment."""
    from mgkflow.format import pack_batch

    smiles = ["CCO", "c1ccccc1O", "C[C@H](N)C(=O)O", "ClCC(=O)[O-]", "CC(C)(C)C", "OCCN", "FC(F)F"]
    f = MolecularFeaturizer(
        atom_fields=("element", "morgan1", "morgan2"), bond_fields=("bond_order",), descriptors=False
    )
    gs = f.fit_transform(smiles)
    ids = np.concatenate([_nodes(g, "morgan1") for g in gs])
    assert ids.min() >= np.iinfo(np.int32).min and ids.max() <= np.iinfo(np.int32).max
    from rdkit.Chem import rdFingerprintGenerator as gen

    raw = set()
    for s in smiles:
        out = gen.AdditionalOutput()
        out.AllocateAtomToBits()
        gen.GetMorganGenerator(radius=1, includeRedundantEnvironments=True).GetSparseCountFingerprint(
            Chem.MolFromSmiles(s), additionalOutput=out
        )
        raw.update(bits[1] for bits in out.GetAtomToBits() if len(bits) > 1)
    assert len(set(ids.tolist())) == len(raw)  # the map is one-to-one
    assert pack_batch(gs).n_graphs == len(smiles)


@pytest.mark.parametrize("descriptors", [True, False])
def test_fit_transform_equals_fit_then_transform(descriptors):
    """fit_transform parses each molecule and computes its descriptors once, with the same result."""
    smiles = ["CCO", "c1ccccc1O", "CC(=O)N", "C1CC1", "CCCCCl"]
    a = MolecularFeaturizer(descriptors=descriptors)
    b = MolecularFeaturizer(descriptors=descriptors)
    ga = a.fit(smiles).transform(smiles, titles=list("abcde"))
    gb = b.fit_transform(smiles, titles=list("abcde"))
    assert a.descriptor_names_ == b.descriptor_names_ and a.n_features_ == b.n_features_
    np.testing.assert_array_equal(a.center_ if descriptors else 0, b.center_ if descriptors else 0)
    for x, z in zip(ga, gb, strict=True):
        assert x.title == z.title and x.n_nodes == z.n_nodes
        np.testing.assert_array_equal(x.adjacency.toarray(), z.adjacency.toarray())
        assert (x.features is None) == (z.features is None) == (not descriptors)
        if descriptors:
            np.testing.assert_array_equal(x.features, z.features)
    with pytest.raises(ParameterError):
        MolecularFeaturizer().fit_transform(smiles, titles=["only one"])


def test_featurizing_in_several_processes_gives_the_same_graphs(monkeypatch):
    """n_jobs=2 splits the molecules in parts featurized by joblib's processes: the same graphs, features,
    titles and standardization as one process; a bad SMILES still names itself."""
    import mgkflow.learn.featurize as F

    monkeypatch.setattr(F, "PART_MIN", 4)
    smiles = SMILES * 3
    titles = [f"m{i}" for i in range(len(smiles))]
    one = MolecularFeaturizer(n_jobs=None)
    two = MolecularFeaturizer(n_jobs=2)
    assert two._jobs(len(smiles)) == 2 and one._jobs(len(smiles)) == 1
    ga, gb = one.fit_transform(smiles, titles=titles), two.fit_transform(smiles, titles=titles)
    assert one.descriptor_names_ == two.descriptor_names_
    np.testing.assert_array_equal(one.center_, two.center_)
    for a, b in zip(ga, gb, strict=True):
        assert a.title == b.title
        np.testing.assert_array_equal(a.features, b.features)
        np.testing.assert_array_equal(a.adjacency.toarray(), b.adjacency.toarray())
        assert sorted(a.node_labels) == sorted(b.node_labels)
    np.testing.assert_array_equal(two.features(smiles), one.features(smiles))
    with pytest.raises(GraphError, match="not-a-smiles"):
        two.transform(smiles + ["not-a-smiles"] + smiles)
    with pytest.raises(ParameterError, match="n_jobs"):
        MolecularFeaturizer(n_jobs=0).fit(smiles)
    old = pickle.loads(pickle.dumps(two))
    del old.__dict__["n_jobs"]
    assert pickle.loads(pickle.dumps(old)).n_jobs is None  # a featurizer pickled before n_jobs existed


def test_transform_checked_in_several_processes(monkeypatch):
    """transform_checked: transform's graphs of the SMILES that make one, an error text for the others (RDKit
    cannot parse it; no heavy atom); the same on 2 processes."""
    from rdkit import Chem

    import mgkflow.learn.featurize as F

    monkeypatch.setattr(F, "PART_MIN", 4)
    smiles = (SMILES + ["not a smiles", "[H][H]", "*", "", "C1CC"]) * 3
    want = [F.INVALID_SMILES if (m := Chem.MolFromSmiles(s)) is None else F.NO_HEAVY_ATOM
            if m.GetNumHeavyAtoms() == 0 else "" for s in smiles]  # fmt: skip
    assert F.INVALID_SMILES in want and F.NO_HEAVY_ATOM in want
    ok = [s for s, e in zip(smiles, want) if not e]
    one = MolecularFeaturizer().fit(SMILES)
    two = MolecularFeaturizer(n_jobs=2).fit(SMILES)
    assert two._jobs(len(smiles)) == 2
    reference = one.transform(ok)
    for f in (one, two):
        graphs, errors = f.transform_checked(smiles)
        assert errors == want and len(graphs) == len(ok)
        for g, r in zip(graphs, reference):
            assert g.n_nodes == r.n_nodes and np.array_equal(g.features, r.features)
            assert all(np.array_equal(g.node_labels[k], r.node_labels[k]) for k in r.node_labels)
    with pytest.raises(ParameterTypeError):
        two.transform_checked("CCO")
    with pytest.raises(ParameterTypeError):
        two.transform_checked(["CCO", 3])
    with pytest.raises(ParameterError):
        MolecularFeaturizer().transform_checked(["CCO"])  # not fitted


def _jobs_in_a_daemon(queue) -> None:  # (top level: the child process imports it)
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        queue.put((MolecularFeaturizer(n_jobs=4)._jobs(10_000), len(caught)))


def test_one_job_in_a_daemonic_process():
    """A Dask worker is a daemonic process, which cannot start joblib's: its featurizer takes one job quietly."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=_jobs_in_a_daemon, args=(queue,), daemon=True)
    child.start()
    jobs, warned = queue.get(timeout=120)
    child.join(timeout=60)
    assert (jobs, warned) == (1, 0)
    assert MolecularFeaturizer(n_jobs=4)._jobs(10_000) == min(4, __import__("joblib").effective_n_jobs(4))
