"""``summary.md`` of the flip-the-state study: what was measured, the verdicts, tables and times.

:func:`summary_markdown` is the study's; :func:`model_files_summary_markdown` the one of τ
measured on model files the user supplies.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

import boltzlab
from boltzlab.cli.common import format_seconds
from boltzlab_experiments.findings import Finding
from boltzlab_experiments.flip_the_state.config import FlipTheStateConfig
from boltzlab_experiments.flip_the_state.findings import PAPER_TAU_GAIN
from boltzlab_experiments.flip_the_state.mixing import MixingResult
from boltzlab_experiments.flip_the_state.model_files import ModelFileMixingConfig
from boltzlab_experiments.tables import markdown_table

__all__ = ["model_files_summary_markdown", "settings_lines", "summary_markdown"]

# The paper's protocol for its 17.28 % (§5; presets/full.toml): what a run on other models differs from.
PAPER_MODELS = "24 MNIST RBMs 784×500 trained with 20-PT10"
PAPER_CHAINS = "one chain of 10⁶ sweeps per model and operator"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def settings_lines(config: FlipTheStateConfig, parts: Sequence[str], seed: int) -> list[str]:
    """One markdown bullet per part that ran: its sizes and settings."""
    lines = [f"- configuration `{config.label}`, study seed {seed}, parts: {', '.join(parts)}"]
    if "slem" in parts:
        sizes = ", ".join(f"{v}×{h}" for v, h in config.slem_sizes)
        lines.append(
            f"- SLEM: sizes {sizes}; c = {', '.join(f'{c:g}' for c in config.slem_scales)}; "
            f"{config.slem_models} RBMs per (size, c); W ~ U[−c, c], biases 0; exact joint sweep T_h T_v"
        )
    if "learning" in parts:
        setups = "; ".join(
            f"{s.data.name} ({s.n_hidden} hidden, {'full batch' if s.batch_size is None else f'batch {s.batch_size}'}, "
            f"{s.n_updates} updates)"
            for s in config.learning
        )
        lines.append(
            f"- learning: {setups}; {', '.join(config.algorithms)} with k = {config.k} (PT: "
            f"{config.pt_levels} inverse temperatures uniform in [0, 1]); learning rate(s) "
            f"{', '.join(f'{r:g}' for r in config.learning_rates)}; {config.n_seeds} seeds; exact "
            f"training log-likelihood every {config.evaluate_every} updates; no momentum or weight decay"
        )
    if "mixing" in parts:
        params = ", ".join(f"{k} {v}" for k, v in config.mixing_algorithm_params)
        lines.append(
            f"- mixing: {_count(config.mixing_models, 'RBM')} with {config.mixing_hidden} hidden units on "
            f"{config.mixing_data.name}, trained by {config.mixing_algorithm}-{config.mixing_k}"
            f"{f' ({params})' if params else ''} for {config.mixing_updates} updates at learning rate "
            f"{config.mixing_learning_rate:g}; then {config.mixing_chains} chains × {config.mixing_steps} "
            f"sweeps (after {config.mixing_burn_in}) per operator from training examples; τ of the joint "
            f"energy by Sokal's adaptive window and by an AR fit"
        )
        lines.append(
            f"- mode hopping: Artificial Modes with p_mut {', '.join(f'{p:g}' for p in config.mode_p_mut)}; "
            f"{_count(config.mode_models, 'RBM')} with {config.mode_hidden} hidden units trained by CD-{config.mode_k} "
            f"for {config.mode_updates} updates; {config.mode_starts} chains from training examples for up "
            f"to {config.mode_start_steps} sweeps, one chain from all-ones for {config.mode_long_steps} "
            f"sweeps; class = nearest thresholded class mean (Hamming), ties discarded"
        )
    return lines


def summary_markdown(
    config: FlipTheStateConfig,
    found: Sequence[Finding],
    *,
    parts: Sequence[str],
    seed: int,
    tables: dict[str, str] | None = None,
    timings: dict[str, float] | None = None,
    skipped: dict[str, str] | None = None,
) -> str:
    """The study's ``summary.md``: what was measured, the verdicts in plain words, tables, times."""
    tables, timings, skipped = tables or {}, timings or {}, skipped or {}
    titles = {
        "slem": "SLEM of the exact sweep (Fig. 3, upper)",
        "learning": "Learning curves",
        "mixing": "Autocorrelation time of the energy",
        "modes": "Mode hopping on Artificial Modes",
    }
    lines = [
        f"# Flip-the-state study ({config.label})",
        "",
        "Brügge, Fischer & Igel (2013) propose the flip-the-state operator, a Metropolis-type single-unit "
        "update that changes a unit's state as often as detailed balance allows, and claim that it mixes "
        "faster than Gibbs sampling when the weights are large. This run measured their claims again "
        f"with boltzlab {boltzlab.__version__}:",
        "",
        *settings_lines(config, parts, seed),
        "",
        "## Verdicts",
        "",
        markdown_table(
            ["part", "the paper's claim", "verdict"], [[f.part, f.claim, f.verdict] for f in found]
        ),
        "",
    ]
    for finding in found:
        lines += [f"## {titles.get(finding.part, finding.part)}", "", finding.text, ""]
        if finding.part in tables:
            lines += [tables[finding.part], ""]
    if config.label != "full":
        lines += [
            "## Caveats",
            "",
            f"This is the `{config.label}` configuration, far smaller than the paper's (25 repetitions of "
            "20,000 updates at three learning rates; 24 RBMs 784×500 sampled for 10⁶ steps): few seeds give "
            "the signed-rank test little power, short runs stop in the early phase where the paper finds Gibbs "
            f"slightly better, and the paper's {PAPER_TAU_GAIN:.2%} gain was measured on larger, PT-trained "
            "models. Run with `--full` for the paper's sizes.",
            "",
        ]
    if skipped:
        lines += ["## Skipped", ""] + [f"- {name}: {reason}" for name, reason in skipped.items()] + [""]
    if timings:
        total = sum(timings.values())
        lines += ["## Runtime", ""] + [f"- {name}: {format_seconds(s)}" for name, s in timings.items()]
        lines += [f"- total: {format_seconds(total)} ({torch.get_num_threads()} torch thread(s))", ""]
    return "\n".join(lines)


