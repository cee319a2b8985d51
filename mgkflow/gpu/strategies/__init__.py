"""XMV strategies of the GPU solver: a registry with one module per strategy.

The XMV y = (A∘E) p is the inner loop of every CG iteration. A strategy is one way of
computing it on the device, in one of two execution paths:

* ``"block"``: one thread block solves a whole pair (the PCG of ``mgk_solver.cu``, many
  pairs per launch): :mod:`.row_pair` (default) and :mod:`.octile` (the octile-pair
  primitives with their measured selection map: the paper's design, kept as an option);
* ``"wide"``: the whole device solves one large pair, the CG loop on the host
  (``mgk_wide.cu``, :mod:`mgkflow.gpu.solvers.wide`): :mod:`.wide_rows` and :mod:`.staged`.

Each strategy module defines one :class:`Strategy` subclass instance and registers it. It
owns its host layout (the tables it needs beyond the common octile batch), the name of its
CUDA kernel or fragment, its numpy emulation (the reference the fake-driver tests compare
the host code against), the features of a pair its cost model reads, when it does not apply
(and why) and its launch arguments (by parameter name, checked by
:class:`mgkflow.gpu.device.Kernel`).

Choosing: for "auto", :func:`choose` evaluates the calibrated cost model of every strategy
that applies to the pair (:mod:`.cost`; parameters measured on this GPU model by
``python -m mgkflow.bench.gpu_calibrate``) and takes the cheapest; without calibration it
uses each strategy's ``fallback_rank`` (the rule measured before cost models existed).

Adding a strategy
-----------------
1. one module here, ``mgkflow/gpu/strategies/<name>.py``: a :class:`Strategy` subclass
   (wide path: ``name``, ``kernel``, ``features``, ``applies``, ``grid``, ``launch``;
   ``prepare`` for host/device tables) or a :class:`._block.BlockStrategy` subclass (block
   path: ``name``, ``fragment``, ``params``, ``args``, ``job_cost``), instantiated and passed
   to :func:`register` (every module of this package is imported when it loads);
2. one CUDA fragment: block path, ``mgkflow/gpu/xmv_<name>.cuh`` defining
   ``XMV_LANE_SETUP`` and ``XMV_TILE_PAIR(acca, accb)`` over the module's ``params`` (see
   ``xmv_row_pair.cuh``); wide path, a kernel in ``mgk_wide.cu`` whose parameters the
   module's ``launch`` names;
3. one test file ``tests/test_gpu_strategy_<name>.py`` (numpy emulation vs the CPU solver,
   nvcc compile of the generated source, fake-driver launch).
The benchmark (``gpu_calibrate``) measures every registered strategy of a path without
changes.

Examples
--------
>>> {"staged", "wide_rows"} <= set(available("wide")), {"rows", "octile"} <= set(available("block"))
(True, True)
>>> get("staged").path
'wide'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Strategy", "PairContext", "register", "unregister", "get", "available", "choose"]


@dataclass
class PairContext:
    """What a strategy may read about one pair of a device batch (wide path).

    ``db`` is the uploaded batch (:class:`mgkflow.gpu.core.DeviceBatch`), ``cuda`` the
    driver module, ``config`` the kernel configuration (None: structure unknown), ``forced``
    whether the caller named the strategy (then accuracy rules of "auto" do not apply).
    """

    cuda: Any
    db: Any
    g1: int
    g2: int
    config: Any
    block: int
    slots: int
    n1: int
    n2: int
    nt1: int
    nt2: int
    off1: int
    off2: int
    ro1: int
    rro1: int
    rro2: int
    forced: bool = False
    cache: dict = field(default_factory=dict)

    @property
    def q_min(self) -> float:
        qv = np.asarray(self.db.batch.q)
        return float(min(qv[self.off1 : self.off1 + self.n1].min(), qv[self.off2 : self.off2 + self.n2].min()))

    @property
    def nnz1(self) -> int:
        return int(self.db.nnz_per_graph[self.g1])

    @property
    def nnz2(self) -> int:
        return int(self.db.nnz_per_graph[self.g2])


class Strategy:
    """One XMV strategy (subclass per module; see the package docstring).

    Attributes
    ----------
    name : str
        Registry name.
    path : {"block", "wide"}
        Execution path.
    kernel : str
        CUDA kernel (wide path) or XMV mapping (block path) it runs.
    feature_names : tuple of str
        Names of :meth:`features`, in the order of the cost model's coefficients.
    fallback_rank : int
        Without a calibrated cost model "auto" takes the applicable strategy of lowest rank.
    """

    name = ""
    path = "wide"
    kernel = ""
    feature_names: tuple[str, ...] = ()
    fallback_rank = 100

    def applies(self, ctx: PairContext) -> str:
        """"" when the strategy can run the pair, else why not."""
        return ""

    def prepare(self, ctx: PairContext) -> Any:
        """Host and device tables of the pair (cached by the strategy where it can)."""
        return None

    def features(self, ctx: PairContext) -> dict[str, float]:
        """Features of the pair for the cost model (per XMV)."""
        raise NotImplementedError

    def launch(self, ctx: PairContext, fn: Any, grid: int, vectors: dict[str, Any]) -> None:
        """Launch the XMV kernel ``fn`` (a :class:`mgkflow.gpu.device.Kernel`) over ``grid`` blocks."""
        raise NotImplementedError


_REGISTRY: dict[str, Strategy] = {}


def register(strategy: Strategy, *, overwrite: bool = False) -> Strategy:
    """Register a strategy instance under ``strategy.name``."""
    name = strategy.name
    if not name or strategy.path not in ("block", "wide"):
        raise ValueError(f"a strategy needs a name and a path 'block' or 'wide', got {name!r}, {strategy.path!r}")
    if name in _REGISTRY and not overwrite:
        raise ValueError(f"strategy {name!r} is already registered")
    _REGISTRY[name] = strategy
    return strategy


def unregister(name: str) -> None:
    """Remove a strategy (tests, experiments)."""
    _REGISTRY.pop(name, None)


def get(name: str) -> Strategy:
    """The strategy registered under ``name``."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown GPU strategy {name!r}; available: {sorted(_REGISTRY)}") from None


