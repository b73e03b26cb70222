"""Grey-level images as the Gaussian-binary RBM sees them: pooled, constant pixels dropped, standardised.

Salakhutdinov & Hinton (2009, §4.2) standardise the pixels before the Gaussian-binary RBM, so
its visible variance can be fixed at ``σ = 1`` (Hinton 2010's advice). :class:`Standardizer`
keeps what the transformation needs to go both ways and the log-Jacobian that turns densities
of standardised pixels into densities of grey levels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.validation import as_real_tensor, check_positive_int, require

__all__ = ["Standardizer"]


@dataclass(frozen=True)
class Standardizer:
    """Grey-level images → standardised real vectors (pool, drop constant pixels, standardise).

    Attributes
    ----------
    image_shape : (int, int)
        Height and width after pooling.
    downsample : int
    kept : Tensor, shape (height · width,), bool
        The pixels the model sees.
    mean, std : Tensor, shape (n_kept,), float64
        Training mean and standard deviation of the kept pixels (grey levels in [0, 1]).
    """

    image_shape: tuple[int, int]
    downsample: int
    kept: Tensor
    mean: Tensor
    std: Tensor

    @classmethod
    def fit(cls, images: Any, *, downsample: int = 2, min_pixel_std: float = 0.02) -> Standardizer:
        """Fit to training ``images`` (shape ``(n, H, W)`` or ``(n, H·W)`` square, grey levels 0..255 or [0, 1])."""
        pooled, shape = _pool(images, downsample)
        std = pooled.std(0, unbiased=False)
        kept = std >= min_pixel_std
        if not bool(kept.any()):
            raise ValidationError(
                f"no pixel varies by min_pixel_std={min_pixel_std} over the training images"
            )
        return cls(
            image_shape=shape,
            downsample=downsample,
            kept=kept,
            mean=pooled.mean(0)[kept],
            std=std[kept],
        )

    @property
    def n_visible(self) -> int:
        """Number of kept pixels: the Gaussian-binary RBM's visible units."""
        return int(self.kept.sum())

    @property
    def log_jacobian(self) -> float:
        """``−Σ log std``: add to a standardised log-density to get it in grey-level units [0, 1]."""
        return -float(torch.log(self.std).sum())

    def transform(self, images: Any, *, dtype: torch.dtype = torch.float32) -> Tensor:
        """Standardised kept pixels, shape ``(n, n_visible)``, in ``dtype``."""
        pooled, shape = _pool(images, self.downsample)
        require(
            shape == self.image_shape, f"images pool to {shape}, the standardizer expects {self.image_shape}"
        )
        return ((pooled[:, self.kept] - self.mean) / self.std).to(dtype)

    def inverse(self, v: Tensor) -> Tensor:
        """Pooled images (grey levels, float64, shape ``(n, height, width)``) from standardised ``v``."""
        images = torch.zeros(v.shape[0], self.kept.numel(), dtype=torch.float64)
        images[:, self.kept] = v.detach().to(torch.float64).cpu() * self.std + self.mean
        images[:, ~self.kept] = 0.0
        return images.reshape(v.shape[0], *self.image_shape)


def _pool(images: Any, downsample: int) -> tuple[Tensor, tuple[int, int]]:
    """Grey levels in [0, 1] (float64), average-pooled; ``(n, h·w)`` and ``(h, w)``."""
    downsample = check_positive_int(downsample, "downsample")
    array = images.detach().cpu().numpy() if isinstance(images, Tensor) else np.asarray(images)
    if array.ndim == 2:
        side = math.isqrt(array.shape[1])
        require(side * side == array.shape[1], f"images of {array.shape[1]} pixels are not square")
        array = array.reshape(array.shape[0], side, side)
    require(array.ndim == 3, f"images must have shape (n, H, W) or (n, H*W), got {array.shape}")
    scale = 255.0 if array.dtype == np.uint8 or float(np.max(array)) > 1.0 else 1.0
    tensor = as_real_tensor(array.reshape(array.shape[0], -1), "images", dtype=torch.float64) / scale
    height, width = array.shape[1:]
    tensor = tensor.reshape(-1, 1, height, width)
    if downsample > 1:
        require(
            height % downsample == 0 and width % downsample == 0,
            f"downsample={downsample} must divide the image size {height}x{width}",
        )
        tensor = F.avg_pool2d(tensor, downsample)
    shape = (int(tensor.shape[2]), int(tensor.shape[3]))
    return tensor.reshape(tensor.shape[0], -1), shape
