"""Every public entry point raises only mgkflow errors (design.md §1.3), whatever it is given.

The cases are generated, not picked: each entry point of :data:`ENTRIES` (the names of
``mgkflow.__all__``, ``mgkflow.io.__all__``, ``mgkflow.gram``, ``mgkflow.datasets``,
``mgkflow.reorder``, ``mgkflow.learn``, ``mgkflow.pipeline``, ``mgkflow.kernels``,
``mgkflow.backends``, the ``Graph`` builders and the kernel's methods) has a *valid* call; every
parameter of its signature in turn gets every value of :data:`BAD` (wrong types, bad values, a
missing file) while the others keep their valid values. The call must return or raise an
:class:`~mgkflow.errors.MgkflowError`; any other exception fails the case. The command line is
fuzzed the same way from its argparse parser: every option and the file arguments of ``gram``,
``compare``, ``fit`` and ``predict`` get every value of :data:`BAD_ARGS`; ``mgkflow.cli.main`` must
return 0, 1 or 2 (or exit with 2), with no traceback.

:data:`UNTESTED` lists the public names not called here and why (records, protocols,
constants); :func:`test_every_public_name_is_covered` keeps the tables complete.
:data:`XFAIL` marks the cases failing today because of bugs in files other helpers own
(``strict``: the mark must go once the fix lands).
"""

from __future__ import annotations

import contextlib
import inspect
import io
import math
import os
import signal
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mgkflow
from mgkflow.errors import MgkflowError

pytest.importorskip("rdkit")

# ---------------------------------------------------------------------------- bad values
_ROOT = Path(tempfile.mkdtemp(prefix="mgkflow-public-errors-"))
(_ROOT / "cwd").mkdir()
(_ROOT / "afile").write_text("x")
#: Bad values every parameter gets in turn, by id.
BAD: dict[str, Any] = {
    "int": 7,
    "negative": -1,
    "nan": math.nan,
    "huge": 2**70,
    "str": "abc",
    "bytes": b"\x00x",
    "none": None,
    "emptylist": [],
    "frame": None,  # a pandas DataFrame, set below
    "missing": _ROOT / "afile" / "missing.smi",  # under a plain file: it does not exist and cannot be created
}
try:
    import pandas as pd

    BAD["frame"] = pd.DataFrame({"a": [1, 2]})
except ImportError:  # pragma: no cover
    del BAD["frame"]

#: Bad values every CLI option gets in turn.
BAD_ARGS: dict[str, str] = {
    "neg": "-1", "zero": "0", "nan": "nan", "inf": "inf", "huge": "1e999", "str": "abc", "empty": "",
    "missing": str(_ROOT / "afile" / "x.smi"), "colon": "delta:", "comma": ",,",
}


# ---------------------------------------------------------------------------- valid inputs


def _graphs() -> list:
    from mgkflow import Graph

    return [
        Graph(np.array([[0, 1, 0], [1, 0, 2.0], [0, 2.0, 0]]), node_labels={"a": [0, 1, 0]},
              edge_labels={"e": np.array([[0, 1.0, 0], [1.0, 0, 0.5], [0, 0.5, 0]])}, title="g0"),
        Graph(np.array([[0, 1.0], [1.0, 0]]), node_labels={"a": [1, 1]},
              edge_labels={"e": np.array([[0, 2.0], [2.0, 0]])}, title="g1"),
    ]


def _kernel(**kw: Any) -> Any:
    from mgkflow import MarginalizedGraphKernel
    from mgkflow.kernels import KroneckerDelta, SquareExponential

    return MarginalizedGraphKernel(KroneckerDelta(0.5, "a"), SquareExponential(1.0, "e"), backend="cpu", **kw)


def _files() -> dict[str, Path]:
    import networkx as nx

    from mgkflow.gram import tiled_gram
    from mgkflow.io import save_gram

    out = {"smiles": _ROOT / "mols.smi", "sdf": _ROOT / "m.sdf", "graphml": _ROOT / "g.graphml",
           "gml": _ROOT / "g.gml", "tu": _ROOT / "TOY", "pdb": _ROOT / "p.pdb", "npz": _ROOT / "K.npz",
           "zarr": _ROOT / "K.zarr"}
    out["smiles"].write_text("smiles name y\nCCO ethanol 1.5\nc1ccccc1 benzene 2.0\n")
    out["sdf"].write_text(
        "ethanol\n  test\n\n  3  2  0  0  0  0  0  0  0  0999 V2000\n"
        "    0.0000    0.0000    0.0000 C   0  0  0  0  0  0  0  0  0  0  0  0\n"
        "    1.5000    0.0000    0.0000 C   0  0  0  0  0  0  0  0  0  0  0  0\n"
        "    2.0000    1.4000    0.0000 O   0  0  0  0  0  0  0  0  0  0  0  0\n"
        "  1  2  1  0\n  2  3  1  0\nM  END\n>  <act>\n1.5\n\n$$$$\n")
    G = nx.path_graph(3)
    nx.set_node_attributes(G, {0: 1, 1: 2, 2: 1}, "label")
    nx.set_edge_attributes(G, 1.5, "weight")
    nx.write_graphml(G, out["graphml"])
    nx.write_gml(G, out["gml"])
    out["tu"].mkdir()
    (out["tu"] / "TOY_A.txt").write_text("1, 2\n2, 3\n4, 5\n")
    (out["tu"] / "TOY_graph_indicator.txt").write_text("1\n1\n1\n2\n2\n")
    (out["tu"] / "TOY_node_labels.txt").write_text("0\n1\n0\n1\n1\n")
    (out["tu"] / "TOY_graph_labels.txt").write_text("1\n0\n")
    out["pdb"].write_text("\n".join(
        f"ATOM  {i + 1:>5}  CA  GLY A{i + 1:>4}    {x:8.3f}{0.0:8.3f}{0.0:8.3f}  1.00  0.00           C"
        for i, x in enumerate([0.0, 1.5, 3.0])) + "\n")
    save_gram(out["npz"], np.eye(2), ids=["a", "b"])
    tiled_gram(_graphs(), kernel=_kernel(), out=out["zarr"], block_size=1)
    return out


