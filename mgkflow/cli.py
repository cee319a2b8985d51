"""Command-line interface: ``mgkflow {gram,compare,datasets,fit,predict,bench}``.

``gram`` and ``compare`` take a built-in dataset name or a user's file or
directory (SMILES, SDF, GraphML, GML, TU dataset; see :mod:`mgkflow.io`).

Exit codes: 0 success, 1 an error in the input, arguments or files (one line
on stderr, no traceback), 2 a usage error (options that do not go together
included, refused before any work), 3 out of memory, 130 interrupted. Library
warnings print as one ``mgkflow: warning: ...`` line each.

Examples
--------
    mgkflow datasets
    mgkflow gram nws --n-graphs 20 --labeled --q 0.05 --out K.npy
    mgkflow gram molecules.sdf --out K.npz
    mgkflow gram my.smi --node-kernel "delta:element:0.5*delta:charge" --out K.npz
    mgkflow gram MUTAG/ --node-kernel delta:label --edge-kernel delta:label --out K.npz
    mgkflow compare nws ba --orderings natural,rcm,pbr --out reports/
    mgkflow bench gpu --help
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ._version import __version__
from .backends import available_backends
from .errors import MgkflowError


class UsageError(MgkflowError, ValueError):
    """Options that do not go together (exit code 2, like the other usage errors)."""


def _all_orderings() -> str:
    from .reorder import available_methods

    return ",".join(available_methods())


ORDERINGS_DEFAULT = _all_orderings()
KERNEL_SPEC_HELP = (
    "base kernel: terms joined by '*', each delta:FIELD[:H] (KroneckerDelta, H default 0.5), "
    "sqexp:FIELD[:LENGTH] (SquareExponential, default 1.0) or const[:C] (Constant, default 1.0)"
)


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return v


def _probability(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got {text!r}") from None
    if not (0.0 < v < 1.0):
        raise argparse.ArgumentTypeError(f"must lie in (0, 1), got {text}")
    return v


def _csv_list(text: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError("empty list")
    return items


def _field_list(text: str) -> list[str]:
    """Comma-separated label fields; an empty string means none."""
    return [t.strip() for t in text.split(",") if t.strip()]


def parse_kernel_spec(spec: str) -> Any:
    """Build a base kernel from a CLI spec such as ``"delta:element:0.5*sqexp:distance:1.0"``.

    Terms are joined by ``*`` (a product kernel); each is ``delta:FIELD[:H]``
    (:class:`~mgkflow.kernels.KroneckerDelta`, H default 0.5),
    ``sqexp:FIELD[:LENGTH]`` (:class:`~mgkflow.kernels.SquareExponential`,
    default 1.0) or ``const[:C]`` (:class:`~mgkflow.kernels.Constant`, default 1.0).

    Examples
    --------
    >>> parse_kernel_spec("delta:element")
    KroneckerDelta(0.5, 'element')
    >>> parse_kernel_spec("const:0.5")
    Constant(0.5)
    """
    from .kernels import Constant, KroneckerDelta, SquareExponential

    kernels = []
    for term in spec.split("*"):
        parts = [s.strip() for s in term.strip().split(":")]
        kind, args = parts[0].lower(), parts[1:]
        try:
            if kind in ("const", "constant") and len(args) <= 1:
                kernels.append(Constant(float(args[0]) if args and args[0] else 1.0))
            elif kind in ("delta", "kronecker") and 1 <= len(args) <= 2 and args[0]:
                kernels.append(KroneckerDelta(float(args[1]) if len(args) > 1 else 0.5, args[0]))
            elif kind in ("sqexp", "squareexponential", "se") and 1 <= len(args) <= 2 and args[0]:
                kernels.append(SquareExponential(float(args[1]) if len(args) > 1 else 1.0, args[0]))
            else:
                raise ValueError(f"cannot read kernel term {term.strip()!r}")
        except (ValueError, TypeError) as exc:
            raise argparse.ArgumentTypeError(f"{exc}; {KERNEL_SPEC_HELP}") from None
    if not kernels:
        raise argparse.ArgumentTypeError(f"empty kernel; {KERNEL_SPEC_HELP}")
    out = kernels[0]
    for k in kernels[1:]:
        out = out * k
    return out


def parse_node_kernel_spec(spec: str) -> Any:
    """:func:`parse_kernel_spec`, refusing a node kernel that can reach 0 or exceed 1 (e.g. ``delta:element:0``).

    Examples
    --------
    >>> parse_node_kernel_spec("delta:element:0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: node kernel 'delta:element:0' takes values in [0, 1]; ...
    """
    from .kernels import KernelRangeError, check_node_kernel

    kernel = parse_kernel_spec(spec)
    try:
        check_node_kernel(kernel)
    except KernelRangeError:
        raise argparse.ArgumentTypeError(
            f"node kernel {spec!r} takes values in {kernel.range}; node kernel values must lie in (0, 1] "
            "(a Kronecker delta's H in (0, 1], a constant's C in (0, 1])"
        ) from None
    return kernel


def parse_edge_kernel_spec(spec: str) -> Any:
    """:func:`parse_kernel_spec`, refusing an edge kernel that can leave [0, 1]."""
    from .kernels import KernelRangeError, check_edge_kernel

    kernel = parse_kernel_spec(spec)
    try:
        check_edge_kernel(kernel)
    except KernelRangeError:
        raise argparse.ArgumentTypeError(
            f"edge kernel {spec!r} takes values in {kernel.range}; edge kernel values must lie in [0, 1]"
        ) from None
    return kernel


def _add_source_options(p: argparse.ArgumentParser) -> None:
    from .io import available_formats

    g = p.add_argument_group(
        "reading a file or directory",
        "SOURCE may be a file (.smi/.csv SMILES, .sdf, .graphml, .gml, .pdb) or a directory (TU dataset, "
        "or GraphML/GML/PDB files); see mgkflow.io. Molecules get the drugs set's fields and kernels, "
        "PDB files the proteins set's.",
    )
    g.add_argument("--format", choices=available_formats(), default=None, help="file format (default: from the name)")
    g.add_argument("--node-labels", type=_field_list, default=None, metavar="A,B",
                   help="node label fields to read (GraphML/GML/TU; default: all)")
    g.add_argument("--edge-labels", type=_field_list, default=None, metavar="A,B",
                   help="edge label fields to read (GraphML/GML/TU; default: all)")
    g.add_argument("--weight", default="weight", help="GraphML/GML edge attribute holding weights (default weight)")
    g.add_argument("--skip-bad", action="store_true", help="skip unreadable molecules (SMILES/SDF) instead of failing")
    g.add_argument("--smiles-column", default=None, metavar="NAME",
                   help="SMILES/CSV files: the header's column holding the SMILES (default: a column named "
                   "smiles, else the first); the first line is then the header")
    g.add_argument("--cutoff", type=float, default=6.0, help="PDB files: contact distance in Angstrom (default 6)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mgkflow",
        description="Marginalized graph kernel with pluggable node reordering (GPU if present, CPU otherwise).",
        epilog="Exit codes: 0 ok, 1 error in input/arguments/files, 2 usage, 3 out of memory, 130 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"mgkflow {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("datasets", help="list the built-in datasets", description="List the built-in datasets.")
    p.set_defaults(func=cmd_datasets)

    p = sub.add_parser(
        "gram",
        help="compute the Gram matrix of a dataset or a file",
        description="Compute the Gram matrix of a built-in dataset or of graphs read from a file or directory, "
        "and save it: .npz (matrix + graph ids + kernel parameters, see mgkflow.io.load_gram_npz) or "
        ".npy (bare matrix). Default kernels: the dataset's recommended ones; for molecule files the drugs "
        "set's (delta:element, delta:bond_order); for other files delta:label where an integer field "
        "'label' exists, else const.",
    )
    p.add_argument("dataset", metavar="SOURCE", help="dataset name (see `mgkflow datasets`) or a file/directory")
    p.add_argument("--q", type=_probability, default=0.05, help="stop probability in (0, 1) (default 0.05)")
    p.add_argument("--n-graphs", type=_positive_int, default=None,
                   help="use the first N graphs (at most the dataset's size)")
    p.add_argument("--labeled", action="store_true", help="labeled variant of the synthetic sets (nws, ba)")
    p.add_argument("--node-kernel", type=parse_node_kernel_spec, default=None, metavar="SPEC",
                   help=KERNEL_SPEC_HELP + "; values must lie in (0, 1], so H > 0")
    p.add_argument("--edge-kernel", type=parse_edge_kernel_spec, default=None, metavar="SPEC",
                   help="as --node-kernel; values in [0, 1] (H = 0 allowed)")
    p.add_argument(
        "--ordering", default="auto",
        help="node ordering applied before solving (default auto: natural below 256 nodes, PBR above)",
    )
    p.add_argument("--backend", choices=available_backends(), default="auto",
                   help="solver backend (exact: the scipy reference backend)")
    p.add_argument("--normalize", action="store_true",
                   help="normalize K(G,G') by sqrt(K(G,G) K(G',G')) (not with a .zarr store: it keeps the raw "
                   "kernel; mgkflow.load_gram(path, normalize=True) normalizes when reading)")
    p.add_argument("--out", "-o", type=Path, required=True,
                   help="output: .npz (matrix with ids and kernel parameters), .npy (bare matrix) or a .zarr "
                   "store (block by block, with ids and parameters; run the same command again to resume). "
                   "An existing file is refused unless --force; missing directories are created")
    p.add_argument("--force", "-f", action="store_true",
                   help="replace an existing --out/--stats file; a .zarr store is started anew (without "
                   "--force it is resumed when made by the same computation)")
    p.add_argument("--block-size", type=_positive_int, default=None,
                   help="graphs per block side (tiled run, --out .npy or .zarr; default 2048 on the GPU, 128 on "
                   "the CPU)")
    p.add_argument("--dask", default=None, metavar="SPEC",
                   help="solve the blocks on Dask (--out .npy or .zarr): local:N (N CPU workers), cuda (one "
                   "worker per GPU) or a scheduler address tcp://HOST:PORT")
    p.add_argument("--dtype", choices=["float64", "float32"], default="float64",
                   help="stored dtype of a tiled run (--out .npy or .zarr; default float64)")
    p.add_argument("--stats", type=Path, default=None,
                   help="also write per-stage statistics as CSV (an existing file is refused unless --force)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar or messages")
    _add_source_options(p)
    p.set_defaults(func=cmd_gram)

    p = sub.add_parser(
        "compare",
        help="compare node orderings (octiles, tile density, solver time)",
        description="Compare node orderings on datasets or graph files: octile counts, tile-density histograms, "
        "reorder time and optionally solver time (median of --repeat solves). Writes orderings.csv, "
        "density_histograms.csv and PNG plots to --out.",
    )
    p.add_argument("datasets", nargs="+", metavar="SOURCE",
                   help="dataset names (see `mgkflow datasets`) or files/directories of graphs (SMILES, SDF, "
                   "GraphML, GML, PDB, TU; read with their defaults)")
    p.add_argument(
        "--orderings", type=_csv_list, default=_csv_list(ORDERINGS_DEFAULT),
        help=f"comma-separated orderings (default {ORDERINGS_DEFAULT})",
    )
    p.add_argument("--n-graphs", type=_positive_int, default=None, help="first N graphs of each dataset")
    p.add_argument("--labeled", action="store_true", help="labeled variant of the synthetic sets (nws, ba)")
    p.add_argument("--solve", action="store_true", help="also solve the Gram matrix under each ordering")
    p.add_argument("--repeat", type=_positive_int, default=3,
                   help="with --solve: solves per ordering, the median time is reported (default 3)")
    p.add_argument("--backend", choices=available_backends(), default="auto",
                   help="solver backend (exact: the scipy reference backend)")
    p.add_argument("--q", type=_probability, default=0.05, help="stop probability (with --solve)")
    p.add_argument("--seed", type=int, default=0, help="seed of the seeded orderings")
    p.add_argument("--no-plots", action="store_true", help="write CSV only")
    p.add_argument("--out", "-o", type=Path, default=Path("reports"), help="output directory (default reports/)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar, messages or summary table")
    p.set_defaults(func=cmd_compare)

    from .cli_learn import add_commands  # fit, predict (their code is in cli_learn.py and mgkflow.learn)

    add_commands(sub)

    p = sub.add_parser(
        "bench",
        help="run a benchmark suite (python -m mgkflow.bench)",
        description="Run a benchmark suite; `mgkflow bench SUITE --help` lists its options.",
        add_help=False,
    )
    p.add_argument("args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_bench)
    return parser


def _say(args: Any, msg: str) -> None:
    if not getattr(args, "quiet", False):
        print(msg, file=sys.stderr)


def cmd_datasets(args: Any) -> int:
    from .datasets import list_datasets

    for d in list_datasets():
        rec = d if isinstance(d, dict) else vars(d)
        name = rec.get("name")
        desc = rec.get("description", "")
        print(f"{name:<10} {desc}")
    return 0


# ---------------------------------------------------------------------- gram
@dataclass
class Source:
    """Graphs to work on, with ids and what to record about where they came from."""

    graphs: list[Any]
    ids: list[str]
    name: str
    node_kernel: Any
    edge_kernel: Any
    info: dict[str, Any] = field(default_factory=dict)


def _is_path(text: str) -> bool:
    return Path(text).exists() or any(c in text for c in "/\\.")


def load_source(args: Any, name: str) -> Source:
    """A built-in dataset (by name) or the graphs of a file/directory, first ``--n-graphs`` of them."""
    from . import datasets

    n = getattr(args, "n_graphs", None)
    known = {d.name: d for d in datasets.list_datasets()}
    if name.strip().lower() in known:  # a built-in name wins; write ./NAME for a file so named
        key = name.strip().lower()
        size = known[key].n_graphs
        kwargs: dict[str, Any] = {}
        if n is not None:
            if n > size:
                _say(args, f"note: {key} has {size} graphs; --n-graphs {n} uses all {size}")
                n = size
            kwargs["n_graphs"] = n
        labeled = bool(getattr(args, "labeled", False))
        if key in ("nws", "ba"):
            kwargs["labeled"] = labeled
        elif labeled:
            _say(args, f"note: --labeled only applies to nws/ba; {key} is always labeled")
        graphs = datasets.load(key, **kwargs)
        nk, ek = datasets.default_kernels(key, labeled=labeled or key not in ("nws", "ba"))
        return Source(graphs, [g.title or str(i) for i, g in enumerate(graphs)], key, nk, ek,
                      {"source": key, "format": "dataset"})
    if not _is_path(name):
        raise ValueError(
            f"unknown dataset {name!r} and no such file or directory; datasets: {', '.join(known)}"
        )
    from .io import default_kernels, detect_format, read_graphs

    options: dict[str, Any] = {}
    if n is not None:
        options["n_graphs"] = n
    fmt = getattr(args, "format", None) or detect_format(name)
    if fmt in ("graphml", "gml", "tu"):
        if getattr(args, "node_labels", None) is not None:
            options["node_labels"] = args.node_labels
        if getattr(args, "edge_labels", None) is not None:
            options["edge_labels"] = args.edge_labels
    if fmt in ("graphml", "gml"):
        options["weight"] = getattr(args, "weight", "weight")
    if fmt == "pdb":
        options["cutoff"] = getattr(args, "cutoff", 6.0)
    if fmt in ("smiles", "sdf") and getattr(args, "skip_bad", False):
        options["on_error"] = "skip"
    if fmt == "smiles" and getattr(args, "smiles_column", None) is not None:
        options.update(smiles_column=args.smiles_column, header=True)  # a column name means a header line
    gs = read_graphs(name, format=fmt, **options)
    if n is not None and len(gs) < n:
        _say(args, f"note: {name} has {len(gs)} graphs; --n-graphs {n} uses all {len(gs)}")
    for line, reason in gs.skipped:
        _say(args, f"note: skipped {name} line {line}: {reason}")
    nk, ek = default_kernels(gs)
    info = {"source": str(name), "format": gs.format}
    if gs.encoder.tables:
        info["label_codes"] = gs.encoder.tables
    return Source(gs.graphs, gs.ids, Path(name).name, nk, ek, info)


#: Gram output writers by suffix: ``writer(path, K, ids, kernel, params)``. More (e.g. ``.zarr``) can register here.
GRAM_WRITERS: dict[str, Callable[..., Any]] = {}


def _gram_writers() -> dict[str, Callable[..., Any]]:
    from .io import save_gram

    writers: dict[str, Callable[..., Any]] = {
        ".npz": lambda path, K, ids, kernel, params: save_gram(path, K, ids=ids, kernel=kernel, params=params),
        ".npy": lambda path, K, ids, kernel, params: save_gram(path, K),
    }
    writers.update(GRAM_WRITERS)
    return writers


def check_options(args: Any) -> None:
    """Refuse, before any work, options of ``gram`` that do not go together (:class:`UsageError`, exit code 2)."""
    suffix = args.out.suffix
    if suffix == ".npz":
        tiled = [opt for opt, on in (
            ("--dask", args.dask is not None),
            ("--block-size", args.block_size is not None),
            ("--dtype " + args.dtype, args.dtype != "float64"),
        ) if on]  # fmt: skip
        if tiled:
            verb = "needs" if len(tiled) == 1 else "need"
            raise UsageError(
                f"{' and '.join(tiled)} {verb} a tiled output: --out K.npy (the matrix) or --out K.zarr (a resumable "
                f"store), not the .npz file {args.out}"
            )
    if suffix == ".zarr" and args.normalize:
        raise UsageError(
            f"--normalize does not go with --out {args.out}: a .zarr store keeps the raw kernel; leave out "
            "--normalize and normalize when reading it (mgkflow.load_gram(path, normalize=True)), or write .npz/.npy"
        )
    column = getattr(args, "smiles_column", None)
    if column is not None:
        fmt = getattr(args, "format", None)
        if fmt is None:
            from .datasets import list_datasets
            from .io import detect_format

            builtin = args.dataset.strip().lower() in {d.name for d in list_datasets()}
            try:
                fmt = "dataset" if builtin else detect_format(args.dataset)
            except (MgkflowError, ValueError):
                fmt = None  # reading will say what is wrong with the source
        if fmt is not None and fmt != "smiles":
            what = "a built-in dataset" if fmt == "dataset" else f"a {fmt} source"
            raise UsageError(f"--smiles-column only applies to SMILES/CSV files; {args.dataset} is {what}")


def check_outputs(args: Any) -> None:
    """Check every output path of ``gram`` before any work: suffix, writable, distinct, not there already.

    An existing ``--out`` or ``--stats`` file is refused unless ``--force``; an existing
    ``.zarr`` store is resumed (``--force`` starts it anew), and ``--stats`` may then be replaced.
    """
    from .errors import OutputPathError
    from .io import check_writable

    writers = _gram_writers()
    suffixes = [*writers, ".zarr"]
    if args.out.suffix not in suffixes:
        raise UsageError(f"--out must end in {', '.join(suffixes)}, got {args.out}")
    force = bool(getattr(args, "force", False))
    resuming = False
    if args.out.suffix == ".zarr":
        # a store is a directory that may exist already (a run to resume): check the place it goes
        if args.out.exists() and not args.out.is_dir():
            raise OutputPathError(f"--out {args.out} exists and is not a Zarr store (a directory)")
        resuming = args.out.is_dir() and not force
        check_writable(args.out.with_name(args.out.name + ".check"), "--out")
    else:
        check_writable(args.out, "--out")
        if args.out.exists() and not force:
            raise OutputPathError(f"--out {args.out} exists; add --force to replace it, or choose another path")
    if args.stats is not None:
        check_writable(args.stats, "--stats")
        if args.stats.resolve() == args.out.resolve():
            raise ValueError("--stats and --out name the same file")
        if args.stats.exists() and not force and not resuming:
            raise OutputPathError(f"--stats {args.stats} exists; add --force to replace it, or choose another path")


def solve_gram(args: Any, src: Source) -> tuple[np.ndarray, Any, Any]:
    """Reorder, pack and solve: returns (K, per-stage statistics DataFrame, the kernel)."""
    from .pipeline import Load, Pack, Pipeline, Reorder, Solve

    solve = Solve(
        node_kernel=args.node_kernel or src.node_kernel,
        edge_kernel=args.edge_kernel or src.edge_kernel,
        q=args.q, backend=args.backend, normalize=args.normalize, progress=not args.quiet,
    )
    res = Pipeline([Load(src.graphs), Reorder(args.ordering), Pack(build=False), solve]).run()
    return res.gram, res.stats, solve.kernel


def cmd_gram(args: Any) -> int:
    from .gram.command import make_parent_dirs, run_tiled_command, wants_tiled

    check_options(args)
    check_outputs(args)
    t0 = time.perf_counter()
    src = load_source(args, args.dataset)
    if wants_tiled(args):
        kernels = (args.node_kernel or src.node_kernel, args.edge_kernel or src.edge_kernel)
        return run_tiled_command(args, src.graphs, kernels, lambda m: _say(args, m))
    K, stats, kernel = solve_gram(args, src)
    make_parent_dirs([args.out, args.stats], lambda m: _say(args, m))
    params = {
        **src.info,
        "n_graphs": len(src.graphs),
        "ordering": args.ordering,
        "normalize": bool(args.normalize),
        "mgkflow_version": __version__,
        "backend_used": str(stats.set_index("stage").loc["solve", "backend"]),
    }
    _gram_writers()[args.out.suffix](args.out, K, src.ids, kernel, params)
    if args.stats is not None:
        from .io import atomic_write

        atomic_write(args.stats, lambda t: stats.to_csv(t, index=False))
    s = stats.set_index("stage")
    _say(
        args,
        f"wrote {args.out}: {K.shape[0]}x{K.shape[1]} Gram matrix of {src.name} in "
        f"{time.perf_counter() - t0:.1f} s ({s.loc['solve', 'backend']} backend, "
        f"{int(s.loc['solve', 'pairs'])} pairs, {s.loc['solve', 'pairs_per_s']:.0f} pairs/s, "
        f"CG iterations median {s.loc['solve', 'cg_iter_median']:.0f}; 0 means a direct solve)",
    )
    return 0


def cmd_compare(args: Any) -> int:
    from .report import compare_orderings, write_report

    res = compare_orderings(
        args.datasets,
        args.orderings,
        n_graphs=args.n_graphs,
        labeled=args.labeled,
        solve=args.solve,
        backend=args.backend,
        q=args.q,
        seed=args.seed,
        repeat=args.repeat,
        progress=not args.quiet,
        log=None if args.quiet else (lambda m: print(m, file=sys.stderr)),
    )
    if not args.out.exists():
        args.out.mkdir(parents=True)
        _say(args, f"created directory {args.out}")
    paths = write_report(res, args.out, plots=not args.no_plots)
    if not args.quiet:
        cols = ["dataset", "ordering", "graphs", "octiles", "nnz_per_octile", "reorder_seconds"]
        if args.solve:
            cols += ["backend", "solve_seconds", "cg_iter_median"]
        print(res.summary[cols].to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    _say(args, "wrote " + ", ".join(str(p) for p in paths))
    return 0


def cmd_bench(args: Any) -> int:
    from .bench.__main__ import main as bench_main

    return bench_main(args.args)


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    """``warnings.showwarning`` of the command line: ``mgkflow: warning: MESSAGE``, one line, no source path."""
    text = " ".join(str(message).split())
    try:
        print(f"mgkflow: warning: {text}", file=file if file is not None else sys.stderr, flush=True)
    except (OSError, ValueError):  # stderr gone (a closed pipe): a warning is not worth a crash
        pass


@contextlib.contextmanager
def cli_warnings() -> Iterator[None]:
    """Within: warnings print as :func:`_show_warning` lines; the previous filters and printer come back after."""
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        yield


def main(argv: list[str] | None = None) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    with cli_warnings():
        return _main(argv)


def _main(argv: list[str]) -> int:
    if argv and argv[0] == "bench":  # everything after "bench" belongs to the suite, --help included
        from .bench.__main__ import main as bench_main

        return bench_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        print(f"mgkflow {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except MemoryError as exc:
        detail = f" ({exc})" if str(exc) else ""
        print(
            f"mgkflow {args.command}: error: out of memory{detail}; try fewer graphs (--n-graphs) "
            "or another backend (--backend)", file=sys.stderr,
        )
        return 3
    except (MgkflowError, ValueError, TypeError, RuntimeError, OSError) as exc:
        # user-facing errors (bad dataset or file, bad ordering, invalid graphs, unwritable output): one line
        msg = str(exc)
        if isinstance(exc, OSError) and not isinstance(exc, MgkflowError):
            name = getattr(exc, "filename", None)
            msg = f"{exc.strerror or exc}" + (f": {name}" if name else "")
        print(f"mgkflow {args.command}: error: {msg}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
