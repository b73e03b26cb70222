"""Synthetic binary datasets: Bars & Stripes and Artificial Modes.

Bars & Stripes (as usually cited: MacKay 2003, *Information Theory, Inference, and Learning
Algorithms*) are the ``n x n`` images whose pixels are constant along every column (vertical
bars) or along every row (horizontal stripes). There are ``2^n`` of each kind; the blank and
the full image are both, so ``2 * 2^n - 2`` are distinct.

Artificial Modes (Desjardins, Courville, Bengio, Vincent & Delalleau 2010, "Tempered Markov
chain Monte Carlo for training of restricted Boltzmann machines", AISTATS, experiments) are
4x4 images drawn from four basic modes, each pixel flipped with probability ``p_mut``; small
``p_mut`` gives a distribution with four sharp, well-separated modes that plain Gibbs chains
struggle to move between. The paper's four images were not recovered, so the modes here are
our own choice (see :func:`artificial_mode_patterns`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.rng import resolve_generator
from boltzlab.validation import check_positive_int, check_probability

__all__ = ["ModeSamples", "artificial_mode_patterns", "artificial_modes", "bars_and_stripes", "flip_pixels"]

# 2 * 2^16 - 2 = 131070 patterns of 256 pixels (134 MB as float32); larger sizes are not a
# dataset anyone enumerates.
_MAX_BARS_AND_STRIPES_SIZE = 16

# The four modes, 4x4 images in row-major order (see artificial_mode_patterns).
_ARTIFICIAL_MODES = (
    ("1100", "1100", "1100", "1100"),  # left half on
    ("1111", "1111", "0000", "0000"),  # top half on
    ("1100", "1100", "0011", "0011"),  # top-left and bottom-right quadrants on
    ("1010", "0101", "1010", "0101"),  # checkerboard
)


@dataclass(frozen=True, slots=True)
class ModeSamples:
    """Samples from the Artificial Modes distribution.

    Attributes
    ----------
    samples : Tensor, shape (n_samples, 16), float32
        0/1 images, 4x4 in row-major order.
    labels : Tensor, shape (n_samples,), int64
        Index (0..3) of the mode each sample was drawn from, before pixels were flipped.
    """

    samples: Tensor
    labels: Tensor


def bars_and_stripes(size: int = 4) -> Tensor:
    """Every distinct ``size x size`` Bars & Stripes pattern, once.

    Parameters
    ----------
    size : int, default 4
        Side of the square image, 1 to :data:`_MAX_BARS_AND_STRIPES_SIZE`.

    Returns
    -------
    Tensor, shape (2 * 2^size - 2, size * size), float32
        Row-major images. First the ``2^size`` stripe patterns (rows constant; row ``i`` on
        when bit ``i`` of the pattern index is set, so index 0 is blank and the last is
        full), then the ``2^size - 2`` bar patterns (columns constant) other than blank and
        full.

    Examples
    --------
    >>> bars_and_stripes(3).shape
    torch.Size([14, 9])
    """
    size = check_positive_int(size, "size")
    if size > _MAX_BARS_AND_STRIPES_SIZE:
        raise ValidationError(
            f"size must be at most {_MAX_BARS_AND_STRIPES_SIZE} (2 * 2^size - 2 patterns), got {size}"
        )
    codes = torch.arange(2**size, dtype=torch.int64)
    # bits[k, i] = bit i of code k: which rows (stripes) or columns (bars) are on.
    bits = ((codes[:, None] >> torch.arange(size)) & 1).to(torch.float32)
    stripes = bits[:, :, None].expand(-1, size, size)
    bars = bits[1:-1, None, :].expand(-1, size, size)
    return torch.cat([stripes, bars]).reshape(-1, size * size).contiguous()


def artificial_mode_patterns() -> Tensor:
    """The four basic modes of Artificial Modes (a new tensor on each call).

    The four images Desjardins et al. (2010) used were not recovered, so these are our own:
    4x4 Walsh-Hadamard patterns: each has 8 pixels on, and every pair
    differs in exactly 8 of the 16 pixels, so a sample with fewer than 4 flipped pixels is
    always nearest to its own mode::

        mode 0: left half   mode 1: top half   mode 2: quadrants   mode 3: checkerboard
        1100                1111               1100                1010
        1100                1111               1100                0101
        1100                0000               0011                1010
        1100                0000               0011                0101

    Returns
    -------
    Tensor, shape (4, 16), float32
        Row-major images, row ``k`` is mode ``k``.
    """
    return torch.tensor(
        [[float(pixel) for row in mode for pixel in row] for mode in _ARTIFICIAL_MODES],
        dtype=torch.float32,
    )


def flip_pixels(patterns: Tensor, *, p_flip: float, generator: torch.Generator | int | None = None) -> Tensor:
    """Flip each pixel of 0/1 ``patterns`` independently with probability ``p_flip``.

    Parameters
    ----------
    patterns : Tensor, shape (n_examples, n_pixels)
        0/1 values; not modified.
    p_flip : float
        Probability in [0, 1] that a pixel is flipped (not resampled: ``p_flip = 0.5``
        gives uniform noise, ``p_flip = 1`` the complement).
    generator : torch.Generator or int, optional

    Returns
    -------
    Tensor, shape (n_examples, n_pixels), same dtype as ``patterns``
    """
    p_flip = check_probability(p_flip, "p_flip")
    random_generator = resolve_generator(generator, patterns.device)
    flips = torch.rand(patterns.shape, generator=random_generator, device=patterns.device) < p_flip
    return torch.where(flips, 1 - patterns, patterns)


def artificial_modes(
    n_samples: int = 1000, *, p_mut: float = 0.01, generator: torch.Generator | int | None = None
) -> ModeSamples:
    """Draw from the Artificial Modes distribution (after Desjardins et al. 2010).

    Each sample picks one of the four modes of :func:`artificial_mode_patterns` uniformly at
    random, then flips each of its 16 pixels independently with probability ``p_mut``.

    Parameters
    ----------
    n_samples : int, default 1000
    p_mut : float, default 0.01
        Per-pixel flip probability; 0 gives the four modes exactly.
    generator : torch.Generator or int, optional
        Randomness; the same seed gives the same samples.

    Returns
    -------
    ModeSamples
        ``samples`` of shape (n_samples, 16) and ``labels`` of shape (n_samples,).

    Examples
    --------
    >>> drawn = artificial_modes(5, p_mut=0.0, generator=0)
    >>> bool((drawn.samples == artificial_mode_patterns()[drawn.labels]).all())
    True
    """
    n_samples = check_positive_int(n_samples, "n_samples")
    p_mut = check_probability(p_mut, "p_mut")
    random_generator = resolve_generator(generator)
    labels = torch.randint(len(_ARTIFICIAL_MODES), (n_samples,), generator=random_generator)
    samples = flip_pixels(artificial_mode_patterns()[labels], p_flip=p_mut, generator=random_generator)
    return ModeSamples(samples=samples, labels=labels)
