"""Block Gibbs leaves every tempered distribution invariant and has detailed balance per unit."""

import torch

import boltzlab as bl
from boltzlab.estimators import joint_log_probabilities
from boltzlab.evaluation import unit_transition_matrix
from harness import binary_as_potts, check_operator_exact, tiny_potts, tiny_rbms


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


def test_gibbs_exact_on_potts_models():
    # q = 3 and q = 21 categorical sites: p·T = p at every β, and the sampler draws the rows.
    check_operator_exact(bl.operators.get("gibbs"), models=tiny_potts())


def test_gibbs_on_q2_potts_is_the_binary_kernel():
    # A q = 2 Potts RBM with state 1 as "on" is the binary RBM: the same exact sweep matrix.
    for model in tiny_rbms():
        potts = binary_as_potts(model)
        for beta in (1.0, 0.4):
            binary = bl.evaluation.transition_matrix(model, bl.operators.get("gibbs"), beta=beta)
            categorical = bl.evaluation.transition_matrix(potts, bl.operators.get("gibbs"), beta=beta)
            assert (binary - categorical).abs().max().item() < 1e-12
