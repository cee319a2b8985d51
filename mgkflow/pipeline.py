"""The staged pipeline: load -> reorder -> pack -> solve (docs/design.md §2).

Each stage is a small object with a ``name`` and a ``run(state)`` method that
returns the next :class:`PipelineState` and a :class:`StageStats` record.
:class:`Pipeline` runs a list of stages and collects the statistics into a
pandas DataFrame.

Examples
--------
>>> from mgkflow.pipeline import Pipeline, Load, Reorder, Pack, Solve
>>> result = Pipeline([Load("nws", n_graphs=4), Reorder("rcm"), Pack(), Solve(backend="cpu")]).run()
>>> result.gram.shape
(4, 4)
>>> list(result.stats["stage"])
['load', 'reorder', 'pack', 'solve']
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .errors import ParameterError, ParameterTypeError
from .format.count import TILE, octile_keys
from .graph import Graph
from .kernels import BaseKernel
from .mgk import MarginalizedGraphKernel
from .system import NodeProbability

__all__ = [
    "PipelineState",
    "StageStats",
    "Stage",
    "Load",
    "Reorder",
    "Pack",
    "Solve",
    "Pipeline",
    "PipelineResult",
]


@dataclass(frozen=True)
class PipelineState:
    """What flows between stages.

    Attributes
    ----------
    graphs : list of Graph
        The graphs (reordered once a Reorder stage ran).
    dataset : str or None
        Name of the dataset the graphs came from.
    perms : list of ndarray or None
        Permutation applied to each graph by the Reorder stage.
    packed : Any
        Output of the Pack stage: for a GPU solve the :class:`mgkflow.gpu.pack.HostBatch` the
        Solve stage's backend uploads as it is (no second packing); else the octile batch
        (tile statistics), or None.
    gram : ndarray or None
        Kernel matrix, once a Solve stage ran.
    """

    graphs: tuple[Graph, ...] = ()
    dataset: str | None = None
    perms: tuple[np.ndarray, ...] | None = None
    packed: Any = None
    gram: np.ndarray | None = None


@dataclass
class StageStats:
    """Statistics of one stage run: name, wall seconds and stage-specific figures.

    ``per_graph`` optionally holds one dict per graph (e.g. reorder time and
    octiles before/after).
    """

    stage: str
    seconds: float
    figures: dict[str, Any] = field(default_factory=dict)
    per_graph: list[dict[str, Any]] | None = None

    def as_row(self) -> dict[str, Any]:
        """Flat dict for a DataFrame row."""
        return {"stage": self.stage, "seconds": self.seconds, **self.figures}


class Stage:
    """Base class of pipeline stages: subclasses set ``name`` and implement ``run``."""

    name: str = "stage"

    def run(self, state: PipelineState) -> tuple[PipelineState, StageStats]:  # pragma: no cover
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _octile_figures(graphs: Sequence[Graph]) -> dict[str, Any]:
    hist = np.zeros(TILE * TILE + 1, dtype=np.int64)
    total = 0
    for g in graphs:
        _, counts = octile_keys(g)
        total += counts.size
        hist += np.bincount(counts, minlength=TILE * TILE + 1)
    nnz = int(sum(g.nnz for g in graphs))
    per = np.repeat(np.arange(hist.size), hist)
    return {
        "octiles": int(total),
        "nnz": nnz,
        "nnz_per_octile": nnz / total if total else 0.0,
        "density_mean": float(per.mean() / (TILE * TILE)) if per.size else 0.0,
        "density_median": float(np.median(per) / (TILE * TILE)) if per.size else 0.0,
        "density_histogram": hist,
    }


class Load(Stage):
    """Load graphs: a built-in dataset by name (see :mod:`mgkflow.datasets`) or given graphs.

    Parameters
    ----------
    dataset : str or sequence of Graph
        Dataset name ("nws", "ba", "drugs", "proteins") or the graphs themselves.
    **kwargs
        Passed to the dataset loader (e.g. ``n_graphs=20, labeled=True``).
    """

    name = "load"

    def __init__(self, dataset: str | Sequence[Graph], **kwargs: Any) -> None:
        self.dataset = dataset
        self.kwargs = kwargs

    def run(self, state: PipelineState) -> tuple[PipelineState, StageStats]:
        t0 = time.perf_counter()
        if isinstance(self.dataset, str):
            from . import datasets

            graphs = datasets.load(self.dataset, **self.kwargs)
            name = self.dataset
        else:
            if isinstance(self.dataset, bytes) or not hasattr(self.dataset, "__iter__") or hasattr(
                    self.dataset, "columns"):
                raise ParameterTypeError(f"Load: expected a dataset name or a sequence of mgkflow.Graph, "
                                         f"got {type(self.dataset).__name__}")
            graphs = list(self.dataset)
            name = state.dataset
            if not all(isinstance(g, Graph) for g in graphs):
                raise ParameterTypeError("Load: expected a dataset name or a sequence of mgkflow.Graph")
        if not graphs:
            raise ParameterError(f"Load: dataset {name!r} gave no graphs")
        sec = time.perf_counter() - t0
        nodes = np.array([g.n_nodes for g in graphs])
        figures = {
            "graphs": len(graphs),
            "nodes_total": int(nodes.sum()),
            "nodes_max": int(nodes.max()),
            "edges_total": int(sum(g.n_edges for g in graphs)),
        }
        new = replace(state, graphs=tuple(graphs), dataset=name, perms=None, packed=None, gram=None)
        return new, StageStats(self.name, sec, figures)

    def __repr__(self) -> str:
        return f"Load({self.dataset!r})" if isinstance(self.dataset, str) else "Load(<graphs>)"


class Reorder(Stage):
    """Reorder every graph's nodes with an ordering from :mod:`mgkflow.reorder`.

    Adjacency, edge labels, node labels and coordinates are permuted together
    (p and q given as node label fields follow, scalars need nothing). Records
    per-graph time and octiles before/after.

    Parameters
    ----------
    method : str
        Ordering name, one of :func:`mgkflow.reorder.available_methods`.
    progress : callable, optional
        Called with 1 after each graph (e.g. a tqdm bar's ``update``).
    **options
        Passed to the ordering (e.g. ``seed=0``).
    """

    name = "reorder"

    def __init__(self, method: str = "pbr", progress: Callable[[int], Any] | None = None, **options: Any):
        from .reorder import available_methods

        if not isinstance(method, str):
            raise ParameterTypeError(f"Reorder: method must be an ordering name, got {type(method).__name__}")
        if method not in available_methods():
            raise ParameterError(f"unknown ordering {method!r}; available: {available_methods()}")
        if progress is not None and not callable(progress):
            raise ParameterTypeError(f"Reorder: progress must be callable or None, got {type(progress).__name__}")
        self.method = method
        self.options = options
        self.progress = progress

    def run(self, state: PipelineState) -> tuple[PipelineState, StageStats]:
        from .format.count import count_octiles
        from .reorder import reorder

        t0 = time.perf_counter()
        graphs, perms, rows = [], [], []
        for i, g in enumerate(state.graphs):
            before = count_octiles(g)
            t = time.perf_counter()
            perm = reorder(g, method=self.method, **self.options)
            sec = time.perf_counter() - t
            h = g.permute(perm)
            graphs.append(h)
            perms.append(perm)
            rows.append({"graph": i, "seconds": sec, "octiles_before": before, "octiles_after": count_octiles(h)})
            if self.progress is not None:
                self.progress(1)
        total = time.perf_counter() - t0
        figures = {
            "method": self.method,
            "reorder_seconds": float(sum(r["seconds"] for r in rows)),
            "octiles_before": int(sum(r["octiles_before"] for r in rows)),
            "octiles_after": int(sum(r["octiles_after"] for r in rows)),
        }
        new = replace(state, graphs=tuple(graphs), perms=tuple(perms), packed=None, gram=None)
        return new, StageStats(self.name, total, figures, rows)

    def __repr__(self) -> str:
        return f"Reorder({self.method!r})"


class Pack(Stage):
    """Pack graphs into octiles (docs/design.md §4) and record tile statistics.

    With ``build=True`` (default) the packed batch is built and kept in the state (bytes
    reported). When a :class:`Solve` stage on the GPU follows (:class:`Pipeline` connects
    them), the batch is exactly what that stage's backend uploads (its kernels' label fields,
    q and p, XMV strategy and tile sort: :func:`mgkflow.gpu.pack.pack_for_kernels`), and the
    backend uploads it without packing again (figure ``for``: "gpu"); otherwise it is the
    plain octile batch of the graphs (``for``: "stats"). ``build=False`` computes only the
    tile statistics.
    """

    name = "pack"

    def __init__(self, build: bool = True) -> None:
        if not isinstance(build, (bool, np.bool_)):
            raise ParameterTypeError(f"Pack: build must be True or False, got {type(build).__name__}")
        self.build = build
        #: the Solve stage this batch is packed for (set by :class:`Pipeline`)
        self.consumer: Solve | None = None

    def run(self, state: PipelineState) -> tuple[PipelineState, StageStats]:
        t0 = time.perf_counter()
        figures = _octile_figures(state.graphs)
        packed = None
        if self.build and state.graphs:
            if self.consumer is not None and self.consumer.uses_gpu():
                packed = self.consumer.pack(state)
                figures["for"] = "gpu"
            else:
                from .format import pack_batch

                packed = pack_batch(list(state.graphs))
                figures["for"] = "stats"
            figures["bytes"] = int(packed.nbytes)
        sec = time.perf_counter() - t0
        return replace(state, packed=packed), StageStats(self.name, sec, figures)


class Solve(Stage):
    """Compute the Gram matrix with :class:`~mgkflow.MarginalizedGraphKernel`.

    Parameters
    ----------
    node_kernel, edge_kernel : BaseKernel, optional
        Default: the dataset's recommended kernels (:func:`mgkflow.datasets.default_kernels`)
        when the state names a dataset, else ``Constant(1.0)``.
    q, p, backend, rtol, max_iter, on_nonconvergence, progress, gpu_options :
        As for :class:`~mgkflow.MarginalizedGraphKernel`.
    normalize : bool
        Return the normalized kernel.

    A GPU solve uses the batch of a preceding :class:`Pack` stage as it is (figure ``pack``:
    "adopted"); without one the backend packs (figure ``pack``: "packed").
    """

    name = "solve"

    def __init__(
        self,
        node_kernel: BaseKernel | None = None,
        edge_kernel: BaseKernel | None = None,
        q: NodeProbability = 0.05,
        p: NodeProbability = 1.0,
        backend: str = "auto",
        normalize: bool = False,
        rtol: float | None = None,
        max_iter: int = 10_000,
        on_nonconvergence: str = "raise",
        progress: bool = False,
        gpu_options: dict | None = None,
    ) -> None:
        if gpu_options is not None and not isinstance(gpu_options, dict):
            raise ParameterTypeError(f"Solve: gpu_options must be a dict or None, got {type(gpu_options).__name__}")
        if not isinstance(backend, str):
            raise ParameterTypeError(f"Solve: backend must be a backend name, got {type(backend).__name__}")
        for name, value in (("normalize", normalize), ("progress", progress)):
            if not isinstance(value, (bool, np.bool_)):
                raise ParameterTypeError(f"Solve: {name} must be True or False, got {type(value).__name__}")
        self.node_kernel = node_kernel
        self.edge_kernel = edge_kernel
        self.kwargs = dict(
            q=q, p=p, backend=backend, rtol=rtol, max_iter=max_iter,
            on_nonconvergence=on_nonconvergence, progress=progress, gpu_options=dict(gpu_options or {}),
        )
        self.normalize = normalize
        self.kernel: MarginalizedGraphKernel | None = None

    def _kernels(self, state: PipelineState) -> tuple[BaseKernel | None, BaseKernel | None]:
        nk, ek = self.node_kernel, self.edge_kernel
        if (nk is None or ek is None) and state.dataset is not None:
            from . import datasets

            g0 = state.graphs[0]
            dnk, dek = datasets.default_kernels(
                state.dataset, labeled=bool(g0.node_labels or g0.edge_labels)
            )
            nk = nk if nk is not None else dnk
            ek = ek if ek is not None else dek
        return nk, ek

    def uses_gpu(self) -> bool:
        """Whether this stage solves on the GPU (backend "gpu", or "auto" with a device)."""
        backend = self.kwargs["backend"]
        if backend == "auto":
            from .mgk import gpu_available

            return bool(gpu_available())
        return backend == "gpu"

    def pack(self, state: PipelineState) -> Any:
        """The :class:`mgkflow.gpu.pack.HostBatch` this stage's GPU backend would build for ``state``."""
        from .gpu.pack import pack_for_kernels
        from .kernels import Constant, check_edge_kernel, check_node_kernel
        from .system import prepare_graph

        nk, ek = self._kernels(state)
        nk = check_node_kernel(nk if nk is not None else Constant(1.0))
        ek = check_edge_kernel(ek if ek is not None else Constant(1.0))
        q, p = self.kwargs["q"], self.kwargs["p"]
        systems = [prepare_graph(g, i, nk, ek, p=p, q=q) for i, g in enumerate(state.graphs)]
        opts = self.kwargs["gpu_options"]
        return pack_for_kernels(systems, nk, ek, xmv=opts.get("xmv", "rows"), tile_sort=opts.get("tile_sort", True))

    def run(self, state: PipelineState) -> tuple[PipelineState, StageStats]:
        if not state.graphs:
            raise ParameterError("Solve: no graphs (put a Load stage first)")
        nk, ek = self._kernels(state)
        kern = MarginalizedGraphKernel(node_kernel=nk, edge_kernel=ek, **self.kwargs)
        graphs = list(state.graphs)
        from .gpu.pack import HostBatch

        if isinstance(state.packed, HostBatch):
            backend = kern._get_backend()
            if hasattr(backend, "adopt"):
                backend.adopt(state.packed)
        t0 = time.perf_counter()
        K = kern(graphs, normalize=self.normalize)
        sec = time.perf_counter() - t0
        self.kernel = kern
        figures = {"node_kernel": repr(kern.node_kernel), "edge_kernel": repr(kern.edge_kernel)}
        figures.update(kern.last_stats.summary())
        pack = (kern.last_stats.extra or {}).get("pack")
        if pack:
            figures["pack"] = pack
        figures["solve_seconds"] = figures.pop("seconds")
        return replace(state, gram=K), StageStats(self.name, sec, figures)


