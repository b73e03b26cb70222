"""Sizes checked before memory is taken: what a command will allocate, against the machine's memory.

Without this, ``--chains 1000000000`` or ``logz --temperatures 1e12`` went on to allocate up to
8 GB before torch failed, and the command ended in "unexpected RuntimeError … please report
it". Each command now adds up the arrays its flags make it hold (chains × units × levels, the
model's weights and their optimiser copies, a schedule of K temperatures, kept samples) and
refuses, before anything is allocated, when that exceeds :data:`MEMORY_SHARE` of the machine's
memory, with the number and the flag to change. The estimate is a lower bound on what the
command uses (work space comes on top), so a command it lets through can still run out, but a
flag off by orders of magnitude is caught.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from boltzlab.errors import ValidationError

__all__ = ["MEMORY_SHARE", "check_memory", "format_bytes", "machine_memory"]

#: The share of the machine's memory a command's own arrays may take.
MEMORY_SHARE = 0.5


def machine_memory() -> int | None:
    """Bytes of physical memory of this machine, or ``None`` where the OS does not say."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):  # not POSIX
        return None


def format_bytes(count: float) -> str:
    """``count`` bytes as "1.5 GB", "12 MB", "3.0 TB"."""
    for unit, size in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:.3g} {unit}"
    return f"{int(count)} B"


def check_memory(parts: Mapping[str, float], *, command: str, fix: str, total: int | None = None) -> None:
    """Refuse when the arrays in ``parts`` (name → bytes) exceed ``MEMORY_SHARE`` of the machine's memory.

    Parameters
    ----------
    parts : mapping of str to float
        What the command holds, e.g. ``{"chains (1,000,000,000 × 794 units)": 3.2e12}``.
    command : str
        The command, for the message.
    fix : str
        The flags to change, e.g. "use fewer --chains or --levels".
    total : int, optional
        The machine's memory in bytes (default: :func:`machine_memory`); nothing is checked
        where it is unknown.
    """
    total = machine_memory() if total is None else total
    if total is None:
        return
    need = sum(parts.values())
    limit = MEMORY_SHARE * total
    if need <= limit:
        return
    largest = max(parts, key=lambda name: parts[name])
    raise ValidationError(
        f"{command} would need at least {format_bytes(need)} of memory, more than {format_bytes(limit)} "
        f"(half of this machine's {format_bytes(total)}); the largest part is {largest}, "
        f"{format_bytes(parts[largest])}: {fix}"
    )
