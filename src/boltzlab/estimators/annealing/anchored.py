"""Anchored AIS: an exact sum over the states where the mass is, AIS for the rest (docs/trust.md).

On sharply trained RBMs annealing from the base reaches the modes that hold the mass with
far too little weight: AIS lands 0.5–2 nats low there with a small error bar. Chains started
from the training data sit in those modes at once, and the smaller layer (tens of hidden
units) takes only a few thousand distinct values in them, each of whose unnormalised
marginal ``f(s)`` is exact (the other layer summed out). So split ``Z`` on a set ``S`` of
states of that layer, chosen by chains at β = 1 started from data *before* AIS runs:

    Z = Σ_{s ∈ S} f(s) + Z·P_p(s ∉ S),

The first term is exact (``Z_S``, the certified lower bound of
:mod:`boltzlab.estimators.verdict.lower_bound`); the second is estimated by AIS's properly weighted
final states, ``E[w·(1 − P(s ∈ S | x))] = Z·P_p(s ∉ S)``, with the probability given the
chain's visible units in closed form when ``S`` is a set of hidden states (Rao-Blackwellised:
``p(h | v)`` factorises) and an indicator when it is a set of visible states. Each chain ``i``
gives an unbiased ``Ẑ_i = Z_S + w_i·(1 − P_i)``, and ``log Ẑ = log mean_i Ẑ_i``.

The estimate is never below ``Z_S``, keeps AIS's unbiasedness (for any ``S`` fixed before the
chains run) and AIS's error bar for the part AIS estimates. Where ``S`` holds nothing (a layer
of hundreds of units, say) it is AIS; where ``S`` holds nearly all the mass, it is nearly
exact. What neither sees is mass outside ``S`` that no annealing chain reached: with ``n``
chains that is invisible below about ``1/n`` of ``Z``, so ``Z_S/Ẑ · 1/n`` nats is added to the
error bar in quadrature (``info.unseen_stderr``). That term is a heuristic, not a bound: it
assumes AIS's chains would land in such a region about as often as its share of ``Z``, and
it is scaled by the anchor's share because where AIS carries the estimate its own error bar
already speaks for it. It is kept even when ``S`` happens to hold the whole layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch.nn.functional import softplus

from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.estimators.annealing.ais import ANNEALING_FLAGS, AISInfo, run_ais
from boltzlab.estimators.annealing.chain_budget import annealing_checks, annealing_matched
from boltzlab.estimators.annealing.options import AnchoredAISOptions
from boltzlab.estimators.record import register_estimator
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.verdict.lower_bound import (
    LowerBound,
    VisitedStates,
    pack_rows,
    supports_lower_bound,
    visited_states,
)
from boltzlab.models.rbm import RBM
from boltzlab.numerics import ess, log_mean_exp, log_mean_exp_stderr
from boltzlab.rng import resolve_generator

__all__ = ["AnchoredInfo", "anchor_log_weights", "anchored_ais"]

#: States whose ``log f`` lies more than this many nats below the largest one are left out of
#: ``S``: together they hold less than ``n_states·e^{−50}`` of ``Z_S``, far below any error bar,
#: and leaving them out keeps the per-chain probabilities cheap. (Any ``S`` fixed before AIS
#: runs keeps the estimator unbiased.)
ANCHOR_WINDOW_NATS = 50.0
#: At most this many states (the largest ``f``) are kept in ``S``.
MAX_ANCHOR_STATES = 1 << 16
# States of S per block of the per-chain probability (a block × chains float64 product).
_BLOCK = 8192


@dataclass(frozen=True, slots=True)
class AnchoredInfo:
    """Diagnostics of one anchored-AIS run.

    Attributes
    ----------
    log_weights : Tensor, shape (n_chains,), float64
        Per-chain ``log Ẑ_i = log(Z_S + w_i·(1 − P_i))``; ``log Ẑ = log mean exp`` of them.
        The verdict's effective sample size and chain-group checks read these.
    ess : float
        Kish's effective sample size of ``exp(log_weights)``.
    anchor : LowerBound
        The set ``S``: its ``log_z`` is ``log Z_S``, the exact part (and a certified lower bound).
    anchor_share : float
        ``Z_S / Ẑ``, the fraction of the estimate that is an exact sum, in (0, 1].
    chains_in_anchor : float
        Mean over AIS chains of ``P_i``, the probability that the chain's state lies in ``S``.
    unseen_stderr : float
        ``anchor_share / n_chains``: the error-bar term for mass no chain saw (nats).
    ais : AISInfo
        The AIS run's own diagnostics (its raw weights, schedule, ESS trace).
    """

    log_weights: Tensor
    ess: float
    anchor: LowerBound
    anchor_share: float
    chains_in_anchor: float
    unseen_stderr: float
    ais: AISInfo


def _trimmed(visited: VisitedStates) -> VisitedStates:
    """``visited`` without the states too light to matter (``ANCHOR_WINDOW_NATS``, ``MAX_ANCHOR_STATES``)."""
    keep = visited.log_f >= visited.log_f.max() - ANCHOR_WINDOW_NATS
    if int(keep.sum()) > MAX_ANCHOR_STATES:
        threshold = torch.topk(visited.log_f, MAX_ANCHOR_STATES).values[-1]
        keep &= visited.log_f >= threshold
    return visited.subset(keep)


def _log_probability_in(model: RBM, visited: VisitedStates, visible: Tensor) -> Tensor:
    """``log P(s ∈ S | v)`` at β = 1 for each row of ``visible``; float64, shape ``(n,)``, ≤ 0.

    Hidden ``S``: ``log Σ_{h ∈ S} Π_j p(h_j | v)``, exact. Visible ``S``: 0 or −inf.
    """
    if visited.layer == "visible":
        known = {tuple(row) for row in visited.codes.tolist()}
        inside = [tuple(row) in known for row in pack_rows(visible).tolist()]
        return torch.tensor([0.0 if hit else -math.inf for hit in inside], dtype=torch.float64)
    weights = model.weights.detach().to(torch.float64)
    logits = model.hidden_bias.detach().to(torch.float64) + visible.to(torch.float64) @ weights
    log_normaliser = softplus(logits).sum(1)
    # Blocks of states × chains in float64, at most about 128 MB each.
    block_size = max(1, min(_BLOCK, (1 << 24) // max(1, logits.shape[0])))
    blocks = [
        torch.logsumexp(block.to(logits.device) @ logits.t() - log_normaliser, 0)
        for block in visited.states(block=block_size)
    ]
    return torch.logsumexp(torch.stack(blocks), 0).clamp_max(0.0).cpu()


def anchor_log_weights(
    model: RBM, visited: VisitedStates, log_weights: Tensor, final_chains: Chains
) -> tuple[Tensor, Tensor]:
    """Per-chain ``log(Z_S + w_i·(1 − P_i))`` from properly weighted final states, and ``log P_i``.

    Parameters
    ----------
    model : RBM
    visited : VisitedStates
        The anchor set ``S``, collected independently of the weighted chains.
    log_weights : Tensor, shape (n_chains,)
        ``log w_i`` of an unbiased importance-weighted estimator of ``Z`` (AIS).
    final_chains : Chains
        The chains whose visible units (``layers[0]``) carry those weights.

    Returns
    -------
    (Tensor, Tensor), each of shape (n_chains,), float64, on the CPU
        ``log Ẑ_i`` and ``log P_i = log P(s ∈ S | v_i)``.
    """
    log_in = _log_probability_in(model, visited, final_chains.layers[0])
    log_outside = torch.log(-torch.expm1(log_in))  # log(1 − P), −inf when P = 1
    log_z_anchor = torch.full_like(log_outside, visited.log_z)
    return torch.logaddexp(log_z_anchor, log_weights.to(torch.float64).cpu() + log_outside), log_in


@register_estimator(
    "anchored-ais",
    family="annealing",
    data_option="anchor_data",
    anchors_on_check_data=True,
    options=AnchoredAISOptions,
    checks=annealing_checks,
    matched=annealing_matched,
    flags=ANNEALING_FLAGS | {"target-stderr", "max-chains"},
)
def anchored_ais(
    model: RBM,
    *,
    anchor_data: Any = AnchoredAISOptions.anchor_data,
    anchor_chains: int = AnchoredAISOptions.anchor_chains,
    anchor_sweeps: int = AnchoredAISOptions.anchor_sweeps,
    generator: torch.Generator | int | None = None,
    **ais_options: Any,
) -> LogZEstimate:
    """Estimate ``log Z`` of a binary RBM by AIS anchored on the states chains from data visit.

    Parameters
    ----------
    model : RBM
        A binary RBM, its base fitted to data as for AIS.
    anchor_data : Tensor or array, shape (n_examples, n_visible)
        Where the anchor chains start: the training data. Required: ``estimate_log_z`` passes
        ``check_data`` here when this is not given (by default the witness rows the model kept,
        ``model.witness``), and the CLI passes ``--data``. (Chains from
        the base find what AIS finds: on the hard-model suite such an anchor left two sharp
        Fashion-MNIST RBMs 0.5 and 1.5 nats low with an error bar of 0.01–0.07.)
    anchor_chains : int, default 1000
        Chains at β = 1 that collect the anchor set ``S``.
    anchor_sweeps : int, default 200
        Sweeps of each anchor chain; every visited state of the smaller layer joins ``S``.
    generator : torch.Generator or int, optional
    **ais_options
        AIS's options (:func:`boltzlab.estimators.annealing.ais.ais`: ``n_chains``, ``n_temperatures``,
        ``schedule``, ``operator``, ...), with AIS's defaults except its chain budget: 100
        chains unless ``n_chains``, ``max_chains`` or ``target_stderr`` is given; the anchor chains use the same
        ``operator``.

    Returns
    -------
    LogZEstimate
        ``method="anchored-ais"``, ``bound="lower"`` (as AIS: ``E[Ẑ] = Z``); ``stderr`` the
        delta-method error of the per-chain ``Ẑ_i`` and ``info.unseen_stderr`` in quadrature;
        ``cost_sweeps`` AIS's plus the anchor chains'; ``info`` an :class:`AnchoredInfo`
        (``info.anchor`` is the anchor set's certified bound); ``lower_bound`` the same bound,
        which ``estimate_log_z``'s verdict replaces with its own independent witness's.

    Raises
    ------
    ValidationError
        For a model that is not a binary RBM, no ``anchor_data``, a bad or unknown option.

    Examples
    --------
    >>> import boltzlab as bl
    >>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    >>> rows = torch.bernoulli(torch.full((50, 7), 0.5), generator=torch.Generator().manual_seed(0))
    >>> result = bl.estimate_log_z(model, method="anchored-ais", anchor_data=rows, n_temperatures=200,
    ...                            generator=0)
    >>> abs(result.log_z - bl.exact_log_z(model)) < 4 * result.stderr + 1e-6
    True
    """
    options = AnchoredAISOptions.from_given(
        {
            "anchor_data": anchor_data,
            "anchor_chains": anchor_chains,
            "anchor_sweeps": anchor_sweeps,
            **ais_options,
        },
        "anchored-ais",
    )
    if not (supports_lower_bound(model) and isinstance(model, RBM)):
        raise ValidationError(
            f"anchored-ais sums the states of one layer exactly and needs a binary RBM, got "
            f"{type(model).__name__}; use method='ais'"
        )
    if options.anchor_data is None:
        raise ValidationError(
            "anchored-ais starts its anchor chains from the training data: pass anchor_data=<training rows> "
            "(or check_data=; CLI: --data), or fit the model's base with set_base_rate(train), which keeps "
            "witness rows in the model. Without data use method='ais'"
        )
    generator = resolve_generator(generator, model.device)
    visited = _trimmed(
        visited_states(
            model,
            data=options.anchor_data,
            n_chains=options.anchor_chains,
            n_sweeps=options.anchor_sweeps,
            operator=options.operator,
            generator=generator,
        )
    )
    # The AIS part runs a fixed 100 chains unless a budget option was given (AnchoredAISOptions).
    plain = run_ais(model, options, generator)
    info_ais: AISInfo = plain.info
    assert info_ais.final_chains is not None  # AIS always keeps them
    with torch.no_grad():
        log_chain_z, log_in = anchor_log_weights(model, visited, info_ais.log_weights, info_ais.final_chains)
    log_z = float(log_mean_exp(log_chain_z))
    share = math.exp(min(0.0, visited.log_z - log_z))
    unseen = share / info_ais.n_chains
    anchor = visited.bound()
    info = AnchoredInfo(
        log_weights=log_chain_z,
        ess=ess(log_chain_z),
        anchor=anchor,
        anchor_share=share,
        chains_in_anchor=float(log_in.exp().mean()),
        unseen_stderr=unseen,
        ais=info_ais,
    )
    return LogZEstimate(
        log_z=log_z,
        stderr=math.hypot(log_mean_exp_stderr(log_chain_z), unseen),
        method="anchored-ais",
        cost_sweeps=plain.cost_sweeps + anchor.cost_sweeps,
        bound="lower",
        info=info,
        lower_bound=anchor,
    )
