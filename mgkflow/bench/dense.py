"""An exact GP step's dense algebra, host LAPACK against the device's cuSOLVER: ``python -m mgkflow.bench dense``.

A step of an exact GP's fit (objective ``"lml"``) factors the n × n training covariance and forms the
gradient's weights W = ½ (a aᵀ − K⁻¹) (:func:`mgkflow.learn.objectives.lml_weights`, LAPACK potrf and
potri on as many BLAS threads as :func:`mgkflow.learn.gpr.blas_threads` gives a fit) or does the same on
the GPU (:class:`mgkflow.gpu.dense.DeviceDense`, transfers included). This suite times both on the same
well-conditioned random covariance for each n, checks that they agree, and writes ``dense.csv`` under
``--out`` (n, where, seconds per step as the median of ``--reps``, the relative difference of W). It
answers where ``GraphGPR(linalg="auto")`` should switch (:data:`mgkflow.learn.gpr.DEVICE_MIN_N`).

Examples
--------
    python -m mgkflow.bench dense --sizes 1000,2000,4000,8000,20000 --reps 3
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["main"]


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes must be integers separated by commas, got {text!r}") from None
    if not sizes or min(sizes) < 2:
        raise argparse.ArgumentTypeError(f"sizes must be at least 2, got {text!r}")
    return sizes


def _covariance(n: int, seed: int) -> np.ndarray:
    """A random covariance with eigenvalues in [0.1, ~1.3]: a kernel matrix plus noise, well conditioned."""
    rng = np.random.default_rng(seed)
    F = rng.normal(size=(n, 64)) / 8.0
    K = F @ F.T
    K[np.diag_indices(n)] += 0.1
    return K


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mgkflow.bench dense", description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=_sizes, default=[1000, 2000, 4000, 8000], help="n values, comma-separated")
    ap.add_argument("--reps", type=int, default=3, help="timed steps per n and side (the median is kept)")
    ap.add_argument("--no-gpu", action="store_true", help="time the host alone")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("reports/dense"))
    args = ap.parse_args(argv)
    from threadpoolctl import threadpool_limits

    from ..learn.gpr import blas_threads
    from ..learn.objectives import lml_weights

    use_gpu = False
    if not args.no_gpu:
        from ..gpu import dense

        use_gpu = dense.available()
        if not use_gpu:
            print("no GPU with cuSOLVER here: timing the host alone")
    rows = []
    for n in args.sizes:
        K0 = _covariance(n, args.seed)
        y = np.random.default_rng(args.seed + 1).normal(size=n)
        results = {}
        sides = ["cpu"] + (["gpu"] if use_gpu else [])
        for side in sides:
            dd = dense.DeviceDense(n) if side == "gpu" else None
            times = []
            for _ in range(max(1, args.reps)):
                K = K0.copy()
                t0 = time.perf_counter()
                if dd is None:
                    with threadpool_limits(limits=blas_threads(n), user_api="blas"):
                        value, W = lml_weights(K, y, overwrite=True)
                else:
                    value, W = dd.lml_weights(K, y, overwrite=True)
                times.append(time.perf_counter() - t0)
            if dd is not None:
                dd.free()
            results[side] = (value, W)
            diff = np.nan
            if side == "gpu":
                ref = results["cpu"][1]
                diff = float(np.linalg.norm(W - ref) / np.linalg.norm(ref))
            rows.append({"n": n, "where": side, "threads": blas_threads(n) if side == "cpu" else 0,
                         "seconds": float(np.median(times)), "min_s": float(np.min(times)), "value": value,
                         "w_rel_diff": diff})  # fmt: skip
            print(f"n {n:6d} {side}: {np.median(times):8.3f} s a step (min {np.min(times):.3f})"
                  + (f", W vs host {diff:.1e}" if side == "gpu" else ""), flush=True)  # fmt: skip
            del W
    args.out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(args.out / "dense.csv", index=False)
    print(f"wrote {args.out / 'dense.csv'}")
    return 0
