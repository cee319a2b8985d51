"""CUDA source generation for the GPU solver (no PyCUDA needed: CI compiles these with nvcc).

The solver's ``.cu`` file is a template; only the base kernels' C expressions and the
label loads are spliced in (:func:`kernel_source`). A :class:`KernelConfig` names
everything that changes the generated code, so compiled modules can be cached per
configuration. It holds no hyperparameter value: the kernels' C expressions read their
values from the ``__constant__`` array ``mgk_kpar`` (node kernel's device values, then the
edge kernel's, then one slot for the staged XMV's SquareExponential scale), filled at launch
from :func:`kernel_values`; a new value reuses the compiled module.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from string import Template

import numpy as np

from ..kernels import BaseKernel, SquareExponential

__all__ = [
    "KernelConfig", "kernel_source", "make_config", "label_macros", "coef_expr", "kernel_values", "se_scale",
    "DEFAULT_BLOCK", "XMV_MODES", "KPAR", "gradient_fragment", "common_placeholders", "f32_sums", "value_cg",
]  # fmt: skip

#: Name of the ``__constant__`` float array of the kernels' run-time hyperparameters.
KPAR = "mgk_kpar"

#: Threads per block of the solver.
DEFAULT_BLOCK = 512
#: Per-block XMV strategies (:mod:`mgkflow.gpu.strategies`, path "block"); a flattened octile
#: walk and "rows4" were measured slower and removed (mgkflow/gpu/NOTES.md).
XMV_MODES = ("rows", "octile")


@dataclass(frozen=True)
class KernelConfig:
    """Everything that shapes the generated CUDA source.

    Attributes
    ----------
    node_expr, edge_expr : str
        C float expressions of the node and edge base kernels over ``v1_k``/``v2_k``
        and ``e1_k``/``e2_k`` (k = index of the label field).
    node_fields, edge_fields : tuple of (name, "int" | "float")
        Label fields read by the kernels and their storage type.
    block : int
        Threads per block.
    a_double : bool
        Store a = M p in float64 (else float32) between the XMV and the update.
    weight_double : bool
        Edge weights are stored in float64 (some weight is not exactly a float32).
    unit_weight : bool
        Every edge weight of the call is 1: the solvers load no weights (``LOAD_W`` in
        :func:`label_macros`) and a product's coefficient is the edge kernel's value.
    min_blocks : int
        Second ``__launch_bounds__`` argument (resident blocks per SM to fit registers for).
    xmv : {"rows", "octile"}
        XMV work mapping (see ``mgk_solver.cu``): "rows" walks node rows in CSR order
        (the lane owns two outputs of a tile pair, every trip is one product); "octile" loops
        over octile pairs with the primitives of ``octile_primitives.cuh``.
    adaptive : bool
        Octile mode: choose the primitive per octile pair from a selection map (measured
        by ``mgkflow bench primitives``); else sparse x sparse everywhere.
    row_ilp : int
        Row mode: 2 splits each lane's float64 sum into two independent chains.
    p_smem : bool
        The kernel is only launched with the search direction P in shared memory (the
        compiler then uses shared-memory addressing in the XMV).
    resident : bool
        Value solves only: P, R and a = M p in shared memory, no solution vector (K summed from
        the CG steps); launched with ``use_smem`` 3 (see ``mgk_solver.cu``).
    n_node_par, n_edge_par : int
        Device values of the node and edge kernels (``kernel.n_device_values``): the C
        expressions read ``mgk_kpar[k]`` (node) and ``mgk_kpar[n_node_par + k]`` (edge).
    se_edge : bool
        The edge kernel is one ``SquareExponential`` (the staged wide XMV then folds the
        weight into the exponent, scaled at run time by ``mgk_kpar[n_node_par + n_edge_par]``
        = sqrt(log2(e) / (2 l^2)): one MUFU op per product).
    gradient : bool
        Per-pair solver with derivatives (``mgk_gradient.cuh``): one PCG loop with two
        recurrences, x and the adjoint y (M y = p_x), sharing each XMV pass, then a contraction
        pass writing dK/dh per pair (node hyperparameters, edge hyperparameters, then q) to
        ``out_grad``. Row-pair XMV only.
    nodal : bool
        Per-pair solver writing the node-pair similarities p_i p'_i' x_ii' of every pair to
        ``out_nodal`` (at the pair's offset ``nodal_off[job]``, row-major in the graphs' original
        node order: ``nodal_perm[node_off + a]`` is the original index of packed node a).
    node_grad, edge_grad : tuple of str
        C float expressions of the node and edge kernels' derivatives (``c_grad``, reading
        ``mgk_kpar`` like the values; structure only), filled when ``gradient``.
    """

    node_expr: str
    edge_expr: str
    node_fields: tuple[tuple[str, str], ...]
    edge_fields: tuple[tuple[str, str], ...]
    block: int = DEFAULT_BLOCK
    a_double: bool = False
    weight_double: bool = False
    min_blocks: int = 1
    xmv: str = "rows"
    adaptive: bool = False
    row_ilp: int = 1
    p_smem: bool = False
    resident: bool = False
    n_node_par: int = 0
    n_edge_par: int = 0
    se_edge: bool = False
    gradient: bool = False
    nodal: bool = False
    node_grad: tuple[str, ...] = ()
    edge_grad: tuple[str, ...] = ()
    unit_weight: bool = False

    @property
    def n_grad(self) -> int:
        """Columns of ``out_grad``: node hyperparameters, edge hyperparameters, q (always computed)."""
        return len(self.node_grad) + len(self.edge_grad) + 1

    @property
    def n_par(self) -> int:
        """Length of ``mgk_kpar``: node values, edge values, the SquareExponential scale slot."""
        return self.n_node_par + self.n_edge_par + 1

    @property
    def key(self) -> str:
        """A short digest of the configuration."""
        return hashlib.sha1(repr(self).encode()).hexdigest()[:16]


def _ctype(dtype: np.dtype | str) -> str:
    kind = np.dtype(dtype).kind
    return "int" if kind in "iub" else "float"


def make_config(
    node_kernel: BaseKernel,
    edge_kernel: BaseKernel,
    node_dtypes: Mapping[str, np.dtype | str] | None = None,
    edge_dtypes: Mapping[str, np.dtype | str] | None = None,
    block: int = DEFAULT_BLOCK,
    a_double: bool = False,
    weight_double: bool = False,
    min_blocks: int = 1,
    xmv: str = "rows",
    adaptive: bool = False,
    row_ilp: int = 1,
    gradient: bool = False,
    nodal: bool = False,
    unit_weight: bool = False,
) -> KernelConfig:
    """Build the :class:`KernelConfig` of a pair of base kernels.

    Parameters
    ----------
    node_kernel, edge_kernel : BaseKernel
        Base kernels (ranges already checked).
    node_dtypes, edge_dtypes : mapping of field name to dtype, optional
        dtype of each label field the kernels read (integer fields are stored as
        int32, others as float32); a field not listed is taken as float.
    block : int
        Threads per block (a multiple of 32, at most 1024).
    a_double : bool
        Keep a = M p in float64.
    weight_double : bool
        Edge weights in float64 (see :func:`mgkflow.format.pack_batch`).
    min_blocks : int
        Resident blocks per SM the register allocation must allow.
    xmv : {"rows", "octile"}
        XMV work mapping (see :class:`KernelConfig`).
    adaptive : bool
        Per-octile-pair primitive selection (octile mode).
    row_ilp : {1, 2}
        Row mode: independent float64 accumulation chains per lane.
    gradient, nodal : bool
        Derivatives or node-pair similarities (see :class:`KernelConfig`); they need
        ``xmv="rows"`` and exclude each other.
    unit_weight : bool
        Every edge weight is 1 (:func:`mgkflow.gpu.pack.weights_all_one`); ignored with ``weight_double``.

    Examples
    --------
    >>> from mgkflow.kernels import Constant, KroneckerDelta
    >>> c = make_config(KroneckerDelta(0.5, "label"), Constant(1.0), {"label": "int64"})
    >>> c.node_expr, c.node_fields, c.n_par
    ('((v1_0 == v2_0) ? 1.0f : mgk_kpar[0])', (('label', 'int'),), 3)
    >>> c == make_config(KroneckerDelta(0.9, "label"), Constant(0.3), {"label": "int64"})
    True
    """
    from .strategies import available

    if xmv not in available("block"):
        raise ValueError(f"xmv must be one of {sorted(available('block'))}, got {xmv!r}")
    if (gradient or nodal) and xmv != "rows":
        raise ValueError(f"gradient and nodal solves use the row-pair XMV, got xmv={xmv!r}")
    if gradient and nodal:
        raise ValueError("gradient and nodal solves are separate configurations")
    if row_ilp not in (1, 2):
        raise ValueError(f"row_ilp must be 1 or 2, got {row_ilp}")
    if block % 32 or not 32 <= block <= 1024:
        raise ValueError(f"block must be a multiple of 32 in [32, 1024], got {block}")
    node_dtypes = dict(node_dtypes or {})
    edge_dtypes = dict(edge_dtypes or {})
    nf = tuple((f, _ctype(node_dtypes.get(f, "float32"))) for f in node_kernel.fields)
    ef = tuple((f, _ctype(edge_dtypes.get(f, "float32"))) for f in edge_kernel.fields)
    ni = {f: k for k, (f, _) in enumerate(nf)}
    ei = {f: k for k, (f, _) in enumerate(ef)}
    nn = node_kernel.n_device_values
    node_expr = node_kernel.c_expr(lambda f: f"v1_{ni[f]}", lambda f: f"v2_{ni[f]}", lambda i: f"{KPAR}[{i}]")
    edge_expr = edge_kernel.c_expr(lambda f: f"e1_{ei[f]}", lambda f: f"e2_{ei[f]}", lambda i: f"{KPAR}[{nn + i}]")
    node_grad: tuple[str, ...] = ()
    edge_grad: tuple[str, ...] = ()
    if gradient:
        node_grad = tuple(
            node_kernel.c_grad(lambda f: f"v1_{ni[f]}", lambda f: f"v2_{ni[f]}", lambda i: f"{KPAR}[{i}]")
        )
        edge_grad = tuple(
            edge_kernel.c_grad(lambda f: f"e1_{ei[f]}", lambda f: f"e2_{ei[f]}", lambda i: f"{KPAR}[{nn + i}]")
        )
    return KernelConfig(
        node_expr, edge_expr, nf, ef, int(block), bool(a_double), bool(weight_double), int(min_blocks), xmv,
        bool(adaptive) and xmv == "octile",
        int(row_ilp),
        n_node_par=nn,
        n_edge_par=edge_kernel.n_device_values,
        se_edge=type(edge_kernel) is SquareExponential,
        gradient=bool(gradient),
        nodal=bool(nodal),
        node_grad=node_grad,
        edge_grad=edge_grad,
        unit_weight=bool(unit_weight) and not weight_double,
    )


def kernel_values(node_kernel: BaseKernel, edge_kernel: BaseKernel) -> np.ndarray:
    """The float32 contents of ``mgk_kpar`` for these kernels (see :class:`KernelConfig`).

    Examples
    --------
    >>> from mgkflow.kernels import Constant, KroneckerDelta
    >>> kernel_values(KroneckerDelta(0.5, "label"), Constant(0.25)).tolist()
    [0.5, 0.25, 0.0]
    """
    vals = [*node_kernel.device_values(), *edge_kernel.device_values(), se_scale(edge_kernel)]
    return np.asarray(vals, dtype=np.float64).astype(np.float32)


def se_scale(edge_kernel: BaseKernel) -> float:
    """sqrt(log2(e) / (2 l^2)) for a lone ``SquareExponential(l, field)``, else 0.

    With labels scaled by it, exp(-(a - b)^2 / (2 l^2)) = exp2(-(a' - b')^2).

    Examples
    --------
    >>> from mgkflow.kernels import Constant, SquareExponential
    >>> round(se_scale(SquareExponential(1.0, "d")), 6), se_scale(Constant(1.0))
    (0.849322, 0.0)
    """
    if type(edge_kernel) is not SquareExponential:
        return 0.0
    return math.sqrt(math.log2(math.e) / (2.0 * edge_kernel.length_scale**2))


def _load_macro(name: str, var: str, array: str, stride: str, fields: tuple[tuple[str, str], ...]) -> str:
    parts = []
    for k, (_, ct) in enumerate(fields):
        word = f"{array}[(long long){k} * {stride} + (long long)(t)]"
        if ct == "int":
            parts.append(f"const int {var}_{k} = (int)({word});")
        else:
            parts.append(f"const float {var}_{k} = __uint_as_float({word});")
    return f"#define {name}(t) " + " ".join(parts)


def template_text(name: str = "mgk_solver.cu") -> str:
    """The raw text of a CUDA source shipped in :mod:`mgkflow.gpu`."""
    return resources.files("mgkflow.gpu").joinpath(name).read_text()


def label_macros(config: KernelConfig) -> str:
    """The run-time hyperparameter array ``mgk_kpar`` and the ``#define`` lines of the label
    loads (LOAD_V1/2, LOAD_E1/2) of ``config``."""
    return "\n".join(
        [
            f"__constant__ float {KPAR}[{config.n_par}];  // node kernel values, edge kernel values, SE scale",
            "// an edge weight (every weight is 1 when UNIT_W: no load, and COEF's products by 1 fold away)",
            f"#define UNIT_W {int(config.unit_weight)}",
            "#define LOAD_W(arr, k) (UNIT_W ? (w_t)1 : (arr)[k])",
            _load_macro("LOAD_V1", "v1", "nlab", "nlab_stride", config.node_fields),
            _load_macro("LOAD_V2", "v2", "nlab", "nlab_stride", config.node_fields),
            _load_macro("LOAD_E1", "e1", "elab", "elab_stride", config.edge_fields),
            _load_macro("LOAD_E2", "e2", "elab", "elab_stride", config.edge_fields),
        ]
    )


def coef_expr(config: KernelConfig) -> str:
    """C expression of one product's coefficient (double) from w1, w2 and the edge kernel value."""
    return "((w1) * (w2) * (double)(ke))" if config.weight_double else "((double)((w1) * (w2) * (ke)))"


