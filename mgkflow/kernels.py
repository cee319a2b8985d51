"""Base kernels on node and edge labels.

Each kernel has one definition that gives both a vectorized numpy evaluation
(``kernel(x, y)`` on mappings of label arrays, with numpy broadcasting) and a C
expression for the GPU stage (``kernel.c_expr(lhs, rhs)``; ``mgk_ex2`` in it is 2^x, defined
in ``mgkflow/gpu/mgk_common.cuh``). Ranges are checked
when a kernel is built and again when it is used as a node kernel (values must
lie in (0, 1]) or an edge kernel (values in [0, 1]).

Hyperparameters are run-time values, never part of the generated code. Each kernel
declares them as :class:`Hyperparameter` records (name, value, bounds, fixed or not);
``kernel.hyperparameters`` lists them flattened in a fixed order (children of products and
sums in turn), ``kernel.with_values(values)`` returns the same structure with new values,
``kernel.gradient(x, y)`` gives dk/dh for every hyperparameter h in that order, and
``kernel.device_values()`` the float values that the C expressions read through ``par``:
``kernel.c_expr(lhs, rhs, par)`` and ``kernel.c_grad(lhs, rhs, par)`` (one expression per
hyperparameter) write ``par(i)`` for the i-th device value. ``kernel.structure`` is a
value-free key of the kernel's structure (what code generation depends on). Without
``par``, ``c_expr`` inlines the values as float literals.

Examples
--------
>>> import numpy as np
>>> k = KroneckerDelta(0.5, "label") * SquareExponential(2.0, "x")
>>> k({"label": np.array([1, 2]), "x": np.array([0.0, 0.0])}, {"label": np.array([1]), "x": np.array([2.0])})
array([0.60653066, 0.30326533])
>>> k.c_expr(lambda f: "a_" + f, lambda f: "b_" + f).split(" * mgk_ex2")[0]
'((a_label == b_label) ? 1.0f : 0.5f)'
>>> [h.name for h in k.hyperparameters], k.device_values()[0]
(['0.h', '1.length_scale'], 0.5)
>>> k.c_expr(lambda f: "a_" + f, lambda f: "b_" + f, lambda i: f"P[{i}]").split(" * mgk_ex2")[0]
'((a_label == b_label) ? 1.0f : P[0])'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Union

import numpy as np

from .errors import GraphError, KernelRangeError, ParameterError, ParameterTypeError

__all__ = [
    "Hyperparameter",
    "BaseKernel",
    "Constant",
    "KroneckerDelta",
    "SquareExponential",
    "RationalQuadratic",
    "VectorSquareExponential",
    "CosineSimilarity",
    "MinMax",
    "vector_component",
    "vector_dims",
    "c_fields",
    "Product",
    "Sum",
    "tensor_product",
    "check_node_kernel",
    "check_edge_kernel",
]

FieldExpr = Callable[[str], str]
#: ``par(i)`` -> C expression of the i-th device value of a kernel.
ParExpr = Callable[[int], str]

Bounds = Union[tuple[float, float], str]


@dataclass(frozen=True)
class Hyperparameter:
    """One hyperparameter of a base kernel.

    Attributes
    ----------
    name : str
        Its name, e.g. ``"h"`` or ``"length_scale"`` (prefixed with the child's position in
        products and sums: ``"0.h"``).
    value : float
        Its current value.
    bounds : (float, float) or "fixed"
        Search bounds (positive, for log-space optimizers); ``"fixed"`` keeps it out of θ.
    """

    name: str
    value: float
    bounds: Bounds

    @property
    def fixed(self) -> bool:
        return isinstance(self.bounds, str) and self.bounds == "fixed"

    def renamed(self, prefix: str) -> Hyperparameter:
        return Hyperparameter(f"{prefix}.{self.name}", self.value, self.bounds)


def _check_bounds(bounds: Any, what: str, lo: float, hi: float) -> Bounds:
    """Validate ``bounds``: "fixed" or (a, b) with lo <= a <= b <= hi, a > 0."""
    if isinstance(bounds, str):
        if bounds != "fixed":
            raise ParameterError(f"{what}: bounds must be a (low, high) pair or 'fixed', got {bounds!r}")
        return "fixed"
    try:
        a, b = (float(v) for v in bounds)
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"{what}: bounds must be a (low, high) pair or 'fixed', got {bounds!r}") from exc
    if not (0 < a <= b and math.isfinite(b) and lo <= a and b <= hi):
        raise ParameterError(f"{what}: bounds must satisfy 0 < low <= high within [{lo:g}, {hi:g}], got ({a}, {b})")
    return (a, b)


def _as_float(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ParameterTypeError(f"{what} must be a real number, got {value!r}")
    try:
        v = float(value)
    except OverflowError as exc:
        raise KernelRangeError(f"{what} is too large for a float: {value!r}") from exc
    if not math.isfinite(v):
        raise KernelRangeError(f"{what} must be finite, got {v}")
    return v


def _c_float(v: float) -> str:
    s = repr(float(v))
    if "e" not in s and "." not in s:
        s += ".0"
    return s + "f"


@dataclass(frozen=True)
class Range:
    """Bounds of a kernel's values: ``lo`` (open if ``lo_open``) to ``hi`` (closed)."""

    lo: float
    hi: float
    lo_open: bool = False

    def __mul__(self, other: Range) -> Range:
        lo = self.lo * other.lo
        # 0 is reached when either factor can be exactly 0 (the other is finite).
        reached = (self.lo == 0 and not self.lo_open) or (other.lo == 0 and not other.lo_open)
        return Range(lo, self.hi * other.hi, lo_open=lo == 0 and not reached)

    def __add__(self, other: Range) -> Range:
        lo = self.lo + other.lo
        # a sum of non-negative terms is 0 only when every term can be 0
        return Range(lo, self.hi + other.hi, lo_open=(self.lo_open or other.lo_open) and lo == 0)

    def __str__(self) -> str:
        return f"{'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}]"


