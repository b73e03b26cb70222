"""Evaluation: log-likelihood, exact transition matrices, mixing diagnostics."""

from boltzlab.evaluation.likelihood import log_likelihood, log_unnormalized
from boltzlab.evaluation.transition import (
    group_transition_matrix,
    is_primitive,
    slem,
    transition_matrix,
    unit_transition_matrix,
)

__all__ = [
    "group_transition_matrix",
    "is_primitive",
    "log_likelihood",
    "log_unnormalized",
    "slem",
    "transition_matrix",
    "unit_transition_matrix",
]
