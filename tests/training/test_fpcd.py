"""FPCD (Tieleman & Hinton 2009; docs/algorithms.md §3.2): fast parameters, PCD as a special case.

Properties checked:
* with ``fast_learning_rate = 0`` FPCD is PCD bit for bit under the same seed (every operator,
  with momentum and a non-constant schedule);
* the fast parameters move along the applied ascent direction ``g = −grad`` (sign and scale)
  and, with a zero gradient, decay geometrically by ``fast_decay`` per update; by default the
  fast learning rate is the run's initial learning rate;
* the chains sample from θ + θ_f: one step equals, bit for bit, the same operator step on an
  RBM whose parameters are the sums; the model itself is untouched; the shallow parameter view
  also handles nested modules (a DBM-like layout);
* a run interrupted and resumed from its checkpoint is bit-identical to the uninterrupted one;
* bad settings raise ValidationError naming the argument.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch import nn

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.io import load_checkpoint
from boltzlab.training import (
    Callback,
    FastPersistentContrastiveDivergence,
    FastPersistentState,
    NegativePhase,
    find_latest_checkpoint,
    train,
    with_parameters,
)
from harness import random_rbm

OPERATORS = ("gibbs", "flip", "mixture")


def _data(n_examples: int = 37, n_visible: int = 9, seed: int = 2) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    prototypes = (torch.rand(3, n_visible, generator=g) < 0.5).float()
    noise = (torch.rand(n_examples, n_visible, generator=g) < 0.1).float()
    return (prototypes[torch.arange(n_examples) % 3] + noise) % 2  # noisy copies of 3 patterns


@pytest.mark.parametrize("operator", OPERATORS)
def test_zero_fast_learning_rate_is_pcd_bit_for_bit(operator: str) -> None:
    results = {}
    for algorithm, params in (("pcd", {}), ("fpcd", {"fast_learning_rate": 0.0})):
        model = bl.RBM(n_visible=9, n_hidden=4, generator=0)
        results[algorithm] = train(
            model,
            _data(),
            algorithm=algorithm,
            algorithm_params=params,
            operator=operator,
            n_chains=13,
            batch_size=8,
            n_updates=60,
            learning_rate=0.1,
            momentum=0.5,
            lr_schedule="linear",
            log_every=20,
            track_exact_every=20,
            generator=5,
        )
    pcd, fpcd = results["pcd"], results["fpcd"]
    for (name, a), b in zip(pcd.model.named_parameters(), fpcd.model.parameters(), strict=True):
        assert torch.equal(a, b), name
    for a, b in zip(pcd.final_chains.layers, fpcd.final_chains.layers, strict=True):
        assert torch.equal(a, b)
    assert [r.train_log_likelihood for r in pcd.history] == [r.train_log_likelihood for r in fpcd.history]
    assert [r.extra["fast_rms"] for r in fpcd.history] == [0.0] * 4
    # Training did something, so the equality is not between two idle runs.
    assert fpcd.history[-1].train_log_likelihood > fpcd.history[0].train_log_likelihood + 0.1


def test_fast_parameters_follow_the_applied_gradient(tmp_path: Path) -> None:
    """After one plain SGD update θ_f = lr_fast·g = (θ_1 − θ_0)·lr_fast/lr, same sign as θ's step."""
    model = bl.RBM(n_visible=9, n_hidden=4, generator=0)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    learning_rate = 0.1
    train(
        model,
        _data(),
        algorithm="fpcd",
        n_chains=13,
        batch_size=8,
        n_updates=1,
        learning_rate=learning_rate,
        checkpoint_dir=tmp_path,
        generator=3,
    )
    checkpoint = load_checkpoint(find_latest_checkpoint(tmp_path))
    # The default fast learning rate is the run's initial learning rate (recalled, unverified).
    assert checkpoint.metadata["phase"]["fast_learning_rate"] == learning_rate
    assert checkpoint.metadata["phase"]["fast_decay"] == 19 / 20
    for name, parameter in model.named_parameters():
        step = parameter.detach() - before[name]
        fast = checkpoint.tensors[f"phase.fast.{name}"]
        # float32 rounding of θ_1 − θ_0 (|θ| < 1) is below 1e-7; the steps are 100× larger.
        assert float(step.abs().max()) > 1e-5, name
        torch.testing.assert_close(fast, step, rtol=0, atol=1e-7)


