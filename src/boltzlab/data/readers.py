"""File formats for datasets: NumPy ``.npz``, IDX (MNIST's format), svmlight/libsvm text.

Every reader validates what it reads and raises :class:`~boltzlab.errors.DataError` with a
message that names the file, says what is wrong and how to fix it. Readers return NumPy
arrays as stored; :func:`as_binary_matrix` and :func:`as_labels` turn them into the
tensors a :class:`~boltzlab.data.registry.Dataset` holds, refusing data that is not 0/1
unless binarisation is asked for explicitly.

Sources
-------
* IDX: Y. LeCun, C. Cortes, C. J. C. Burges, "The MNIST database of handwritten digits",
  section "File formats for the MNIST database": a magic number ``0x00 0x00 <type> <ndim>``,
  ``ndim`` big-endian int32 sizes, then the values in C order, big-endian.
* svmlight/libsvm: T. Joachims, SVM-light; C.-C. Chang and C.-J. Lin, LIBSVM (2011). Read with
  :func:`sklearn.datasets.load_svmlight_file`.
* ``.npz``: :func:`numpy.savez_compressed`, keys ``x_train``/``x_valid``/``x_test`` and
  ``y_*`` as in docs/data.md.
"""

from __future__ import annotations

import gzip
import os
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from boltzlab.errors import DataError
from boltzlab.rng import resolve_generator

__all__ = ["SvmlightData", "as_binary_matrix", "binarize", "read_idx", "read_npz", "read_svmlight"]

# IDX type codes (third byte of the magic number) and the big-endian dtype each one means.
_IDX_DTYPES: dict[int, str] = {
    0x08: ">u1",
    0x09: ">i1",
    0x0B: ">i2",
    0x0C: ">i4",
    0x0D: ">f4",
    0x0E: ">f8",
}
_GZIP_MAGIC = b"\x1f\x8b"
BINARIZE_METHODS = ("threshold", "stochastic")


@dataclass(frozen=True, slots=True)
class SvmlightData:
    """The contents of one svmlight/libsvm file, densified.

    Attributes
    ----------
    inputs : numpy.ndarray, shape (n_examples, n_features), float64
    targets : numpy.ndarray, shape (n_examples,), float64
        The first column of each line, as written (e.g. LIBSVM's classes 1, 2, 3).
    """

    inputs: np.ndarray
    targets: np.ndarray


def binarize(
    x: Tensor | np.ndarray,
    *,
    threshold: float = 0.5,
    generator: torch.Generator | int | None = None,
    stochastic: bool = False,
) -> Tensor:
    """Binarise values in [0, 1]: by a threshold, or by one Bernoulli draw per value.

    Parameters
    ----------
    x : Tensor or numpy.ndarray, any shape
        Values in [0, 1] (e.g. pixels divided by 255). Not modified.
    threshold : float, default 0.5
        Deterministic rule: ``x >= threshold`` becomes 1. With 0.5 this is MNIST's usual
        ``pixel > 127`` on ``pixel / 255`` and scikit-learn digits' ``pixel >= 8`` on
        ``pixel / 16``.
    generator : torch.Generator or int, optional
        Randomness for ``stochastic=True`` (a seed is accepted; ``None`` draws a fresh seed,
        so the result is not reproducible).
    stochastic : bool, default False
        Draw each value as Bernoulli(``x``) instead of thresholding (Salakhutdinov & Murray
        2008 binarised MNIST this way).

    Returns
    -------
    Tensor, same shape as ``x``, float32, values 0 and 1

    Examples
    --------
    >>> import torch
    >>> binarize(torch.tensor([0.0, 0.49, 0.5, 1.0])).tolist()
    [0.0, 0.0, 1.0, 1.0]
    """
    values = torch.as_tensor(np.asarray(x) if not isinstance(x, Tensor) else x).detach()
    if values.dtype == torch.bool:
        values = values.to(torch.float32)
    if not values.is_floating_point():
        values = values.to(torch.float32)
    if values.numel() and (not bool(torch.isfinite(values).all())):
        raise DataError("binarize: x contains NaN or infinite values; clean or drop them first")
    if values.numel() and (float(values.min()) < 0.0 or float(values.max()) > 1.0):
        raise DataError(
            f"binarize: x must lie in [0, 1], got values from {float(values.min())} to "
            f"{float(values.max())}; divide grey levels by their maximum (e.g. 255) first"
        )
    if stochastic:
        random_generator = resolve_generator(generator, values.device)
        uniform = torch.rand(values.shape, generator=random_generator, device=values.device)
        # rand lies in [0, 1), so x = 0 never and x = 1 always gives 1.
        return (uniform < values).to(torch.float32)
    return (values >= threshold).to(torch.float32)


