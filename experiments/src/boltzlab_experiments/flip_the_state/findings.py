"""Verdicts of the flip-the-state study: does flip beat Gibbs where Brügge et al. say it does?

Brügge, Fischer & Igel (2013); docs/algorithms.md §2.2. :func:`findings` turns the results of the
four parts into :class:`~boltzlab_experiments.findings.Finding` objects whose verdicts are
keyed off the numbers and their standard errors.
"""

from __future__ import annotations

import math

import torch
from scipy import stats

from boltzlab_experiments.findings import Finding
from boltzlab_experiments.flip_the_state.learning import LearningResult, median, wilcoxon_table
from boltzlab_experiments.flip_the_state.mixing import MixingResult
from boltzlab_experiments.flip_the_state.modes import ModeHoppingResult
from boltzlab_experiments.flip_the_state.slem import SlemStudyResult

__all__ = [
    "PAPER_TAU_GAIN",
    "findings",
    "learning_finding",
    "mean_gain",
    "mixing_finding",
    "modes_finding",
    "paper_gain_finding",
    "slem_finding",
]

PAPER_TAU_GAIN = 0.1728  # "17.28 % fewer steps", MNIST, 500 hidden units


def slem_finding(result: SlemStudyResult) -> Finding:
    """Does the fraction of models where flip has the smaller SLEM rise with c (and with size)?"""
    fraction, stderr = result.fraction, result.fraction_stderr
    low, high = result.scales[0], result.scales[-1]
    rising, falling, details = [], [], []
    for index, (n_visible, n_hidden) in enumerate(result.sizes):
        first, last = float(fraction[index, 0]), float(fraction[index, -1])
        spread = math.hypot(float(stderr[index, 0]), float(stderr[index, -1]))
        # Rising: a z-score above 2 (a change from 0 % to 100 % has zero binomial SE and counts).
        rising.append(last > first and last - first > 2.0 * spread)
        falling.append(last <= first)
        details.append(f"{n_visible}×{n_hidden}: {first:.0%} at c = {low:g}, {last:.0%} at c = {high:g}")
    listed = "; ".join(details)
    if all(rising):
        verdict = "confirmed"
        text = f"Flip-the-state's SLEM beats Gibbs' more often as the weights grow, as the paper says ({listed})."
    elif all(falling):
        verdict = "contradicted"
        text = f"The fraction of models where flip has the smaller SLEM does not rise with c ({listed})."
    else:
        verdict = "inconclusive"
        text = f"The fraction does not rise clearly (by 2 standard errors) for every size ({listed})."
    if len(result.sizes) > 1:
        # The paper: the effect grows with model size. Compare the largest and smallest size at
        # the largest c by the z-score of the difference of two binomial fractions.
        small, large = float(fraction[0, -1]), float(fraction[-1, -1])
        spread = math.hypot(float(stderr[0, -1]), float(stderr[-1, -1]))
        names = [f"{v}×{h}" for v, h in (result.sizes[0], result.sizes[-1])]
        compared = f"{large:.0%} for {names[1]} against {small:.0%} for {names[0]} at c = {high:g}"
        if large - small > 2.0 * spread:
            text += f" It is higher for the larger model, as the paper says ({compared})."
        elif small - large > 2.0 * spread:
            text += f" Contrary to the paper, it is lower for the larger model ({compared})."
        else:
            text += f" The sizes do not differ beyond two standard errors ({compared})."
    claim = "the fraction of RBMs with SLEM(flip) < SLEM(Gibbs) is near 0 at c = 1 and rises with c"
    return Finding("slem", claim, verdict, text, tuple(details))


def _early_lead(result: LearningResult) -> str:
    """Which operator is ahead at the first evaluation after the start, counted over settings."""
    gibbs_ahead, n = 0, 0
    for dataset, rate, algorithm in result.settings():
        setting = result.select(dataset=dataset, learning_rate=rate, algorithm=algorithm)
        early = {}
        for operator in ("flip", "gibbs"):
            values = [
                float(run.log_likelihood[1])
                for run in setting
                if run.operator == operator and run.updates.numel() > 1
            ]
            if values:
                early[operator] = sum(values) / len(values)
        if len(early) == 2:
            n += 1
            gibbs_ahead += early["gibbs"] > early["flip"]
    return f"at the first evaluation Gibbs' mean log-likelihood was ahead in {gibbs_ahead} of {n} settings"


