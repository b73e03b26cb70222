"""The per-unit α-mixture of flip and Gibbs."""

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from harness import binary_as_potts, check_operator_exact, tiny_potts, tiny_rbms


def test_mixture_exact():
    check_operator_exact(bl.operators.get("mixture", alpha=0.5))


def test_mixture_endpoints_are_gibbs_and_flip():
    x = torch.linspace(-4, 4, 9, dtype=torch.float64)
    for current in (torch.zeros_like(x), torch.ones_like(x)):
        gibbs = bl.operators.get("gibbs").probability_on(x, current)
        flip = bl.operators.get("flip").probability_on(x, current)
        assert torch.allclose(bl.operators.get("mixture", alpha=0.0).probability_on(x, current), gibbs)
        assert torch.allclose(bl.operators.get("mixture", alpha=1.0).probability_on(x, current), flip)
        half = bl.operators.get("mixture", alpha=0.25).probability_on(x, current)
        assert torch.allclose(half, 0.25 * flip + 0.75 * gibbs)


def test_registry_errors_are_clear():
    # An unknown name lists the known ones; a bad parameter is named.
    with pytest.raises(ValidationError, match="metropolis") as error:
        bl.operators.get("metropolis")
    for name in ("gibbs", "flip", "mixture"):
        assert name in str(error.value)
    with pytest.raises(ValidationError, match="alpha"):
        bl.operators.get("mixture", alpha=2.0)


def test_mixture_exact_on_potts_models():
    # q = 3 and q = 21 categorical sites: p·T = p at every β, and the sampler draws the rows.
    check_operator_exact(bl.operators.get("mixture", alpha=0.3), models=tiny_potts())


def test_mixture_on_q2_potts_is_the_binary_kernel():
    # A q = 2 Potts RBM with state 1 as "on" is the binary RBM: the same exact sweep matrix.
    for model in tiny_rbms():
        potts = binary_as_potts(model)
        for beta in (1.0, 0.4):
            binary = bl.evaluation.transition_matrix(model, bl.operators.get("mixture", alpha=0.3), beta=beta)
            categorical = bl.evaluation.transition_matrix(
                potts, bl.operators.get("mixture", alpha=0.3), beta=beta
            )
            assert (binary - categorical).abs().max().item() < 1e-12
