"""Atomic writes: temporary file beside the target, fsync, rename.

So a killed run never leaves a half-written file (docs/architecture.md, "Files").
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file, fsync, rename); returns the path.

    The temporary file sits beside the target (``.<name>.<random>.tmp``) so the rename never
    crosses file systems; it is removed if anything fails, and the old file, if any, is then
    left untouched. The new file gets the usual permissions (``0o666`` less the umask).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        temporary = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            # os.open with mode 0o666 lets the umask decide, unlike mkstemp's private 0o600.
            handle = os.open(temporary, flags, 0o666)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    try:  # make the rename itself durable
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except OSError:
        pass
    return path
