"""NumPy ``.npy`` files: one array of examples, read without unpickling.

``numpy.save(path, x)`` with ``x`` shaped ``(n_examples, n_features)``, or
``(n_examples, height, width)`` for images (flattened row by row, the image shape kept).
Object arrays need pickle to load, and unpickling a file can run code, so they are refused
(docs/data.md, "NumPy .npy").
"""

from __future__ import annotations

import os
import zipfile
import zlib
from pathlib import Path

import numpy as np

from boltzlab.data.readers import require_nonempty_file
from boltzlab.errors import DataError

__all__ = ["read_npy"]


def read_npy(path: str | os.PathLike[str]) -> np.ndarray:
    """The array stored in a ``.npy`` file (``allow_pickle=False``).

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    numpy.ndarray, shape (n_examples, n_features) or (n_examples, height, width)
        As stored.

    Raises
    ------
    DataError
        Missing, empty, truncated or not a ``.npy`` file; a ``.npz`` archive; an object array
        (needs pickle); fewer than 2 or more than 3 dimensions.
    """
    path = Path(path)
    require_nonempty_file(path, "a .npy file written by numpy.save")
    _check_declared_size(path)
    try:
        array = np.load(path, allow_pickle=False)
    except ValueError as error:
        if "allow_pickle" in str(error):
            raise DataError(
                f"{path}: holds Python objects, which only pickle can load, and boltzlab never unpickles "
                "data files (that can run code); save a numeric array, e.g. "
                "numpy.save(path, x.astype(numpy.uint8))"
            ) from None
        raise DataError(
            f"{path}: not a readable .npy file ({error}); it may be truncated or of another format: "
            "write it with numpy.save"
        ) from None
    except (EOFError, OSError, zipfile.BadZipFile, zlib.error) as error:
        raise DataError(
            f"{path}: not a readable .npy file ({type(error).__name__}: {error}); write it with numpy.save"
        ) from None
    if not isinstance(array, np.ndarray):
        array.close()
        raise DataError(
            f"{path}: is a .npz archive, not a .npy file; rename it to end in .npz (keys x_train, ...)"
        )
    require_examples_axis(array, source=str(path), what="the array")
    return array


def _check_declared_size(path: Path) -> None:
    """Refuse a ``.npy`` header whose shape needs more bytes than the file holds, before reading it.

    Without this a header claiming 10^11 rows made numpy allocate for them first, and the
    command ended in "out of memory; use fewer chains". Other files (a ``.npz``, a foreign
    format) are left to ``np.load``, whose messages say what they are.
    """
    with path.open("rb") as stream:
        if stream.read(6) != b"\x93NUMPY":
            return
        stream.seek(0)
        try:
            version = np.lib.format.read_magic(stream)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(stream)
            else:
                shape, _, dtype = np.lib.format.read_array_header_2_0(stream)
        except (ValueError, OSError, EOFError):
            return  # np.load says what is wrong with the header
        available = path.stat().st_size - stream.tell()
    if dtype.hasobject:
        return  # refused below, with the pickle message
    needed = int(np.prod(shape, dtype=np.float64)) * dtype.itemsize if shape else dtype.itemsize
    if needed > available:
        raise DataError(
            f"{path}: its header declares an array of shape {tuple(shape)} ({dtype}), {needed:,} bytes, but the "
            f"file holds {available:,} after its header: truncated, or the header is corrupt; write it again "
            "with numpy.save"
        )


def require_examples_axis(array: np.ndarray, *, source: str, what: str) -> None:
    """Refuse arrays of fewer than 2 or more than 3 dimensions: axis 0 is examples, the rest
    features or an image's rows and columns.

    A 4-D array (colour channels, stereo pairs, a batch of batches) was flattened without a word,
    which trained on something other than what its author meant; reshaping it is their choice.
    """
    if array.ndim > 3:
        raise DataError(
            f"{source}: {what} has shape {array.shape} ({array.ndim}-D); expected (n_examples, n_features) "
            "or (n_examples, height, width): reshape it yourself, e.g. x.reshape(len(x), -1) to flatten "
            "every example, or keep one channel"
        )
    if array.ndim >= 2:
        return
    raise DataError(
        f"{source}: {what} has shape {array.shape} ({array.ndim}-D); expected (n_examples, n_features) or "
        "(n_examples, height, width): for a single example save x.reshape(1, -1), "
        "for one feature per example x.reshape(-1, 1)"
    )
