"""Evaluation: log-likelihood, pseudo-likelihood, exact transition matrices, mixing diagnostics."""

from boltzlab.estimators.likelihood import log_likelihood, log_unnormalized
from boltzlab.estimators.pseudo_likelihood import pseudo_log_likelihood, site_log_conditionals
from boltzlab.evaluation.diagnostics import (
    TIED,
    AutocorrelationTime,
    ShortChainWarning,
    autocorrelation_function,
    autocovariance,
    class_templates,
    count_mode_changes,
    effective_sample_size,
    integrated_autocorrelation_time,
    nearest_template,
    operator_slem,
    steps_to_first_change,
)
from boltzlab.evaluation.transition import (
    group_transition_matrix,
    is_primitive,
    slem,
    transition_matrix,
    unit_transition_matrix,
)

__all__ = [
    "TIED",
    "AutocorrelationTime",
    "ShortChainWarning",
    "autocorrelation_function",
    "autocovariance",
    "class_templates",
    "count_mode_changes",
    "effective_sample_size",
    "group_transition_matrix",
    "integrated_autocorrelation_time",
    "is_primitive",
    "log_likelihood",
    "log_unnormalized",
    "nearest_template",
    "operator_slem",
    "pseudo_log_likelihood",
    "site_log_conditionals",
    "slem",
    "steps_to_first_change",
    "transition_matrix",
    "unit_transition_matrix",
]
