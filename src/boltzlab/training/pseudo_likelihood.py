"""Training by maximum pseudo-likelihood: ``algorithm="pl"``, no model term and no chains.

Besag (1975) replaces the log-likelihood by ``Σ_i log p(v_i | v_−i)``, whose conditionals are
normalised over one site's states, so its gradient is exact and needs no sample of the model
(:mod:`boltzlab.estimators.pseudo_likelihood` for the value, the gradient and its
normalisation; docs/training.md, "Pseudo-likelihood"). It is consistent (the maximiser tends
to the true parameters as data grow, when the model is right) but not efficient, and it fits
each site's conditional rather than the joint, so an RBM trained this way can sample poorly;
it is the usual fast start, and the standard objective of Potts models of protein families.

The trainer's structure stays: :class:`PseudoLikelihoodPhase` is the negative phase of
``"pl"``, which keeps no state and returns no samples, and supplies the objective
(:class:`PseudoLikelihoodObjective`) that writes the minibatch's PL gradient into ``.grad``
in place of data term − model term. The PL per example is the *sum* over sites, so the
gradient has the scale of the log-likelihood's and the same learning rates apply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.estimators.pseudo_likelihood import check_pseudo_likelihood_model, pseudo_likelihood_gradient
from boltzlab.operators.base import Operator
from boltzlab.training.negative import NegativePhaseBase, register_phase
from boltzlab.training.objective import Objective

__all__ = ["PseudoLikelihoodObjective", "PseudoLikelihoodPhase", "PseudoLikelihoodState"]


def _grad_buffer(parameter: Tensor) -> Tensor:
    # Reuse the .grad tensor between updates, as the other objectives do.
    if parameter.grad is None:
        parameter.grad = torch.zeros_like(parameter)
    return parameter.grad


class PseudoLikelihoodObjective:
    """The minibatch's exact pseudo-likelihood gradient, for a binary or Potts RBM.

    Parameters
    ----------
    objective : Objective
        The model's own objective: its data term (``(v, p(h|v))``, which centring reads for
        the hidden offsets), its reconstruction error and its ``after_step_`` (a Potts RBM's
        gauge) are kept.

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> from boltzlab.training import objective_for
    >>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    >>> objective = PseudoLikelihoodObjective(objective_for(model))
    >>> data = (torch.rand(11, 7, generator=torch.Generator().manual_seed(0)) < 0.5).float()
    >>> objective.write_gradient_(model, objective.positive(model, data), ())
    >>> tuple(model.weights.grad.shape)
    (7, 3)
    """

    def __init__(self, objective: Objective) -> None:
        self.objective = objective

    def __repr__(self) -> str:
        return f"PseudoLikelihoodObjective({type(self.objective).__name__})"

    def positive(self, model: Any, data: Tensor) -> tuple[Tensor, ...]:
        """The minibatch ``data`` as the model holds it, then the model objective's data-term
        hidden layers (which centring averages): the PL conditions on the rows themselves, which
        a spin model's objective would hand over as ``2v − 1``."""
        return (data, *self.objective.positive(model, data)[1:])

    def negative(self, model: Any, samples: Chains | None) -> tuple[Tensor, ...]:
        """Nothing: the pseudo-likelihood has no model term."""
        return ()

    @torch.no_grad()
    def write_gradient_(self, model: Any, positive: tuple[Tensor, ...], negative: tuple[Tensor, ...]) -> None:
        """Write ``−∇ mean_n Σ_i log p(v_ni | v_n,−i)`` into every parameter's ``.grad``."""
        result = pseudo_likelihood_gradient(model, positive[0])
        for parameter, gradient in (
            (model.weights, result.weights),
            (model.visible_bias, result.visible_bias),
            (model.hidden_bias, result.hidden_bias),
        ):
            torch.neg(gradient, out=_grad_buffer(parameter))

    def reconstruction_error(self, model: Any, data: Tensor) -> Tensor:
        """The model objective's reconstruction error (the history's usual column)."""
        return self.objective.reconstruction_error(model, data)

    def after_step_(self, model: Any) -> None:
        """The model objective's ``after_step_`` if it has one (a Potts RBM's gauge)."""
        after = getattr(self.objective, "after_step_", None)
        if after is not None:
            after(model)


@dataclass(frozen=True, slots=True)
class PseudoLikelihoodState:
    """The state of ``"pl"``: nothing (no chains), kept for the phase protocol."""


@register_phase("pl")
class PseudoLikelihoodPhase(NegativePhaseBase):
    """The negative phase of ``algorithm="pl"``: no chains; it swaps in the PL objective.

    ``operator``, ``k`` and ``n_chains`` are accepted (every phase is built with them) and
    unused.

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> data = (torch.rand(40, 7, generator=torch.Generator().manual_seed(0)) < 0.3).float()
    >>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    >>> before = bl.pseudo_log_likelihood(model, data)
    >>> result = bl.train(model, data, algorithm="pl", batch_size=10, n_updates=50,
    ...                   learning_rate=0.1, generator=0)
    >>> result.final_chains is None and bl.pseudo_log_likelihood(model, data) > before
    True
    """

    name = "pl"

    def __init__(self, *, operator: Operator | None = None, k: int = 1, n_chains: int = 1) -> None:
        self.operator = operator

    def __repr__(self) -> str:
        return "PseudoLikelihoodPhase()"

    def training_objective(self, model: Any, objective: Objective) -> PseudoLikelihoodObjective:
        """The objective the trainer uses with this phase; refuses models without a PL."""
        check_pseudo_likelihood_model(model, 'algorithm="pl"')
        return PseudoLikelihoodObjective(objective)

    def init(self, model: Any, data: Tensor, *, generator: torch.Generator) -> PseudoLikelihoodState:
        return PseudoLikelihoodState()

    def step(
        self,
        model: Any,
        state: PseudoLikelihoodState,
        *,
        batch: Tensor,
        positive: tuple[Tensor, ...],
        generator: torch.Generator,
    ) -> tuple[PseudoLikelihoodState, None]:
        """Nothing to advance and no samples (the objective ignores them)."""
        return state, None

    def samples(self, state: PseudoLikelihoodState) -> Chains | None:
        return None

    def state_tensors(self, state: PseudoLikelihoodState) -> dict[str, Tensor]:
        return {}

    def state_from_tensors(self, model: Any, tensors: dict[str, Tensor]) -> PseudoLikelihoodState:
        return PseudoLikelihoodState()

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}
