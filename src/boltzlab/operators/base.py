"""The transition-operator contract, the shared block sweep, and the operator registry.

An operator moves a batch of chains by one *sweep*: every layer group of the model, in the
order ``model.update_groups``, at each chain's own β (docs/architecture.md, "Operators"). Gibbs,
flip-the-state and their α-mixture differ only in ``probability_on``, the probability that
a unit is 1 after its update given its log-odds ``x`` (from the other layers, at β) and its
current value. Units of one group are conditionally independent given the other groups, and
each unit's kernel depends only on those and its own value, so updating a whole group at once
equals applying the single-unit kernels one after another (Brügge et al. 2013, §3).

**Non-binary layers.** A model may declare ``layer_kinds`` (one string per layer; absent
means all ``"binary"``). A layer of another kind (the ``"gaussian"`` visible layer of
:class:`~boltzlab.models.gaussian_rbm.GaussianRBM`) has no log-odds, so the sweep draws it
exactly from its conditional with ``model.sample_conditional(index, layers, beta,
generator=...)`` — a Gibbs update of that group. Every operator stays valid: each group
update only has to leave the group's conditional invariant, and an exact draw does. Binary
layers, and models without ``layer_kinds``, take exactly the code path (and random stream)
they always did.

Adding an operator: one file in this package defining a :class:`LayerwiseOperator` subclass
decorated with :func:`register`, plus one test calling ``harness.check_operator_exact``.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol, runtime_checkable

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.models.base import MarginalTerms, TemperedModel
from boltzlab.operators.categorical import draw_one_hot_, uses_kernel
from boltzlab.operators.fused import fused_sample, uses_fused
from boltzlab.operators.one_region import one_region_sweep, uses_one_region
from boltzlab.registry import Registry
from boltzlab.rng import fill_centered_uniform_, sample_categorical, uniform_scale, uniform_workspace
from boltzlab.validation import check_binary_layers, check_chains_match, check_one_hot_layers

__all__ = [
    "LayerwiseOperator",
    "Operator",
    "StepInfo",
    "available",
    "get",
    "register",
    "resolve",
]


@dataclass(frozen=True, slots=True)
class StepInfo:
    """Per-step diagnostics; never carried forward.

    Holds the states before and after the step; the statistics are computed only when read,
    so a hot loop that ignores them pays nothing.
    """

    previous: Chains
    current: Chains

    @property
    def flip_rate(self) -> Tensor:
        """Fraction of units that changed value in this sweep, per chain; shape ``(n_chains,)``."""
        changed = sum(
            (old != new).sum(1) for old, new in zip(self.previous.layers, self.current.layers, strict=True)
        )
        n_units = sum(layer.shape[1] for layer in self.current.layers)
        return changed.to(torch.float64) / n_units


@runtime_checkable
class Operator(Protocol):
    """``step(model, chains, *, generator) -> (chains, info)``: one sweep, any β per chain."""

    name: str

    def step(
        self,
        model: TemperedModel,
        chains: Chains,
        *,
        generator: torch.Generator,
        terms: MarginalTerms | None = None,
        reverse: bool = False,
    ) -> tuple[Chains, StepInfo]: ...


class LayerwiseOperator(ABC):
    """An operator defined by its single-unit update probability.

    Subclasses implement :meth:`probability_on_`; sampling draws one centred uniform integer
    per unit and compares it with ``2^b·(p − 1/2)`` (see :mod:`boltzlab.rng`), so the sampled
    kernel is exactly the one that the exact transition matrices are built from.
    """

    name: ClassVar[str] = "layerwise"

    @abstractmethod
    def probability_on_(self, logits: Tensor, current: Tensor) -> Tensor:
        """Overwrite ``logits`` with ``P(unit = 1 after the update)`` and return it.

        Parameters
        ----------
        logits : Tensor, shape (n, units)
            Log-odds of each unit given the other layers, at the chain's β. Overwritten.
        current : Tensor, shape (n, units)
            Current 0/1 values (not modified).
        """

    def probability_on(self, logits: Tensor, current: Tensor) -> Tensor:
        """``P(unit = 1 after the update)``, elementwise, as a new tensor (inputs untouched)."""
        return self.probability_on_(logits.clone(), current)

    def categorical_probabilities(self, logits: Tensor, current: Tensor) -> Tensor:
        """``P(site in state b after its update)`` for categorical (Potts) sites; a new tensor.

        Parameters
        ----------
        logits : Tensor, shape (n, L, q)
            Each site's unnormalised log-probabilities given the other layers, at the chain's β.
        current : Tensor, shape (n, L, q)
            Current one-hot states.

        Returns
        -------
        Tensor, shape (n, L, q)
            Rows summing to one. The built-in operators give Gibbs (the softmax), the
            Metropolised Gibbs step that generalises flip-the-state, and their α-mixture;
            an operator without a rule for categorical units refuses them.
        """
        raise ValidationError(
            f"{self!r} has no update rule for categorical (Potts) units; use 'gibbs', 'flip' or "
            "'mixture', or define categorical_probabilities(logits, current) on the operator"
        )

    def sample_categorical_layer(
        self, logits: Tensor, current: Tensor, n_states: int, *, generator: torch.Generator
    ) -> Tensor:
        """New one-hot values of a categorical layer ``(n, L·q)`` from its logits ``(n, L·q)`` (inputs untouched)."""
        return self.sample_categorical_layer_(logits.clone(), current, n_states, generator=generator)

    def sample_categorical_layer_(
        self, logits: Tensor, current: Tensor, n_states: int, *, generator: torch.Generator
    ) -> Tensor:
        """New one-hot values of a categorical layer, returned; ``logits`` (a tensor the caller owns,
        ``(n, L·q)``) may be overwritten.

        Draws from :meth:`categorical_probabilities`. On the CPU one compiled pass per site does
        it (:mod:`boltzlab.operators.categorical`): from the logits themselves when the
        operator's rule is the softmax (Gibbs: ``exp(x − max)`` scaled by its sum, no
        division), else from the probabilities; elsewhere :func:`boltzlab.rng.sample_categorical`.
        """
        n = logits.shape[0]
        shape = (n, logits.shape[1] // n_states, n_states)
        if _softmax_rule(type(self)) and uses_kernel(logits, generator):
            new = draw_one_hot_(logits.view(shape), softmax=True, generator=generator)
        else:
            probabilities = self.categorical_probabilities(logits.view(shape), current.view(shape))
            if uses_kernel(probabilities, generator):
                new = draw_one_hot_(probabilities, softmax=False, generator=generator)
            else:
                new = sample_categorical(probabilities, generator=generator)
        new = new.view(n, -1)
        return new if new.dtype == current.dtype else new.to(current.dtype)

    def threshold_(self, logits: Tensor, current: Tensor, scratch: Tensor) -> Tensor:
        """Overwrite ``logits`` with ``uniform_scale·(P(new = 1) − 1/2)`` and return it.

        A unit becomes 1 when its centred uniform integer falls below this threshold. Values
        beyond ``±uniform_scale/2`` saturate, which lets operators skip clamping. ``scratch``
        is a float buffer of the same shape that the method may overwrite.
        """
        return self.probability_on_(logits, current).sub_(0.5).mul_(uniform_scale(current.dtype))

    def sample_layer_(self, logits: Tensor, current: Tensor, *, generator: torch.Generator) -> Tensor:
        """New 0/1 values of one layer, returned; ``logits`` may be overwritten.

        ``logits`` must be a tensor the caller owns (as ``conditional_logits`` returns). On
        the CPU, layers of ``fused.MIN_FUSED_UNITS`` units or more of an operator with a pure
        ``threshold(logits, current)`` (``uniform_scale·(P(new = 1) − ½)`` computed without
        in-place updates) go through one compiled kernel (:mod:`boltzlab.operators.fused`);
        otherwise the logits are turned into the
        threshold and then into the new layer in place, so a sweep allocates nothing but the
        logits themselves, and the uniforms live in a reused per-thread workspace.
        """
        # Only operators that spell out a threshold without in-place updates (``threshold``)
        # are compiled: traced in-place updates on a clone were miscompiled on one thread
        # (the mixture's kernel drew P(1) wrong; docs/performance.md).
        # A BlockGenerator (chains sharded by block) has no single counter key: unfused path.
        if _has_own_threshold(type(self)) and isinstance(generator, torch.Generator) and uses_fused(logits):
            new = fused_sample(self, logits, current, generator=generator)
            if new is not None:
                return new
        numel = logits.numel()
        buffer = uniform_workspace(numel, dtype=current.dtype, device=current.device)
        uniform = buffer[:numel].view(logits.shape)
        threshold = self.threshold_(logits, current, uniform)
        fill_centered_uniform_(buffer, generator=generator, rows=logits.shape[0])
        new = threshold.gt_(uniform)
        return new if new.dtype == current.dtype else new.to(current.dtype)

    def sample_layer(self, logits: Tensor, current: Tensor, *, generator: torch.Generator) -> Tensor:
        """New 0/1 values of one layer, drawn with :meth:`probability_on` (inputs untouched)."""
        return self.sample_layer_(logits.clone(), current, generator=generator)

    def step(
        self,
        model: TemperedModel,
        chains: Chains,
        *,
        generator: torch.Generator,
        terms: MarginalTerms | None = None,
        reverse: bool = False,
    ) -> tuple[Chains, StepInfo]:
        """One sweep of every layer group in ``model.update_groups`` order.

        Parameters
        ----------
        model : TemperedModel
        chains : Chains
            Current states; not modified.
        generator : torch.Generator
        terms : MarginalTerms, optional
            ``model.marginal_terms(chains.layers)`` if the caller already has it: the first
            group's logits are then ``β·terms.preactivation`` and its matrix product is skipped.
        reverse : bool, default False
            Update the groups in the opposite order (for an RBM: visible, then hidden). The
            reversed sweep is the time reversal of the forward one, as tempered transitions
            need (each group update is itself reversible).

        Returns
        -------
        (Chains, StepInfo)
        """
        check_chains_match(model, chains)
        kinds = _non_binary_kinds(model)
        if not chains.values_checked:
            binary = [True] * len(chains.layers) if kinds is None else [kind == "binary" for kind in kinds]
            check_binary_layers(chains, binary)
            if kinds is not None and "categorical" in kinds:
                check_one_hot_layers(chains, _categorical_states(model, kinds))
        if terms is None and uses_one_region(self, model, chains, generator):
            # Binary RBMs on the CPU: product and sampling of each row block in one parallel
            # region (operators/one_region.py), the same draws as the path below.
            swept = one_region_sweep(self, model, chains, generator=generator, reverse=reverse)
            if swept is not None:
                swept = replace(swept, values_checked=True)
                return swept, StepInfo(previous=chains, current=swept)
        layers = list(chains.layers)
        groups = model.update_groups[::-1] if reverse else model.update_groups
        for group_index, group in enumerate(groups):
            if group_index == 0 and terms is not None and not reverse:
                # The summed-out group is binary by the MarginalTerms protocol (logits β·a).
                joint = terms.preactivation * chains.beta[:, None]
                sizes = [model.layer_sizes[i] for i in group]
                logits = list(torch.split(joint, sizes, dim=1)) if len(group) > 1 else [joint]
            else:
                snapshot = tuple(layers)
                logits = [
                    model.conditional_logits(i, snapshot, chains.beta)
                    if kinds is None or kinds[i] in ("binary", "categorical")
                    else None
                    for i in group
                ]
            for index, layer_logits in zip(group, logits, strict=True):
                if kinds is not None and kinds[index] == "categorical":
                    layers[index] = self.sample_categorical_layer_(
                        layer_logits,
                        layers[index],
                        model.layer_states[index],
                        generator=generator,  # type: ignore[attr-defined]
                    )
                elif layer_logits is None:  # a non-binary layer: an exact conditional draw
                    if not callable(getattr(model, "sample_conditional", None)):
                        raise ValidationError(
                            f"{type(model).__name__}'s layer {index} is {kinds[index]}-valued with no "  # type: ignore[index]
                            "exact conditional draw, so a layerwise operator cannot move it; sample it "
                            "with operator='hmc' (boltzlab.operators.HMCOperator)"
                        )
                    layers[index] = model.sample_conditional(  # type: ignore[attr-defined]
                        index, snapshot, chains.beta, generator=generator
                    )
                else:
                    layers[index] = self.sample_layer_(layer_logits, layers[index], generator=generator)
        new_chains = Chains(layers=tuple(layers), beta=chains.beta, values_checked=True)
        return new_chains, StepInfo(previous=chains, current=new_chains)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


@functools.cache
def _has_own_threshold(cls: type) -> bool:
    """Whether ``cls`` has a pure ``threshold`` written for its own probability.

    The ``threshold`` must come from the class that defines ``probability_on_`` or a subclass
    of it: a subclass that changes ``probability_on_`` but inherits its parent's ``threshold``
    would otherwise have its parent's kernel compiled.
    """
    owner = next((klass for klass in cls.__mro__ if "probability_on_" in vars(klass)), None)
    source = next((klass for klass in cls.__mro__ if "threshold" in vars(klass)), None)
    return owner is not None and source is not None and issubclass(source, owner)


@functools.cache
def _softmax_rule(cls: type) -> bool:
    """Whether ``cls``'s categorical rule is the softmax of the logits (Gibbs).

    The class that defines ``categorical_probabilities`` must say so itself
    (``categorical_is_softmax = True`` in its own body): a subclass that changes the rule
    without saying so is sampled from its probabilities, never from the softmax it replaced.
    """
    owner = next((klass for klass in cls.__mro__ if "categorical_probabilities" in vars(klass)), None)
    return owner is not None and vars(owner).get("categorical_is_softmax") is True


def _categorical_states(model: TemperedModel, kinds: tuple[str, ...]) -> dict[int, int]:
    """``{layer index: states per unit}`` of the model's categorical layers (``layer_states``)."""
    states = getattr(model, "layer_states", None)
    if states is None:
        raise ValidationError(
            f"{type(model).__name__} declares categorical layers but no layer_states (states per unit)"
        )
    return {index: int(states[index]) for index, kind in enumerate(kinds) if kind == "categorical"}


