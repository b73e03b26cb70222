"""The fused sampling kernel (probability, counter-based uniform and threshold compiled into
one pass): exact against enumeration, the same result for any thread count, the same
threshold as the unfused path, and a clean fallback when compiling fails."""

from __future__ import annotations

import os
import shutil

import pytest
import torch

import boltzlab as bl
from boltzlab import gemm
from boltzlab.errors import ValidationError
from boltzlab.operators import base as operator_base
from boltzlab.operators import fused
from harness import check_operator_exact

# torch.compile's CPU backend builds C++; without a compiler the kernel falls back (tested
# below with a simulated failure) and the tests that need the compiled kernel are skipped.
needs_compiler = pytest.mark.skipif(
    shutil.which(os.environ.get("CXX", "g++")) is None and shutil.which("c++") is None,
    reason="no C++ compiler on this machine: torch.compile cannot build the fused kernel",
)

OPERATORS = {
    "gibbs": lambda: bl.operators.get("gibbs"),
    "flip": lambda: bl.operators.get("flip"),
    "mixture": lambda: bl.operators.get("mixture", alpha=0.3),
}


@pytest.fixture
def fused_mode(monkeypatch):
    # RBM sweeps in these modes would go through the one-region sweep (test_one_region.py);
    # these tests are the fused kernel's.
    monkeypatch.setattr(operator_base, "uses_one_region", lambda *args: False)

    def use(name: str) -> None:
        fused.set_mode(name)

    yield use
    fused.set_mode(None)


@needs_compiler
@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_fused_operators_are_exact(name, fused_mode):
    """The harness's histograms come from the compiled kernel at every size ("on")."""
    fused_mode("on")
    check_operator_exact(OPERATORS[name]())
    assert fused._broken is None, fused._broken


@pytest.mark.slow
@needs_compiler
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_large_layers_draw_the_operators_probabilities(name, threads, fused_mode):
    """Vectorised, multi-threaded code runs only on large tensors, which the harness's tiny
    models never reach: 200 draws of a 256×512 layer against ``probability_on``. (A traced
    in-place update once made the mixture's one-thread kernel draw P(1) wrong.)"""
    fused_mode("on")
    torch.set_num_threads(threads)
    operator = OPERATORS[name]()
    g = torch.Generator().manual_seed(threads)
    for dtype in (torch.float32, torch.float64):
        logits = (torch.randn(256, 512, generator=g, dtype=torch.float64) * 3).to(dtype)
        logits[:, :8] = 0.0
        current = (torch.rand(256, 512, generator=g) < 0.5).to(dtype)
        p = operator.probability_on(logits, current).double()
        n_draws = 200
        frequency = sum(operator.sample_layer(logits, current, generator=g).double() for _ in range(n_draws))
        frequency = frequency / n_draws
        inside = (p > 0.05) & (p < 0.95)  # where the normal approximation holds
        z = (frequency - p)[inside] / (p * (1 - p) / n_draws)[inside].sqrt()
        # ~10^5 units: |z| stays below 6.5 (binomial tails at 200 draws are a little heavier
        # than normal ones) and the mean z near 0 (sd 1/sqrt(units)).
        assert float(z.abs().max()) < 6.5, f"{name} {dtype}: max |z| {float(z.abs().max()):.1f}"
        assert abs(float(z.mean())) < 5 / z.numel() ** 0.5, f"{name} {dtype}: mean z {float(z.mean()):.4f}"
        assert torch.equal(frequency[~inside & (p == 0)], p[~inside & (p == 0)])
    assert fused._broken is None, fused._broken


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_the_compiled_threshold_is_the_in_place_one(name):
    # The kernel traces ``threshold``; the unfused path runs ``threshold_``. Same numbers,
    # including exact ties (x = 0) and saturated probabilities.
    operator = OPERATORS[name]()
    g = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.float64):
        logits = torch.randn(50, 40, generator=g, dtype=dtype) * 10
        logits[:, :5] = 0.0
        logits[:, 5:8] = torch.tensor([80.0, -80.0, 1e-30], dtype=dtype)
        current = (torch.rand(50, 40, generator=g) < 0.5).to(dtype)
        pure = operator.threshold(logits, current)
        in_place = operator.threshold_(logits.clone(), current, torch.empty_like(logits))
        scale = bl.rng.uniform_scale(dtype)
        # Beyond ±scale/2 both saturate the comparison; compare what decides a draw. Different
        # but equivalent formulas round differently: up to 2 of the 2^b uniform steps.
        assert torch.allclose(pure.clamp(-scale, scale), in_place.clamp(-scale, scale), rtol=1e-6, atol=2.0)