def _stalled(result: LearningResult) -> str:
    """Settings where one operator's runs barely learned: a median gain over the initial RBM
    below 1 % of the other operator's (e.g. CD-1 with flip from near-zero weights)."""
    found = []
    for dataset, rate, algorithm in result.settings():
        setting = result.select(dataset=dataset, learning_rate=rate, algorithm=algorithm)
        gains = {}
        for operator in dict.fromkeys(run.operator for run in setting):
            runs = [run for run in setting if run.operator == operator]
            gains[operator] = median(
                torch.tensor([run.max_log_likelihood - float(run.log_likelihood[0]) for run in runs])
            )
        best = max(gains.values())
        for operator, gain in gains.items():
            if best > 0 and gain < 0.01 * best:
                others = ", ".join(f"{name} {value:.3g}" for name, value in gains.items() if name != operator)
                found.append(
                    f"{operator} with {algorithm} on {dataset} (lr {rate:g}) gained {gain:.3g} nats over the "
                    f"initial RBM (median over seeds; {others})"
                )
    return "; ".join(found)


def learning_finding(result: LearningResult) -> Finding:
    """Does flip reach a higher maximum log-likelihood than Gibbs in most settings (Wilcoxon)?"""
    claim = "in most settings flip reaches a higher median maximum log-likelihood (Wilcoxon, p < 0.05)"
    rows = wilcoxon_table(result)
    if not rows:
        return Finding("learning", claim, "inconclusive", "No paired learning runs.")
    n = len(rows)
    better = sum(row.verdict == "operator higher" for row in rows)
    worse = sum(row.verdict == "reference higher" for row in rows)
    higher_median = sum(row.median_operator > row.median_reference for row in rows)
    details = tuple(
        f"{row.dataset}, {row.algorithm}, lr {row.learning_rate:g}: flip − Gibbs median {row.median_difference:+.3f} "
        f"nats, flip higher in {row.operator_wins}/{row.n_pairs} seeds, p = {row.p_value:.3g} ({row.verdict})"
        for row in rows
    )
    counts = (
        f"flip's median maximum was higher in {higher_median} of {n} settings; significantly higher "
        f"(p < {rows[0].alpha:g}) in {better}, significantly lower in {worse}"
    )
    if all(row.verdict == "too few pairs" for row in rows):
        verdict = "inconclusive"
        text = (
            f"With {rows[0].n_pairs} seeds the signed-rank test cannot reach p < {rows[0].alpha:g} "
            f"(smallest possible p = {rows[0].min_p_value:.3g}); descriptively, {counts}"
        )
    elif better > n / 2:
        verdict, text = "confirmed", f"Flip beat Gibbs in most settings: {counts}"
    elif better == 0 and worse > 0:
        verdict, text = "contradicted", f"Where the test found a difference, Gibbs came out ahead: {counts}"
    else:
        verdict = "inconclusive"
        text = (
            f"Flip did not beat Gibbs in most settings: {counts}; with {rows[0].n_pairs} seeds the test "
            f"has little power (smallest possible p = {rows[0].min_p_value:.3g})"
        )
    text += f". The paper also says Gibbs is slightly better early in training: {_early_lead(result)}."
    stalled = _stalled(result)
    if stalled:
        text += f" Some runs barely learned: {stalled}."
    return Finding("learning", claim, verdict, text, details)


def mean_gain(result: MixingResult, method: str) -> tuple[float, float, int]:
    """The gain ``1 − τ_flip/τ_Gibbs`` by ``method``, averaged over models: (mean, standard error, models).

    The standard error is the spread across models when there are several, else the single
    model's delta-method error (:meth:`MixingResult.gain`).
    """
    gain, gain_stderr = result.gain(method)
    n = gain.numel()
    spread = float(gain.std() / math.sqrt(n)) if n > 1 else float(gain_stderr[0])
    return float(gain.mean()), spread, n


