"""Negative phases run by tempering schemes: PT learning, CAST, Trans-SAP and adaptive-ST learning.

Stochastic approximation (SAP = PCD, docs/algorithms.md §3.1) needs persistent chains that keep
sampling the model as its parameters move. When the model grows sharp modes, single-site
operators stop crossing between them and the gradient's model term goes stale. These phases
let several temperatures move the chains instead, with any operator inside:

* ``"pt"`` — PT learning, "t-PT_k" (Desjardins et al. 2010; Brügge, Fischer & Igel 2013,
  §5): ``n_chains`` parallel-tempering systems; per update ``k`` sweeps of every replica and
  then one swap round; the β = 1 replicas feed the gradient. Default ladder uniform in
  β ∈ [0, 1] with 10 levels, as in Brügge et al.; Desjardins et al.'s ladders and pair
  schedule were not recovered (docs/open-questions.md item 18).
* ``"cast"`` — CAST learning (Salakhutdinov 2010, *Learning deep Boltzmann machines using
  adaptive MCMC*, §4; docs/algorithms.md §3.4): ``n_chains`` slow chains at β = 1 coupled to
  ``n_chains`` fast Wang–Landau adaptive-ST chains; the paper's defaults (20 levels 1 → 0.9,
  swap lag 50, γ = 10).
* ``"trans-sap"`` — Trans-SAP (Salakhutdinov 2009; docs/algorithms.md §2.6): the persistent chains
  make one tempered-transition move (Neal 1996) per step. Its ladder and schedule were not
  recovered (docs/open-questions.md item 18): the defaults here are ours, not the paper's.
* ``"ast"`` — adaptive-ST learning (Salakhutdinov 2010, §3; docs/algorithms.md §3.3): ``N`` updates
  of plain operator sweeps (SAP) alternate with one run of adaptive simulated tempering whose
  Wang–Landau weights carry over from run to run. The paper gives no ``N`` (CAST was
  introduced to avoid choosing it), so ``sap_updates`` and ``run_length`` are ours.

The first three share :class:`SchemePhase`: the phase state is the scheme's state, advanced
``k`` scheme steps per update with the current parameters; the samples are
``scheme.samples(state)``; checkpoints use the scheme's ``state_tensors``. The chains start
where the scheme's ``init`` puts them (exact samples of the model's base, which the trainer
fits to the data's marginals), not at training examples.

**Diagnostics.** Each algorithm turns a scheme step's ``info`` into a few rates (swap or
move acceptance), kept as moving averages that are part of the checkpointed state
(:mod:`boltzlab.training.scheme_steps`, which the ``"ast"`` phase shares). They land in the
trainer's history as ``extra`` metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.operators.base import Operator
from boltzlab.tempering.cast import CAST
from boltzlab.tempering.ladders import Ladder
from boltzlab.tempering.parallel import ParallelTempering
from boltzlab.tempering.transitions import TemperedTransitions
from boltzlab.training.negative import NegativePhaseBase, register_phase
from boltzlab.training.scheme_steps import (
    PT_METRICS,
    ST_METRICS,
    TT_METRICS,
    MetricFunction,
    MovingRates,
    advance_scheme,
    cast_metrics,
    pt_metrics,
    scheme_tensors,
    tt_metrics,
    with_scheme_prefix,
)
from boltzlab.training.settings import setting_record
from boltzlab.validation import check_positive_int

__all__ = ["LadderOption", "SchemePhase", "SchemePhaseState"]

# What a phase factory accepts as its ladder option.
LadderOption = Ladder | Sequence[float] | Tensor | None


@dataclass(frozen=True, slots=True)
class SchemePhaseState:
    """The state of a scheme-driven negative phase.

    Attributes
    ----------
    scheme_state : Any
        The tempering scheme's own state (its chains at every temperature, counters, weights).
    metric_numerators, metric_denominators : Tensor, shape (n_metrics,), float64
        Exponentially weighted sums over scheme steps; a metric is their ratio.
    """

    scheme_state: Any
    metric_numerators: Tensor
    metric_denominators: Tensor


class SchemePhase(NegativePhaseBase):
    """Persistent chains advanced by ``k`` steps of a tempering scheme per update.

    Parameters
    ----------
    name : str
        The algorithm's name (``"pt"``, ``"cast"``, ``"trans-sap"`` or a user's).
    scheme : TemperingScheme
        Any scheme following :mod:`boltzlab.tempering.base`'s contract, with ``state_tensors``
        and ``state_from_tensors`` for checkpoints.
    k : int, default 1
        Scheme steps per update (one step = one sweep of every chain plus the scheme's moves).
    n_chains : int, default 100
        The scheme's ``n_chains``: the number of β = 1 chains that form the model term.
    metric_names : sequence of str, default ()
    metric_function : callable, optional
        ``info -> (numerators, denominators)`` for ``metric_names`` (see :func:`~boltzlab.training.scheme_steps.pt_metrics`).
    metrics_horizon : float >= 1, default 100
        The moving averages forget with factor ``1 − 1/metrics_horizon`` per step.
    settings : dict, optional
        The algorithm's own settings, for :meth:`describe`.

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> from boltzlab.tempering import ParallelTempering
    >>> phase = SchemePhase(name="my-pt", scheme=ParallelTempering(bl.operators.get("flip"), n_levels=4),
    ...                     n_chains=13, metric_names=PT_METRICS, metric_function=pt_metrics)
    >>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    >>> result = bl.train(model, (torch.arange(70).view(10, 7) % 3 == 0).float(), algorithm=phase,
    ...                   batch_size=5, n_updates=20, log_every=20, generator=0)
    >>> sorted(result.history[-1].extra)
    ['round_trips_per_step', 'swap_acceptance']
    """

    def __init__(
        self,
        *,
        name: str,
        scheme: Any,
        k: int = 1,
        n_chains: int = 100,
        metric_names: Sequence[str] = (),
        metric_function: MetricFunction | None = None,
        metrics_horizon: float = 100.0,
        settings: dict[str, Any] | None = None,
    ) -> None:
        for method in ("init", "step", "samples", "state_tensors", "state_from_tensors"):
            if not callable(getattr(scheme, method, None)):
                raise ValidationError(f"scheme must have a {method}() method, got {type(scheme).__name__}")
        self.name = name
        self.scheme = scheme
        self.operator = getattr(scheme, "operator", None)
        self.k = check_positive_int(k, "k")
        self.n_chains = check_positive_int(n_chains, "n_chains")
        self.rates = MovingRates(metric_names, metric_function, metrics_horizon)
        self.settings = dict(settings or {})

    def __repr__(self) -> str:
        return (
            f"SchemePhase(name={self.name!r}, scheme={self.scheme!r}, k={self.k}, n_chains={self.n_chains})"
        )

    def init(self, model: Any, data: Tensor, *, generator: torch.Generator) -> SchemePhaseState:
        """The scheme's initial state (its chains at exact base samples); ``data`` is not used."""
        numerators, denominators = self.rates.zeros(model.device)
        return SchemePhaseState(
            scheme_state=self.scheme.init(model, self.n_chains, generator=generator),
            metric_numerators=numerators,
            metric_denominators=denominators,
        )

    def step(
        self,
        model: Any,
        state: SchemePhaseState,
        *,
        batch: Tensor,
        positive: tuple[Tensor, ...],
        generator: torch.Generator,
    ) -> tuple[SchemePhaseState, Chains]:
        """``k`` scheme steps under the current parameters; returns the β = 1 chains."""
        scheme_state, numerators, denominators = advance_scheme(
            self.scheme,
            model,
            state.scheme_state,
            self.k,
            rates=self.rates,
            numerators=state.metric_numerators,
            denominators=state.metric_denominators,
            generator=generator,
        )
        new_state = SchemePhaseState(
            scheme_state=scheme_state, metric_numerators=numerators, metric_denominators=denominators
        )
        return new_state, self.scheme.samples(scheme_state)

    def samples(self, state: SchemePhaseState) -> Chains | None:
        return self.scheme.samples(state.scheme_state)

    def metrics(self, state: SchemePhaseState) -> dict[str, float]:
        """The moving-average rates (see the module docstring)."""
        return self.rates.values(state.metric_numerators, state.metric_denominators)

    def state_tensors(self, state: SchemePhaseState) -> dict[str, Tensor]:
        tensors = with_scheme_prefix(self.scheme.state_tensors(state.scheme_state))
        tensors.update(self.rates.to_tensors(state.metric_numerators, state.metric_denominators))
        return tensors

    def state_from_tensors(self, model: Any, tensors: dict[str, Tensor]) -> SchemePhaseState:
        scheme_state = self.scheme.state_from_tensors(model, scheme_tensors(tensors))
        n_saved = self.scheme.samples(scheme_state).n_chains
        if n_saved != self.n_chains:
            raise ValidationError(
                f"the checkpoint holds {n_saved} β = 1 chains, this run asks for {self.n_chains}"
            )
        numerators, denominators = self.rates.from_tensors(tensors, model.device)
        return SchemePhaseState(
            scheme_state=scheme_state, metric_numerators=numerators, metric_denominators=denominators
        )

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "scheme": repr(self.scheme),
            "operator": repr(self.operator),
            "k": self.k,
            "n_chains": self.n_chains,
            "metrics_horizon": self.rates.horizon,
            **self.settings,
        }


