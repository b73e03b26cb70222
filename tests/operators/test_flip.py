"""Flip-the-state: invariance, per-unit detailed balance, ergodicity with and only with the tie rule."""

import torch

import boltzlab as bl
from boltzlab.estimators import joint_log_probabilities
from boltzlab.evaluation import is_primitive, transition_matrix, unit_transition_matrix
from boltzlab.operators.flip import metropolised_gibbs
from harness import binary_as_potts, check_operator_exact, random_rbm, tiny_potts, tiny_rbms
from tolerances import MAX_Z


def test_flip_exact():
    check_operator_exact(bl.operators.get("flip"))


def test_single_unit_flip_detailed_balance():
    operator = bl.operators.get("flip")
    for model in tiny_rbms():
        for beta in (1.0, 0.3, 0.0):
            p = joint_log_probabilities(model, beta).exp()
            for layer, size in enumerate(model.layer_sizes):
                for unit in range(size):
                    flow = p[:, None] * unit_transition_matrix(model, operator, layer, unit, beta=beta)
                    assert torch.allclose(flow, flow.T, atol=1e-14)


def test_probability_on_matches_paper_activation():
    # P(new=1) = min(e^x, 1) from 0, max(1 - e^{-x}, 0) from 1, 1/2 at a tie.
    x = torch.tensor([-3.0, -0.5, 0.0, 0.5, 3.0], dtype=torch.float64)
    operator = bl.operators.get("flip")
    from_off = operator.probability_on(x, torch.zeros_like(x))
    from_on = operator.probability_on(x, torch.ones_like(x))
    assert torch.allclose(
        from_off, torch.tensor([torch.e**-3, torch.e**-0.5, 0.5, 1.0, 1.0], dtype=torch.float64)
    )
    assert torch.allclose(
        from_on,
        torch.tensor([0.0, 0.0, 0.5, 1 - torch.e**-0.5, 1 - torch.e**-3], dtype=torch.float64),
    )


def test_periodic_flip_chain_is_irreducible_and_aperiodic():
    # Zero biases and c = 1: ties occur; with the tie rule some power of T is strictly positive.
    for seed, (n_visible, n_hidden) in enumerate([(2, 2), (3, 2), (2, 3)]):
        model = random_rbm(n_visible, n_hidden, scale=1.0, seed=seed, zero_biases=True)
        assert is_primitive(transition_matrix(model, bl.operators.get("flip")))


def test_flip_without_tie_rule_is_not_ergodic_on_zero_weights():
    # All logits are exactly 0: the plain Metropolized flip flips every unit every sweep, so
    # from any state it alternates between two states and never reaches the others.
    model = bl.RBM(weights=torch.zeros(3, 2, dtype=torch.float64), dtype=torch.float64)
    broken = transition_matrix(model, bl.operators.get("flip", tie_rule=False))
    assert not is_primitive(broken)
    assert bl.evaluation.slem(broken) > 1 - 1e-12
    p = joint_log_probabilities(model).exp()
    assert torch.allclose(p @ broken, p)  # still invariant: the failure is ergodicity alone
    fixed = transition_matrix(model, bl.operators.get("flip"))
    assert is_primitive(fixed)


def test_sampled_flip_uses_gibbs_probabilities_exactly_at_ties():
    # The fast sampling path (threshold_) must apply the tie rule too: with every logit exactly
    # 0, each unit is 1 with probability 1/2 whatever its current value; without the rule it
    # always flips. 13 x 7 x 2000 draws per current value.
    n = 13 * 2000
    logits = torch.zeros(n, 7)
    generator = torch.Generator().manual_seed(0)
    for current_value in (0.0, 1.0):
        current = torch.full((n, 7), current_value)
        new = bl.operators.get("flip").sample_layer(logits, current, generator=generator)
        stderr = (0.25 / new.numel()) ** 0.5
        assert abs(new.mean().item() - 0.5) < MAX_Z * stderr
        broken = bl.operators.get("flip", tie_rule=False).sample_layer(logits, current, generator=generator)
        assert torch.equal(broken, 1 - current)
    # Mixed: ties in some units only, strong logits elsewhere.
    mixed = torch.tensor([[0.0, 30.0, -30.0]]).expand(n, -1)
    new = bl.operators.get("flip").sample_layer(mixed, torch.zeros(n, 3), generator=generator)
    assert abs(new[:, 0].mean().item() - 0.5) < MAX_Z * (0.25 / n) ** 0.5
    assert torch.all(new[:, 1] == 1) and torch.all(new[:, 2] == 0)