def mixing_finding(result: MixingResult) -> Finding:
    """Is flip's τ of the energy lower than Gibbs' by more than two standard errors?"""
    # The direction only: whether the size of the gain matches the paper's is paper_gain_finding's.
    claim = (
        f"flip mixes faster than Gibbs: a lower τ of the energy (the paper: {PAPER_TAU_GAIN:.2%} fewer steps "
        "for the same variance, MNIST 784×500)"
    )
    details, signs = [], []
    for method in result.methods:
        mean, spread, n = mean_gain(result, method)
        signs.append(1 if mean > 2 * spread else -1 if mean < -2 * spread else 0)
        details.append(
            f"{method}: mean gain 1 − τ_flip/τ_Gibbs = {mean:+.1%} ± {spread:.1%} over {n} model(s)"
        )
    sizes = "×".join(str(size) for size in result.layer_sizes)
    where = f"on {sizes} RBMs ({'; '.join(details)})"
    if all(sign > 0 for sign in signs):
        verdict = "confirmed"
        text = f"Flip mixed faster than Gibbs {where}; the paper reports {PAPER_TAU_GAIN:.2%} on 784×500."
    elif all(sign < 0 for sign in signs):
        verdict, text = "contradicted", f"Gibbs mixed faster than flip {where}."
    elif 1 in signs and -1 in signs:
        verdict, text = "inconclusive", f"The two τ estimators point in opposite directions {where}."
    elif any(signs):
        verdict = "inconclusive"
        text = f"Only one τ estimator shows a difference beyond two standard errors {where}."
    else:
        verdict, text = "inconclusive", f"No difference beyond two standard errors {where}."
    flip, gibbs = result.operators.index("flip"), result.operators.index("gibbs")
    lower = int((result.tau[:, flip] < result.tau[:, gibbs]).sum())
    text += f" Flip's τ was the lower in {lower} of {result.tau[:, 0].numel()} (model, estimator) pairs."
    if not bool(result.reliable.all()):
        text += " Some chains were shorter than 50 τ, so those τ are rough."
    return Finding("mixing", claim, verdict, text, tuple(details))


def _against_paper(mean: float, spread: float) -> str:
    """``"consistent"``, ``"below"`` or ``"above"`` the paper's gain by two standard errors; ``"unknown"``
    without a finite error."""
    if not (math.isfinite(mean) and math.isfinite(spread)):
        return "unknown"
    if abs(mean - PAPER_TAU_GAIN) <= 2.0 * spread:
        return "consistent"
    return "below" if mean < PAPER_TAU_GAIN else "above"


def paper_gain_finding(result: MixingResult) -> Finding:
    """Did the paper's 17.28 % gain hold here, by the AR estimator (the paper's) and by Sokal's?

    "Held" means within two standard errors of 17.28 % by the AR estimator; Sokal's window is
    reported beside it, and said when it disagrees.
    """
    claim = f"flip needs {PAPER_TAU_GAIN:.2%} fewer steps than Gibbs (AR estimator; 784×500 MNIST, 20-PT10)"
    found = {method: mean_gain(result, method) for method in result.methods}
    standing = {method: _against_paper(mean, spread) for method, (mean, spread, _) in found.items()}
    names = {"ar": "the AR estimator (the paper's)", "sokal": "Sokal's window"}
    words = {
        "consistent": f"within two standard errors of {PAPER_TAU_GAIN:.2%}",
        "below": f"more than two standard errors below {PAPER_TAU_GAIN:.2%}",
        "above": f"more than two standard errors above {PAPER_TAU_GAIN:.2%}",
        "unknown": "without a usable standard error",
    }
    details = tuple(
        f"{method}: 1 − τ_flip/τ_Gibbs = {mean:+.2%} ± {spread:.2%} over {n} model(s), {words[standing[method]]}"
        for method, (mean, spread, n) in found.items()
    )
    primary = "ar" if "ar" in found else result.methods[0]
    mean, spread, n = found[primary]
    measured = f"by {names.get(primary, primary)} the gain 1 − τ_flip/τ_Gibbs was {mean:+.2%} ± {spread:.2%}"
    if n > 1:
        measured += f" (mean over {n} models ± its standard error)"
    measured += f", {words[standing[primary]]}"
    others = [
        f"{names.get(method, method)} gave {value:+.2%} ± {error:.2%} ({words[standing[method]]})"
        for method, (value, error, _) in found.items()
        if method != primary
    ]
    if standing[primary] == "consistent":
        verdict, opening = "confirmed", f"The paper's {PAPER_TAU_GAIN:.2%} held here"
    elif standing[primary] == "unknown":
        verdict, opening = (
            "inconclusive",
            f"Whether the paper's {PAPER_TAU_GAIN:.2%} held here cannot be said",
        )
    else:
        verdict, opening = "contradicted", f"The paper's {PAPER_TAU_GAIN:.2%} did not hold here"
    text = f"{opening}: {measured}"
    text += f"; {'; '.join(others)}." if others else "."
    if any(standing[method] != standing[primary] for method in standing):
        text += (
            " The two estimators disagree on it: the AR fit can miss a slow component that Sokal's window"
            " sees (compare the autocorrelation functions in mixing.png)."
        )
    if not bool(result.reliable.all()):
        text += " Some τ come from chains shorter than 50 τ (marked * in the table), so they are rough."
    return Finding("paper gain", claim, verdict, text, details)


