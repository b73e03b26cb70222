"""One record per estimator: what it is called, what runs it, and what it can do.

Every place that treats estimators differently reads the record instead of a list of method
names: :func:`~boltzlab.estimators.registry.estimate_log_z` (does the budget grow, which rows
count as data, is there a trajectory route), the verdict (which checks apply to the family's
results, how to recompute the estimate on groups of chains), matched budgets
(``boltzlab evaluate --budget``), and the CLI (which flags a method takes). Adding an
estimator is one module whose function is decorated with :func:`register_estimator`, plus one
harness test (CONTRIBUTING.md, "A new log Z estimator").

This module imports no estimator, so every estimator module can register itself here and the
verdict can read the records without importing any family.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from boltzlab.errors import ValidationError
from boltzlab.registry import Registry

if TYPE_CHECKING:
    from boltzlab.estimators.result import LogZEstimate
    from boltzlab.estimators.verdict.checks import Verdict

__all__ = [
    "FAMILIES",
    "FLAGS",
    "EstimatorRecord",
    "check_option_names",
    "find_record",
    "get_record",
    "methods",
    "records",
    "register_estimator",
    "unregister_estimator",
]

Family = Literal["exact", "annealing", "tempered", "trajectory"]
#: The families, in the order the docs and the CLI's messages list them.
FAMILIES: tuple[Family, ...] = ("exact", "annealing", "tempered", "trajectory")

#: Command-line flags of ``boltzlab logz`` (without ``--``) and the option each sets. A record's
#: ``flags`` says which of them its method takes; ``keywords`` renames one for that method.
#: ``--operator`` and ``--alpha`` build one ``operator``; ``--examples`` is how many held-out rows
#: the command line passes as RAISE's ``data``.
FLAGS: Mapping[str, str] = MappingProxyType(
    {
        "chains": "n_chains",
        "temperatures": "n_temperatures",
        "sweeps": "n_sweeps",
        "schedule": "schedule",
        "decelerate": "decelerate",
        "target-stderr": "target_stderr",
        "max-chains": "max_chains",
        "operator": "operator",
        "alpha": "operator",
        "examples": "data",
    }
)


def check_option_names(options: type, given: Mapping[str, Any], method: str, own: Sequence[str] = ()) -> None:
    """Refuse names in ``given`` that are not fields of the options class, listing the accepted ones.

    ``own`` are the method's own options (read before the class), listed first; ``generator``
    is always accepted.
    """
    names = [field.name for field in dataclasses.fields(options)]
    unknown = sorted(set(given) - set(names))
    if unknown:
        accepted = ", ".join([*own, *names, "generator"])
        raise ValidationError(f"unknown {method} option(s) {', '.join(unknown)}; {method} takes {accepted}")


EstimatorFunction = Callable[..., "LogZEstimate"]
#: ``checks(estimate, verdict) -> estimate``: the family's checks on its own results, added to
#: ``verdict``; may return the estimate with a wider error bar (docs/trust.md).
FamilyChecks = Callable[["LogZEstimate", "Verdict"], "LogZEstimate"]


@dataclass(frozen=True)
class EstimatorRecord:
    """What an estimator is and can do; one per method name.

    Attributes
    ----------
    name : str
        The method name, ``estimate_log_z(model, method=name)``.
    run : callable
        ``run(model, *, generator, **options) -> LogZEstimate`` (``"exact"``: no generator).
    family : {"exact", "annealing", "tempered", "trajectory"}
        Where it lives (``boltzlab.estimators.<family>``) and how the docs group it.
    grows : callable, optional
        ``grows(options) -> bool``: whether these options let the budget grow (AIS's chain
        budget, the tempered budget). Where it does, the verdict's witness runs first and its
        bound goes to the budget as ``lower_bound``.
    data_option : str, optional
        The option whose rows are data (RAISE's ``"data"``, anchored AIS's
        ``"anchor_data"``): they start the verdict's witness when no ``check_data`` is given.
    anchors_on_check_data : bool
        ``check_data`` (or the model's witness rows) fill ``data_option`` when it is not given.
    trajectory_route : str, optional
        The method run along the training trajectory when this one is flagged and
        ``trajectory=`` is given (:mod:`boltzlab.estimators.routes`).
    needs_trajectory : bool
        It runs along the training trajectory and takes ``trajectory=`` (a required option).
    shards : bool
        Its chains (or examples) are split over the processes of a ``torchrun`` group.
    options : type, optional
        The frozen dataclass of the options it takes besides ``model`` and ``generator`` (the
        tempered families' :class:`~boltzlab.estimators.tempered.budget.TemperedOptions`, the
        annealing family's :class:`~boltzlab.estimators.annealing.options.AISOptions`, ...),
        needed where ``run``'s signature does not spell them out (``**options``); its fields
        are the option names, its ``from_given`` checks them once.
    passes_on : str or callable, optional
        The method or function whose options it also takes and hands on, where no ``options``
        class lists them.
    checks : callable, optional
        The family's checks of a result (:data:`FamilyChecks`); the verdict runs them after
        the standard-error check and before the lower bound.
    from_samples : callable, optional
        ``from_samples(samples) -> LogZEstimate``: the estimate recomputed from tempered
        samples with the method's defaults (the verdict's chain-group check).
    matched : callable, optional
        ``matched(sweeps_per_chain) -> dict``: options costing that many Gibbs sweeps per
        chain (the papers' x-axis; ``boltzlab evaluate --budget``).
    flags : frozenset of str
        The ``boltzlab logz`` flags (keys of :data:`FLAGS`) it takes.
    keywords : mapping
        Flag → option name where the method calls it differently (trajectory AIS's
        ``--temperatures`` is its ``n_steps``).
    """

    name: str
    run: EstimatorFunction
    family: Family
    grows: Callable[[Mapping[str, Any]], bool] | None = None
    data_option: str | None = None
    anchors_on_check_data: bool = False
    trajectory_route: str | None = None
    needs_trajectory: bool = False
    shards: bool = False
    options: type | None = None
    passes_on: str | Callable[..., Any] | None = None
    checks: FamilyChecks | None = None
    from_samples: Callable[[Any], LogZEstimate] | None = None
    matched: Callable[[int], dict[str, Any]] | None = None
    flags: frozenset[str] = frozenset()
    keywords: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {self.family!r}")
        unknown = sorted(set(self.flags) - set(FLAGS))
        if unknown:
            raise ValueError(f"unknown flags {unknown} for {self.name!r}; known: {', '.join(FLAGS)}")
        renamed = sorted(set(self.keywords) - set(self.flags))
        if renamed:
            raise ValueError(f"keywords rename flags {renamed} that {self.name!r} does not take")
        if self.anchors_on_check_data and self.data_option is None:
            raise ValueError(f"{self.name!r} anchors on check_data but names no data_option to put it in")
        object.__setattr__(self, "flags", frozenset(self.flags))
        object.__setattr__(self, "keywords", MappingProxyType(dict(self.keywords)))

    def keyword(self, flag: str) -> str:
        """The option that ``--flag`` sets for this method."""
        return self.keywords.get(flag, FLAGS[flag])

    def option_names(self) -> frozenset[str]:
        """Every option name it takes: ``options``' fields, ``run``'s keyword parameters and
        those of what it ``passes_on`` to."""
        names = _keyword_names(self.run)
        if self.options is not None:
            names |= {field.name for field in dataclasses.fields(self.options)}
        if isinstance(self.passes_on, str):
            names |= get_record(self.passes_on).option_names()
        elif self.passes_on is not None:
            names |= _keyword_names(self.passes_on)
        return frozenset(names - {"generator"})


def _keyword_names(function: Callable[..., Any]) -> set[str]:
    parameters = inspect.signature(function).parameters.items()
    return {name for name, parameter in parameters if parameter.kind is inspect.Parameter.KEYWORD_ONLY}


_RECORDS: Registry[EstimatorRecord] = Registry("method")


def register_estimator(
    name: str, *, family: Family, **capabilities: Any
) -> Callable[[EstimatorFunction], EstimatorFunction]:
    """Function decorator: file the estimator's :class:`EstimatorRecord` under ``name``.

    ``capabilities`` are the record's other fields (``grows``, ``checks``, ``flags``, ...).

    Examples
    --------
    A fixed-budget annealing estimator that ``boltzlab logz --chains`` reaches::

        @register_estimator("my-ais", family="annealing", flags={"chains"})
        def my_ais(model, *, generator, n_chains=100, **unknown): ...
    """

    def decorate(function: EstimatorFunction) -> EstimatorFunction:
        # Filed and stamped under one spelling: "My_TS" is "my-ts" everywhere.
        canonical = name.lower().replace("_", "-")
        _RECORDS.add(canonical, EstimatorRecord(name=canonical, run=function, family=family, **capabilities))
        return function

    return decorate


def unregister_estimator(name: str) -> None:
    """Forget the estimator filed under ``name`` (for tests that register temporary ones)."""
    _RECORDS.remove(name)


def get_record(method: str) -> EstimatorRecord:
    """The record of ``method`` (any case, ``_`` for ``-``); ValidationError listing the methods."""
    return _RECORDS.get(method)


def find_record(method: str) -> EstimatorRecord | None:
    """The record of ``method``, or None where no estimator has that name."""
    return _RECORDS.get(method) if method in _RECORDS else None


def methods() -> tuple[str, ...]:
    """Method names accepted by :func:`~boltzlab.estimators.registry.estimate_log_z`, sorted."""
    return _RECORDS.names()


def records(family: Family | None = None) -> tuple[EstimatorRecord, ...]:
    """Every record (of one ``family``), sorted by name."""
    every = (_RECORDS.get(name) for name in _RECORDS.names())
    return tuple(record for record in every if family is None or record.family == family)
