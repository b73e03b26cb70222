"""The CAST comparison (Salakhutdinov 2010, Table 1 / Fig. 5, scaled): pipeline properties.

Properties checked:
* every algorithm starts from the same DBM and is tracked with the same AIS seed, so the bound
  at update 0 is identical across algorithms, and the curves have one point per ``eval_every``;
* the recorded fast-chain trajectory has one β per update, each a rung of the CAST ladder;
* the final test bound is :func:`boltzlab.variational_lower_bound` of the trained model with
  the final ``log Z``; the samples have the asked shapes; a run is repeatable from its seed;
* the curve statistics and the verdicts (higher beyond 2 standard errors, steadier on both
  statistics) follow their definitions on hand-made inputs;
* bad configurations are refused naming the setting.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab_experiments.cast_comparison.config import CASTComparisonConfig
from boltzlab_experiments.cast_comparison.report import cast_summary_markdown
from boltzlab_experiments.cast_comparison.run import curve_statistics, run_cast_comparison
from boltzlab_experiments.cast_comparison.verdicts import compare_with_baselines, verdicts

CONFIG = replace(
    CASTComparisonConfig.tiny(),
    layer_sizes=(784, 7, 5),
    n_updates=20,
    eval_every=10,
    pretrain_updates=10,
    sample_sweeps=20,
    sample_keep_every=10,
)


def _data(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    # Sparse images with a few "on" pixels, unlike the uniform base.
    return (torch.rand(n, 784, generator=g) < 0.1).float()


@functools.cache
def _result():
    return run_cast_comparison(CONFIG, _data(120, 0), _data(30, 1))


def test_every_algorithm_starts_from_the_same_model_and_is_tracked_on_the_same_grid():
    result = _result()
    assert [run.algorithm for run in result.runs] == ["sap", "fpcd", "cast"]
    for run in result.runs:
        assert run.updates.tolist() == [0, 10, 20]
        assert run.train_bounds.shape == run.log_z.shape == run.log_z_stderr.shape == (3,)
        assert bool(torch.isfinite(run.train_bounds).all())
        assert run.model.layer_sizes == (784, 7, 5)
    first = {float(run.train_bounds[0]) for run in result.runs}
    assert len(first) == 1  # same start, same AIS seed at update 0
    # ...but the learning runs differ.
    assert len({float(run.train_bounds[-1]) for run in result.runs}) == 3


def test_fast_chain_trajectory_is_one_ladder_rung_per_update():
    result = _result()
    betas = result.fast_chain_betas
    assert betas.shape == (CONFIG.n_updates,)
    ladder = bl.tempering.ladders.uniform(CONFIG.cast_levels, low=CONFIG.cast_low).betas
    distance = (betas[:, None] - ladder[None, :]).abs().min(1).values
    assert float(distance.max()) < 1e-6  # model dtype float32


def test_final_numbers_are_the_bound_of_the_trained_model_and_samples_have_their_shapes():
    result = _result()
    test_set = _data(30, 1)
    for run in result.runs:
        bound = bl.variational_lower_bound(run.model, test_set, run.final_log_z)
        assert run.test_bound == pytest.approx(bound, abs=1e-9)
        assert run.final_log_z_stderr > 0
        assert math.isfinite(run.test_log_probability) and run.test_log_probability_stderr > 0
    n_kept = CONFIG.sample_sweeps // CONFIG.sample_keep_every
    assert result.gibbs_samples.shape == (n_kept, CONFIG.sample_chains, 784)
    assert result.tempered_samples.shape == (n_kept, CONFIG.sample_chains, 784)
    assert result.sampled_algorithm == "cast"
    assert 0.0 <= result.tempered_acceptance <= 1.0


@pytest.mark.slow
def test_a_run_is_repeatable_from_its_seed():
    config = replace(CONFIG, algorithms=("sap",), likelihood_examples=0)
    a = run_cast_comparison(config, _data(120, 0), _data(30, 1))
    b = run_cast_comparison(config, _data(120, 0), _data(30, 1))
    assert torch.equal(a.runs[0].train_bounds, b.runs[0].train_bounds)
    assert a.runs[0].test_bound == b.runs[0].test_bound
    assert math.isnan(a.runs[0].test_log_probability)
    assert a.fast_chain_betas.numel() == 0


def test_curve_statistics_follow_their_definitions():
    bounds = torch.tensor([-100.0, -90.0, -95.0, -85.0, -86.0, -84.0], dtype=torch.float64)
    max_drop, late = curve_statistics(bounds)
    assert max_drop == pytest.approx(5.0)
    # changes: +10, -5, +10, -1, +2; second half (from index 2): 10, 1, 2.
    assert late == pytest.approx(13.0 / 3.0)
    assert curve_statistics(torch.tensor([-3.0, -2.0, -1.0], dtype=torch.float64))[0] == 0.0


def test_verdicts_say_higher_only_beyond_two_standard_errors():
    result = _result()
    runs = {run.algorithm: run for run in result.runs}
    base = replace(
        runs["sap"], test_bound=-100.0, final_log_z_stderr=1.0, max_drop=3.0, late_mean_abs_change=2.0
    )
    higher = replace(
        runs["cast"], test_bound=-97.0, final_log_z_stderr=1.0, max_drop=1.0, late_mean_abs_change=1.0
    )
    (comparison,) = compare_with_baselines(replace(result, runs=(base, higher)))
    assert comparison.baseline == "sap"
    assert comparison.gap == pytest.approx(3.0) and comparison.stderr == pytest.approx(math.sqrt(2.0))
    assert comparison.outcome == "higher" and comparison.stability == "steadier"  # 3 > 2·√2
    close = replace(higher, test_bound=-98.0)  # 2 < 2·√2 standard errors
    assert compare_with_baselines(replace(result, runs=(base, close)))[0].outcome == "unresolved"
    lower = replace(higher, test_bound=-103.0, max_drop=4.0, late_mean_abs_change=3.0)
    (worse,) = compare_with_baselines(replace(result, runs=(base, lower)))
    assert (worse.outcome, worse.stability) == ("lower", "less steady")
    mixed = replace(higher, max_drop=4.0)
    assert compare_with_baselines(replace(result, runs=(base, mixed)))[0].stability == "mixed"
    assert compare_with_baselines(replace(result, runs=(base,))) == ()
    # One sentence per baseline, carrying the numbers; the summary puts the paper's beside ours.
    assert len(verdicts(replace(result, runs=(base, higher)))) == 1
    summary = cast_summary_markdown(replace(result, runs=(base, higher)), dataset="synthetic", label="test")
    assert "| SAP |" in summary and "| CAST |" in summary and "-87.23" in summary


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"algorithms": ("sap", "pt")}, "algorithms"),
        ({"layer_sizes": (784, 10)}, "layer_sizes"),
        ({"cast_low": 1.0}, "cast_low"),
        ({"n_updates": 0}, "n_updates"),
    ],
)
def test_bad_configurations_are_refused(change, match):
    with pytest.raises(ValidationError, match=match):
        replace(CONFIG, **change)


def test_data_of_the_wrong_width_is_refused():
    with pytest.raises(ValidationError, match="train_data"):
        run_cast_comparison(CONFIG, torch.zeros(120, 64), _data(30, 1))
