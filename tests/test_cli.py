"""The command-line interface."""

import os
import stat

import numpy as np
import pandas as pd
import pytest

import mgkflow.cli as cli
from mgkflow.cli import main
from mgkflow.io import load_gram_npz


def test_help_on_every_subcommand(capsys):
    for cmd in (["--help"], ["gram", "--help"], ["compare", "--help"], ["datasets", "--help"]):
        with pytest.raises(SystemExit) as exc:
            main(cmd)
        assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "compare" in out and "--orderings" in out and "--out" in out


def test_datasets_lists_builtin_sets(capsys):
    assert main(["datasets"]) == 0
    out = capsys.readouterr().out
    for name in ("nws", "ba", "drugs", "proteins"):
        assert name in out


def test_gram_writes_matrix_matching_api(tmp_path):
    out = tmp_path / "K.npy"
    stats = tmp_path / "stats.csv"
    rc = main(["gram", "nws", "--n-graphs", "4", "--labeled", "--backend", "cpu", "--out", str(out),
               "--stats", str(stats), "--quiet"])
    assert rc == 0
    K = np.load(out)
    assert K.shape == (4, 4)
    import mgkflow
    from mgkflow.datasets import default_kernels, nws

    nk, ek = default_kernels("nws", labeled=True)
    K_api = mgkflow.MarginalizedGraphKernel(node_kernel=nk, edge_kernel=ek, q=0.05, backend="cpu")(
        nws(n_graphs=4, labeled=True)
    )
    np.testing.assert_allclose(K, K_api, rtol=1e-9)
    assert list(pd.read_csv(stats)["stage"]) == ["load", "reorder", "pack", "solve"]


def test_gram_bad_input_fails_cleanly(tmp_path, capsys):
    assert main(["gram", "nosuch", "--out", str(tmp_path / "K.npy"), "--quiet"]) == 1
    assert "nosuch" in capsys.readouterr().err
    assert not (tmp_path / "K.npy").exists()
    with pytest.raises(SystemExit):
        main(["gram", "nws", "--q", "1.5", "--out", str(tmp_path / "K.npy")])
    assert main(["gram", "nws", "--out", str(tmp_path / "K.txt")]) == 2  # a usage error


def test_compare_writes_csv_and_plots(tmp_path, capsys):
    rc = main(["compare", "nws", "ba", "--n-graphs", "3", "--orderings", "natural,rcm,pbr",
               "--solve", "--backend", "cpu", "--out", str(tmp_path), "--quiet"])
    assert rc == 0
    df = pd.read_csv(tmp_path / "orderings.csv")
    assert len(df) == 6
    assert set(df["ordering"]) == {"natural", "rcm", "pbr"}
    for name in ("octiles.png", "density.png", "solve_time.png", "spy_nws.png", "spy_ba.png",
                 "density_histograms.csv"):
        assert (tmp_path / name).stat().st_size > 0
    # K is invariant under reordering: the Gram trace agrees across orderings
    for _, sub in df.groupby("dataset"):
        np.testing.assert_allclose(sub["gram_trace"], sub["gram_trace"].iloc[0], rtol=1e-9)
    # PBR never has more octiles than the natural order on these sets
    for _, sub in df.groupby("dataset"):
        s = sub.set_index("ordering")["octiles"]
        assert s["pbr"] <= s["natural"]


def test_compare_rejects_unknown_ordering(tmp_path, capsys):
    assert main(["compare", "nws", "--orderings", "natural,bogus", "--out", str(tmp_path), "--quiet"]) == 1
    assert "bogus" in capsys.readouterr().err


# ---------------------------------------------------------------------- user files
def _tu_dir(tmp_path):
    d = tmp_path / "TOY"
    d.mkdir()
    (d / "TOY_A.txt").write_text("1, 2\n2, 1\n2, 3\n3, 2\n4, 5\n5, 4\n5, 6\n6, 5\n")
    (d / "TOY_graph_indicator.txt").write_text("1\n1\n1\n2\n2\n2\n")
    (d / "TOY_graph_labels.txt").write_text("1\n0\n")
    (d / "TOY_node_labels.txt").write_text("0\n1\n0\n1\n1\n0\n")
    return d


