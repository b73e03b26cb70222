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
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from itertools import pairwise
from typing import Any

import torch
from torch import Tensor, nn

from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.io import ModelKind, register_model_kind
from boltzlab.models.base import MarginalTerms, all_ones, log_f_marginal
from boltzlab.models.files import ModelFile, copy_buffers
from boltzlab.models.rbm import enumerate_softplus_sums
from boltzlab.numerics import softplus
from boltzlab.rng import resolve_generator, sample_bernoulli
from boltzlab.validation import as_binary_tensor, check_positive_int, require

__all__ = ["DBM"]

_FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


class DBM(ModelFile, nn.Module):
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
        require(dtype in _FLOAT_DTYPES, f"dtype must be a floating dtype, got {dtype}")
        device = torch.device(device)
        sizes = None if layer_sizes is None else self._check_sizes(layer_sizes)
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
                (torch.randn(rows, cols, generator=gen, device=device, dtype=torch.float64) * weight_std).to(
                    dtype
                )
                for rows, cols in pairwise(sizes)
            ]
        vectors = self._check_biases(biases, sizes, dtype, device)
        for index, tensor in enumerate(matrices):
            require(bool(torch.isfinite(tensor).all()), f"weights[{index}] contains NaN or infinite values")
        for index, tensor in enumerate(vectors):
            require(bool(torch.isfinite(tensor).all()), f"biases[{index}] contains NaN or infinite values")
        self.weights = nn.ParameterList(matrices)
        self.biases = nn.ParameterList(vectors)
        self.register_buffer("base_logits", torch.zeros(sizes[0], dtype=dtype, device=device))
        self.base_fitted = False
        self.metadata: dict[str, Any] = {}
        n_layers = len(sizes)
        self.update_groups = (tuple(range(1, n_layers, 2)), tuple(range(0, n_layers, 2)))

    @staticmethod
    def _check_sizes(layer_sizes: Sequence[int]) -> tuple[int, ...]:
        require(
            isinstance(layer_sizes, Sequence) and not isinstance(layer_sizes, str) and len(layer_sizes) >= 3,
            f"layer_sizes must list at least 3 layers (visible and L >= 2 hidden; one hidden layer is "
            f"boltzlab.RBM), got {layer_sizes!r}",
        )
        return tuple(check_positive_int(size, f"layer_sizes[{i}]") for i, size in enumerate(layer_sizes))

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
        vectors = []
        for index, (bias, size) in enumerate(zip(biases, sizes, strict=True)):
            vector = torch.as_tensor(bias)
            require(
                tuple(vector.shape) == (size,),
                f"biases[{index}] must have shape ({size},), got {tuple(vector.shape)}",
            )
            vectors.append(vector.to(device=device, dtype=dtype).clone())
        return vectors

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

    # ------------------------------------------------------------------ base model
    def set_base_rate(self, data: Tensor, *, smoothing: float = 0.05) -> DBM:
        """Fit the base-rate base to ``data`` (shape ``(n_examples, n_visible)``, 0/1); returns ``self``.

        ``p̄ = (1 − smoothing)·mean(data) + smoothing/2``, ``smoothing`` in (0, 1], as
        :meth:`RBM.set_base_rate`.
        """
        require(0.0 < smoothing <= 1.0, f"smoothing must be in (0, 1], got {smoothing}")
        n_visible = self.layer_sizes[0]
        data = as_binary_tensor(data, "data", n_units=n_visible, dtype=torch.float64, device=self.device)
        mean = (1.0 - smoothing) * data.mean(0) + 0.5 * smoothing
        with torch.no_grad():
            self.base_logits.copy_(torch.logit(mean).to(self.dtype))
        self.base_fitted = True
        return self

    def set_uniform_base(self) -> DBM:
        """Use the uniform base (plain energy scaling); returns ``self``."""
        with torch.no_grad():
            self.base_logits.zero_()
        self.base_fitted = False
        return self

    def _base_log_norm(self) -> Tensor:
        """``Σ_i softplus(b^A_i) + (Σ_{l≥1} n_l)·log 2``: ``log p1(h) = b^A·v − this``; 0-dim float64."""
        base = self.base_logits.detach().to(torch.float64)
        return softplus(base).sum() + sum(self.layer_sizes[1:]) * math.log(2.0)

    def _parameters64(self) -> tuple[list[Tensor], list[Tensor]]:
        weights = [matrix.detach().to(torch.float64) for matrix in self.weights]
        return weights, [vector.detach().to(torch.float64) for vector in self.biases]

    # ------------------------------------------------------------------ densities
    def energy(self, layers: tuple[Tensor, ...]) -> Tensor:
        """``E(h)`` of joint states (all ``L + 1`` layers); float64, shape ``(n,)``.

        Being multilinear, it also gives ``E_Q[E]`` of a factorial ``Q`` from its means.
        """
        states = [layer.to(torch.float64) for layer in layers]
        weights, biases = self._parameters64()
        total = sum(((states[l] @ matrix) * states[l + 1]).sum(1) for l, matrix in enumerate(weights))
        return -(total + sum(state @ bias for state, bias in zip(states, biases, strict=True)))

    def log_f(self, layers: tuple[Tensor, ...], beta: Tensor | float) -> Tensor:
        """Joint tempered log density ``−βE(h) + (1−β) log p1(h)``; float64, shape ``(n,)``."""
        v = layers[0].to(torch.float64)
        beta_t = torch.as_tensor(beta, dtype=torch.float64, device=v.device)
        log_p1 = v @ self.base_logits.detach().to(torch.float64) - self._base_log_norm()
        return -beta_t * self.energy(layers) + (1.0 - beta_t) * log_p1

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
        """``b^l + h^{l−1}W^l + h^{l+1}W^{l+1}ᵀ`` (the β = 1 log-odds of layer ``index``); a new tensor."""
        if index == 0:
            return torch.addmm(self.biases[0], layers[1], self.weights[0].t())
        logits = torch.addmm(self.biases[index], layers[index - 1], self.weights[index - 1])
        if index < len(self.weights):
            logits.addmm_(layers[index + 1], self.weights[index].t())
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
            v64 = layers[0].to(torch.float64)
            base = v64 @ self.base_logits.to(torch.float64) - self._base_log_norm()
            linear = sum(
                layers[index].to(torch.float64) @ self.biases[index].detach().to(torch.float64)
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
            return -self._log_f_visible(v, float(beta))
        return -log_f_marginal(self.marginal_terms(layers), beta)

    def _coupling(self, rows: Sequence[int], columns: Sequence[int], weights: list[Tensor]) -> Tensor:
        """Block matrix of the weights from layers ``rows`` to layers ``columns`` (no two adjacent
        layers on one side); shape ``(Σ n_rows, Σ n_columns)``, float64."""
        blocks = []
        for row in rows:
            line = []
            for column in columns:
                if column == row + 1:
                    line.append(weights[row])
                elif column == row - 1:
                    line.append(weights[column].t())
                else:
                    line.append(weights[0].new_zeros(self.layer_sizes[row], self.layer_sizes[column]))
            blocks.append(torch.cat(line, dim=1))
        return torch.cat(blocks, dim=0)

    def _log_f_visible(self, v: Tensor, beta: float) -> Tensor:
        """``log Σ_h f_β(v, h)`` for float64 ``v`` of shape ``(n, n_visible)``; float64, ``(n,)``.

        Given ``v``, the hidden layers of one parity are independent given the other; the
        smaller parity is enumerated per example, ``v`` entering through layer 1 only.
        """
        sizes = self.layer_sizes
        weights, biases = self._parameters64()
        odd, even = self.update_groups
        rows, columns = sorted((odd, even[1:]), key=lambda group: sum(sizes[i] for i in group))
        n_enumerated = sum(sizes[i] for i in rows)
        require(
            n_enumerated <= 24,
            f"the exact free energy of v enumerates the smaller parity of hidden layers, here "
            f"{n_enumerated} units (at most 24); pass the even layers instead",
        )
        coupling = beta * self._coupling(rows, columns, weights)
        row_biases = beta * torch.cat([biases[i] for i in rows])
        column_biases = beta * torch.cat([biases[i] for i in columns])
        from_visible = beta * (v @ weights[0])  # the input to layer 1, first in the odd group
        base = self.base_logits.detach().to(torch.float64)
        constant = v @ (beta * biases[0] + (1.0 - beta) * base) - (1.0 - beta) * self._base_log_norm()
        totals = []
        for example in range(v.shape[0]):
            linear, offset = row_biases.clone(), column_biases.clone()
            (linear if 1 in rows else offset)[: sizes[1]] += from_visible[example]
            chunks = enumerate_softplus_sums(coupling, offset, linear, 0.0, chunk_states=None)
            totals.append(torch.logsumexp(torch.stack([torch.logsumexp(c, 0) for c in chunks]), 0))
        return constant + torch.stack(totals)

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
            if all_ones(beta):
                return self._layer_input(index, layers)
            if index == 0:
                logits = torch.addmm(self.biases[0] - self.base_logits, layers[1], self.weights[0].t())
                return logits.mul_(beta[:, None]).add_(self.base_logits)
            return self._layer_input(index, layers).mul_(beta[:, None])

    def init_chains(
        self, n_chains: int, *, generator: torch.Generator | int | None = None, beta: float = 0.0
    ) -> Chains:
        """``n_chains`` exact samples from the base (v from the base-rate model, hidden uniform).

        ``beta`` only labels the chains; the states are exact at β = 0.
        """
        n_chains = check_positive_int(n_chains, "n_chains")
        generator = resolve_generator(generator, self.device)
        with torch.no_grad():
            probabilities = [torch.sigmoid(self.base_logits).expand(n_chains, -1).contiguous()]
            probabilities += [
                torch.full((n_chains, size), 0.5, dtype=self.dtype, device=self.device)
                for size in self.layer_sizes[1:]
            ]
            layers = tuple(sample_bernoulli(p, generator=generator) for p in probabilities)
        beta_t = torch.full((n_chains,), float(beta), dtype=self.dtype, device=self.device)
        return Chains(layers=layers, beta=beta_t)

    def chains_from(
        self, v: Tensor, *, generator: torch.Generator | int | None = None, beta: float = 1.0
    ) -> Chains:
        """Chains started at visible states ``v`` (shape ``(n, n_visible)``), hidden layers
        drawn from the mean-field posterior ``Q(h | v)`` (5 updates; ``beta`` only labels them).

        Where PCD/SAP starts its persistent chains with ``init="data"``: like the RBM's
        ``chains_from``, but ``p(h | v)`` of a DBM is not factorial, so its factorial
        mean-field approximation is sampled instead.
        """
        from boltzlab.models.mean_field import mean_field_posterior

        generator = resolve_generator(generator, self.device)
        means = mean_field_posterior(self, v, n_updates=5).means
        with torch.no_grad():
            hidden = [sample_bernoulli(mean.contiguous(), generator=generator) for mean in means[1:]]
        beta_t = torch.full((means[0].shape[0],), float(beta), dtype=self.dtype, device=self.device)
        return Chains(layers=(means[0], *hidden), beta=beta_t)

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
        require(
            enumerated in ("auto", "even", "odd"),
            f"enumerated must be 'auto', 'even' or 'odd', got {enumerated!r}",
        )
        beta = float(beta)
        sizes = self.layer_sizes
        odd, even = self.update_groups
        if enumerated == "auto":
            enumerated = "odd" if sum(sizes[i] for i in odd) < sum(sizes[i] for i in even) else "even"
        rows, columns = (even, odd) if enumerated == "even" else (odd, even)
        n_enumerated = sum(sizes[i] for i in rows)
        require(
            n_enumerated <= 40,
            f"exact enumeration of the {enumerated} layers needs at most 40 units, got {n_enumerated}",
        )
        weights, biases = self._parameters64()
        base = self.base_logits.detach().to(torch.float64)

        def scaled_biases(layers: tuple[int, ...]) -> Tensor:
            parts = [beta * biases[i] + ((1.0 - beta) * base if i == 0 else 0.0) for i in layers]
            return torch.cat(parts)

        yield from enumerate_softplus_sums(
            beta * self._coupling(rows, columns, weights),
            scaled_biases(columns),
            scaled_biases(rows),
            -(1.0 - beta) * float(self._base_log_norm()),
            chunk_states=chunk_states,
        )


# ---------------------------------------------------------------------------- model file kind
def _dbm_tensors(model: DBM) -> dict[str, Tensor]:
    tensors = {f"weights.{index}": matrix for index, matrix in enumerate(model.weights)}
    tensors.update({f"biases.{index}": vector for index, vector in enumerate(model.biases)})
    tensors["base_logits"] = model.base_logits
    return tensors


def _dbm_expected_shapes(shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    # The number of layers is read from the file: weights.0, weights.1, ... up to the first
    # gap (a later stray weights.k is then reported as unexpected by the caller).
    n_weights = 0
    while f"weights.{n_weights}" in shapes:
        shape = shapes[f"weights.{n_weights}"]
        if len(shape) != 2 or min(shape) < 1:
            raise ValueError(
                f"tensor 'weights.{n_weights}' has shape {shape}, expected "
                f"(n_{n_weights}, n_{n_weights + 1}), both positive"
            )
        n_weights += 1
    if n_weights < 2:
        raise ValueError(
            f"a DBM needs tensors 'weights.0' and 'weights.1' (L >= 2 hidden layers), found {n_weights}"
        )
    sizes = [shapes["weights.0"][0], *(shapes[f"weights.{index}"][1] for index in range(n_weights))]
    expected = {f"weights.{index}": (sizes[index], sizes[index + 1]) for index in range(n_weights)}
    expected.update({f"biases.{index}": (size,) for index, size in enumerate(sizes)})
    expected["base_logits"] = (sizes[0],)
    return expected


def _dbm_build(tensors: dict[str, Tensor], *, dtype: torch.dtype, device: torch.device) -> DBM:
    n_weights = sum(name.startswith("weights.") for name in tensors)
    model = DBM(
        weights=[tensors[f"weights.{index}"] for index in range(n_weights)],
        biases=[tensors[f"biases.{index}"] for index in range(n_weights + 1)],
        dtype=dtype,
        device=device,
    )
    copy_buffers(model, tensors, ("base_logits",), dtype=dtype, device=device)
    return model


register_model_kind(
    ModelKind(
        name="dbm",
        model_class=DBM,
        tensors=_dbm_tensors,
        expected_shapes=_dbm_expected_shapes,
        build=_dbm_build,
    )
)
