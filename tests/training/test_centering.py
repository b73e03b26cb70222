"""Centred gradients: the update of a centred model, written for the standard parameters.

With ``T`` the linear map from centred parameters ``(W, b_c)`` to the standard ones the model
stores (``b^k = b_c^k − Σ W μ^{upper} − Σ Wᵀ μ^{lower}`` over the matrices that touch layer k),
a gradient step taken in centred coordinates moves the standard parameters by ``T Tᵀ G``.

Properties checked:
* with zero offsets the centred direction is the plain gradient;
* on a 7×3 RBM, a Potts RBM (5 sites × 3 states, 2 hidden) and a 7-4-3 DBM, with random
  gradients and offsets, :meth:`Centering.transform_gradient_` equals ``T Tᵀ G`` with ``Tᵀ G``
  from autograd and ``T`` written out independently; and ``⟨G, D⟩ = |TᵀG|² > 0``, so the
  centred direction is zero exactly where the plain gradient is (the fixed points of training
  are unchanged) and is an ascent direction of the same objective;
* one update of ``train(..., algorithm="pl", centering=True)`` with L2, L1 and L1² penalties
  on the whole data equals the plain gradient step on ``PL − R`` taken in the centred
  coordinates (offsets: the data mean and ``(1 − ν)·½ + ν·⟨p(h|v)⟩``), mapped back — binary and
  Potts (then in the zero-sum gauge);
* an interrupted centred run (PCD with momentum, penalties and sample weights; and a Potts RBM
  with CD) resumes bit for bit, offsets included, and the offsets are in the checkpoint;
* refusals: a model centring does not cover, a resume that switches centring on or off.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators.pseudo_likelihood import site_log_conditionals
from boltzlab.io import load_checkpoint
from boltzlab.models.categorical import one_hot_indices
from boltzlab.models.gaussian_rbm import GaussianRBM
from boltzlab.models.potts_rbm import PottsRBM
from boltzlab.training import Callback, find_latest_checkpoint
from boltzlab.training.centering import DEFAULT_OFFSET_RATE, Centering, Offsets

ROUND_OFF = 1e-12


def _structure(model) -> tuple[list[tuple[str, int, int]], list[str]]:
    """Parameter names of the couplings ``(name, lower, upper)`` and of each layer's bias."""
    if isinstance(model, bl.DBM):
        n_layers = len(model.layer_sizes)
        return [(f"weights.{l}", l, l + 1) for l in range(n_layers - 1)], [
            f"biases.{l}" for l in range(n_layers)
        ]
    return [("weights", 0, 1)], ["visible_bias", "hidden_bias"]


def _to_standard(centred: dict[str, torch.Tensor], model, mu: list[torch.Tensor]) -> dict[str, torch.Tensor]:
    """``T``: the standard parameters of the centred ones (linear, no constant term)."""
    couplings, biases = _structure(model)
    standard = {name: centred[name] for name, _, _ in couplings}
    for layer, name in enumerate(biases):
        bias = centred[name]
        for weights, lower, upper in couplings:
            if lower == layer:
                bias = bias - centred[weights] @ mu[upper]
            if upper == layer:
                bias = bias - centred[weights].t() @ mu[lower]
        standard[name] = bias
    return standard


def _models() -> dict[str, nn.Module]:
    return {
        "rbm": bl.RBM(n_visible=7, n_hidden=3, generator=0, weight_std=0.5, dtype=torch.float64),
        "potts": PottsRBM(
            n_sites=5, n_states=3, n_hidden=2, generator=0, weight_std=0.5, dtype=torch.float64
        ),
        "dbm": bl.DBM(layer_sizes=[7, 4, 3], generator=0, dtype=torch.float64),
    }


