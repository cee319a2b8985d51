"""Writing output files safely: checks before the work, atomic replace, plain-open() permissions."""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import OutputPathError, ParameterTypeError
from ._common import as_path

__all__ = ["atomic_write", "check_writable", "default_file_mode"]


def default_file_mode() -> int:
    """The mode a plain ``open(path, "w")`` gives a new file: ``0o666 & ~umask``.

    Examples
    --------
    >>> old = os.umask(0o022)
    >>> oct(default_file_mode())
    '0o644'
    >>> _ = os.umask(old)
    """
    status = Path("/proc/self/status")
    try:  # Linux: read the umask without changing it (thread-safe)
        for line in status.read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def _name_max(directory: Path) -> int:
    try:
        return os.pathconf(directory, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        return 255


def check_writable(path: Any, what: str = "output file") -> Path:
    """Check, before any work, that ``path`` can be written as a file; return it as a Path.

    Raises :class:`~mgkflow.errors.OutputPathError` (an OSError) with a clear
    message when ``path`` is a directory, lies under an existing file, has a
    name too long for the file system, or its directory cannot be written.
    Missing parent directories are fine (they are created on writing) when the
    nearest existing one is writable. Nothing is left behind. A ``path`` that is
    not text, bytes or an ``os.PathLike`` is a :class:`~mgkflow.errors.ParameterTypeError`.

    Examples
    --------
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> check_writable(Path(d) / "sub" / "K.npz").name
    'K.npz'
    >>> check_writable(d)
    Traceback (most recent call last):
    ...
    mgkflow.errors.OutputPathError: output file ... is a directory
    """
    p = as_path(path, "path")
    if p.name in ("", ".", ".."):
        raise OutputPathError(f"{what} {str(p)!r} names no file")
    limit = 255
    for part in p.parts:
        if len(os.fsencode(part)) > limit:
            raise OutputPathError(
                f"{what} {str(p)[:60]}...: the name {part[:30]!r}... is longer than the file system allows "
                f"({limit} bytes)"
            )
    try:
        if p.is_dir():
            raise OutputPathError(f"{what} {p} is a directory")
        ancestor = p.parent
        while not ancestor.exists() and ancestor.parent != ancestor:
            ancestor = ancestor.parent
        if ancestor.exists() and not ancestor.is_dir():
            raise OutputPathError(f"{what} {p}: {ancestor} is a file, not a directory")
        if len(os.fsencode(p.name)) > _name_max(ancestor):
            raise OutputPathError(f"{what} {p}: the name is longer than the file system allows")
        if p.exists() and not os.access(p, os.W_OK):
            raise OutputPathError(f"{what} {p} exists and is not writable")
        if not os.access(ancestor, os.W_OK | os.X_OK):
            raise OutputPathError(f"{what} {p}: directory {ancestor} is not writable")
    except OutputPathError:
        raise
    except OSError as exc:  # ENAMETOOLONG for the whole path, ELOOP, EACCES on a parent, ...
        raise OutputPathError(f"{what} {str(p)[:200]}: {exc.strerror or exc}") from exc
    return p


def atomic_write(path: Any, write: Callable[[str], Any]) -> Path:
    """Call ``write(tmp_path)``, then rename onto ``path``: no half-written file is ever left.

    The file gets the permissions a plain ``open()`` would give it (``0o666 &
    ~umask``, typically 0644), not the 0600 of a temporary file. Missing parent
    directories are created. OS failures raise
    :class:`~mgkflow.errors.OutputPathError` naming the path.

    Examples
    --------
    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "x.txt"
    >>> _ = atomic_write(p, lambda t: Path(t).write_text("hi"))
    >>> p.read_text(), oct(p.stat().st_mode & 0o777) == oct(default_file_mode())
    ('hi', True)
    """
    p = check_writable(path)
    if not callable(write):
        raise ParameterTypeError(f"write must be a function of the temporary path, got {type(write).__name__}")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        # a short temporary name (the final one may be near the length limit), same suffix
        # (np.save / np.savez append .npy / .npz to a name that lacks it)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name[:40]}.", suffix=p.suffix[:16])
        os.close(fd)
    except OSError as exc:
        raise OutputPathError(f"cannot write {p}: {exc.strerror or exc}") from exc
    try:
        write(tmp)
        os.chmod(tmp, default_file_mode())
        os.replace(tmp, p)
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, OutputPathError) and exc.errno in (
            errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EROFS, errno.EISDIR, errno.ENOTDIR,
        ):
            raise OutputPathError(f"cannot write {p}: {exc.strerror or exc}") from exc
        raise
    return p
