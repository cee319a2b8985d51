"""``mgkflow gram ... --out K.zarr --block-size B --dask SPEC --dtype T``: the tiled path of the CLI."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..graph import Graph

__all__ = ["make_parent_dirs", "run_tiled_command", "wants_tiled"]


def make_parent_dirs(paths: Sequence[Any], say: Callable[[str], Any]) -> None:
    """Create the missing directories above ``paths`` (None entries skipped), saying so, one line each.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> d = Path(tempfile.mkdtemp())
    >>> make_parent_dirs([d / "a" / "K.npy", None, d / "a" / "s.csv"], lambda m: print(m.replace(str(d), "D")))
    created directory D/a
    """
    for path in paths:
        if path is None:
            continue
        parent = Path(path).absolute().parent
        if not parent.exists():
            parent.mkdir(parents=True, exist_ok=True)
            say(f"created directory {Path(path).parent}")


def wants_tiled(args: Any) -> bool:
    """True when the ``gram`` arguments ask for the tiled path (Zarr output, blocks or Dask)."""
    return (
        args.out.suffix == ".zarr"
        or getattr(args, "dask", None) is not None
        or getattr(args, "block_size", None) is not None
        or getattr(args, "dtype", "float64") != "float64"
    )


def run_tiled_command(
    args: Any, graphs: Sequence[Graph], kernels: tuple[Any, Any], say: Callable[[str], Any]
) -> int:
    """Run ``mgkflow gram`` block by block: reorder, solve the blocks (here or on Dask), write.

    ``--out K.zarr`` writes a resumable Zarr store (run the same command again to finish
    a killed run); ``--out K.npy`` keeps the matrix in memory and saves it at the end.
    ``args.force`` starts an existing store anew (``overwrite=True``).
    """
    from ..errors import ParameterError
    from ..mgk import MarginalizedGraphKernel
    from ..report import atomic_write
    from .cluster import backend_for_spec, client_from_spec
    from .reorder import reorder_graphs
    from .tiled import tiled_gram

    zarr_out = args.out.suffix == ".zarr"
    if not zarr_out and args.out.suffix != ".npy":
        raise ParameterError(f"--block-size, --dask and --dtype need --out .npy or .zarr, got {args.out}")
    if zarr_out and args.normalize:
        raise ParameterError(
            "--normalize: a .zarr store keeps the raw kernel; normalize when reading it "
            "(mgkflow.load_gram(path, normalize=True))"
        )
    backend = args.backend
    if args.dask is not None and backend == "auto":
        backend = backend_for_spec(args.dask) or "auto"
    kernel = MarginalizedGraphKernel(
        node_kernel=kernels[0], edge_kernel=kernels[1], q=args.q, backend=backend,
        on_nonconvergence="raise",
    )  # fmt: skip
    t_start = time.perf_counter()
    cluster = client_from_spec(args.dask) if args.dask is not None else contextlib.nullcontext()
    with cluster as client:
        if client is not None:
            say(f"Dask cluster {args.dask}: {len(client.scheduler_info().get('workers', {}))} workers")
        t0 = time.perf_counter()
        # a process pool pays off from a few thousand graphs (pool start about a second, PBR ~5 ms per molecule)
        pool = os.cpu_count() if client is None and len(graphs) >= 2000 else None
        ordered = reorder_graphs(graphs, args.ordering, client=client, workers=pool)
        say(
            f"reordered {len(graphs)} graphs ({args.ordering}) in {time.perf_counter() - t0:.1f} s "
            f"({ordered.computed} computed)"
        )
        if zarr_out:
            make_parent_dirs([args.out], say)
        res = _tiled(tiled_gram, ordered.graphs, kernel, args, client, say)
    make_parent_dirs([None if zarr_out else args.out, args.stats], say)
    if not zarr_out:
        K = res.matrix
        if args.normalize:
            d = np.sqrt(np.diagonal(K)).astype(K.dtype)
            K = K / np.outer(d, d)
        atomic_write(args.out, lambda t: np.save(t, K))
    if args.stats is not None:
        import pandas as pd

        row = {
            "graphs": len(graphs),
            "blocks": res.blocks,
            "blocks_computed": len(res.computed),
            "blocks_skipped": res.skipped,
            "pairs": res.pairs,
            "solve_seconds": res.seconds,
            "pairs_per_s": res.pairs_per_second,
            "total_seconds": time.perf_counter() - t_start,
            "workers": len(res.workers),
        }
        atomic_write(args.stats, lambda t: pd.DataFrame([row]).to_csv(t, index=False))
    n = len(graphs)
    say(
        f"wrote {args.out}: {n}x{n} Gram matrix, {len(res.computed)} of {res.blocks} blocks computed "
        f"({res.skipped} already done), {res.pairs} pairs in {res.seconds:.1f} s "
        f"({res.pairs_per_second:.0f} pairs/s) on {max(len(res.workers), 1)} worker(s); "
        f"total {time.perf_counter() - t_start:.1f} s"
    )
    return 0


def _tiled(tiled_gram: Callable[..., Any], graphs: Sequence[Graph], kernel: Any, args: Any, client: Any,
           say: Callable[[str], Any]) -> Any:
    """``tiled_gram`` as the command line asks for it; a store made for another computation is refused
    with a message that names ``--force`` (which starts it anew)."""
    from .store import StoreMismatchError

    zarr_out = args.out.suffix == ".zarr"
    try:
        return tiled_gram(
            graphs,
            kernel=kernel,
            out=args.out if zarr_out else None,
            block_size=args.block_size,
            dtype=args.dtype,
            client=client,
            overwrite=zarr_out and bool(getattr(args, "force", False)),
            progress=not args.quiet,
            log=say,
        )
    except StoreMismatchError as exc:
        msg = str(exc).replace("(overwrite=True in Python)", "(--force starts it anew)")
        if "--force" not in msg:
            msg += "; --force starts it anew"
        raise StoreMismatchError(msg) from None
