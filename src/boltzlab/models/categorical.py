"""Categorical (Potts) visible units: one-hot sites, sequences in and out, the profile base, the gauge.

A visible layer of ``L`` sites of ``q`` states each is held one-hot, a 0/1 tensor of width
``L·q`` with one 1 per site (site ``i``'s states in columns ``i·q … i·q + q − 1``), so every
energy, GEMM and sufficient statistic of the binary models applies to it as it is; outside the
library a sequence is ``L`` symbol indices. This module holds what the Potts RBM and the Potts
DBM share about that layer (docs/algorithms.md §1.5):

- reading sequences (:func:`as_one_hot`: an :class:`~boltzlab.data.sequences.Alignment`, symbol
  indices or one-hot rows) and enumerating them (:func:`all_categorical_states`);
- the profile base ``b^A_i = log((1 − λ)·f_i + λ/q)`` with the hidden layers uniform, its
  normaliser (a log-sum-exp per site where a binary unit has a softplus) and its exact draws
  (:class:`CategoricalVisible`), and the fields' start at that profile when training begins
  from zero fields;
- the zero-sum gauge of the fields and of the weights into the first hidden layer
  (:func:`gauge_visible_coupling_`), which leaves the distribution unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Self

import numpy as np
import torch
from torch import Tensor

from boltzlab.data.sequences import Alignment, Alphabet, get_alphabet
from boltzlab.errors import ValidationError
from boltzlab.models.witness import DEFAULT_WITNESS_ROWS, WitnessRows
from boltzlab.rng import sample_categorical
from boltzlab.validation import check_positive_int, check_sample_weights, require

__all__ = [
    "DEFAULT_PSEUDOCOUNT",
    "CategoricalVisible",
    "all_categorical_states",
    "alphabet_record",
    "as_one_hot",
    "categorical_shape",
    "gauge_visible_coupling_",
    "logsumexp_sites",
    "one_hot_indices",
]

#: Pseudocount λ of the profile base: ``f = (1 − λ)·frequencies + λ/q`` (every ``b^A`` finite).
DEFAULT_PSEUDOCOUNT = 0.05
# The most states an enumeration may visit (either side): 2^40, as for the binary RBM.
_MAX_ENUMERATED_BITS = 40


def all_categorical_states(
    n_sites: int,
    n_states: int,
    *,
    start: int = 0,
    stop: int | None = None,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device = "cpu",
) -> Tensor:
    """Rows ``start..stop-1`` of the ``q^L`` sequences, one-hot; shape ``(stop − start, L·q)``.

    Sequence ``s`` has site ``i`` in state ``(s // q^i) mod q`` (site 0 the least significant
    digit), so for ``q = 2`` the order is that of :func:`~boltzlab.models.rbm.all_binary_states`.
    """
    stop = n_states**n_sites if stop is None else stop
    codes = torch.arange(start, stop, device=device, dtype=torch.int64)
    powers = n_states ** torch.arange(n_sites, device=device, dtype=torch.int64)
    indices = torch.div(codes[:, None], powers[None, :], rounding_mode="floor") % n_states
    return one_hot_indices(indices, n_states, dtype=dtype)


def one_hot_indices(indices: Tensor, n_states: int, *, dtype: torch.dtype = torch.float32) -> Tensor:
    """Symbol indices ``(n, L)`` as one-hot rows ``(n, L·q)`` in ``dtype`` (same device)."""
    n, n_sites = indices.shape
    out = torch.zeros(n, n_sites, n_states, dtype=dtype, device=indices.device)
    out.scatter_(2, indices.to(torch.int64)[:, :, None], 1.0)
    return out.view(n, n_sites * n_states)


def _as_index_matrix(data: Any, name: str) -> Tensor:
    if isinstance(data, Alignment):
        return data.sequences
    if isinstance(data, Tensor):
        tensor = data.detach()
        if tensor.device.type == "meta":
            raise ValidationError(f"{name} is on the 'meta' device, which holds shapes but no values")
        return tensor
    try:
        return torch.as_tensor(np.asarray(data))
    except (TypeError, ValueError) as error:
        raise ValidationError(f"{name} could not be read as an array: {error}") from None


def as_one_hot(
    data: Any,
    name: str,
    *,
    n_sites: int,
    n_states: int,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
) -> Tensor:
    """Sequences as one-hot rows ``(n, L·q)`` of ``dtype`` on ``device`` (a copy).

    Accepts an :class:`~boltzlab.data.sequences.Alignment`, symbol indices of shape
    ``(n, L)`` (integers in ``0 … q−1``), one-hot rows ``(n, L·q)`` or ``(n, L, q)``; refuses
    anything else with the reason.
    """
    if isinstance(data, Alignment):
        require(
            data.alphabet.q == n_states,
            f"{name}: the alignment's alphabet has {data.alphabet.q} symbols ({data.alphabet.symbols!r}), "
            f"the model has {n_states} states per site",
        )
    tensor = _as_index_matrix(data, name)
    if tensor.dim() == 3:
        require(
            tuple(tensor.shape[1:]) == (n_sites, n_states),
            f"{name} has shape {tuple(tensor.shape)}; expected (n, {n_sites}, {n_states}) one-hot",
        )
        tensor = tensor.reshape(tensor.shape[0], n_sites * n_states)
    require(
        tensor.dim() == 2,
        f"{name} must be symbol indices (n, {n_sites}) or one-hot rows (n, {n_sites * n_states}), "
        f"got shape {tuple(tensor.shape)}",
    )
    require(tensor.shape[0] > 0, f"{name} is empty (0 sequences)")
    if tensor.dtype == torch.bool:
        tensor = tensor.to(torch.uint8)
    if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
        raise ValidationError(f"{name} contains NaN or infinite values")
    width = tensor.shape[1]
    if width == n_sites:  # symbol indices
        values = tensor.to(torch.float64)
        bad = values[(values < 0) | (values >= n_states) | (values != torch.round(values))]
        if bad.numel():
            raise ValidationError(
                f"{name} holds symbol indices outside 0..{n_states - 1}: {bad.numel()} of them, e.g. "
                f"{bad.flatten()[0].item()!r}; read sequences with boltzlab.data.read_fasta"
            )
        return one_hot_indices(tensor.to(device=device, dtype=torch.int64), n_states, dtype=dtype)
    require(
        width == n_sites * n_states,
        f"{name} has {width} columns; the model expects symbol indices ({n_sites} columns, one per site) "
        f"or one-hot rows ({n_sites * n_states} = {n_sites} sites × {n_states} states)",
    )
    binary = bool(((tensor == 0) | (tensor == 1)).all())
    counts = tensor.reshape(tensor.shape[0], n_sites, n_states).sum(2)
    if not binary or not bool((counts == 1).all()):
        rows = torch.nonzero((counts != 1).any(1)).flatten() if binary else torch.tensor([0])
        raise ValidationError(
            f"{name} must be one-hot (exactly one 1 per site of {n_states} columns); row {int(rows[0])} is not"
        )
    return tensor.to(device=device, dtype=dtype).clone()


def logsumexp_sites(logits: Tensor, n_states: int) -> Tensor:
    """``Σ_i logsumexp_a logits[:, i, a]`` of rows ``(n, L·q)``; float64 ``(n,)``."""
    n = logits.shape[0]
    return torch.logsumexp(logits.view(n, -1, n_states), 2).sum(1, dtype=torch.float64)


def categorical_shape(
    n_sites: int | None,
    n_states: int | None,
    first_weights: Tensor | None,
    alphabet: str | Alphabet | None,
    *,
    model: str,
) -> tuple[int, int, Tensor | None, Alphabet | None]:
    """Check a categorical model's shape arguments: ``(L, q, weights into layer 1 as (L·q, n_1), alphabet)``.

    ``first_weights`` may have the shape ``(L, q, n_1)`` (which gives ``L`` and ``q``) or
    ``(L·q, n_1)`` (which needs ``q``); ``q`` may also come from ``alphabet``. ``model`` names
    the class in messages.
    """
    symbols = None if alphabet is None else get_alphabet(alphabet)
    if n_states is None and symbols is not None:
        n_states = symbols.q
    if first_weights is not None:
        first_weights = torch.as_tensor(first_weights)
        if first_weights.dim() == 3:
            require(
                n_states in (None, first_weights.shape[1]) and n_sites in (None, first_weights.shape[0]),
                f"weights of shape {tuple(first_weights.shape)} disagree with n_sites={n_sites}, n_states={n_states}",
            )
            n_sites, n_states = first_weights.shape[0], first_weights.shape[1]
            first_weights = first_weights.reshape(n_sites * n_states, first_weights.shape[2])
        else:
            require(
                n_states is not None and first_weights.dim() == 2 and first_weights.shape[0] % n_states == 0,
                "weights into the first hidden layer of shape (L·q, n_1) need n_states, and L·q must be a "
                "multiple of it; or give them the shape (L, q, n_1)",
            )
            n_sites = first_weights.shape[0] // n_states
    require(
        n_sites is not None and n_states is not None,
        f"a {model} needs n_sites and n_states (or an alphabet), or weights of shape (L, q, n_1)",
    )
    n_sites = check_positive_int(n_sites, "n_sites")
    n_states = check_positive_int(n_states, "n_states")
    require(n_states >= 2, f"a categorical unit needs n_states >= 2, got {n_states}")
    require(
        symbols is None or symbols.q == n_states,
        f"the alphabet has {0 if symbols is None else symbols.q} symbols, but n_states={n_states}",
    )
    return n_sites, n_states, first_weights, symbols


def alphabet_record(symbols: Alphabet) -> dict[str, Any]:
    """What a model's metadata keeps of its alphabet (read back by ``CategoricalVisible.alphabet``)."""
    return {"name": symbols.name, "symbols": symbols.symbols, "gap": symbols.gap}


