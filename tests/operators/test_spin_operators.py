"""Every layerwise operator on ±1 spin visible units, against enumeration and the equal binary model.

A spin model holds its visible layer 0/1 inside and reads ``s = 2v − 1``; its tempered family
is the equal binary model's (``W' = 2W``, ``b' = 2b``, ``c' = c − Wᵀ1``) state for state, so
every operator's exact sweep matrix must be that model's, and must keep the spin model's own
enumerated distribution.
"""

import pytest
import torch

import boltzlab as bl
from boltzlab.estimators import joint_log_probabilities
from boltzlab.evaluation import transition_matrix
from harness import OPERATOR_NAMES, check_operator_exact, random_spin_dbm, tiny_spin_rbms
from tolerances import INVARIANCE_ATOL


@pytest.mark.parametrize("name", OPERATOR_NAMES)
def test_operator_exact_on_spin_models(name):
    # p·T = p at β = 1, 0.6, 0 and sampled rows against the matrix, on spin RBMs and a spin DBM.
    check_operator_exact(
        bl.operators.get(name), models=[*tiny_spin_rbms(), random_spin_dbm((2, 2, 2), seed=9)]
    )


@pytest.mark.parametrize("name", OPERATOR_NAMES)
def test_spin_sweep_is_the_equal_binary_models_sweep(name):
    operator = bl.operators.get(name)
    models = [*tiny_spin_rbms(), random_spin_dbm((2, 2, 2), seed=9)]
    for model in models:
        binary = model.binary_rbm() if isinstance(model, bl.models.SpinRBM) else model.binary_dbm()
        for beta in (1.0, 0.4):
            ours = transition_matrix(model, operator, beta=beta)
            theirs = transition_matrix(binary, operator, beta=beta)
            assert (ours - theirs).abs().max().item() < 1e-12
            p = joint_log_probabilities(model, beta).exp()
            assert torch.allclose(p, joint_log_probabilities(binary, beta).exp(), atol=1e-14)
            assert (p @ ours - p).abs().max().item() < INVARIANCE_ATOL
