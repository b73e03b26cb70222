"""The negative phase: where the trainer's model-term samples come from.

The log-likelihood gradient needs samples from the model (docs/algorithms.md §3.1). A *negative
phase* owns whatever chains produce them and advances them once per parameter update with the
current parameters. CD (Hinton 2002) restarts its chains at the minibatch; PCD / SAP
(Tieleman 2008; Younes 1988) keeps persistent chains; FPCD, parallel tempering, adaptive
simulated tempering and CAST (Tieleman & Hinton 2009; Desjardins et al. 2010; Salakhutdinov
2010) are further implementations of the same protocol, so the trainer never changes.

A phase object holds configuration only; its evolving state is a separate value (a frozen
dataclass) that the trainer threads through ``step`` and checkpoints through
``state_tensors`` / ``state_from_tensors``, so a resumed run continues bit for bit.

What the persistent-chain phases share lives here too: :func:`advance_chains` (``k`` operator
sweeps) and :func:`persistent_chains_from_tensors` (their chains read back from a checkpoint).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar, runtime_checkable

import torch
from torch import Tensor

# The checkpoint form of chains lives with Chains (one format for phases and schemes alike);
# re-exported here, where the phases have always imported it from.
from boltzlab.chains import Chains, chains_from_tensors, chains_to_tensors
from boltzlab.errors import ValidationError
from boltzlab.operators.base import Operator
from boltzlab.registry import Registry

__all__ = [
    "PHASE_ALIASES",
    "NegativePhase",
    "NegativePhaseBase",
    "available_phases",
    "chains_from_tensors",
    "chains_to_tensors",
    "get_phase",
    "register_phase",
]


@runtime_checkable
class NegativePhase(Protocol):
    """A persistent-chain sampler plugged into the trainer.

    The trainer calls, per update and in this order: ``step`` (advance the chains with the
    current parameters, return the β = 1 samples for the model term), the objective's gradient,
    ``optimizer.step()``, then ``after_update`` (with ``.grad`` still holding the gradient
    that was applied, e.g. for FPCD's fast weights).
    """

    name: str

    def init(self, model: Any, data: Tensor, *, generator: torch.Generator) -> Any:
        """The initial state, given the whole training set ``data`` (n_examples, n_visible)."""
        ...

    def step(
        self,
        model: Any,
        state: Any,
        *,
        batch: Tensor,
        positive: tuple[Tensor, ...],
        generator: torch.Generator,
    ) -> tuple[Any, Chains]:
        """Advance the state for one update; return ``(state, samples)``.

        Parameters
        ----------
        model : TemperedModel
            With the parameters of this update.
        state : Any
            From ``init``, ``step`` or ``state_from_tensors``; not modified.
        batch : Tensor, shape (batch_size, n_visible)
            This update's minibatch (a buffer the trainer reuses: copy what you keep).
        positive : tuple of Tensor
            The objective's data-term layers for ``batch`` (for an RBM ``(v, p(h|v))``).
        generator : torch.Generator

        Returns
        -------
        state : Any
        samples : Chains
            β = 1 chains whose statistics form the model term.
        """
        ...

    def after_update(self, model: Any, state: Any) -> Any:
        """The state after ``optimizer.step()`` (most phases return it unchanged)."""
        ...

    def samples(self, state: Any) -> Chains | None:
        """The current β = 1 chains (``TrainResult.final_chains``), or ``None`` before any."""
        ...

    def metrics(self, state: Any) -> dict[str, float]:
        """Diagnostics to put in a history record (e.g. swap rates); read only when logging."""
        ...

    def state_tensors(self, state: Any) -> dict[str, Tensor]:
        """Everything needed to rebuild ``state``, as named tensors (for checkpoints)."""
        ...

    def state_from_tensors(self, model: Any, tensors: dict[str, Tensor]) -> Any:
        """Rebuild a state from :meth:`state_tensors`' output, on ``model``'s device and dtype."""
        ...

    def describe(self) -> dict[str, Any]:
        """JSON-serialisable configuration (checked for compatibility when resuming)."""
        ...


class NegativePhaseBase:
    """Defaults for the optional parts of :class:`NegativePhase`."""

    name: str = "negative-phase"

    def after_update(self, model: Any, state: Any) -> Any:
        return state

    def metrics(self, state: Any) -> dict[str, float]:
        return {}


def advance_chains(
    operator: Operator, model: Any, chains: Chains, n_sweeps: int, *, generator: torch.Generator
) -> Chains:
    """``n_sweeps`` sweeps of every chain by ``operator`` under the model's current parameters.

    Parameters
    ----------
    operator : Operator
        The transition operator.
    model : TemperedModel
        With the parameters of this update.
    chains : Chains
        Layers of shape ``(n_chains, n_units)``; each chain sweeps at its own β.
    n_sweeps : int
        Sweeps of every chain (``k`` of CD, PCD and SAP).
    generator : torch.Generator

    Returns
    -------
    Chains
        The chains after the last sweep (new tensors; ``chains`` is not modified).
    """
    for _ in range(n_sweeps):
        chains, _ = operator.step(model, chains, generator=generator)
    return chains


def persistent_chains_from_tensors(model: Any, tensors: dict[str, Tensor], n_chains: int) -> Chains:
    """Persistent chains read back from a checkpoint, refused unless there are ``n_chains``.

    Parameters
    ----------
    model : TemperedModel
        Gives the device and dtype of the returned layers.
    tensors : dict[str, Tensor]
        A phase's checkpoint tensors holding :func:`chains_to_tensors` output (other keys
        are ignored).
    n_chains : int
        Persistent chains the resuming run asks for.

    Raises
    ------
    ValidationError
        The checkpoint holds another number of chains.
    """
    chains = chains_from_tensors(tensors, dtype=model.dtype, device=model.device)
    if chains.n_chains != n_chains:
        raise ValidationError(
            f"the checkpoint holds {chains.n_chains} persistent chains, this run asks for {n_chains}"
        )
    return chains


PhaseFactory = Callable[..., NegativePhase]
_PHASES: Registry[PhaseFactory] = Registry("algorithm")
# Bound to the factory type so that decorating a phase class leaves its own type to readers.
_Factory = TypeVar("_Factory", bound=PhaseFactory)


def register_phase(name: str) -> Callable[[_Factory], _Factory]:
    """Decorator: make ``factory(*, operator, k, n_chains, **params)`` reachable by ``name``.

    A phase class whose constructor takes those keywords is its own factory and may be
    decorated directly.
    """

    def decorate(factory: _Factory) -> _Factory:
        _PHASES.add(name, factory)
        return factory

    return decorate


# Other names of registered phases: SAP (stochastic approximation, the CAST paper's name) is
# PCD (docs/algorithms.md §3.1).
PHASE_ALIASES = {"sap": "pcd"}


def available_phases() -> tuple[str, ...]:
    """Names accepted as ``train(..., algorithm=name)``."""
    return _PHASES.names()


def get_phase(
    name: str | NegativePhase,
    *,
    operator: Operator,
    k: int,
    n_chains: int,
    **params: Any,
) -> NegativePhase:
    """The negative phase called ``name`` (a phase object passes through unchanged; ``"sap"``
    is another name of ``"pcd"``)."""
    if not isinstance(name, str):
        if not isinstance(name, NegativePhase):
            raise ValidationError(
                f"algorithm must be one of {', '.join(available_phases())} or a NegativePhase, got {name!r}"
            )
        return name
    factory = _PHASES.get(PHASE_ALIASES.get(name.lower(), name))
    try:
        return factory(operator=operator, k=k, n_chains=n_chains, **params)
    except TypeError as error:
        raise ValidationError(f"bad algorithm_params for {name!r}: {error}") from None
