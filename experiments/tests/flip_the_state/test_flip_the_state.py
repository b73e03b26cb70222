"""The flip-the-state study (Brügge, Fischer & Igel 2013; docs/algorithms.md §2.2).

Properties checked: the Wilcoxon table pairs runs by seed, reproduces SciPy's exact p-values
(all six differences of one sign: p = 2/2⁶) and refuses to call a difference with too few
seeds to reach 5 %; every verdict of the summary follows the numbers (the same claim gets
"confirmed" and "contradicted" from opposite data); the parts run on a tiny configuration
with consistent shapes, paired repetitions start from the same RBM, and the same seed gives
the same numbers. The command is checked in ``test_flip_the_state_command.py``.
"""

from __future__ import annotations

import pytest
import torch
from scipy import stats

import boltzlab as bl
from boltzlab_experiments.flip_the_state.config import FlipTheStateConfig
from boltzlab_experiments.flip_the_state.findings import findings
from boltzlab_experiments.flip_the_state.learning import (
    LearningResult,
    LearningRun,
    run_learning,
    wilcoxon_table,
)
from boltzlab_experiments.flip_the_state.mixing import MixingResult, run_mixing
from boltzlab_experiments.flip_the_state.modes import ModeHoppingResult, run_mode_hopping
from boltzlab_experiments.flip_the_state.slem import SlemStudyResult
from boltzlab_experiments.flip_the_state.summary import summary_markdown


def _run(
    operator: str, seed: int, maximum: float, *, algorithm: str = "pcd", early: float = -10.0
) -> LearningRun:
    return LearningRun(
        dataset="toy",
        learning_rate=0.1,
        algorithm=algorithm,
        operator=operator,
        seed=seed,
        updates=torch.tensor([0, 100, 200]),
        log_likelihood=torch.tensor([-20.0, early, maximum], dtype=torch.float64),
    )


def _learning(gibbs: list[float], flip: list[float]) -> LearningResult:
    runs = [_run("gibbs", seed, value) for seed, value in enumerate(gibbs)]
    # Flip's runs in reverse order: the table must pair by seed, not by position.
    runs += [_run("flip", seed, value) for seed, value in reversed(list(enumerate(flip)))]
    return LearningResult(runs=tuple(runs))


# ----------------------------------------------------------------------------- Wilcoxon table
def test_wilcoxon_pairs_by_seed_and_matches_scipy() -> None:
    gibbs = [-9.0, -8.5, -9.2, -8.8, -9.1, -8.7]
    flip = [-8.9, -8.1, -9.0, -8.5, -8.4, -8.65]  # differences distinct: SciPy's exact method
    (row,) = wilcoxon_table(_learning(gibbs, flip))
    assert row.n_pairs == 6 and row.operator_wins == 6
    assert row.p_value == pytest.approx(2 / 2**6)  # exact: every difference of one sign
    assert row.p_value == pytest.approx(float(stats.wilcoxon(flip, gibbs).pvalue))
    assert row.min_p_value == pytest.approx(2 / 2**6)
    assert row.verdict == "operator higher"
    differences = torch.tensor(flip) - torch.tensor(gibbs)
    assert row.median_difference == pytest.approx(float(differences.to(torch.float64).quantile(0.5)))
    assert row.median_reference == pytest.approx(-8.9)  # mean of the two middle values, -9.0 and -8.8


def test_wilcoxon_verdicts_follow_the_numbers() -> None:
    gibbs = [-9.0, -8.5, -9.2, -8.8, -9.1, -8.7]
    worse = [value - 0.1 * (index + 1) for index, value in enumerate(gibbs)]
    assert wilcoxon_table(_learning(gibbs, worse))[0].verdict == "reference higher"
    mixed = [value + (0.1 if index % 2 else -0.1) for index, value in enumerate(gibbs)]
    assert wilcoxon_table(_learning(gibbs, mixed))[0].verdict == "no significant difference"
    # Five pairs: the smallest two-sided p is 2/2⁵ = 0.0625, so nothing can be significant.
    (few,) = wilcoxon_table(
        _learning(gibbs[:5], [value + 1 + 0.1 * index for index, value in enumerate(gibbs[:5])])
    )
    assert few.min_p_value == pytest.approx(0.0625) and few.p_value == pytest.approx(0.0625)
    assert few.verdict == "too few pairs"
    (tied,) = wilcoxon_table(_learning(gibbs, gibbs))
    assert tied.p_value == 1.0 and tied.median_difference == 0.0


