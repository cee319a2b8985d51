"""Command-line interface: ``mgkflow {gram,compare,datasets,bench}``.

Examples
--------
    mgkflow datasets
    mgkflow gram nws --n-graphs 20 --labeled --q 0.05 --out K.npy
    mgkflow compare nws ba --orderings natural,rcm,pbr --out reports/
    mgkflow bench gpu --help
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from . import __version__

ORDERINGS_DEFAULT = "natural,random,rcm,pbr,tsp,morton,hilbert"


def _positive_int(text: str) -> int:
    v = int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return v


def _probability(text: str) -> float:
    v = float(text)
    if not (0.0 < v < 1.0):
        raise argparse.ArgumentTypeError(f"must lie in (0, 1), got {text}")
    return v


def _csv_list(text: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError("empty list")
    return items


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mgkflow",
        description="Marginalized graph kernel with pluggable node reordering (GPU if present, CPU otherwise).",
    )
    parser.add_argument("--version", action="version", version=f"mgkflow {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("datasets", help="list the built-in datasets", description="List the built-in datasets.")
    p.set_defaults(func=cmd_datasets)

    p = sub.add_parser(
        "gram",
        help="compute the Gram matrix of a dataset",
        description="Compute the Gram matrix of a built-in dataset and save it as a .npy file "
        "(the dataset's recommended node/edge kernels are used).",
    )
    p.add_argument("dataset", help="dataset name (see `mgkflow datasets`)")
    p.add_argument("--q", type=_probability, default=0.05, help="stop probability in (0, 1) (default 0.05)")
    p.add_argument("--n-graphs", type=_positive_int, default=None, help="use the first N graphs")
    p.add_argument("--labeled", action="store_true", help="labeled variant of the synthetic sets (nws, ba)")
    p.add_argument("--ordering", default="pbr", help="node ordering applied before solving (default pbr)")
    p.add_argument("--backend", choices=["auto", "cpu", "gpu"], default="auto", help="solver backend")
    p.add_argument("--normalize", action="store_true", help="normalize K(G,G') by sqrt(K(G,G) K(G',G'))")
    p.add_argument(
        "--out", "-o", type=Path, required=True,
        help="output .npy file, or a .zarr store (block by block; run the same command again to resume)",
    )
    p.add_argument("--block-size", type=_positive_int, default=None,
                   help="graphs per block side (tiled run; default 2048 on the GPU, 128 on the CPU)")
    p.add_argument("--dask", default=None, metavar="SPEC",
                   help="solve the blocks on Dask: local:N (N CPU workers), cuda (one worker per GPU) "
                   "or a scheduler address tcp://HOST:PORT")
    p.add_argument("--dtype", choices=["float64", "float32"], default="float64",
                   help="stored dtype of a tiled run (default float64)")
    p.add_argument("--stats", type=Path, default=None, help="also write per-stage statistics as CSV")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar or messages")
    p.set_defaults(func=cmd_gram)

    p = sub.add_parser(
        "compare",
        help="compare node orderings (octiles, tile density, solver time)",
        description="Compare node orderings on datasets: octile counts, tile-density histograms, "
        "reorder time and optionally solver time. Writes orderings.csv, density_histograms.csv "
        "and PNG plots to --out.",
    )
    p.add_argument("datasets", nargs="+", help="dataset names (see `mgkflow datasets`)")
    p.add_argument(
        "--orderings", type=_csv_list, default=_csv_list(ORDERINGS_DEFAULT),
        help=f"comma-separated orderings (default {ORDERINGS_DEFAULT})",
    )
    p.add_argument("--n-graphs", type=_positive_int, default=None, help="first N graphs of each dataset")
    p.add_argument("--labeled", action="store_true", help="labeled variant of the synthetic sets (nws, ba)")
    p.add_argument("--solve", action="store_true", help="also solve the Gram matrix under each ordering")
    p.add_argument("--backend", choices=["auto", "cpu", "gpu"], default="auto", help="solver backend")
    p.add_argument("--q", type=_probability, default=0.05, help="stop probability (with --solve)")
    p.add_argument("--seed", type=int, default=0, help="seed of the seeded orderings")
    p.add_argument("--no-plots", action="store_true", help="write CSV only")
    p.add_argument("--out", "-o", type=Path, default=Path("reports"), help="output directory (default reports/)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar or messages")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser(
        "bench",
        help="run a benchmark suite (python -m mgkflow.bench)",
        description="Run a benchmark suite; `mgkflow bench SUITE --help` lists its options.",
        add_help=False,
    )
    p.add_argument("args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_bench)
    return parser


def _say(args, msg: str) -> None:
    if not getattr(args, "quiet", False):
        print(msg, file=sys.stderr)


def cmd_datasets(args) -> int:
    from .datasets import list_datasets

    for d in list_datasets():
        rec = d if isinstance(d, dict) else vars(d)
        name = rec.get("name")
        desc = rec.get("description", "")
        print(f"{name:<10} {desc}")
    return 0


def cmd_gram(args) -> int:
    from .gram.command import run_tiled_command, wants_tiled
    from .pipeline import Load, Pack, Pipeline, Reorder, Solve
    from .report import atomic_write

    if args.out.suffix not in (".npy", ".zarr"):
        raise SystemExit(f"mgkflow gram: --out must end in .npy or .zarr, got {args.out}")
    kwargs = {}
    if args.n_graphs is not None:
        kwargs["n_graphs"] = args.n_graphs
    if args.dataset in ("nws", "ba"):
        kwargs["labeled"] = args.labeled
    elif args.labeled:
        _say(args, f"note: --labeled only applies to nws/ba; {args.dataset} is always labeled")
    if wants_tiled(args):
        from .datasets import default_kernels, load

        graphs = load(args.dataset, **kwargs)
        kernels = default_kernels(args.dataset, labeled=kwargs.get("labeled", True))
        return run_tiled_command(args, graphs, kernels, lambda m: _say(args, m))
    t0 = time.perf_counter()
    pipe = Pipeline(
        [
            Load(args.dataset, **kwargs),
            Reorder(args.ordering),
            Pack(build=False),
            Solve(q=args.q, backend=args.backend, normalize=args.normalize, progress=not args.quiet),
        ]
    )
    res = pipe.run()
    atomic_write(args.out, lambda t: np.save(t, res.gram))
    if args.stats is not None:
        atomic_write(args.stats, lambda t: res.stats.to_csv(t, index=False))
    s = res.stats.set_index("stage")
    _say(
        args,
        f"wrote {args.out}: {res.gram.shape[0]}x{res.gram.shape[1]} Gram matrix in "
        f"{time.perf_counter() - t0:.1f} s ({s.loc['solve', 'backend']} backend, "
        f"{s.loc['solve', 'pairs']} pairs, {s.loc['solve', 'pairs_per_s']:.0f} pairs/s, "
        f"CG iterations median {s.loc['solve', 'cg_iter_median']:.0f})",
    )
    return 0


def cmd_compare(args) -> int:
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
        progress=not args.quiet,
        log=None if args.quiet else (lambda m: print(m, file=sys.stderr)),
    )
    paths = write_report(res, args.out, plots=not args.no_plots)
    cols = ["dataset", "ordering", "graphs", "octiles", "nnz_per_octile", "reorder_seconds"]
    if args.solve:
        cols += ["backend", "solve_seconds", "cg_iter_median"]
    print(res.summary[cols].to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    _say(args, "wrote " + ", ".join(str(p) for p in paths))
    return 0


def cmd_bench(args) -> int:
    from .bench.__main__ import main as bench_main

    return bench_main(args.args)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError, FileNotFoundError, RuntimeError) as exc:
        # user-facing errors (bad dataset, bad ordering, invalid graphs): one clear line
        print(f"mgkflow {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
