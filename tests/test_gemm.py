"""The CPU GEMM backend: both backends give torch's products up to rounding, the choice is
calibrated once and cached, it can be forced, and the exact-oracle checks pass under each."""

from __future__ import annotations

import json

import pytest
import torch

import boltzlab as bl
from boltzlab import gemm
from boltzlab.errors import ValidationError
from harness import check_estimator_exact, check_operator_exact

pytestmark = pytest.mark.filterwarnings("ignore:AIS is starting from a uniform base")


@pytest.fixture
def use_backend():
    """Force a backend for one test, then go back to the environment's choice."""

    def use(name: str) -> None:
        gemm.set_backend(name)

    yield use
    gemm.set_backend(None)


@pytest.mark.parametrize("backend", gemm.BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_products_equal_torchs_up_to_rounding(backend, dtype, use_backend):
    use_backend(backend)
    g = torch.Generator().manual_seed(0)
    a = torch.randn(37, 23, generator=g, dtype=dtype)
    b = torch.randn(23, 11, generator=g, dtype=dtype)
    bias = torch.randn(11, generator=g, dtype=dtype)
    tolerance = 1e-5 if dtype == torch.float32 else 1e-12
    assert gemm.backend(dtype) == backend
    assert torch.allclose(gemm.addmm(bias, a, b), torch.addmm(bias, a, b), atol=tolerance)
    assert torch.allclose(gemm.addmm(None, a, b, alpha=-0.5), -0.5 * (a @ b), atol=tolerance)
    # Transposed views go to BLAS with a transpose flag, not a copy; the result is the same.
    c = torch.randn(37, 11, generator=g, dtype=dtype)
    out = torch.empty(23, 11, dtype=dtype)
    assert gemm.mm_into(out, a.t(), c) is out
    assert torch.allclose(out, a.t() @ c, atol=tolerance * 10)
    accumulated = torch.ones(23, 11, dtype=dtype)
    assert gemm.addmm_(accumulated, a.t(), c, alpha=2.0) is accumulated
    assert torch.allclose(accumulated, 1 + 2 * (a.t() @ c), atol=tolerance * 10)


def test_autograd_products_stay_on_torch(use_backend):
    use_backend("openblas")
    weights = torch.randn(4, 3, requires_grad=True)
    product = gemm.addmm(None, torch.ones(2, 4), weights)
    product.sum().backward()
    assert torch.equal(weights.grad, torch.full((4, 3), 2.0))


@pytest.mark.parametrize("backend", gemm.BACKENDS)
def test_operators_are_exact_under_each_backend(backend, use_backend):
    use_backend(backend)
    check_operator_exact(bl.operators.get("gibbs"))
    check_operator_exact(bl.operators.get("flip"))


@pytest.mark.slow
@pytest.mark.parametrize("backend", gemm.BACKENDS)
def test_ais_is_exact_under_each_backend(backend, use_backend):
    use_backend(backend)
    check_estimator_exact(
        lambda model, budget, seed: bl.estimate_log_z(
            model, method="ais", n_chains=200 * budget, n_temperatures=100, generator=seed
        )
    )


def test_backends_give_the_same_chains_up_to_rare_rounding_ties(use_backend):
    model = bl.RBM(n_visible=64, n_hidden=32, generator=0)
    chains = model.init_chains(200, generator=0).with_beta(1.0)
    results = []
    for backend in gemm.BACKENDS:
        use_backend(backend)
        g = torch.Generator().manual_seed(3)
        state, _ = bl.operators.get("gibbs").step(model, chains, generator=g)
        results.append(state.layers[0])
    # The same uniforms against thresholds that differ by float rounding only.
    assert (results[0] != results[1]).float().mean() < 1e-3


def test_auto_calibrates_once_and_caches_per_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("BOLTZLAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(gemm.ENVIRONMENT_VARIABLE, "auto")
    gemm.set_backend(None)
    try:
        chosen = gemm.backend(torch.float32)
        assert chosen in gemm.BACKENDS
        cached = json.loads(gemm.cache_path().read_text())
        (entry,) = cached.values()
        assert entry["backend"] == chosen and set(entry["gflops"]) == set(gemm.BACKENDS)
        assert all(value > 0 for value in entry["gflops"].values())
        # A cached choice is used as it is (here: edited to the other backend).
        other = next(name for name in gemm.BACKENDS if name != chosen)
        key = next(iter(cached))
        cached[key]["backend"] = other
        gemm.cache_path().write_text(json.dumps(cached))
        gemm.set_backend(None)
        assert gemm.backend(torch.float32) == other
    finally:
        gemm.set_backend(None)


def test_environment_variable_forces_a_backend_and_bad_names_are_refused(monkeypatch):
    monkeypatch.setenv(gemm.ENVIRONMENT_VARIABLE, "openblas")
    gemm.set_backend(None)
    try:
        assert gemm.backend(torch.float64) == "openblas"
        assert gemm.backend(torch.int64) == "torch"
        monkeypatch.setenv(gemm.ENVIRONMENT_VARIABLE, "fastest")
        gemm.set_backend(None)
        with pytest.raises(ValidationError, match="BOLTZLAB_GEMM"):
            gemm.backend(torch.float32)
        with pytest.raises(ValidationError, match="torch, openblas or auto"):
            gemm.set_backend("mkl")
    finally:
        monkeypatch.delenv(gemm.ENVIRONMENT_VARIABLE)
        gemm.set_backend(None)


def test_auto_keeps_small_products_on_torch(monkeypatch):
    # Below MIN_OPENBLAS_MACS the numpy path's fixed cost outweighs OpenBLAS's speed; a forced
    # backend is used at every size.
    monkeypatch.setenv(gemm.ENVIRONMENT_VARIABLE, "auto")
    monkeypatch.setattr(gemm, "_cached_or_calibrated", lambda dtype, threads, small: "openblas")
    gemm.set_backend(None)
    try:
        small = (torch.zeros(100, 64), torch.zeros(64, 16))
        large = (torch.zeros(100, 784), torch.zeros(784, 500))
        assert not gemm._numpy_path(*small, None)
        assert gemm._numpy_path(*large, None)
        gemm.set_backend("openblas")
        assert gemm._numpy_path(*small, None)
    finally:
        gemm.set_backend(None)


def test_openblas_entry_points_run_on_one_thread_inside_a_region_and_restore_the_pool():
    """The addresses compiled code calls are numpy's OpenBLAS (the test of their products is
    the one-region sweep's, tests/operators/test_one_region.py); inside
    ``single_threaded_openblas`` its pool is one thread, and afterwards torch's count again."""
    kernels = gemm.openblas_kernels()
    if kernels is None:
        pytest.skip("numpy does not use an OpenBLAS whose GEMM can be found here")
    from threadpoolctl import threadpool_info

    def openblas_threads() -> int:
        return next(i["num_threads"] for i in threadpool_info() if i["filepath"] == kernels.path)

    assert kernels.sgemm and kernels.dgemm and kernels.sgemm != kernels.dgemm
    torch.set_num_threads(2)
    try:
        with gemm.single_threaded_openblas(kernels):
            assert openblas_threads() == 1
        assert openblas_threads() == 2
        with pytest.raises(KeyError), gemm.single_threaded_openblas(kernels):
            raise KeyError("an error inside still restores the pool")
        assert openblas_threads() == 2
    finally:
        torch.set_num_threads(1)
        gemm._sync_threads()
    assert openblas_threads() == 1


def test_small_products_get_the_choice_calibrated_on_small_products(tmp_path, monkeypatch):
    """Below SMALL_ROWS rows the choice is the one timed on 100-row products (at 100 rows
    torch's GEMM won where OpenBLAS won at 512), cached under its own key."""
    monkeypatch.setenv("BOLTZLAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(gemm.ENVIRONMENT_VARIABLE, "auto")
    timed = []

    def calibrate(dtype, *, repeats=5, rows=None):
        timed.append(rows)
        return {"torch": 100.0, "openblas": 50.0} if rows is not None else {"torch": 50.0, "openblas": 100.0}

    monkeypatch.setattr(gemm, "calibrate", calibrate)
    gemm.set_backend(None)
    try:
        weights = torch.zeros(784, 500)
        assert not gemm._numpy_path(torch.zeros(gemm.SMALL_ROWS - 1, 784), weights, None)
        assert gemm._numpy_path(torch.zeros(gemm.SMALL_ROWS, 784), weights, None)
        assert gemm.backend(torch.float32) == "openblas" and gemm.backend(torch.float32, rows=100) == "torch"
        assert sorted(timed, key=str) == [100, None]  # each class timed once, then remembered
        cached = json.loads(gemm.cache_path().read_text())
        assert sorted(entry["backend"] for entry in cached.values()) == ["openblas", "torch"]
    finally:
        gemm.set_backend(None)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_openblas_entry_points_take_every_layout_and_refuse_what_they_cannot(dtype, use_backend):
    """The CBLAS path itself (not numpy's fallback) gives torch's products for row-major and
    transposed operands, accumulates, and hands back anything it cannot take: a non-contiguous
    ``out`` (numpy's path, which overwrites a NaN there), wrong shapes (the usual error)."""
    from boltzlab.openblas import gemm_into

    kernels = gemm.openblas_kernels()
    if kernels is None:
        pytest.skip("numpy does not use an OpenBLAS whose GEMM can be found here")
    use_backend("openblas")
    g = torch.Generator().manual_seed(1)
    tolerance = 1e-4 if dtype == torch.float32 else 1e-12
    a, b = torch.randn(30, 20, generator=g, dtype=dtype), torch.randn(20, 10, generator=g, dtype=dtype)
    for left in (a, a.t().contiguous().t()):
        for right in (b, b.t().contiguous().t()):
            out = torch.ones(30, 10, dtype=dtype)
            assert gemm_into(kernels, out, left, right, alpha=2.0, beta=1.0)
            assert torch.allclose(out, 1 + 2 * (a @ b), atol=tolerance)
    assert not gemm_into(kernels, torch.empty(30, 10, dtype=dtype), a, b[:, :9], alpha=1.0, beta=0.0)
    assert not gemm_into(kernels, a[:, :10], a, b, alpha=1.0, beta=0.0)  # out shares a's storage
    strided = torch.full((10, 30), float("nan"), dtype=dtype).t()
    assert gemm.mm_into(strided, a, b) is strided and torch.allclose(strided, a @ b, atol=tolerance)
    with pytest.raises(ValueError):
        gemm.mm_into(torch.empty(30, 9, dtype=dtype), a, b)


def test_a_choice_for_another_thread_count_is_timed_on_that_count(tmp_path, monkeypatch):
    """The one-region sweep asks for the one-thread choice while torch runs two threads: it is
    calibrated on one thread, cached under the one-thread key, and torch is back on two."""
    monkeypatch.setenv("BOLTZLAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(gemm.ENVIRONMENT_VARIABLE, "auto")
    seen = []

    def calibrate(dtype, *, repeats=5, rows=None):
        seen.append(torch.get_num_threads())
        return (
            {"torch": 50.0, "openblas": 100.0}
            if torch.get_num_threads() == 1
            else {"torch": 100.0, "openblas": 50.0}
        )

    monkeypatch.setattr(gemm, "calibrate", calibrate)
    gemm.set_backend(None)
    torch.set_num_threads(2)
    try:
        assert gemm.backend(torch.float32, threads=1) == "openblas"
        assert torch.get_num_threads() == 2
        assert gemm.backend(torch.float32) == "torch"
        assert seen == [1, 2]
        assert any(key.endswith("|1 threads") for key in json.loads(gemm.cache_path().read_text()))
    finally:
        torch.set_num_threads(1)
        gemm.set_backend(None)