def test_flip_exact_on_potts_models():
    # q = 3 and q = 21 categorical sites: p·T = p at every β, and the sampler draws the rows.
    check_operator_exact(bl.operators.get("flip"), models=tiny_potts())


def test_flip_on_q2_potts_is_the_binary_kernel():
    # A q = 2 Potts RBM with state 1 as "on" is the binary RBM: the same exact sweep matrix.
    for model in tiny_rbms():
        potts = binary_as_potts(model)
        for beta in (1.0, 0.4):
            binary = bl.evaluation.transition_matrix(model, bl.operators.get("flip"), beta=beta)
            categorical = bl.evaluation.transition_matrix(potts, bl.operators.get("flip"), beta=beta)
            assert (binary - categorical).abs().max().item() < 1e-12


def test_potts_flip_keeps_the_tie_rule_at_q2():
    # Zero weights: every site's two logits tie. The q = 2 Potts flip is the binary flip with
    # and without the tie rule, so it is ergodic with it and periodic without it.
    model = bl.RBM(weights=torch.zeros(3, 2, dtype=torch.float64), dtype=torch.float64)
    potts = binary_as_potts(model)
    for tie_rule in (True, False):
        operator = bl.operators.get("flip", tie_rule=tie_rule)
        matrix = transition_matrix(potts, operator)
        assert (matrix - transition_matrix(model, operator)).abs().max().item() < 1e-12
        assert is_primitive(matrix) == tie_rule


def test_metropolised_gibbs_is_liu_kernel_even_for_extreme_logits():
    # K(a → b) = p_b/(1 − p_a)·min(1, (1 − p_a)/(1 − p_b)) for b ≠ a (Liu 1996): the direct
    # formula from the probabilities where 1 − p_a is representable, and the log-space one
    # (others' log-sum-exp by masking) everywhere, including p_a within 1e-17 of 1 (row 1).
    logits = torch.tensor(
        [[0.3, -1.2, 2.0, 0.0], [40.0, 0.0, -3.0, 1.0], [1.0, 1.0, 1.0, 1.0]], dtype=torch.float64
    )
    for current_state in range(4):
        current = torch.nn.functional.one_hot(torch.full((3,), current_state), 4).to(torch.float64)
        kernel = metropolised_gibbs(logits[:, None, :], current[:, None, :])[:, 0, :]
        assert torch.allclose(kernel.sum(1), torch.ones(3, dtype=torch.float64), atol=1e-15)
        p = torch.softmax(logits, 1)
        others = torch.logsumexp(
            logits[:, None, :].masked_fill(torch.eye(4, dtype=torch.bool), -torch.inf), 2
        )
        for b in range(4):
            if b == current_state:
                continue
            expected = torch.exp(logits[:, b] - torch.maximum(others[:, current_state], others[:, b]))
            assert torch.allclose(kernel[:, b], expected, rtol=1e-12, atol=0)
            direct = (
                p[:, b]
                / (1 - p[:, current_state])
                * torch.clamp((1 - p[:, current_state]) / (1 - p[:, b]), max=1)
            )
            finite = (1 - p[:, current_state]) > 1e-12
            assert torch.allclose(kernel[finite, b], direct[finite], rtol=1e-9)
        assert bool((kernel >= 0).all())