# ----------------------------------------------------------------------------- findings
def _slem(first: float, last: float, n_models: int = 20) -> SlemStudyResult:
    """A SLEM result whose fraction of flip-smaller models is ``first`` at c = 1 and ``last`` at c = 10."""
    reference = torch.full((2, 2, n_models), 0.5, dtype=torch.float64)
    operator = torch.full((2, 2, n_models), 0.6, dtype=torch.float64)
    operator[:, 0, : round(first * n_models)] = 0.4
    operator[:, 1, : round(last * n_models)] = 0.4
    return SlemStudyResult(
        sizes=((2, 2), (3, 3)),
        scales=(1.0, 10.0),
        n_models=n_models,
        operator="flip",
        reference="gibbs",
        slem_operator=operator,
        slem_reference=reference,
    )


def _mixing(tau_gibbs: float, tau_flip: float, n_models: int = 3) -> MixingResult:
    tau = torch.empty(n_models, 2, 2, dtype=torch.float64)
    tau[:, 0], tau[:, 1] = tau_gibbs, tau_flip
    tau += torch.linspace(0, 0.3, n_models, dtype=torch.float64)[:, None, None]  # spread between models
    return MixingResult(
        operators=("gibbs", "flip"),
        methods=("sokal", "ar"),
        layer_sizes=(784, 100),
        n_steps=5000,
        n_chains=20,
        tau=tau,
        tau_stderr=0.01 * tau,
        reliable=torch.ones(n_models, 2, 2, dtype=torch.bool),
        autocorrelation=torch.ones(n_models, 2, 3, dtype=torch.float64),
        flip_rate=torch.full((n_models, 2), 0.1, dtype=torch.float64),
        weight_scale=torch.ones(n_models, dtype=torch.float64),
    )


def _modes(first_gibbs: int, first_flip: int, changes_gibbs: int, changes_flip: int) -> ModeHoppingResult:
    first = torch.empty(1, 2, 2, 50, dtype=torch.int64)
    first[..., 0, :] = first_gibbs + torch.arange(50) % 3
    first[..., 1, :] = first_flip + torch.arange(50) % 3
    changes = torch.tensor([[[changes_gibbs, changes_flip]] * 2])
    return ModeHoppingResult(
        p_mut=(0.1,),
        operators=("gibbs", "flip"),
        start_steps=1000,
        long_steps=10_000,
        first_change=first,
        class_changes=changes,
    )


def test_findings_confirm_or_contradict_from_the_numbers() -> None:
    six = [-9.0, -8.5, -9.2, -8.8, -9.1, -8.7]
    ahead = [value + 0.2 + 0.01 * index for index, value in enumerate(six)]
    behind = [value - 0.2 - 0.01 * index for index, value in enumerate(six)]
    better = findings(
        slem=_slem(0.0, 0.8),
        learning=_learning(six, ahead),
        mixing=_mixing(10.0, 8.0),
        modes=_modes(first_gibbs=200, first_flip=20, changes_gibbs=10, changes_flip=100),
    )
    assert [finding.verdict for finding in better] == ["confirmed"] * 4
    # The numbers behind each verdict, from the inputs: SLEM fractions rise from 0 to 0.8 for both
    # sizes (so the sizes do not differ); flip wins all six seeds, p = 2/2⁶; flip's τ is 20 % lower
    # for every model and estimator; flip changes class 10× as often, 10× sooner.
    slem_input, learning_input = _slem(0.0, 0.8), _learning(six, ahead)
    assert slem_input.fraction[:, 0].tolist() == [0.0, 0.0] and slem_input.fraction[:, -1].tolist() == [
        0.8,
        0.8,
    ]
    (row,) = wilcoxon_table(learning_input)
    assert (row.operator_wins, row.verdict) == (6, "operator higher") and row.p_value < row.alpha
    mixing_input = _mixing(10.0, 8.0)
    for method in mixing_input.methods:
        gain, _ = mixing_input.gain(method)
        assert bool((gain > 0.18).all() & (gain < 0.21).all()), gain
    assert bool((mixing_input.tau[:, 1] < mixing_input.tau[:, 0]).all())
    modes_input = _modes(first_gibbs=200, first_flip=20, changes_gibbs=10, changes_flip=100)
    assert modes_input.class_changes[0].sum(0).tolist() == [20, 200]  # summed over the two models
    assert modes_input.median_first_change()[0].tolist() == [201.0, 21.0]
    # ...and the texts report those numbers.
    slem, _, mixing, modes = better
    assert "0% at c = 1, 80% at c = 10" in slem.text and "17.28%" in mixing.text
    assert "from all-ones flip 200 vs Gibbs 20" in modes.text
    worse = findings(
        slem=_slem(0.5, 0.2),
        learning=_learning(six, behind),
        mixing=_mixing(8.0, 10.0),
        modes=_modes(first_gibbs=20, first_flip=200, changes_gibbs=100, changes_flip=10),
    )
    assert [finding.verdict for finding in worse] == ["contradicted"] * 4
    (row,) = wilcoxon_table(_learning(six, behind))
    assert (row.operator_wins, row.verdict) == (0, "reference higher")
    assert "barely learned" not in worse[1].text
    # Flip's runs never get above their start (−20 at update 0); Gibbs' gain 11 nats or more.
    stuck = [_run("flip", seed, -20.0, early=-30.0) for seed in range(6)]
    gibbs = [_run("gibbs", seed, value) for seed, value in enumerate(six)]
    (stalled,) = findings(learning=LearningResult(runs=(*gibbs, *stuck)))
    assert "barely learned: flip with pcd on toy (lr 0.1) gained 0 nats over the initial RBM" in stalled.text