def read_npz(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """All arrays in a ``.npz`` file (no pickles are loaded).

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    dict[str, numpy.ndarray]
        Key → array, as stored.

    Raises
    ------
    DataError
        The file is missing, empty, not a NumPy zip archive, or holds object arrays.
    """
    path = Path(path)
    require_nonempty_file(path, "a .npz archive")
    try:
        archive = np.load(path, allow_pickle=False)
        if isinstance(archive, np.ndarray):
            raise DataError(
                f"{path}: holds a single .npy array, not a .npz archive with keys "
                "x_train, x_test, ...; save it with numpy.savez_compressed(path, x_train=...)"
            )
        with archive:
            return {key: archive[key] for key in archive.files}
    except DataError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, zlib.error) as error:
        raise DataError(
            f"{path}: not a readable .npz archive ({type(error).__name__}: {error}); "
            "the file may be truncated or of another format: write it with numpy.savez_compressed"
        ) from None


def read_idx(path: str | os.PathLike[str]) -> np.ndarray:
    """The array stored in an IDX file, gzip-compressed or not.

    Parameters
    ----------
    path : str or path-like
        E.g. ``train-images-idx3-ubyte`` or ``train-images-idx3-ubyte.gz``; compression is
        recognised by content, not by name.

    Returns
    -------
    numpy.ndarray, shape as in the header, native byte order
        ``(n, 28, 28)`` uint8 for MNIST images, ``(n,)`` uint8 for labels.

    Raises
    ------
    DataError
        Empty file, broken gzip stream, bad magic number, unknown type code, truncated
        header or payload, or bytes after the payload.
    """
    path = Path(path)
    require_nonempty_file(path, "an IDX file")
    raw = path.read_bytes()
    if raw[:2] == _GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as error:
            raise DataError(
                f"{path}: broken gzip stream ({error}); the download was probably cut short, fetch the file again"
            ) from None
    refetch = "the file is corrupt or was cut short; fetch it again"
    if len(raw) < 4:
        raise DataError(f"{path}: too short for an IDX header ({len(raw)} bytes, need at least 4); {refetch}")
    zero_a, zero_b, type_code, n_dimensions = raw[0], raw[1], raw[2], raw[3]
    if zero_a != 0 or zero_b != 0 or type_code not in _IDX_DTYPES:
        raise DataError(
            f"{path}: bad IDX magic number 0x{raw[:4].hex()} (expected 0x0000 followed by a type code "
            f"among {', '.join(f'0x{code:02x}' for code in _IDX_DTYPES)} and the number of dimensions, "
            "e.g. 0x00000803 for images); this is not an IDX file, or it is corrupt"
        )
    if n_dimensions == 0:
        raise DataError(f"{path}: IDX header declares 0 dimensions; {refetch}")
    header_size = 4 + 4 * n_dimensions
    if len(raw) < header_size:
        raise DataError(
            f"{path}: truncated IDX header: {n_dimensions} dimensions need {header_size} bytes, "
            f"the file has {len(raw)}; {refetch}"
        )
    shape = struct.unpack(f">{n_dimensions}i", raw[4:header_size])
    if any(size < 0 for size in shape):
        raise DataError(f"{path}: IDX header declares a negative size in shape {shape}; {refetch}")
    dtype = np.dtype(_IDX_DTYPES[type_code])
    n_values = int(np.prod(shape, dtype=np.int64))
    expected_bytes = n_values * dtype.itemsize
    payload_bytes = len(raw) - header_size
    if payload_bytes < expected_bytes:
        raise DataError(
            f"{path}: truncated IDX payload: the header promises shape {shape} = {expected_bytes} bytes "
            f"of data but only {payload_bytes} follow; {refetch}"
        )
    if payload_bytes > expected_bytes:
        raise DataError(
            f"{path}: {payload_bytes - expected_bytes} unexpected bytes after the IDX payload of shape "
            f"{shape}; {refetch}"
        )
    values = np.frombuffer(raw, dtype=dtype, count=n_values, offset=header_size).reshape(shape)
    return values.astype(dtype.newbyteorder("="))


