"""Block Gibbs leaves every tempered distribution invariant and has detailed balance per unit."""

import torch

import boltzlab as bl
from boltzlab.estimators import joint_log_probabilities
from boltzlab.evaluation import unit_transition_matrix
from harness import check_operator_exact, tiny_rbms


def test_gibbs_exact():
    check_operator_exact(bl.operators.get("gibbs"))


def test_single_unit_gibbs_detailed_balance():
    # diag(p)·T_i is symmetric for every single-unit update, at β = 1 and β < 1.
    operator = bl.operators.get("gibbs")
    for model in tiny_rbms():
        for beta in (1.0, 0.3):
            p = joint_log_probabilities(model, beta).exp()
            for layer, size in enumerate(model.layer_sizes):
                for unit in range(size):
                    flow = p[:, None] * unit_transition_matrix(model, operator, layer, unit, beta=beta)
                    assert torch.allclose(flow, flow.T, atol=1e-14)
