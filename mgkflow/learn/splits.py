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
    if not 2 <= folds <= n:
        raise ValueError(f"folds must lie in [2, {n}], got {folds}")
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
    split = np.asarray(labels)
    return np.flatnonzero(split == train), np.flatnonzero(split == test)