def test_gram_on_smiles_file_writes_npz_with_ids_and_mode(tmp_path):
    pytest.importorskip("rdkit")
    import mgkflow
    from mgkflow.kernels import KroneckerDelta

    smi = tmp_path / "my.smi"
    smi.write_text("CCO ethanol\nc1ccccc1O phenol\nCC(=O)O acetic_acid\n")
    out = tmp_path / "K.npz"
    old = os.umask(0o022)
    try:
        assert main(["gram", str(smi), "--backend", "cpu", "--out", str(out), "--quiet"]) == 0
    finally:
        os.umask(old)
    z = load_gram_npz(out)
    assert z.ids == ["ethanol", "phenol", "acetic_acid"]
    assert z.params["node_kernel"] == "KroneckerDelta(0.5, 'element')"
    assert z.params["edge_kernel"] == "KroneckerDelta(0.5, 'bond_order')"
    assert z.params["format"] == "smiles" and z.params["q"] == 0.05
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    graphs = [mgkflow.Graph.from_smiles(s) for s in ("CCO", "c1ccccc1O", "CC(=O)O")]
    kern = mgkflow.MarginalizedGraphKernel(
        node_kernel=KroneckerDelta(0.5, "element"), edge_kernel=KroneckerDelta(0.5, "bond_order"), backend="cpu"
    )
    np.testing.assert_allclose(z.gram, kern(graphs), rtol=1e-9)


def test_gram_on_sdf_and_tu_with_kernel_flags(tmp_path):
    pytest.importorskip("rdkit")
    from rdkit import Chem

    sdf = tmp_path / "m.sdf"
    w = Chem.SDWriter(str(sdf))
    for name, s in (("a", "CCN"), ("b", "CCC"), ("c", "c1ccncc1")):
        m = Chem.MolFromSmiles(s)
        m.SetProp("_Name", name)
        w.write(m)
    w.close()
    out = tmp_path / "sdf.npz"
    assert main(["gram", str(sdf), "--backend", "cpu", "--node-kernel", "delta:element:0.3*delta:hydrogens",
                 "--edge-kernel", "const", "--normalize", "--out", str(out), "-q"]) == 0
    z = load_gram_npz(out)
    assert z.ids == ["a", "b", "c"] and z.params["normalize"] is True
    assert "hydrogens" in z.params["node_kernel"] and z.params["edge_kernel"] == "Constant(1.0)"
    np.testing.assert_allclose(np.diag(z.gram), 1.0)
    tu = _tu_dir(tmp_path)
    out2 = tmp_path / "tu.npz"
    assert main(["gram", str(tu), "--backend", "cpu", "--out", str(out2), "-q"]) == 0
    z2 = load_gram_npz(out2)
    assert z2.ids == ["TOY-1", "TOY-2"] and z2.params["node_kernel"] == "KroneckerDelta(0.5, 'label')"
    assert main(["gram", str(tu), "--node-labels", "", "--backend", "cpu", "--out", str(out2), "-q", "--force"]) == 0
    assert load_gram_npz(out2).params["node_kernel"] == "Constant(1.0)"


def test_gram_bad_kernel_spec_and_missing_file(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["gram", "nws", "--node-kernel", "gauss:x", "--out", str(tmp_path / "K.npz")])
    assert "cannot read kernel term" in capsys.readouterr().err
    assert main(["gram", str(tmp_path / "nope.smi"), "--out", str(tmp_path / "K.npz"), "-q"]) == 1
    assert "no such file" in capsys.readouterr().err


def _no_solve(monkeypatch):
    def fail(*a, **k):
        raise AssertionError("solved although an output path was bad")

    monkeypatch.setattr(cli, "solve_gram", fail)


@pytest.mark.parametrize("kind", ["under_file", "directory", "too_long", "stats_under_file"])
def test_gram_checks_outputs_before_solving(tmp_path, monkeypatch, capsys, kind):
    _no_solve(monkeypatch)
    f = tmp_path / "plain"
    f.write_text("x")
    out, stats = tmp_path / "K.npz", None
    if kind == "under_file":
        out = f / "K.npz"
    elif kind == "directory":
        out = tmp_path / "d.npz"
        out.mkdir()
    elif kind == "too_long":
        out = tmp_path / ("k" * 300 + ".npz")
    else:
        stats = f / "stats.csv"
    argv = ["gram", "nws", "--n-graphs", "2", "--out", str(out), "-q"] + (["--stats", str(stats)] if stats else [])
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("mgkflow gram: error:") and "Traceback" not in err and err.count("\n") == 1
    assert not (tmp_path / "K.npz").exists()


