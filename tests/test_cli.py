"""The command-line interface."""

import numpy as np
import pandas as pd
import pytest

from mgkflow.cli import main


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
    with pytest.raises(SystemExit):
        main(["gram", "nws", "--out", str(tmp_path / "K.txt")])


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