FILES = _files()


# ---------------------------------------------------------------------------- entry points
@dataclass(frozen=True)
class Entry:
    """A public entry point: ``fn(**base)`` is a valid call; ``params`` get the bad values
    (default: every named parameter of ``fn``'s signature); ``skip`` maps a parameter or a
    ``param-bad`` case to why it is not tried."""

    name: str
    fn: Callable[..., Any]
    base: dict[str, Any] = field(default_factory=dict)
    params: tuple[str, ...] | None = None
    skip: dict[str, str] = field(default_factory=dict)

    def parameters(self) -> list[str]:
        if self.params is not None:
            return list(self.params)
        sig = inspect.signature(self.fn)
        return [p.name for p in sig.parameters.values()
                if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name != "self"]


def _reader_params(fmt: str) -> tuple[str, ...]:
    import importlib

    from mgkflow.io import FORMATS

    read = importlib.import_module(FORMATS[fmt]).read
    return tuple(p for p in inspect.signature(read).parameters if p not in ("path", "paths", "directory"))


def _reader(fmt: str) -> Callable[..., Any]:
    import mgkflow.io as mio

    fn = getattr(mio, f"read_{fmt}")

    def read(path: Any = FILES[fmt], **options: Any) -> Any:
        return fn(path, **options)

    read.__name__ = f"read_{fmt}"
    return read


def _kernel_method(method: str) -> Callable[..., Any]:
    def call(**kw: Any) -> Any:
        kern = _kernel()
        if method == "theta":
            kern.theta = kw["theta"]
            return kern.theta
        if method == "set_params":
            return kern.set_params(**kw)
        return getattr(kern, method)(**kw)

    return call


def _stage(kind: str) -> Callable[..., Any]:
    """Run a small pipeline (Load nws, Reorder, Pack, Solve) with the stage ``kind`` built from the arguments."""
    from mgkflow import pipeline as pl

    cls = getattr(pl, kind)

    def run(**kw: Any) -> Any:
        stages = {"Load": pl.Load("nws", n_graphs=2, n=6), "Reorder": pl.Reorder("natural"), "Pack": pl.Pack(),
                  "Solve": pl.Solve(backend="cpu")}
        stages[kind] = cls(**kw)
        return pl.Pipeline(list(stages.values())).run()

    run.__signature__ = inspect.signature(cls)  # type: ignore[attr-defined]
    return run


def _registering(register: Callable[..., Any], available: Callable[[], list], unregister: Callable[[str], Any] | None
                 ) -> Callable[..., Any]:
    """``register`` that undoes what it registered (the registries are global)."""

    def call(**kw: Any) -> Any:
        before = set(available())
        try:
            return register(**kw)
        finally:
            for name in set(available()) - before:
                if unregister is not None:
                    unregister(name)

    call.__signature__ = inspect.signature(register)  # type: ignore[attr-defined]
    return call


def _encode(tables: Any) -> Any:
    from mgkflow.io import CategoryEncoder

    enc = CategoryEncoder(tables)
    enc.fit("f", ["a", "b"])
    return enc.encode("f", ["b", "a"]), enc.decode("f", [0, 1])


def _unregister(name: Any) -> None:
    """Register ``fuzz-order`` and unregister ``name`` (and ``fuzz-order``, whatever happened)."""
    import mgkflow.reorder as mr

    mr.register("fuzz-order", lambda graph, seed=0: np.arange(graph.n_nodes), overwrite=True)
    try:
        mr.unregister(name)
    finally:
        if "fuzz-order" in mr.available_methods():
            mr.unregister("fuzz-order")


def _molecular_gpr(X: Any, y: Any, Xp: Any, return_std: Any, **params: Any) -> Any:
    """Fit a MolecularGPR built from ``params`` to (X, y) and predict at Xp."""
    from mgkflow.learn import MolecularGPR

    return MolecularGPR(**params).fit(X, y).predict(Xp, return_std=return_std)


_molecular_gpr.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in ("X", "y", "Xp", "return_std")]
    + [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
       for p in inspect.signature(__import__("mgkflow.learn", fromlist=["x"]).MolecularGPR).parameters.values()]
)


