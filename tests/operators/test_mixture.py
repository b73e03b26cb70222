"""The per-unit α-mixture of flip and Gibbs."""

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from harness import check_operator_exact


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
