"""What a caller may pass to an annealing estimator (AIS, anchored AIS, RAISE), checked once.

Each estimator's public function keeps its keyword signature and builds one frozen options
object first thing: unknown names are refused with the accepted ones listed
(:meth:`AnnealingOptions.from_given`), every value is checked when the object is made, and
the object, not loose keywords, is what the run's helpers read
(:func:`~boltzlab.estimators.annealing.ais.start_annealing`,
:func:`~boltzlab.estimators.annealing.chain_budget.plan_chains`). The classes are also the
records' ``options`` (:class:`~boltzlab.estimators.record.EstimatorRecord`), whose fields
are the option names that ``estimate_log_z`` and ``boltzlab logz`` know.

- :class:`AnnealingOptions`: the schedule and the kernel, which every annealing estimator has;
- :class:`AISOptions`: AIS's, with its chain budget
  (:mod:`~boltzlab.estimators.annealing.chain_budget`);
- :class:`AnchoredAISOptions`: AIS's and the anchor's, with a fixed chain count by default;
- :class:`RAISEOptions`: RAISE's reverse chains per example.

Each default is stated here once; the public functions' signatures read theirs from these
classes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Self

from torch import Tensor

from boltzlab import operators
from boltzlab.errors import ValidationError
from boltzlab.estimators.annealing.adaptive_schedules import check_schedule
from boltzlab.estimators.annealing.chain_budget import BUDGET_OPTIONS, DEFAULT_CHAINS
from boltzlab.estimators.record import check_option_names
from boltzlab.estimators.verdict.checks import check_target_stderr
from boltzlab.estimators.verdict.lower_bound import LowerBound
from boltzlab.operators.base import Operator
from boltzlab.validation import check_nonnegative_int, check_positive_int

__all__ = ["AISOptions", "AnchoredAISOptions", "AnnealingOptions", "RAISEOptions"]


def _set(options: AnnealingOptions, name: str, value: Any) -> None:
    # A frozen dataclass stores its checked (normalised) values in __post_init__ this way.
    object.__setattr__(options, name, value)


@dataclass(frozen=True)
class AnnealingOptions:
    """The schedule and the kernel of an annealing run, shared by AIS and RAISE.

    Attributes
    ----------
    n_temperatures : int, optional
        ``K``, the number of β increments; ``None``: the schedule's own (14,500 for ``"sm08"``).
    schedule : str or Tensor or sequence of float, default "sm08"
        A schedule name (``"sm08"``, ``"linear"``, ``"varopt"``, ``"gms13"``) or explicit
        ascending βs from 0 to 1, shape ``(K + 1,)``.
    operator : Operator
        The transition; given by name (default ``"gibbs"``) or as an instance, and resolved
        to an instance when the options are made.
    decelerate : float, optional
        Cap on every β increment (Kiwaki's deceleration).
    schedule_options : mapping, optional
        Options of an adaptive schedule (e.g. ``{"pilot_chains": 200}`` for ``"varopt"``);
        kept read-only.
    blocks : int, optional
        Blocks of chains (or examples) with their own random streams, for a sharded run.

    The name, an adaptive schedule's options and its deceleration are checked when the options
    are made (:func:`~boltzlab.estimators.annealing.adaptive_schedules.check_schedule`);
    explicit βs and ``n_temperatures`` where the ladder is built, ``blocks`` where the chains
    are split.
    """

    n_temperatures: int | None = None
    schedule: str | Tensor | Sequence[float] = "sm08"
    operator: str | Operator = "gibbs"
    decelerate: float | None = None
    schedule_options: Mapping[str, Any] | None = None
    blocks: int | None = None

    def __post_init__(self) -> None:
        _set(self, "operator", operators.resolve(self.operator))
        if self.schedule_options is not None:
            _set(self, "schedule_options", MappingProxyType(dict(self.schedule_options)))
        check_schedule(
            self.schedule, self.n_temperatures, decelerate=self.decelerate, options=self.schedule_options
        )

    @classmethod
    def from_given(cls, given: Mapping[str, Any], method: str, own: Sequence[str] = ()) -> Self:
        """The options in ``given`` (name → value), checked; unknown names refused with the accepted ones.

        Parameters
        ----------
        given : mapping
            What the caller passed, besides the model and the generator.
        method : str
            The estimator's name in the message (``"AIS"``, ``"RAISE"``, ``"anchored-ais"``).
        own : sequence of str
            Names the estimator takes itself, not through these options (RAISE's ``data``),
            listed first in the message.

        Raises
        ------
        ValidationError
            For an unknown name, or a value the options refuse.
        """
        check_option_names(cls, given, method, own)
        return cls(**given)


@dataclass(frozen=True)
class AISOptions(AnnealingOptions):
    """AIS's options (:func:`~boltzlab.estimators.annealing.ais.ais`): the schedule, the kernel, the chain budget.

    Attributes
    ----------
    n_chains : int, optional
        Chains run: exactly this many when given without ``max_chains``. ``None``: the chain
        budget's (:data:`~boltzlab.estimators.annealing.chain_budget.DEFAULT_CHAINS` first,
        more while a check fails).
    record_ess : bool, default True
        Keep the running log-ESS after every temperature.
    max_chains : int, optional
        Cap of the chain budget; ``None``: ``n_chains`` where that is given, else
        :data:`~boltzlab.estimators.annealing.chain_budget.DEFAULT_MAX_CHAINS`. Never below
        ``n_chains``.
    target_stderr : float, optional
        Standard error (nats) the budget grows to; ``None``:
        :data:`~boltzlab.estimators.verdict.checks.DEFAULT_TARGET_STDERR`.
    lower_bound : LowerBound, optional
        A certified lower bound the budget's estimate must not sit below.
    schedule_check : bool, default True
        Also anneal as many independent chains on every
        :data:`~boltzlab.estimators.annealing.schedule_check.SCHEDULE_CHECK_STRIDE`-th
        temperature (a quarter more sweeps): how far the estimate moves with the schedule's
        length estimates the bias its error bar does not contain (docs/trust.md, "The schedule
        check"). Anchored AIS, whose anchor pins the estimate down, leaves it off.

    ``None`` is "not given" for the budget's options, as in
    :class:`~boltzlab.estimators.tempered.budget.TemperedOptions`: the plan of chains
    (:func:`~boltzlab.estimators.annealing.chain_budget.plan_chains`) fills in the defaults.
    """

    n_chains: int | None = None
    record_ess: bool = True
    max_chains: int | None = None
    target_stderr: float | None = None
    lower_bound: LowerBound | None = None
    schedule_check: bool = True

    def __post_init__(self) -> None:
        _check_flag(self.schedule_check, "schedule_check")
        _set(self, "target_stderr", check_target_stderr(self.target_stderr))
        if self.max_chains is not None:
            _set(self, "max_chains", check_positive_int(self.max_chains, "max_chains"))
        if self.n_chains is not None:
            _set(self, "n_chains", check_positive_int(self.n_chains, "n_chains"))
            if self.max_chains is not None and self.max_chains < self.n_chains:
                raise ValidationError(
                    f"max_chains ({self.max_chains}) is below n_chains ({self.n_chains}): the chain budget "
                    "starts from n_chains and grows up to max_chains; raise max_chains or leave it out for "
                    "exactly n_chains chains"
                )
        super().__post_init__()


@dataclass(frozen=True)
class AnchoredAISOptions(AISOptions):
    """Anchored AIS's options (:func:`~boltzlab.estimators.annealing.anchored.anchored_ais`): AIS's and the anchor's.

    Attributes
    ----------
    anchor_data : Tensor or array, shape (n_examples, n_visible), optional
        Where the anchor chains start (the training data); the estimator requires it.
    anchor_chains : int, default 1000
        Chains at β = 1 that collect the anchor set.
    anchor_sweeps : int, default 200
        Sweeps of each anchor chain.

    AIS's options otherwise (:class:`AISOptions`), except that ``n_chains`` is a fixed
    :data:`~boltzlab.estimators.annealing.chain_budget.DEFAULT_CHAINS` when none of
    ``n_chains``, ``max_chains`` and ``target_stderr`` is given: AIS's chain budget judges
    plain AIS's weights, whose spread the anchor replaces (on the sharp models where those
    weights are degenerate, the budget would run 16× the chains for an estimate the anchor
    already pins down), and ``schedule_check`` is off for the same reason.
    """

    anchor_data: Any = None
    anchor_chains: int = 1000
    anchor_sweeps: int = 200
    schedule_check: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        _set(self, "anchor_chains", check_positive_int(self.anchor_chains, "anchor_chains"))
        _set(self, "anchor_sweeps", check_nonnegative_int(self.anchor_sweeps, "anchor_sweeps"))
        if all(getattr(self, name) is None for name in BUDGET_OPTIONS):
            _set(self, "n_chains", DEFAULT_CHAINS)


@dataclass(frozen=True)
class RAISEOptions(AnnealingOptions):
    """RAISE's options (:func:`~boltzlab.estimators.annealing.raise_.raise_log_likelihood`).

    Attributes
    ----------
    n_chains : int, default 10
        Reverse chains per example, ``M``.
    chains_per_batch : int, default 16384
        Examples are annealed in batches of about this many chains (memory).
    schedule_check : bool, default True
        Also anneal the same examples on every
        :data:`~boltzlab.estimators.annealing.raise_.SCHEDULE_CHECK_STRIDE`-th temperature
        (a quarter of the sweeps): how far the estimate moves with the schedule's length
        is RAISE's bias, which its error bar over examples does not contain (docs/trust.md,
        "RAISE's schedule check").
    """

    n_chains: int = 10
    chains_per_batch: int = 16_384
    schedule_check: bool = True

    def __post_init__(self) -> None:
        _set(self, "n_chains", check_positive_int(self.n_chains, "n_chains"))
        _set(self, "chains_per_batch", check_positive_int(self.chains_per_batch, "chains_per_batch"))
        _check_flag(self.schedule_check, "schedule_check")
        super().__post_init__()


def _check_flag(value: Any, name: str) -> None:
    if not isinstance(value, bool):
        raise ValidationError(f"{name} must be True or False, got {value!r}")