def _lowrank_gpr(X: Any, y: Any, Xp: Any, return_std: Any, **params: Any) -> Any:
    """Fit a LowRankGPR built from ``params`` to (X, y) and predict at Xp."""
    from mgkflow.learn import LowRankGPR

    return LowRankGPR(**params).fit(X, y).predict(Xp, return_std=return_std)


_lowrank_gpr.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in ("X", "y", "Xp", "return_std")]
    + [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
       for p in inspect.signature(__import__("mgkflow.learn", fromlist=["x"]).LowRankGPR).parameters.values()]
)


def _noisy_kernel() -> Any:
    from sklearn.gaussian_process.kernels import ConstantKernel, WhiteKernel

    return ConstantKernel(1.0) * _kernel(normalize=True) + WhiteKernel(0.1)


def _exp_similarity(kernel: Any, gamma: Any, gamma_bounds: Any, X: Any, Y: Any, eval_gradient: Any) -> Any:
    """Build an ExpSimilarity, read its θ and bounds, evaluate it."""
    from mgkflow.learn import ExpSimilarity

    e = ExpSimilarity(kernel, gamma, gamma_bounds)
    return e.theta, e.bounds, e(X, Y, eval_gradient)


def _start_probabilities(kernel: Any, field: Any, max_classes: Any, p: Any, p_bounds: Any, normalize: Any,
                         classes: Any, max_memory_gb: Any, X: Any, Y: Any, eval_gradient: Any) -> Any:
    """Build a StartProbabilities, read its θ and bounds, evaluate it."""
    from mgkflow.learn import StartProbabilities

    k = StartProbabilities(kernel, field, max_classes, p, p_bounds, normalize, classes, max_memory_gb)
    return k.theta, k.bounds, k(X, Y, eval_gradient)


def _size_kernel(name: str) -> Any:
    """Build a size kernel of mgkflow.learn by name, read its θ and bounds, evaluate it."""

    def run(X: Any, Y: Any, eval_gradient: Any, **kw: Any) -> Any:
        import mgkflow.learn as ml

        k = getattr(ml, name)(**kw)
        return k.theta, k.bounds, k(X, Y, eval_gradient), k.diag(X)

    return run


def _fixed_kernel() -> Any:
    from mgkflow import MarginalizedGraphKernel
    from mgkflow.kernels import KroneckerDelta

    return MarginalizedGraphKernel(KroneckerDelta(0.5, "a", h_bounds="fixed"), q_bounds="fixed", backend="cpu")


def _featurized() -> list:
    from mgkflow.learn import MolecularFeaturizer

    return MolecularFeaturizer().fit_transform(["CCO", "c1ccccc1", "CC(=O)N"])


#: n_graphs=None is valid and loads a whole built-in set (about a second): not worth a case.
_WHOLE_SET = {"n_graphs-none": "valid: loads the whole set"}


