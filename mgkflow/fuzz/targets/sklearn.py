"""Fuzz target: the kernel as scikit-learn uses it.

Property ``sklearn``: legal graphs and hyperparameters over wide ranges, and one *action* per case:

======================= ====================================================================
action                  what is checked
======================= ====================================================================
``gpr``                 ``GaussianProcessRegressor(kernel)`` fit (optimizer on or off) and
                        ``predict(return_std=True)``: finite
``krr``, ``svc``        ``KernelRidge`` / ``SVC`` on the precomputed K: finite predictions
``clone``               :func:`sklearn.base.clone`: equal parameters, the same K
``clone_with_theta``    θ moved (maybe past a bound): a finite PSD K or an mgkflow error
``pickle``              a pickled and loaded kernel (after a call) gives the same K
``gradient``            ∂K/∂log θ against central differences of K
``diag``                ``diag(X)`` equals the diagonal of ``K(X)``
``normalize``           ``K(X, normalize=True)``: unit diagonal, equal to K / √(d dᵀ), and
                        :class:`mgkflow.learn.Normalized` agrees
``compose``             ``ConstantKernel * kernel + WhiteKernel`` (or ``kernel + kernel``):
                        K, its gradient and its diagonal consistent with the parts
======================= ====================================================================

Every case must end in a finite PSD K (and the check of its action) or an mgkflow error; a
mismatch is a bad outcome named after the check (``gradient-mismatch@evaluation``, ...).

Examples
--------
>>> case = {"graphs": [{"n": 2, "edges": [(0, 1, 1.0)], "node_labels": {"a": [0, 1]},
...                     "edge_labels": {"e": [1.0]}}] * 2,
...         "node_kernel": ("delta", "a", 0.5), "edge_kernel": ("const", 1.0), "q": 0.1, "action": "diag"}
>>> run_sklearn_case(case).kind
'result'
"""

from __future__ import annotations

import pickle
import warnings
from typing import Any

import numpy as np

from ..checks import Outcome, Property, _py, check_gram, guarded
from ..inputs import _graph, _kernel, graph_specs

__all__ = ["run_sklearn_case", "strategies", "PROPERTIES", "ACTIONS"]

#: The actions of a case (see the module docstring).
ACTIONS = ("gpr", "krr", "svc", "clone", "clone_with_theta", "pickle", "gradient", "diag", "normalize", "compose")


def _close(a: Any, b: Any, rtol: float) -> bool:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    scale = max(float(np.abs(b).max(initial=0.0)), float(np.abs(a).max(initial=0.0)), 1e-300)
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= rtol * scale))


def _gradient_check(kern: Any, X: list, K: np.ndarray, dK: np.ndarray) -> Outcome | None:
    """Compare dK (log-space) with central differences of K, dimension by dimension."""
    theta, bounds = kern.theta, kern.bounds
    h = 1e-4
    for d in range(theta.size):
        if not (bounds[d, 0] + 2 * h < theta[d] < bounds[d, 1] - 2 * h):
            continue  # a step would cross a bound (and be snapped back)
        up, down = theta.copy(), theta.copy()
        up[d] += h
        down[d] -= h
        fd = (kern.clone_with_theta(up)(X) - kern.clone_with_theta(down)(X)) / (2 * h)
        scale = max(float(np.abs(K).max()), 1e-300)
        err = float(np.abs(fd - dK[:, :, d]).max())
        if err > 1e-5 * scale + 1e-3 * float(np.abs(fd).max()):
            name = [hp.name for hp in kern.hyperparameters if not hp.fixed][d]
            return Outcome("bad", "gradient-mismatch@evaluation", f"d/dlog {name}: max |dK - fd| = {err:.3g} "
                           f"(|K| {scale:.3g}, |fd| {float(np.abs(fd).max()):.3g})")
    return None