def read_svmlight(path: str | os.PathLike[str], *, n_features: int | None = None) -> SvmlightData:
    """A svmlight/libsvm text file (``<target> <index>:<value> ...`` per line), densified.

    Parameters
    ----------
    path : str or path-like
    n_features : int, optional
        Number of columns; needed when a file (e.g. a test file) does not use the highest
        feature index. Indices are one-based as in LIBSVM unless the file uses index 0.

    Returns
    -------
    SvmlightData
        ``inputs`` of shape (n_examples, n_features) and ``targets`` of shape (n_examples,).

    Raises
    ------
    DataError
        Missing or empty file, a line that does not parse, or more features than
        ``n_features``.
    """
    # scikit-learn is imported here, not at module level, because importing it costs about
    # a second and most users of boltzlab.data never read svmlight files.
    from sklearn.datasets import load_svmlight_file

    path = Path(path)
    require_nonempty_file(path, "a svmlight/libsvm file")
    try:
        sparse_inputs, targets = load_svmlight_file(str(path), n_features=n_features, dtype=np.float64)
    except (ValueError, OSError, UnicodeDecodeError) as error:
        raise DataError(
            f"{path}: not a valid svmlight/libsvm file ({error}); each line must read "
            "'<label> <index>:<value> ...' with increasing indices"
            + ("; pass n_features= at least the largest index" if "n_features" in str(error) else "")
        ) from None
    if sparse_inputs.shape[0] == 0:
        raise DataError(f"{path}: no examples in this svmlight/libsvm file (only blank or comment lines)")
    return SvmlightData(inputs=np.asarray(sparse_inputs.toarray()), targets=np.asarray(targets))


def as_binary_matrix(
    array: np.ndarray,
    *,
    source: str,
    key: str,
    binarize_method: str | None = None,
    pixel_max: float | None = None,
    generator: torch.Generator | int | None = None,
) -> Tensor:
    """One split as a float32 0/1 matrix, images flattened row by row.

    Parameters
    ----------
    array : numpy.ndarray, shape (n_examples, ...)
        Binary values, or grey levels when ``binarize_method`` is given.
    source : str
        The file the array came from, named in error messages.
    key : str
        What the array is (e.g. ``"x_train"``), named in error messages.
    binarize_method : {"threshold", "stochastic"}, optional
        ``None`` requires the values to be exactly 0/1, or ±1 (spins, read with −1 as 0: the same
        binary data, which a spin model reads back as ±1). Otherwise values are divided by
        ``pixel_max`` and passed to :func:`binarize`.
    pixel_max : float, optional
        The value meaning "fully on" (default 255 for integer arrays, 1 for floats).
    generator : torch.Generator or int, optional
        Randomness for ``binarize_method="stochastic"``.

    Returns
    -------
    Tensor, shape (n_examples, prod(array.shape[1:])), float32
    """
    array = np.asarray(array)
    if array.dtype == np.bool_:
        array = array.astype(np.uint8)
    if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        raise DataError(f"{source}: {key} has dtype {array.dtype}, expected integers or floats")
    if array.ndim < 2:
        raise DataError(
            f"{source}: {key} has shape {array.shape}; expected (n_examples, n_features) or "
            "(n_examples, height, width)"
        )
    if array.shape[0] == 0 or array[0].size == 0:
        raise DataError(f"{source}: {key} is empty (shape {array.shape})")
    matrix = array.reshape(array.shape[0], -1)
    if np.issubdtype(matrix.dtype, np.floating) and not np.isfinite(matrix).all():
        row, column = np.argwhere(~np.isfinite(matrix))[0]
        raise DataError(
            f"{source}: {key} contains NaN or infinite values (first at row {row}, column {column}); "
            "drop or repair those rows"
        )
    if binarize_method is None:
        if _is_spin_coded(matrix):  # ±1 (spins): the same binary data, −1 read as 0
            matrix = (matrix == 1).astype(np.uint8)
        _require_binary(matrix, source=source, key=key)
        return torch.from_numpy(np.array(matrix, dtype=np.float32))
    if binarize_method not in BINARIZE_METHODS:
        raise DataError(
            f"binarize must be one of {', '.join(map(repr, BINARIZE_METHODS))} or None, got {binarize_method!r}"
        )
    if pixel_max is None:
        pixel_max = 255.0 if np.issubdtype(matrix.dtype, np.integer) else 1.0
    lowest, highest = float(matrix.min()), float(matrix.max())
    if lowest < 0 or highest > pixel_max:
        raise DataError(
            f"{source}: {key} has values from {lowest:g} to {highest:g}, outside [0, {pixel_max:g}]; "
            "pass pixel_max= (--pixel-max) the value meaning 'fully on'"
        )
    scaled = torch.from_numpy(matrix.astype(np.float32)).div_(float(pixel_max))
    return binarize(scaled, generator=generator, stochastic=binarize_method == "stochastic")