def _entries() -> list[Entry]:  # noqa: PLR0915 - one table
    import mgkflow.backends as mb
    import mgkflow.datasets as md
    import mgkflow.gram as mg
    import mgkflow.io as mio
    import mgkflow.kernels as mk
    import mgkflow.learn as ml
    import mgkflow.reorder as mr
    from mgkflow import Graph

    g = _graphs()
    k = _kernel()
    adj = np.array([[0, 1.0], [1.0, 0]])
    csr = g[0].adjacency
    import networkx as nx
    from rdkit import Chem

    nxg = nx.path_graph(3)
    E: list[Entry] = [
        # mgkflow
        Entry("Graph", Graph, {"adjacency": adj, "node_labels": {"a": [0, 1]}, "edge_labels": None, "coords": None,
                               "title": "t"}),
        Entry("Graph.from_csr", Graph.from_csr, {"indptr": csr.indptr, "indices": csr.indices, "data": csr.data,
                                                 "n_nodes": 3}),
        Entry("Graph.from_networkx", Graph.from_networkx, {"G": nxg}),
        Entry("Graph.from_smiles", Graph.from_smiles, {"smiles": "CCO"}),
        Entry("Graph.from_rdkit", Graph.from_rdkit, {"mol": Chem.MolFromSmiles("CCO")}),
        Entry("Graph.from_pdb", Graph.from_pdb, {"path": FILES["pdb"]}),
        Entry("Graph.permute", lambda perm: g[0].permute(perm), {"perm": [2, 0, 1]}),
        Entry("MarginalizedGraphKernel", mgkflow.MarginalizedGraphKernel, {"backend": "cpu"}),
        Entry("kernel.__call__", _kernel_method("__call__"), {"X": g, "Y": None, "eval_gradient": False,
                                                               "normalize": None, "nodal": False}),
        Entry("kernel.diag", _kernel_method("diag"), {"X": g, "nodal": False}),
        Entry("kernel.clone_with_theta", _kernel_method("clone_with_theta"), {"theta": k.theta}),
        Entry("kernel.theta", _kernel_method("theta"), {"theta": k.theta}),
        Entry("kernel.set_params", _kernel_method("set_params"), {}, params=tuple(k.get_params(deep=True))),
        Entry("load_gram", mgkflow.load_gram, {"path": FILES["zarr"]}),
        # mgkflow.io
        Entry("io.read_graphs", mio.read_graphs, {"path": FILES["smiles"], "format": None}),
        *[Entry(f"io.read_{f}", _reader(f), {}, params=("path", *_reader_params(f))) for f in mio.available_formats()],
        Entry("io.detect_format", mio.detect_format, {"path": FILES["smiles"]}),
        Entry("io.default_kernels", mio.default_kernels, {"graphs": g}),
        Entry("io.save_gram", mio.save_gram, {"path": _ROOT / "out" / "K2.npz", "gram": np.eye(2), "ids": ["a", "b"],
                                              "kernel": k, "params": {"x": 1}, "col_ids": None}),
        Entry("io.load_gram_npz", mio.load_gram_npz, {"path": FILES["npz"]}),
        Entry("io.kernel_params", mio.kernel_params, {"kernel": k}),
        Entry("io.atomic_write", mio.atomic_write, {"path": _ROOT / "out" / "w.txt",
                                                    "write": lambda t: Path(t).write_text("x")}),
        Entry("io.check_writable", mio.check_writable, {"path": _ROOT / "out" / "c.txt", "what": "output file"}),
        Entry("io.CategoryEncoder", _encode, {"tables": {"f": {"a": 0}}}),
        # mgkflow.gram
        Entry("gram.tiled_gram", mg.tiled_gram, {"X": g, "Y": None, "kernel": k, "out": None, "block_size": 1}),
        Entry("gram.load_gram", mg.load_gram, {"path": FILES["zarr"]}),
        Entry("gram.plan_blocks", mg.plan_blocks, {"n_rows": 3, "n_cols": None, "block_size": 2}),
        Entry("gram.default_block_size", mg.default_block_size, {"n_rows": 3, "n_cols": None, "backend": "cpu"}),
        Entry("gram.estimate_resources", mg.estimate_resources, {"X": g}),
        Entry("gram.client_from_spec", lambda spec: contextlib.ExitStack().enter_context(mg.client_from_spec(spec)),
              {"spec": "local:1"}),
        Entry("gram.reorder_graphs", mg.reorder_graphs, {"graphs": g, "method": "rcm", "workers": 1}),
        Entry("gram.PermutationCache", lambda directory: mg.reorder_graphs(g, "rcm", cache=mg.PermutationCache(
            directory)), {"directory": _ROOT / "permcache"}),
        Entry("gram.graph_digest", mg.graph_digest, {"graph": g[0]}),
        Entry("gram.graphs_digest", mg.graphs_digest, {"graphs": g}),
        # mgkflow.datasets
        Entry("datasets.nws", md.nws, {"n_graphs": 2, "n": 6}),
        Entry("datasets.ba", md.ba, {"n_graphs": 2, "n": 8, "m": 2}),
        Entry("datasets.drugs", md.drugs, {"n_graphs": 2}, skip=_WHOLE_SET),
        Entry("datasets.proteins", md.proteins, {"n_graphs": 1}, skip=_WHOLE_SET),
        Entry("datasets.molecules", md.molecules, {"n_graphs": 2}),
        Entry("datasets.freesolv", md.freesolv, {"n_graphs": 2}, skip=_WHOLE_SET),
        Entry("datasets.lombardo", md.lombardo, {"n_graphs": 2}, skip=_WHOLE_SET),
        Entry("datasets.lipophilicity", md.lipophilicity, {"n_graphs": 2}, skip=_WHOLE_SET),
        Entry("datasets.photoswitch", md.photoswitch, {"n_graphs": 2}, skip=_WHOLE_SET),
        Entry("datasets.solubility", md.solubility, {"n_graphs": 2}, skip=_WHOLE_SET),
        Entry("datasets.load", md.load, {"name": "nws"}),
        Entry("datasets.default_kernels", md.default_kernels, {"name": "drugs"}),
        # mgkflow.reorder
        Entry("reorder.reorder", mr.reorder, {"graph": g[0], "method": "rcm"}),
        Entry("reorder.default_method", mr.default_method, {"graph": g[0]}),
        Entry("reorder.register", _registering(mr.register, mr.available_methods, mr.unregister),
              {"name": "fuzz-order", "fn": lambda graph, seed=0: np.arange(graph.n_nodes)}),
        Entry("reorder.unregister", _unregister, {"name": "fuzz-order"}),
        Entry("reorder.get_method", mr.get_method, {"name": "rcm"}),
        Entry("reorder.is_identity", mr.is_identity, {"name": "natural"}),
        Entry("reorder.resolve_method", mr.resolve_method, {"name": "auto", "graph": g[0]}),
        Entry("reorder.pbr_groups", mr.pbr_groups, {"graph": g[0]}),
        # mgkflow.learn
        Entry("learn.Normalized", lambda kernel, X: ml.Normalized(kernel)(X), {"kernel": k, "X": g}),
        Entry("learn.Tanimoto", lambda X, Y: ml.Tanimoto()(X, Y), {"X": np.eye(3), "Y": None}),
        Entry("learn.regression_metrics", ml.regression_metrics, {"y": np.arange(3.0), "p": np.arange(3.0)}),
        Entry("learn.kfold_splits", ml.kfold_splits, {"n": 6, "folds": 2, "seeds": [0]}),
        Entry("learn.labelled_split", ml.labelled_split, {"labels": ["train", "test", "train"]}),
        Entry("learn.morgan_fingerprints", ml.morgan_fingerprints, {"smiles": ["CCO", "c1ccccc1"]}),
        Entry("learn.MolecularGPR", _molecular_gpr, {"X": ["CCO", "CCC", "c1ccccc1"], "y": [1.0, 2.0, 3.0],
                                                     "Xp": ["CC"], "return_std": True, "descriptors": False,
                                                     "n_restarts": 0, "max_iter": 2, "backend": "cpu", "verbose": 0},
              skip={"n_restarts-huge": "valid: 2**70 restarts (endless)", "max_iter-huge": "valid (endless)"}),
        Entry("learn.molecular_kernel", lambda X, **kw: ml.molecular_kernel(**kw)(X),
              {"X": _featurized(), "backend": "cpu", "fit_graph_kernel": True},
              # X: the kernel is scikit-learn's Sum of Products, whose C and WhiteKernel read X first
              params=tuple(inspect.signature(ml.molecular_kernel).parameters)),
        Entry("learn.MolecularFeaturizer",
              lambda X, titles, **kw: ml.MolecularFeaturizer(**kw).fit(X).transform(X, titles=titles),
              {"X": ["CCO", "c1ccccc1"], "titles": None},
              params=("X", "titles", *inspect.signature(ml.MolecularFeaturizer).parameters)),
        Entry("learn.molecular_descriptors", ml.molecular_descriptors, {"molecules": ["CCO", "c1ccccc1"]}),
        Entry("learn.FeatureKernel", lambda kernel, X, Y, eval_gradient: ml.FeatureKernel(kernel)(X, Y, eval_gradient),
              {"kernel": None, "X": _featurized(), "Y": None, "eval_gradient": True}),
        Entry("learn.ExpSimilarity", _exp_similarity, {"kernel": _kernel(normalize=True), "gamma": 2.0,
                                                       "gamma_bounds": (0.1, 10.0), "X": g, "Y": None,
                                                       "eval_gradient": False}),
        Entry("learn.LowRankGPR", _lowrank_gpr, {"X": g, "y": [1.0, 2.0], "Xp": g[:1], "return_std": True,
                                                 "kernel": _noisy_kernel(), "n_landmarks": 1, "max_iter": 2,
                                                 "verbose": 0},
              skip={"n_restarts-huge": "valid: 2**70 restarts (endless)", "max_iter-huge": "valid (endless)"}),
        Entry("learn.pivoted_cholesky", ml.pivoted_cholesky, {"kernel": k, "X": g, "n_landmarks": 1}),
        Entry("learn.kmeans_plus_plus", ml.kmeans_plus_plus, {"kernel": k, "X": g, "n_landmarks": 2,
                                                              "random_state": 0}),
        Entry("learn.random_landmarks", ml.random_landmarks, {"X": g, "n_landmarks": 1, "random_state": 0}),
        Entry("learn.cross_kernel", ml.cross_kernel, {"kernel": _noisy_kernel(), "X": g, "Y": g[:1],
                                                      "eval_gradient": True, "cache": {}, "block_rows": 1}),
        Entry("learn.kernel_diag", ml.kernel_diag, {"kernel": _noisy_kernel(), "X": g, "eval_gradient": True,
                                                    "cache": {}}),
        Entry("learn.contracted_gradient", ml.contracted_gradient, {"kernel": _noisy_kernel(), "X": g, "Y": g[:1],
                                                                    "W": np.ones((2, 1)), "block_rows": 1,
                                                                    "cache": {}}),
        Entry("learn.Cached", lambda kernel, X, Y, eval_gradient: ml.Cached(kernel)(X, Y, eval_gradient),
              {"kernel": k, "X": g, "Y": None, "eval_gradient": False}),
        Entry("learn.StartProbabilities", _start_probabilities,
              {"kernel": _fixed_kernel(), "field": "a", "max_classes": 2, "p": 1.0, "p_bounds": (0.05, 20.0),
               "normalize": True, "classes": None, "max_memory_gb": 4.0, "X": g, "Y": None, "eval_gradient": True}),
        Entry("learn.SizeKernel", _size_kernel("SizeKernel"),
              {"length_scale": 10.0, "length_scale_bounds": (0.5, 1000.0), "X": g, "Y": None, "eval_gradient": True},
              params=("X", "Y", "eval_gradient", *inspect.signature(ml.SizeKernel).parameters)),
        Entry("learn.SizeRatioKernel", _size_kernel("SizeRatioKernel"),
              {"alpha": 1.0, "alpha_bounds": (0.01, 100.0), "X": g, "Y": None, "eval_gradient": True},
              params=("X", "Y", "eval_gradient", *inspect.signature(ml.SizeRatioKernel).parameters)),
        # mgkflow.pipeline
        *[Entry(f"pipeline.{s}", _stage(s), {"dataset": "nws", "n_graphs": 2, "n": 6} if s == "Load" else {})
          for s in ("Load", "Reorder", "Pack", "Solve")],
        Entry("pipeline.Pipeline", lambda stages: mgkflow.pipeline.Pipeline(stages).run(),
              {"stages": [mgkflow.pipeline.Load("nws", n_graphs=2, n=6)]}),
        # mgkflow.kernels
        Entry("kernels.Constant", mk.Constant, {"c": 1.0}),
        Entry("kernels.KroneckerDelta", mk.KroneckerDelta, {"h": 0.5, "field": "a"}),
        Entry("kernels.SquareExponential", mk.SquareExponential, {"length_scale": 1.0, "field": "e"}),
        Entry("kernels.RationalQuadratic", mk.RationalQuadratic, {"length_scale": 1.0, "alpha": 1.0, "field": "e"}),
        Entry("kernels.VectorSquareExponential", mk.VectorSquareExponential, {"length_scale": 1.0, "field": "x",
                                                                              "dim": 2}),
        Entry("kernels.CosineSimilarity", mk.CosineSimilarity, {"field": "x", "dim": 2}),
        Entry("kernels.MinMax", mk.MinMax, {"h": 1.0, "field": "x", "dim": 2}),
        Entry("kernels.vector_component", mk.vector_component, {"field": "x", "k": 0}),
        Entry("kernels.vector_dims", mk.vector_dims, {"kernel": mk.Constant(1.0)}),
        Entry("kernels.c_fields", mk.c_fields, {"kernel": mk.KroneckerDelta(0.5, "a")}),
        Entry("kernels.Product", lambda a, b: mk.Product(a, b), {"a": mk.Constant(0.5), "b": mk.Constant(0.5)}),
        Entry("kernels.Sum", lambda a, b: mk.Sum(a, b), {"a": mk.Constant(0.5), "b": mk.Constant(0.5)}),
        Entry("kernels.tensor_product", lambda a, b: mk.tensor_product(a, b),
              {"a": mk.Constant(0.5), "b": mk.Constant(0.5)}),
        Entry("kernels.check_node_kernel", mk.check_node_kernel, {"kernel": mk.Constant(1.0)}),
        Entry("kernels.check_edge_kernel", mk.check_edge_kernel, {"kernel": mk.Constant(1.0)}),
        # mgkflow.backends
        Entry("backends.make_backend", mb.make_backend, {"name": "cpu"}),
        Entry("backends.register", _registering(mb.register, mb.available_backends, mb.unregister),
              {"name": "fuzz-backend", "factory": lambda **kw: None}, params=("factory",)),
        Entry("backends.resolve_backend", mb.resolve_backend, {"name": "cpu"}),
    ]
    return E


