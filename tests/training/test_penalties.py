"""Penalties on the weight matrices: L2, L1 and L1² (Tubiana, Cocco & Monasson 2019).

Properties checked:
* :meth:`Penalties.value` is the documented formula, with ``n_rows = L·q`` for a Potts RBM
  (5 sites × 3 states), ``n_visible`` for a binary RBM, each matrix's lower width for a DBM;
* :meth:`Penalties.add_gradient_` adds exactly autograd's gradient of the value to every weight
  matrix and leaves every bias's gradient as it was (biases are not penalised);
* in training, without centring: one full-batch PL update with ``l1`` and ``l1_squared`` is
  ``θ + lr·(∇PL − ∇R)`` on the weights and ``θ + lr·∇PL`` on the biases;
* ``weight_decay`` stays torch's SGD weight decay without centring (the run it always was) and
  becomes a penalty of the loop, with SGD's decay 0, under centring;
* refusals: negative, NaN and boolean coefficients name the argument.
"""

from __future__ import annotations

import math

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators.pseudo_likelihood import pseudo_likelihood_gradient
from boltzlab.models.potts_rbm import PottsRBM
from boltzlab.training import Callback
from boltzlab.training.penalties import Penalties

ROUND_OFF = 1e-12
COEFFICIENTS = {"l2": 0.3, "l1": 0.05, "l1_squared": 0.7}


def _models() -> dict[str, torch.nn.Module]:
    return {
        "rbm": bl.RBM(n_visible=7, n_hidden=3, generator=0, weight_std=1.0, dtype=torch.float64),
        "potts": PottsRBM(
            n_sites=5, n_states=3, n_hidden=2, generator=0, weight_std=1.0, dtype=torch.float64
        ),
        "dbm": bl.DBM(layer_sizes=[7, 4, 3], generator=0, dtype=torch.float64),
    }


def _formula(weights: torch.Tensor, n_rows: int) -> torch.Tensor:
    columns = weights.abs().sum(0)
    return (
        COEFFICIENTS["l2"] / 2 * weights.square().sum()
        + COEFFICIENTS["l1"] * weights.abs().sum()
        + COEFFICIENTS["l1_squared"] / (2 * n_rows) * columns.square().sum()
    )


def test_value_is_the_formula() -> None:
    penalties = Penalties(**COEFFICIENTS)
    models = _models()
    potts = models["potts"]
    w = potts.potts_weights.detach()  # (L, q, J): the paper's Σ_{i,a} and 1/(2·L·q)
    paper = (
        COEFFICIENTS["l2"] / 2 * w.square().sum()
        + COEFFICIENTS["l1"] * w.abs().sum()
        + COEFFICIENTS["l1_squared"] / (2 * 5 * 3) * w.abs().sum((0, 1)).square().sum()
    )
    assert penalties.value(potts) == pytest.approx(float(paper), rel=1e-14)
    rbm = models["rbm"]
    assert penalties.value(rbm) == pytest.approx(float(_formula(rbm.weights.detach(), 7)), rel=1e-14)
    dbm = models["dbm"]
    both = _formula(dbm.weights[0].detach(), 7) + _formula(dbm.weights[1].detach(), 4)
    assert penalties.value(dbm) == pytest.approx(float(both), rel=1e-14)
    assert Penalties().value(rbm) == 0.0 and not Penalties().active


@pytest.mark.parametrize("kind", ["rbm", "potts", "dbm"])
def test_gradient_is_autograd_and_biases_are_untouched(kind: str) -> None:
    model = _models()[kind]
    g = torch.Generator().manual_seed(3)
    existing = {
        name: torch.randn(p.shape, generator=g, dtype=torch.float64) for name, p in model.named_parameters()
    }
    for name, p in model.named_parameters():
        p.grad = existing[name].clone()
    Penalties(**COEFFICIENTS).add_gradient_(model)
    matrices = [p for p in model.parameters() if p.dim() == 2]
    with torch.enable_grad():
        total = sum(_formula(w, w.shape[0]) for w in matrices)
        autograd = dict(zip(map(id, matrices), torch.autograd.grad(total, matrices), strict=True))
    for name, p in model.named_parameters():
        if p.dim() == 2:
            torch.testing.assert_close(p.grad, existing[name] + autograd[id(p)], rtol=0, atol=ROUND_OFF)
        else:
            assert torch.equal(p.grad, existing[name]), name


def test_penalised_pl_update() -> None:
    model = bl.RBM(n_visible=7, n_hidden=3, generator=0, weight_std=1.0, dtype=torch.float64)
    data = (torch.rand(15, 7, generator=torch.Generator().manual_seed(4)) < 0.4).double()
    gradient = pseudo_likelihood_gradient(model, data)
    w = model.weights.detach().clone().requires_grad_()
    penalty = 0.02 * w.abs().sum() + 0.05 / (2 * 7) * w.abs().sum(0).square().sum()
    (penalty_gradient,) = torch.autograd.grad(penalty, [w])
    expected = {
        "weights": w.detach() + 0.1 * (gradient.weights - penalty_gradient),
        "visible_bias": model.visible_bias.detach() + 0.1 * gradient.visible_bias,
        "hidden_bias": model.hidden_bias.detach() + 0.1 * gradient.hidden_bias,
    }
    bl.train(
        model,
        data,
        algorithm="pl",
        l1=0.02,
        l1_squared=0.05,
        batch_size=15,
        n_updates=1,
        learning_rate=0.1,
        generator=0,
        snapshots=0,
    )
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.detach(), expected[name], rtol=0, atol=ROUND_OFF)


class _Groups(Callback):
    """Records the optimiser's weight decay and the loop's penalties at the start of training."""

    def on_train_begin(self, run) -> None:
        self.decay = {group["name"]: group["weight_decay"] for group in run.optimizer.param_groups}
        self.penalties = run.penalties


@pytest.mark.parametrize("centering", [False, True])
def test_weight_decay_is_sgds_without_centring_and_a_penalty_with(centering: bool) -> None:
    data = (torch.rand(15, 7, generator=torch.Generator().manual_seed(4)) < 0.4).float()
    seen = _Groups()
    result = bl.train(
        bl.RBM(n_visible=7, n_hidden=3, generator=0),
        data,
        weight_decay=0.01,
        l1=0.002,
        centering=centering,
        batch_size=5,
        n_updates=2,
        generator=0,
        snapshots=0,
        callbacks=[seen],
    )
    # Without centring the run is the one weight_decay always gave (SGD's decay); with it, the
    # decay is a penalty that the centred direction covers, and SGD decays nothing.
    assert seen.decay == {"weights": 0.0 if centering else 0.01, "biases": 0.0}
    assert seen.penalties == Penalties(l2=0.01 if centering else 0.0, l1=0.002)
    assert result.model.metadata["training"]["weight_decay"] == 0.01
    assert result.model.metadata["training"]["l1"] == 0.002


@pytest.mark.parametrize(("name", "value"), [("l1", -0.1), ("l1_squared", math.nan), ("l1", True)])
def test_refusals(name: str, value: float) -> None:
    data = (torch.rand(10, 7, generator=torch.Generator().manual_seed(4)) < 0.4).float()
    with pytest.raises(ValidationError, match=f"{name} must be a finite number >= 0"):
        bl.train(
            bl.RBM(n_visible=7, n_hidden=3, generator=0), data, batch_size=5, n_updates=1, **{name: value}
        )