def common_placeholders(config: KernelConfig) -> dict[str, str]:
    """The placeholders every solver source fills the same way from ``config`` (``mgk_solver.cu``,
    ``mgk_wide.cu``, ``mgk_compact.cu``): COMMON (the text of ``mgk_common.cuh``), DEFINES (the label
    loads and ``mgk_kpar``), NODE_KERNEL, EDGE_KERNEL, W_TYPE (the edge weights' storage) and COEF.

    Examples
    --------
    >>> from mgkflow.kernels import Constant
    >>> sorted(common_placeholders(make_config(Constant(1.0), Constant(1.0))))
    ['COEF', 'COMMON', 'DEFINES', 'EDGE_KERNEL', 'NODE_KERNEL', 'W_TYPE']
    """
    return {
        "COMMON": template_text("mgk_common.cuh"),
        "DEFINES": label_macros(config),
        "NODE_KERNEL": config.node_expr,
        "EDGE_KERNEL": config.edge_expr,
        "W_TYPE": "double" if config.weight_double else "float",
        "COEF": coef_expr(config),
    }


def gradient_fragment(config: KernelConfig) -> str:
    """``mgk_gradient.cuh`` with the derivative expressions of ``config`` spliced in: one
    ``#define NODE_GRAD_<h>`` / ``EDGE_GRAD_<h>`` per hyperparameter (C float expressions over
    the label variables and ``mgk_kpar``) and the X-macros ``NODE_GRAD_LIST(F)`` /
    ``EDGE_GRAD_LIST(F)`` applying ``F(slot, expr)`` to each."""
    nn = len(config.node_grad)
    lines = [f"#define N_NODE_GRAD {nn}", f"#define N_EDGE_GRAD {len(config.edge_grad)}",
             f"#define N_GRAD {config.n_grad}"]  # fmt: skip
    node_list = " ".join(f"F({k}, ({g}))" for k, g in enumerate(config.node_grad))
    edge_list = " ".join(f"F({k}, ({g}))" for k, g in enumerate(config.edge_grad))
    lines.append(f"#define NODE_GRAD_LIST(F) {node_list}")
    lines.append(f"#define EDGE_GRAD_LIST(F) {edge_list}")
    return Template(template_text("mgk_gradient.cuh")).substitute(GRAD_DEFINES="\n".join(lines))


