"""Models: what the distribution is (energy, conditionals, tempered family)."""

from boltzlab.models.base import (
    MarginalTerms,
    TemperedModel,
    log_f_marginal,
    log_f_marginal_all,
    path_derivative,
)
from boltzlab.models.dbm import DBM
from boltzlab.models.gaussian_rbm import GaussianRBM
from boltzlab.models.mean_field import (
    MeanFieldResult,
    binary_entropy,
    mean_field_posterior,
    variational_lower_bound,
    variational_lower_bound_per_example,
)
from boltzlab.models.potts_dbm import PottsDBM
from boltzlab.models.potts_rbm import PottsRBM
from boltzlab.models.rbm import RBM, all_binary_states
from boltzlab.models.spin_dbm import SpinDBM
from boltzlab.models.spin_rbm import SpinRBM
from boltzlab.models.toy import GaussianMixtureFamily

__all__ = [
    "DBM",
    "RBM",
    "GaussianMixtureFamily",
    "GaussianRBM",
    "MarginalTerms",
    "MeanFieldResult",
    "PottsDBM",
    "PottsRBM",
    "SpinDBM",
    "SpinRBM",
    "TemperedModel",
    "all_binary_states",
    "binary_entropy",
    "log_f_marginal",
    "log_f_marginal_all",
    "mean_field_posterior",
    "path_derivative",
    "variational_lower_bound",
    "variational_lower_bound_per_example",
]
