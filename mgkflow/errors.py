"""Exceptions raised by mgkflow.

Every exception class defined here derives from :class:`MgkflowError`, and
also from the built-in class its meaning fits (``ValueError`` for bad input,
``RuntimeError`` for a solver failure, ``OSError`` for unusable files), so
``except ValueError`` keeps working and ``except MgkflowError`` catches them all.
"""

from __future__ import annotations

import os

__all__ = [
    "MgkflowError",
    "GraphError",
    "FileFormatError",
    "OutputPathError",
    "ParameterError",
    "ParameterTypeError",
    "KernelRangeError",
    "ConvergenceError",
    "ConvergenceWarning",
    "BackendUnavailableError",
    "ProblemTooLargeError",
    "ModelFileError",
    "ModelVersionError",
    "describe_graph",
]


class MgkflowError(Exception):
    """Base class of every exception mgkflow raises on purpose."""


class GraphError(MgkflowError, ValueError):
    """A graph is not valid input for the marginalized graph kernel.

    The message names the graph (its index in the call and/or its title) and,
    where one is at fault, the label field.
    """


class FileFormatError(GraphError):
    """A graph file cannot be read: the message names the file and, where known, the line.

    Attributes
    ----------
    path : str
        The file (or directory) at fault.
    line : int or None
        1-based line number (or record number, where the message says so).

    Examples
    --------
    >>> str(FileFormatError("bad SMILES 'C1CC'", path="my.smi", line=3))
    "my.smi, line 3: bad SMILES 'C1CC'"
    """

    def __init__(self, message: str, path: str | os.PathLike | None = None, line: int | None = None) -> None:
        self.path = None if path is None else os.fspath(path)
        self.line = line
        where = ""
        if self.path is not None:
            where = self.path + (f", line {line}" if line is not None else "") + ": "
        super().__init__(where + message)


class OutputPathError(MgkflowError, OSError):
    """An output path cannot be written (a directory, under a file, too long, no permission)."""


class ParameterError(MgkflowError, ValueError):
    """A parameter (q, p, a kernel value, an option) has a value mgkflow cannot use; the message names it."""


class ParameterTypeError(MgkflowError, TypeError):
    """A parameter has a type mgkflow cannot use (e.g. text where a number is needed); the message names it."""


class KernelRangeError(MgkflowError, ValueError):
    """A base kernel can leave the range the marginalized graph kernel needs."""


class ConvergenceError(MgkflowError, RuntimeError):
    """The conjugate-gradient solver did not reach its tolerance for some pairs."""


class BackendUnavailableError(MgkflowError, RuntimeError):
    """A backend was asked for that this machine cannot run (e.g. ``backend="gpu"`` without
    PyCUDA or a CUDA device); the message says what to install or which backend to use."""


class ProblemTooLargeError(MgkflowError, MemoryError):
    """A pair is too large for the chosen backend (the exact backend's edge-pair cap, or memory the
    CPU backend could not allocate); the message names the pair and what to do (e.g. ``backend="cpu"``).

    A ``MemoryError`` too, so ``except MemoryError`` keeps working.
    """


class ModelFileError(MgkflowError, ValueError):
    """A file given as a model is not an mgkflow model file, or is damaged (see :mod:`mgkflow.learn.model_file`);
    the message names the file and what is wrong with it."""


class ModelVersionError(ModelFileError):
    """A model file was written by another major.minor version of mgkflow or of the model-file format; the
    message names both versions (refit the model with this version)."""


class ConvergenceWarning(RuntimeWarning):
    """Warning issued (instead of :class:`ConvergenceError`) for non-converged pairs."""


def describe_graph(index: int | None, title: str | None) -> str:
    """Return ``"graph 3 ('benzene')"`` style text naming a graph in messages."""
    parts = []
    if index is not None:
        parts.append(f"graph {index}")
    if title:
        parts.append(f"'{title}'" if index is None else f"('{title}')")
    if not parts:
        return "graph"
    if index is None:
        return "graph " + parts[0]
    return " ".join(parts)