#: Public names not called here, and why.
UNTESTED: dict[str, str] = {
    **{n: "an exception or warning class" for n in mgkflow.__all__ if n.endswith(("Error", "Warning"))},
    "mgkflow.SolveStats": "a record of a solve (no checks)",
    "mgkflow.learn.save_model": "writes a model file; its bad inputs are tested in test_learn_commands.py",
    "mgkflow.learn.load_model": "reads a model file; bad and foreign files are tested in test_learn_commands.py",
    "mgkflow.learn.screen": "streams files; bad inputs and resumes are tested in test_learn_commands.py",
    "mgkflow.gpu_available": "no parameters",
    "mgkflow.io.GraphSet": "a record returned by the readers",
    "mgkflow.io.FORMATS": "a constant", "mgkflow.io.MOLECULE_FORMATS": "a constant",
    "mgkflow.io.available_formats": "no parameters", "mgkflow.io.default_file_mode": "no parameters",
    "mgkflow.io.GramFile": "a record returned by load_gram_npz",
    "mgkflow.gram.GramResult": "a record", "mgkflow.gram.GramMatrix": "a record returned by load_gram",
    "mgkflow.gram.GramStore": "the store behind tiled_gram/load_gram (tested through them)",
    "mgkflow.gram.Block": "a record of plan_blocks", "mgkflow.gram.ResourceEstimate": "a record",
    "mgkflow.gram.ResourceError": "an exception class", "mgkflow.gram.StoreMismatchError": "an exception class",
    "mgkflow.gram.IncompleteStoreError": "an exception class", "mgkflow.gram.StoreExistsError": "an exception class",
    "mgkflow.datasets.DatasetInfo": "a record", "mgkflow.datasets.MoleculeSet": "a record",
    "mgkflow.datasets.list_datasets": "no parameters", "mgkflow.datasets.data_dir": "no parameters",
    "mgkflow.reorder.AUTO_PBR_MIN_NODES": "a constant", "mgkflow.reorder.available_methods": "no parameters",
    "mgkflow.pipeline.PipelineState": "a record", "mgkflow.pipeline.StageStats": "a record",
    "mgkflow.pipeline.Stage": "the abstract base of the stages", "mgkflow.pipeline.PipelineResult": "a record",
    "mgkflow.kernels.Hyperparameter": "a record", "mgkflow.kernels.BaseKernel": "the abstract base",
    "mgkflow.backends.Backend": "a protocol", "mgkflow.backends.Solution": "a record",
    "mgkflow.backends.GradientSolution": "a record", "mgkflow.backends.NodalSolution": "a record",
    "mgkflow.backends.available_backends": "no parameters",
    "mgkflow.backends.unregister": "undoes backends.register (called by that entry)",
    "mgkflow.io.DroppedLabelWarning": "a warning class", "mgkflow.io.PathNotFoundError": "an exception class",
    "mgkflow.datasets.UNLIMITED": "a constant",
    "mgkflow.learn.GraphGPR": "an estimator: bad parameters are checked in tests/test_learn_gpr.py",
}