def available(path: str | None = None) -> list[str]:
    """Names of the registered strategies (of one path)."""
    return [n for n, s in _REGISTRY.items() if path is None or s.path == path]


def choose(ctx: PairContext, names: list[str], models: dict | None) -> tuple[str, dict[str, float], dict[str, str]]:
    """The cheapest applicable strategy among ``names`` for the pair.

    Returns (name, predicted seconds per XMV of each applicable strategy (empty without
    models), why-not of each strategy that does not apply). With ``models`` (name ->
    :class:`.cost.CostModel`) covering every applicable strategy the prediction decides;
    otherwise the lowest ``fallback_rank``.
    """
    why: dict[str, str] = {}
    ok = []
    for n in names:
        reason = get(n).applies(ctx)
        if reason:
            why[n] = reason
        else:
            ok.append(n)
    if not ok:
        raise ValueError(f"no GPU strategy applies to pair ({ctx.g1}, {ctx.g2}): {why}")
    pred: dict[str, float] = {}
    if models and all(n in models for n in ok) and len(ok) > 1:
        pred = {n: models[n].predict(get(n).features(ctx)) for n in ok}
        return min(ok, key=lambda n: (pred[n], n)), pred, why
    return min(ok, key=lambda n: (get(n).fallback_rank, n)), pred, why


def _load_modules() -> None:
    """Import every strategy module of this package (each registers its strategy)."""
    import importlib
    import pkgutil

    for m in pkgutil.iter_modules(__path__):
        if not m.name.startswith("_") and m.name != "cost":
            importlib.import_module(f"{__name__}.{m.name}")


_load_modules()
