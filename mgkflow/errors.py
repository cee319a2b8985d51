"""Exceptions raised by mgkflow."""

from __future__ import annotations


class GraphError(ValueError):
    """A graph is not valid input for the marginalized graph kernel.

    The message names the graph (its index in the call and/or its title) and,
    where one is at fault, the label field.
    """


class KernelRangeError(ValueError):
    """A base kernel can leave the range the marginalized graph kernel needs."""


class ConvergenceError(RuntimeError):
    """The conjugate-gradient solver did not reach its tolerance for some pairs."""


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