ENTRIES = {e.name: e for e in _entries()}


def _cases() -> list[tuple[str, str, str]]:
    out = []
    for e in ENTRIES.values():
        for p in e.parameters():
            if p in e.skip:
                continue
            out += [(e.name, p, b) for b in BAD if f"{p}-{b}" not in e.skip]
    return out


# Cases failing today because of bugs in files other helpers own (core: graph.py, _graph_checks.py, kernels.py,
# mgk.py, evaluation/, backends/, errors.py; io: io/, datasets/, gram/load.py, gram/store.py), as
# (entry-param, bad values, reason with the exception and the innermost mgkflow file). Strict: a fixed case fails
# here until its line goes. HANGS run not at all (each would cost the 5 s limit).
XFAIL_TABLE: list[tuple[str, str, str]] = [
]
HANGS: dict[str, str] = {}

#: case id -> reason, from :data:`XFAIL_TABLE`.
XFAIL: dict[str, str] = {f"{ep}-{b}": reason for ep, bads, reason in XFAIL_TABLE for b in bads.split()}


def _param(case: tuple[str, ...]) -> Any:
    cid = "-".join(case)
    marks = [pytest.mark.xfail(strict=True, reason=XFAIL[cid])] if cid in XFAIL else []
    if cid in HANGS:
        marks = [pytest.mark.xfail(run=False, reason=HANGS[cid])]
    return pytest.param(*case, id=cid, marks=marks)