def _non_binary_kinds(model: TemperedModel) -> tuple[str, ...] | None:
    """``model.layer_kinds`` if some layer is not binary, else ``None`` (the binary fast path)."""
    kinds = getattr(model, "layer_kinds", None)
    if kinds is None or all(kind == "binary" for kind in kinds):
        return None
    return tuple(kinds)


_OPERATORS: Registry[Callable[..., Operator]] = Registry("operator")


def register(name: str) -> Callable[[type], type]:
    """Class decorator: make an operator reachable as ``operators.get(name, **params)``."""
    return _OPERATORS.register(name)


def available() -> tuple[str, ...]:
    """Names accepted by :func:`get`."""
    return _OPERATORS.names()


def get(name: str | Operator, **params: Any) -> Operator:
    """The operator called ``name``, built with ``params`` (an operator passes through).

    >>> from boltzlab import operators
    >>> operators.get("mixture", alpha=0.5)
    MixtureOperator(alpha=0.5)
    """
    if not isinstance(name, str):
        if params:
            raise ValidationError("parameters can only be given with an operator name")
        return name
    factory = _OPERATORS.get(name)
    try:
        return factory(**params)
    except TypeError as error:
        raise ValidationError(f"bad parameters for operator {name!r}: {error}") from None


def resolve(operator: str | Operator, *, argument: str = "operator", **params: Any) -> Operator:
    """``get(operator, **params)``, refusing anything that cannot move chains.

    The one check every sampler, trainer and estimator applies at its public door: a name
    is looked up in the registry; an object passes through only if it has a ``step`` method.

    >>> from boltzlab import operators
    >>> operators.resolve("gibbs")
    GibbsOperator()
    """
    transition = get(operator, **params)
    if not callable(getattr(transition, "step", None)):
        raise ValidationError(
            f"{argument} must be an operator name ({', '.join(available())}) or an object with a "
            f"step() method, got {type(operator).__name__}"
        )
    return transition
