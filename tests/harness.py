"""Shared exact-enumeration checks for operators and estimators.

A new operator's test is one call to :func:`check_operator_exact`; a new estimator's is one
call to :func:`check_estimator_exact`; a new sampling scheme's checkpoint test is one call to
:func:`check_scheme_round_trip`. Sizes are distinct (7 visible x 3 hidden x 13 chains,
...) so that a transposition fails loudly; tolerances are in standard errors.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from safetensors.torch import load as safetensors_load
from safetensors.torch import save as safetensors_save

import boltzlab as bl
from boltzlab.estimators import joint_log_probabilities
from boltzlab.evaluation import transition_matrix

N_CHAINS = 13


def random_rbm(
    n_visible: int,
    n_hidden: int,
    *,
    scale: float = 3.0,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    base_rate: bool = False,
    zero_biases: bool = False,
) -> bl.RBM:
    """An RBM with weights uniform in [-scale, scale] (multimodal for scale >= 2)."""
    g = torch.Generator().manual_seed(seed)
    weights = (torch.rand(n_visible, n_hidden, generator=g, dtype=torch.float64) * 2 - 1) * scale
    if zero_biases:
        visible_bias = torch.zeros(n_visible, dtype=torch.float64)
        hidden_bias = torch.zeros(n_hidden, dtype=torch.float64)
    else:
        visible_bias = torch.randn(n_visible, generator=g, dtype=torch.float64)
        hidden_bias = torch.randn(n_hidden, generator=g, dtype=torch.float64)
    model = bl.RBM(weights=weights, visible_bias=visible_bias, hidden_bias=hidden_bias, dtype=dtype)
    if base_rate:
        data = (torch.rand(40, n_visible, generator=g) < torch.linspace(0.1, 0.9, n_visible)).float()
        model.set_base_rate(data)
    return model


def tiny_rbms(dtype: torch.dtype = torch.float64) -> list[bl.RBM]:
    """Enumerable RBMs (<= 8 units) covering the cases that break operators.

    Strong random weights, a fitted base-rate base (so β < 1 is not plain scaling), zero
    biases (exact ties at β = 0 and for all-off layers), and a non-square shape.
    """
    return [
        random_rbm(4, 3, scale=3.0, seed=1, dtype=dtype, base_rate=True),
        random_rbm(3, 2, scale=2.0, seed=2, dtype=dtype, zero_biases=True),
        random_rbm(2, 5, scale=4.0, seed=3, dtype=dtype),
    ]


def random_dbm(
    layer_sizes: tuple[int, ...],
    *,
    scale: float = 2.0,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    base_rate: bool = False,
    zero_biases: bool = False,
) -> bl.DBM:
    """A DBM with weights uniform in [-scale, scale] and standard normal biases (or zeros)."""
    g = torch.Generator().manual_seed(seed)
    weights = [
        (torch.rand(layer_sizes[index], layer_sizes[index + 1], generator=g, dtype=torch.float64) * 2 - 1)
        * scale
        for index in range(len(layer_sizes) - 1)
    ]
    biases = [
        torch.zeros(size, dtype=torch.float64)
        if zero_biases
        else torch.randn(size, generator=g, dtype=torch.float64)
        for size in layer_sizes
    ]
    model = bl.DBM(weights=weights, biases=biases, dtype=dtype)
    if base_rate:
        n_visible = layer_sizes[0]
        data = (torch.rand(40, n_visible, generator=g) < torch.linspace(0.1, 0.9, n_visible)).float()
        model.set_base_rate(data)
    return model


def tiny_dbms(dtype: torch.dtype = torch.float64) -> list[bl.DBM]:
    """Enumerable DBMs (<= 9 units): a fitted base-rate base, three hidden layers, zero biases."""
    return [
        random_dbm((3, 3, 2), scale=2.0, seed=1, dtype=dtype, base_rate=True),
        random_dbm((2, 3, 2, 2), scale=2.0, seed=2, dtype=dtype, base_rate=True),
        random_dbm((2, 2, 3), scale=1.5, seed=3, dtype=dtype, zero_biases=True),
    ]


def chains_for(model: bl.RBM, beta: float, *, seed: int = 0, n_chains: int = N_CHAINS) -> bl.Chains:
    return model.init_chains(n_chains, generator=torch.Generator().manual_seed(seed)).with_beta(beta)


def _state_codes(layers: tuple[torch.Tensor, ...]) -> torch.Tensor:
    bits = torch.cat(layers, dim=1).to(torch.int64)
    weights = 2 ** torch.arange(bits.shape[1], dtype=torch.int64)
    return (bits * weights).sum(1)


def check_operator_exact(
    operator: bl.operators.LayerwiseOperator,
    *,
    models: list[bl.RBM] | None = None,
    betas: tuple[float, ...] = (1.0, 0.6, 0.0),
    n_monte_carlo: int = 40_000,
) -> None:
    """Everything a layerwise operator must satisfy, checked against enumeration.

    1. Its exact sweep matrix is stochastic and leaves ``p_β`` invariant to 1e-10 (float64),
       at β = 1 and β < 1, on every model.
    2. The batched sampler draws from that matrix: from one fixed state, the empirical
       distribution after one sweep matches the matrix row (every cell within 5 standard
       errors of a binomial count).
    3. ``step`` keeps shapes, dtype and β, leaves its input untouched, and is reproducible
       from its seed, in float32 and float64.
    """
    models = tiny_rbms() if models is None else models
    for model in models:
        for beta in betas:
            p = joint_log_probabilities(model, beta).exp()
            matrix = transition_matrix(model, operator, beta=beta)
            assert torch.allclose(matrix.sum(1), torch.ones_like(p), atol=1e-12), "rows must sum to one"
            assert float((matrix >= 0).all()) == 1.0
            residual = (p @ matrix - p).abs().max().item()
            assert residual < 1e-10, (
                f"{operator!r} does not leave p invariant at beta={beta}: |pT - p| = {residual}"
            )

        # 2. Monte Carlo: one sweep from a fixed start state, many independent chains.
        beta = betas[1] if len(betas) > 1 else betas[0]
        matrix = transition_matrix(model, operator, beta=beta)
        start = model.init_chains(1, generator=torch.Generator().manual_seed(5))
        start_code = int(_state_codes(start.layers)[0])
        chains = bl.Chains(
            layers=tuple(layer.expand(n_monte_carlo, -1).clone() for layer in start.layers),
            beta=torch.full((n_monte_carlo,), beta, dtype=model.dtype),
        )
        moved, _ = operator.step(model, chains, generator=torch.Generator().manual_seed(11))
        counts = torch.bincount(_state_codes(moved.layers), minlength=matrix.shape[0]).to(torch.float64)
        expected = matrix[start_code] * n_monte_carlo
        stderr = torch.sqrt(expected * (1 - matrix[start_code])).clamp_min(1.0)
        z_scores = (counts - expected) / stderr
        assert z_scores.abs().max().item() < 5.0, (
            f"sampled sweep disagrees with its matrix: max z = {z_scores.abs().max()}"
        )
        assert counts[expected == 0].sum() == 0, "the sampler reached a state the matrix forbids"

    # 3. Contract of step().
    for dtype in (torch.float32, torch.float64):
        model = random_rbm(7, 3, seed=4, dtype=dtype, base_rate=True)
        chains = chains_for(model, 0.7)
        before = tuple(layer.clone() for layer in chains.layers)
        first, info = operator.step(model, chains, generator=torch.Generator().manual_seed(3))
        second, _ = operator.step(model, chains, generator=torch.Generator().manual_seed(3))
        for old, layer in zip(before, chains.layers, strict=True):
            assert torch.equal(old, layer), "step modified its input"
        for a, b, ref in zip(first.layers, second.layers, chains.layers, strict=True):
            assert a.shape == ref.shape and a.dtype == dtype
            assert torch.equal(a, b), "same seed must give the same sweep"
            assert bool(((a == 0) | (a == 1)).all())
        assert torch.equal(first.beta, chains.beta)
        assert info.flip_rate.shape == (N_CHAINS,)


def check_estimator_exact(
    estimate: Callable[[bl.RBM, int, int], bl.LogZEstimate],
    *,
    budgets: tuple[int, int] = (1, 4),
    models: list[bl.RBM] | None = None,
    max_z: float = 4.0,
) -> None:
    """An estimator of log Z agrees with enumeration within its own error bar.

    ``estimate(model, budget, seed)`` runs the estimator with a budget multiplier. On every
    model, ``|log_z - exact| / stderr < max_z`` at both budgets, and the reported standard
    error shrinks when the budget grows.
    """
    models = tiny_rbms(torch.float32) if models is None else models
    for index, model in enumerate(models):
        exact = bl.exact_log_z(model)
        errors = []
        for budget in budgets:
            result = estimate(model, budget, 100 + index)
            assert math.isfinite(result.log_z) and result.stderr > 0
            z = abs(result.log_z - exact) / result.stderr
            assert z < max_z, (
                f"{result.method}: {result.log_z:.4f} vs exact {exact:.4f} is {z:.1f} standard errors off"
            )
            errors.append(result.stderr)
        assert errors[-1] < errors[0], f"the error bar must shrink with budget, got {errors}"


def check_scheme_round_trip(
    scheme, model, *, seed: int, steps_before: int, steps_after: int, n_chains: int = N_CHAINS
) -> tuple:
    """Run ``steps_before`` steps, save the state through safetensors bytes, restore it, then
    step the original and the restored state ``steps_after`` more times with generators in
    the same state: every state tensor must be bit-identical. Returns ``(state, restored)``
    for scheme-specific checks."""
    generator = torch.Generator().manual_seed(seed)
    state = scheme.init(model, n_chains, generator=generator)
    for _ in range(steps_before):
        state, _ = scheme.step(model, state, generator=generator)
    restored = scheme.state_from_tensors(
        model, safetensors_load(safetensors_save(scheme.state_tensors(state)))
    )
    restored_generator = torch.Generator()
    restored_generator.set_state(generator.get_state())
    for _ in range(steps_after):
        state, _ = scheme.step(model, state, generator=generator)
        restored, _ = scheme.step(model, restored, generator=restored_generator)
    expected, got = scheme.state_tensors(state), scheme.state_tensors(restored)
    assert expected.keys() == got.keys()
    for key in expected:
        assert torch.equal(expected[key], got[key]), key
    return state, restored