@dataclass
class PipelineResult:
    """Output of :meth:`Pipeline.run`: the Gram matrix (or None), the per-stage
    statistics as a DataFrame (one row per stage), the raw :class:`StageStats`
    and the final state."""

    gram: np.ndarray | None
    stats: Any
    stage_stats: list[StageStats]
    state: PipelineState


class Pipeline:
    """A list of stages run in order.

    Parameters
    ----------
    stages : sequence of Stage
        E.g. ``[Load("nws"), Reorder("pbr"), Pack(), Solve()]``.

    Examples
    --------
    >>> p = Pipeline([Load("ba", n_graphs=3), Reorder("natural"), Pack()])
    >>> int(p.run().stats.set_index("stage").loc["pack", "octiles"]) > 0
    True
    """

    def __init__(self, stages: Sequence[Stage]) -> None:
        if isinstance(stages, (str, bytes)) or not hasattr(stages, "__iter__") or hasattr(stages, "columns"):
            raise ParameterTypeError(f"Pipeline needs a sequence of stages, got {type(stages).__name__}")
        stages = list(stages)
        if not stages:
            raise ParameterError("Pipeline needs at least one stage")
        for s in stages:
            if not hasattr(s, "run") or not hasattr(s, "name"):
                raise ParameterTypeError(f"{s!r:.60} is not a pipeline stage (needs .name and .run(state))")
        # a Pack stage packs for the next Solve stage (no Load or Reorder in between)
        for k, s in enumerate(stages):
            if isinstance(s, Pack):
                nxt = next((t for t in stages[k + 1 :] if isinstance(t, Solve | Load | Reorder)), None)
                s.consumer = nxt if isinstance(nxt, Solve) else None
        self.stages = stages

    def run(self, graphs: Sequence[Graph] | None = None) -> PipelineResult:
        """Run every stage; ``graphs`` seeds the state when there is no Load stage."""
        import pandas as pd

        state = PipelineState(graphs=tuple(graphs) if graphs is not None else ())
        records = []
        for stage in self.stages:
            state, st = stage.run(state)
            records.append(st)
        rows = []
        for st in records:
            row = st.as_row()
            if isinstance(row.get("density_histogram"), np.ndarray):
                row["density_histogram"] = " ".join(map(str, row["density_histogram"].tolist()))
            rows.append(row)
        return PipelineResult(state.gram, pd.DataFrame(rows), records, state)

    def __repr__(self) -> str:
        return "Pipeline([" + ", ".join(repr(s) for s in self.stages) + "])"