def f32_sums(config: KernelConfig) -> bool:
    """Whether the build sums the resident XMV's products in float32 (``F32_SUMS`` of ``mgk_solver.cu``): a
    resident build whose edge kernel is one SquareExponential (its coefficients are float32 roundings of an
    exponential already) and whose weights are stored as float32.

    Examples
    --------
    >>> from dataclasses import replace
    >>> from mgkflow.kernels import Constant, KroneckerDelta, SquareExponential
    >>> cfg = make_config(KroneckerDelta(0.5, "a"), SquareExponential(1.0, "d"), {"a": "int64"}, {"d": "float64"})
    >>> f32_sums(cfg), f32_sums(replace(cfg, p_smem=True, resident=True))
    (False, True)
    >>> f32_sums(replace(make_config(Constant(1.0), Constant(1.0)), p_smem=True, resident=True))
    False
    """
    return config.resident and config.se_edge and not config.weight_double


def value_cg(config: KernelConfig) -> bool:
    """Whether the build runs the value PCG in the Chronopoulos-Gear form (``VALUE_CG`` of ``mgk_solver.cu``): an
    F32_SUMS value build (:func:`f32_sums`) with a = M p stored as float32, whose z = D^-1 r (float32) and q = M z
    (float32) share P's float64 slots, so that its shared memory per unknown stays
    :func:`mgkflow.gpu.solvers.per_block.resident_entry_bytes`.

    Examples
    --------
    >>> from dataclasses import replace
    >>> from mgkflow.kernels import KroneckerDelta, SquareExponential
    >>> cfg = make_config(KroneckerDelta(0.5, "a"), SquareExponential(1.0, "d"), {"a": "int64"}, {"d": "float64"})
    >>> value_cg(replace(cfg, p_smem=True, resident=True)), value_cg(replace(cfg, p_smem=True, resident=True,
    ...                                                                      gradient=True))
    (True, False)
    """
    return f32_sums(config) and not config.gradient and not config.a_double