@pytest.mark.parametrize("kind", ["rbm", "potts", "dbm"])
def test_transform_is_t_t_transpose(kind: str) -> None:
    model = _models()[kind]
    g = torch.Generator().manual_seed(5)
    named = dict(model.named_parameters())
    plain = {name: torch.randn(p.shape, generator=g, dtype=torch.float64) for name, p in named.items()}
    mu = [torch.rand(size, generator=g, dtype=torch.float64) for size in model.layer_sizes]

    # Zero offsets: the plain gradient, unchanged.
    for name, p in named.items():
        p.grad = plain[name].clone()
    Centering.transform_gradient_(model, Offsets(layers=tuple(torch.zeros_like(m) for m in mu)))
    for name, p in named.items():
        torch.testing.assert_close(p.grad, plain[name], rtol=0, atol=0)

    # Tᵀ G by autograd of ⟨G, T θ_c⟩; then T applied to it.
    centred = {name: torch.zeros_like(p, requires_grad=True) for name, p in named.items()}
    standard = _to_standard(centred, model, mu)
    pairing = sum((plain[name] * standard[name]).sum() for name in named)
    transposed = dict(zip(centred, torch.autograd.grad(pairing, list(centred.values())), strict=True))
    expected = _to_standard(transposed, model, mu)

    for name, p in named.items():
        p.grad = plain[name].clone()
    Centering.transform_gradient_(model, Offsets(layers=tuple(mu)))
    for name, p in named.items():
        torch.testing.assert_close(p.grad, expected[name], rtol=0, atol=ROUND_OFF)
    # ⟨G, T Tᵀ G⟩ = |Tᵀ G|² > 0: zero only where G is (T is invertible), an ascent direction.
    inner = sum(float((plain[name] * p.grad).sum()) for name, p in named.items())
    squared = sum(float(t.square().sum()) for t in transposed.values())
    assert inner == pytest.approx(squared, rel=1e-12) and inner > 0


