"""boltzlab: train, sample and measure Boltzmann machines.

>>> import boltzlab as bl
>>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
>>> log_z = bl.exact_log_z(model)

The names below are imported when first used (PEP 562), not by ``import boltzlab``: torch and
scipy take seconds to import, and ``boltzlab --help`` must answer at once (docs/architecture.md,
"Start-up"). ``bl.RBM`` or ``from boltzlab import RBM`` behaves exactly as an eager import
would; so does any submodule, e.g. ``bl.io``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what a type checker and an IDE see: the eager form of the table below
    from boltzlab import data, errors, evaluation, operators, rng, tempering
    from boltzlab.chains import Chains
    from boltzlab.estimators import LogZEstimate, estimate_log_z, exact_log_z
    from boltzlab.evaluation import log_likelihood, pseudo_log_likelihood
    from boltzlab.models import DBM, RBM, variational_lower_bound
    from boltzlab.sampling import SampleResult, sample
    from boltzlab.training import TrainResult, train

__all__ = [
    "DBM",
    "RBM",
    "Chains",
    "LogZEstimate",
    "SampleResult",
    "TrainResult",
    "data",
    "errors",
    "estimate_log_z",
    "evaluation",
    "exact_log_z",
    "log_likelihood",
    "operators",
    "pseudo_log_likelihood",
    "rng",
    "sample",
    "tempering",
    "train",
    "variational_lower_bound",
]

__version__ = "0.1.0"

#: Public name → the module that defines it (a name that is itself a submodule maps to None).
_EXPORTS: dict[str, str | None] = {
    "DBM": "boltzlab.models",
    "RBM": "boltzlab.models",
    "variational_lower_bound": "boltzlab.models",
    "Chains": "boltzlab.chains",
    "LogZEstimate": "boltzlab.estimators",
    "estimate_log_z": "boltzlab.estimators",
    "exact_log_z": "boltzlab.estimators",
    "log_likelihood": "boltzlab.evaluation",
    "pseudo_log_likelihood": "boltzlab.evaluation",
    "SampleResult": "boltzlab.sampling",
    "sample": "boltzlab.sampling",
    "TrainResult": "boltzlab.training",
    "train": "boltzlab.training",
    "data": None,
    "errors": None,
    "evaluation": None,
    "operators": None,
    "rng": None,
    "tempering": None,
}


def __getattr__(name: str) -> Any:
    """Import a public name, or any submodule (``bl.io``, ``bl.models``), on first use."""
    if name in _EXPORTS and _EXPORTS[name] is not None:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    elif name.startswith("_"):
        raise AttributeError(f"module 'boltzlab' has no attribute {name!r}")
    else:
        try:
            value = importlib.import_module(f"boltzlab.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"boltzlab.{name}":
                raise  # the submodule exists but one of its own imports is missing
            raise AttributeError(f"module 'boltzlab' has no attribute {name!r}") from None
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
