"""boltzlab: train, sample and measure Boltzmann machines.

>>> import boltzlab as bl
>>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
>>> log_z = bl.exact_log_z(model)
"""

from boltzlab import data, errors, evaluation, operators, rng, tempering
from boltzlab.chains import Chains
from boltzlab.estimators import LogZEstimate, estimate_log_z, exact_log_z
from boltzlab.evaluation import log_likelihood
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
    "rng",
    "sample",
    "tempering",
    "train",
    "variational_lower_bound",
]

__version__ = "0.1.0"