@contextlib.contextmanager
def _time_limit(seconds: float):
    def handler(signum: int, frame: Any) -> None:  # noqa: ARG001
        raise TimeoutError(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture(autouse=True, scope="module")
def _in_scratch() -> Any:
    old = Path.cwd()
    os.chdir(_ROOT / "cwd")  # outputs named by a bad value ("abc") land here
    yield
    os.chdir(old)


def _blame(exc: BaseException) -> str:
    """``TypeError@mgk.py (raised in numeric.py)``: the innermost mgkflow file of the traceback."""
    from mgkflow.fuzz.checks import _responsible

    ours, last = _responsible(exc.__traceback__)
    return f"{type(exc).__name__}@{ours} (raised in {last})"


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_the_valid_call_works(name: str) -> None:
    # the table's base call is valid: otherwise every bad case of the entry would test nothing
    e = ENTRIES[name]
    with _time_limit(60):
        e.fn(**e.base)


@pytest.mark.parametrize(("entry", "param", "bad"), [_param(c) for c in _cases()])
def test_bad_argument_raises_an_mgkflow_error(entry: str, param: str, bad: str) -> None:
    e = ENTRIES[entry]
    kwargs = {**e.base, param: BAD[bad]}
    os.chdir(tempfile.mkdtemp(dir=_ROOT / "cwd"))  # a fresh directory: what one case writes ("abc") is not the next's
    try:
        with _time_limit(5):
            e.fn(**kwargs)
    except MgkflowError:
        pass
    except BaseException as exc:  # noqa: BLE001 - anything else is the failure under test
        pytest.fail(f"{entry}({param}={BAD[bad]!r:.40}) raised {_blame(exc)}: {exc!s:.200}", pytrace=False)


def _public_exceptions() -> list[Any]:
    import importlib

    out = []
    for mod in ("mgkflow", "mgkflow.io", "mgkflow.gram", "mgkflow.datasets", "mgkflow.reorder", "mgkflow.learn",
                "mgkflow.pipeline", "mgkflow.kernels", "mgkflow.backends", "mgkflow.errors"):
        m = importlib.import_module(mod)
        for n in m.__all__:
            obj = getattr(m, n)
            if isinstance(obj, type) and issubclass(obj, BaseException) and not issubclass(obj, Warning):
                reason = _EXCEPTION_XFAIL.get(f"{mod}.{n}")
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                out.append(pytest.param(obj, id=f"{mod}.{n}", marks=marks))
    return out


_EXCEPTION_XFAIL: dict[str, str] = {}


@pytest.mark.parametrize("cls", _public_exceptions())
def test_every_public_exception_derives_from_mgkflow_error(cls: type) -> None:
    from mgkflow.errors import MgkflowError

    assert issubclass(cls, MgkflowError), [c.__name__ for c in cls.__mro__]


def test_every_public_name_is_covered() -> None:
    import importlib

    covered = set(UNTESTED) | {f"mgkflow.{name}" for name in ENTRIES}
    missing = []
    for mod in ("mgkflow", "mgkflow.io", "mgkflow.gram", "mgkflow.datasets", "mgkflow.reorder", "mgkflow.learn",
                "mgkflow.pipeline", "mgkflow.kernels", "mgkflow.backends"):
        m = importlib.import_module(mod)
        for n in m.__all__:
            full = f"{mod}.{n}"
            if full not in covered and n not in UNTESTED:
                missing.append(full)
    assert not missing, f"public names with no entry in ENTRIES or UNTESTED: {missing}"
    assert len(_cases()) > 1000  # generated from the signatures, not picked
    ids = {"-".join(c) for c in _cases()}
    assert not (set(XFAIL) | set(HANGS)) - ids, "stale XFAIL/HANGS entries"


# ---------------------------------------------------------------------------- the command line
_LEARN = _ROOT / "learn"  # fit's training table, predict's model file and candidates (made by _learn_files)
_CLI_BASE = {
    "gram": ["gram", "nws", "--n-graphs", "2", "--backend", "cpu", "-q", "--out", "K.npz"],
    "compare": ["compare", "nws", "--n-graphs", "2", "--orderings", "natural", "--no-plots", "-q", "--out", "rep"],
    "fit": ["fit", str(_LEARN / "train.csv"), *"--target y --model m.mgk --restarts 0 --no-descriptors".split(),
            *"--backend cpu -q --force".split()],  # fmt: skip
    "predict": ["predict", str(_LEARN / "model.mgk"), str(_LEARN / "cands.csv"), "--out", "p.csv", "-q", "--force"],
}
#: More positional arguments fuzzed than the first (``SOURCE``, argv[1]): their argv index by name.
_CLI_POSITIONALS = {"predict": {"SMILES_FILE": 2}}


@pytest.fixture(scope="module")
def _learn_files() -> Path:
    """The files of the ``fit`` and ``predict`` base calls: 8 training rows, a model file, 4 candidates."""
    if not (_LEARN / "model.mgk").exists():
        from mgkflow.learn import MolecularGPR
        from mgkflow.learn.model_file import save_model

        _LEARN.mkdir(exist_ok=True)
        smiles = ["CCO", "CCCO", "CCCCO", "c1ccccc1", "Cc1ccccc1", "CC(=O)O", "CCN", "c1ccccc1O"]
        y = [0.1, 0.5, 0.9, 2.0, 2.5, -0.2, 0.0, 1.5]
        (_LEARN / "train.csv").write_text("smiles,y\n" + "".join(f"{s},{v}\n" for s, v in zip(smiles, y)))
        (_LEARN / "cands.csv").write_text("smiles,name\nCCCCCO,pentanol\nC1CC(,broken\nCc1ccccc1C,xylene\n")
        model = MolecularGPR(descriptors=False, n_restarts=0, max_iter=3, backend="cpu", verbose=0).fit(smiles, y)
        save_model(model, _LEARN / "model.mgk")
    return _LEARN


def _cli_options() -> list[tuple[str, str]]:
    import argparse

    from mgkflow.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = []
    for cmd in _CLI_BASE:
        for action in sub.choices[cmd]._actions:
            if action.option_strings and action.nargs != 0 and not isinstance(action, argparse._HelpAction):
                out.append((cmd, max(action.option_strings, key=len)))
        out.append((cmd, "SOURCE"))
        out += [(cmd, name) for name in _CLI_POSITIONALS.get(cmd, {})]
    return out


XFAIL_CLI: dict[str, str] = {}


def _cli_param(cmd: str, opt: str, bad: str) -> Any:
    cid = f"{cmd}-{opt}-{bad}"
    marks = [pytest.mark.xfail(strict=True, reason=XFAIL_CLI[cid])] if cid in XFAIL_CLI else []
    return pytest.param(cmd, opt, bad, id=cid, marks=marks)


@pytest.mark.parametrize(("cmd", "opt", "bad"), [_cli_param(c, o, b) for c, o in _cli_options() for b in BAD_ARGS])
def test_cli_bad_option_exits_cleanly(cmd: str, opt: str, bad: str, _learn_files: Path) -> None:
    from mgkflow.cli import main

    argv = list(_CLI_BASE[cmd])
    if opt == "SOURCE":
        argv[1] = BAD_ARGS[bad]
    elif opt in _CLI_POSITIONALS.get(cmd, {}):
        argv[_CLI_POSITIONALS[cmd][opt]] = BAD_ARGS[bad]
    elif opt in argv:
        argv[argv.index(opt) + 1] = BAD_ARGS[bad]
    else:
        argv += [opt, BAD_ARGS[bad]]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()), _time_limit(30):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
    text = err.getvalue()
    assert "Traceback" not in text, text[-500:]
    assert rc in (0, 1, 2), f"exit code {rc!r}: {text[-300:]}"
    if rc == 1:
        assert text.strip().startswith("mgkflow") and len(text.strip().splitlines()) == 1, text[-300:]


def test_cli_base_calls_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _learn_files: Path) -> None:
    from mgkflow.cli import main

    monkeypatch.chdir(tmp_path)  # the module's scratch folder may hold K.npz already (no --force here)
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        for argv in _CLI_BASE.values():
            assert main(argv) == 0
    assert Path("K.npz").exists() and Path("m.mgk").exists()
    assert Path("p.csv").read_text().startswith("line,id,smiles,mean,std,error\n")
    assert len(_cli_options()) > 40


if os.environ.get("MGKFLOW_PUBLIC_ERRORS_LIST"):  # pragma: no cover - a helper to list the cases
    print(len(_cases()), "cases")
