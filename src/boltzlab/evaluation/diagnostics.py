"""Mixing diagnostics in one place: autocorrelation time, ESS, SLEM and mode changes.

The implementations live in one module per concept; this module gathers them under the name
DESIGN.md gives (``evaluation/diagnostics.py``):

* :mod:`boltzlab.evaluation.autocorrelation` — integrated autocorrelation time by Sokal's
  adaptive window or an AR(p) fit (Thompson 2010), effective sample size;
* :mod:`boltzlab.evaluation.modes` — nearest class template, class changes, steps to the
  first change (Brügge, Fischer & Igel 2013, §5.3);
* :mod:`boltzlab.evaluation.transition` and :mod:`boltzlab.evaluation.slem_study` — exact
  sweep matrices, their SLEM, and the flip-versus-Gibbs SLEM study (ibid., Fig. 3).
"""

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
from boltzlab.evaluation.slem_study import SlemStudyResult, operator_slem, slem_study
from boltzlab.evaluation.transition import slem

__all__ = [
    "TIED",
    "AutocorrelationTime",
    "ShortChainWarning",
    "SlemStudyResult",
    "autocorrelation_function",
    "autocovariance",
    "class_templates",
    "count_mode_changes",
    "effective_sample_size",
    "integrated_autocorrelation_time",
    "nearest_template",
    "operator_slem",
    "slem",
    "slem_study",
    "steps_to_first_change",
]
