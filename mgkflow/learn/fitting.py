"""Fitting from a table (``mgkflow fit``): :func:`read_training_table` and the model builder :func:`build_model`.

:func:`read_training_table` reads SMILES and a numeric target from a CSV/SMILES file (layout as
:mod:`mgkflow.io.smiles`: header detection, the SMILES column found or named), checking every row:
a SMILES that RDKit cannot parse (or with no heavy atom), a malformed line, or a target that is not
a finite number is an error naming the file and line, or, with ``skip_invalid=True``, a row left
out and listed. :func:`build_model` is the one place that turns the command line's choices into an
estimator.
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FileFormatError, ParameterError, ParameterTypeError

__all__ = ["TrainingTable", "read_training_table", "build_model", "training_digest", "graph_kernel_progress"]


@dataclass(frozen=True)
class TrainingTable:
    """The usable rows of a training file.

    Attributes
    ----------
    smiles : list of str
    y : ndarray of float64
    lines : list of int
        The file line of each row (1-based).
    skipped : list of (int, str)
        (line, reason) of each row left out (``skip_invalid=True``).
    path : Path
    smiles_column, target : str
        The columns read.
    """

    smiles: list[str]
    y: np.ndarray
    lines: list[int]
    skipped: list[tuple[int, str]] = field(default_factory=list)
    path: Path = Path()
    smiles_column: str = ""
    target: str = ""

    def __len__(self) -> int:
        return len(self.smiles)


def training_digest(smiles: list[str], y: np.ndarray) -> str:
    """SHA-256 (hex) of the (SMILES, target) pairs, in order: the training set as a model file records it.

    Examples
    --------
    >>> training_digest(["CCO"], np.array([1.0]))[:12]
    '00cebc1dfd50'
    """
    h = hashlib.sha256()
    for s, v in zip(smiles, np.asarray(y, dtype=np.float64)):
        h.update(f"{s}\t{float(v)!r}\n".encode())
    return h.hexdigest()


def _target_value(text: str) -> float | None:
    try:
        v = float(text)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def read_training_table(
    path: str | os.PathLike,
    target: str,
    smiles_column: str | int | None = None,
    skip_invalid: bool = False,
) -> TrainingTable:
    """SMILES and target values of a training file, every row checked.

    Parameters
    ----------
    path : str or os.PathLike
        A CSV (or other SMILES table) with a header line naming the target column.
    target : str
        The column of the target values (numbers).
    smiles_column : str or int, optional
        The SMILES column (default: the column named like ``smiles``, else the first that holds SMILES).
    skip_invalid : bool
        Leave out rows whose SMILES is invalid or whose target is not a finite number (listed in
        ``skipped``) instead of stopping at the first.

    Returns
    -------
    TrainingTable

    Raises
    ------
    mgkflow.errors.FileFormatError
        A missing column (the message lists the columns), an invalid row (naming its line), fewer
        than two usable rows.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "train.csv"
    >>> _ = p.write_text("smiles,logp\\nCCO,-0.3\\nC1CC,1.0\\nc1ccccc1,2.1\\nCCN,n/a\\n")
    >>> t = read_training_table(p, "logp", skip_invalid=True)  # doctest: +SKIP
    >>> t.smiles, t.y.tolist(), [line for line, _ in t.skipped]  # doctest: +SKIP
    (['CCO', 'c1ccccc1'], [-0.3, 2.1], [3, 5])
    >>> read_training_table(p, "logp")  # doctest: +SKIP
    Traceback (most recent call last):
    ...
    mgkflow.errors.FileFormatError: .../train.csv, line 3: invalid SMILES 'C1CC': RDKit could not parse it (...)
    """
    from ..io.rdkit import require_rdkit
    from ..io.smiles_stream import open_smiles_table

    if not isinstance(target, str) or not target.strip():
        raise ParameterTypeError(f"target must be a column name, got {target!r:.60}")
    if not isinstance(skip_invalid, bool | np.bool_):
        raise ParameterTypeError(f"skip_invalid must be True or False, got {skip_invalid!r:.60}")
    table = open_smiles_table(path, smiles_column=smiles_column, header=True)
    t_col = table.column(target, "target")
    if t_col == table.smiles_index:
        raise ParameterError(f"the target column {target!r} is the SMILES column")
    Chem = require_rdkit()
    smiles: list[str] = []
    values: list[float] = []
    lines: list[int] = []
    skipped: list[tuple[int, str]] = []
    for rec in table.records():
        reason = rec.error
        if reason is None:
            mol = Chem.MolFromSmiles(rec.smiles)
            if mol is None:
                reason = f"invalid SMILES {rec.smiles!r:.80}: RDKit could not parse it"
            elif mol.GetNumHeavyAtoms() == 0:
                reason = f"SMILES {rec.smiles!r:.80} has no heavy atom"
        value = None
        if reason is None:
            text = rec.fields[t_col].strip()
            value = _target_value(text)
            if value is None:
                reason = f"target {target!r}: {text!r:.40} is not a finite number"
        if reason is not None:
            if not skip_invalid:
                raise FileFormatError(reason + " (--skip-invalid leaves such rows out)", path=table.path,
                                      line=rec.line)  # fmt: skip
            skipped.append((rec.line, reason))
            continue
        smiles.append(rec.smiles)
        values.append(float(value))
        lines.append(rec.line)
    if len(smiles) < 2:
        first = f"; first left out: line {skipped[0][0]}: {skipped[0][1]}" if skipped else ""
        raise FileFormatError(f"{len(smiles)} usable rows, a fit needs at least 2{first}", path=table.path)
    return TrainingTable(smiles, np.asarray(values, dtype=np.float64), lines, skipped, table.path,
                         table.smiles_name, target)  # fmt: skip


def graph_kernel_progress(kernel: Any, on: bool) -> int:
    """Switch the progress bar of every marginalized graph kernel inside a scikit-learn kernel; how many there are.

    Examples
    --------
    >>> from mgkflow.learn import molecular_kernel
    >>> graph_kernel_progress(molecular_kernel(), True)  # one per view
    2
    """
    from ..mgk import MarginalizedGraphKernel

    found = [kernel] if isinstance(kernel, MarginalizedGraphKernel) else []
    if hasattr(kernel, "get_params"):
        found += [v for v in kernel.get_params(deep=True).values() if isinstance(v, MarginalizedGraphKernel)]
    for k in found:
        k.progress = bool(on)
    return len(found)


def build_model(
    backend: str = "auto",
    descriptors: bool = True,
    restarts: int = 1,
    seed: int | None = 0,
    verbose: int = 1,
    low_rank: int | None = None,
    jobs: int | None = None,
    neighbors: int = 0,
    hyper_sample: int | None = None,
    extensive: bool = False,
) -> Any:
    """The estimator ``mgkflow fit`` fits: a :class:`~mgkflow.learn.MolecularGPR` with these choices.

    The one place where the command line's options become an estimator: another estimator with
    ``fit(smiles, y)`` and ``predict(smiles, return_std=True)`` (a low-rank one, say) is chosen here,
    and ``mgkflow fit``, the model file and ``mgkflow predict`` take it as they are.

    Parameters
    ----------
    backend : {"auto", "cpu", "gpu"}
        Where the graph kernel runs.
    descriptors : bool
        Use RDKit's 2-D descriptors beside the graph kernel.
    restarts : int
        Optimizer restarts beyond the first run (0: one run).
    seed : int or None
        Seed of the restarts.
    verbose : int
        1: a progress bar over the graph-kernel pairs and a progress line per optimizer step on stderr
        (:func:`graph_kernel_progress` switches the bar off again, e.g. before saving the model).
    low_rank : int or None
        A low-rank GP on this many landmarks (``MolecularGPR(n_landmarks=...)``); None: the exact GP.
    jobs : int or None
        Processes that featurize the molecules (``MolecularGPR(n_jobs=...)``; None: 1, -1: every core).
    neighbors : int
        With ``low_rank``: the local correction on this many nearest training molecules
        (``MolecularGPR(n_neighbors=...)``); 0: none.
    hyper_sample : int or None
        With ``low_rank``: the hyperparameters from the exact GP on this many training molecules drawn at
        random (``MolecularGPR(hyperparameter_sample=...)``); None: from the low-rank evidence on all.

    Examples
    --------
    >>> build_model(backend="cpu", restarts=0).n_restarts
    0
    """
    from .molecular import MolecularGPR, molecular_kernel

    if backend not in ("auto", "cpu", "gpu"):
        raise ParameterError(f"backend must be 'auto', 'cpu' or 'gpu', got {backend!r:.60}")
    if isinstance(restarts, bool) or not isinstance(restarts, int | np.integer) or restarts < 0:
        raise ParameterError(f"restarts must be a whole number >= 0, got {restarts!r:.60}")
    bad_rank = isinstance(low_rank, bool) or not isinstance(low_rank, int | np.integer) or low_rank < 1
    if low_rank is not None and bad_rank:
        raise ParameterError(f"low_rank must be None or a whole number >= 1, got {low_rank!r:.60}")
    if isinstance(neighbors, bool) or not isinstance(neighbors, int | np.integer) or neighbors < 0:
        raise ParameterError(f"neighbors must be a whole number >= 0, got {neighbors!r:.60}")
    if neighbors and low_rank is None:
        raise ParameterError("neighbors corrects a low-rank GP's predictions: give low_rank too")
    bad_sample = isinstance(hyper_sample, bool) or not isinstance(hyper_sample, int | np.integer) or hyper_sample < 2
    if hyper_sample is not None and bad_sample:
        raise ParameterError(f"hyper_sample must be None or a whole number >= 2, got {hyper_sample!r:.60}")
    if hyper_sample is not None and low_rank is None:
        raise ParameterError("hyper_sample fits a low-rank GP's hyperparameters on a sample: give low_rank too")
    if not isinstance(extensive, bool | np.bool_):
        raise ParameterError(f"extensive must be True or False, got {extensive!r:.60}")
    kernel = None
    if verbose:  # the default covariance, with the graph kernel's progress bar (the first Gram takes longest)
        kernel = molecular_kernel(descriptors=bool(descriptors), backend=backend, extensive=bool(extensive))
        graph_kernel_progress(kernel, True)
    return MolecularGPR(
        descriptors=descriptors, kernel=kernel, n_restarts=int(restarts), backend=backend, random_state=seed,
        verbose=verbose, n_landmarks=None if low_rank is None else int(low_rank), n_jobs=jobs,
        n_neighbors=int(neighbors), hyperparameter_sample=None if hyper_sample is None else int(hyper_sample),
        extensive=bool(extensive),
    )
