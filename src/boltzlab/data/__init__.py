"""Datasets: binary vectors for RBMs (generated, bundled, read from files) and aligned sequences.

>>> import boltzlab.data
>>> data = boltzlab.data.load("artificial-modes", n_samples=50, generator=0)
>>> data.train.shape, data.image_shape
(torch.Size([50, 16]), (4, 4))

See :func:`load` for the names, options and where files are looked for.
"""

from boltzlab.data.hdf5_files import read_hdf5
from boltzlab.data.npy_files import read_npy
from boltzlab.data.readers import binarize, read_idx, read_npz, read_svmlight
from boltzlab.data.registry import Dataset, available, load
from boltzlab.data.sequence_dataset import SequenceDataset, load_sequences
from boltzlab.data.sequence_weights import effective_number, homology_split, sequence_weights
from boltzlab.data.sequences import Alignment, Alphabet, read_fasta, read_sequence_lines
from boltzlab.data.splits import carve_splits
from boltzlab.data.synthetic import artificial_mode_patterns, artificial_modes, bars_and_stripes
from boltzlab.data.text_files import read_text

__all__ = [
    "Alignment",
    "Alphabet",
    "Dataset",
    "SequenceDataset",
    "artificial_mode_patterns",
    "artificial_modes",
    "available",
    "bars_and_stripes",
    "binarize",
    "carve_splits",
    "effective_number",
    "homology_split",
    "load",
    "load_sequences",
    "read_fasta",
    "read_hdf5",
    "read_idx",
    "read_npy",
    "read_npz",
    "read_sequence_lines",
    "read_svmlight",
    "read_text",
    "sequence_weights",
]
