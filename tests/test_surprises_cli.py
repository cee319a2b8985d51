"""First use without surprises: warnings, SMILES columns, option conflicts, overwrites, log-friendly progress,
help texts and the README's promises."""

from __future__ import annotations

import io
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import mgkflow.cli as cli
from mgkflow.cli import main
from mgkflow.io import load_gram_npz

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _rc(argv: list[str]) -> int:
    """main's exit code, whether returned or raised as SystemExit (argparse)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def _never_load(monkeypatch):
    def fail(*a, **k):
        raise AssertionError("read the input although the options conflict")

    monkeypatch.setattr(cli, "load_source", fail)


# ---------------------------------------------------------------------- 1. warnings
def test_library_warnings_print_as_one_mgkflow_line(tmp_path, monkeypatch, capsys):
    def warn_then_fail(args, src):
        warnings.warn("the kernel looks odd\nsecond line", UserWarning, stacklevel=1)
        raise MemoryError()

    monkeypatch.setattr(cli, "solve_gram", warn_then_fail)
    before = warnings.showwarning
    assert main(["gram", "nws", "--n-graphs", "2", "--out", str(tmp_path / "K.npy"), "-q"]) == 3
    err = capsys.readouterr().err
    assert "mgkflow: warning: the kernel looks odd second line\n" in err
    assert "UserWarning" not in err and ".py:" not in err
    assert warnings.showwarning is before  # restored after the run


# ---------------------------------------------------------------------- 2. --smiles-column
def test_smiles_column_reads_a_csv_with_other_column_names(tmp_path):
    pytest.importorskip("rdkit")
    csv = tmp_path / "assay.csv"
    csv.write_text("compound_id,Structure,pIC50\nCPD-1,CCO,5.1\nCPD-2,c1ccccc1O,6.2\nCPD-3,CC(=O)O,4.0\n")
    out = tmp_path / "K.npz"
    assert main(["gram", str(csv), "--smiles-column", "Structure", "--backend", "cpu", "--out", str(out), "-q"]) == 0
    assert load_gram_npz(out).gram.shape == (3, 3)


def test_smiles_column_with_another_format_is_a_usage_error(tmp_path, monkeypatch, capsys):
    _never_load(monkeypatch)
    assert _rc(["gram", "nws", "--smiles-column", "Structure", "--out", str(tmp_path / "K.npz"), "-q"]) == 2
    assert "--smiles-column" in capsys.readouterr().err


# ---------------------------------------------------------------------- 3. conflicts before work
@pytest.mark.parametrize(
    "extra, out, named",
    [
        (["--dask", "local:1"], "K.npz", "--dask"),
        (["--block-size", "4"], "K.npz", "--block-size"),
        (["--dtype", "float32"], "K.npz", "--dtype"),
        (["--normalize"], "K.zarr", "--normalize"),
    ],
)
def test_option_conflicts_are_usage_errors_before_reading(tmp_path, monkeypatch, capsys, extra, out, named):
    _never_load(monkeypatch)
    assert _rc(["gram", "nws", "--n-graphs", "2", *extra, "--out", str(tmp_path / out), "-q"]) == 2
    err = capsys.readouterr().err
    assert named in err and "--out" in err and "Traceback" not in err
    assert not (tmp_path / out).exists()


# ---------------------------------------------------------------------- 4. overwrites, directories
def test_existing_output_is_refused_without_force(tmp_path, capsys):
    out = tmp_path / "K.npy"
    out.write_bytes(b"precious")
    argv = ["gram", "nws", "--n-graphs", "2", "--labeled", "--backend", "cpu", "--out", str(out), "-q"]
    assert _rc(argv) == 1
    err = capsys.readouterr().err
    assert "exists" in err and "--force" in err
    assert out.read_bytes() == b"precious"
    assert _rc([*argv, "--force"]) == 0
    assert np.load(out).shape == (2, 2)


def test_existing_stats_is_refused_without_force(tmp_path, capsys):
    stats = tmp_path / "s.csv"
    stats.write_text("precious")
    argv = ["gram", "nws", "--n-graphs", "2", "--backend", "cpu", "--out", str(tmp_path / "K.npy"),
            "--stats", str(stats), "-q"]
    assert _rc(argv) == 1
    assert "--stats" in capsys.readouterr().err and stats.read_text() == "precious"


def test_zarr_resumes_without_force_and_force_starts_again(tmp_path, capsys):
    pytest.importorskip("zarr")
    out = tmp_path / "K.zarr"
    argv = ["gram", "nws", "--n-graphs", "3", "--labeled", "--backend", "cpu", "--block-size", "2",
            "--out", str(out)]
    assert _rc(argv) == 0
    capsys.readouterr()
    assert _rc(argv) == 0  # a resume is not an overwrite
    assert "already done" in capsys.readouterr().err
    other = [*argv[:-2], "--q", "0.1", "--out", str(out), "-q"]
    assert _rc(other) == 1
    err = capsys.readouterr().err
    assert "--force" in err
    assert _rc([*other, "--force"]) == 0
    from mgkflow.gram import load_gram

    assert float(load_gram(out).meta["params"]["q"]) == 0.1


def test_created_directories_are_announced(tmp_path, capsys):
    out = tmp_path / "new" / "deeper" / "K.npy"
    assert _rc(["gram", "nws", "--n-graphs", "2", "--backend", "cpu", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"created directory {out.parent}" in err
    assert out.exists()


# ---------------------------------------------------------------------- 5. progress in logs
def test_progress_without_a_terminal_is_plain_lines(tmp_path, capsys):
    out = tmp_path / "K.npy"
    assert _rc(["gram", "nws", "--n-graphs", "6", "--labeled", "--backend", "cpu", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err
    assert max(len(line) for line in err.splitlines()) < 300
    assert re.search(r"21/21 pairs \(100%\)", err)


def test_line_progress_writes_at_most_one_line_per_interval(monkeypatch):
    from mgkflow import progress

    clock = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    buf = io.StringIO()
    bar = progress.progress_bar(100, desc="Gram blocks", unit="block", initial=10, file=buf)
    assert isinstance(bar, progress.LineProgress)
    for _ in range(90):
        clock[0] += 0.5  # 45 s in all: lines at 10, 20, 30, 40 s, then the last
        bar.update(1)
    bar.close()
    bar.close()
    lines = buf.getvalue().splitlines()
    assert len(lines) == 5
    assert lines[0].startswith("Gram blocks: 30/100 blocks (30%), 2 block/s, 35 s left")
    assert lines[-1].startswith("Gram blocks: 100/100 blocks (100%), 2 block/s, 45 s elapsed")


def test_progress_bar_is_tqdm_on_a_terminal():
    from mgkflow import progress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    bar = progress.progress_bar(3, desc="x", file=Tty())
    assert not isinstance(bar, progress.LineProgress)
    bar.close()


def test_quiet_still_prints_nothing(tmp_path, capsys):
    assert _rc(["gram", "nws", "--n-graphs", "3", "--backend", "cpu", "--out", str(tmp_path / "K.npy"), "-q"]) == 0
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------------- 6. help and parser
def _help(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    return " ".join(capsys.readouterr().out.split())


def test_compare_help_says_files_work(capsys):
    text = _help(["compare", "--help"], capsys)
    assert "file" in text.split("SOURCE", 2)[-1].split("--orderings")[0]


def test_bench_cpu_help_is_not_cut(capsys):
    text = _help(["bench", "cpu", "--help"], capsys)
    assert "GraKeL, on labeled NWS graphs; optionally large single pairs." in text


def test_delta_with_h_zero_is_refused_by_the_parser(tmp_path, monkeypatch, capsys):
    _never_load(monkeypatch)
    assert _rc(["gram", "nws", "--node-kernel", "delta:element:0", "--out", str(tmp_path / "K.npz")]) == 2
    err = capsys.readouterr().err
    assert "delta:element:0" in err and "(0, 1]" in err
    # an edge kernel may reach 0
    assert repr(cli.parse_kernel_spec("delta:bond_order:0")) == "KroneckerDelta(0.0, 'bond_order')"


def test_readme_exit_codes_include_130():
    section = README.split("### Command line", 1)[1].split("\n## ", 1)[0]
    assert "130" in section and "interrupted" in section


# ---------------------------------------------------------------------- 7. README times
def test_readme_says_how_long_the_examples_take():
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "minute" in quick and "H100" in quick and "CPU" in quick
    example = README.split("Example: `python -m mgkflow.examples.gpr_freesolv", 1)[1].split("\n\n", 1)[0]
    assert "H100" in example and "CPU" in example and "min" in example