def _differences(result: MixingResult, config: ModelFileMixingConfig, training: Sequence[str]) -> str:
    """What differs from the paper's protocol: the models' training and size, and the chains."""
    trained = sorted(set(training))
    sizes = "×".join(str(size) for size in result.layer_sizes)
    n_models = result.tau.shape[0]
    scale = ", ".join(f"{float(value):.3g}" for value in result.weight_scale)
    chain_sweeps = config.n_chains * config.n_steps
    return (
        f"What differs from the paper: here {_count(n_models, 'RBM')} {sizes} (training: {'; '.join(trained)}; "
        f"mean |W| {scale}), there {PAPER_MODELS} — flip's advantage grows with the size of the weights "
        f"(the paper's Fig. 3), so the training matters; here {config.n_chains} independent chains × "
        f"{config.n_steps} sweeps pooled per model and operator ({chain_sweeps:.3g} chain-sweeps), there "
        f"{PAPER_CHAINS}."
    )


def model_files_summary_markdown(
    result: MixingResult,
    found: Sequence[Finding],
    config: ModelFileMixingConfig,
    *,
    training: Sequence[str],
    seed: int,
    processes: int = 1,
    table: str | None = None,
) -> str:
    """``summary.md`` of τ on supplied model files: the settings, whether the paper's 17.28 % held,
    the τ table and the time each run took.

    ``found`` holds the ``"paper gain"`` and ``"mixing"`` findings; ``training`` one label per
    model (:func:`~boltzlab_experiments.flip_the_state.model_files.training_label`).
    """
    start = (
        "random MNIST training examples"
        if config.init == "data"
        else "exact samples of the model's base distribution"
    )
    models = [
        f"- `{result.model_name(index)}`: RBM {'×'.join(map(str, result.layer_sizes))}, training "
        f"{training[index]}, mean |W| {float(result.weight_scale[index]):.3g}"
        for index in range(result.tau.shape[0])
    ]
    lines = [
        "# Flip-the-state τ on supplied RBMs",
        "",
        f"Brügge, Fischer & Igel (2013) report that flip-the-state needs {PAPER_TAU_GAIN:.2%} fewer steps than "
        "Gibbs sampling for the same variance of the energy (its integrated autocorrelation time τ, by an AR "
        f"fit; {PAPER_MODELS}, {PAPER_CHAINS}). This run measured the same quantity with boltzlab "
        f"{boltzlab.__version__} on the model file(s):",
        "",
        *models,
        f"- {config.n_chains} chains per model and operator ({', '.join(config.operators)}), started from {start}, "
        f"{config.burn_in} sweeps of burn-in, then {config.n_steps} recorded sweeps; τ of the joint energy "
        "pooled over the chains by Sokal's adaptive window (c = 5) and by an AR fit (order by AIC); Gibbs and "
        "flip start from the same states",
        f"- chains cut into {config.blocks} blocks with their own random streams (the same numbers on any number "
        f"of processes up to {config.blocks}), run on {processes} {'process' if processes == 1 else 'processes'}; study seed {seed}",
        "",
        "## Verdicts",
        "",
        markdown_table(
            ["part", "the paper's claim", "verdict"], [[f.part, f.claim, f.verdict] for f in found]
        ),
        "",
    ]
    titles = {"paper gain": f"Did the paper's {PAPER_TAU_GAIN:.2%} hold?", "mixing": "Flip against Gibbs"}
    for finding in found:
        lines += [f"## {titles.get(finding.part, finding.part)}", "", finding.text]
        if finding.part == "paper gain":
            lines[-1] += " " + _differences(result, config, training)
        lines.append("")
    if table is not None:
        lines += ["## Autocorrelation time of the energy", "", table, ""]
    if result.seconds is not None:
        sweeps = config.burn_in + config.n_steps
        lines += ["## Runtime", ""]
        for model in range(result.tau.shape[0]):
            for index, operator in enumerate(result.operators):
                seconds = float(result.seconds[model, index])
                lines.append(
                    f"- {operator} on `{result.model_name(model)}`: {format_seconds(seconds)} "
                    f"({1000 * seconds / sweeps:.2f} ms per sweep of this process's chains)"
                )
        lines += [
            f"- total: {format_seconds(float(result.seconds.sum()))} ({torch.get_num_threads()} torch thread(s) "
            f"per process)",
            "",
        ]
    return "\n".join(lines)