@needs_compiler
def test_same_seed_same_chains_for_any_thread_count(fused_mode):
    # The uniforms do not depend on the thread count; OpenBLAS's products can (in the last
    # bits), and auto may pick another GEMM per thread count, so torch's products are fixed here.
    fused_mode("on")
    gemm.set_backend("torch")
    model = bl.RBM(n_visible=300, n_hidden=200, generator=0)
    chains = model.init_chains(400, generator=0).with_beta(1.0)
    results = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        g = torch.Generator().manual_seed(5)
        state, _ = bl.operators.get("gibbs").step(model, chains, generator=g)
        results.append(state.layers)
    torch.set_num_threads(1)
    gemm.set_backend(None)
    assert all(torch.equal(a, b) for a, b in zip(*results, strict=True))


def test_auto_uses_the_kernel_for_large_cpu_layers_only(fused_mode):
    fused_mode("auto")
    rows = fused.MIN_FUSED_UNITS // fused.MIN_FUSED_WIDTH
    assert fused.uses_fused(torch.zeros(rows, fused.MIN_FUSED_WIDTH))
    assert not fused.uses_fused(torch.zeros(rows - 1, fused.MIN_FUSED_WIDTH))
    assert not fused.uses_fused(torch.zeros(rows * 16, fused.MIN_FUSED_WIDTH // 16))  # narrow
    assert not fused.uses_fused(torch.zeros(rows, fused.MIN_FUSED_WIDTH, dtype=torch.float16))
    fused_mode("off")
    assert not fused.uses_fused(torch.zeros(rows, fused.MIN_FUSED_WIDTH))
    with pytest.raises(ValidationError, match="auto, on or off"):
        fused.set_mode("sometimes")


def test_a_failed_compilation_falls_back_once_with_a_warning(monkeypatch, fused_mode):
    fused_mode("on")

    def broken(*_args, **_kwargs):
        raise RuntimeError("no C++ compiler")

    monkeypatch.setattr(fused, "_compiled", {})
    monkeypatch.setattr(torch, "compile", lambda function, **_: broken)
    monkeypatch.setattr(fused, "_broken", None)
    monkeypatch.setattr(fused, "_working", set())
    model = bl.RBM(n_visible=6, n_hidden=4, generator=0)
    chains = model.init_chains(10, generator=0).with_beta(1.0)
    with pytest.warns(RuntimeWarning, match="no C\\+\\+ compiler"):
        state, _ = bl.operators.get("gibbs").step(model, chains, generator=torch.Generator().manual_seed(1))
    assert fused._broken is not None and not fused.uses_fused(torch.zeros(10**6))
    # The unfused path now, from the same seed: the failed attempt gave back its key draw.
    expected, _ = bl.operators.get("gibbs").step(model, chains, generator=torch.Generator().manual_seed(1))
    assert all(torch.equal(a, b) for a, b in zip(state.layers, expected.layers, strict=True))


def test_a_subclass_that_changes_the_probability_is_not_compiled_with_its_parents_threshold():
    from boltzlab.operators.base import _has_own_threshold
    from boltzlab.operators.gibbs import GibbsOperator

    class Tempered(GibbsOperator):  # a new probability, no threshold of its own
        def probability_on_(self, logits, current):
            return logits.mul_(0.5).sigmoid_()

    assert _has_own_threshold(GibbsOperator)
    assert not _has_own_threshold(Tempered)
