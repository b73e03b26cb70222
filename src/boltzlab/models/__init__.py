"""Models: what the distribution is (energy, conditionals, tempered family)."""

from boltzlab.models.base import (
    MarginalTerms,
    TemperedModel,
    log_f_marginal,
    log_f_marginal_all,
    path_derivative,
)
from boltzlab.models.rbm import RBM, all_binary_states
from boltzlab.models.toy import GaussianMixtureFamily

__all__ = [
    "RBM",
    "GaussianMixtureFamily",
    "MarginalTerms",
    "TemperedModel",
    "all_binary_states",
    "log_f_marginal",
    "log_f_marginal_all",
    "path_derivative",
]