def test_fast_parameters_decay_geometrically_and_move_against_grad() -> None:
    model = random_rbm(7, 3, seed=4, dtype=torch.float64)
    phase = FastPersistentContrastiveDivergence(
        operator=bl.operators.get("gibbs"), n_chains=13, fast_learning_rate=0.3, fast_decay=0.8
    )
    g = torch.Generator().manual_seed(0)
    state = phase.init(model, _data(n_visible=7), generator=g)
    assert isinstance(state, FastPersistentState)
    assert state.names == ("weights", "visible_bias", "hidden_bias")
    assert all(not bool(fast.any()) for fast in state.fast_parameters)  # θ_f starts at 0
    start = tuple(torch.randn(p.shape, generator=g, dtype=torch.float64) for p in model.parameters())
    state = FastPersistentState(chains=state.chains, names=state.names, fast_parameters=start)
    kept = tuple(fast.clone() for fast in start)

    for parameter in model.parameters():
        parameter.grad = torch.zeros_like(parameter)
    decayed = state
    n_updates = 25
    for _ in range(n_updates):
        decayed = phase.after_update(model, decayed)
    for fast, initial in zip(decayed.fast_parameters, start, strict=True):
        expected = initial * 0.8**n_updates
        # n_updates roundings of relative size 2^-53 each.
        torch.testing.assert_close(fast, expected, rtol=4 * n_updates * 2.0**-53, atol=0)
    assert all(torch.equal(a, b) for a, b in zip(start, kept, strict=True))  # input not modified

    gradients = [torch.randn(p.shape, generator=g, dtype=torch.float64) for p in model.parameters()]
    for parameter, gradient in zip(model.parameters(), gradients, strict=True):
        parameter.grad = gradient
    moved = phase.after_update(model, state)
    for fast, initial, gradient in zip(moved.fast_parameters, start, gradients, strict=True):
        # .grad is the gradient of the NEGATIVE log-likelihood: g = −grad.
        torch.testing.assert_close(fast, 0.8 * initial - 0.3 * gradient, rtol=1e-15, atol=1e-15)


@pytest.mark.parametrize("operator", OPERATORS)
def test_chains_sample_from_slow_plus_fast_parameters(operator: str) -> None:
    model = random_rbm(7, 3, scale=2.0, seed=6, dtype=torch.float64, base_rate=True)
    slow = {name: p.detach().clone() for name, p in model.named_parameters()}
    op = bl.operators.get(operator)
    phase = FastPersistentContrastiveDivergence(operator=op, k=2, n_chains=13, fast_learning_rate=0.1)
    assert isinstance(phase, NegativePhase)
    g = torch.Generator().manual_seed(1)
    state = phase.init(model, _data(n_visible=7), generator=g)
    fast = tuple(2.0 * torch.randn(p.shape, generator=g, dtype=torch.float64) for p in model.parameters())
    state = FastPersistentState(chains=state.chains, names=state.names, fast_parameters=fast)

    summed = bl.RBM(
        weights=slow["weights"] + fast[0],
        visible_bias=slow["visible_bias"] + fast[1],
        hidden_bias=slow["hidden_bias"] + fast[2],
        dtype=torch.float64,
    )
    summed.base_logits.copy_(model.base_logits)
    summed.base_fitted = model.base_fitted

    # The conditionals of the sampling model are those of θ + θ_f, at β = 1 and at β < 1.
    view = phase.sampling_model(model, state)
    for beta in (1.0, 0.4):
        betas = torch.full((13,), beta, dtype=torch.float64)
        for index in (0, 1):
            torch.testing.assert_close(
                view.conditional_logits(index, state.chains.layers, betas),
                summed.conditional_logits(index, state.chains.layers, betas),
                rtol=1e-14,
                atol=1e-14,
            )

    saved = g.get_state()
    g_reference = torch.Generator().set_state(saved)
    new_state, samples = phase.step(model, state, batch=_data(n_visible=7)[:5], positive=(), generator=g)
    reference = state.chains
    for _ in range(2):
        reference, _ = op.step(summed, reference, generator=g_reference)
    assert samples is new_state.chains and new_state.fast_parameters is state.fast_parameters
    for a, b in zip(samples.layers, reference.layers, strict=True):
        assert torch.equal(a, b)
    # The slow model was neither modified nor used for sampling.
    for name, parameter in model.named_parameters():
        assert torch.equal(parameter, slow[name]), name
    g_slow = torch.Generator().set_state(saved)  # the same random numbers as the reference
    slow_chains = state.chains
    for _ in range(2):
        slow_chains, _ = op.step(model, slow_chains, generator=g_slow)
    assert not all(torch.equal(a, b) for a, b in zip(slow_chains.layers, reference.layers, strict=True))


