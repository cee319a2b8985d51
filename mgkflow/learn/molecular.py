"""Gaussian-process regression on molecules in one line: :class:`MolecularGPR` and :func:`molecular_kernel`.

The default model, chosen on five public sets (``python -m mgkflow.examples.property_benchmark``;
the numbers are in ``docs/learning.md``):

- molecules become graphs of their heavy atoms (:class:`~mgkflow.learn.MolecularFeaturizer`)
  with atom and bond fields, and RDKit's 2-D descriptors, standardized on the training set, as
  graph-level features;
- the covariance is ``C₁ · exp(γ₁ (K̂₁ − 1)) + C₂ · exp(γ₂ (K̂₂ − 1)) + C₃ · RBF(descriptors) + noise``.
  K̂₁ and K̂₂ are normalized marginalized graph kernels (Kronecker deltas of value h = 0.5 on each
  field, stop probability q = 0.2) over two views of the molecule (:data:`DEFAULT_VIEWS`): a
  coarse one (element, charge, aromaticity, hybridization, hydrogens; bond order and ring
  membership) and a fine one (the same, plus heavy degree, smallest ring size and the radius-1
  Morgan environment; bond aromaticity). The fit weighs them;
- the Cs, γs, the RBF length scale and the noise are fitted by the log marginal likelihood (or a
  leave-one-out objective). The graph kernels' own hyperparameters stay fixed by default, so each
  is computed once per fit (:class:`~mgkflow.learn.Cached`); ``fit_graph_kernel=True`` fits them
  too, at one graph-kernel evaluation per step.

Two options (off by default) extend each view's term: ``start_probabilities=True`` fits a start
probability per element (:class:`~mgkflow.learn.start_probability.StartProbabilities`: the graph
kernel's node-pair similarities are solved once, each step only contracts them), and
``size_kernel=True`` multiplies the term by an RBF kernel on the number of heavy atoms
(:class:`~mgkflow.learn.size_kernel.SizeKernel`, its length scale fitted).
A third, ``extensive=True``, adds to each view the unnormalized graph kernel times a fitted constant: a sum
over all pairs of atoms, so it grows with the molecules' sizes, as properties that add up over atoms and
groups do (logP, polar surface area, hydration free energy); the normalized kernels cannot tell a molecule
from two copies of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.gaussian_process.kernels import ConstantKernel, WhiteKernel

from ..errors import ParameterError, ParameterTypeError
from ..graph import Graph
from ..kernels import KroneckerDelta
from ..mgk import MarginalizedGraphKernel
from .cached import Cached
from .exp_similarity import ExpSimilarity
from .feature_kernel import FeatureKernel
from .featurize import (
    ATOM_FIELDS,
    BOND_FIELDS,
    DEFAULT_ATOM_FIELDS,
    DEFAULT_BOND_FIELDS,
    MolecularFeaturizer,
)
from .gpr import GraphGPR
from .lowrank import LowRankGPR
from .size_kernel import SizeKernel
from .start_probability import StartProbabilities

__all__ = ["MolecularGPR", "molecular_kernel", "DEFAULT_VIEWS"]

#: The graph kernels of the default covariance, one per view: (atom fields, bond fields).
#: A coarse view and a fine one; their sum beat either alone on FreeSolv, Lombardo and the
#: photoswitches (``docs/learning.md``).
DEFAULT_VIEWS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("element", "charge", "aromatic", "hybridization", "hydrogens"), ("bond_order", "in_ring")),
    (DEFAULT_ATOM_FIELDS, DEFAULT_BOND_FIELDS),
)


def _deltas(fields: Sequence[str], h: float, bounds: Any) -> Any:
    kernel = KroneckerDelta(h, fields[0], h_bounds=bounds)
    for f in fields[1:]:
        kernel = kernel * KroneckerDelta(h, f, h_bounds=bounds)
    return kernel


def _fraction(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating) or not 0 < value < 1:
        raise ParameterError(f"{name} must be a number in (0, 1), got {value!r:.60}")
    return float(value)


def _check_views(views: Any) -> tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]:
    """``views`` as a tuple of (atom fields, bond fields) pairs, or a clear error."""
    if isinstance(views, str) or not isinstance(views, Sequence) or not views:
        raise ParameterTypeError(
            f"views must be a non-empty sequence of (atom fields, bond fields) pairs, got {views!r:.60}"
        )
    out = []
    for view in views:
        if isinstance(view, str) or not isinstance(view, Sequence) or len(view) != 2:
            raise ParameterTypeError(f"each view must be a pair (atom fields, bond fields), got {view!r:.60}")
        pair = []
        for name, fields, known in (("atom fields", view[0], ATOM_FIELDS), ("bond fields", view[1], BOND_FIELDS)):
            if isinstance(fields, str) or not isinstance(fields, Sequence) or not fields:
                raise ParameterTypeError(
                    f"a view's {name} must be a non-empty sequence of field names, got {fields!r:.60}"
                )
            bad = [f for f in fields if f not in known or f == "neighbours"]
            if bad:
                raise ParameterError(f"{name} {bad!r:.60} cannot be compared by a delta; known: {', '.join(known)}")
            pair.append(tuple(fields))
        out.append((pair[0], pair[1]))
    return tuple(out)


def _union(views: Sequence[tuple[tuple[str, ...], tuple[str, ...]]], side: int) -> tuple[str, ...]:
    return tuple(dict.fromkeys(f for view in views for f in view[side]))


def molecular_kernel(
    views: Sequence[tuple[Sequence[str], Sequence[str]]] = DEFAULT_VIEWS,
    h: float = 0.5,
    q: float = 0.2,
    descriptors: bool = True,
    fit_graph_kernel: bool = False,
    backend: str = "auto",
    start_probabilities: bool = False,
    size_kernel: bool = False,
    extensive: bool = False,
) -> Any:
    """The default covariance of :class:`MolecularGPR`, a scikit-learn kernel over graphs.

    ``Σ_views [C · ExpSimilarity(normalized MGK) [· SizeKernel] [+ C · MGK]] [+ C · FeatureKernel(RBF)] + WhiteKernel``.

    Parameters
    ----------
    views : sequence of (atom fields, bond fields)
        One graph kernel per view, comparing those label fields (each by a Kronecker delta of
        value ``h``); :data:`DEFAULT_VIEWS` has a coarse and a fine view.
    h : float
        The deltas' value for unequal labels, in (0, 1).
    q : float
        The graph kernels' stop probability, in (0, 1).
    descriptors : bool
        Add the RBF kernel on the graphs' ``features`` (standardized descriptors).
    fit_graph_kernel : bool
        Leave the deltas' values and q free for the fit (bounds (0.05, 0.95) and (0.01, 0.9)).
    backend : str
        The graph kernels' backend (``"auto"``: the GPU when present, else the CPU).
    start_probabilities : bool
        Each view's graph kernel becomes ``StartProbabilities(mgk, field="element")``: a start
        probability per element (the 6 most frequent of the training set, the rest pooled in one
        class), fitted, instead of 1 for every atom (:class:`Cached`). Needs ``fit_graph_kernel=False``
        and the field ``element`` in the views; S takes N² · 49 float64 (N training molecules).
    size_kernel : bool
        Multiply each view's term by a :class:`SizeKernel` on the number of heavy atoms (its length
        scale fitted, from 10).
    extensive : bool
        Add to each view's term ``C · MGK``, the view's graph kernel unnormalized (its start probability 1
        on every atom, so a sum over all pairs of atoms of the two molecules), computed once per fit
        (:class:`Cached`) beside the normalized one: for properties that grow with the molecule. Twice
        the graph-kernel work of a fit. Default False.

    Examples
    --------
    >>> k = molecular_kernel(descriptors=False)
    >>> [h.name for h in k.hyperparameters if not h.fixed]  # doctest: +NORMALIZE_WHITESPACE
    ['k1__k1__k1__constant_value', 'k1__k1__k2__gamma', 'k1__k2__k1__constant_value',
     'k1__k2__k2__gamma', 'k2__noise_level']
    >>> k = molecular_kernel(views=DEFAULT_VIEWS[:1], descriptors=False, start_probabilities=True, size_kernel=True)
    >>> [(h.name, h.n_elements) for h in k.hyperparameters if not h.fixed]  # doctest: +NORMALIZE_WHITESPACE
    [('k1__k1__k1__constant_value', 1), ('k1__k1__k2__gamma', 1), ('k1__k1__k2__kernel__p', 6),
     ('k1__k2__length_scale', 1), ('k2__noise_level', 1)]
    >>> k = molecular_kernel(views=DEFAULT_VIEWS[:1], descriptors=False, extensive=True)
    >>> [h.name for h in k.hyperparameters if not h.fixed]  # doctest: +NORMALIZE_WHITESPACE
    ['k1__k1__k1__constant_value', 'k1__k1__k2__gamma', 'k1__k2__k1__constant_value', 'k2__noise_level']
    """
    h, q = _fraction(h, "h"), _fraction(q, "q")
    flags = (descriptors, fit_graph_kernel, start_probabilities, size_kernel, extensive)
    if not all(_is_bool(v) for v in flags):
        raise ParameterTypeError(_FLAGS_TEXT)
    views = _check_views(views)
    if start_probabilities:
        if fit_graph_kernel:
            raise ParameterError(
                "start_probabilities=True needs fit_graph_kernel=False: the start probabilities are fitted on "
                "a graph kernel whose own hyperparameters stay fixed"
            )
        if "element" not in _union(views, 0):
            raise ParameterError("start_probabilities=True needs the atom field 'element' in the views")
    bounds = (0.05, 0.95) if fit_graph_kernel else "fixed"
    kernel = None
    for atom_fields, bond_fields in views:

        def mgk(normalize: bool, atoms: tuple[str, ...] = atom_fields, bonds: tuple[str, ...] = bond_fields) -> Any:
            return MarginalizedGraphKernel(
                _deltas(atoms, h, bounds),
                _deltas(bonds, h, bounds),
                q=q,
                q_bounds=(0.01, 0.9) if fit_graph_kernel else "fixed",
                backend=backend,
                normalize=normalize,
            )

        graph = StartProbabilities(mgk(True), field="element") if start_probabilities else Cached(mgk(True))
        term = ConstantKernel(1.0, (1e-3, 1e3)) * ExpSimilarity(graph, gamma=5.0)
        if size_kernel:
            term = term * SizeKernel()
        if extensive:
            term = term + ConstantKernel(0.1, (1e-5, 1e3)) * Cached(mgk(False))
        kernel = term if kernel is None else kernel + term
    if descriptors:
        kernel = kernel + ConstantKernel(1.0, (1e-3, 1e3)) * FeatureKernel()
    return kernel + WhiteKernel(0.1, (1e-6, 10.0))


_FLAGS_TEXT = "descriptors, fit_graph_kernel, start_probabilities, size_kernel and extensive must be True or False"


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool | np.bool_)


class MolecularGPR(RegressorMixin, BaseEstimator):
    """Gaussian-process regression on molecules given as SMILES, RDKit molecules or graphs.

    Parameters
    ----------
    descriptors : bool
        Use RDKit's 2-D descriptors beside the graph kernel (default True).
    views : sequence of (atom fields, bond fields)
        One graph kernel per view (:data:`DEFAULT_VIEWS`: a coarse and a fine view); field
        choices in :data:`mgkflow.learn.featurize.ATOM_FIELDS` and ``BOND_FIELDS``.
    h, q : float
        The graph kernel's delta value and stop probability (see :func:`molecular_kernel`).
    fit_graph_kernel : bool
        Fit h (per field) and q too; one graph-kernel evaluation (with gradient) per optimizer step.
    start_probabilities : bool
        Fit a start probability per element in each view's graph kernel (see
        :func:`molecular_kernel`); the graph kernel's node-pair similarities are solved once per
        fit, N² · 49 float64 of memory per view for N training molecules. Default False.
    size_kernel : bool
        Multiply each view's term by an RBF kernel on the number of heavy atoms. Default False.
    extensive : bool
        Add each view's unnormalized graph kernel, times a fitted constant (see :func:`molecular_kernel`):
        for properties that grow with the molecule. Twice the graph-kernel work. Default False.
    kernel : scikit-learn kernel over graphs, optional
        Replaces the default covariance (the featurizer still builds the graphs).
    objective : {"lml", "loo", "loo_mse"}
        What the hyperparameter fit maximizes (see :class:`GraphGPR`).
    n_restarts : int
        Further optimizer runs from random starting points.
    n_landmarks : int or None
        None: the exact Gaussian process (:class:`GraphGPR`). m: a low-rank one on m landmarks
        chosen by pivoted Cholesky (:class:`~mgkflow.learn.LowRankGPR`, DTC): its fit and
        predictions cost n·m kernel entries instead of n², for training sets of 10⁴ molecules and
        more. ``objective`` must then be ``"lml"`` (the approximation's evidence).
    n_neighbors : int
        With ``n_landmarks``: 0 (default) predicts with the low-rank posterior; k > 0 adds to each
        prediction the exact GP of the training residuals on its k nearest training molecules
        (:class:`~mgkflow.learn.LowRankGPR`'s local correction: one kernel matrix of k + 1 molecules
        per prediction, best on a GPU; for labels the low-rank GP underfits, docs/learning.md).
    hyperparameter_sample : int or None
        With ``n_landmarks``: fit the hyperparameters by the exact GP on this many training molecules drawn at
        random, then the low-rank posterior on all of them (:class:`~mgkflow.learn.LowRankGPR`'s
        ``hyperparameter_sample``); None (default): by the low-rank evidence on all.
    max_iter : int
        L-BFGS-B iterations per run.
    backend : str
        Where the graph kernel runs: ``"auto"`` (GPU when present), ``"cpu"``, ``"gpu"``.
    random_state : int or None
        Seed of the restarts.
    verbose : int
        1: a progress line per optimizer step on stderr; 0: silent.
    n_jobs : int or None
        Processes that featurize the molecules (:class:`~mgkflow.learn.MolecularFeaturizer`;
        None: 1, -1: every core). The model does not depend on it.

    Attributes
    ----------
    featurizer_ : MolecularFeaturizer
    gpr_ : GraphGPR or LowRankGPR
    kernel_ : the fitted covariance

    Examples
    --------
    >>> model = MolecularGPR(verbose=0)  # doctest: +SKIP
    >>> model.fit(["CCO", "CCCO", "CCCCO", "c1ccccc1", "Cc1ccccc1"], [1.0, 1.5, 2.0, 3.0, 3.4])  # doctest: +SKIP
    >>> mean, std = model.predict(["CCCCCO"], return_std=True)  # doctest: +SKIP
    """

    def __init__(
        self,
        descriptors: bool = True,
        views: Sequence[tuple[Sequence[str], Sequence[str]]] = DEFAULT_VIEWS,
        h: float = 0.5,
        q: float = 0.2,
        fit_graph_kernel: bool = False,
        kernel: Any = None,
        objective: str = "lml",
        n_restarts: int = 1,
        n_landmarks: int | None = None,
        n_neighbors: int = 0,
        hyperparameter_sample: int | None = None,
        max_iter: int = 100,
        backend: str = "auto",
        random_state: int | None = 0,
        verbose: int = 1,
        start_probabilities: bool = False,
        size_kernel: bool = False,
        n_jobs: int | None = None,
        extensive: bool = False,
    ) -> None:
        self.descriptors = descriptors
        self.views = views
        self.h = h
        self.q = q
        self.fit_graph_kernel = fit_graph_kernel
        self.kernel = kernel
        self.objective = objective
        self.n_restarts = n_restarts
        self.n_landmarks = n_landmarks
        self.n_neighbors = n_neighbors
        self.hyperparameter_sample = hyperparameter_sample
        self.max_iter = max_iter
        self.backend = backend
        self.random_state = random_state
        self.verbose = verbose
        self.start_probabilities = start_probabilities
        self.size_kernel = size_kernel
        self.n_jobs = n_jobs
        self.extensive = extensive

    def __setstate__(self, state: dict) -> None:
        state.setdefault("n_jobs", None)  # a model pickled before n_jobs existed
        state.setdefault("n_neighbors", 0)  # ... or before n_neighbors
        state.setdefault("hyperparameter_sample", None)  # ... or before hyperparameter_sample
        state.setdefault("extensive", False)  # ... or before extensive
        super().__setstate__(state)

    def _graphs(self, X: Any, fit: bool) -> list[Graph]:
        if hasattr(X, "tolist") and not isinstance(X, np.ndarray):  # a pandas Series or Index
            X = X.tolist()
        if isinstance(X, str) or not isinstance(X, Sequence | np.ndarray):
            raise ParameterTypeError(
                f"X must be a sequence of SMILES strings, RDKit molecules or Graphs, got {type(X).__name__}"
            )
        items = list(X)
        if not items:
            raise ParameterError("X holds no molecule")
        graphs = [isinstance(x, Graph) for x in items]
        if all(graphs):
            if self.descriptors and any(g.features is None for g in items):
                raise ParameterError(
                    "graphs given to a MolecularGPR with descriptors=True need features: build them with "
                    "MolecularFeaturizer, pass SMILES or RDKit molecules instead, or set descriptors=False"
                )
            if fit and hasattr(self, "featurizer_"):
                del self.featurizer_  # fitted on SMILES before: predict must not featurize with it
            return items
        if any(graphs):
            raise ParameterTypeError("X mixes Graphs with SMILES strings or molecules; give one kind")
        if not fit and not hasattr(self, "featurizer_"):
            raise ParameterTypeError("this MolecularGPR was fitted on Graphs: predict takes Graphs too")
        if fit:
            views = _check_views(self.views)
            self.featurizer_ = MolecularFeaturizer(
                atom_fields=_union(views, 0), bond_fields=_union(views, 1), descriptors=self.descriptors,
                n_jobs=self.n_jobs,
            )
            return self.featurizer_.fit_transform(items)
        return self.featurizer_.transform(items)

    def _check(self) -> None:
        flags = (self.descriptors, self.fit_graph_kernel, self.start_probabilities, self.size_kernel, self.extensive)
        if not all(_is_bool(v) for v in flags):
            raise ParameterTypeError(_FLAGS_TEXT)
        _check_views(self.views)
        if not isinstance(self.objective, str):
            raise ParameterTypeError(f"objective must be a string, got {self.objective!r:.60}")
        v = self.verbose
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 0:
            raise ParameterError(f"verbose must be an integer >= 0, got {v!r:.60}")
        r = self.random_state
        if not (r is None or isinstance(r, np.random.Generator | np.random.SeedSequence)) and (
            isinstance(r, bool) or not isinstance(r, int | np.integer) or r < 0
        ):
            raise ParameterError(f"random_state must be None or an integer >= 0, got {r!r:.60}")
        m = self.n_landmarks
        if m is not None:
            if isinstance(m, bool) or not isinstance(m, int | np.integer) or m < 1:
                raise ParameterError(f"n_landmarks must be None or an integer >= 1, got {m!r:.60}")
            if self.objective != "lml":
                raise ParameterError(
                    f"objective={self.objective!r} needs the exact GP: a low-rank fit (n_landmarks={m}) maximizes "
                    "its own evidence; use objective='lml' or n_landmarks=None"
                )
        k = self.n_neighbors
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 0:
            raise ParameterError(f"n_neighbors must be an integer >= 0, got {k!r:.60}")
        if k and m is None:
            raise ParameterError(
                f"n_neighbors={k} corrects a low-rank GP's predictions: give n_landmarks too (the exact GP needs none)"
            )
        hs = self.hyperparameter_sample
        if hs is not None:
            if isinstance(hs, bool) or not isinstance(hs, int | np.integer) or hs < 2:
                raise ParameterError(f"hyperparameter_sample must be None or an integer >= 2, got {hs!r:.60}")
            if m is None:
                raise ParameterError(
                    f"hyperparameter_sample={hs} fits a low-rank GP's hyperparameters on a sample: give n_landmarks "
                    "too (the exact GP fits on all molecules)"
                )
        k = self.kernel
        if k is not None and (not callable(k) or not hasattr(k, "diag") or not hasattr(k, "theta")):
            raise ParameterTypeError(f"kernel must be None or a scikit-learn kernel, got {type(k).__name__}")

    def fit(self, X: Sequence[Any], y: Any) -> MolecularGPR:
        """Featurize X, fit the covariance's hyperparameters and the posterior to (X, y)."""
        self._check()
        try:
            y = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError):
            raise ParameterTypeError(f"y must be numbers, one per molecule, got {y!r:.60}") from None
        kernel = self.kernel
        if kernel is None:
            kernel = molecular_kernel(
                self.views,
                self.h,
                self.q,
                self.descriptors,
                self.fit_graph_kernel,
                self.backend,
                self.start_probabilities,
                self.size_kernel,
                self.extensive,
            )
        graphs = self._graphs(X, fit=True)
        common = dict(n_restarts=self.n_restarts, max_iter=self.max_iter, random_state=self.random_state,
                      verbose=self.verbose)  # fmt: skip
        if self.n_landmarks is None:
            self.gpr_ = GraphGPR(kernel, objective=self.objective, **common).fit(graphs, y)
        else:
            self.gpr_ = LowRankGPR(
                kernel, n_landmarks=int(self.n_landmarks), n_neighbors=int(self.n_neighbors),
                hyperparameter_sample=None if self.hyperparameter_sample is None else int(self.hyperparameter_sample),
                **common
            ).fit(graphs, y)
        self.kernel_ = self.gpr_.kernel_
        return self

    def featurize_checked(self, smiles: Sequence[str]) -> tuple[list[Graph], list[str]]:
        """The graphs :meth:`featurize` makes of the SMILES that make one, and an error text per SMILES ('' where
        a graph was made), each parsed once on the featurizer's ``n_jobs`` processes
        (:meth:`MolecularFeaturizer.transform_checked`): a screen's chunk. A model fitted on Graphs has no
        featurizer: ParameterTypeError, as :meth:`predict` of SMILES."""
        if not hasattr(self, "gpr_"):
            raise ParameterError("this MolecularGPR is not fitted yet: call fit(X, y) first")
        if not hasattr(self, "featurizer_"):
            raise ParameterTypeError("this MolecularGPR was fitted on Graphs: predict takes Graphs too")
        return self.featurizer_.transform_checked(smiles)

    def featurize(self, X: Sequence[Any]) -> list[Graph]:
        """The graphs (with their descriptors) that :meth:`predict` builds from X, SMILES strings or RDKit
        molecules; :meth:`predict` takes them as they are. A screen featurizes its next chunk this way while
        it predicts the current one (:func:`~mgkflow.learn.screen`)."""
        if not hasattr(self, "gpr_"):
            raise ParameterError("this MolecularGPR is not fitted yet: call fit(X, y) first")
        return self._graphs(X, fit=False)

    def predict(self, X: Sequence[Any], return_std: bool = False):
        """Posterior mean at X (and its standard deviation with ``return_std=True``)."""
        if not hasattr(self, "gpr_"):
            raise ParameterError("this MolecularGPR is not fitted yet: call fit(X, y) first")
        if not _is_bool(return_std):
            raise ParameterTypeError(f"return_std must be True or False, got {return_std!r:.60}")
        return self.gpr_.predict(self._graphs(X, fit=False), return_std=return_std)
