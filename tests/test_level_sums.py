"""The level-sums kernel: Σ softplus(β a) and Σ a σ(β a) at every level against float64 torch,
its modes, and the tempered estimators exact with it on tiny models (forced on)."""

import pytest
import torch

import boltzlab as bl
from boltzlab import level_sums
from boltzlab.errors import ValidationError
from boltzlab.estimators.tempered.levels import log_f_all, log_f_and_derivatives_all, path_derivative_all
from harness import check_estimator_exact


@pytest.fixture
def kernel_on():
    level_sums.set_mode("on")
    yield
    level_sums.set_mode(None)


def reference(pre: torch.Tensor, betas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    scaled = pre.double()[:, None, :] * betas.double()[None, :, None]
    return (
        torch.nn.functional.softplus(scaled).sum(2),
        (pre.double()[:, None, :] * torch.sigmoid(scaled)).sum(2),
    )


@pytest.mark.parametrize(
    ("n", "units", "levels", "scale"),
    [(7, 500, 100, 3.0), (3, 130, 17, 30.0), (5, 1, 1, 1.0), (4, 64, 3, 200.0), (2, 65, 9, 0.0)],
)
def test_kernel_matches_float64_sums_and_derivatives(kernel_on, n, units, levels, scale):
    # Block edges (64, 65 units), one unit, one level, huge pre-activations (e^{-β|a|} far
    # below the smallest float) and all-zero ones (every factor exactly 2).
    g = torch.Generator().manual_seed(units)
    pre = torch.randn(n, units, generator=g) * scale
    betas = (
        torch.cat([torch.zeros(1), torch.rand(levels - 1, generator=g).sort().values])
        if levels > 1
        else torch.ones(1)
    )
    sums, derivatives = level_sums.level_sums(pre, betas, derivative=True)
    expected_sums, expected_derivatives = reference(pre, betas)
    assert sums.dtype == derivatives.dtype == torch.float64 and sums.shape == (n, levels)
    # single-precision exponentials and products: a few 1e-6 nats per 500 units
    assert torch.allclose(sums, expected_sums, rtol=0, atol=2e-5 * max(1.0, units / 100))
    assert torch.allclose(derivatives, expected_derivatives, rtol=2e-6, atol=2e-5 * max(1.0, units / 100))
    alone, none = level_sums.level_sums(pre, betas)
    assert none is None and torch.equal(alone, sums)


def test_kernel_is_deterministic_across_threads(kernel_on):
    pre = torch.randn(33, 200, generator=torch.Generator().manual_seed(1)) * 4
    betas = torch.linspace(0, 1, 40)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one, _ = level_sums.level_sums(pre, betas)
        torch.set_num_threads(2)
        two, _ = level_sums.level_sums(pre, betas)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, two)  # each row is summed by one thread in a fixed order
    assert torch.allclose(one, reference(pre, betas)[0], rtol=0, atol=2e-5)


def test_nan_and_infinite_inputs_propagate_as_in_float64(kernel_on):
    pre = torch.tensor([[float("nan"), 1.0], [float("inf"), 1.0], [float("-inf"), 1.0], [2.0, 1.0]])
    betas = torch.tensor([0.0, 0.5, 1.0])
    sums, derivatives = level_sums.level_sums(pre, betas, derivative=True)
    assert bool(sums[0].isnan().all()) and bool(derivatives[0].isnan().all())  # a diverged model shows
    assert bool(sums[1, 1:].isinf().all())
    assert torch.allclose(sums[2, 1:], reference(pre[2:3, 1:], betas[1:])[0][0], rtol=0, atol=1e-5)
    assert bool(torch.isfinite(sums[3]).all())


def test_loading_the_kernel_leaves_subnormal_numbers_alone(kernel_on):
    # A library linked with -ffast-math would turn on flush-to-zero for the whole process.
    level_sums.level_sums(torch.ones(1, 1), torch.ones(1))
    assert float(torch.tensor([1e-310], dtype=torch.float64) * 1.0) > 0.0 and 1e-310 * 1.0 > 0.0
    assert float(torch.tensor([1e-40], dtype=torch.float32) * 1.0) > 0.0


