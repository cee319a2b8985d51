"""Blocks of graph pairs: the unit of work, of storage (one Zarr chunk) and of resumption."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Block", "plan_blocks", "default_block_size"]


@dataclass(frozen=True)
class Block:
    """Rows ``r0:r1`` (graphs of X) by columns ``c0:c1`` (graphs of Y, or of X for a Gram matrix).

    ``bi, bj`` index the block in the grid (and the Zarr chunk it is stored in).
    ``symmetric`` marks a block of the Gram matrix of one set X: a diagonal block
    (``bi == bj``) solves only its upper triangle, and blocks below the diagonal are
    never planned.

    Examples
    --------
    >>> b = Block(0, 1, 0, 4, 4, 7, symmetric=True)
    >>> b.key, b.shape, b.n_pairs
    ('0.1', (4, 3), 12)
    >>> Block(1, 1, 4, 7, 4, 7, symmetric=True).n_pairs  # upper triangle with the diagonal
    6
    """

    bi: int
    bj: int
    r0: int
    r1: int
    c0: int
    c1: int
    symmetric: bool = False

    @property
    def key(self) -> str:
        """``"bi.bj"``: the block's name in done markers and progress records."""
        return f"{self.bi}.{self.bj}"

    @property
    def shape(self) -> tuple[int, int]:
        return (self.r1 - self.r0, self.c1 - self.c0)

    @property
    def diagonal(self) -> bool:
        """True for a diagonal block of a Gram matrix (solved as the Gram matrix of its graphs)."""
        return self.symmetric and self.bi == self.bj

    @property
    def n_pairs(self) -> int:
        """Distinct pairs solved for this block."""
        n, m = self.shape
        return n * (n + 1) // 2 if self.diagonal else n * m


def plan_blocks(n_rows: int, n_cols: int | None, block_size: int) -> list[Block]:
    """The blocks of an ``n_rows x n_cols`` kernel matrix, in row-major order.

    Parameters
    ----------
    n_rows : int
        Graphs in X.
    n_cols : int or None
        Graphs in Y; None for the Gram matrix of X (upper-triangle blocks only).
    block_size : int
        Graphs per block side (the last block of a row or column may be smaller).

    Examples
    --------
    >>> [b.key for b in plan_blocks(5, None, 2)]
    ['0.0', '0.1', '0.2', '1.1', '1.2', '2.2']
    >>> [b.key for b in plan_blocks(3, 5, 2)]
    ['0.0', '0.1', '0.2', '1.0', '1.1', '1.2']
    >>> sum(b.n_pairs for b in plan_blocks(5, None, 2)) == 5 * 6 // 2
    True
    """
    from ..errors import ParameterError
    from . import _args

    n_rows = _args.count(n_rows, "n_rows")
    n_cols = _args.count(n_cols, "n_cols", none=True)
    block_size = _args.count(block_size, "block_size", lo=1)
    symmetric = n_cols is None
    if -(-n_rows // block_size) * -(-(n_rows if symmetric else n_cols) // block_size) > 10**8:
        raise ParameterError(f"{n_rows} x {n_cols or n_rows} graphs in blocks of {block_size}: more than 10^8 blocks")
    m = n_rows if symmetric else n_cols
    nbr = -(-n_rows // block_size)
    nbc = -(-m // block_size)
    blocks = []
    for bi in range(nbr):
        for bj in range(bi if symmetric else 0, nbc):
            blocks.append(
                Block(
                    bi,
                    bj,
                    bi * block_size,
                    min((bi + 1) * block_size, n_rows),
                    bj * block_size,
                    min((bj + 1) * block_size, m),
                    symmetric,
                )
            )
    return blocks


def default_block_size(n_rows: int, n_cols: int | None, backend: str) -> int:
    """Block side used when none is given.

    A GPU block should hold millions of pairs to fill the device (2048 x 2048 = 4.2M
    pairs, 32 MiB of float64); on the CPU (about 10^3 pairs/s per core) blocks of
    128 x 128 keep the time lost to a kill under a minute. Never more than the matrix.

    Examples
    --------
    >>> default_block_size(100_000, None, "gpu"), default_block_size(50, None, "cpu")
    (2048, 50)
    """
    from . import _args

    n_rows = _args.count(n_rows, "n_rows")
    n_cols = _args.count(n_cols, "n_cols", none=True)
    side = 2048 if _args.text(backend, "backend") == "gpu" else 128
    return max(1, min(side, max(n_rows, n_rows if n_cols is None else n_cols)))
