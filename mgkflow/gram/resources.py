"""Host, device and disk memory a Gram computation needs, estimated before any work."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import MgkflowError
from ..graph import Graph

__all__ = ["ResourceEstimate", "ResourceError", "estimate_resources", "host_available_bytes"]

#: Host bytes per pair solved in one call, by backend: the values, iterations, residuals and
#: flags the kernel returns and mirrors (8 + 8 + 8 + 1, twice) plus the pair list and the
#: backend's own per-pair arrays (the GPU figure was measured: 7.6 GB for 5e7 pairs).
HOST_BYTES_PER_PAIR = {"cpu": 80, "gpu": 160}
#: Device bytes per unknown (node pair) of a pair being solved: the CG vectors in float64.
DEVICE_BYTES_PER_UNKNOWN = 8 * 6
#: Fraction of the available host memory a result may take.
HOST_FRACTION = 0.8


class ResourceError(MgkflowError, MemoryError, ValueError):
    """The computation needs more memory or disk than is available (the message says what would fit)."""


def host_available_bytes() -> int:
    """Host memory available now (``psutil.virtual_memory().available``, else /proc/meminfo)."""
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:  # pragma: no cover - psutil comes with distributed
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    return 0  # pragma: no cover


def _fmt(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


@dataclass
class ResourceEstimate:
    """Memory and disk a Gram computation needs, and what is available.

    Attributes
    ----------
    pairs : int
        Distinct pairs to solve.
    result_bytes : int
        The whole matrix in memory (``n_rows x n_cols x itemsize``).
    store_bytes : int
        The blocks stored on disk, uncompressed (upper-triangle blocks of a Gram matrix).
    block_host_bytes : int
        Host memory of one block in flight (per worker), besides the graphs.
    graphs_bytes : int
        The graphs and their prepared systems in host memory (per process).
    block_device_bytes : int
        Device memory the CG vectors of one block's pairs would take if all were
        resident at once (the GPU backend batches launches within its own cap).
    host_available, disk_available : int or None
        Available now (disk: at the output's file system; None without an output).
    device_available : int or None
        Free device memory, for a GPU backend in this process (None otherwise).
    """

    pairs: int
    result_bytes: int
    store_bytes: int
    block_host_bytes: int
    graphs_bytes: int
    block_device_bytes: int
    host_available: int
    disk_available: int | None
    device_available: int | None = None

    @property
    def in_memory_bytes(self) -> int:
        """Host memory for an in-memory result: the matrix, the graphs and one block."""
        return self.result_bytes + self.graphs_bytes + self.block_host_bytes

    def summary(self) -> str:
        disk = "" if self.disk_available is None else f", disk {_fmt(self.store_bytes)} of {_fmt(self.disk_available)}"
        if self.device_available is not None:
            disk += f", device free {_fmt(self.device_available)}"
        return (
            f"{self.pairs} pairs; matrix {_fmt(self.result_bytes)}, host per block {_fmt(self.block_host_bytes)}, "
            f"graphs {_fmt(self.graphs_bytes)} (host available {_fmt(self.host_available)}), "
            f"device per block <= {_fmt(self.block_device_bytes)}{disk}"
        )


def _graph_bytes(g: Graph) -> int:
    adj = g.adjacency
    n = adj.data.nbytes + adj.indices.nbytes + adj.indptr.nbytes
    n += sum(v.nbytes for v in g.node_labels.values()) + sum(v.nbytes for v in g.edge_labels.values())
    return n + 8 * 4 * g.n_nodes + 400  # prepared system (d, p, q vectors) and object overheads


def device_free_bytes() -> int | None:
    """Free memory of this process's CUDA device (the GPU backend's context), None without one."""
    try:
        import pycuda.driver as cuda

        from ..gpu import device

        device.ensure_context()
        return int(cuda.mem_get_info()[0])
    except Exception:  # noqa: BLE001 - no PyCUDA, no device, no driver: nothing to report
        return None


def estimate_resources(
    X: Sequence[Graph],
    Y: Sequence[Graph] | None = None,
    block_size: int = 128,
    dtype: str = "float64",
    backend: str = "cpu",
    out: str | os.PathLike | None = None,
    device: bool = False,
) -> ResourceEstimate:
    """Estimate the memory and disk a tiled Gram computation needs.

    ``device=True`` also reads the free memory of this process's GPU (for in-process GPU runs).

    Examples
    --------
    >>> import numpy as np
    >>> gs = [Graph(np.array([[0, 1], [1, 0]]))] * 1000
    >>> est = estimate_resources(gs, block_size=100)
    >>> est.pairs, est.result_bytes, est.store_bytes
    (500500, 8000000, 4400000)
    """
    from . import _args
    from .blocks import plan_blocks

    X = _args.graph_list(X, "X")
    Y = None if Y is None else _args.graph_list(Y, "Y")
    backend = _args.text(backend, "backend")
    out = _args.path(out, "out", none=True)
    device = _args.flag(device, "device")
    n = len(X)
    m = n if Y is None else len(Y)
    item = np.dtype(_args.text(dtype, "dtype", ("float64", "float32"))).itemsize
    blocks = plan_blocks(n, None if Y is None else m, block_size)
    pairs = sum(b.n_pairs for b in blocks)
    stored = sum(b.shape[0] * b.shape[1] for b in blocks)
    big = max((b for b in blocks), key=lambda b: b.n_pairs)
    per_pair = HOST_BYTES_PER_PAIR.get(backend, max(HOST_BYTES_PER_PAIR.values()))
    block_host = big.n_pairs * per_pair + big.shape[0] * big.shape[1] * (8 + item)
    sizes_x = np.fromiter((g.n_nodes for g in X), dtype=np.float64, count=n)
    sizes_y = sizes_x if Y is None else np.fromiter((g.n_nodes for g in Y), dtype=np.float64, count=m)
    graphs = sum(_graph_bytes(g) for g in X) + (0 if Y is None else sum(_graph_bytes(g) for g in Y))
    mean_unknowns = float(sizes_x.mean() * sizes_y.mean()) if n and m else 0.0
    device = int(big.n_pairs * mean_unknowns * DEVICE_BYTES_PER_UNKNOWN)
    disk = None
    if out is not None:
        p = Path(out).resolve()
        while not p.exists() and p != p.parent:
            p = p.parent
        disk = int(shutil.disk_usage(p).free)
    return ResourceEstimate(
        pairs=int(pairs),
        result_bytes=int(n * m * item),
        store_bytes=int(stored * item),
        block_host_bytes=int(block_host),
        graphs_bytes=int(graphs),
        block_device_bytes=device,
        host_available=host_available_bytes(),
        disk_available=disk,
        device_available=device_free_bytes() if device else None,
    )


def check_resources(est: ResourceEstimate, in_memory: bool, out_hint: str = "K.zarr") -> None:
    """Raise :class:`ResourceError` when the result cannot fit where it is asked to go."""
    if in_memory and est.in_memory_bytes > HOST_FRACTION * est.host_available:
        raise ResourceError(
            f"the kernel matrix needs {_fmt(est.in_memory_bytes)} of host memory in memory "
            f"({_fmt(est.result_bytes)} for the matrix), more than {HOST_FRACTION:.0%} of the "
            f"{_fmt(est.host_available)} available; write it to disk block by block instead: "
            f"out={out_hint!r} (Zarr store, {_fmt(est.store_bytes)} uncompressed, read it back with "
            "mgkflow.load_gram(path, lazy=True)), or dtype='float32' to halve it"
        )
    if not in_memory and est.disk_available is not None and est.store_bytes > est.disk_available:
        raise ResourceError(
            f"the Zarr store needs up to {_fmt(est.store_bytes)} of disk, only {_fmt(est.disk_available)} "
            "free there; choose an output on a larger file system, or dtype='float32' to halve it"
        )
    if est.graphs_bytes + est.block_host_bytes > HOST_FRACTION * est.host_available:
        raise ResourceError(
            f"one block needs about {_fmt(est.block_host_bytes)} of host memory beside "
            f"{_fmt(est.graphs_bytes)} of graphs, more than {HOST_FRACTION:.0%} of the "
            f"{_fmt(est.host_available)} available; use a smaller block_size"
        )