@register_phase("pt")
def _make_pt(
    *,
    operator: Operator,
    k: int,
    n_chains: int,
    n_levels: int = 10,
    ladder: LadderOption = None,
    swap_every: int | None = None,
    pairs: str = "alternating",
    metrics_horizon: float = 100.0,
) -> SchemePhase:
    """PT learning, t-PT_k: per update ``k`` sweeps of every replica, then one swap round
    (``swap_every`` defaults to ``k``); ``n_levels`` uniform in [0, 1] unless ``ladder``."""
    swap_every = k if swap_every is None else swap_every
    scheme = ParallelTempering(operator, ladder, n_levels=n_levels, swap_every=swap_every, pairs=pairs)
    settings = {"n_levels": scheme.n_levels, "ladder": setting_record(ladder), "swap_every": swap_every}
    return SchemePhase(
        name="pt",
        scheme=scheme,
        k=k,
        n_chains=n_chains,
        metric_names=PT_METRICS,
        metric_function=pt_metrics,
        metrics_horizon=metrics_horizon,
        settings={**settings, "pairs": pairs},
    )


@register_phase("cast")
def _make_cast(
    *, operator: Operator, k: int, n_chains: int, metrics_horizon: float = 100.0, **options: Any
) -> SchemePhase:
    """CAST learning: ``n_chains`` slow + ``n_chains`` fast chains, ``k`` CAST steps per update.

    ``options`` go to :class:`~boltzlab.tempering.cast.CAST` (``ladder``, ``n_levels`` = 20,
    ``low`` = 0.9, ``lag`` = 50 steps, ``gamma`` = 10, ``gamma_decay``, ``exchange``,
    ``shared_weights``, ``log_weights``, ``level_move``, ``target_refresh``); the defaults are
    the CAST paper's. ``lag`` counts CAST steps, which are updates when ``k = 1``.
    """
    scheme = CAST(operator, **options)
    settings = {key: setting_record(value) for key, value in options.items()}
    return SchemePhase(
        name="cast",
        scheme=scheme,
        k=k,
        n_chains=n_chains,
        metric_names=ST_METRICS,
        metric_function=cast_metrics,
        metrics_horizon=metrics_horizon,
        settings={"n_levels": scheme.ladder.size, "lag": scheme.lag, **settings},
    )


@register_phase("trans-sap")
def _make_trans_sap(
    *,
    operator: Operator,
    k: int,
    n_chains: int,
    n_levels: int = 10,
    ladder: LadderOption = None,
    target_sweeps: int = 1,
    metrics_horizon: float = 100.0,
) -> SchemePhase:
    """Trans-SAP: per update ``k`` tempered-transition moves of every persistent chain, each
    followed by ``target_sweeps`` plain sweeps at β = 1.

    The defaults are ours, not the paper's (docs/open-questions.md item 18): a uniform ladder of
    ``n_levels`` in [0, 1], and one plain sweep after each move so that the chains move as in
    SAP where the move's acceptance collapses (large models need many more levels).
    """
    scheme = TemperedTransitions(operator, ladder, n_levels=n_levels, target_sweeps=target_sweeps)
    return SchemePhase(
        name="trans-sap",
        scheme=scheme,
        k=k,
        n_chains=n_chains,
        metric_names=TT_METRICS,
        metric_function=tt_metrics,
        metrics_horizon=metrics_horizon,
        settings={
            "n_levels": scheme.n_levels,
            "ladder": setting_record(ladder),
            "target_sweeps": target_sweeps,
        },
    )