class BaseKernel:
    """A positive semi-definite kernel on one or more label fields."""

    #: Label fields the kernel reads.
    fields: tuple[str, ...] = ()

    def __call__(self, x: Mapping[str, np.ndarray], y: Mapping[str, np.ndarray]) -> np.ndarray:
        """Evaluate on label arrays (numpy broadcasting between ``x`` and ``y``)."""
        raise NotImplementedError

    def gradient(self, x: Mapping[str, np.ndarray], y: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """dk/dh for every hyperparameter h (order of :attr:`hyperparameters`), broadcast like the value."""
        raise NotImplementedError

    def c_expr(self, lhs: FieldExpr, rhs: FieldExpr, par: ParExpr | None = None) -> str:
        """C (float) expression; ``lhs(f)``/``rhs(f)`` give the C expression of field ``f``,
        ``par(i)`` that of device value ``i`` (literal values when ``par`` is None)."""
        raise NotImplementedError

    def c_grad(self, lhs: FieldExpr, rhs: FieldExpr, par: ParExpr | None = None) -> list[str]:
        """C (float) expressions of dk/dh, one per hyperparameter (see :meth:`c_expr`)."""
        raise NotImplementedError

    @property
    def hyperparameters(self) -> tuple[Hyperparameter, ...]:
        """The kernel's hyperparameters, flattened in a fixed order."""
        raise NotImplementedError

    def with_values(self, values: Any) -> BaseKernel:
        """The same kernel (fields, bounds) with new hyperparameter values, in the order of
        :attr:`hyperparameters`."""
        raise NotImplementedError

    def device_values(self) -> list[float]:
        """The values the C expressions read as ``par(0)``, ``par(1)``, ..."""
        raise NotImplementedError

    @property
    def n_device_values(self) -> int:
        return len(self.device_values())

    @property
    def structure(self) -> str:
        """A key of the kernel's structure (kernels, fields), independent of the values."""
        return self.c_expr(lambda f: f"<{f}>", lambda f: f"<{f}>'", lambda i: "$" + str(i))

    @property
    def range(self) -> Range:
        """Bounds of the kernel's values."""
        raise NotImplementedError

    def _par(self, par: ParExpr | None) -> ParExpr:
        if par is not None:
            return par
        vals = self.device_values()
        return lambda i: _c_float(vals[i])

    def __mul__(self, other: BaseKernel | float) -> BaseKernel:
        if isinstance(other, int | float):
            other = Constant(float(other))
        if not isinstance(other, BaseKernel):
            return NotImplemented
        return Product(self, other)

    __rmul__ = __mul__

    def __add__(self, other: BaseKernel) -> BaseKernel:
        if not isinstance(other, BaseKernel):
            return NotImplemented
        return Sum(self, other)


class Constant(BaseKernel):
    """k(a, b) = c, reading no label field (the unlabeled case uses ``Constant(1.0)``).

    Parameters
    ----------
    c : float
        The constant, in [0, 1] (0 is only valid as an edge kernel).

    Examples
    --------
    >>> Constant(1.0)({}, {})
    array(1.)
    """

    def __init__(self, c: float = 1.0, c_bounds: Bounds = "fixed") -> None:
        c = _as_float(c, "Constant(c)")
        if not (0.0 <= c <= 1.0):
            raise KernelRangeError(f"Constant(c) needs 0 <= c <= 1, got c={c}")
        if 0.0 < c < 1e-30:
            raise KernelRangeError(f"Constant(c) must be 0 or at least 1e-30, got c={c}")
        self.c = c
        self.c_bounds = _check_bounds(c_bounds, "Constant(c)", 0.0, 1.0)
        self.fields = ()

    def __call__(self, x, y):
        return np.asarray(self.c, dtype=np.float64)

    def gradient(self, x, y):
        return [np.asarray(1.0)]

    def c_expr(self, lhs, rhs, par=None):
        return self._par(par)(0)

    def c_grad(self, lhs, rhs, par=None):
        return ["1.0f"]

    @property
    def hyperparameters(self):
        return (Hyperparameter("c", self.c, self.c_bounds),)

    def with_values(self, values):
        (c,) = values
        return Constant(float(c), self.c_bounds)

    def device_values(self):
        return [self.c]

    @property
    def range(self):
        return Range(self.c, self.c)

    def __repr__(self):
        return f"Constant({self.c!r})"


class KroneckerDelta(BaseKernel):
    """k(a, b) = 1 if a == b else h, on label field ``field``.

    Examples
    --------
    >>> import numpy as np
    >>> KroneckerDelta(0.5, "label")({"label": np.array([1, 2])}, {"label": np.array([1, 1])})
    array([1. , 0.5])
    """

    def __init__(self, h: float, field: str, h_bounds: Bounds = (1e-3, 1.0)) -> None:
        h = _as_float(h, f"KroneckerDelta(h, {field!r})")
        if not (0.0 <= h <= 1.0):
            raise KernelRangeError(f"KroneckerDelta(h, '{field}') needs 0 <= h <= 1, got h={h}")
        if 0.0 < h < 1e-30:
            raise KernelRangeError(f"KroneckerDelta(h, '{field}') needs h = 0 or h >= 1e-30, got h={h}")
        if not isinstance(field, str) or not field:
            raise ParameterTypeError("KroneckerDelta: field must be a non-empty label field name")
        self.h = h
        self.field = field
        self.h_bounds = _check_bounds(h_bounds, f"KroneckerDelta(h, {field!r})", 0.0, 1.0)
        self.fields = (field,)

    def __call__(self, x, y):
        return np.where(np.asarray(x[self.field]) == np.asarray(y[self.field]), 1.0, self.h)

    def gradient(self, x, y):
        return [np.where(np.asarray(x[self.field]) == np.asarray(y[self.field]), 0.0, 1.0)]

    def c_expr(self, lhs, rhs, par=None):
        return f"(({lhs(self.field)} == {rhs(self.field)}) ? 1.0f : {self._par(par)(0)})"

    def c_grad(self, lhs, rhs, par=None):
        return [f"(({lhs(self.field)} == {rhs(self.field)}) ? 0.0f : 1.0f)"]

    @property
    def hyperparameters(self):
        return (Hyperparameter("h", self.h, self.h_bounds),)

    def with_values(self, values):
        (h,) = values
        return KroneckerDelta(float(h), self.field, self.h_bounds)

    def device_values(self):
        return [self.h]

    @property
    def range(self):
        return Range(self.h, 1.0)

    def __repr__(self):
        return f"KroneckerDelta({self.h!r}, {self.field!r})"


class SquareExponential(BaseKernel):
    """k(a, b) = exp(-(a - b)^2 / (2 l^2)) on the numeric label field ``field``.

    Examples
    --------
    >>> import numpy as np
    >>> SquareExponential(1.0, "length")({"length": np.array([1.0])}, {"length": np.array([2.0])})
    array([0.60653066])
    """

    #: Length scales are kept where float32 on the device can represent 1/l^3 and l^2.
    LENGTH_SCALE_RANGE = (1e-6, 1e6)

    def __init__(self, length_scale: float, field: str, length_scale_bounds: Bounds = (1e-2, 1e2)) -> None:
        ls = _as_float(length_scale, f"SquareExponential(length_scale, {field!r})")
        lo, hi = self.LENGTH_SCALE_RANGE
        if not (lo <= ls <= hi):
            raise KernelRangeError(
                f"SquareExponential(length_scale, '{field}') needs {lo:g} <= length_scale <= {hi:g}, got {ls}"
            )
        if not isinstance(field, str) or not field:
            raise ParameterTypeError("SquareExponential: field must be a non-empty label field name")
        self.length_scale = ls
        self.field = field
        self.length_scale_bounds = _check_bounds(
            length_scale_bounds, f"SquareExponential(length_scale, {field!r})", lo, hi
        )
        self.fields = (field,)

    def _d2(self, x, y):
        d = np.asarray(x[self.field], dtype=np.float64) - np.asarray(y[self.field], dtype=np.float64)
        return d * d

    def __call__(self, x, y):
        return np.exp(-0.5 * self._d2(x, y) / (self.length_scale**2))

    def gradient(self, x, y):
        d2 = self._d2(x, y)
        return [np.exp(-0.5 * d2 / self.length_scale**2) * d2 / self.length_scale**3]

    def _diff(self, lhs, rhs):
        a, b = f"(float)({lhs(self.field)})", f"(float)({rhs(self.field)})"
        return f"({a} - {b}) * ({a} - {b})"

    def c_expr(self, lhs, rhs, par=None):
        # exp(-d^2 / (2 l^2)) = exp2(g d^2) with g = -log2(e) / (2 l^2) (device value 0): one
        # MUFU.EX2 (mgk_ex2, mgkflow/gpu/mgk_common.cuh) instead of expf's range reduction; the
        # float32 rounding of the argument is the same either way.
        return f"mgk_ex2({self._par(par)(0)} * {self._diff(lhs, rhs)})"

    def c_grad(self, lhs, rhs, par=None):
        # dk/dl = k d^2 / l^3 (device value 1 = 1 / l^3)
        return [f"({self.c_expr(lhs, rhs, par)} * {self._diff(lhs, rhs)} * {self._par(par)(1)})"]

    @property
    def hyperparameters(self):
        return (Hyperparameter("length_scale", self.length_scale, self.length_scale_bounds),)

    def with_values(self, values):
        (ls,) = values
        return SquareExponential(float(ls), self.field, self.length_scale_bounds)

    def device_values(self):
        return [-0.5 * math.log2(math.e) / self.length_scale**2, 1.0 / self.length_scale**3]

    @property
    def range(self):
        return Range(0.0, 1.0, lo_open=True)

    def __repr__(self):
        return f"SquareExponential({self.length_scale!r}, {self.field!r})"


class _Composite(BaseKernel):
    """Kernels combined term by term (:class:`Product`, :class:`Sum`): nested ones of the same
    kind are flattened; hyperparameters and device values are the children's, in order."""

    def __init__(self, *kernels: BaseKernel) -> None:
        name = type(self).__name__
        flat: list[BaseKernel] = []
        for k in kernels:
            if not isinstance(k, BaseKernel):
                raise ParameterTypeError(f"{name}: {k!r} is not a kernel")
            flat.extend(k.kernels if isinstance(k, type(self)) else [k])
        if not flat:
            raise ParameterError(f"{name} needs at least one kernel")
        self.kernels = tuple(flat)
        self.fields = tuple(dict.fromkeys(f for k in flat for f in k.fields))

    def _offsets(self) -> list[int]:
        out, o = [], 0
        for k in self.kernels:
            out.append(o)
            o += k.n_device_values
        return out

    def _child_par(self, par, i):
        base = self._par(par)
        off = self._offsets()[i]
        return lambda j: base(off + j)

    @property
    def hyperparameters(self):
        return tuple(h.renamed(str(i)) for i, k in enumerate(self.kernels) for h in k.hyperparameters)

    def with_values(self, values):
        values = list(values)
        if len(values) != len(self.hyperparameters):
            raise ParameterError(f"{self!r} has {len(self.hyperparameters)} hyperparameters, got {len(values)} values")
        out, o = [], 0
        for k in self.kernels:
            n = len(k.hyperparameters)
            out.append(k.with_values(values[o : o + n]))
            o += n
        return type(self)(*out)

    def device_values(self):
        return [v for k in self.kernels for v in k.device_values()]


class Product(_Composite):
    """Tensor product of kernels: k(a, b) = k1(a, b) * k2(a, b) * ...

    Usually built with ``*``: ``KroneckerDelta(0.5, "element") * KroneckerDelta(0.5, "charge")``.
    """

    def __call__(self, x, y):
        out = self.kernels[0](x, y)
        for k in self.kernels[1:]:
            out = out * k(x, y)
        return out

    def gradient(self, x, y):
        vals = [k(x, y) for k in self.kernels]
        out = []
        for i, k in enumerate(self.kernels):
            rest = np.asarray(1.0)
            for j, v in enumerate(vals):
                if j != i:
                    rest = rest * v
            out.extend(g * rest for g in k.gradient(x, y))
        return out

    def c_expr(self, lhs, rhs, par=None):
        return " * ".join(k.c_expr(lhs, rhs, self._child_par(par, i)) for i, k in enumerate(self.kernels))

    def c_grad(self, lhs, rhs, par=None):
        vals = [k.c_expr(lhs, rhs, self._child_par(par, i)) for i, k in enumerate(self.kernels)]
        out = []
        for i, k in enumerate(self.kernels):
            rest = [v for j, v in enumerate(vals) if j != i]
            out.extend(" * ".join([f"({g})", *rest]) for g in k.c_grad(lhs, rhs, self._child_par(par, i)))
        return out

    @property
    def range(self):
        r = self.kernels[0].range
        for k in self.kernels[1:]:
            r = r * k.range
        return r

    def __repr__(self):
        return " * ".join(repr(k) for k in self.kernels)


class Sum(_Composite):
    """Sum of kernels. Valid for the graph kernel only where the total stays in range,
    e.g. ``0.5 * k1 + 0.5 * k2``."""

    def __call__(self, x, y):
        out = self.kernels[0](x, y)
        for k in self.kernels[1:]:
            out = out + k(x, y)
        return out

    def gradient(self, x, y):
        return [g for k in self.kernels for g in k.gradient(x, y)]

    def c_expr(self, lhs, rhs, par=None):
        return "(" + " + ".join(k.c_expr(lhs, rhs, self._child_par(par, i)) for i, k in enumerate(self.kernels)) + ")"

    def c_grad(self, lhs, rhs, par=None):
        return [g for i, k in enumerate(self.kernels) for g in k.c_grad(lhs, rhs, self._child_par(par, i))]

    @property
    def range(self):
        r = self.kernels[0].range
        for k in self.kernels[1:]:
            r = r + k.range
        return r

    def __repr__(self):
        return "(" + " + ".join(repr(k) for k in self.kernels) + ")"


def tensor_product(*kernels: BaseKernel) -> Product:
    """Product kernel over several label fields (same as chaining ``*``).

    Examples
    --------
    >>> tensor_product(KroneckerDelta(0.5, "element"), KroneckerDelta(0.8, "charge")).fields
    ('element', 'charge')
    """
    return Product(*kernels)


def check_node_kernel(kernel: BaseKernel) -> BaseKernel:
    """Raise :class:`KernelRangeError` unless the kernel's values lie in (0, 1]."""
    if not isinstance(kernel, BaseKernel):
        raise ParameterTypeError(f"node_kernel must be a kernel from mgkflow.kernels, got {kernel!r}")
    r = kernel.range
    if r.hi > 1.0 or r.lo < 0.0 or (r.lo == 0.0 and not r.lo_open):
        raise KernelRangeError(
            f"node kernel {kernel!r} takes values in {r}; the marginalized graph kernel "
            "needs node kernel values in (0, 1]"
        )
    return kernel


def check_edge_kernel(kernel: BaseKernel) -> BaseKernel:
    """Raise :class:`KernelRangeError` unless the kernel's values lie in [0, 1]."""
    if not isinstance(kernel, BaseKernel):
        raise ParameterTypeError(f"edge_kernel must be a kernel from mgkflow.kernels, got {kernel!r}")
    r = kernel.range
    if r.hi > 1.0 or r.lo < 0.0:
        raise KernelRangeError(
            f"edge kernel {kernel!r} takes values in {r}; the marginalized graph kernel "
            "needs edge kernel values in [0, 1]"
        )
    return kernel


# ---------------------------------------------------------------------- more base kernels
class RationalQuadratic(BaseKernel):
    """k(a, b) = (1 + (a - b)^2 / (2 alpha l^2))^(-alpha) on the numeric label field ``field``.

    A scale mixture of square exponentials: small ``alpha`` gives heavy tails, and
    ``alpha -> inf`` tends to ``SquareExponential(l)``. Values lie in (0, 1].

    Parameters
    ----------
    length_scale, alpha : float
        Positive, in [1e-6, 1e6].
    field : str
        Numeric label field.
    length_scale_bounds, alpha_bounds : (float, float) or "fixed"

    Examples
    --------
    >>> import numpy as np
    >>> k = RationalQuadratic(1.0, 1.0, "length")
    >>> k({"length": np.array([1.0, 1.0])}, {"length": np.array([1.0, 3.0])})
    array([1.        , 0.33333333])
    >>> [h.name for h in k.hyperparameters]
    ['length_scale', 'alpha']
    """

    RANGE = (1e-6, 1e6)

    def __init__(
        self,
        length_scale: float,
        alpha: float,
        field: str,
        length_scale_bounds: Bounds = (1e-2, 1e2),
        alpha_bounds: Bounds = (1e-2, 1e2),
    ) -> None:
        lo, hi = self.RANGE
        who = f"RationalQuadratic(length_scale, alpha, {field!r})"
        ls = _as_float(length_scale, who)
        al = _as_float(alpha, who)
        for name, v in (("length_scale", ls), ("alpha", al)):
            if not (lo <= v <= hi):
                raise KernelRangeError(f"{who} needs {lo:g} <= {name} <= {hi:g}, got {name}={v}")
        _check_field(field, "RationalQuadratic")
        self.length_scale = ls
        self.alpha = al
        self.field = field
        self.length_scale_bounds = _check_bounds(length_scale_bounds, f"{who} length_scale", lo, hi)
        self.alpha_bounds = _check_bounds(alpha_bounds, f"{who} alpha", lo, hi)
        self.fields = (field,)

    def _x(self, x, y):
        # x = d^2 / (2 alpha l^2) >= 0
        d = _numeric(x, self.field, self) - _numeric(y, self.field, self)
        return d * d / (2.0 * self.alpha * self.length_scale**2)

    def __call__(self, x, y):
        return np.exp(-self.alpha * np.log1p(self._x(x, y)))

    def gradient(self, x, y):
        u = self._x(x, y)
        k = np.exp(-self.alpha * np.log1p(u))
        # dk/dl = 2 alpha u k / ((1 + u) l);  dk/dalpha = k (u / (1 + u) - log(1 + u))
        return [2.0 * self.alpha * u * k / ((1.0 + u) * self.length_scale), k * (u / (1.0 + u) - np.log1p(u))]

    def _u(self, lhs, rhs, p):
        a, b = f"(float)({lhs(self.field)})", f"(float)({rhs(self.field)})"
        return f"({p(0)} * ({a} - {b}) * ({a} - {b}))"

    def c_expr(self, lhs, rhs, par=None):
        # device values: 0 = 1 / (2 alpha l^2), 1 = alpha, 2 = 2 alpha / l
        p = self._par(par)
        return f"expf(-({p(1)}) * log1pf({self._u(lhs, rhs, p)}))"

    def c_grad(self, lhs, rhs, par=None):
        p = self._par(par)
        u = self._u(lhs, rhs, p)
        k = self.c_expr(lhs, rhs, p)
        return [
            f"({p(2)} * {u} * {k} / (1.0f + {u}))",
            f"({k} * ({u} / (1.0f + {u}) - log1pf({u})))",
        ]

    @property
    def hyperparameters(self):
        return (
            Hyperparameter("length_scale", self.length_scale, self.length_scale_bounds),
            Hyperparameter("alpha", self.alpha, self.alpha_bounds),
        )

    def with_values(self, values):
        ls, al = values
        return RationalQuadratic(float(ls), float(al), self.field, self.length_scale_bounds, self.alpha_bounds)

    def device_values(self):
        return [1.0 / (2.0 * self.alpha * self.length_scale**2), self.alpha, 2.0 * self.alpha / self.length_scale]

    @property
    def range(self):
        return Range(0.0, 1.0, lo_open=True)

    def __repr__(self):
        return f"RationalQuadratic({self.length_scale!r}, {self.alpha!r}, {self.field!r})"


def vector_component(field: str, k: int) -> str:
    """Name under which the C expressions ask for component ``k`` of vector field ``field``.

    Vector kernels write ``lhs(vector_component(field, k))`` for k = 0 .. dim - 1, i.e.
    ``lhs("coords[0]")``, ``lhs("coords[1]")``, ... The caller maps each name to a C
    expression of a scalar (for instance a register loaded from column k of the field's
    (size, dim) array). :func:`c_fields` lists every name a kernel's C expressions use.

    Examples
    --------
    >>> vector_component("coords", 2)
    'coords[2]'
    """
    _check_field(field, "vector_component")
    if isinstance(k, bool) or not isinstance(k, int | np.integer):
        raise ParameterTypeError(f"vector_component: k must be a whole number (a component index), got {k!r:.40}")
    if k < 0:
        raise ParameterError(f"vector_component: k must be a component index >= 0, got {k}")
    return f"{field}[{int(k)}]"


class VectorSquareExponential(BaseKernel):
    """k(a, b) = exp(-|a - b|^2 / (2 l^2)) on a vector label field of fixed dimension ``dim``.

    Vector fields are float arrays of shape (size, dim) (one row per node or edge), e.g.
    3-D coordinates or a descriptor. The numpy form reduces over the last axis (so
    ``x[field]`` of shape (n, 1, dim) against (1, m, dim) gives (n, m)); the C form
    unrolls the ``dim`` components, asking for them as ``lhs(vector_component(field, k))``.
    Values lie in (0, 1].

    Examples
    --------
    >>> import numpy as np
    >>> k = VectorSquareExponential(1.0, "xyz", dim=2)
    >>> k({"xyz": np.array([[0.0, 0.0], [1.0, 1.0]])}, {"xyz": np.array([[0.0, 0.0], [0.0, 0.0]])})
    array([1.        , 0.36787944])
    >>> k.c_expr(lambda f: "a." + f, lambda f: "b." + f).count("a.xyz[1]")
    2
    """

    LENGTH_SCALE_RANGE = SquareExponential.LENGTH_SCALE_RANGE

    def __init__(self, length_scale: float, field: str, dim: int, length_scale_bounds: Bounds = (1e-2, 1e2)) -> None:
        who = f"VectorSquareExponential(length_scale, {field!r})"
        ls = _as_float(length_scale, who)
        lo, hi = self.LENGTH_SCALE_RANGE
        if not (lo <= ls <= hi):
            raise KernelRangeError(f"{who} needs {lo:g} <= length_scale <= {hi:g}, got {ls}")
        _check_field(field, "VectorSquareExponential")
        self.length_scale = ls
        self.field = field
        self.dim = _check_dim(dim, "VectorSquareExponential")
        self.length_scale_bounds = _check_bounds(length_scale_bounds, who, lo, hi)
        self.fields = (field,)

    def _d2(self, x, y):
        d = _vector(x, self.field, self.dim, self) - _vector(y, self.field, self.dim, self)
        return np.sum(d * d, axis=-1)

    def __call__(self, x, y):
        return np.exp(-0.5 * self._d2(x, y) / self.length_scale**2)

    def gradient(self, x, y):
        d2 = self._d2(x, y)
        return [np.exp(-0.5 * d2 / self.length_scale**2) * d2 / self.length_scale**3]

    def _d2_c(self, lhs, rhs):
        terms = []
        for k in range(self.dim):
            a = f"(float)({lhs(vector_component(self.field, k))})"
            b = f"(float)({rhs(vector_component(self.field, k))})"
            terms.append(f"({a} - {b}) * ({a} - {b})")
        return "(" + " + ".join(terms) + ")"

    def c_expr(self, lhs, rhs, par=None):
        # same device values as SquareExponential: 0 = -log2(e) / (2 l^2), 1 = 1 / l^3
        return f"mgk_ex2({self._par(par)(0)} * {self._d2_c(lhs, rhs)})"

    def c_grad(self, lhs, rhs, par=None):
        return [f"({self.c_expr(lhs, rhs, par)} * {self._d2_c(lhs, rhs)} * {self._par(par)(1)})"]

    @property
    def hyperparameters(self):
        return (Hyperparameter("length_scale", self.length_scale, self.length_scale_bounds),)

    def with_values(self, values):
        (ls,) = values
        return VectorSquareExponential(float(ls), self.field, self.dim, self.length_scale_bounds)

    def device_values(self):
        return [-0.5 * math.log2(math.e) / self.length_scale**2, 1.0 / self.length_scale**3]

    @property
    def range(self):
        return Range(0.0, 1.0, lo_open=True)

    def __repr__(self):
        return f"VectorSquareExponential({self.length_scale!r}, {self.field!r}, dim={self.dim})"


class CosineSimilarity(BaseKernel):
    """k(a, b) = a·b / (|a| |b|) on a vector field of non-negative entries (values in [0, 1]).

    Vector fields as in :class:`VectorSquareExponential`. A zero vector has similarity 0
    with everything, itself included (the feature map a / |a| extended by 0 -> 0, so the
    kernel stays positive semi-definite). Negative entries are rejected when evaluated in
    numpy (they would leave [0, 1]); the C form clamps to [0, 1] against rounding only.
    No hyperparameters. As a node kernel (values must be > 0) mix it with a constant,
    e.g. ``0.5 * Constant(1.0) + 0.5 * CosineSimilarity("fp", dim=8)``.

    Examples
    --------
    >>> import numpy as np
    >>> k = CosineSimilarity("fp", dim=2)
    >>> k({"fp": np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])}, {"fp": np.array([[0.0, 2.0]])})
    array([0.        , 0.70710678, 0.        ])
    >>> str(k.range)
    '[0, 1]'
    """

    def __init__(self, field: str, dim: int) -> None:
        _check_field(field, "CosineSimilarity")
        self.field = field
        self.dim = _check_dim(dim, "CosineSimilarity")
        self.fields = (field,)

    def __call__(self, x, y):
        a = _vector(x, self.field, self.dim, self)
        b = _vector(y, self.field, self.dim, self)
        for v in (a, b):
            if np.any(v < 0):
                raise GraphError(f"{self!r}: vector label field '{self.field}' has negative entries")
        na = np.sqrt(np.sum(a * a, axis=-1))
        nb = np.sqrt(np.sum(b * b, axis=-1))
        den = na * nb
        with np.errstate(invalid="ignore", divide="ignore"):
            cos = np.where(den > 0, np.sum(a * b, axis=-1) / np.where(den > 0, den, 1.0), 0.0)
        return np.minimum(cos, 1.0)

    def gradient(self, x, y):
        return []

    def _sum(self, f):
        return "(" + " + ".join(f(k) for k in range(self.dim)) + ")"

    def c_expr(self, lhs, rhs, par=None):
        def comp(side, k):
            return f"(float)({side(vector_component(self.field, k))})"

        dot = self._sum(lambda k: f"{comp(lhs, k)} * {comp(rhs, k)}")
        n2 = f"({self._sum(lambda k: f'{comp(lhs, k)} * {comp(lhs, k)}')} * " + (
            f"{self._sum(lambda k: f'{comp(rhs, k)} * {comp(rhs, k)}')})"
        )
        return f"(({n2} > 0.0f) ? fminf({dot} / sqrtf({n2}), 1.0f) : 0.0f)"

    def c_grad(self, lhs, rhs, par=None):
        return []

    @property
    def hyperparameters(self):
        return ()

    def with_values(self, values):
        if len(list(values)):
            raise ParameterError(f"{self!r} has no hyperparameters, got {list(values)}")
        return CosineSimilarity(self.field, self.dim)

    def device_values(self):
        return []

    @property
    def range(self):
        return Range(0.0, 1.0)

    def __repr__(self):
        return f"CosineSimilarity({self.field!r}, dim={self.dim})"


class MinMax(BaseKernel):
    """k(a, b) = (h + sum_k min(a_k, b_k)) / (h + sum_k max(a_k, b_k)) on a vector field of
    non-negative entries, e.g. counts.

    A min-max (Ruzicka, or weighted Tanimoto/Jaccard) similarity of multisets stored as count
    vectors of dimension ``dim`` (say the numbers of C, N and O neighbours of an atom in an
    (n_nodes, 3) field ``"neighbours"``), smoothed by ``h > 0``: values lie in (0, 1], k(a, a) = 1,
    and two zero vectors have similarity 1. The min-max kernel is positive semi-definite on
    non-negative vectors, and adding the constant ``h`` to its numerator and denominator keeps it
    so: it is the min-max kernel of the vectors extended by one component ``h`` (the same for
    every vector). Small ``h`` makes it close to the plain min-max similarity, large ``h`` pushes
    every value towards 1.

    Vector fields as in :class:`VectorSquareExponential`. Negative entries are rejected when
    evaluated in numpy (they would leave (0, 1]); the C form does not check them.
    ``gradient`` gives dk/dh = sum_k |a_k - b_k| / (h + sum_k max(a_k, b_k))^2.

    Parameters
    ----------
    h : float
        Positive, in [1e-6, 1e6].
    field : str
        The vector label field.
    dim : int
        Its dimension.
    h_bounds : (float, float) or "fixed"
        Search bounds of ``h``, within [1e-6, 1e6].

    Examples
    --------
    >>> import numpy as np
    >>> k = MinMax(1.0, "neighbours", dim=3)
    >>> a = {"neighbours": np.array([[2, 1, 0], [0, 0, 0]])}
    >>> b = {"neighbours": np.array([[1, 1, 1], [0, 0, 0]])}
    >>> k(a, b)  # (1 + 2) / (1 + 4) and (1 + 0) / (1 + 0)
    array([0.6, 1. ])
    >>> [round(float(g), 6) for g in k.gradient(a, b)[0]]  # 2 / 5**2
    [0.08, 0.0]
    >>> str(k.range), [h.name for h in k.hyperparameters]
    ('(0, 1]', ['h'])
    """

    H_RANGE = (1e-6, 1e6)

    def __init__(self, h: float, field: str, dim: int, h_bounds: Bounds = (1e-2, 1e2)) -> None:
        who = f"MinMax(h, {field!r})"
        hv = _as_float(h, who)
        lo, hi = self.H_RANGE
        if not (lo <= hv <= hi):
            raise KernelRangeError(f"{who} needs {lo:g} <= h <= {hi:g}, got h={hv}")
        _check_field(field, "MinMax")
        self.h = hv
        self.field = field
        self.dim = _check_dim(dim, "MinMax")
        self.h_bounds = _check_bounds(h_bounds, who, lo, hi)
        self.fields = (field,)

    def _sums(self, x, y):
        """(sum_k min(a_k, b_k), sum_k |a_k - b_k|), broadcast over the leading axes."""
        a = _vector(x, self.field, self.dim, self)
        b = _vector(y, self.field, self.dim, self)
        for v in (a, b):
            if np.any(v < 0):
                raise GraphError(f"{self!r}: vector label field '{self.field}' has negative entries")
        return np.sum(np.minimum(a, b), axis=-1), np.sum(np.abs(a - b), axis=-1)

    def __call__(self, x, y):
        s_min, s_diff = self._sums(x, y)
        # sum max = sum min + sum |a - b| (max = min + |a - b| per component)
        return (self.h + s_min) / (self.h + s_min + s_diff)

    def gradient(self, x, y):
        s_min, s_diff = self._sums(x, y)
        den = self.h + s_min + s_diff
        return [s_diff / (den * den)]

    def _sum_c(self, lhs, rhs, fn):
        terms = []
        for k in range(self.dim):
            a = f"(float)({lhs(vector_component(self.field, k))})"
            b = f"(float)({rhs(vector_component(self.field, k))})"
            terms.append(fn(a, b))
        return "(" + " + ".join(terms) + ")"

    def c_expr(self, lhs, rhs, par=None):
        # device value 0 = h; min <= max per component and float sums round monotonically, so the
        # quotient stays <= 1 in float32 too
        h = self._par(par)(0)
        s_min = self._sum_c(lhs, rhs, lambda a, b: f"fminf({a}, {b})")
        s_max = self._sum_c(lhs, rhs, lambda a, b: f"fmaxf({a}, {b})")
        return f"(({h} + {s_min}) / ({h} + {s_max}))"

    def c_grad(self, lhs, rhs, par=None):
        # dk/dh = sum |a - b| / (h + sum max)^2
        h = self._par(par)(0)
        s_diff = self._sum_c(lhs, rhs, lambda a, b: f"fabsf({a} - {b})")
        s_max = self._sum_c(lhs, rhs, lambda a, b: f"fmaxf({a}, {b})")
        return [f"({s_diff} / (({h} + {s_max}) * ({h} + {s_max})))"]

    @property
    def hyperparameters(self):
        return (Hyperparameter("h", self.h, self.h_bounds),)

    def with_values(self, values):
        (h,) = values
        return MinMax(float(h), self.field, self.dim, self.h_bounds)

    def device_values(self):
        return [self.h]

    @property
    def range(self):
        return Range(0.0, 1.0, lo_open=True)

    def __repr__(self):
        return f"MinMax({self.h!r}, {self.field!r}, dim={self.dim})"


#: The base kernels that read a vector label field (attributes ``field`` and ``dim``).
_VECTOR_KERNELS = (VectorSquareExponential, CosineSimilarity, MinMax)


def _check_field(field: Any, kind: str) -> None:
    if not isinstance(field, str) or not field:
        raise ParameterTypeError(f"{kind}: field must be a non-empty label field name")


def _check_dim(dim: Any, kind: str) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or dim < 1:
        raise ParameterTypeError(f"{kind}: dim must be a positive int (the vector field's length), got {dim!r}")
    return int(dim)


def _numeric(x: Mapping[str, Any], field: str, kernel: BaseKernel) -> np.ndarray:
    try:
        a = np.asarray(x[field])
    except ValueError as exc:
        raise GraphError(f"{kernel!r}: label field '{field}' is ragged: {exc}") from exc
    if a.dtype.kind not in "biuf":
        raise GraphError(f"{kernel!r}: label field '{field}' must be numeric, got dtype {a.dtype}")
    return a.astype(np.float64, copy=False)


def _vector(x: Mapping[str, Any], field: str, dim: int, kernel: BaseKernel) -> np.ndarray:
    """The vector field ``field`` of ``x`` as float64 (..., dim), or a clear GraphError."""
    a = _numeric(x, field, kernel)
    if a.ndim == 0 or a.shape[-1] != dim:
        raise GraphError(
            f"{kernel!r}: vector label field '{field}' must have {dim} components in its last axis, got shape {a.shape}"
        )
    if not np.all(np.isfinite(a)):
        raise GraphError(f"{kernel!r}: vector label field '{field}' holds NaN or infinite values")
    return a


def vector_dims(kernel: BaseKernel) -> dict[str, int]:
    """The vector label fields a kernel reads, with their dimension (scalar fields are left out).

    Raises :class:`~mgkflow.errors.ParameterError` (a ``ValueError``) when one field is read with
    two different dimensions, or both as a vector and as a scalar, and
    :class:`~mgkflow.errors.ParameterTypeError` when ``kernel`` is not a kernel.

    Examples
    --------
    >>> vector_dims(KroneckerDelta(0.5, "element") * VectorSquareExponential(1.0, "xyz", dim=3))
    {'xyz': 3}
    """
    _check_kernel(kernel, "vector_dims")
    out: dict[str, int] = {}
    leaves = _leaves(kernel)
    for k in leaves:
        if isinstance(k, _VECTOR_KERNELS):
            if out.setdefault(k.field, k.dim) != k.dim:
                raise ParameterError(
                    f"vector label field '{k.field}' is read with dimensions {out[k.field]} and {k.dim}"
                )
    for k in leaves:
        if not isinstance(k, _VECTOR_KERNELS):
            for f in k.fields:
                if f in out:
                    raise ParameterError(
                        f"label field '{f}' is read both as a vector (by a vector kernel) and as a scalar by {k!r}"
                    )
    return out


def c_fields(kernel: BaseKernel) -> tuple[str, ...]:
    """Every name the kernel's C expressions pass to ``lhs``/``rhs``, in first-use order.

    A scalar field appears by its name, a vector field of dimension d as its components
    ``vector_component(field, 0) .. vector_component(field, d - 1)``.

    Examples
    --------
    >>> c_fields(KroneckerDelta(0.5, "element") * CosineSimilarity("fp", dim=2))
    ('element', 'fp[0]', 'fp[1]')
    """
    _check_kernel(kernel, "c_fields")
    dims = vector_dims(kernel)
    out: list[str] = []
    for f in kernel.fields:
        if f in dims:
            out.extend(vector_component(f, k) for k in range(dims[f]))
        else:
            out.append(f)
    return tuple(out)


def _check_kernel(kernel: Any, what: str) -> None:
    if not isinstance(kernel, BaseKernel):
        raise ParameterTypeError(f"{what}: kernel must be a kernel from mgkflow.kernels, got {kernel!r:.60}")


def _leaves(kernel: BaseKernel) -> list[BaseKernel]:
    if isinstance(kernel, Product | Sum):
        return [leaf for k in kernel.kernels for leaf in _leaves(k)]
    return [kernel]
