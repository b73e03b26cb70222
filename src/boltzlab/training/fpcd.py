"""Fast persistent contrastive divergence, FPCD (Tieleman & Hinton 2009, *Using fast weights
to improve persistent contrastive divergence*, ICML, §3–4; docs/algorithms.md §3.2).

Besides the model's *slow* parameters θ, FPCD keeps *fast* parameters θ_f of the same shapes,
starting at 0. The persistent chains sample with θ + θ_f; the data term, the model term's
Rao-Blackwellised hidden layer and every evaluation use θ only. After each update, with
``g`` the PCD gradient just applied (data term − model term of the chains run under θ + θ_f):

    θ   ← θ + lr_t · g                        (the trainer's optimiser)
    θ_f ← fast_decay · θ_f + fast_learning_rate · g

The fast parameters raise the energy of wherever the chains currently sit, so they leave a
mode quickly; their strong decay keeps θ + θ_f close to θ. FPCD is not a valid MCMC method
(the data term pulls the particles into the data's modes, Salakhutdinov 2010, §3.2).

Defaults (docs/open-questions.md item 24): ``fast_decay = 19/20`` per update is corroborated by
several independent implementations; ``fast_learning_rate`` = the run's initial slow learning
rate is *recalled, not verified* (as is the paper's slow rate decaying linearly to 0, which
is ``lr_schedule="linear"`` in :func:`boltzlab.train`).

**Sampling with θ + θ_f without touching the model.** :func:`with_parameters` makes a
shallow copy of the model module whose parameters are the sums and whose methods are the
model's own, so any model that reads its parameters as module attributes — the RBM, a DBM
built the same way — samples under θ + θ_f with any operator, unchanged.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor, nn

from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.operators.base import Operator
from boltzlab.training.negative import NegativePhaseBase, chains_to_tensors, register_phase
from boltzlab.training.pcd import PersistentContrastiveDivergence, PersistentState

__all__ = ["FastPersistentContrastiveDivergence", "FastPersistentState", "with_parameters"]

_DEFAULT_FAST_DECAY = 19.0 / 20.0
_FAST_PREFIX = "fast."


def with_parameters(model: nn.Module, parameters: Mapping[str, Tensor]) -> nn.Module:
    """A shallow copy of ``model`` whose parameters named in ``parameters`` are replaced.

    The copy shares the model's methods, buffers (e.g. the RBM's ``base_logits``) and other
    attributes; only its parameter tables are new, at every level of nested submodules, so
    the model itself is never modified and the copy costs no tensor copies.

    Parameters
    ----------
    model : nn.Module
        Any module whose methods read their parameters as attributes (``self.weights``).
    parameters : mapping of str to Tensor
        Replacements keyed as in ``model.named_parameters()``, each of the replaced
        parameter's shape; names not given keep the model's parameter.

    Returns
    -------
    nn.Module
        A view for reading (sampling, energies); do not train it.
    """
    return _with_parameters(model, parameters, "")


def _with_parameters(module: nn.Module, parameters: Mapping[str, Tensor], prefix: str) -> nn.Module:
    shadow = copy.copy(module)  # a new object whose __dict__ is a shallow copy of the module's
    shadow.__dict__["_parameters"] = {
        name: parameters.get(prefix + name, value) for name, value in module._parameters.items()
    }
    shadow.__dict__["_buffers"] = dict(module._buffers)
    shadow.__dict__["_modules"] = {
        name: None if child is None else _with_parameters(child, parameters, f"{prefix}{name}.")
        for name, child in module._modules.items()
    }
    return shadow


@dataclass(frozen=True, slots=True)
class FastPersistentState:
    """The persistent chains and the fast parameters of FPCD.

    Attributes
    ----------
    chains : Chains
        ``n_chains`` chains at β = 1; layers of shape ``(n_chains, n_units)``.
    names : tuple of str
        The model's parameter names (``model.named_parameters()`` order).
    fast_parameters : tuple of Tensor
        θ_f, one tensor per name, each of its parameter's shape, dtype and device.
    """

    chains: Chains
    names: tuple[str, ...]
    fast_parameters: tuple[Tensor, ...]


@register_phase("fpcd")
class FastPersistentContrastiveDivergence(NegativePhaseBase):
    """FPCD-k with any operator: persistent chains that sample with slow + fast parameters.

    Parameters
    ----------
    operator, k, n_chains, init
        As in :class:`~boltzlab.training.pcd.PersistentContrastiveDivergence` (defaults
        ``k = 1`` sweep per update, ``n_chains = 100``, chains started at the data), which
        runs the chains.
    fast_learning_rate : float >= 0, optional
        Step size of the fast parameters on the applied gradient. ``None`` (default) means the
        run's initial slow learning rate, filled in by the trainer through :meth:`for_run`
        (recalled from Tieleman & Hinton 2009, not verified: docs/open-questions.md item 24).
        0 turns FPCD into PCD, bit for bit under the same seed.
    fast_decay : float in [0, 1], default 19/20
        Factor applied to the fast parameters at every update.

    Notes
    -----
    ``after_update`` reads ``.grad``, which the trainer fills with the gradient of the
    *negative* log-likelihood (model term − data term); the ascent direction ``g`` is its
    negation. The trainer's momentum and weight decay act on θ only. The model term's
    hidden probabilities ``p(h|v⁻)`` are computed with θ (the trainer's objective sees the
    slow model), which keeps the ``fast_learning_rate = 0`` case identical to PCD.

    Examples
    --------
    >>> import boltzlab as bl
    >>> phase = FastPersistentContrastiveDivergence(operator=bl.operators.get("gibbs"), n_chains=13)
    >>> phase.for_run(learning_rate=0.05).fast_learning_rate, phase.fast_decay
    (0.05, 0.95)
    """

    name = "fpcd"

    def __init__(
        self,
        *,
        operator: Operator,
        k: int = 1,
        n_chains: int = 100,
        init: str = "data",
        fast_learning_rate: float | None = None,
        fast_decay: float = _DEFAULT_FAST_DECAY,
    ) -> None:
        # PCD validates operator, k, n_chains and init, and draws the same random numbers:
        # with zero fast parameters the two phases are the same computation.
        self._pcd = PersistentContrastiveDivergence(operator=operator, k=k, n_chains=n_chains, init=init)
        self.operator, self.k, self.n_chains, self.init_from = operator, self._pcd.k, self._pcd.n_chains, init
        self.fast_learning_rate = (
            None
            if fast_learning_rate is None
            else _check_real(fast_learning_rate, "fast_learning_rate", low=0.0, high=math.inf)
        )
        self.fast_decay = _check_real(fast_decay, "fast_decay", low=0.0, high=1.0)

    def __repr__(self) -> str:
        return (
            f"FastPersistentContrastiveDivergence(operator={self.operator!r}, k={self.k}, "
            f"n_chains={self.n_chains}, init={self.init_from!r}, "
            f"fast_learning_rate={self.fast_learning_rate!r}, fast_decay={self.fast_decay!r})"
        )

    def for_run(self, *, learning_rate: float) -> FastPersistentContrastiveDivergence:
        """This phase with ``fast_learning_rate`` defaulted to the run's initial learning rate.

        Called by the training loop before the first update; a phase whose fast learning
        rate was given returns itself.
        """
        if self.fast_learning_rate is not None:
            return self
        return FastPersistentContrastiveDivergence(
            operator=self.operator,
            k=self.k,
            n_chains=self.n_chains,
            init=self.init_from,
            fast_learning_rate=learning_rate,
            fast_decay=self.fast_decay,
        )

    # ------------------------------------------------------------------ protocol
    def init(self, model: Any, data: Tensor, *, generator: torch.Generator) -> FastPersistentState:
        """PCD's chains (from the data or the base) and zero fast parameters."""
        chains = self._pcd.init(model, data, generator=generator).chains
        names, fast = [], []
        for name, parameter in model.named_parameters():
            names.append(name)
            fast.append(torch.zeros_like(parameter.detach()))
        return FastPersistentState(chains=chains, names=tuple(names), fast_parameters=tuple(fast))

    def sampling_model(self, model: Any, state: FastPersistentState) -> nn.Module:
        """The model the chains sample from: ``model`` with parameters θ + θ_f."""
        current = dict(model.named_parameters())
        sums = {
            name: current[name].detach() + fast
            for name, fast in zip(state.names, state.fast_parameters, strict=True)
        }
        return with_parameters(model, sums)

    def step(
        self,
        model: Any,
        state: FastPersistentState,
        *,
        batch: Tensor,
        positive: tuple[Tensor, ...],
        generator: torch.Generator,
    ) -> tuple[FastPersistentState, Chains]:
        """``k`` sweeps of the persistent chains under θ + θ_f."""
        sampler = self.sampling_model(model, state)
        pcd_state, chains = self._pcd.step(
            sampler, PersistentState(chains=state.chains), batch=batch, positive=positive, generator=generator
        )
        return replace(state, chains=pcd_state.chains), chains

    def after_update(self, model: Any, state: FastPersistentState) -> FastPersistentState:
        """``θ_f ← fast_decay·θ_f − fast_learning_rate·grad`` (``grad`` = −g, as applied)."""
        if self.fast_learning_rate is None:
            raise ValidationError(
                "fast_learning_rate is None: give it, or call for_run(learning_rate=...) first "
                "(boltzlab.train does this)"
            )
        parameters = dict(model.named_parameters())
        updated = []
        for name, fast in zip(state.names, state.fast_parameters, strict=True):
            new = fast * self.fast_decay
            gradient = parameters[name].grad
            if gradient is not None:
                new.sub_(gradient, alpha=self.fast_learning_rate)
            updated.append(new)
        return replace(state, fast_parameters=tuple(updated))

    def samples(self, state: FastPersistentState) -> Chains | None:
        return state.chains

    def metrics(self, state: FastPersistentState) -> dict[str, float]:
        """``fast_rms``: root mean square of all fast parameters (0 for PCD-like runs)."""
        total = sum(float(fast.double().square().sum()) for fast in state.fast_parameters)
        count = sum(fast.numel() for fast in state.fast_parameters)
        return {"fast_rms": math.sqrt(total / max(count, 1))}

    def state_tensors(self, state: FastPersistentState) -> dict[str, Tensor]:
        tensors = chains_to_tensors(state.chains)
        for name, fast in zip(state.names, state.fast_parameters, strict=True):
            tensors[_FAST_PREFIX + name] = fast
        return tensors

    def state_from_tensors(self, model: Any, tensors: dict[str, Tensor]) -> FastPersistentState:
        # PCD reads the chain layers and ignores the fast.* entries beside them.
        chains = self._pcd.state_from_tensors(model, tensors).chains
        names, fast = [], []
        for name, parameter in model.named_parameters():
            saved = tensors.get(_FAST_PREFIX + name)
            if saved is None or tuple(saved.shape) != tuple(parameter.shape):
                found = None if saved is None else tuple(saved.shape)
                raise ValidationError(
                    f"the checkpoint's fast parameter {name!r} has shape {found}, "
                    f"the model's has {tuple(parameter.shape)}"
                )
            names.append(name)
            fast.append(saved.to(device=parameter.device, dtype=parameter.dtype))
        return FastPersistentState(chains=chains, names=tuple(names), fast_parameters=tuple(fast))

    def describe(self) -> dict[str, Any]:
        # PCD's record with this phase's name (updating a key keeps its place) and the fast settings.
        return {
            **self._pcd.describe(),
            "name": self.name,
            "fast_learning_rate": self.fast_learning_rate,
            "fast_decay": self.fast_decay,
        }


def _check_real(value: Any, name: str, *, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ValidationError(f"{name} must be a number in [{low:g}, {high:g}], got {value!r}")
    value = float(value)
    if not low <= value <= high or math.isinf(value):
        raise ValidationError(f"{name} must be a finite number in [{low:g}, {high:g}], got {value!r}")
    return value
