"""Binary deep Boltzmann machine with L ≥ 2 hidden layers, on its tempered family.

Layers ``h⁰ = v, h¹, …, h^L`` with sizes ``n_0, …, n_L``; ``weights[l]`` (the paper's
``W^{l+1}``) couples layers ``l`` and ``l + 1``. The energy is that of Salakhutdinov &
Hinton (2009), eq. 1, with biases on every layer (docs/algorithms.md §1.2)::

    E(h) = −Σ_{l=1..L} h^{l−1}ᵀ W^l h^l − Σ_{l=0..L} b^lᵀ h^l.

Tempered family (§1.3): the normalised base ``p1`` is the base-rate model on ``v`` and
uniform on every hidden layer, ``log f_β(h) = −βE(h) + (1 − β)·log p1(h)``, so
``Z(0) = 1`` and ``Z(1) = Z``. At β the conditionals are those of a DBM with parameters
``βW``, ``βb^l`` (l ≥ 1) and ``βb⁰ + (1 − β)b^A``.

Layers of one parity are conditionally independent given the other parity, so a sweep
updates the odd layers, then the even ones (``update_groups``). The odd layers are the
summed-out group (docs/open-questions.md item 26; summing the even layers is equally valid, and
:meth:`DBM.enumerate_log_f` does whichever is cheaper): with ``x`` the even layers and
``a^l = b^l + h^{l−1}W^l + W^{l+1}h^{l+1}`` the input of odd layer ``l``,

    log f_β(x) = (1 − β)·log p1'(x) + β·Σ_{even l} b^l·h^l + Σ_{odd l} Σ_j softplus(β a^l_j)

— ``softplus(β a)``, not ``β softplus(a)``; ``p1'`` is the base with the odd layers' uniform
factors summed out (:class:`~boltzlab.models.base.MarginalTerms`).

**Mean field.** :func:`mean_field_fixed_point` iterates the means of the factorial posterior
``Q(h | v)`` to the fixed point of Salakhutdinov & Hinton (2009), §3,

    μ^l = σ(b^l + μ^{l−1}W^l + W^{l+1}μ^{l+1}),     μ⁰ = v,  no μ^{L+1} term,

in the schedule and from the initialisation that :mod:`boltzlab.models.mean_field` describes
(odd layers, then even hidden layers; bottom-up pass or zeros), on inputs already checked:
:meth:`DBM.chains_from` starts chains from it, and :mod:`boltzlab.models.mean_field` (which
imports this module) adds the checked public doors and the variational bound.

The exact sums over one parity (:meth:`DBM.enumerate_log_f`, the exact ``free_energy(v)``)
are in :mod:`boltzlab.models.dbm_enumeration`, the base in :mod:`boltzlab.models.base_rate`
and the file kind in :mod:`boltzlab.models.files`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import torch
from torch import Tensor, nn

from boltzlab import gemm
from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.io import register_model_kind
from boltzlab.models.base import MarginalTerms, all_ones, chains_at, log_f_marginal
from boltzlab.models.base_rate import BaseRateModel
from boltzlab.models.dbm_enumeration import DBMParameters64, enumerate_parity_log_f, visible_log_f
from boltzlab.models.files import ModelFile, dbm_kind
from boltzlab.models.parameters import check_dtype, check_finite, normal_weights, parameter_vector
from boltzlab.rng import resolve_generator, sample_bernoulli
from boltzlab.validation import as_binary_tensor, check_device, check_positive_int, require

__all__ = ["DBM", "MeanFieldResult", "check_layer_sizes", "mean_field_fixed_point"]


def check_layer_sizes(layer_sizes: Sequence[int]) -> tuple[int, ...]:
    """``layer_sizes`` of a DBM, ``[n_visible, n_hidden_1, …, n_hidden_L]`` with L ≥ 2, as ints.

    :class:`ValidationError` for fewer than three layers or a size that is not a positive int.
    """
    require(
        isinstance(layer_sizes, Sequence) and not isinstance(layer_sizes, str) and len(layer_sizes) >= 3,
        f"layer_sizes must list at least 3 layers (visible and L >= 2 hidden; one hidden layer is "
        f"boltzlab.RBM), got {layer_sizes!r}",
    )
    return tuple(check_positive_int(size, f"layer_sizes[{i}]") for i, size in enumerate(layer_sizes))


class DBM(BaseRateModel, ModelFile, nn.Module):
    """A binary deep Boltzmann machine; parameters only, so ``torch.optim`` and ``state_dict`` work.

    Parameters
    ----------
    layer_sizes : sequence of int, optional
        ``[n_visible, n_hidden_1, …, n_hidden_L]`` with L ≥ 2, when no ``weights`` are given;
        weights are then drawn from N(0, ``weight_std``²) with ``generator``.
    weights : sequence of Tensor, optional
        ``weights[l]`` has shape ``(layer_sizes[l], layer_sizes[l + 1])``; at least two.
    biases : sequence of Tensor, optional
        ``biases[l]`` has shape ``(layer_sizes[l],)``, one per layer; zeros by default.
    dtype : torch.dtype, default float32
    device : str or torch.device, default "cpu"
    generator : torch.Generator or int, optional
        Randomness for the initial weights (a seed is accepted too).
    weight_std : float, default 0.01

    Attributes
    ----------
    weights : ParameterList of L tensors, ``weights[l]`` shape (n_l, n_{l+1})
    biases : ParameterList of L + 1 tensors, ``biases[l]`` shape (n_l,)
    base_logits : buffer, shape (n_visible,)
        ``b^A``, the log-odds of the base-rate model on ``v`` (zeros: uniform base).
    base_fitted : bool
        Whether ``base_logits`` was fitted to data (``set_base_rate``).
    update_groups : ((1, 3, …), (0, 2, …))
        Odd layers (summed out), then even layers.

    Examples
    --------
    >>> import boltzlab as bl
    >>> dbm = bl.DBM(layer_sizes=[5, 3, 2], generator=0)
    >>> dbm.layer_sizes, dbm.update_groups
    ((5, 3, 2), ((1,), (0, 2)))
    >>> abs(bl.exact_log_z(dbm, beta=0.0)) < 1e-12
    True
    """

    update_groups: tuple[tuple[int, ...], ...]

    def __init__(
        self,
        layer_sizes: Sequence[int] | None = None,
        *,
        weights: Sequence[Tensor] | None = None,
        biases: Sequence[Tensor] | None = None,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
        generator: torch.Generator | int | None = None,
        weight_std: float = 0.01,
    ) -> None:
        super().__init__()
        check_dtype(dtype)
        device = check_device(device)
        sizes = None if layer_sizes is None else check_layer_sizes(layer_sizes)
        if weights is not None:
            matrices = self._check_weights(weights, sizes)
            sizes = (matrices[0].shape[0], *(matrix.shape[1] for matrix in matrices))
            matrices = [matrix.to(device=device, dtype=dtype).clone() for matrix in matrices]
        else:
            require(
                sizes is not None,
                "give layer_sizes=[n_visible, n_hidden_1, n_hidden_2, ...] or weights=[W1, W2, ...]",
            )
            gen = resolve_generator(generator, device)
            matrices = [
                normal_weights(rows, cols, generator=gen, weight_std=weight_std, dtype=dtype, device=device)
                for rows, cols in pairwise(sizes)
            ]
        vectors = self._check_biases(biases, sizes, dtype, device)
        check_finite({f"weights[{index}]": tensor for index, tensor in enumerate(matrices)})
        check_finite({f"biases[{index}]": tensor for index, tensor in enumerate(vectors)})
        self.weights = nn.ParameterList(matrices)
        self.biases = nn.ParameterList(vectors)
        self.register_buffer("base_logits", torch.zeros(sizes[0], dtype=dtype, device=device))
        self.base_fitted = False
        self.metadata: dict[str, Any] = {}
        n_layers = len(sizes)
        self.update_groups = (tuple(range(1, n_layers, 2)), tuple(range(0, n_layers, 2)))

    @staticmethod
    def _check_weights(weights: Sequence[Tensor], sizes: tuple[int, ...] | None) -> list[Tensor]:
        require(
            isinstance(weights, Sequence) and len(weights) >= 2,
            "weights must be a list of at least 2 matrices [W1, W2, ...] (a DBM has L >= 2 hidden "
            "layers; one hidden layer is boltzlab.RBM), got "
            f"{len(weights) if isinstance(weights, Sequence) else type(weights).__name__}",
        )
        matrices = [torch.as_tensor(matrix) for matrix in weights]
        for index, matrix in enumerate(matrices):
            require(
                matrix.dim() == 2 and min(matrix.shape) >= 1 and not matrix.is_complex(),
                f"weights[{index}] must be a real 2-D tensor with positive sizes, got shape "
                f"{tuple(matrix.shape)}",
            )
        for index, (lower, upper) in enumerate(pairwise(matrices)):
            require(
                lower.shape[1] == upper.shape[0],
                f"weights[{index + 1}] has shape {tuple(upper.shape)} but weights[{index}] has "
                f"{lower.shape[1]} columns; weights[l] must have shape (n_l, n_(l+1))",
            )
        found = (matrices[0].shape[0], *(matrix.shape[1] for matrix in matrices))
        require(
            sizes is None or sizes == found,
            f"layer_sizes={list(sizes or ())} but the weights give {list(found)}",
        )
        return matrices

    @staticmethod
    def _check_biases(
        biases: Sequence[Tensor] | None, sizes: tuple[int, ...], dtype: torch.dtype, device: torch.device
    ) -> list[Tensor]:
        if biases is None:
            return [torch.zeros(size, dtype=dtype, device=device) for size in sizes]
        require(
            isinstance(biases, Sequence) and len(biases) == len(sizes),
            f"biases must be a list of {len(sizes)} vectors (one per layer), got "
            f"{len(biases) if isinstance(biases, Sequence) else type(biases).__name__}",
        )
        return [
            parameter_vector(torch.as_tensor(bias), size, f"biases[{index}]", dtype, device)
            for index, (bias, size) in enumerate(zip(biases, sizes, strict=True))
        ]

    # ------------------------------------------------------------------ properties
    @property
    def layer_sizes(self) -> tuple[int, ...]:
        return (self.weights[0].shape[0], *(matrix.shape[1] for matrix in self.weights))

    @property
    def n_hidden_layers(self) -> int:
        return len(self.weights)

    @property
    def dtype(self) -> torch.dtype:
        return self.weights[0].dtype

    @property
    def device(self) -> torch.device:
        return self.weights[0].device

    def extra_repr(self) -> str:
        base = "base-rate" if self.base_fitted else "uniform"
        return f"layer_sizes={list(self.layer_sizes)}, dtype={self.dtype}, base={base}"

    # ------------------------------------------------------------------ parameters
    def _parameters64(self) -> DBMParameters64:
        return DBMParameters64(
            weights=tuple(matrix.detach().to(torch.float64) for matrix in self.weights),
            biases=tuple(vector.detach().to(torch.float64) for vector in self.biases),
            base_logits=self.base_logits.detach().to(torch.float64),
        )

    # ------------------------------------------------------------------ densities
    def energy(self, layers: tuple[Tensor, ...]) -> Tensor:
        """``E(h)`` of joint states (all ``L + 1`` layers); float64, shape ``(n,)``.

        Being multilinear, it also gives ``E_Q[E]`` of a factorial ``Q`` from its means.
        """
        states = [layer.to(torch.float64) for layer in layers]
        states[0] = self.visible_values(states[0])
        parameters = self._parameters64()
        total = sum(
            ((states[l] @ matrix) * states[l + 1]).sum(1) for l, matrix in enumerate(parameters.weights)
        )
        return -(total + sum(state @ bias for state, bias in zip(states, parameters.biases, strict=True)))

    def _full_layers(self, layers: tuple[Tensor | None, ...] | Tensor) -> tuple[Tensor | None, ...]:
        """All ``L + 1`` layers from either all of them or the even ones ``(v, h², …)``."""
        n_layers = len(self.layer_sizes)
        n_even = len(self.update_groups[1])
        if not isinstance(layers, (tuple, list)) or len(layers) not in (n_layers, n_even):
            raise ValidationError(
                f"layers must be a tuple of all {n_layers} layers or of the {n_even} even layers "
                "(v, h2, ...): a DBM's summed-out state is its even layers; for log p(v) use "
                "free_energy(v) (exact, small models) or boltzlab.variational_lower_bound"
            )
        if len(layers) == n_layers:
            return tuple(layers)
        full: list[Tensor | None] = [None] * n_layers
        for index, layer in zip(self.update_groups[1], layers, strict=True):
            full[index] = layer
        return tuple(full)

    def _layer_input(self, index: int, layers: tuple[Tensor | None, ...]) -> Tensor:
        """``b^l + h^{l−1}W^l + h^{l+1}W^{l+1}ᵀ``, the input of layer ``index``; a new tensor.

        For a hidden layer it is the β = 1 log-odds; for the visible layer of a DBM with ±1
        units the log-odds of ``s = +1`` are twice it (:meth:`conditional_logits` is what to call).
        """
        if index == 0:
            return gemm.addmm(self.biases[0], layers[1], self.weights[0].t())
        below = self.visible_values(layers[0]) if index == 1 else layers[index - 1]
        logits = gemm.addmm(self.biases[index], below, self.weights[index - 1])
        if index < len(self.weights):
            gemm.addmm_(logits, layers[index + 1], self.weights[index].t())
        return logits

    def marginal_terms(self, layers: tuple[Tensor | None, ...]) -> MarginalTerms:
        """Odd-summed pieces of ``log f_β`` for even-layer states (see module docstring).

        ``layers`` holds all layers (odd ones are ignored) or only the even ones, each
        ``(n, n_l)``. ``preactivation`` concatenates the odd layers' inputs ``a¹, a³, …``.
        """
        layers = self._full_layers(layers)
        odd, even = self.update_groups
        with torch.no_grad():
            preactivation = torch.cat([self._layer_input(index, layers) for index in odd], dim=1)
            base = self._base_log_p1(layers[0])
            linear = sum(
                (self.visible_values(layers[0]) if index == 0 else layers[index]).to(torch.float64)
                @ self.biases[index].detach().to(torch.float64)
                for index in even
            )
        return MarginalTerms(base=base, linear=linear, preactivation=preactivation)

    def free_energy(self, layers: tuple[Tensor | None, ...] | Tensor, beta: Tensor | float = 1.0) -> Tensor:
        """``−log f_β`` with the odd layers summed out, or exactly ``−log f_β(v)``; float64, ``(n,)``.

        Parameters
        ----------
        layers : tuple of Tensor, or Tensor of shape (n, n_visible)
            Even-layer states (all layers, or only ``(v, h², …)``): the odd layers are summed
            out analytically. A bare tensor ``v``: *every* hidden layer is summed out, the
            hidden layers of one parity by enumeration (the smaller, at most 24 units) and
            the others analytically, so ``log p(v) = −free_energy(v) − log Z`` exactly.
        beta : float or Tensor of shape (n,), default 1
        """
        if isinstance(layers, Tensor):
            v = as_binary_tensor(
                layers, "v", n_units=self.layer_sizes[0], dtype=torch.float64, device=self.device
            )
            return -visible_log_f(self._parameters64(), v, float(beta))
        return -log_f_marginal(self.marginal_terms(layers), beta)

    # ------------------------------------------------------------------ sampling
    def conditional_logits(self, index: int, layers: tuple[Tensor | None, ...], beta: Tensor) -> Tensor:
        """Log-odds of layer ``index`` given its neighbours, at per-chain β; shape ``(n, n_index)``.

        Hidden layer ``l``: ``β·(b^l + h^{l−1}W^l + h^{l+1}W^{l+1}ᵀ)``. Visible:
        ``β·(b⁰ + h¹W¹ᵀ) + (1 − β)·b^A`` (docs/algorithms.md §1.3, "Gibbs at β"). Only the
        neighbouring layers are read. ``beta`` has shape ``(n,)``.
        """
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(self.biases):
            raise ValidationError(f"this DBM has layers 0..{len(self.biases) - 1}, got index {index!r}")
        with torch.no_grad():
            if index == 0:
                return self._visible_logits(self.biases[0], layers[1], self.weights[0], beta)
            logits = self._layer_input(index, layers)
            return logits if all_ones(beta) else logits.mul_(beta[:, None])

    def chains_from(
        self, v: Tensor, *, generator: torch.Generator | int | None = None, beta: float = 1.0
    ) -> Chains:
        """Chains started at visible states ``v`` (shape ``(n, n_visible)``), hidden layers
        drawn from the mean-field posterior ``Q(h | v)`` (5 updates; ``beta`` only labels them).

        Where PCD/SAP starts its persistent chains with ``init="data"``: like the RBM's
        ``chains_from``, but ``p(h | v)`` of a DBM is not factorial, so its factorial
        mean-field approximation is sampled instead.
        """
        generator = resolve_generator(generator, self.device)
        # mean_field_posterior(self, v, n_updates=5) less its check that self is a DBM.
        v = as_binary_tensor(v, "data", n_units=self.layer_sizes[0], dtype=self.dtype, device=self.device)
        means = mean_field_fixed_point(self, v, 5, "bottom_up").means
        with torch.no_grad():
            hidden = [sample_bernoulli(mean.contiguous(), generator=generator) for mean in means[1:]]
        return chains_at((means[0], *hidden), beta)

    # ------------------------------------------------------------------ enumeration
    def enumerate_log_f(
        self, beta: float = 1.0, *, chunk_states: int | None = None, enumerated: str = "auto"
    ) -> Iterator[Tensor]:
        """Yield ``log f_β`` of every state of one parity of layers, the other summed out.

        Float64. ``enumerated="even"`` enumerates ``(v, h², …)`` with the odd layers summed
        out (the form of :meth:`marginal_terms`); ``"odd"`` enumerates ``(h¹, h³, …)`` with
        the even layers summed out (each even unit's input then includes ``(1 − β) b^A`` on
        the visible layer); ``"auto"`` takes the parity with fewer units. Either way the
        chunks' ``logsumexp`` is ``log Z(β)``. States come in chunks of ``chunk_states`` in
        the bit order of :func:`~boltzlab.models.rbm.all_binary_states` over the enumerated
        layers' units, concatenated in layer order.
        """
        yield from enumerate_parity_log_f(
            self._parameters64(), float(beta), chunk_states=chunk_states, enumerated=enumerated
        )


# ---------------------------------------------------------------------------- mean field
@dataclass(frozen=True, slots=True)
class MeanFieldResult:
    """Means of the factorial posterior ``Q(h | v)`` after a number of fixed-point updates.

    Attributes
    ----------
    means : tuple of Tensor
        ``(v, μ¹, …, μ^L)``, shapes ``(n, n_l)`` in the model's dtype; index 0 is the data
        itself, so ``means`` can be passed wherever a DBM expects its layers.
    n_updates : int
        Number of updates applied after the initialisation.
    last_change : Tensor, shape (n,), float64
        ``max_j |Δμ_j|`` over every hidden unit in the last update (``inf`` when
        ``n_updates == 0``): how far each example is from the fixed point.
    """

    means: tuple[Tensor, ...]
    n_updates: int
    last_change: Tensor


def mean_field_fixed_point(dbm: DBM, v: Tensor, n_updates: int, init: str) -> MeanFieldResult:
    """The fixed-point iteration of :func:`~boltzlab.models.mean_field.mean_field_posterior` on
    inputs already checked.

    ``v`` (shape ``(n, n_visible)``) must be in the model's dtype and on its device; for callers
    (the mean-field training objective, :meth:`DBM.chains_from`) that validated their data once
    at the public door.
    """
    n_layers = len(dbm.layer_sizes)
    ones = torch.ones(v.shape[0], dtype=dbm.dtype, device=dbm.device)
    means: list[Tensor] = [v]
    with torch.no_grad():
        for index in range(1, n_layers):
            if init == "zeros":
                means.append(v.new_zeros(v.shape[0], dbm.layer_sizes[index]))
            else:  # bottom-up: the input from below only (the layer above is not set yet)
                lower = dbm.visible_values(v) if index == 1 else means[index - 1]
                below = gemm.addmm(dbm.biases[index], lower, dbm.weights[index - 1])
                means.append(below.sigmoid_())
        last_change = torch.full((v.shape[0],), torch.inf, dtype=torch.float64, device=v.device)
        odd, even = dbm.update_groups
        for _ in range(n_updates):
            last_change = torch.zeros_like(last_change)
            for group in (odd, even[1:]):
                snapshot = tuple(means)
                for index in group:
                    new = dbm.conditional_logits(index, snapshot, ones).sigmoid_()
                    change = (new - means[index]).abs().amax(1).to(torch.float64)
                    last_change = torch.maximum(last_change, change)
                    means[index] = new
    return MeanFieldResult(means=tuple(means), n_updates=n_updates, last_change=last_change)


register_model_kind(dbm_kind(DBM))
