"""The SLEM study of flip-the-state against Gibbs (Brügge, Fischer & Igel 2013, Fig. 3).

Properties checked (the closed forms of one operator's SLEM are library tests,
tests/evaluation/test_operator_slem.py):

* Tiny weights: flip flips almost every unit every sweep (SLEM near 1), Gibbs nearly
  resamples afresh (SLEM near 0).
* On a reduced grid (2×2 and 3×3, c ∈ {1, 3, 10}, 20 models) the number of models where flip
  has the smaller SLEM lies inside the central 99.99 % binomial interval around reference
  fractions measured on 1,000 models per cell (``slem_study(sizes=[(2, 2), (3, 3)],
  scales=[1, 3, 10], n_models=1000, generator=12345)``: 0/1000, 400/1000, 816/1000 for 2×2
  and 0/1000, 403/1000, 830/1000 for 3×3), and rises with c.
* Same seed, same study; validation names the argument.
"""

from __future__ import annotations

import pytest
import torch
from scipy import stats

from boltzlab.errors import ValidationError
from boltzlab_experiments.flip_the_state.slem import SlemStudyResult, slem_study

# Reference fractions (module docstring): rows are sizes 2×2 and 3×3, columns c = 1, 3, 10.
REFERENCE_FRACTIONS = ((0.0, 0.400, 0.816), (0.0, 0.403, 0.830))
# Two-sided probability outside the accepted binomial interval, per cell.
ALPHA = 1e-4


def test_tiny_weights_flip_oscillates() -> None:
    # Weights of 1e-3 and zero biases: every logit is within 3e-3 of zero but (off the
    # all-zero layers) not tied, so flip-the-state flips almost every unit every sweep and
    # its SLEM is close to 1, while Gibbs is close to independent resampling (SLEM ≈ 0).
    result = slem_study(sizes=[(2, 3)], scales=[1e-3], n_models=3, generator=7)
    assert bool((result.slem_operator > 0.98).all())
    assert bool((result.slem_reference < 0.02).all())
    assert result.n_smaller.tolist() == [[0]]


def test_reduced_grid_matches_reference_fractions() -> None:
    n_models = 20
    result = slem_study(sizes=[(2, 2), (3, 3)], scales=[1, 3, 10], n_models=n_models, generator=2013)
    assert isinstance(result, SlemStudyResult)
    assert result.slem_operator.shape == (2, 3, n_models) == result.slem_reference.shape
    assert result.slem_operator.dtype == torch.float64
    for slems in (result.slem_operator, result.slem_reference):
        assert bool(((slems >= 0) & (slems <= 1 + 1e-9)).all())
    counts = result.n_smaller
    torch.testing.assert_close(result.fraction, counts.to(torch.float64) / n_models)
    for size_index, row in enumerate(REFERENCE_FRACTIONS):
        for scale_index, reference in enumerate(row):
            low, high = stats.binom.interval(1 - ALPHA, n_models, reference)
            count = int(counts[size_index, scale_index])
            assert low <= count <= high, (
                result.sizes[size_index],
                result.scales[scale_index],
                count,
                reference,
            )
    # Rising with c (both sizes pooled).
    pooled = counts.sum(0).tolist()
    assert pooled[0] < pooled[1] < pooled[2], pooled
    assert "3x3" in result.table()


def test_same_seed_same_study() -> None:
    first = slem_study(sizes=[(2, 2)], scales=[2.0], n_models=4, generator=5)
    second = slem_study(sizes=[(2, 2)], scales=[2.0], n_models=4, generator=torch.Generator().manual_seed(5))
    assert torch.equal(first.slem_operator, second.slem_operator)
    assert torch.equal(first.slem_reference, second.slem_reference)
    assert (first.operator, first.reference) == ("flip", "gibbs")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"sizes": [(7, 6)]}, "sizes"),
        ({"sizes": [(2, 2, 2)]}, "sizes"),
        ({"sizes": []}, "sizes"),
        ({"scales": []}, "scales"),
        ({"scales": [-1.0]}, "scales"),
        ({"n_models": 0}, "n_models"),
    ],
)
def test_validation(arguments: dict, message: str) -> None:
    options = {"sizes": [(2, 2)], "scales": [1.0], "n_models": 1, "generator": 0} | arguments
    with pytest.raises(ValidationError, match=message):
        slem_study(**options)
