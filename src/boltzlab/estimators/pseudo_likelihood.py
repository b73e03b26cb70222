"""Pseudo-likelihood of binary and Potts RBMs: each site's conditional given all the others.

Besag (1975, *Statistical analysis of non-lattice data*, The Statistician 24:179) replaces the
likelihood, whose normaliser ``Z`` is intractable, by the product over sites of the
conditionals ``p(v_i | v_−i)``, each normalised over the ``q`` states of one site only. For an
RBM the hidden units are summed out, ``log f(v) = Σ_i g_{i,v_i} + Σ_j softplus(a_j(v))`` with
``a(v) = c + Σ_i W_{i,v_i}``, and the conditional of site ``i`` is a softmax over its states,

    log p(v_i = s | v_−i) = log f(v^{i←s}) − logsumexp_t log f(v^{i←t}),

where ``v^{i←s}`` is ``v`` with site ``i`` set to ``s``. Only site ``i``'s field and the
hidden pre-activation change: ``a(v^{i←s}) = a(v) + W_{i,s} − W_{i,v_i}``, so one site costs
``n·q·J`` softplus terms, all examples and states at once, and all ``L`` sites cost about what
one matrix product ``v W`` does (docs/training.md, "Pseudo-likelihood").

A **binary** RBM is the case ``q = 2`` with state 0 contributing nothing (``W_{i,0} = 0``,
``g_{i,0} = 0``; ``W_{i,1}`` and ``g_{i,1}`` are the weights row and visible bias of unit
``i``); a **Potts** RBM (:class:`~boltzlab.models.potts_rbm.PottsRBM`) reads its
``(L, q, J)`` weights and ``(L, q)`` fields as they are; a **spin** RBM
(:class:`~boltzlab.models.spin_rbm.SpinRBM`) is ``q = 2`` with the states ``−1, +1``
contributing ``−W_i, +W_i`` and ``−b_i, +b_i``, so its gradient for ``W_i`` is the ``+1``
state's less the ``−1`` state's. One code path serves all three.

**Normalisation.** :func:`pseudo_log_likelihood` reports, by default, the mean over examples
of the *average over sites* of ``log p(v_i | v_−i)``, in nats per site: a number between
``−log q`` (a uniform guess) and 0 that compares across alignments of different lengths.
``per_site=False`` gives the sum over sites, nats per example, the quantity whose gradient
:func:`pseudo_likelihood_gradient` returns and ``algorithm="pl"`` ascends. Neither is
scikit-learn's ``BernoulliRBM.score_samples``, which flips *one random unit* per example
and multiplies its log-conditional by the number of features: a stochastic, one-site
estimate of the sum, which changes from call to call.

**Gradient.** With ``p_is`` the conditional of state ``s`` at site ``i``, ``σ`` the logistic
function, ``H_i = Σ_s p_is σ(a(v^{i←s}))`` and ``R = L·σ(a(v)) − Σ_i H_i``, the gradient of
``Σ_i log p(v_i | v_−i)`` is, per example,

    ∂/∂g_{k,t}   = [v_k = t] − p_kt,
    ∂/∂c         = R,
    ∂/∂W_{k,t}   = [v_k = t]·(R + H_k) − p_kt·σ(a(v^{k←t})),

computed in the same pass over sites as the value (no autograd graph, so memory stays one
chunk of ``n·C·q·J`` terms); ``tests/training/test_pseudo_likelihood.py`` checks it against
autograd.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzlab import gemm
from boltzlab.errors import ValidationError
from boltzlab.models.potts_rbm import PottsRBM
from boltzlab.models.rbm import RBM
from boltzlab.models.spin_rbm import SpinRBM
from boltzlab.numerics import softplus
from boltzlab.validation import as_model_data, check_finite_model, check_positive_int, check_sample_weights

__all__ = [
    "PseudoLikelihoodGradient",
    "check_pseudo_likelihood_model",
    "pseudo_likelihood_gradient",
    "pseudo_log_likelihood",
    "site_log_conditionals",
]

# Terms n·C·q·J held at once by one chunk of sites (2^22 values: 16 MB in float32).
_CHUNK_TERMS = 1 << 22


@dataclass(frozen=True, slots=True)
class PseudoLikelihoodGradient:
    """The mean over a batch of ``Σ_i log p(v_i | v_−i)`` and its gradient.

    Attributes
    ----------
    value : Tensor, 0-d, float64
        Nats per example (the sum over sites, averaged over examples).
    weights : Tensor, shape of ``model.weights``
    visible_bias : Tensor, shape of ``model.visible_bias``
    hidden_bias : Tensor, shape of ``model.hidden_bias``
        Gradients of ``value`` (ascent directions), in the model's dtype.
    """

    value: Tensor
    weights: Tensor
    visible_bias: Tensor
    hidden_bias: Tensor


def check_pseudo_likelihood_model(model: Any, what: str = "the pseudo-likelihood") -> None:
    """Refuse a model whose pseudo-likelihood is not implemented (binary, spin and Potts RBMs only)."""
    if not isinstance(model, RBM | SpinRBM | PottsRBM):
        raise ValidationError(
            f"{what} is implemented for binary RBMs (bl.RBM), spin RBMs (SpinRBM) and Potts RBMs "
            f"(PottsRBM), not {type(model).__name__}"
        )


def _site_view(model: RBM | SpinRBM | PottsRBM, *, detach: bool) -> tuple[Tensor, Tensor]:
    """``W`` as ``(L, q, J)`` and the fields as ``(L, q)``; a binary RBM as ``q = 2`` with state 0
    zero, a spin RBM as ``q = 2`` with the states ``−W, +W`` (module docstring)."""
    weights, fields = model.weights, model.visible_bias
    if detach:
        weights, fields = weights.detach(), fields.detach()
    if isinstance(model, PottsRBM):
        return weights.view(model.n_sites, model.n_states, model.n_hidden), fields.view(
            model.n_sites, model.n_states
        )
    if isinstance(model, SpinRBM):
        return torch.stack([-weights, weights], 1), torch.stack([-fields, fields], 1)
    return torch.stack([torch.zeros_like(weights), weights], 1), torch.stack(
        [torch.zeros_like(fields), fields], 1
    )


def _state_indices(model: RBM | SpinRBM | PottsRBM, v: Tensor) -> Tensor:
    """Each site's state, ``(n, L)`` int64, from visible rows ``(n, n_visible)``."""
    return model.to_indices(v) if isinstance(model, PottsRBM) else v.to(torch.int64)


