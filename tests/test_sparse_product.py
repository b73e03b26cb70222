"""boltzlab.sparse_product: ``bias + v·W`` over the non-zeros of ``v``, and the Potts RBM's use of it.

Properties checked: the product equals the dense one (float64 round-off, float32 rounding) for
one-hot rows, sparse rows of any values, dense rows, rows wider than the kernel's scan block,
empty batches and all-zero rows; the result is the same on one thread or two; the kernel is
used only where it applies (CPU, float32/float64, one dtype, no gradient, mode not ``off``);
a failed build warns once and the dense product runs; a Potts RBM's hidden pre-activations and
summed-out terms are the same with the kernel and without it.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import boltzlab as bl
from boltzlab import sparse_product
from boltzlab.models.categorical import one_hot_indices


@pytest.fixture(autouse=True)
def _kernel_on():
    sparse_product.set_mode("on")
    yield
    sparse_product.set_mode(None)


def _one_hot(n: int, sites: int, states: int, seed: int, dtype=torch.float64) -> torch.Tensor:
    indices = torch.randint(0, states, (n, sites), generator=torch.Generator().manual_seed(seed))
    return one_hot_indices(indices, states, dtype=dtype)


def _check(v: torch.Tensor, units: int, *, seed: int, rtol: float, atol: float) -> None:
    generator = torch.Generator().manual_seed(seed)
    weights = torch.randn(v.shape[1], units, generator=generator, dtype=v.dtype)
    bias = torch.randn(units, generator=generator, dtype=v.dtype)
    assert sparse_product.uses_kernel(v, weights)
    got = sparse_product.sparse_addmm(bias, v, weights)
    assert got.shape == (v.shape[0], units) and got.dtype == v.dtype
    torch.testing.assert_close(got, torch.addmm(bias, v, weights), rtol=rtol, atol=atol)


@pytest.mark.parametrize(
    "dtype, rtol, atol",
    [(torch.float64, 1e-12, 1e-12), (torch.float32, 1e-5, 1e-5)],
    ids=["float64", "float32"],
)
def test_the_product_is_the_dense_one(dtype, rtol, atol):
    _check(_one_hot(13, 7, 5, seed=1, dtype=dtype), 11, seed=2, rtol=rtol, atol=atol)
    # Wider than the kernel's scan block of 256 columns, and odd unit counts.
    _check(_one_hot(9, 31, 21, seed=3, dtype=dtype), 37, seed=4, rtol=rtol, atol=atol)
    # Any values where v is not zero: fractions, negatives; all-zero rows give the bias.
    sparse = torch.randn(17, 300, generator=torch.Generator().manual_seed(5), dtype=dtype)
    sparse[torch.rand(17, 300, generator=torch.Generator().manual_seed(6)) < 0.9] = 0.0
    sparse[3] = 0.0
    _check(sparse, 6, seed=7, rtol=rtol, atol=atol)
    # Dense rows are slow but right.
    _check(
        torch.randn(5, 19, generator=torch.Generator().manual_seed(8), dtype=dtype),
        4,
        seed=9,
        rtol=rtol,
        atol=atol,
    )
    # No rows.
    _check(torch.zeros(0, 12, dtype=dtype), 3, seed=10, rtol=rtol, atol=atol)


def test_one_thread_or_two_give_the_same_product():
    v = _one_hot(501, 31, 21, seed=11, dtype=torch.float32)
    weights = torch.randn(v.shape[1], 100, generator=torch.Generator().manual_seed(12))
    bias = torch.randn(100, generator=torch.Generator().manual_seed(13))
    threads = torch.get_num_threads()
    try:
        results = []
        for count in (1, 2):
            torch.set_num_threads(count)
            results.append(sparse_product.sparse_addmm(bias, v, weights))
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(results[0], results[1])


def test_where_the_kernel_applies(monkeypatch):
    v, weights = torch.zeros(3, 4), torch.zeros(4, 2)
    assert sparse_product.uses_kernel(v, weights)
    assert not sparse_product.uses_kernel(v.double(), weights), "one dtype"
    assert not sparse_product.uses_kernel(v.half(), weights.half())
    assert not sparse_product.uses_kernel(v, weights.requires_grad_()), "autograd keeps the dense product"
    with torch.no_grad():
        assert sparse_product.uses_kernel(v, weights)
    sparse_product.set_mode("off")
    assert not sparse_product.uses_kernel(v, weights.detach())
    sparse_product.set_mode(None)
    monkeypatch.setenv(sparse_product.ENVIRONMENT_VARIABLE, "off")
    assert not sparse_product.uses_kernel(v, weights.detach())
    monkeypatch.setenv(sparse_product.ENVIRONMENT_VARIABLE, "often")
    with pytest.raises(bl.errors.ValidationError, match="auto, on, off"):
        sparse_product.mode()
    with pytest.raises(bl.errors.ValidationError, match="do not fit"):
        sparse_product.sparse_addmm(torch.zeros(3), v, weights.detach())


def _potts(dtype: torch.dtype) -> bl.models.PottsRBM:
    generator = torch.Generator().manual_seed(14)
    model = bl.models.PottsRBM(6, 4, 5, generator=generator, weight_std=0.7, dtype=dtype)
    with torch.no_grad():
        model.hidden_bias.copy_(torch.randn(5, generator=generator))
    return model


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_potts_products_are_the_same_with_the_kernel_and_without(dtype):
    model = _potts(dtype)
    chains = model.init_chains(23, generator=torch.Generator().manual_seed(15)).with_beta(0.4)
    with_kernel = model.conditional_logits(1, chains.layers, chains.beta), model.marginal_terms(chains.layers)
    sparse_product.set_mode("off")
    without = model.conditional_logits(1, chains.layers, chains.beta), model.marginal_terms(chains.layers)
    tolerance = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-12, "atol": 1e-12}
    torch.testing.assert_close(with_kernel[0], without[0], **tolerance)
    torch.testing.assert_close(with_kernel[1].preactivation, without[1].preactivation, **tolerance)


def test_a_failed_build_falls_back_to_the_dense_product_with_one_warning(monkeypatch, tmp_path):
    monkeypatch.setenv("BOLTZLAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setattr(sparse_product.KERNEL, "loaded", None)
    monkeypatch.setattr(sparse_product.KERNEL, "broken", None)
    model = _potts(torch.float64)
    v = model.init_chains(7, generator=torch.Generator().manual_seed(16)).visible
    with pytest.warns(RuntimeWarning, match="sparse product kernel could not be built"):
        first = model.conditional_logits(1, (v, None), torch.ones(7, dtype=torch.float64))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once only
        second = model.conditional_logits(1, (v, None), torch.ones(7, dtype=torch.float64))
    expected = torch.addmm(model.hidden_bias.detach(), v, model.weights.detach())
    torch.testing.assert_close(first, expected, rtol=1e-12, atol=1e-12)
    assert torch.equal(first, second)
