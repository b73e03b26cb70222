"""Tolerances shared by the test suite, each with the reason for its value.

Statistical checks compare with exact answers in units of the estimator's or sampler's own
standard error, so a correct implementation fails a check with a small, stated probability.
Exact (enumeration) checks compare float64 results, so their tolerances are round-off.
"""

from __future__ import annotations

# ---------------------------------------------------------------------------- statistics
MAX_Z = 4.0
"""Largest accepted ``|estimate − exact| / stderr`` for one approximately normal estimate.

A correct estimator exceeds it with probability about 6e-5 (two-sided normal tail).
"""

FALSE_ALARM = 1e-4
"""Probability that a correct sampler fails one Monte Carlo distribution check.

Used as δ in total-variation bounds (McDiarmid) and split over the cells of a histogram
(Bonferroni) when every cell count is tested against its exact binomial law.
"""

# ---------------------------------------------------------------------------- exact checks
INVARIANCE_ATOL = 1e-10
"""Largest accepted ``max |π·K − π|`` for an exact float64 transition kernel ``K``.

Kernels of tiny models are products of a few float64 matrices; round-off stays near 1e-15,
so anything above this is a real error in the kernel or the sampler it describes.
"""

ROW_SUM_ATOL = 1e-12
"""Largest accepted deviation of a row sum of an exact float64 stochastic matrix from 1."""