def se_scaled_macro(config: KernelConfig) -> str:
    """``#define`` lines of ``SE_E(k_)`` (edge ``k_``'s label as a float) and ``SE_SIGMA`` (:func:`se_scale`,
    ``mgk_kpar``'s last value) in ``mgk_solver.cu``'s F32_SUMS builds (:func:`f32_sums`: one SquareExponential
    edge kernel); 0 in other builds.

    Examples
    --------
    >>> from dataclasses import replace
    >>> from mgkflow.kernels import KroneckerDelta, SquareExponential
    >>> cfg = make_config(KroneckerDelta(0.5, "a"), SquareExponential(1.0, "d"), {"a": "int64"}, {"d": "float64"})
    >>> print(se_scaled_macro(replace(cfg, p_smem=True, resident=True)))
    #define SE_E(k_) (__uint_as_float(elab[(long long)(k_)]))
    #define SE_SIGMA (mgk_kpar[3])
    >>> print(se_scaled_macro(cfg))
    #define SE_E(k_) 0.0f
    #define SE_SIGMA 0.0f
    """
    if not f32_sums(config) or len(config.edge_fields) != 1:
        return "#define SE_E(k_) 0.0f\n#define SE_SIGMA 0.0f"
    word = "elab[(long long)(k_)]"
    value = f"(float)(int)({word})" if config.edge_fields[0][1] == "int" else f"__uint_as_float({word})"
    return f"#define SE_E(k_) ({value})\n#define SE_SIGMA ({KPAR}[{config.n_node_par + config.n_edge_par}])"


