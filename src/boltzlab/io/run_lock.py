"""One run per folder: an exclusive lock on a run directory, and the leftovers of killed writers.

Two trainings started into one ``--out`` used to interleave their files: the second rewrote
``config.toml`` before it was refused, and two started together both finished, leaving
checkpoints of both runs and a config that matched neither model. A run now claims its folder
before it writes anything (:func:`claim_run_folder`): an advisory ``flock`` on
``<folder>/.boltzlab-run.lock``, which the operating system releases when the process ends,
however it ends (``kill -9`` included), so a stale lock cannot outlive its process. The lock
file holds the owner's process id, host and start time, which a refused run names.

A write killed between its temporary file and the rename (:func:`~boltzlab.io.atomic.write_atomic`)
leaves ``.<name>.<random>.tmp`` behind. Once a run owns its folder, no other writer can be
mid-write there, so :func:`remove_leftover_temporaries` deletes them when the folder is claimed
and again when it is released.

A run folder also names its run: ``run.json`` holds the run's identity
(:func:`write_run_id`), which the trainer writes into every checkpoint and checks on resume, so
a checkpoint copied in from another run's folder is refused instead of continued.

Platforms without ``fcntl`` (Windows) get an exclusive-create lock file instead, whose owner's
process id is checked for life before a leftover lock is taken over.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from boltzlab.errors import ValidationError
from boltzlab.io.atomic import write_atomic

try:  # POSIX: an advisory lock the kernel drops with its process
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "LOCK_NAME",
    "RUN_FILE",
    "RunFolderLock",
    "claim_run_folder",
    "read_run_id",
    "remove_leftover_temporaries",
    "run_folder",
    "write_run_id",
]

#: The lock file a run keeps open in the folder it owns.
LOCK_NAME = ".boltzlab-run.lock"
#: The run's identity in its folder.
RUN_FILE = "run.json"
# What write_atomic names its temporary files: .<target name>.<12 hex digits>.tmp
_TEMPORARY = re.compile(r"^\..+\.[0-9a-f]{12}\.tmp$")


@dataclass
class RunFolderLock:
    """A claimed run folder; :meth:`release` (or the end of the process) gives it back.

    Attributes
    ----------
    folder : Path
    handle : file object or None
        The open lock file (``None`` once released).
    removed : tuple of Path
        Leftover temporary files deleted when the folder was claimed.
    created : bool
        Whether the claim created the folder: a run refused before it wrote anything (bad
        flags found after the claim) then leaves no empty folder behind.
    """

    folder: Path
    handle: IO[str] | None
    removed: tuple[Path, ...] = ()
    created: bool = False

    def release(self) -> None:
        """Delete leftover temporaries, remove the lock file and unlock; idempotent."""
        if self.handle is None:
            return
        remove_leftover_temporaries(self.folder)
        # Unlink before unlocking: a waiting claimant then creates a fresh file rather than
        # locking one that is about to disappear.
        (self.folder / LOCK_NAME).unlink(missing_ok=True)
        self.handle.close()  # closing drops the flock
        self.handle = None
        if self.created:
            with contextlib.suppress(OSError):  # only an empty folder goes
                self.folder.rmdir()


def _owner_text() -> str:
    return json.dumps(
        {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    )


def _describe_owner(path: Path) -> str:
    try:
        owner: Any = json.loads(path.read_text())
        return f"process {int(owner['pid'])} on {owner['host']}, started {owner['started']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _busy(folder: Path, lock: Path) -> ValidationError:
    return ValidationError(
        f"{folder} is in use by another run ({_describe_owner(lock)}): one folder holds one run; "
        f"wait for that run to end, or choose another --out (if no such run exists, delete {lock})"
    )


def claim_run_folder(folder: str | Path) -> RunFolderLock:
    """Claim ``folder`` (created if needed) for this process, or raise if another run holds it.

    Returns
    -------
    RunFolderLock
        Held until :meth:`RunFolderLock.release` or the end of the process.

    Raises
    ------
    ValidationError
        Another live process holds the folder: the message names it and what to do.
    """
    folder = Path(folder)
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / LOCK_NAME
    if fcntl is not None:
        while True:
            handle = open(lock, "a+", encoding="utf-8")  # noqa: SIM115 - held open for the run's life
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                raise _busy(folder, lock) from None
            # The previous owner may have unlinked the file between our open and our lock:
            # then we hold a lock on a file nobody else can see, so try again.
            try:
                same = os.path.samestat(os.fstat(handle.fileno()), os.stat(lock))
            except FileNotFoundError:
                same = False
            if same:
                break
            handle.close()
        handle.seek(0)
        handle.truncate()
        handle.write(_owner_text())
        handle.flush()
    else:  # pragma: no cover - Windows
        while True:
            try:
                descriptor = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                break
            except FileExistsError:
                try:
                    pid = int(json.loads(lock.read_text())["pid"])
                except (OSError, ValueError, KeyError, TypeError):
                    pid = -1
                if pid > 0 and _pid_alive(pid):
                    raise _busy(folder, lock) from None
                lock.unlink(missing_ok=True)  # its owner is gone: a stale lock
        handle = os.fdopen(descriptor, "w", encoding="utf-8")
        handle.write(_owner_text())
        handle.flush()
    claimed = RunFolderLock(folder=folder, handle=handle, created=created)
    claimed.removed = tuple(remove_leftover_temporaries(folder))
    return claimed


def remove_leftover_temporaries(folder: str | Path) -> list[Path]:
    """Delete ``write_atomic``'s temporary files in ``folder`` and its ``checkpoints/``; returns them.

    Only for a folder this process owns: elsewhere another writer may be mid-write.
    """
    removed = []
    for directory in (Path(folder), Path(folder) / "checkpoints"):
        if not directory.is_dir():
            continue
        for path in directory.iterdir():
            if _TEMPORARY.match(path.name) and path.is_file():
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed


@contextmanager
def run_folder(folder: str | Path) -> Iterator[RunFolderLock]:
    """``with run_folder(out) as lock:`` claim ``folder`` for the block, then release it."""
    claimed = claim_run_folder(folder)
    try:
        yield claimed
    finally:
        claimed.release()


def write_run_id(folder: str | Path, run_id: str) -> Path:
    """Record ``run_id`` as the identity of the run in ``folder`` (``run.json``, atomically)."""
    return write_atomic(Path(folder) / RUN_FILE, (json.dumps({"run_id": run_id}) + "\n").encode())


def read_run_id(folder: str | Path) -> str | None:
    """The identity of the run in ``folder``; ``None`` for a folder written before it existed.

    Raises
    ------
    ValidationError
        ``run.json`` exists but is not what :func:`write_run_id` writes.
    """
    path = Path(folder) / RUN_FILE
    if not path.is_file():
        return None
    try:
        run_id = json.loads(path.read_text(encoding="utf-8"))["run_id"]
    except (OSError, ValueError, KeyError, TypeError):
        run_id = None
    if not (isinstance(run_id, str) and run_id.isalnum()):
        raise ValidationError(
            f'{path} is damaged (it should hold {{"run_id": "<letters and digits>"}}); restore it from the '
            "folder's backup, or start a new run in another --out"
        )
    return run_id