def modes_finding(result: ModeHoppingResult) -> Finding:
    """More changes: Poisson z-score of the all-ones chains' counts above 2. Earlier: Mann-Whitney
    U on steps to the first change (censored chains tied beyond the window), p < 0.05."""
    claim = "flip produces more and earlier class changes on Artificial Modes"
    flip, gibbs = result.operators.index("flip"), result.operators.index("gibbs")
    changed = result.changed_fraction()
    medians = result.median_first_change()
    favours, against, details = [], [], []
    for index, p_mut in enumerate(result.p_mut):
        counts = result.class_changes[index].sum(0)
        n_flip, n_gibbs = int(counts[flip]), int(counts[gibbs])
        count_z = (n_flip - n_gibbs) / math.sqrt(n_flip + n_gibbs) if n_flip + n_gibbs else 0.0
        steps = torch.where(
            result.first_change[index] >= 0, result.first_change[index], result.start_steps + 1
        )
        flip_steps, gibbs_steps = steps[:, flip].flatten().numpy(), steps[:, gibbs].flatten().numpy()
        if (flip_steps == flip_steps[0]).all() and (gibbs_steps == flip_steps[0]).all():
            p_value = 1.0  # every chain identical: nothing to rank
        else:
            p_value = float(stats.mannwhitneyu(flip_steps, gibbs_steps, alternative="two-sided").pvalue)
        sooner = float(medians[index, flip]) < float(medians[index, gibbs]) or (
            float(medians[index, flip]) == float(medians[index, gibbs])
            and flip_steps.mean() < gibbs_steps.mean()
        )
        favours.append(count_z > 2 and p_value < 0.05 and sooner)
        against.append(count_z < -2 or (p_value < 0.05 and not sooner))
        details.append(
            f"p_mut {p_mut:g}: class changes in {result.long_steps} steps from all-ones flip {n_flip} vs Gibbs "
            f"{n_gibbs} (z = {count_z:+.1f}); chains from training examples that changed within "
            f"{result.start_steps} steps flip {float(changed[index, flip]):.1%} vs Gibbs "
            f"{float(changed[index, gibbs]):.1%}, median first change flip {float(medians[index, flip]):g} vs "
            f"Gibbs {float(medians[index, gibbs]):g} steps (Mann-Whitney p = {p_value:.3g})"
        )
    if all(favours):
        verdict, text = "confirmed", "Flip changed class more often and sooner than Gibbs"
    elif all(against):
        verdict, text = "contradicted", "Flip changed class less often or later than Gibbs"
    else:
        verdict, text = (
            "inconclusive",
            "Flip did not change class both more often and sooner in every setting",
        )
    return Finding("modes", claim, verdict, f"{text} ({'; '.join(details)}).", tuple(details))


def findings(
    *,
    slem: SlemStudyResult | None = None,
    learning: LearningResult | None = None,
    mixing: MixingResult | None = None,
    modes: ModeHoppingResult | None = None,
) -> tuple[Finding, ...]:
    """Plain-language verdicts on the paper's claims, one per part that ran."""
    found = []
    if slem is not None:
        found.append(slem_finding(slem))
    if learning is not None:
        found.append(learning_finding(learning))
    if mixing is not None:
        found.append(mixing_finding(mixing))
    if modes is not None:
        found.append(modes_finding(modes))
    return tuple(found)