class _PseudoLikelihood(nn.Module):
    """Mean over rows of Σ_i log p(v_i | v_−i) as a forward pass, for torch.func.functional_call."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, v: torch.Tensor) -> torch.Tensor:
        return site_log_conditionals(self.model, v).sum(1).mean()


def _penalty(weights: torch.Tensor, *, l2: float, l1: float, l1_squared: float) -> torch.Tensor:
    columns = weights.abs().sum(0)
    return (
        0.5 * l2 * weights.square().sum()
        + l1 * columns.sum()
        + l1_squared / (2 * weights.shape[0]) * columns.square().sum()
    )


@pytest.mark.parametrize("kind", ["rbm", "potts"])
def test_one_centred_update_is_the_centred_gradient_step(kind: str) -> None:
    model = _models()[kind]
    # The expected step starts from the model as built: keep a Potts model's zero fields there.
    model.profile_start = False
    g = torch.Generator().manual_seed(6)
    if kind == "rbm":
        data = (torch.rand(17, 7, generator=g) < 0.3).double()
        v = data
    else:
        data = torch.randint(0, 3, (17, 5), generator=g)
        v = one_hot_indices(data, 3, dtype=torch.float64)
    penalties = {"l2": 0.03, "l1": 0.01, "l1_squared": 0.02}
    learning_rate = 0.2
    start = {name: p.detach().clone() for name, p in model.named_parameters()}

    # The offsets of the first update: the data mean, and ½ moved by ν towards ⟨p(h|v)⟩.
    mu = v.mean(0)
    hidden_mean = torch.sigmoid(start["hidden_bias"] + v @ start["weights"]).mean(0)
    offsets = [mu, 0.5 + DEFAULT_OFFSET_RATE * (hidden_mean - 0.5)]
    # Centred coordinates of the start (T⁻¹: add back what T subtracts), then one plain step there.
    centred = {
        "weights": start["weights"].clone().requires_grad_(),
        "visible_bias": (start["visible_bias"] + start["weights"] @ offsets[1]).requires_grad_(),
        "hidden_bias": (start["hidden_bias"] + start["weights"].t() @ offsets[0]).requires_grad_(),
    }
    standard = _to_standard(centred, model, offsets)
    for name in start:
        torch.testing.assert_close(standard[name], start[name], rtol=0, atol=ROUND_OFF)  # T T⁻¹ = 1
    objective = torch.func.functional_call(
        _PseudoLikelihood(model), {f"model.{name}": value for name, value in standard.items()}, (v,)
    ) - _penalty(standard["weights"], **penalties)
    gradients = torch.autograd.grad(objective, list(centred.values()))
    stepped = {
        name: value.detach() + learning_rate * grad
        for (name, value), grad in zip(centred.items(), gradients, strict=True)
    }
    expected = _to_standard(stepped, model, offsets)
    if kind == "potts":
        reference = PottsRBM(
            weights=expected["weights"].view(5, 3, 2),
            visible_bias=expected["visible_bias"],
            hidden_bias=expected["hidden_bias"],
            dtype=torch.float64,
        ).apply_gauge_()
        expected = dict(reference.named_parameters())

    bl.train(
        model,
        data,
        algorithm="pl",
        centering=True,
        weight_decay=penalties["l2"],
        l1=penalties["l1"],
        l1_squared=penalties["l1_squared"],
        batch_size=17,
        n_updates=1,
        learning_rate=learning_rate,
        generator=0,
        snapshots=0,
    )
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.detach(), expected[name].detach(), rtol=0, atol=ROUND_OFF)


class Interrupted(Exception):
    """Stands in for a killed process."""


class InterruptAt(Callback):
    def __init__(self, update: int) -> None:
        self.at = update

    def on_update(self, run) -> None:
        if run.update == self.at:
            raise Interrupted


def _resumable_run(directory: Path, kind: str, *, seed: int, **extra):
    g = torch.Generator().manual_seed(7)
    if kind == "rbm":
        model = bl.RBM(n_visible=9, n_hidden=4, generator=seed)
        data = (torch.rand(37, 9, generator=g) < 0.3).float()
        settings = {"algorithm": "pcd", "n_chains": 13, "operator": "flip", "momentum": 0.9}
    else:
        model = PottsRBM(n_sites=6, n_states=3, n_hidden=4, generator=seed)
        data = torch.randint(0, 3, (37, 6), generator=g)
        settings = {"algorithm": "cd", "k": 2, "momentum": 0.5}
    return bl.train(
        model,
        data,
        centering=True,
        weight_decay=1e-3,
        l1=1e-3,
        l1_squared=1e-2,
        sample_weights=torch.rand(37, generator=g),
        batch_size=8,
        n_updates=40,
        learning_rate=0.1,
        lr_schedule="linear",
        log_every=5,
        checkpoint_dir=directory,
        checkpoint_every=10,
        generator=seed + 100,
        **settings,
        **extra,
    )


@pytest.mark.fault("interrupted runs")
@pytest.mark.parametrize("kind", ["rbm", "potts"])
def test_centred_resume_is_bit_identical(tmp_path: Path, kind: str) -> None:
    whole = _resumable_run(tmp_path / "whole", kind, seed=0)
    with pytest.raises(Interrupted):
        _resumable_run(tmp_path / "parts", kind, seed=0, callbacks=[InterruptAt(23)])
    resumed = _resumable_run(tmp_path / "parts", kind, seed=5, resume=True)  # other objects, same checkpoint
    for name, parameter in whole.model.named_parameters():
        assert torch.equal(parameter, dict(resumed.model.named_parameters())[name]), name
    final_whole = load_checkpoint(find_latest_checkpoint(tmp_path / "whole"))
    final_parts = load_checkpoint(find_latest_checkpoint(tmp_path / "parts"))
    assert set(final_whole.tensors) == set(final_parts.tensors)
    for name, tensor in final_whole.tensors.items():
        assert torch.equal(tensor, final_parts.tensors[name]), name  # offsets, momentum, generator
    hidden_offset = final_whole.tensors["centering.1"]
    assert hidden_offset.shape == (4,) and not torch.equal(hidden_offset, torch.full((4,), 0.5))
    assert final_whole.metadata["config"]["centering"] is True


def test_dbm_trains_centred_and_keeps_three_offsets(tmp_path: Path) -> None:
    data = (torch.rand(30, 7, generator=torch.Generator().manual_seed(8)) < 0.3).float()
    dbm = bl.DBM(layer_sizes=[7, 4, 3], generator=0)
    bl.train(
        dbm,
        data,
        algorithm="pcd",
        centering=True,
        n_chains=13,
        batch_size=10,
        n_updates=6,
        generator=0,
        checkpoint_dir=tmp_path,
    )
    tensors = load_checkpoint(find_latest_checkpoint(tmp_path)).tensors
    assert [tuple(tensors[f"centering.{l}"].shape) for l in range(3)] == [(7,), (4,), (3,)]
    torch.testing.assert_close(tensors["centering.0"], data.mean(0))
    assert all(bool(p.isfinite().all()) for p in dbm.parameters())


def test_refusals(tmp_path: Path) -> None:
    data = torch.randn(20, 5, generator=torch.Generator().manual_seed(9))
    with pytest.raises(ValidationError, match=r"centering is implemented for .* not GaussianRBM"):
        bl.train(
            GaussianRBM(n_visible=5, n_hidden=3, generator=0), data, centering=True, batch_size=5, n_updates=1
        )
    with pytest.raises(ValidationError, match="centering must be True or False"):
        bl.train(bl.RBM(n_visible=5, n_hidden=3), (data > 0).float(), centering=1, batch_size=5, n_updates=1)
    binary = (data > 0).float()
    settings = {"batch_size": 5, "n_updates": 2, "checkpoint_dir": tmp_path, "generator": 0}
    bl.train(bl.RBM(n_visible=5, n_hidden=3, generator=0), binary, centering=True, **settings)
    with pytest.raises(ValidationError, match="centering: checkpoint True, now False"):
        bl.train(
            bl.RBM(n_visible=5, n_hidden=3, generator=0), binary, resume=True, **{**settings, "n_updates": 4}
        )