def test_bad_inputs_are_refused(kernel_on):
    with pytest.raises(ValidationError, match="at least 0"):
        level_sums.level_sums(torch.ones(2, 3), torch.tensor([0.5, -1.0]))
    with pytest.raises(ValidationError, match="float32 CPU tensor"):
        level_sums.level_sums(torch.ones(2, 3, dtype=torch.float64), torch.ones(2))


def test_level_densities_use_the_kernel_only_from_the_size_threshold(monkeypatch):
    model = bl.RBM(n_visible=9, n_hidden=6, generator=0)
    terms = model.marginal_terms(model.init_chains(11, generator=0).layers)
    betas = torch.linspace(0, 1, 8, dtype=torch.float64)
    level_sums.set_mode(None)
    wide = torch.zeros(1, level_sums.MIN_ELEMENTS)
    assert not level_sums.uses_kernel(8, 6, terms.preactivation)  # far below MIN_ELEMENTS per chain
    assert level_sums.uses_kernel(1, level_sums.MIN_ELEMENTS, wide)  # however few chains
    assert not level_sums.uses_kernel(1, level_sums.MIN_ELEMENTS, wide.double())  # float64 models: float64
    assert not level_sums.uses_kernel(1, level_sums.MIN_ELEMENTS, wide.to("meta"))
    exact = log_f_all(terms, betas)
    monkeypatch.setenv(level_sums.ENVIRONMENT_VARIABLE, "on")
    fast_f, fast_d = log_f_and_derivatives_all(terms, betas)
    assert not torch.equal(fast_f, exact) and torch.allclose(fast_f, exact, rtol=0, atol=1e-5)
    assert torch.allclose(fast_d, path_derivative_all(terms, betas), rtol=1e-5, atol=1e-5)
    monkeypatch.setenv(level_sums.ENVIRONMENT_VARIABLE, "off")
    assert torch.equal(log_f_all(terms, betas), exact)


def test_a_failed_build_falls_back_to_float64_with_one_warning(monkeypatch, tmp_path):
    monkeypatch.setenv("BOLTZLAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setattr(level_sums.KERNEL, "loaded", None)
    monkeypatch.setattr(level_sums.KERNEL, "broken", None)
    monkeypatch.setenv(level_sums.ENVIRONMENT_VARIABLE, "on")
    model = bl.RBM(n_visible=9, n_hidden=6, generator=0)
    terms = model.marginal_terms(model.init_chains(5, generator=0).layers)
    betas = torch.linspace(0, 1, 4, dtype=torch.float64)
    with pytest.warns(RuntimeWarning, match="could not be built"):
        first = log_f_all(terms, betas)
    monkeypatch.setenv(level_sums.ENVIRONMENT_VARIABLE, "off")
    assert torch.equal(first, log_f_all(terms, betas))  # the float64 path, from the first call on


def test_bad_modes_are_refused(monkeypatch):
    with pytest.raises(ValidationError, match="set_mode must be one of auto, on, off"):
        level_sums.set_mode("sometimes")
    monkeypatch.setenv(level_sums.ENVIRONMENT_VARIABLE, "fast")
    with pytest.raises(ValidationError, match="BOLTZLAB_LEVEL_SUMS must be one of"):
        level_sums.mode()


# RTS in the fast tier; TI-RB and MBAR read the same kernel's sums and take 15-18 s each, so
# they run in the slow tier (CONTRIBUTING.md, "Two tiers").
@pytest.mark.parametrize(
    "method",
    ["rts", pytest.param("ti-rb", marks=pytest.mark.slow), pytest.param("mbar", marks=pytest.mark.slow)],
)
def test_tempered_estimators_agree_with_enumeration_through_the_kernel(kernel_on, method):
    # A 100-point pilot and no verdict witness (lower_bound_sweeps=0): the kernel's sums are what
    # is checked here, against enumeration within the estimate's own error bar.
    check_estimator_exact(
        lambda model, budget, seed: bl.estimate_log_z(
            model,
            method=method,
            n_chains=20,
            n_temperatures=20,
            n_sweeps=200 * budget,
            generator=seed,
            pilot_temperatures=100,
            lower_bound_sweeps=0,
        )
    )