def test_n_graphs_beyond_dataset_is_clamped_with_a_note(tmp_path, monkeypatch, capsys):
    seen = {}

    def fake_solve(args, src):
        seen["n"] = len(src.graphs)
        raise MemoryError()

    monkeypatch.setattr(cli, "solve_gram", fake_solve)
    assert main(["gram", "nws", "--n-graphs", "100000", "--out", str(tmp_path / "K.npy")]) == 3
    err = capsys.readouterr().err
    assert seen["n"] == 160 and "nws has 160 graphs; --n-graphs 100000 uses all 160" in err
    assert "out of memory" in err and "Traceback" not in err


def test_n_graphs_beyond_a_file(tmp_path, capsys):
    pytest.importorskip("rdkit")
    smi = tmp_path / "two.smi"
    smi.write_text("CCO\nCCN\n")
    out = tmp_path / "K.npz"
    assert main(["gram", str(smi), "--n-graphs", "50", "--backend", "cpu", "--out", str(out)]) == 0
    assert load_gram_npz(out).gram.shape == (2, 2)
    assert "has 2 graphs; --n-graphs 50 uses all 2" in capsys.readouterr().err


def test_os_errors_are_clean(tmp_path, monkeypatch, capsys):
    def full(args, src):
        raise OSError(28, "No space left on device", "/scratch/x")

    monkeypatch.setattr(cli, "solve_gram", full)
    assert main(["gram", "nws", "--n-graphs", "2", "--out", str(tmp_path / "K.npy")]) == 1
    err = capsys.readouterr().err
    assert err == "mgkflow gram: error: No space left on device: /scratch/x\n"


def test_bench_help_works(capsys):
    assert main(["bench", "--help"]) == 0
    assert "SUITE" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["bench", "cpu", "--help"])
    assert exc.value.code == 0


def test_compare_quiet_prints_nothing_and_repeats(tmp_path, capsys):
    rc = main(["compare", "nws", "--n-graphs", "2", "--orderings", "natural,rcm", "--solve", "--repeat", "2",
               "--backend", "cpu", "--no-plots", "--out", str(tmp_path), "-q"])
    assert rc == 0
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
    df = pd.read_csv(tmp_path / "orderings.csv")
    assert set(df["solve_repeats"]) == {2}
    assert (df["solve_seconds_min"] <= df["solve_seconds"]).all()
    assert (df["solve_seconds"] <= df["solve_seconds_max"]).all()
    assert df["cg_iter_same_all_orderings"].all()  # the CPU solver does not see the ordering
    assert stat.S_IMODE((tmp_path / "orderings.csv").stat().st_mode) == 0o666 & ~_umask()


def test_compare_on_a_tu_directory(tmp_path, capsys):
    tu = _tu_dir(tmp_path)
    assert main(["compare", str(tu), "--orderings", "natural,rcm", "--no-plots", "--out", str(tmp_path / "r"),
                 "-q"]) == 0
    assert len(pd.read_csv(tmp_path / "r" / "orderings.csv")) == 2


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old


def test_gram_on_a_pdb_directory(tmp_path):
    d = tmp_path / "prot"
    d.mkdir()
    for name, n in (("p1", 3), ("p2", 4)):
        lines = [f"ATOM  {i + 1:>5}  CA  GLY A{i + 1:>4}    {1.5 * i:8.3f}{0.0:8.3f}{0.0:8.3f}  1.00  0.00           C"
                 for i in range(n)]
        (d / f"{name}.pdb").write_text("\n".join(lines) + "\n")
    out = tmp_path / "K.npz"
    assert main(["gram", str(d), "--cutoff", "4", "--backend", "cpu", "--out", str(out), "-q"]) == 0
    z = load_gram_npz(out)
    assert z.ids == ["p1", "p2"] and z.params["edge_kernel"] == "SquareExponential(1.0, 'distance')"
