"""Binary datasets for RBMs: generated, bundled, and read from files.

>>> import boltzlab.data
>>> data = boltzlab.data.load("artificial-modes", n_samples=50, generator=0)
>>> data.train.shape, data.image_shape
(torch.Size([50, 16]), (4, 4))

See :func:`load` for the names, options and where files are looked for.
"""

from boltzlab.data.readers import binarize, read_idx, read_npz, read_svmlight
from boltzlab.data.registry import Dataset, available, load
from boltzlab.data.synthetic import artificial_mode_patterns, artificial_modes, bars_and_stripes

__all__ = [
    "Dataset",
    "artificial_mode_patterns",
    "artificial_modes",
    "available",
    "bars_and_stripes",
    "binarize",
    "load",
    "read_idx",
    "read_npz",
    "read_svmlight",
]
