"""The tempered-family protocol every model implements, and the hidden-summed log density.

Every model defines the geometric path between a tractable, normalised base ``p1`` and
itself (docs/algorithms.md §1.3):

    log f_β(x) = β·(−E(x)) + (1 − β)·log p1(x),       Z(0) = 1,  Z(1) = Z.

Samplers, trainers and estimators are written against :class:`TemperedModel` only, so they
work for RBMs, DBMs and the continuous toy family alike.

**Summed-out form.** Models whose first update group (the hidden layer of an RBM, the odd
layers of a DBM) is conditionally factorial given the rest expose, through
:meth:`TemperedModel.marginal_terms`, the three pieces from which the log density with that
group summed out follows for *any* β without another matrix product:

    log f_β(x) = (1 − β)·base(x) + β·linear(x) + Σ_j softplus(β·a_j(x)).

``a(x)`` is the β-free pre-activation of the summed group, so the first group's logits at β
are exactly ``β·a``. Computing ``a = c + vW`` once per step and reusing it for the weights,
the sampler and diagnostics is what keeps tempered estimators at two GEMMs per sweep.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.numerics import softplus

__all__ = ["MarginalTerms", "TemperedModel", "log_f_marginal", "log_f_marginal_all", "path_derivative"]


@dataclass(frozen=True, slots=True)
class MarginalTerms:
    """Pieces of the summed-out tempered log density of a batch of states.

    Attributes
    ----------
    base : Tensor, shape (n,), float64
        ``log p1(x)`` of the summed-out state, including the normalising constants, so that
        ``log f_0`` is a normalised log-probability.
    linear : Tensor, shape (n,), float64
        Terms linear in β: ``−E`` restricted to the kept layers (e.g. ``b·v`` for an RBM).
    preactivation : Tensor, shape (n, n_summed)
        β-free input of each summed-out unit (``c + vW`` for an RBM), in the model's dtype.
        A model with nothing to sum out (a continuous family, whose ``log f_β`` is linear
        in β) has ``n_summed = 0`` and an empty ``update_groups[0]``.
    """

    base: Tensor
    linear: Tensor
    preactivation: Tensor


def _beta_column(beta: Tensor | float, n: int, like: Tensor) -> Tensor:
    beta_t = torch.as_tensor(beta, dtype=torch.float64, device=like.device)
    if beta_t.dim() == 0:
        beta_t = beta_t.expand(n)
    return beta_t


def all_ones(beta: Tensor) -> bool:
    """Whether every chain is at β = 1, checked only on the CPU.

    There the check costs microseconds and saves a pass over (n_chains, units) per layer;
    on an accelerator it would force a device synchronisation, so the multiply is done.
    """
    return beta.device.type == "cpu" and bool(torch.all(beta == 1))


def tempered_log_f(energy: Tensor, log_p1: Tensor, beta: Tensor | float) -> Tensor:
    """The geometric path ``−β·E(x) + (1 − β)·log p1(x)``; float64, shape ``(n,)``.

    Parameters
    ----------
    energy : Tensor, shape (n,), float64
        ``E(x)`` of the target.
    log_p1 : Tensor, shape (n,), float64
        ``log p1(x)`` of the normalised base, in nats.
    beta : float or Tensor of shape (n,)
        One inverse temperature for all states, or one per state.
    """
    beta_t = torch.as_tensor(beta, dtype=torch.float64, device=log_p1.device)
    return -beta_t * energy + (1.0 - beta_t) * log_p1


def chains_at(layers: tuple[Tensor, ...], beta: float) -> Chains:
    """Chains holding ``layers`` (each ``(n_chains, size)``), every one labelled ``beta``.

    β is stored in the layers' dtype and on their device, as :class:`Chains` expects.
    """
    first = layers[0]
    return Chains(
        layers=layers, beta=torch.full((first.shape[0],), float(beta), dtype=first.dtype, device=first.device)
    )


def log_f_marginal(terms: MarginalTerms, beta: Tensor | float) -> Tensor:
    """``log f_β(x)`` with the first group summed out; float64, shape ``(n,)``.

    ``beta`` is a scalar or has shape ``(n,)`` (one inverse temperature per state).
    """
    n = terms.base.shape[0]
    beta_t = _beta_column(beta, n, terms.base)
    pre = terms.preactivation.to(torch.float64)
    summed = softplus(beta_t[:, None] * pre).sum(1)
    return (1.0 - beta_t) * terms.base + beta_t * terms.linear + summed


def log_f_marginal_all(terms: MarginalTerms, betas: Tensor, *, dtype: torch.dtype = torch.float64) -> Tensor:
    """``log f_{β_k}(x_i)`` for every state and every level; shape ``(n, K)``, float64.

    The softplus over ``n·K·n_summed`` values is evaluated in ``dtype`` (float32 halves the
    cost for large ladders) and summed over units in float64.
    """
    betas = torch.as_tensor(betas, dtype=torch.float64, device=terms.base.device)
    pre = terms.preactivation.to(dtype)
    scaled = pre[:, None, :] * betas.to(dtype)[None, :, None]
    summed = softplus(scaled).sum(2, dtype=torch.float64)
    return (1.0 - betas)[None, :] * terms.base[:, None] + betas[None, :] * terms.linear[:, None] + summed


def path_derivative(terms: MarginalTerms, beta: Tensor | float) -> Tensor:
    """``s_β(x) = ∂/∂β log f_β(x)`` in the summed-out form; float64, shape ``(n,)``.

    ``s_β = linear − base + Σ_j a_j σ(β a_j)``; ``E_{p_β}[s_β] = d/dβ log Z(β)``.
    """
    n = terms.base.shape[0]
    beta_t = _beta_column(beta, n, terms.base)
    pre = terms.preactivation.to(torch.float64)
    return terms.linear - terms.base + (pre * torch.sigmoid(beta_t[:, None] * pre)).sum(1)


@runtime_checkable
class TemperedModel(Protocol):
    """What operators, tempering schemes, trainers and estimators need from a model.

    Layers are indexed from 0 (the visible layer). ``update_groups`` lists, in sweep order,
    groups of layers that are conditionally independent given all other layers (RBM:
    ``((1,), (0,))``, hidden first; DBM: odd layers, then even layers).
    """

    layer_sizes: tuple[int, ...]
    update_groups: tuple[tuple[int, ...], ...]

    @property
    def dtype(self) -> torch.dtype: ...

    @property
    def device(self) -> torch.device: ...

    def energy(self, layers: tuple[Tensor, ...]) -> Tensor:
        """Joint energy ``E(x)``, float64, shape ``(n,)``."""
        ...

    def log_f(self, layers: tuple[Tensor, ...], beta: Tensor | float) -> Tensor:
        """Joint tempered log density ``−βE(x) + (1−β) log p1(x)``, float64, shape ``(n,)``."""
        ...

    def conditional_logits(self, index: int, layers: tuple[Tensor, ...], beta: Tensor) -> Tensor:
        """Log-odds of layer ``index`` given the others at per-chain ``beta``.

        Returns a new tensor of shape ``(n, layer_sizes[index])`` that the caller may modify.
        """
        ...

    def marginal_terms(self, layers: tuple[Tensor, ...]) -> MarginalTerms:
        """Pieces of ``log f_β`` with ``update_groups[0]`` summed out (see module docstring)."""
        ...

    def init_chains(self, n_chains: int, *, generator: torch.Generator) -> Chains:
        """``n_chains`` exact samples from the base ``p1`` (β = 0)."""
        ...

    def enumerate_log_f(self, beta: float, *, chunk_states: int) -> Iterator[Tensor]:
        """Yield, chunk by chunk, ``log f_β`` of every state of the smallest set of layers
        whose enumeration gives ``Z(β)`` (float64). Used by exact oracles."""
        ...