def _chunk_sites(n: int, n_states: int, n_hidden: int) -> int:
    return max(1, _CHUNK_TERMS // max(1, n * n_states * n_hidden))


def site_log_conditionals(model: RBM | SpinRBM | PottsRBM, v: Tensor) -> Tensor:
    """``log p(v_i | v_−i)`` for every example and site, hidden units summed out; shape ``(n, L)``.

    Built from differentiable operations on the model's parameters, so under
    ``torch.enable_grad()`` it can be differentiated (the tests do); training uses the
    hand-written :func:`pseudo_likelihood_gradient` instead, which keeps no graph.

    Parameters
    ----------
    model : RBM or PottsRBM
    v : Tensor, shape (n, n_visible)
        Visible rows in the model's dtype and on its device (0/1, or one-hot for a Potts RBM);
        trusted (use :func:`pseudo_log_likelihood` for checked input).

    Returns
    -------
    Tensor, shape (n, L), the model's dtype
        ``L`` is the number of sites: ``n_visible`` for a binary RBM, ``n_sites`` for a Potts RBM.
    """
    weights3, fields = _site_view(model, detach=False)
    n_sites, n_states, n_hidden = weights3.shape
    indices = _state_indices(model, v)
    n = v.shape[0]
    preactivation = torch.addmm(model.hidden_bias, model.visible_values(v), model.weights)
    chunk = _chunk_sites(n, n_states, n_hidden)
    parts = []
    for start in range(0, n_sites, chunk):
        stop = min(n_sites, start + chunk)
        sites = torch.arange(start, stop, device=v.device)
        index = indices[:, start:stop]
        block = weights3[start:stop]
        current = block[sites - start, index]  # (n, C, J): W_{i, v_i}
        inputs = preactivation[:, None, None, :] + block[None] - current[:, :, None, :]
        log_f = fields[start:stop][None] + softplus(inputs).sum(3)  # (n, C, q), up to a per-(n, i) constant
        chosen = log_f.gather(2, index[:, :, None])[:, :, 0]
        parts.append(chosen - torch.logsumexp(log_f, 2))
    return torch.cat(parts, 1)


@torch.no_grad()
def pseudo_likelihood_gradient(model: RBM | SpinRBM | PottsRBM, v: Tensor) -> PseudoLikelihoodGradient:
    """Mean over the rows of ``v`` of ``Σ_i log p(v_i | v_−i)``, and its exact gradient.

    The formulas are in the module docstring; one pass over chunks of sites computes the value
    and the gradient together.

    Parameters
    ----------
    model : RBM or PottsRBM
    v : Tensor, shape (n, n_visible)
        Trusted visible rows in the model's dtype and on its device.

    Returns
    -------
    PseudoLikelihoodGradient
        The value (nats per example, float64) and the ascent direction for each parameter.
    """
    weights3, fields = _site_view(model, detach=True)
    n_sites, n_states, n_hidden = weights3.shape
    indices = _state_indices(model, v)
    n = v.shape[0]
    rows = model.visible_values(v)
    preactivation = gemm.addmm(model.hidden_bias.detach(), rows, model.weights.detach())
    grad_weights3 = torch.zeros_like(weights3)
    grad_fields = torch.zeros_like(fields)
    summed_h = torch.zeros_like(preactivation)  # Σ_i H_i, shape (n, J)
    value = torch.zeros((), dtype=torch.float64, device=v.device)
    chunk = _chunk_sites(n, n_states, n_hidden)
    for start in range(0, n_sites, chunk):
        stop = min(n_sites, start + chunk)
        sites = torch.arange(start, stop, device=v.device)
        index = indices[:, start:stop]
        block = weights3[start:stop]
        inputs = preactivation[:, None, None, :] + block[None] - block[sites - start, index][:, :, None, :]
        log_f = fields[start:stop][None] + softplus(inputs).sum(3)
        log_norm = torch.logsumexp(log_f, 2)
        value += (log_f.gather(2, index[:, :, None])[:, :, 0] - log_norm).sum(dtype=torch.float64)
        probability = torch.exp(log_f - log_norm[:, :, None])  # p_is, (n, C, q)
        active = inputs.sigmoid_()  # σ(a(v^{i←s})), (n, C, q, J), in place of the inputs
        expected = torch.einsum("ncs,ncsj->ncj", probability, active)  # H_i, (n, C, J)
        summed_h += expected.sum(1)
        one_hot = torch.zeros_like(probability).scatter_(2, index[:, :, None], 1.0)
        grad_weights3[start:stop] += torch.einsum("ncs,ncj->csj", one_hot, expected)
        grad_weights3[start:stop] -= torch.einsum("ncs,ncsj->csj", probability, active)
        grad_fields[start:stop] += (one_hot - probability).sum(0)
    residual = preactivation.sigmoid().mul_(n_sites).sub_(summed_h)  # R = L·σ(a) − Σ_i H_i
    if isinstance(model, PottsRBM):
        grad_weights = grad_weights3.view(model.weights.shape)
        gemm.addmm_(grad_weights, v.t(), residual)
        grad_visible = grad_fields.view(model.visible_bias.shape)
    elif isinstance(model, SpinRBM):  # W_i enters state +1 as +W_i and state −1 as −W_i
        grad_weights = grad_weights3[:, 1] - grad_weights3[:, 0]
        gemm.addmm_(grad_weights, rows.t(), residual)
        grad_visible = grad_fields[:, 1] - grad_fields[:, 0]
    else:  # only state 1 is a parameter; state 0's rows stay zero
        grad_weights = grad_weights3[:, 1].contiguous()
        gemm.addmm_(grad_weights, v.t(), residual)
        grad_visible = grad_fields[:, 1].contiguous()
    return PseudoLikelihoodGradient(
        value=value / n,
        weights=grad_weights.div_(n),
        visible_bias=grad_visible.div_(n),
        hidden_bias=residual.sum(0).div_(n),
    )


def pseudo_log_likelihood(
    model: RBM | SpinRBM | PottsRBM,
    data: Any,
    *,
    sample_weights: Any = None,
    per_site: bool = True,
    batch_size: int = 1024,
) -> float:
    """The pseudo-log-likelihood of ``data``: ``log p(v_i | v_−i)`` averaged over sites and examples.

    Each conditional sums the hidden units out exactly and normalises over the site's states
    (``q`` for a Potts RBM, 2 for a binary unit); nothing is sampled, so the value is
    deterministic. See the module docstring and docs/training.md, "Pseudo-likelihood".

    Parameters
    ----------
    model : RBM or PottsRBM
    data : Tensor or array, shape (n_examples, n_visible); for a Potts RBM also an Alignment or indices (n, L)
        Anything the model accepts as data.
    sample_weights : Tensor of shape (n_examples,), optional
        Non-negative weights with a positive sum (e.g. sequence weights): the mean over
        examples becomes ``Σ_n w_n PL_n / Σ_n w_n``. Default: the plain mean.
    per_site : bool, default True
        True: the average over sites, **nats per site** (in ``[−∞, 0]``; ``−log q`` for a
        uniform model). False: the sum over sites, **nats per example** (``L`` times larger),
        the objective of ``algorithm="pl"``.
    batch_size : int, default 1024
        Examples per pass (memory only).

    Returns
    -------
    float

    Examples
    --------
    >>> import math, torch, boltzlab as bl
    >>> model = bl.RBM(n_visible=6, n_hidden=3, weight_std=0.0, generator=0)   # uniform model
    >>> data = (torch.rand(9, 6, generator=torch.Generator().manual_seed(0)) < 0.5).float()
    >>> round(bl.pseudo_log_likelihood(model, data), 6) == round(-math.log(2), 6)
    True
    """
    check_pseudo_likelihood_model(model, "pseudo_log_likelihood")
    check_finite_model(model, "pseudo_log_likelihood")
    if not isinstance(per_site, bool):
        raise ValidationError(f"per_site must be True or False, got {per_site!r}")
    batch_size = check_positive_int(batch_size, "batch_size")
    data = as_model_data(model, data, "data")
    with torch.no_grad():
        totals = torch.cat(
            [
                site_log_conditionals(model, rows).sum(1, dtype=torch.float64)
                for rows in torch.split(data, batch_size)
            ]
        )
    if sample_weights is None:
        mean = float(totals.mean())
    else:
        weights = check_sample_weights(sample_weights, totals.shape[0], device=totals.device)
        mean = float((weights @ totals) / weights.sum())
    n_sites = model.n_sites if isinstance(model, PottsRBM) else model.n_visible
    return mean / n_sites if per_site else mean