@torch.no_grad()
def gauge_visible_coupling_(weights: Tensor, fields: Tensor, next_bias: Tensor, n_states: int) -> None:
    """Move ``weights`` ``(L·q, J)`` and ``fields`` ``(L·q,)`` to the zero-sum gauge, in place.

    ``W_iaj −= mean_a W_iaj`` with ``next_bias_j += Σ_i mean_a W_iaj`` (the energy of every
    state is unchanged: one-hot ``v`` picks one ``a`` per site), and ``g_ia −= mean_a g_ia``
    (every energy shifts by the same constant, so log Z shifts by it and every log-likelihood
    is unchanged).
    """
    coupling = weights.view(-1, n_states, weights.shape[1])
    mean = coupling.mean(1, keepdim=True)
    next_bias.add_(mean.sum((0, 1)))
    coupling.sub_(mean)
    site_fields = fields.view(-1, n_states)
    site_fields.sub_(site_fields.mean(1, keepdim=True))


class CategoricalVisible:
    """Mixin: a visible layer of categorical sites, with the profile base and every hidden layer uniform.

    The model sets ``n_states`` and provides ``layer_sizes`` (visible first, ``L·q`` wide),
    ``dtype``, ``device``, the ``base_logits`` buffer ``(L·q,)`` and ``base_fitted``, and
    ``metadata``; it gets the sites, the alphabet, data checks, the profile base (which
    :class:`~boltzlab.models.base_rate.BaseRateModel`'s ``log_f``, visible logits and
    ``init_chains`` then use) and the conversion back to symbol indices. It must come before
    ``BaseRateModel`` in the bases, whose binary base it replaces.
    """

    n_states: int
    layer_sizes: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    base_logits: Tensor
    base_fitted: bool
    metadata: dict[str, Any]
    #: How the layerwise operators read each layer; the hidden ones are binary.
    layer_kinds: tuple[str, ...]
    #: The fields ``g`` (the visible bias parameter, shape ``(L·q,)``), as the model holds them.
    _fields: Callable[[], Tensor]
    #: Whether training starts all-zero fields at the fitted profile (:meth:`start_fields_at_profile_`);
    #: set it to False on a model to train from zero fields (benchmarks/centering.py does).
    profile_start: bool = True

    @property
    def layer_states(self) -> tuple[int, ...]:
        """States per unit of each layer: ``q`` for the sites, 2 for binary units."""
        return (self.n_states, *(2,) * (len(self.layer_sizes) - 1))

    @property
    def n_sites(self) -> int:
        """``L``, the number of categorical sites."""
        return self.layer_sizes[0] // self.n_states

    @property
    def alphabet(self) -> Alphabet | None:
        """The states' symbols, when the model was given (or trained with) an alphabet."""
        entry = self.metadata.get("alphabet")
        if not isinstance(entry, dict):
            return None
        return Alphabet(str(entry["name"]), str(entry["symbols"]), entry.get("gap"))

    def validate_data(self, data: Any, name: str = "data") -> Tensor:
        """``data`` as one-hot rows ``(n, L·q)`` in the model's dtype and device (see :func:`as_one_hot`).

        The hook through which the trainer, :func:`boltzlab.log_likelihood`, the estimators'
        ``check_data`` and :func:`boltzlab.sample` accept sequences for this model.
        """
        return as_one_hot(
            data, name, n_sites=self.n_sites, n_states=self.n_states, dtype=self.dtype, device=self.device
        )

    def to_indices(self, v: Tensor) -> Tensor:
        """One-hot rows ``(n, L·q)`` as symbol indices ``(n, L)``, int64."""
        return v.reshape(v.shape[0], self.n_sites, self.n_states).argmax(2)

    # ------------------------------------------------------------------ base
    def set_base_rate(
        self,
        data: Any,
        *,
        smoothing: float = DEFAULT_PSEUDOCOUNT,
        sample_weights: Tensor | None = None,
        witness_rows: int = DEFAULT_WITNESS_ROWS,
    ) -> Self:
        """Fit the profile base to ``data``'s (weighted) site frequencies; returns ``self``.

        ``f_i = (1 − λ)·(weighted frequencies at site i) + λ/q`` with ``λ = smoothing``, and
        ``b^A_i = log f_i``. The pseudocount keeps every ``b^A`` finite; it changes the
        variance of estimators, never their target. A model with witness rows (the Potts RBM)
        also keeps rows of ``data`` for the verdict's missing-mass check (docs/trust.md).

        Parameters
        ----------
        data : Alignment, indices (n, L) or one-hot (n, L·q)
        smoothing : float in (0, 1], default 0.05
        sample_weights : Tensor of shape (n,), optional
            Per-sequence weights (:func:`boltzlab.data.sequence_weights`); uniform if absent.
        witness_rows : int, default 1000
        """
        require(0.0 < smoothing <= 1.0, f"smoothing must be in (0, 1], got {smoothing}")
        one_hot = self.validate_data(data, "data").to(torch.float64)
        if sample_weights is None:
            frequencies = one_hot.mean(0)
        else:
            weights = check_sample_weights(sample_weights, one_hot.shape[0], device=one_hot.device)
            frequencies = (weights @ one_hot) / weights.sum()
        profile = (1.0 - smoothing) * frequencies + smoothing / self.n_states
        if isinstance(self, WitnessRows):
            self.set_witness(one_hot, n_rows=witness_rows)
        with torch.no_grad():
            self.base_logits.copy_(profile.log().to(self.dtype))
        self.base_fitted = True
        return self

    @torch.no_grad()
    def start_fields_at_profile_(self) -> bool:
        """Start fields that are all zero at the fitted profile (gauged); whether it did.

        Training calls this after fitting the base. From zero fields the plain gradient fits the
        sites' frequencies through every column of ``W`` at once: on the WW domain the 20 hidden
        units of a PCD-trained model became copies of one another and the model stayed the
        independent-site profile (test −53.06 nats against −48.54 from the profile;
        docs/training.md, "Centring"). Hinton (2010, §8) gives the same advice for
        binary units. Fields that are not all zero (a model trained before, or set by hand)
        are left alone, and so is every model whose ``profile_start`` is False.
        """
        fields = self._fields()
        if not self.profile_start or not self.base_fitted or bool(fields.any()):
            return False
        profile = self.base_logits.detach().view(-1, self.n_states)
        fields.copy_((profile - profile.mean(1, keepdim=True)).reshape(-1).to(fields.dtype))
        return True

    def _base_log_norm(self) -> Tensor:
        """``Σ_i logsumexp_a b^A_ia + J log 2``: ``log p1(x) = b^A·v − this``; 0-dim float64.

        A fitted profile is normalised per site (the sum is 0); the uniform base (``b^A = 0``)
        gives ``L log q``.
        """
        base = self.base_logits.detach().to(torch.float64)
        return logsumexp_sites(base[None, :], self.n_states)[0] + sum(self.layer_sizes[1:]) * math.log(2.0)

    def _base_visible(self, n_chains: int, generator: torch.Generator) -> Tensor:
        """``n_chains`` exact draws of ``v`` from the profile base, one-hot ``(n_chains, L·q)``."""
        probabilities = torch.softmax(self.base_logits.view(self.n_sites, self.n_states), 1)
        expanded = probabilities.expand(n_chains, -1, -1).contiguous()
        return sample_categorical(expanded, generator=generator).view(n_chains, self.layer_sizes[0])
