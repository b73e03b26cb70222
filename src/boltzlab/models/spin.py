"""±1 spin visible units: held as 0/1 inside, read by the energy as ``s = 2v − 1``.

A spin layer's units take ``s ∈ {−1, +1}``, and the model's parameters are those of the spin
energy (docs/algorithms.md §1.7): for an RBM

    E(s, h) = −sᵀWh − bᵀs − cᵀh,

and for a DBM the same in its first matrix and visible bias. Inside the library a chain holds
the layer as ``v = (s + 1)/2 ∈ {0, 1}``, so every operator, sampler, compiled kernel, exact
enumeration and transition matrix of the binary models applies to it unchanged; only what the
energy reads of the layer differs (:meth:`SpinVisible.visible_values`). Outside (data in,
samples out) the layer is ±1: :meth:`SpinVisible.validate_data` takes ±1 (or 0/1 with 0 for
−1) and :meth:`SpinVisible.to_spins` turns chains back.

**The binary model it equals.** Substituting ``s = 2v − 1``,

    −E(s, h) = vᵀ(2W)h + (2b)ᵀv + (c − Wᵀ1)ᵀh − Σ_i b_i,

so a spin model is the binary model with ``W' = 2W``, ``b' = 2b``, ``c' = c − Wᵀ1`` (for a DBM,
the first matrix, the visible bias and the first hidden bias) and every energy shifted by the
constant ``Σ_i b_i``. The distribution over states is the same, so every log-likelihood is the
same; the partition functions differ by that constant at every β of the tempered family:

    log Z_spin(β) = log Z_binary(β) − β·Σ_i b_i

(the base at β = 0 is the same distribution, the base-rate model of the data's spins). What
differs is the *parametrisation*, and with it training: the gradient in spin coordinates,
``⟨s hᵀ⟩_data − ⟨s hᵀ⟩_model``, is the binary gradient taken with the visible layer centred at
½ and scaled by 2 — the conditioning that makes ±1 units train differently from 0/1 ones
(docs/training.md, "Spin units").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Self

import torch
from torch import Tensor

from boltzlab.models.witness import DEFAULT_WITNESS_ROWS
from boltzlab.validation import as_spin_tensor

__all__ = ["SpinVisible", "binary_coupling"]


def binary_coupling(
    weights: Tensor, visible_bias: Tensor, next_bias: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """The 0/1 model's ``(2W, 2b, c − Wᵀ1)`` for the spin model's ``(W, b, c)``; float64, detached.

    ``weights`` couples the spin layer to the next one, shape ``(n_visible, n_next)``;
    ``next_bias`` is that layer's bias ``(n_next,)``.
    """
    weights64 = weights.detach().to(torch.float64)
    return (
        2.0 * weights64,
        2.0 * visible_bias.detach().to(torch.float64),
        next_bias.detach().to(torch.float64) - weights64.sum(0),
    )


class SpinVisible:
    """Mixin: a visible layer of ±1 spins, held 0/1 inside (module docstring).

    The model provides ``layer_sizes`` (visible first), ``dtype``, ``device`` and
    ``_spin_bias()`` (the visible bias parameter of the spin energy); it gets the data checks,
    the conversion to spins, what the energy reads of the layer and the constant that
    separates its ``log Z`` from the equal binary model's. It must come before
    ``BaseRateModel`` in the bases, whose ``set_base_rate`` it wraps to read spins.
    """

    layer_sizes: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    #: The visible bias of the spin energy (the model's parameter, shape ``(n_visible,)``).
    _spin_bias: Callable[[], Tensor]

    def validate_data(self, data: Any, name: str = "data") -> Tensor:
        """``data`` as the 0/1 rows the model holds, ``(n, n_visible)`` in its dtype and device.

        Takes ±1 spins, or 0/1 with 0 for −1 (:func:`~boltzlab.validation.as_spin_tensor`);
        the hook through which the trainer, :func:`boltzlab.log_likelihood`, the estimators'
        ``check_data`` and :func:`boltzlab.sample` accept data for this model.
        """
        return as_spin_tensor(data, name, n_units=self.layer_sizes[0], dtype=self.dtype, device=self.device)

    @staticmethod
    def to_spins(v: Tensor) -> Tensor:
        """Chains' 0/1 visible rows as spins ``2v − 1`` (a new tensor, same dtype and shape)."""
        return v * 2 - 1

    @staticmethod
    def visible_values(v: Tensor) -> Tensor:
        """What the energy reads of 0/1 visible rows: the spins ``2v − 1`` (a new tensor)."""
        return v * 2 - 1

    def spin_offset(self) -> Tensor:
        """``Σ_i b_i``: ``log Z(β) = log Z_binary(β) − β·Σ_i b_i`` (module docstring); 0-dim float64."""
        return self._spin_bias().detach().to(torch.float64).sum()

    def set_base_rate(
        self,
        data: Any,
        *,
        smoothing: float = 0.05,
        sample_weights: Tensor | None = None,
        witness_rows: int = DEFAULT_WITNESS_ROWS,
    ) -> Self:
        """Fit the base-rate base to the spins' marginals, as :meth:`BaseRateModel.set_base_rate`;
        ``data`` is ±1 (or 0/1 with 0 for −1). Returns ``self``."""
        return super().set_base_rate(  # type: ignore[misc]
            self.validate_data(data, "data"),
            smoothing=smoothing,
            sample_weights=sample_weights,
            witness_rows=witness_rows,
        )
