"""Mixing diagnostics in one place: autocorrelation time, ESS, SLEM and mode changes.

The implementations live in one module per concept; this module gathers them under the name
docs/architecture.md gives (``evaluation/diagnostics.py``):

* :mod:`boltzlab.evaluation.autocorrelation` — integrated autocorrelation time by Sokal's
  adaptive window or an AR(p) fit (Thompson 2010), effective sample size;
* :mod:`boltzlab.evaluation.modes` — nearest class template, class changes, steps to the
  first change (Brügge, Fischer & Igel 2013, §5.3);
* :mod:`boltzlab.evaluation.transition` — exact sweep matrices and their SLEM, and here
  :func:`operator_slem`, the SLEM of one operator's sweep on one tiny model.

The flip-versus-Gibbs SLEM study on random RBMs (ibid., Fig. 3) is a paper reproduction, in
the ``boltzlab-experiments`` package (``experiments/`` in a checkout).
"""

from __future__ import annotations

from boltzlab import operators as operator_registry
from boltzlab.errors import ValidationError
from boltzlab.evaluation.autocorrelation import (
    AutocorrelationTime,
    ShortChainWarning,
    autocorrelation_function,
    autocovariance,
    effective_sample_size,
    integrated_autocorrelation_time,
)
from boltzlab.evaluation.modes import (
    TIED,
    class_templates,
    count_mode_changes,
    nearest_template,
    steps_to_first_change,
)
from boltzlab.evaluation.transition import slem, transition_matrix
from boltzlab.models.base import TemperedModel
from boltzlab.operators.base import LayerwiseOperator

__all__ = [
    "TIED",
    "AutocorrelationTime",
    "ShortChainWarning",
    "autocorrelation_function",
    "autocovariance",
    "class_templates",
    "count_mode_changes",
    "effective_sample_size",
    "integrated_autocorrelation_time",
    "nearest_template",
    "operator_slem",
    "slem",
    "steps_to_first_change",
]


def operator_slem(model: TemperedModel, operator: str | LayerwiseOperator, *, beta: float = 1.0) -> float:
    """SLEM of the exact joint-space sweep matrix of ``operator`` on a tiny ``model``.

    A smaller SLEM means a faster worst-case geometric convergence, ``‖p_0 Tⁿ − p‖ = O(SLEMⁿ)``.
    The matrix is the joint (v, h) chain of the hidden-first sweep ``T_h T_v``
    (docs/open-questions.md item 21), built by :func:`boltzlab.evaluation.transition_matrix` from the
    operator's own ``probability_on``.

    Parameters
    ----------
    model : TemperedModel
        At most 12 units in all (the matrix is ``2^N × 2^N``).
    operator : str or LayerwiseOperator
        ``"gibbs"``, ``"flip"``, ``"mixture"`` or an operator object.
    beta : float, default 1.0

    Returns
    -------
    float
        Second-largest eigenvalue modulus of ``T_{group 1} T_{group 2} ⋯`` (for an RBM
        ``T_h T_v``); 1 for a reducible or periodic chain.

    Examples
    --------
    >>> import torch
    >>> from boltzlab import RBM
    >>> model = RBM(weights=torch.zeros(2, 2, dtype=torch.float64), dtype=torch.float64)
    >>> round(operator_slem(model, "gibbs"), 12)  # independent units, drawn afresh: SLEM 0
    0.0
    """
    op = operator_registry.get(operator)
    if not isinstance(op, LayerwiseOperator):
        raise ValidationError(f"operator must be a layerwise operator (gibbs, flip, mixture), got {op!r}")
    return slem(transition_matrix(model, op, beta=beta))
