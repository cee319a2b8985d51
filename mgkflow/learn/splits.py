"""Train/test splits: shuffled K-fold over several seeds, or a split given per sample."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from sklearn.model_selection import KFold

__all__ = ["kfold_splits", "labelled_split"]


def kfold_splits(n: int, folds: int, seeds: Iterable[int]) -> list[tuple[int, int, np.ndarray, np.ndarray]]:
    """``(seed, fold, train indices, test indices)`` of shuffled ``folds``-fold CV, for each seed.

    The folds of one seed are those of ``KFold(folds, shuffle=True, random_state=seed)`` on
    ``range(n)``: every index is in exactly one test fold per seed.

    Raises
    ------
    ValueError
        ``folds`` outside ``[2, n]``.

    Examples
    --------
    >>> [(s, k, te.tolist()) for s, k, _, te in kfold_splits(4, 2, seeds=[0])]
    [(0, 0, [2, 3]), (0, 1, [0, 1])]
    """
    from ..errors import ParameterError, ParameterTypeError
    from ..gram import _args

    n = _args.count(n, "n")
    folds = _args.count(folds, "folds")
    if not 2 <= folds <= n:
        raise ParameterError(f"folds must lie in [2, {n}], got {folds}")
    if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__iter__") or hasattr(seeds, "columns"):
        raise ParameterTypeError(f"seeds must be a sequence of integers, got {type(seeds).__name__}")
    seeds = [_args.count(s, "seed", hi=2**32 - 1) for s in seeds]
    out = []
    for seed in seeds:
        for k, (tr, te) in enumerate(KFold(folds, shuffle=True, random_state=seed).split(np.arange(n))):
            out.append((seed, k, tr, te))
    return out


def labelled_split(labels: Sequence[str], train: str = "train", test: str = "test") -> tuple[np.ndarray, np.ndarray]:
    """(train indices, test indices) of the samples labelled ``train`` and ``test`` (others are left out).

    Examples
    --------
    >>> tr, te = labelled_split(["train", "test", "train", "valid"])
    >>> tr.tolist(), te.tolist()
    ([0, 2], [1])
    """
    from ..errors import ParameterError, ParameterTypeError
    from ..gram import _args

    _args.text(train, "train")
    _args.text(test, "test")
    if isinstance(labels, (str, bytes)) or not hasattr(labels, "__len__"):
        raise ParameterTypeError(f"labels must be a sequence of strings, got {type(labels).__name__}")
    split = np.asarray(labels, dtype=object)
    if split.ndim != 1:
        raise ParameterError(f"labels must be one-dimensional, got shape {split.shape}")
    return np.flatnonzero(split == train), np.flatnonzero(split == test)