def test_findings_say_when_the_evidence_is_too_weak() -> None:
    three = [-9.0, -8.5, -9.2]
    weak = findings(
        slem=_slem(0.0, 0.1, n_models=10),  # one model in ten: within two standard errors of 0
        learning=_learning(three, [value + 0.2 for value in three]),
        mixing=_mixing(10.0, 10.0),
        modes=_modes(first_gibbs=20, first_flip=20, changes_gibbs=50, changes_flip=52),
    )
    assert [finding.verdict for finding in weak] == ["inconclusive"] * 4
    # Three seeds: the smallest two-sided p the exact test can give is 2/2³ = 0.25 > 0.05.
    (row,) = wilcoxon_table(_learning(three, [value + 0.2 for value in three]))
    assert row.min_p_value == pytest.approx(0.25) and row.verdict == "too few pairs"
    assert "smallest possible p = 0.25" in weak[1].text
    # The summary carries the verdict table, the texts and the caveat of a scaled run.
    text = summary_markdown(
        FlipTheStateConfig.scaled(),
        weak,
        parts=("slem", "learning", "mixing"),
        seed=0,
        timings={"slem": 1.0},
        skipped={"mnist": "not found"},
    )
    assert "| learning |" in text and "inconclusive" in text and "## Caveats" in text
    assert "- mnist: not found" in text and "- slem: 1.0 s" in text


# ----------------------------------------------------------------------------- the parts, tiny
@pytest.fixture(scope="module")
def tiny() -> tuple[FlipTheStateConfig, dict[str, bl.data.Dataset]]:
    config = FlipTheStateConfig.tiny()
    loaded = {
        spec.name: bl.data.load(spec.source, generator=0, **dict(spec.options))
        for spec in config.datasets(("learning", "mixing"))
    }
    return config, loaded


@pytest.mark.slow
def test_learning_part_pairs_repetitions_and_is_reproducible(tiny) -> None:
    config, loaded = tiny
    result = run_learning(config, loaded, generator=3)
    expected = len(config.learning) * len(config.learning_rates) * config.n_seeds * 3 * 2
    assert len(result.runs) == expected
    for run in result.runs:
        assert run.updates.tolist() == list(range(0, int(run.updates[-1]) + 1, config.evaluate_every))
    # Update 0 is before any training: the same RBM for both operators of a repetition.
    for dataset, rate, algorithm in result.settings():
        for seed in range(config.n_seeds):
            pair = result.select(dataset=dataset, learning_rate=rate, algorithm=algorithm, seed=seed)
            assert len(pair) == 2 and float(pair[0].log_likelihood[0]) == float(pair[1].log_likelihood[0])
    again = run_learning(config, {name: loaded[name] for name in loaded}, generator=3)
    assert [run.max_log_likelihood for run in again.runs] == [run.max_log_likelihood for run in result.runs]
    assert len(wilcoxon_table(result)) == len(result.settings())


def test_mixing_and_mode_parts_have_consistent_shapes(tiny) -> None:
    config, loaded = tiny
    mixing = run_mixing(config, loaded[config.mixing_data.name], generator=1)
    assert mixing.tau.shape == (config.mixing_models, 2, 2)
    assert bool((mixing.autocorrelation[..., 0] == 1.0).all())
    gain, stderr = mixing.gain("ar")
    assert torch.allclose(gain, 1 - mixing.tau[:, 1, 1] / mixing.tau[:, 0, 1]) and bool((stderr >= 0).all())
    data = {
        p_mut: loaded[spec.name] for p_mut, spec in zip(config.mode_p_mut, config.mode_data(), strict=True)
    }
    modes = run_mode_hopping(config, data, generator=1)
    assert modes.first_change.shape == (len(config.mode_p_mut), config.mode_models, 2, config.mode_starts)
    assert int(modes.first_change.min()) >= -1 and int(modes.first_change.max()) <= config.mode_start_steps
    assert bool((modes.class_changes >= 0).all()) and bool(
        (modes.class_changes <= config.mode_long_steps).all()
    )
    assert modes.changed_fraction().shape == (len(config.mode_p_mut), 2)
