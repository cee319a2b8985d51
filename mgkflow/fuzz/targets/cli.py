"""Fuzz target: the command line (``mgkflow gram``, ``compare``, ``datasets``, ``bench``) run in-process.

Property ``cli``: rough sources, outputs and flags; an exit code with a clear message, no
traceback, and no half-written or non-finite output file.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ..checks import Outcome, Property, _py, guarded

__all__ = ["run_cli_case", "strategies", "PROPERTIES"]

def run_cli_case(argv: list[str], workdir: str | os.PathLike | None = None) -> Outcome:
    """Run ``mgkflow ARGV`` in-process; ``{W}`` in arguments is replaced by a scratch directory.

    The scratch directory holds ``mols.smi`` (3 molecules), ``TOY/`` (a 3-graph TU
    dataset), ``afile`` (a plain file) and ``adir.npz/`` (a directory).
    """

    def go(w: Path) -> Outcome:
        from mgkflow.cli import main

        args = [a.replace("{W}", str(w)) for a in argv]
        err, out = io.StringIO(), io.StringIO()
        before = {p.name for p in w.rglob("*")}
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                rc = main(args)
            except SystemExit as exc:  # argparse usage errors and --help
                rc = exc.code if isinstance(exc.code, int) else 1
        text = err.getvalue()
        if "Traceback" in text:
            return Outcome("bad", "cli-traceback@cli.py", text[-300:])
        if rc not in (0, 1, 2, 3):
            return Outcome("bad", "cli-exit-code@cli.py", f"exit code {rc!r}")
        if rc in (1, 3) and not text.strip().startswith("mgkflow"):
            return Outcome("bad", "cli-unclear-error@cli.py", text[-300:])
        new = [p for p in w.rglob("*") if p.name not in before]
        for p in new:
            if p.is_file() and p.name.startswith("."):
                return Outcome("bad", "half-written@io/_files.py", f"temporary file left: {p.name}")
            if p.suffix == ".npz":
                from mgkflow.io import load_gram_npz

                g = load_gram_npz(p)
                if not np.all(np.isfinite(g.gram)) or len(g.ids) != g.gram.shape[0]:
                    return Outcome("bad", "half-written@cli.py", f"{p.name}: bad content")
            elif p.suffix == ".npy":
                if not np.all(np.isfinite(np.load(p))):
                    return Outcome("bad", "nan", f"{p.name} holds non-finite values")
        return Outcome("result" if rc == 0 else "error", f"exit {rc}", text[-200:])

    with tempfile.TemporaryDirectory() as d:
        w = Path(workdir) if workdir is not None else Path(d)
        _cli_fixtures(w)
        return guarded(lambda: go(w))


def _cli_fixtures(w: Path) -> None:
    (w / "mols.smi").write_text("CCO ethanol\nc1ccccc1O phenol\nCC(=O)O acid\n")
    t = w / "TOY"
    t.mkdir(exist_ok=True)
    (t / "TOY_A.txt").write_text("1, 2\n2, 3\n4, 5\n6, 7\n7, 8\n")
    (t / "TOY_graph_indicator.txt").write_text("1\n1\n1\n2\n2\n3\n3\n3\n")
    (t / "TOY_node_labels.txt").write_text("0\n1\n0\n1\n1\n0\n2\n0\n")
    (t / "TOY_graph_labels.txt").write_text("1\n0\n1\n")
    (w / "afile").write_text("x")
    (w / "adir.npz").mkdir(exist_ok=True)



def strategies(st: Any) -> dict[str, Any]:
    """``cli`` cases: argument lists, ``{W}`` standing for the scratch directory."""
    source = st.sampled_from(["nws", "ba", "drugs", "{W}/mols.smi", "{W}/TOY", "{W}/missing.smi", "{W}/afile",
                              "nosuch", "{W}/TOY/TOY_A.txt"])
    out = st.sampled_from(["{W}/K.npz", "{W}/K.npy", "{W}/sub/K.npz", "{W}/afile/K.npz", "{W}/adir.npz",
                           "{W}/" + "k" * 300 + ".npz", "{W}/K.txt", "{W}/" + "y" * 250 + ".npy"])
    flag = st.one_of(
        st.tuples(st.just("--q"), st.sampled_from(["0.05", "0", "1", "-1", "nan", "x", "1e-8"])),
        st.tuples(st.just("--n-graphs"), st.sampled_from(["1", "2", "3", "0", "-2", "x", "100000"])),
        st.tuples(st.just("--ordering"), st.sampled_from(["pbr", "rcm", "natural", "bogus"])),
        st.tuples(st.just("--stats"), st.sampled_from(["{W}/s.csv", "{W}/afile/s.csv", "{W}/adir.npz"])),
        st.tuples(st.just("--node-kernel"), st.sampled_from(["delta:element", "const", "sqexp:label:0.5",
                                                             "delta:label*const:0.5", "bogus:x", "delta", "const:-1"])),
        st.tuples(st.just("--edge-kernel"), st.sampled_from(["const", "delta:bond_order", "sqexp:nope"])),
        st.tuples(st.just("--normalize")),
        st.tuples(st.just("--format"), st.sampled_from(["smiles", "tu", "sdf", "nope"])),
        st.tuples(st.just("--node-labels"), st.sampled_from(["label", "", "x"])),
    )

    @st.composite
    def argv(draw):
        cmd = draw(st.sampled_from(["gram", "gram", "gram", "compare", "datasets", "bench"]))
        if cmd == "datasets":
            return ["datasets"]
        if cmd == "bench":
            return ["bench", draw(st.sampled_from(["--help", "nosuch", "cpu --help"]))]
        if cmd == "compare":
            return ["compare", draw(source), "--orderings", draw(st.sampled_from(["natural", "rcm,natural", "x"])),
                    "--n-graphs", "2", "--no-plots", "--out", "{W}/rep", "-q"]
        src = draw(source)
        args = ["gram", src, "--out", draw(out), "--backend", "cpu", "-q", "--n-graphs", "3"]
        for f in draw(st.lists(flag, max_size=3)):
            if f[0] == "--n-graphs" and f[1] == "100000" and not src.startswith("{W}"):
                continue  # a built-in set clamps to its full size (160 to 2,622 graphs): minutes, not a fuzz case
            args += list(f)
        return args

    cases = argv().map(lambda a: [x for part in a for x in (part.split(" ") if part.startswith("cpu ") else [part])])
    return {"cli": cases}


PROPERTIES = (Property("cli", "cli", run_cli_case, lambda c: f"run_cli_case({_py(c)})"),)
