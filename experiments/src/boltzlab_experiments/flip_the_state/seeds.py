"""Seeds of the flip-the-state study: one base seed per part, every run's seed derived by label.

Deriving seeds from labels rather than drawing them in sequence keeps a run's randomness
independent of which other runs were configured, and pairs the runs that share labels (a
repetition's initial weights and training seed are the same for Gibbs and flip).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import torch

from boltzlab.rng import resolve_generator

__all__ = ["Progress", "base_seed", "derive_seed", "report"]

Progress = Callable[[int, int, str], None]


def base_seed(generator: torch.Generator | int | None) -> int:
    """One draw from the study's generator; every run's seed is derived from it by :func:`derive_seed`."""
    return int(torch.randint(0, 2**62, (1,), generator=resolve_generator(generator)))


def derive_seed(base: int, *labels: object) -> int:
    """A 63-bit seed from the base seed and labels, stable across processes (unlike ``hash``).

    Deriving seeds from labels rather than drawing them in sequence keeps a run's randomness
    independent of which other runs were configured, and pairs the runs that share labels.
    """
    text = "/".join(str(label) for label in (base, *labels)).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little") >> 1


def report(progress: Progress | None, done: int, total: int, label: str) -> None:
    """Call ``progress`` when there is one."""
    if progress is not None:
        progress(done, total, label)
