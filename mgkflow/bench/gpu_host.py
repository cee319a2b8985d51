"""Host cost per call of the GPU path, measured WITHOUT a GPU: ``python -m mgkflow.bench.gpu_host``.

PyCUDA is replaced by a fake driver (in ``sys.modules``, this process only) whose allocations are
host bytes and whose kernels return K = 1, converged, in no time: what remains is the host work of
a call (configuration, compile-cache lookups, packing or cache hits, launch plans, job lists,
typed launches, result gathers, and the kernel object's own work). Run it with the PYTHONPATH of
two checkouts to compare them on the same machine; device time is not measured (use
``python -m mgkflow.bench gpu`` on a GPU).

Examples
--------
    PYTHONPATH=$PWD python -m mgkflow.bench.gpu_host --set nws --solve-only
    PYTHONPATH=$PWD python -m mgkflow.bench.gpu_host --set drugs --n 1000 --profile
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import re
import sys
import time
import types
import warnings
from typing import Any

import numpy as np

__all__ = ["install_fake_driver", "main"]


class _Alloc:
    def __init__(self, nbytes: int, data: bytes | None = None) -> None:
        self.nbytes = int(nbytes)
        self.buf = np.zeros(max(self.nbytes, 1), np.uint8)
        if data is not None:
            self.buf[: len(data)] = np.frombuffer(data, np.uint8)

    def __int__(self) -> int:
        return 0


class _Event:
    def record(self, *a: Any) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True

    def time_since(self, other: Any) -> float:
        return 0.0


class _Attrs:
    def __getattr__(self, name: str) -> str:
        return name


def _driver() -> types.ModuleType:
    drv = types.ModuleType("pycuda.driver")
    drv.Error = Exception

    def to_device(a: np.ndarray) -> _Alloc:
        a = np.ascontiguousarray(a)
        return _Alloc(a.nbytes, a.tobytes())

    def dtoh(h: np.ndarray, d: _Alloc) -> None:
        h.reshape(-1).view(np.uint8)[:] = d.buf[: h.nbytes]

    drv.to_device = to_device
    drv.mem_alloc = _Alloc
    drv.memcpy_dtoh = dtoh
    drv.memcpy_dtoh_async = lambda h, d, stream=None: dtoh(h, d)
    drv.memcpy_htod_async = lambda d, h, stream=None: None
    drv.pagelocked_empty = lambda shape, dtype: np.empty(shape, dtype=dtype)
    drv.memcpy_htod = lambda d, h: None
    drv.memset_d32 = lambda d, v, c: None
    drv.memset_d32_async = lambda d, v, c, stream=None: None
    drv.mem_get_info = lambda: (8 << 30, 16 << 30)
    drv.Event = _Event
    drv.Stream = lambda *a, **kw: types.SimpleNamespace(synchronize=lambda: None, handle=0)
    drv.device_attribute = _Attrs()
    drv.function_attribute = _Attrs()
    attrs = {"MULTIPROCESSOR_COUNT": 132, "MAX_THREADS_PER_MULTIPROCESSOR": 2048,
             "MAX_REGISTERS_PER_MULTIPROCESSOR": 65536, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": 233472,
             "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 232448}  # fmt: skip
    dev = types.SimpleNamespace(get_attribute=lambda a: attrs.get(a, 1 << 16), compute_capability=lambda: (9, 0),
                                name=lambda: "fake")  # fmt: skip
    drv.Device = lambda i: dev
    drv.Context = types.SimpleNamespace(get_device=lambda: dev, get_current=lambda: object())
    drv.init = lambda: None
    return drv


class _Func:
    num_regs = 64
    shared_size_bytes = 272

    def __init__(self, params: tuple | None) -> None:
        self.params = params

    def set_attribute(self, *a: Any) -> None:
        pass

    def __call__(self, *args: Any, block: tuple, grid: tuple, shared: int = 0, **kw: Any) -> None:
        if self.params is None:  # a checkout without typed launches: positional arguments, not read
            return
        bound = {p.name: v for p, v in zip(self.params, args, strict=False)}
        n = int(bound.get("n_jobs", 0))
        for name, dt, val in (("out_k", np.float64, 1.0), ("out_iter", np.int32, 1), ("out_conv", np.int32, 1)):
            if isinstance(bound.get(name), _Alloc):
                bound[name].buf[: n * np.dtype(dt).itemsize].view(dt)[:] = val


class _Module:
    def __init__(self, source: str, **kw: Any) -> None:
        self.source = source

    def get_function(self, name: str) -> _Func:
        try:
            from mgkflow.gpu.device import parse_signatures

            return _Func(parse_signatures(self.source).get(name))
        except ImportError:
            return _Func(None)

    def get_global(self, name: str) -> tuple[_Alloc, int]:
        m = re.search(rf"{name}\[(\d+)\]", self.source)
        return _Alloc(1024), 4 * int(m.group(1)) if m else 4


def install_fake_driver() -> None:
    """Put the fake ``pycuda``, ``pycuda.driver`` and ``pycuda.compiler`` into ``sys.modules``."""
    drv = _driver()
    comp = types.ModuleType("pycuda.compiler")
    comp.SourceModule = _Module  # older checkouts
    comp.compile = lambda source, **kw: source.encode()  # the "cubin": the source's bytes
    drv.module_from_buffer = lambda cubin: _Module(cubin.decode())
    pkg = types.ModuleType("pycuda")
    pkg.__path__ = []
    pkg.driver, pkg.compiler = drv, comp
    sys.modules.update({"pycuda": pkg, "pycuda.driver": drv, "pycuda.compiler": comp})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mgkflow.bench.gpu_host", description=__doc__.split("\n")[0])
    ap.add_argument("--set", choices=["nws", "ba", "drugs", "molecules"], default="nws")
    ap.add_argument("--n", type=int, default=160, help="graphs")
    ap.add_argument("--labeled", action="store_true", help="nws/ba: labeled")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--solve-only", action="store_true", help="time GPUBackend.solve on prepared systems only")
    ap.add_argument("--profile", action="store_true", help="cProfile of the timed calls (top 30 by own time)")
    args = ap.parse_args(argv)
    install_fake_driver()
    from mgkflow import datasets
    from mgkflow.mgk import MarginalizedGraphKernel

    if args.set in ("nws", "ba"):
        graphs = getattr(datasets, args.set)(n_graphs=args.n, labeled=args.labeled)
        nk, ek = datasets.default_kernels(args.set, labeled=args.labeled)
    elif args.set == "drugs":
        graphs = [g for g in datasets.drugs() if g.adjacency.nnz > 0][: args.n]
        nk, ek = datasets.default_kernels("drugs")
    else:
        graphs = datasets.molecules(args.n, seed=0)
        nk, ek = datasets.default_kernels("drugs")
    kern = MarginalizedGraphKernel(nk, ek, q=0.05, backend="gpu", on_nonconvergence="warn")
    warnings.simplefilter("ignore")
    kern(graphs)  # compile (fake), pack, upload
    if args.solve_only:
        from mgkflow.system import prepare_graph

        backend = kern._backend_obj
        systems = [prepare_graph(g, i, nk, ek, q=0.05) for i, g in enumerate(graphs)]
        iu, ju = np.triu_indices(len(graphs))
        pairs = np.stack([iu, ju], axis=1)
        backend.solve(systems, systems, pairs, nk, ek)

        def call() -> None:
            backend.solve(systems, systems, pairs, nk, ek)
    else:

        def call() -> None:
            kern(graphs)

    prof = cProfile.Profile() if args.profile else None
    times = []
    for _ in range(args.reps):
        if prof:
            prof.enable()
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
        if prof:
            prof.disable()
    what = "GPUBackend.solve" if args.solve_only else "kernel call"
    print(f"{args.set} {len(graphs)} graphs, {what}: median {np.median(times) * 1e3:.2f} ms, "
          f"min {np.min(times) * 1e3:.2f} ms per call (host only, fake driver)")  # fmt: skip
    if prof:
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