def kernel_source(config: KernelConfig) -> str:
    """The complete CUDA source of the solver for ``config``.

    Examples
    --------
    >>> from mgkflow.kernels import Constant
    >>> src = kernel_source(make_config(Constant(1.0), Constant(1.0)))
    >>> "mgk_solve" in src and "${" not in src
    True
    """
    from .strategies import get

    strategy = get(config.xmv)
    if config.resident and (config.nodal or not config.p_smem or config.xmv != "rows"):
        raise ValueError("a resident solver is a row-pair value or gradient solve with P in shared memory (no nodal)")
    extra_params, fragment = "", ""
    if config.gradient:
        extra_params = ",\n    double* __restrict__ out_grad"
        fragment = gradient_fragment(config)
    elif config.nodal:
        extra_params = (
            ",\n    double* __restrict__ out_nodal,\n    const long long* __restrict__ nodal_off,"
            "\n    const int* __restrict__ nodal_perm"
        )
    return Template(template_text()).substitute(
        GRADIENT="1" if config.gradient else "0",
        NODAL="1" if config.nodal else "0",
        GRADIENT_FRAGMENT=fragment,
        EXTRA_PARAMS=extra_params,
        XMV_FRAGMENT=template_text(strategy.fragment),
        XMV_PARAMS=strategy.c_params(),
        BLOCK=str(config.block),
        PRIMITIVES=template_text("octile_primitives.cuh"),
        A_TYPE="double" if config.a_double else "float",
        MIN_BLOCKS=str(config.min_blocks),
        ADAPTIVE="1" if config.adaptive else "0",
        ROW_ILP=str(config.row_ilp),
        P_SMEM="1" if config.p_smem else "0",
        RESIDENT="1" if config.resident else "0",
        # float32 sums of the resident XMV where the products' coefficients are float32 roundings anyway (one
        # SquareExponential edge kernel, float32 weights): mgk_solver.cu's header
        F32_SUMS="1" if f32_sums(config) else "0",
        VALUE_CG="1" if value_cg(config) else "0",
        SE_DEFINES=se_scaled_macro(config),
        **common_placeholders(config),
    )