def test_parameter_view_handles_nested_modules() -> None:
    """The view a DBM would get: parameters of submodules replaced by dotted names."""

    class Inner(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weights = nn.Parameter(torch.ones(2, 3))

    class Outer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bias = nn.Parameter(torch.zeros(3))
            self.layer = Inner()
            self.register_buffer("offset", torch.full((3,), 5.0))

        def total(self) -> torch.Tensor:
            return self.layer.weights.sum(0) + self.bias + self.offset

    outer = Outer()
    view = with_parameters(outer, {"layer.weights": torch.full((2, 3), 2.0), "bias": torch.ones(3)})
    assert torch.equal(view.total(), torch.full((3,), 10.0))
    assert torch.equal(outer.total(), torch.full((3,), 7.0))  # the original is untouched
    assert view.offset is outer.offset  # buffers are shared, not copied


def _resume_run(directory: Path, *, seed_model: int, seed: int, callbacks=(), resume: bool = False):
    model = bl.RBM(n_visible=9, n_hidden=4, generator=seed_model)
    return train(
        model,
        _data(),
        algorithm="fpcd",
        algorithm_params={"fast_decay": 0.9},
        operator="mixture",
        operator_params={"alpha": 0.5},
        n_chains=13,
        batch_size=8,
        n_updates=30,
        learning_rate=0.1,
        momentum=0.5,
        lr_schedule="inverse",
        log_every=5,
        track_exact_every=10,
        checkpoint_dir=directory,
        checkpoint_every=10,
        generator=seed,
        callbacks=list(callbacks),
        resume=resume,
    )


class _Interrupted(Exception):
    """Stands in for a killed process."""


class _InterruptAt(Callback):
    def __init__(self, update: int) -> None:
        self.at = update

    def on_update(self, run) -> None:
        if run.update == self.at:
            raise _Interrupted


def test_resume_is_bit_identical(tmp_path: Path) -> None:
    whole = _resume_run(tmp_path / "whole", seed_model=0, seed=123)
    with pytest.raises(_Interrupted):
        _resume_run(tmp_path / "parts", seed_model=0, seed=123, callbacks=[_InterruptAt(17)])
    # New objects (another initial model, another seed): everything comes from the checkpoint.
    resumed = _resume_run(tmp_path / "parts", seed_model=99, seed=999, resume=True)
    assert resumed.n_updates == whole.n_updates == 30
    for (name, a), b in zip(whole.model.named_parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(a, b), name
    for a, b in zip(whole.final_chains.layers, resumed.final_chains.layers, strict=True):
        assert torch.equal(a, b)
    final_whole = load_checkpoint(find_latest_checkpoint(tmp_path / "whole"))
    final_parts = load_checkpoint(find_latest_checkpoint(tmp_path / "parts"))
    assert any(name.startswith("phase.fast.") for name in final_whole.tensors)
    assert final_whole.tensors.keys() == final_parts.tensors.keys()
    for name, tensor in final_whole.tensors.items():
        assert torch.equal(tensor, final_parts.tensors[name]), name  # fast parameters included
    strip = [{**r.to_dict(), "time": None} for r in whole.history]
    assert [{**r.to_dict(), "time": None} for r in resumed.history] == strip
    assert whole.history[-1].extra["fast_rms"] > 0


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"fast_decay": 1.5}, r"fast_decay must be a finite number in \[0, 1\], got 1.5"),
        ({"fast_decay": "0.9"}, "fast_decay must be a number"),
        ({"fast_learning_rate": -0.1}, "fast_learning_rate must be a finite number in"),
        ({"fast_learning_rate": math.inf}, "fast_learning_rate must be a finite number in"),
        ({"init": "zeros"}, "init must be one of data, base"),
        ({"fast_rate": 0.1}, "bad algorithm_params for 'fpcd'"),
    ],
)
def test_bad_settings_are_refused(params: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        train(
            bl.RBM(n_visible=9, n_hidden=4),
            _data(),
            algorithm="fpcd",
            algorithm_params=params,
            n_updates=1,
            batch_size=8,
        )


def test_checkpoint_of_another_model_is_refused() -> None:
    phase = FastPersistentContrastiveDivergence(operator=bl.operators.get("flip"), n_chains=13)
    small = bl.RBM(n_visible=9, n_hidden=4)
    tensors = phase.state_tensors(phase.init(small, _data(), generator=torch.Generator().manual_seed(0)))
    with pytest.raises(
        ValidationError, match=r"fast parameter 'weights' has shape \(9, 4\), the model's has \(9, 5\)"
    ):
        phase.state_from_tensors(bl.RBM(n_visible=9, n_hidden=5), tensors)
    with pytest.raises(ValidationError, match="fast_learning_rate is None"):
        phase.after_update(small, phase.init(small, _data(), generator=torch.Generator().manual_seed(0)))
