"""SLEM of one operator's exact sweep on one tiny model (:func:`boltzlab.evaluation.operator_slem`).

Properties checked: closed forms at zero weights, where every unit is an independent two-state
chain: Gibbs has SLEM 0; flip-the-state has SLEM ``max_i e^{−|b_i|} = max (1 − p*)/p*`` over
units with a non-zero bias (tied units are redrawn by the tie rule, eigenvalue 0); the per-unit
α-mixture has ``α·max_i e^{−|b_i|}`` (a 2-state chain's second eigenvalue ``T₀₀ − T₁₀`` is
linear in the matrix); an operator that is not layerwise is refused by name.
"""

from __future__ import annotations

import math

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.evaluation import operator_slem


def _zero_weight_rbm(visible_bias: list[float], hidden_bias: list[float]) -> bl.RBM:
    weights = torch.zeros(len(visible_bias), len(hidden_bias), dtype=torch.float64)
    return bl.RBM(
        weights=weights,
        visible_bias=torch.tensor(visible_bias, dtype=torch.float64),
        hidden_bias=torch.tensor(hidden_bias, dtype=torch.float64),
        dtype=torch.float64,
    )


def test_zero_weight_closed_forms() -> None:
    # Visible biases (0.7, −1.2, 0), hidden (2.0, 0): the slowest flip unit is the one with
    # the smallest non-zero |b| = 0.7; the zero-bias units are tied and drawn afresh.
    model = _zero_weight_rbm([0.7, -1.2, 0.0], [2.0, 0.0])
    expected_flip = math.exp(-0.7)
    assert operator_slem(model, "gibbs") == pytest.approx(0.0, abs=1e-9)
    assert operator_slem(model, "flip") == pytest.approx(expected_flip, abs=1e-9)
    assert operator_slem(model, bl.operators.get("mixture", alpha=0.3)) == pytest.approx(
        0.3 * expected_flip, abs=1e-9
    )
    # All biases zero: every unit is tied, so flip-the-state *is* Gibbs here.
    tied = _zero_weight_rbm([0.0, 0.0], [0.0, 0.0, 0.0])
    assert operator_slem(tied, "flip") == pytest.approx(0.0, abs=1e-9)


def test_non_layerwise_operator_is_refused() -> None:
    with pytest.raises(ValidationError, match="layerwise"):
        operator_slem(_zero_weight_rbm([0.5], [0.5]), "hmc")