def _act(action: str, kern: Any, X: list, spec: dict[str, Any]) -> Outcome:
    from sklearn.base import clone

    y = np.asarray(spec.get("y") or [float(i % 3) for i in range(len(X))], dtype=float)[: len(X)]
    if y.size < len(X):
        y = np.resize(y, len(X))
    if action == "gpr":
        from sklearn.gaussian_process import GaussianProcessRegressor

        opt = "fmin_l_bfgs_b" if spec.get("optimize") else None
        gpr = GaussianProcessRegressor(kernel=kern, alpha=1e-2, optimizer=opt, normalize_y=True, random_state=0)
        mean, std = gpr.fit(X, y).predict(X, return_std=True)
        if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(std))):
            return Outcome("bad", "nan", f"GPR predictions {mean!r:.100} {std!r:.100}")
        return check_gram(gpr.kernel_(X))
    K = kern(X)
    out = check_gram(K)
    if out.kind != "result":
        return out
    if action == "krr":
        from sklearn.kernel_ridge import KernelRidge

        pred = KernelRidge(kernel="precomputed", alpha=0.1).fit(K, y).predict(K)
        return out if np.all(np.isfinite(pred)) else Outcome("bad", "nan", f"KRR predictions {pred!r:.150}")
    if action == "svc":
        from sklearn.svm import SVC

        labels = (np.arange(len(X)) % 2) if len(X) > 1 else None
        if labels is None:
            return out
        pred = SVC(kernel="precomputed").fit(K, labels).predict(K)
        return out if set(pred) <= {0, 1} else Outcome("bad", "svc", repr(pred))
    if action == "clone":
        c = clone(kern)
        # base kernels compare by repr (they define no __eq__); the kernel itself by __eq__
        same = c == kern and {k: repr(v) for k, v in c.get_params().items()} == {
            k: repr(v) for k, v in kern.get_params().items()}
        if not same or not _close(c(X), K, 1e-12):
            return Outcome("bad", "clone-mismatch@mgk.py", f"{c!r} vs {kern!r}")
        return out
    if action == "clone_with_theta":
        shift = np.resize(np.asarray(spec.get("shift") or [0.0], dtype=float), kern.theta.size)
        return check_gram(kern.clone_with_theta(kern.theta + shift)(X))
    if action == "pickle":
        k2 = pickle.loads(pickle.dumps(kern))
        if not _close(k2(X), K, 1e-12) or k2 != kern:
            return Outcome("bad", "pickle-mismatch@mgk.py", f"{k2!r} vs {kern!r}")
        return out
    if action == "gradient":
        K2, dK = kern(X, eval_gradient=True)
        if dK.shape != (len(X), len(X), kern.n_dims) or not np.all(np.isfinite(dK)):
            return Outcome("bad", "gradient-shape@mgk.py", f"dK shape {dK.shape}, n_dims {kern.n_dims}")
        if not _close(K2, K, 1e-9):
            return Outcome("bad", "gradient-K-mismatch@evaluation", f"max diff {np.abs(K2 - K).max():.3g}")
        return _gradient_check(kern, X, K, dK) or out
    if action == "diag":
        d = kern.diag(X)
        return out if _close(d, np.diag(K), 1e-8) else Outcome(
            "bad", "diag-mismatch@evaluation", f"diag {d!r:.100} vs {np.diag(K)!r:.100}")
    if action == "normalize":
        from mgkflow.learn import Normalized

        Kn = kern(X, normalize=True)
        s = np.sqrt(np.diag(K))
        if not (_close(np.diag(Kn), np.ones(len(X)), 1e-9) and _close(Kn, K / np.outer(s, s), 1e-8)
                and _close(Normalized(kern)(X), Kn, 1e-8)):
            return Outcome("bad", "normalize-mismatch@evaluation", f"{Kn!r:.200}")
        return check_gram(Kn)
    if action == "compose":
        from sklearn.gaussian_process.kernels import ConstantKernel, WhiteKernel

        comp = ConstantKernel(2.0) * kern + WhiteKernel(0.1) if spec.get("optimize") else kern + kern
        Kc, dKc = comp(X, eval_gradient=True)
        expect = 2.0 * K + 0.1 * np.eye(len(X)) if spec.get("optimize") else 2.0 * K
        if not _close(Kc, expect, 1e-9) or not _close(comp.diag(X), np.diag(expect), 1e-8):
            return Outcome("bad", "compose-mismatch@mgk.py", f"{Kc!r:.200}")
        if dKc.shape != (len(X), len(X), comp.n_dims) or not np.all(np.isfinite(dKc)):
            return Outcome("bad", "gradient-shape@mgk.py", f"composed dK shape {dKc.shape}, n_dims {comp.n_dims}")
        return check_gram(Kc)
    raise AssertionError(f"unknown action {action!r}")


def run_sklearn_case(spec: dict[str, Any]) -> Outcome:
    """Build the kernel of ``spec`` (as :func:`~mgkflow.fuzz.targets.api.run_api_case`) and run its action."""

    def go() -> Outcome:
        from sklearn.exceptions import ConvergenceWarning as SkConvergenceWarning

        from mgkflow import MarginalizedGraphKernel

        X = [_graph(g) for g in spec["graphs"]]
        kern = MarginalizedGraphKernel(
            node_kernel=_kernel(spec.get("node_kernel")), edge_kernel=_kernel(spec.get("edge_kernel")),
            q=spec.get("q", 0.05), p=spec.get("p", 1.0), backend="cpu", normalize=spec.get("normalized", False),
        )
        with warnings.catch_warnings():
            # scikit-learn's optimizer notes (a hyperparameter at its bound, lbfgs stopping) are not mgkflow's
            warnings.filterwarnings("ignore", category=SkConvergenceWarning)
            return _act(spec["action"], kern, X, spec)

    return guarded(go)


def strategies(st: Any) -> dict[str, Any]:
    """``sklearn`` cases: legal graphs and hyperparameters (some at or past their bounds) and an action."""
    graph = graph_specs(st)
    h = st.one_of(st.floats(0.002, 1.0), st.sampled_from([0.001, 1.0, 0.5]))
    node = st.one_of(
        st.tuples(st.just("delta"), st.just("a"), h),
        st.tuples(st.just("const"), st.floats(0.01, 1.0)),
        st.tuples(st.just("prod"), st.tuples(st.just("delta"), st.just("a"), h),
                  st.tuples(st.just("const"), st.floats(0.1, 1.0))),
    )
    edge = st.one_of(
        st.tuples(st.just("sqexp"), st.just("e"), st.one_of(st.floats(0.02, 50.0), st.sampled_from([0.01, 100.0]))),
        st.tuples(st.just("const"), st.floats(0.01, 1.0)),
        st.tuples(st.just("delta"), st.just("e"), h),
    )
    case = st.fixed_dictionaries(
        {"graphs": st.lists(graph(valid=True), min_size=1, max_size=4), "node_kernel": node, "edge_kernel": edge,
         "q": st.one_of(st.floats(0.01, 0.5), st.sampled_from([1e-4, 0.5, 0.05])),
         "action": st.sampled_from(ACTIONS)},
        optional={"p": st.floats(0.1, 10.0), "normalized": st.booleans(), "optimize": st.booleans(),
                  "y": st.lists(st.floats(-10, 10), min_size=1, max_size=4),
                  "shift": st.lists(st.one_of(st.floats(-3, 3), st.sampled_from([50.0, -50.0, 0.0])), min_size=1,
                                    max_size=3)},
    )
    return {"sklearn": case}


PROPERTIES = (Property("sklearn", "sklearn", run_sklearn_case, lambda c: f"run_sklearn_case({_py(c)})"),)