def as_labels(array: np.ndarray, *, source: str, key: str, n_examples: int) -> Tensor:
    """Class labels as an int64 vector, checked against the number of examples.

    Parameters
    ----------
    array : numpy.ndarray, shape (n_examples,) or (n_examples, 1)
        Non-negative integer values (floats are accepted when integral).
    source, key : str
        Named in error messages.
    n_examples : int
        Rows of the matching input array.

    Returns
    -------
    Tensor, shape (n_examples,), int64
    """
    array = np.asarray(array)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    if array.ndim != 1:
        raise DataError(f"{source}: {key} has shape {array.shape}; labels must be a vector (n_examples,)")
    if array.shape[0] != n_examples:
        raise DataError(
            f"{source}: {key} has {array.shape[0]} labels but the inputs have {n_examples} examples; "
            "the label and input files do not belong together"
        )
    if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        raise DataError(f"{source}: {key} has dtype {array.dtype}, expected integer class labels")
    if np.issubdtype(array.dtype, np.floating):
        if not np.isfinite(array).all():
            raise DataError(f"{source}: {key} contains NaN or infinite labels")
        if not (array == np.round(array)).all():
            raise DataError(f"{source}: {key} holds non-integer values; labels must be class indices")
    if array.size and array.min() < 0:
        raise DataError(f"{source}: {key} has negative labels (min {array.min()}); labels start at 0")
    return torch.from_numpy(array.astype(np.int64))


def _is_spin_coded(matrix: np.ndarray) -> bool:
    """Whether every value is −1 or +1 and some are −1 (binary data coded as spins)."""
    if not np.issubdtype(matrix.dtype, np.signedinteger) and not np.issubdtype(matrix.dtype, np.floating):
        return False
    return bool((matrix == -1).any()) and bool(((matrix == -1) | (matrix == 1)).all())


def _require_binary(matrix: np.ndarray, *, source: str, key: str) -> None:
    # uint8 is the common case (every shared .npz); max() is much cheaper than two compares.
    if matrix.dtype == np.uint8:
        is_binary = int(matrix.max()) <= 1
    else:
        is_binary = bool(((matrix == 0) | (matrix == 1)).all())
    if is_binary:
        return
    row, column = np.argwhere((matrix != 0) & (matrix != 1))[0]
    raise DataError(
        f"{source}: {key} must be binary (0/1) but holds other values, e.g. {matrix[row, column]:g} at "
        f"row {row}, column {column} (range {float(matrix.min()):g} to {float(matrix.max()):g}); "
        "for grey levels pass binarize= (--binarize) 'threshold' or 'stochastic', with pixel_max= (--pixel-max) "
        "the value meaning fully on, or binarise the data first with boltzlab.data.binarize"
    )


def require_nonempty_file(path: Path, what: str) -> None:
    """Refuse a missing path, a folder or an empty file, saying what was expected."""
    if not path.exists():
        raise DataError(f"{path}: no such file; expected {what}")
    if not path.is_file():
        raise DataError(f"{path}: not a regular file; expected {what}")
    if path.stat().st_size == 0:
        raise DataError(f"{path}: the file is empty (0 bytes); expected {what}; fetch or write it again")
