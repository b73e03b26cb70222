"""The tempering-scheme contract and the moves every scheme shares.

A tempering scheme makes several temperatures cooperate around *any* transition operator
(docs/architecture.md): it never imports a concrete operator, it is given one.

    scheme.init(model, n_chains, *, generator) -> state
    scheme.step(model, state, *, generator)    -> (state, info)
    scheme.samples(state)                      -> Chains     # the β = 1 chains
    scheme.state_tensors(state) / scheme.state_from_tensors(model, tensors)

States are frozen dataclasses; ``step`` returns a new one and never modifies its input.
``info`` holds per-step diagnostics and is never carried forward.

**Moves on the summed-out state.** Swap and temperature moves are accepted with the
summed-out densities ``log f_β(x)`` (hidden units, or a DBM's odd layers, summed out:
docs/algorithms.md §2.3–2.5), which is lower-variance than the joint energy. Such a move is a
valid Metropolis step for the marginal of the kept layers only, so the summed-out layers are
then redrawn from their exact conditional at the chain's (possibly new) β — a collapsed
Gibbs step. Gibbs sweeps would redraw them first anyway; state-dependent operators such as
flip-the-state need it (without it their next sweep starts from a hidden state drawn at
another temperature, which biases the chain; the same fix keeps AIS exact). The redraw costs
no matrix product: it reuses the pre-activations of ``marginal_terms``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.models.base import MarginalTerms, TemperedModel
from boltzlab.rng import rand, sample_bernoulli
from boltzlab.validation import check_chains_match

__all__ = ["TemperingScheme", "check_choice", "metropolis_accept", "redraw_summed_layers", "select_terms"]


@runtime_checkable
class TemperingScheme(Protocol):
    """A sampler that runs an operator at several temperatures (see module docstring)."""

    name: str

    def init(self, model: TemperedModel, n_chains: int, *, generator: torch.Generator) -> Any: ...

    def step(self, model: TemperedModel, state: Any, *, generator: torch.Generator) -> tuple[Any, Any]: ...

    def samples(self, state: Any) -> Chains: ...


def metropolis_accept(log_ratio: Tensor, *, generator: torch.Generator) -> Tensor:
    """Boolean acceptance of Metropolis moves with log acceptance ratios ``log_ratio``.

    ``accept = log(u) < log_ratio`` with ``u ~ U(0, 1)``; NaN ratios are rejected (a broken
    proposal must not poison the chain). Shape and device of ``log_ratio``.
    """
    uniform = rand(tuple(log_ratio.shape), generator=generator, dtype=torch.float64, device=log_ratio.device)
    ratio = torch.nan_to_num(log_ratio.to(torch.float64), nan=-torch.inf)
    return torch.log(uniform) < ratio


def redraw_summed_layers(
    model: TemperedModel, chains: Chains, terms: MarginalTerms, *, generator: torch.Generator
) -> Chains:
    """Redraw the layers of ``model.update_groups[0]`` from their conditional at each chain's β.

    ``terms`` must be ``model.marginal_terms(chains.layers)`` (the kept layers are unchanged
    by the redraw, so the terms stay valid). Returns new chains; the input is not modified.
    """
    group = model.update_groups[0]
    if not group:  # nothing is summed out (e.g. a continuous model): nothing to redraw
        return chains
    logits = terms.preactivation * chains.beta[:, None].to(terms.preactivation.dtype)
    probability = torch.sigmoid(logits)
    sizes = [model.layer_sizes[index] for index in group]
    parts = torch.split(probability, sizes, dim=1) if len(group) > 1 else (probability,)
    layers = list(chains.layers)
    for index, part in zip(group, parts, strict=True):
        layers[index] = sample_bernoulli(part.contiguous(), generator=generator).to(chains.dtype)
    # The redrawn layer is a Bernoulli draw: 0/1 whenever the others were.
    return Chains(layers=tuple(layers), beta=chains.beta, values_checked=chains.values_checked)


def select_terms(terms: MarginalTerms, index: Tensor | slice) -> MarginalTerms:
    """The rows ``index`` of summed-out terms (a state's terms do not depend on its β or slot,
    so schemes that permute, split or concatenate chains permute their terms alike)."""
    return MarginalTerms(
        base=terms.base[index], linear=terms.linear[index], preactivation=terms.preactivation[index]
    )


def check_choice(value: Any, choices: tuple[str, ...], name: str) -> str:
    """``value`` lower-cased if it is one of ``choices``; a :class:`ValidationError` naming them if not."""
    if not isinstance(value, str) or value.lower() not in choices:
        raise ValidationError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value.lower()


def check_state_chains(model: TemperedModel, chains: Chains) -> None:
    """A scheme state's chains in the model's dtype and on its device, else one clear error.

    For schemes whose ``step`` computes ``model.marginal_terms`` before the operator's own
    check could run: a state made for a float64 model and stepped with a float32 one would
    otherwise fail inside a matrix product (:func:`boltzlab.validation.check_chains_match`).
    """
    check_chains_match(
        model,
        chains,
        name="chains of the scheme's state",
        fix=(
            "start the state with scheme.init(model, n_chains, generator=...) for this model, or convert "
            "it with scheme.state_from_tensors(model, scheme.state_tensors(state))"
        ),
    )
