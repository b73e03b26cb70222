"""The witness rows an RBM keeps: a few data rows for the log Z verdict's missing-mass check.

A log Z estimate is checked against a certified lower bound whose chains must start from
data to find a mode that only data reach (docs/trust.md, "The witness rows"). An RBM that
was fitted to data (``set_base_rate(data)``, or training, which fits it) keeps up to
:data:`DEFAULT_WITNESS_ROWS` of those rows, so that every later estimate — ``logz MODEL``
without ``--data``, the report of a model whose run folder is gone — starts the witness from
data too. The rows go into the model file with the parameters (``"witness"``, packed eight
units to a byte); ``clear_witness()`` or ``witness_rows=0`` leaves them out, and estimates of
such a model then say ``"unchecked"``.

The rows are chosen reproducibly: a permutation drawn on the CPU from a fixed seed over the
number of rows, so the same data give the same witness on every device and on resume.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from boltzlab.validation import as_model_data, require

__all__ = [
    "DEFAULT_WITNESS_ROWS",
    "MAX_WITNESS_ROWS",
    "WitnessRows",
    "check_witness_rows",
    "pack_bits",
    "unpack_bits",
]

#: Rows kept by default: as many as the verdict's witness runs chains (one chain per row).
DEFAULT_WITNESS_ROWS = 1000
#: The most rows a model keeps or a model file may hold (784 units: 9.8 MB packed).
MAX_WITNESS_ROWS = 100_000
# The seed of the permutation that picks the rows: fixed, so the choice is a function of the data.
_CHOICE_SEED = 0x5717


def check_witness_rows(n_rows: Any) -> int:
    """``n_rows`` if it is a row count a model may keep (an integer in [0, MAX_WITNESS_ROWS])."""
    require(
        isinstance(n_rows, int) and not isinstance(n_rows, bool) and 0 <= n_rows <= MAX_WITNESS_ROWS,
        f"witness_rows must be an integer in [0, {MAX_WITNESS_ROWS}], got {n_rows!r}",
    )
    return n_rows


def pack_bits(rows: Tensor) -> Tensor:
    """0/1 rows, shape ``(n, units)``, as bytes, unit ``8k + i`` in bit ``i`` of byte ``k``.

    Returns a CPU uint8 tensor of shape ``(n, ceil(units / 8))``; the padding bits are 0.
    """
    n, units = rows.shape
    n_bytes = max(1, math.ceil(units / 8))
    padded = torch.zeros(n, n_bytes * 8, dtype=torch.uint8)
    padded[:, :units] = rows.detach().to(device="cpu", dtype=torch.uint8)
    weights = torch.tensor([1, 2, 4, 8, 16, 32, 64, 128], dtype=torch.uint8)
    return (padded.view(n, n_bytes, 8) * weights).sum(2, dtype=torch.uint8)


def unpack_bits(bits: Tensor, units: int, *, dtype: torch.dtype, device: torch.device) -> Tensor:
    """Inverse of :func:`pack_bits`: shape ``(n, units)`` of 0/1 in ``dtype`` on ``device``."""
    shifts = torch.arange(8, dtype=torch.uint8)
    unpacked = (bits[:, :, None] >> shifts) & 1
    return unpacked.reshape(bits.shape[0], -1)[:, :units].to(device=device, dtype=dtype)


def _choose_rows(n_examples: int, n_rows: int) -> Tensor:
    """``min(n_rows, n_examples)`` row indices, sorted: a fixed-seed CPU permutation's first ones."""
    if n_rows >= n_examples:
        return torch.arange(n_examples)
    generator = torch.Generator().manual_seed(_CHOICE_SEED)
    return torch.randperm(n_examples, generator=generator)[:n_rows].sort().values


class WitnessRows:
    """Mixin for a model whose verdict has a certified bound (the RBM): ``set_witness``,
    ``clear_witness`` and the ``witness`` rows.

    The model provides ``layer_sizes`` (visible first), ``dtype`` and ``device``. The rows
    are kept packed on the CPU (``witness_bits``, uint8, shape ``(n, ceil(n_visible / 8))``),
    outside ``state_dict``: a model's parameters and its witness are saved together by
    ``save``, and training sets the witness again from its (fingerprinted) data on resume.
    """

    layer_sizes: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    #: Packed witness rows, or ``None`` (no rows kept: estimates say ``"unchecked"``).
    witness_bits: Tensor | None = None

    def set_witness(self, data: Any, *, n_rows: int = DEFAULT_WITNESS_ROWS) -> Any:
        """Keep up to ``n_rows`` rows of ``data`` (0/1, shape ``(n_examples, n_visible)``); returns ``self``.

        ``n_rows=0`` keeps none (as :meth:`clear_witness`). The rows are a fixed-seed choice,
        so the same data always give the same witness.
        """
        if check_witness_rows(n_rows) == 0:
            return self.clear_witness()
        # The model's own data check (±1 spins, sequences) when it has one; 0/1 rows otherwise.
        rows = as_model_data(self, data, "data").to(device="cpu", dtype=torch.uint8)
        require(rows.shape[0] > 0, "data has no rows to keep as the model's witness")
        self.witness_bits = pack_bits(rows[_choose_rows(rows.shape[0], n_rows)])
        return self

    def set_witness_bits(self, bits: Tensor) -> Any:
        """Keep already packed rows (a model file's ``"witness"`` tensor), checked; returns ``self``."""
        width = max(1, math.ceil(self.layer_sizes[0] / 8))
        require(
            bits.dtype == torch.uint8 and bits.dim() == 2 and bits.shape[1] == width,
            f"witness rows must be uint8 of shape (n, {width}) for {self.layer_sizes[0]} visible units, "
            f"got {str(bits.dtype).removeprefix('torch.')} {tuple(bits.shape)}",
        )
        require(
            1 <= bits.shape[0] <= MAX_WITNESS_ROWS,
            f"witness rows must number 1 to {MAX_WITNESS_ROWS}, got {bits.shape[0]}",
        )
        self.witness_bits = bits.detach().to("cpu").clone()
        return self

    def clear_witness(self) -> Any:
        """Keep no witness rows (privacy, size); returns ``self``. Estimates then say ``"unchecked"``
        unless given ``check_data``."""
        self.witness_bits = None
        return self

    @property
    def witness(self) -> Tensor | None:
        """The kept rows, shape ``(n, n_visible)``, 0/1 in the model's dtype on its device; or ``None``."""
        if self.witness_bits is None:
            return None
        return unpack_bits(self.witness_bits, self.layer_sizes[0], dtype=self.dtype, device=self.device)
