"""The compiled categorical draw (operators/categorical.py) and the Potts sweeps built on it.

Properties checked: the kernel draws each row's state with exactly the probabilities it
was given (softmax of logits, or weights over their sum), never a state of weight 0, in
float32 and float64, against exact binomial laws; its uniforms are those of
``rng.counter_bits`` (an exact reference in float64); the same seed gives the same draws,
for one thread or two; and one sweep of a tiny Potts RBM by Gibbs, flip and the mixture,
with the kernel and without it, lands on the exact transition matrix's row.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch

import boltzlab as bl
from boltzlab import rng, sparse_product
from boltzlab.estimators.exact import unit_radices
from boltzlab.evaluation import transition_matrix
from boltzlab.models.categorical import one_hot_indices
from boltzlab.operators import categorical
from harness import OPERATOR_NAMES, assert_counts_match

DTYPES = (torch.float32, torch.float64)

# Rows of logits (q = 5): spread, a tie, one far below the others, large magnitudes.
LOGITS = torch.tensor(
    [
        [0.3, -1.2, 2.0, 0.0, -0.4],
        [1.0, 1.0, -2.0, 1.0, 0.5],
        [-40.0, 0.0, -1.0, 0.7, -0.2],
        [30.0, 31.5, 29.0, 30.7, 28.0],
    ],
    dtype=torch.float64,
)
# Rows of weights with zeros (a Metropolised step's forbidden moves), unnormalised.
WEIGHTS = torch.tensor(
    [
        [0.0, 0.25, 0.5, 0.0, 0.25],
        [2.0, 0.0, 0.0, 1.0, 0.0],
        [0.0, 0.0, 0.0, 0.0, 3.0],
        [1e-3, 0.2, 0.3, 0.0, 0.4],
    ],
    dtype=torch.float64,
)


@pytest.fixture(autouse=True)
def _kernel_on():
    categorical.set_mode("on")
    yield
    categorical.set_mode(None)


def _draw_counts(
    rows: torch.Tensor, *, softmax: bool, dtype: torch.dtype, copies: int, seed: int
) -> torch.Tensor:
    """Counts per state of ``copies`` draws of every row, shape ``rows.shape``."""
    values = rows.to(dtype)[None].expand(copies, -1, -1).contiguous()
    generator = torch.Generator().manual_seed(seed)
    assert categorical.uses_kernel(values, generator)
    draws = categorical.draw_one_hot_(values, softmax=softmax, generator=generator)
    assert draws.dtype == dtype and draws.shape == (copies, *rows.shape)
    assert torch.equal(draws.sum(-1), torch.ones(copies, rows.shape[0], dtype=dtype)), "one 1 per row"
    return draws.to(torch.float64).sum(0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_draws_follow_the_softmax(dtype):
    counts = _draw_counts(LOGITS, softmax=True, dtype=dtype, copies=30_000, seed=1)
    exact = torch.softmax(LOGITS, -1)
    for row in range(LOGITS.shape[0]):
        assert_counts_match(counts[row], exact[row], label=f"softmax row {row} ({dtype})")


@pytest.mark.parametrize("dtype", DTYPES)
def test_weight_draws_follow_the_weights_and_never_a_zero(dtype):
    counts = _draw_counts(WEIGHTS, softmax=False, dtype=dtype, copies=30_000, seed=2)
    exact = WEIGHTS / WEIGHTS.sum(-1, keepdim=True)
    for row in range(WEIGHTS.shape[0]):
        # assert_counts_match also fails on any draw of a state of probability 0.
        assert_counts_match(counts[row], exact[row], label=f"weights row {row} ({dtype})")


def test_float64_draws_are_the_counter_uniforms_against_the_running_sums():
    # The exact reference: site r's uniform is counter_bits(r, keys) / 2^32, and the state is
    # the number of running sums (float64, in order) at most u times the total.
    weights = torch.rand(401, 7, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    weights[weights < 0.2] = 0.0
    weights[:, 3] += 1e-3  # no row without weight
    seed = 9
    drawn = categorical.draw_one_hot_(
        weights.clone(), softmax=False, generator=torch.Generator().manual_seed(seed)
    ).argmax(-1)
    keys = rng.counter_keys(torch.Generator().manual_seed(seed))
    uniform = (
        rng.counter_bits(torch.arange(weights.shape[0], dtype=torch.int64), keys).to(torch.float64) / 2**32
    )
    running = weights.cumsum(-1)
    expected = (running <= (uniform * running[:, -1])[:, None]).sum(-1)
    assert torch.equal(drawn, expected)


def test_float32_softmax_is_the_softmax_up_to_rounding():
    # Logits whose softmax the kernel's inlined exponential must reproduce: against float64
    # thresholds, a draw may only differ where the uniform falls within float32 rounding of
    # a running sum, which a few hundred rows never hit.
    logits = 3 * torch.randn(500, 21, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    seed = 5
    drawn = categorical.draw_one_hot_(
        logits.to(torch.float32), softmax=True, generator=torch.Generator().manual_seed(seed)
    ).argmax(-1)
    keys = rng.counter_keys(torch.Generator().manual_seed(seed))
    bits = rng.counter_bits(torch.arange(logits.shape[0], dtype=torch.int64), keys)
    uniform = (bits >> 8).to(torch.float64) / 2**24
    running = torch.softmax(logits, -1).cumsum(-1)
    expected = (running <= uniform[:, None]).sum(-1).clamp_max(20)
    assert torch.equal(drawn, expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_probabilities_are_exact_to_a_millionth(dtype):
    # Two states with logits (c, c + x): state 0 is drawn iff u < p0 = 1 / (1 + e^x). Each row's
    # x puts p0 a relative 1e-5 above or below its own uniform u (known from counter_bits), so
    # every row's state says on which side of u the kernel's probability fell: an exponential
    # off by more than about 1e-6 (a range reduction or a coefficient wrong) flips rows.
    n = 4000
    seed = 14
    keys = rng.counter_keys(torch.Generator().manual_seed(seed))
    bits = rng.counter_bits(torch.arange(n, dtype=torch.int64), keys)
    uniform = (
        (bits >> 8).to(torch.float64) / 2**24 if dtype == torch.float32 else bits.to(torch.float64) / 2**32
    )
    usable = (uniform > 1e-4) & (uniform < 1 - 1e-4)
    side = torch.randint(0, 2, (n,), generator=torch.Generator().manual_seed(15)) * 2 - 1  # +1: p0 above u
    p0 = uniform * (1 + side * 1e-5)
    x = torch.log((1 - p0) / p0)
    shift = 100 * torch.rand(n, generator=torch.Generator().manual_seed(16), dtype=torch.float64) - 50
    logits = torch.stack([shift, shift + x], 1).to(dtype)
    drawn = categorical.draw_one_hot_(logits, softmax=True, generator=torch.Generator().manual_seed(seed))
    state_zero = drawn[:, 0] == 1
    assert int(usable.sum()) > 3900
    assert torch.equal(state_zero[usable], (side == 1)[usable])


def test_same_seed_same_draws_on_one_thread_or_two():
    logits = torch.randn(300, 17, 6, generator=torch.Generator().manual_seed(6))
    threads = torch.get_num_threads()
    try:
        results = []
        for count in (1, 2):
            torch.set_num_threads(count)
            results.append(
                categorical.draw_one_hot_(
                    logits.clone(), softmax=True, generator=torch.Generator().manual_seed(7)
                )
            )
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(results[0], results[1])
    other = categorical.draw_one_hot_(
        logits.clone(), softmax=True, generator=torch.Generator().manual_seed(8)
    )
    assert not torch.equal(results[0], other)


def test_not_contiguous_values_are_drawn_from_a_copy():
    logits = torch.randn(6, 11, 4, generator=torch.Generator().manual_seed(10)).transpose(0, 1)
    before = logits.clone()
    draws = categorical.draw_one_hot_(logits, softmax=True, generator=torch.Generator().manual_seed(0))
    assert draws.shape == (11, 6, 4) and torch.equal(logits, before)
    assert torch.equal(draws.sum(-1), torch.ones(11, 6))


def test_modes_and_where_the_kernel_applies(monkeypatch):
    values = torch.zeros(3, 4)
    generator = torch.Generator()
    assert categorical.uses_kernel(values, generator)
    assert not categorical.uses_kernel(values.to(torch.float16), generator)
    block = rng.BlockGenerator(0, [0], [3])
    assert not categorical.uses_kernel(values, block), "block streams keep the torch path"
    categorical.set_mode("off")
    assert categorical.mode() == "off" and not categorical.uses_kernel(values, generator)
    categorical.set_mode(None)
    monkeypatch.setenv(categorical.ENVIRONMENT_VARIABLE, "off")
    assert not categorical.uses_kernel(values, generator)
    monkeypatch.setenv(categorical.ENVIRONMENT_VARIABLE, "sometimes")
    with pytest.raises(bl.errors.ValidationError, match="auto, on, off"):
        categorical.mode()


def test_a_failed_build_falls_back_to_torch_with_one_warning(monkeypatch, tmp_path):
    monkeypatch.setenv("BOLTZLAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setattr(categorical.KERNEL, "loaded", None)
    monkeypatch.setattr(categorical.KERNEL, "broken", None)
    # The sweep's hidden product has a kernel of its own, which must not try (and fail) here.
    monkeypatch.setenv(sparse_product.ENVIRONMENT_VARIABLE, "off")
    model = _tiny_potts(torch.float32)
    chains = model.init_chains(9, generator=torch.Generator().manual_seed(0)).with_beta(1.0)
    with pytest.warns(RuntimeWarning, match="categorical sampling kernel could not be built"):
        moved, _ = bl.operators.get("gibbs").step(model, chains, generator=torch.Generator().manual_seed(1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once only
        again, _ = bl.operators.get("gibbs").step(model, chains, generator=torch.Generator().manual_seed(1))
    assert torch.equal(moved.visible, again.visible)
    assert torch.equal(moved.visible.view(9, 3, 3).sum(2), torch.ones(9, 3))


# ---------------------------------------------------------------------------- Potts sweeps
def _tiny_potts(dtype: torch.dtype) -> bl.models.PottsRBM:
    """3 sites × 3 states, 2 hidden units (108 joint states), with fields and a fitted base."""
    generator = torch.Generator().manual_seed(12)
    model = bl.models.PottsRBM(3, 3, 2, generator=generator, weight_std=0.9, dtype=dtype)
    with torch.no_grad():
        model.visible_bias.copy_(torch.randn(9, generator=generator))
        model.hidden_bias.copy_(0.5 * torch.randn(2, generator=generator))
    return model.set_base_rate(torch.tensor([[0, 1, 2], [0, 0, 1], [2, 1, 0], [0, 2, 2]]))


def _codes(model: bl.models.PottsRBM, layers: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Mixed-radix codes of sampled states, in the order of the exact matrices (unit_radices)."""
    code = torch.zeros(layers[0].shape[0], dtype=torch.int64)
    place = 1
    for layer, unit, q in unit_radices(model):
        values = layers[layer]
        digit = (
            values[:, unit * q : (unit + 1) * q].argmax(1) if layer == 0 else values[:, unit].to(torch.int64)
        )
        code += digit * place
        place *= q
    return code


