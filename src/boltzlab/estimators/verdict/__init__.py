"""The verdict every estimate leaves ``estimate_log_z`` with (docs/trust.md).

Generic over estimators: it imports no family. What differs between families (which checks
apply to their results, how to recompute an estimate on groups of chains) is in each
estimator's record (:mod:`boltzlab.estimators.record`).

- :mod:`~boltzlab.estimators.verdict.judge`: :func:`judge`, the checks combined into one verdict;
- :mod:`~boltzlab.estimators.verdict.checks`: the thresholds and the single checks;
- :mod:`~boltzlab.estimators.verdict.lower_bound`: the missing-mass witness, a certified lower
  bound on ``log Z`` from the states chains at β = 1 visit.
"""

from boltzlab.estimators.verdict.checks import Verdict
from boltzlab.estimators.verdict.judge import UNCHECKED_NO_DATA, judge
from boltzlab.estimators.verdict.lower_bound import LowerBound, certified_lower_bound

__all__ = ["UNCHECKED_NO_DATA", "LowerBound", "Verdict", "certified_lower_bound", "judge"]
