"""Progress reporting: a tqdm bar on a terminal, plain log lines elsewhere.

:func:`progress_bar` is what every progress bar of mgkflow goes through (kernel
solves, tiled Gram blocks, ``mgkflow compare``). On a terminal (or in a Jupyter
kernel) it is a ``tqdm.auto`` bar. Without one (stderr redirected to a file, a
batch job's log) tqdm's carriage-return updates would fill multi-kilobyte
lines, so it writes plain lines instead: at most one every
:data:`LINE_INTERVAL` seconds, plus the last, each with done/total, the rate
and the time left.

Examples
--------
>>> import io
>>> buf = io.StringIO()
>>> bar = progress_bar(3, desc="blocks", unit="block", file=buf)
>>> for _ in range(3):
...     bar.update(1)
>>> bar.close()
>>> print(buf.getvalue().split(",")[0])
blocks: 3/3 blocks (100%)
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import Any, TextIO

__all__ = ["LINE_INTERVAL", "LineProgress", "progress_bar", "is_interactive"]

#: Seconds between two plain progress lines (the last line is always written).
LINE_INTERVAL = 10.0


def is_interactive(file: Any) -> bool:
    """True when ``file`` is a terminal or the output stream of a Jupyter kernel (where tqdm draws a widget)."""
    if type(file).__module__.startswith("ipykernel"):
        return True
    isatty = getattr(file, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (ValueError, OSError):  # a closed stream
        return False


def _duration(seconds: float) -> str:
    """``"42 s"``, ``"3 min 05 s"``, ``"2 h 07 min"``."""
    s = int(round(max(seconds, 0.0)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {(s % 3600) // 60:02d} min"


class LineProgress:
    """A progress reporter that writes plain lines, for logs: the subset of tqdm's interface mgkflow uses.

    Parameters
    ----------
    total : int
        Steps in all.
    desc : str
        Prefix of each line.
    unit : str
        Name of a step (``"pair"``, ``"block"``).
    initial : int
        Steps already done (a resumed run); not counted in the rate.
    file : text stream
        Where lines go (default ``sys.stderr``, looked up when writing).
    interval : float
        At most one line per ``interval`` seconds, plus the last.
    """

    def __init__(
        self, total: int, desc: str = "", unit: str = "it", initial: int = 0, file: TextIO | None = None,
        interval: float = LINE_INTERVAL,
    ) -> None:  # fmt: skip
        self.total = int(total)
        self.desc = desc
        self.unit = unit
        self.n = int(initial)
        self.initial = int(initial)
        self.file = file
        self.interval = float(interval)
        self.postfix = ""
        self.t0 = time.monotonic()
        self.last_line = self.t0
        self.n_written = -1
        self.closed = False

    def _out(self) -> TextIO:
        return self.file if self.file is not None else sys.stderr

    def line(self) -> str:
        """The progress line as of now."""
        elapsed = time.monotonic() - self.t0
        done = self.n - self.initial
        unit = self.unit if self.total == 1 else self.unit + "s"
        text = f"{self.desc}: " if self.desc else ""
        text += f"{self.n}/{self.total} {unit}"
        if self.total > 0:
            text += f" ({100.0 * self.n / self.total:.0f}%)"
        if done > 0 and elapsed > 0:
            rate = done / elapsed
            if rate >= 1000:
                text += f", {rate:,.0f} {self.unit}/s"
            else:
                text += f", {rate:.3g} {self.unit}/s" if rate >= 1 else f", {1.0 / rate:.3g} s/{self.unit}"
            if self.n < self.total:
                text += f", {_duration((self.total - self.n) / rate)} left"
        text += f", {_duration(elapsed)} elapsed"
        if self.postfix:
            text += f", {self.postfix}"
        return text

    def _write(self) -> None:
        print(self.line(), file=self._out(), flush=True)
        self.last_line = time.monotonic()
        self.n_written = self.n

    def update(self, n: int = 1) -> None:
        """Count ``n`` more steps; write a line when the last one is ``interval`` seconds old."""
        self.n += int(n)
        if not self.closed and time.monotonic() - self.last_line >= self.interval:
            self._write()

    def set_postfix(self, refresh: bool = True, **kwargs: Any) -> None:
        """Append ``key=value`` pairs to the next lines."""
        self.postfix = ", ".join(f"{k}={v}" for k, v in kwargs.items())

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        """Change the prefix of the next lines."""
        self.desc = desc or ""

    def write(self, text: str, file: TextIO | None = None) -> None:
        """Write ``text`` as a line of its own."""
        print(text, file=file if file is not None else self._out(), flush=True)

    @contextlib.contextmanager
    def external_write_mode(self, file: TextIO | None = None, nolock: bool = False) -> Iterator[None]:
        """Others may write while inside (nothing to clear: lines are never redrawn)."""
        yield

    def close(self) -> None:
        """Write the last line (unless the last line written already shows the final count)."""
        if self.closed:
            return
        self.closed = True
        if self.n != self.n_written:
            self._write()

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def progress_bar(
    total: int, desc: str = "", unit: str = "it", initial: int = 0, file: TextIO | None = None
) -> Any:
    """A progress bar over ``total`` steps: tqdm on a terminal, :class:`LineProgress` elsewhere.

    Parameters
    ----------
    total : int
        Steps in all.
    desc : str
        Label (tqdm's ``desc``, the plain lines' prefix).
    unit : str
        Name of a step.
    initial : int
        Steps already done (a resumed run).
    file : text stream, optional
        Where it goes (default ``sys.stderr``).

    Returns
    -------
    tqdm.tqdm or LineProgress
        Either supports ``update``, ``set_postfix``, ``set_description``, ``write``,
        ``external_write_mode`` and ``close``.
    """
    stream = file if file is not None else sys.stderr
    if is_interactive(stream):
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, unit=unit, initial=initial, file=stream)
    return LineProgress(total, desc=desc, unit=unit, initial=initial, file=file)