@pytest.mark.parametrize("kernel", ["on", "off"])
@pytest.mark.parametrize("name", OPERATOR_NAMES)
def test_one_potts_sweep_lands_on_the_exact_matrix_row(name, kernel):
    categorical.set_mode(kernel)
    operator = bl.operators.get(name)
    model = _tiny_potts(torch.float64)
    beta = 0.6
    matrix = transition_matrix(model, operator, beta=beta)
    n = 40_000
    start = (
        one_hot_indices(torch.tensor([[2, 0, 1]]), 3, dtype=torch.float64).expand(n, -1).clone(),
        torch.tensor([[1.0, 0.0]], dtype=torch.float64).expand(n, -1).clone(),
    )
    chains = bl.Chains(layers=start, beta=torch.full((n,), beta, dtype=torch.float64))
    start_code = int(_codes(model, tuple(layer[:1] for layer in start))[0])
    moved, _ = operator.step(model, chains, generator=torch.Generator().manual_seed(13))
    counts = torch.bincount(_codes(model, moved.layers), minlength=matrix.shape[0])
    assert_counts_match(counts, matrix[start_code], label=f"{name}, kernel {kernel}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_potts_sweep_contract(dtype):
    model = _tiny_potts(dtype)
    chains = model.init_chains(13, generator=torch.Generator().manual_seed(2)).with_beta(0.7)
    before = tuple(layer.clone() for layer in chains.layers)
    operator = bl.operators.get("gibbs")
    first, _ = operator.step(model, chains, generator=torch.Generator().manual_seed(3))
    second, _ = operator.step(model, chains, generator=torch.Generator().manual_seed(3))
    for old, layer in zip(before, chains.layers, strict=True):
        assert torch.equal(old, layer), "step modified its input"
    for a, b in zip(first.layers, second.layers, strict=True):
        assert a.dtype == dtype and torch.equal(a, b), "same seed, same sweep"
    assert torch.equal(first.visible.view(13, 3, 3).sum(2), torch.ones(13, 3, dtype=dtype))
    logits = model.conditional_logits(0, first.layers, first.beta)
    kept = logits.clone()
    drawn = operator.sample_categorical_layer(logits, first.visible, 3, generator=torch.Generator())
    assert torch.equal(logits, kept) and drawn.shape == logits.shape


def test_a_subclass_with_its_own_rule_is_not_drawn_from_the_softmax():
    class Frozen(bl.operators.GibbsOperator):
        """Keeps every site where it is: its rule is no softmax, whatever its parent's was."""

        def categorical_probabilities(self, logits, current):
            return current.clone()

    model = _tiny_potts(torch.float32)
    chains = model.init_chains(50, generator=torch.Generator().manual_seed(4)).with_beta(1.0)
    moved, _ = Frozen().step(model, chains, generator=torch.Generator().manual_seed(5))
    assert torch.equal(moved.visible, chains.visible)
    assert math.isclose(float(moved.visible.sum()), 150.0)
