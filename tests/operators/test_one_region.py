"""The one-region RBM sweep (operators/one_region.py): exact against enumeration, the fused
kernel's draws from the same keys, and a clean fallback when it cannot be built."""

from __future__ import annotations

import os
import shutil

import pytest
import torch

import boltzlab as bl
from boltzlab import gemm
from boltzlab.operators import base as operator_base
from boltzlab.operators import fused, one_region
from harness import check_operator_exact

needs_compiler = pytest.mark.skipif(
    shutil.which(os.environ.get("CXX", "g++")) is None and shutil.which("c++") is None,
    reason="no C++ compiler on this machine: the one-region extension cannot be built",
)


@pytest.fixture
def mode_on():
    fused.set_mode("on")
    yield
    fused.set_mode(None)


@pytest.fixture(params=["torch", "openblas"])
def backend(request, monkeypatch):
    """Each tile's product through ATen's GEMM or, called by address, numpy's OpenBLAS (in
    tiles of 64 rows here, so that a block has several tiles and a short last one)."""
    if request.param == "openblas" and gemm.openblas_kernels() is None:
        pytest.skip("numpy does not use an OpenBLAS whose GEMM can be found here")
    monkeypatch.setattr(one_region, "OPENBLAS_TILE_ROWS", 64)
    gemm.set_backend(request.param)
    yield request.param
    gemm.set_backend(None)


def _model(dtype: torch.dtype) -> bl.RBM:
    model = bl.RBM(40, 24, generator=2, weight_std=0.8, dtype=dtype)
    data = (torch.rand(50, 40, generator=torch.Generator().manual_seed(3)) < 0.3).to(dtype)
    return model.set_base_rate(data)


@pytest.mark.slow
@needs_compiler
@pytest.mark.parametrize("name", ["gibbs", "flip", "mixture"])
def test_one_region_sweeps_are_exact(name, mode_on, backend, monkeypatch):
    """The harness's transition histograms and reproducibility checks, through this path, with
    each GEMM backend's product."""
    calls = []
    original = one_region.one_region_sweep

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(operator_base, "one_region_sweep", counting)
    check_operator_exact(bl.operators.get(name, **({"alpha": 0.3} if name == "mixture" else {})))
    assert calls and one_region._broken is None, one_region._broken


@pytest.mark.slow
@needs_compiler
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", ["gibbs", "flip", "mixture"])
def test_one_region_draws_what_the_fused_kernel_draws(name, dtype, mode_on, backend, monkeypatch):
    """Same seed, same keys, same thresholds: one sweep equals the fused path's unit by unit,
    but for a handful that land within float rounding of their uniform (the two GEMMs and
    exponentials differ in the last bits), at β = 1 and tempered (per-chain β, a fitted base,
    and a base that is not fitted but not zero), forward and reverse, on one and two threads,
    with each GEMM backend.
    The fused kernel runs on one thread only: each thread count is another compilation, and a
    process may compile a kernel only so many times."""
    fitted = _model(dtype)
    unfitted = bl.RBM(40, 24, generator=2, weight_std=0.8, dtype=dtype)
    unfitted.base_logits.copy_(fitted.base_logits)  # loaded weights, base_fitted still False
    # α = 0.3, not 0.5: at 0.5 weights swapped between flip and Gibbs would draw the same.
    operator = bl.operators.get(name, **({"alpha": 0.3} if name == "mixture" else {}))
    for model in (fitted, unfitted):
        chains = model.init_chains(300, generator=0)
        for start in (chains.with_beta(1.0), chains.with_beta(torch.linspace(0.0, 1.0, 300))):
            for reverse in (False, True):

                def sweep(threads: int, start=start, reverse=reverse, model=model) -> bl.Chains:
                    torch.set_num_threads(threads)
                    generator = torch.Generator().manual_seed(5)
                    return operator.step(model, start, generator=generator, reverse=reverse)[0]

                with monkeypatch.context() as patch:
                    patch.setattr(operator_base, "uses_one_region", lambda *args: False)
                    theirs = sweep(1)
                for threads in (1, 2):
                    mine = sweep(threads)
                    for a, b in zip(mine.layers, theirs.layers, strict=True):
                        assert a.dtype == b.dtype == dtype and a.shape == b.shape
                        assert int((a != b).sum()) <= 3, (name, dtype, reverse, threads)
                    assert torch.equal(mine.beta, start.beta)
    assert one_region._broken is None, one_region._broken


def test_auto_mode_takes_only_large_rbm_sweeps(monkeypatch):
    model = _model(torch.float32)
    chains = model.init_chains(10, generator=0)
    gibbs = bl.operators.get("gibbs")
    assert not one_region.uses_one_region(gibbs, model, chains, torch.Generator())  # too small
    assert not one_region.uses_one_region(
        bl.operators.get("mixture", alpha=0.5), model, chains, torch.Generator()
    )
    large = bl.RBM(300, 300, generator=0)
    many = large.init_chains(500, generator=0)
    monkeypatch.setattr(one_region.gemm, "backend", lambda dtype=None, rows=None, threads=None: "torch")
    torch.set_num_threads(2)
    assert one_region.uses_one_region(gibbs, large, many, torch.Generator())
    assert one_region.uses_one_region(bl.operators.get("flip"), large, many, torch.Generator())
    assert one_region.uses_one_region(bl.operators.get("mixture", alpha=0.3), large, many, torch.Generator())

    class Subclass(bl.RBM):
        pass

    assert not one_region.uses_one_region(gibbs, Subclass(300, 300, generator=0), many, torch.Generator())
    blocks = bl.rng.BlockGenerator(0, [0, 1], [250, 250])
    assert not one_region.uses_one_region(gibbs, large, many, blocks)
    torch.set_num_threads(1)
    assert not one_region.uses_one_region(gibbs, large, many, torch.Generator())
    # Where OpenBLAS is the faster product, the region calls it, on any number of threads;
    # without its entry points the library's own path keeps it.
    monkeypatch.setattr(one_region.gemm, "backend", lambda dtype=None, rows=None, threads=None: "openblas")
    monkeypatch.setattr(one_region.gemm, "openblas_kernels", lambda: object())
    for threads in (1, 2):
        torch.set_num_threads(threads)
        assert one_region.uses_one_region(gibbs, large, many, torch.Generator())
    monkeypatch.setattr(one_region.gemm, "openblas_kernels", lambda: None)
    assert not one_region.uses_one_region(gibbs, large, many, torch.Generator())
    torch.set_num_threads(2)
    fused.set_mode("off")
    try:
        assert not one_region.uses_one_region(gibbs, model, chains, torch.Generator())
    finally:
        fused.set_mode(None)


def test_a_failed_build_warns_once_and_sweeps_go_on(mode_on, monkeypatch):
    import torch.utils.cpp_extension as cpp_extension

    def fail(*args, **kwargs):
        raise RuntimeError("Ninja is required to load C++ extensions")

    monkeypatch.setattr(one_region, "_extension", None)
    monkeypatch.setattr(one_region, "_broken", None)
    monkeypatch.setattr(cpp_extension, "load_inline", fail)
    model = _model(torch.float64)
    chains = model.init_chains(16, generator=0)
    with pytest.warns(RuntimeWarning, match="one-region sweep could not be built"):
        swept, _ = bl.operators.get("gibbs").step(model, chains, generator=torch.Generator().manual_seed(0))
    assert swept.layers[0].shape == chains.layers[0].shape
    assert one_region._broken is not None
    assert not one_region.uses_one_region(bl.operators.get("gibbs"), model, chains, torch.Generator())
