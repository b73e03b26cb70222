"""The estimator-accuracy benchmarks (:mod:`boltzlab_experiments.accuracy`).

Properties checked: the
statistics of :class:`EstimateTable` equal their definitions on hand-made errors; each
verdict (RTS vs AIS, estimators vs K, VAROPT's ESS) keys off the numbers and their standard
errors: decisive differences give "confirmed" or "contradicted", differences within 2
standard errors "inconclusive"; a trained benchmark model carries its exact log Z and is
recognised from its saved metadata only when made with the same settings; and the three
benchmarks run on tiny configurations with the shapes, costs and schedules they promise, and
RTS within 4 of its own standard errors of the exact log Z. Against a reference log Z the
coverage counts the reference's standard error in quadrature. The RTS-paper benchmarks run any
subset of their repeats (a process's share under torchrun), and merging the shares gives the
single run's table exactly; their adaptive ladders (the ``paper`` preset's) run, the pilot
counted in the cost.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from boltzlab.errors import ValidationError
from boltzlab.estimators.exact import exact_log_z
from boltzlab.io import load_model
from boltzlab_experiments.accuracy.estimators_vs_k import (
    EstimatorsVsKConfig,
    EstimatorsVsKResult,
    estimators_vs_k_finding,
    merge_estimators_vs_k,
    run_estimators_vs_k,
)
from boltzlab_experiments.accuracy.models import TrainingConfig, benchmark_model_from, train_benchmark_model
from boltzlab_experiments.accuracy.rts_vs_ais import (
    RTSvsAISConfig,
    RTSvsAISResult,
    merge_rts_vs_ais,
    rts_vs_ais_finding,
    run_rts_vs_ais,
)
from boltzlab_experiments.accuracy.table import EstimateTable
from boltzlab_experiments.accuracy.varopt import (
    VaroptConfig,
    VaroptResult,
    run_varopt,
    schedule_label,
    varopt_finding,
)

N_VARIABLES = 13


@pytest.fixture(scope="module")
def data() -> torch.Tensor:
    """130 binary examples of 13 variables with unequal marginals."""
    generator = torch.Generator().manual_seed(5)
    return (torch.rand(130, N_VARIABLES, generator=generator) < torch.linspace(0.1, 0.7, N_VARIABLES)).float()


@pytest.fixture(scope="module")
def benchmark(data: torch.Tensor):
    return train_benchmark_model("cd1", TrainingConfig.tiny(), data[:100], seed=0, dataset="toy")


# --------------------------------------------------------------------------- statistics
def _table(errors: torch.Tensor, settings: tuple[int, ...], methods: tuple[str, ...]) -> EstimateTable:
    """A table of given errors against an exact log Z of 10, each estimate with s.e. 0.1."""
    return EstimateTable(
        methods=methods,
        settings=settings,
        exact_log_z=10.0,
        log_z=10.0 + errors.to(torch.float64),
        stderr=torch.full(errors.shape, 0.1, dtype=torch.float64),
        cost_sweeps=torch.full(errors.shape, 100.0, dtype=torch.float64),
        seconds=torch.zeros(errors.shape[:2], dtype=torch.float64),
    )


def test_rmse_comparisons_count_the_reference_where_biases_differ() -> None:
    # Method 0 sits +0.5 above the value, method 1 on it (RMSE 0.5 vs 0.1, each ± 0.0 between
    # repeats but for the jitter): decisive against an exact log Z; against a reference with s.e.
    # 0.3, an offset of the reference could close the gap, so no verdict.
    jitter = torch.tensor([0.01, -0.01, 0.01, -0.01], dtype=torch.float64)
    errors = torch.stack([0.5 + jitter, 0.1 * torch.tensor([1.0, -1.0, 1.0, -1.0]) + jitter])[:, None, :]
    exact = _table(errors, (10,), ("a", "b"))
    assert exact.compare_rmse((1, 0), (0, 0)) == "smaller"
    referenced = replace(exact, reference_stderr=0.3)
    assert referenced.compare_rmse((1, 0), (0, 0)) == "tie"
    # Two methods with the same bias/RMSE shift alike: the reference adds nothing.
    same = replace(_table(torch.stack([errors[0], errors[0] * 2]), (10,), ("a", "b")), reference_stderr=0.3)
    assert same.compare_rmse((0, 0), (1, 0)) == "smaller"


def test_estimate_table_statistics_match_their_definitions() -> None:
    errors = torch.tensor([[[0.1, -0.3, 0.2, 0.05]]], dtype=torch.float64)
    table = _table(errors, (100,), ("ais",))
    assert torch.allclose(table.bias(), errors.mean(2))
    assert torch.allclose(table.rmse(), errors.square().mean(2).sqrt())
    assert torch.allclose(table.bias_stderr(), errors.std(2) / 2.0)
    assert torch.allclose(table.coverage(), torch.tensor([[0.75]], dtype=torch.float64))
    assert math.isnan(float(_table(errors[:, :, :1], (100,), ("ais",)).rmse_stderr()))


def test_coverage_against_a_reference_counts_both_errors() -> None:
    # Errors of 0.25 with s.e. 0.1: outside 2 s.e. of an exact value, inside 2·√(0.1² + 0.1²) = 0.28
    # of a reference whose own s.e. is 0.1.
    errors = torch.tensor([[[0.25, -0.25, 0.05]]], dtype=torch.float64)
    exact = _table(errors, (100,), ("ais",))
    reference = replace(exact, reference_stderr=0.1)
    assert exact.is_exact and not reference.is_exact
    assert torch.allclose(exact.coverage(), torch.tensor([[1 / 3]], dtype=torch.float64))
    assert torch.allclose(reference.coverage(), torch.tensor([[1.0]], dtype=torch.float64))
    # The bias and RMSE are still taken from the reference's value.
    assert torch.equal(reference.rmse(), exact.rmse()) and torch.equal(reference.bias(), exact.bias())
    assert reference.reference_label() == "reference log Z = 10.000 ± 0.100"
    assert exact.reference_label() == "exact log Z = 10.000"


def _rts_vs_ais(rts_scale: float, ais_scale: float) -> RTSvsAISResult:
    """RTS errors of size ``rts_scale`` at 40 sweeps, AIS errors of size ``ais_scale`` at 100."""
    generator = torch.Generator().manual_seed(0)
    noise = torch.randn(3, 2, 30, generator=generator, dtype=torch.float64)
    scales = torch.tensor([rts_scale, ais_scale, 1.0], dtype=torch.float64)[:, None, None]
    table = _table(noise * scales, (40, 100), ("rts", "ais", "raise"))
    return RTSvsAISResult(RTSvsAISConfig.tiny(), "cd1", "CD-1", table)


@pytest.mark.parametrize(
    ("rts_scale", "ais_scale", "verdict"),
    [(0.05, 1.0, "confirmed"), (1.0, 0.05, "contradicted"), (0.5, 0.5, "inconclusive")],
)
def test_rts_vs_ais_verdict_keys_off_the_rmse(rts_scale: float, ais_scale: float, verdict: str) -> None:
    # Same noise for both at equal scales: the RMSEs are then equal, a tie by construction.
    finding = rts_vs_ais_finding(_rts_vs_ais(rts_scale, ais_scale))
    assert finding.verdict == verdict
    assert (
        finding.answer == {"confirmed": "Yes", "contradicted": "No", "inconclusive": "Not decided"}[verdict]
    )


def test_estimators_vs_k_verdict_keys_off_the_rmse() -> None:
    generator = torch.Generator().manual_seed(1)
    methods = ("rts", "ts", "ti", "ti-rb", "mbar")
    scales = torch.tensor([0.1, 0.3, 0.3, 0.1, 0.1], dtype=torch.float64)[:, None, None]
    noise = torch.randn(5, 2, 40, generator=generator, dtype=torch.float64)
    table = _table(noise * scales, (5, 10), methods)
    result = EstimatorsVsKResult(
        EstimatorsVsKConfig.tiny(), "cd1", "CD-1", table, torch.ones(2), torch.ones(2)
    )
    assert estimators_vs_k_finding(result).verdict == "confirmed"
    scales[4] = 0.01  # MBAR decisively better than RTS
    table = _table(noise * scales, (5, 10), methods)
    finding = estimators_vs_k_finding(replace(result, table=table))
    assert finding.verdict == "contradicted" and "MBAR at K = 5" in finding.text
    # An RTS column that is not finite beats nothing and is beaten by nothing: no verdict.
    errors = noise * torch.tensor([0.1, 0.3, 0.3, 0.1, 0.1], dtype=torch.float64)[:, None, None]
    errors[0, 1, 0] = math.nan
    assert (
        estimators_vs_k_finding(replace(result, table=_table(errors, (5, 10), methods))).verdict
        == "inconclusive"
    )


def _varopt_result(ess: torch.Tensor) -> VaroptResult:
    config = VaroptConfig.tiny()
    n_schedules = len(config.schedules)
    shape = (1, n_schedules, len(config.temperatures), ess.shape[-1])
    full = ess.expand(shape).clone()
    return VaroptResult(
        config=config,
        model_names=("cd1",),
        model_labels=("CD-1",),
        exact_log_z=torch.tensor([10.0], dtype=torch.float64),
        schedules=config.schedules,
        log_z=torch.full(shape, 10.0, dtype=torch.float64),
        stderr=torch.full(shape, 0.1, dtype=torch.float64),
        ess=full,
        seconds=torch.zeros(shape[:3], dtype=torch.float64),
        pilot_sweeps=torch.zeros(1, 2, dtype=torch.float64),
        betas=(tuple(torch.linspace(0, 1, 41, dtype=torch.float64) for _ in range(n_schedules)),),
    )


def test_varopt_verdict_keys_off_the_ess() -> None:
    schedules = VaroptConfig.tiny().schedules
    n = len(schedules)
    spread = torch.tensor([-0.2, 0.2, -0.1, 0.1], dtype=torch.float64)
    base = torch.full((1, n, 1, 1), 5.0, dtype=torch.float64) + spread
    confirmed = base.clone()
    confirmed[0, schedules.index("varopt_0.09")] += 2.0
    finding = varopt_finding(_varopt_result(confirmed))
    assert finding.verdict == "confirmed" and "VAROPT_.09" in finding.text
    contradicted = base.clone()
    contradicted[0, schedules.index("linear")] += 2.0
    assert varopt_finding(_varopt_result(contradicted)).verdict == "contradicted"
    tied = base.clone()
    tied[0, schedules.index("linear")] += 0.05
    tied[0, schedules.index("varopt")] += 0.06
    assert varopt_finding(_varopt_result(tied)).verdict == "inconclusive"


def test_schedule_labels_follow_kiwaki() -> None:
    assert schedule_label("varopt_0.009") == "VAROPT_.009"
    assert schedule_label("gms13") == "GMS13"


# ------------------------------------------------------------------------------- models
def test_benchmark_model_knows_its_exact_log_z_and_is_recognised(benchmark, tmp_path: Path) -> None:
    assert benchmark.model.n_visible == N_VARIABLES and benchmark.model.n_hidden == 4
    assert abs(benchmark.exact_log_z - exact_log_z(benchmark.model)) < 1e-9
    loaded = load_model(benchmark.model.save(tmp_path / "cd1.safetensors"))
    again = benchmark_model_from(loaded, "cd1", TrainingConfig.tiny(), dataset="toy", seed=0)
    assert again is not None and again.exact_log_z == benchmark.exact_log_z
    other = replace(TrainingConfig.tiny(), n_updates=31)
    assert benchmark_model_from(loaded, "cd1", other, dataset="toy", seed=0) is None
    assert benchmark_model_from(loaded, "cd1", TrainingConfig.tiny(), dataset="other", seed=0) is None
    with pytest.raises(ValidationError, match="unknown benchmark model"):
        train_benchmark_model("cd7", TrainingConfig.tiny(), torch.zeros(3, 4))


# --------------------------------------------------------------------------- benchmarks
@pytest.mark.slow
def test_rts_vs_ais_tiny_run(benchmark, data: torch.Tensor) -> None:
    config = RTSvsAISConfig.tiny()
    result = run_rts_vs_ais(config, benchmark, data[100:], seed=3)
    table = result.table
    assert table.log_z.shape == (3, len(config.budgets), config.n_repeats)
    assert torch.isfinite(table.log_z).all() and (table.stderr > 0).all()
    ais_row, raise_row, rts_row = table.index("ais"), table.index("raise"), table.index("rts")
    for b, budget in enumerate(config.budgets):
        assert (table.cost_sweeps[ais_row, b] == config.n_chains * (budget - 1)).all()
        assert (table.cost_sweeps[raise_row, b] == config.raise_examples * config.raise_chains * budget).all()
        assert (table.cost_sweeps[rts_row, b] <= config.n_chains * budget).all()
    z = (table.log_z[rts_row] - table.exact_log_z) / table.stderr[rts_row]
    assert (z.abs() < 4.0).all(), z
    with pytest.raises(ValidationError, match="held-out"):
        run_rts_vs_ais(config, benchmark, data[:1], seed=3)


def test_estimators_vs_k_tiny_run(benchmark) -> None:
    config = EstimatorsVsKConfig.tiny()
    result = run_estimators_vs_k(config, benchmark, seed=4)
    table = result.table
    assert table.methods == ("rts", "ts", "ti", "ti-rb", "mbar")
    assert table.log_z.shape == (5, len(config.levels), config.n_repeats)
    assert torch.isfinite(table.log_z).all()
    # All five read the same samples, so they report the same cost.
    assert (table.cost_sweeps == table.cost_sweeps[:1]).all()
    assert ((result.stopped >= 0) & (result.stopped <= 1)).all()


@pytest.mark.slow
def test_shares_of_the_repeats_merge_into_the_single_run(benchmark, data: torch.Tensor) -> None:
    # What torchrun's processes do: each runs some repeats; the merged table is the single run's.
    config = replace(RTSvsAISConfig.tiny(), n_repeats=4)
    whole = run_rts_vs_ais(config, benchmark, data[100:], seed=3)
    shares = [
        run_rts_vs_ais(config, benchmark, data[100:], seed=3, repeats=held) for held in ((0, 2), (1, 3))
    ]
    assert shares[0].repeats == (0, 2) and torch.isnan(shares[0].table.log_z[:, :, [1, 3]]).all()
    merged = merge_rts_vs_ais(shares)
    assert merged.repeats is None
    for name in ("log_z", "stderr", "cost_sweeps"):
        assert torch.equal(getattr(merged.table, name), getattr(whole.table, name)), name

    k_config = replace(EstimatorsVsKConfig.tiny(), n_repeats=4)
    k_whole = run_estimators_vs_k(k_config, benchmark, seed=4)
    k_shares = [run_estimators_vs_k(k_config, benchmark, seed=4, repeats=held) for held in ((0, 2), (1, 3))]
    k_merged = merge_estimators_vs_k(k_shares)
    for name in ("log_z", "stderr", "cost_sweeps"):
        assert torch.equal(getattr(k_merged.table, name), getattr(k_whole.table, name)), name
    assert torch.allclose(k_merged.stopped, k_whole.stopped)

    with pytest.raises(ValidationError, match="each of the 4 repeats once"):
        merge_rts_vs_ais(shares[:1])
    with pytest.raises(ValidationError, match="distinct indices below 4"):
        run_rts_vs_ais(config, benchmark, data[100:], seed=3, repeats=(0, 4))


def test_paper_preset_takes_the_adaptive_ladders() -> None:
    rts = RTSvsAISConfig.paper()
    assert rts.budgets == (300, 1000, 3000, 10_000) and rts.n_repeats == 20 and rts.rts_levels == 100
    assert (rts.n_chains, rts.raise_examples, rts.raise_chains, rts.rts_ladder) == (100, 10, 10, "adaptive")
    k = EstimatorsVsKConfig.paper()
    assert k.levels == (10, 30, 100, 300) and (k.n_chains, k.n_sweeps, k.n_repeats) == (100, 3000, 6)
    assert k.ladder == "adaptive"
    assert RTSvsAISConfig.scaled().rts_ladder == "linear" and EstimatorsVsKConfig.scaled().ladder == "linear"
    with pytest.raises(ValidationError, match="rts_ladder must be one of"):
        replace(rts, rts_ladder="geometric")


@pytest.mark.slow
def test_adaptive_ladders_run_and_count_their_pilot(benchmark, data: torch.Tensor) -> None:
    config = replace(RTSvsAISConfig.tiny(), rts_ladder="adaptive")
    table = run_rts_vs_ais(config, benchmark, data[100:], seed=3).table
    rts = table.index("rts")
    z = (table.log_z[rts] - table.exact_log_z) / table.stderr[rts]
    assert (z.abs() < 4.0).all(), z
    k_config = replace(EstimatorsVsKConfig.tiny(), ladder="adaptive", pilot_temperatures=20)
    k_table = run_estimators_vs_k(k_config, benchmark, seed=4).table
    assert torch.isfinite(k_table.log_z).all()
    # The pilot's n_chains × (pilot_temperatures − 1) sweeps come on top of the long run.
    assert (
        k_table.cost_sweeps >= k_config.n_chains * (k_config.n_sweeps + k_config.pilot_temperatures - 1)
    ).all()


def test_varopt_tiny_run(benchmark) -> None:
    config = VaroptConfig.tiny()
    result = run_varopt(config, [benchmark], seed=5)
    assert result.ess.shape == (1, len(config.schedules), len(config.temperatures), config.n_repeats)
    assert ((result.ess >= 1.0 - 1e-9) & (result.ess <= config.n_chains + 1e-9)).all()
    assert torch.isfinite(result.log_z).all()
    for name, betas in zip(result.schedules, result.betas[0], strict=True):
        assert betas.shape == (min(config.temperatures) + 1,)
        assert float(betas[0]) == 0.0 and abs(float(betas[-1]) - 1.0) < 1e-12
        assert (betas.diff() >= 0).all()
        if name.startswith("varopt_"):
            assert float(betas.diff().max()) <= float(name.removeprefix("varopt_")) + 1e-12
    with pytest.raises(ValidationError, match="K\\*delta"):
        run_varopt(replace(config, deltas=(0.01,)), [benchmark], seed=5)
