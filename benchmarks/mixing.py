"""Mixing of every sampler on an RBM trained on MNIST, as ratios to plain Gibbs in the same run.

Brügge, Fischer & Igel (2013, §5) compare flip-the-state with Gibbs by the integrated
autocorrelation time of the energy (estimated with AR fits, SamplerCompare) on RBMs with
500 hidden units trained on MNIST, reporting that flip needs 17.28 % fewer steps for the
same variance, and by how often chains change class. This benchmark trains (or loads) an
RBM on binarised MNIST with a largish learning rate so that its weights are large and its
distribution multimodal, then runs every registered sampler — plain Gibbs, flip and their
α-mixture, and the tempered schemes (``pt``, ``st``, ``ast``, ``cast``, ``tt``, each around
Gibbs and flip) when they are registered — from the same seed, and reports per sampler:

* ``τ`` of the joint energy ``E(v, h)`` of the β = 1 chains, in steps, by Sokal's adaptive
  window and by an AR(p) fit (:mod:`boltzlab.evaluation.autocorrelation`);
* ``cost``: single-chain operator sweeps per step per β = 1 chain, counted by wrapping the
  operator (PT with K levels: K; tempered transitions: 2(K − 1); CAST: 2; plain: 1);
* ``τ·cost``: sweeps per independent sample — the number that decides which sampler wins;
* class changes per 10,000 steps and per 10,000 sweeps, each state assigned to the nearest
  training-class template (thresholded class mean, Hamming distance, ties discarded);
* wall time per step;

each as a ratio to plain Gibbs. The tempered schemes' overheads beyond operator sweeps
(free energies for swap and level moves) show in the time column only.

Usage::

    python benchmarks/mixing.py --quick                    # ~2 minutes: 784×100, short chains
    python benchmarks/mixing.py                            # 784×100, longer chains
    python benchmarks/mixing.py --hidden 500 --sweeps 100000   # the paper's size

Not part of the test suite. Results go to ``runs/mixing/`` (CSV, markdown and plots); the
trained model is cached there too (``--model-cache``, ``--retrain``).
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from matplotlib.figure import Figure

import boltzlab as bl
from boltzlab import sampling
from boltzlab.chains import Chains
from boltzlab.errors import BoltzlabError
from boltzlab.evaluation import (
    TIED,
    class_templates,
    count_mode_changes,
    integrated_autocorrelation_time,
    nearest_template,
)
from boltzlab.plotting import (
    plot_autocorrelation,
    plot_level_occupancy,
    plot_temperature_trajectories,
    save_figure,
)

REPOSITORY = Path(__file__).resolve().parents[1]
DEFAULT_DATA_ROOT = REPOSITORY.parent / "shared" / "data"
DEFAULT_OUTPUT = REPOSITORY / "runs" / "mixing"
PAPER_GAIN = 0.1728  # Brügge et al. 2013: flip needs 17.28 % fewer steps than Gibbs (MNIST, 500 hidden)
TEMPERED_ORDER = ("pt", "st", "ast", "cast", "tt")
MIN_STEPS = 100


# ----------------------------------------------------------------------------- sampler setup
class CountingOperator:
    """Wraps an operator and counts the chain-sweeps it performs (its cost).

    Every tempering scheme moves its chains through ``operator.step``; counting the chains of
    each call gives the scheme's cost in single-chain sweeps without knowing its internals.
    """

    def __init__(self, operator: bl.operators.Operator) -> None:
        self.operator = operator
        self.name = operator.name
        self.chain_sweeps = 0

    def step(self, model: Any, chains: Chains, **options: Any) -> tuple[Chains, Any]:
        self.chain_sweeps += chains.n_chains
        return self.operator.step(model, chains, **options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.operator, name)


class PlainScheme:
    """The operator alone at β = 1, in the scheme interface, so one loop runs every sampler."""

    name = "plain"

    def __init__(self, operator: CountingOperator) -> None:
        self.operator = operator

    def init(self, model: bl.RBM, n_chains: int, *, generator: torch.Generator) -> Chains:
        return model.init_chains(n_chains, generator=generator).with_beta(1.0)

    def step(self, model: bl.RBM, state: Chains, *, generator: torch.Generator) -> tuple[Chains, Any]:
        return self.operator.step(model, state, generator=generator)

    def samples(self, state: Chains) -> Chains:
        return state


@dataclass(frozen=True)
class SamplerSpec:
    label: str
    sampler: str
    operator: str
    operator_params: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)


def scheme_options(name: str, n_levels: int) -> dict[str, Any]:
    """Settings of each tempered scheme in this benchmark (printed with the results)."""
    ladder_from_zero = bl.tempering.ladders.uniform(n_levels)
    return {
        # Brügge et al. 2013: inverse temperatures uniform in [0, 1].
        "pt": {"ladder": ladder_from_zero},
        # Fixed zero weights: no log Z(β) is known for this model, so ST is untuned here.
        "st": {"ladder": bl.tempering.ladders.uniform(n_levels, low=0.9)},
        # The CAST paper's defaults: 20 levels in [0.9, 1], γ = 10.
        "ast": {},
        "cast": {},
        # One β = 1 sweep after each move, so chains move even when moves are rejected.
        "tt": {"ladder": bl.tempering.ladders.uniform(n_levels, low=0.9), "target_sweeps": 1},
    }.get(name, {})


def sampler_specs(arguments: argparse.Namespace) -> tuple[list[SamplerSpec], list[str]]:
    """The samplers to run, and notes on registered samplers left out."""
    registered = set(sampling.samplers())
    specs = [
        SamplerSpec("gibbs", "plain", "gibbs"),
        SamplerSpec("flip", "plain", "flip"),
        SamplerSpec(f"mixture α={arguments.alpha:g}", "plain", "mixture", {"alpha": arguments.alpha}),
    ]
    notes = []
    others = sorted(registered - {"plain", *TEMPERED_ORDER})
    for name in [*[name for name in TEMPERED_ORDER if name in registered], *others]:
        if arguments.samplers is not None and name not in arguments.samplers:
            continue
        for operator in arguments.tempered_operators:
            specs.append(
                SamplerSpec(f"{name}/{operator}", name, operator, {}, scheme_options(name, arguments.levels))
            )
    missing = [name for name in TEMPERED_ORDER if name not in registered]
    if missing:
        notes.append(f"not registered (skipped): {', '.join(missing)}")
    return specs, notes


def build_scheme(spec: SamplerSpec) -> tuple[Any, CountingOperator]:
    operator = CountingOperator(bl.operators.get(spec.operator, **spec.operator_params))
    if spec.sampler == "plain":
        return PlainScheme(operator), operator
    # bl.sample would keep every visible state of every step in memory; this benchmark
    # streams them into template assignments instead, so it drives the scheme itself.
    return sampling.make_scheme(spec.sampler, operator, **spec.options), operator


def levels_and_betas(scheme: Any, state: Any) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Current ladder level of each β = 1 chain's tempered companion, and the ladder, if any.

    PT: the level of the replica that started at β = 1; ST/AST: each chain's level; CAST:
    the fast chains' levels.
    """
    ladder = getattr(scheme, "ladder", None)
    if ladder is None:
        ladder = getattr(getattr(scheme, "fast", None), "ladder", None)
    if ladder is None:
        return None
    if hasattr(state, "replica"):
        top = state.replica.shape[0] - 1
        return (state.replica == top).to(torch.int64).argmax(0), ladder.betas
    levels = getattr(state, "levels", None)
    if levels is None:
        levels = getattr(getattr(state, "fast", None), "levels", None)
    return None if levels is None else (levels.clone(), ladder.betas)


# ----------------------------------------------------------------------------- one run
@dataclass
class Row:
    label: str
    steps: int
    cost: float
    tau_sokal: float
    tau_sokal_stderr: float
    tau_ar: float
    tau_ar_stderr: float
    tau_ar_within: float
    tau_ar_within_stderr: float
    tau_sokal_within: float
    reliable: bool
    changes_per_10k_steps: float
    changes_per_10k_sweeps: float
    seconds_per_step: float
    tau_ratio_sokal: float = math.nan
    tau_ratio_ar: float = math.nan
    tau_ratio_ar_within: float = math.nan
    tau_cost_ratio_sokal: float = math.nan
    tau_cost_ratio_ar_within: float = math.nan
    changes_steps_ratio: float = math.nan
    changes_sweeps_ratio: float = math.nan
    time_ratio: float = math.nan


@dataclass
class Trace:
    energies: np.ndarray
    levels: np.ndarray | None
    betas: np.ndarray | None


def assign_class(model: bl.RBM, chains: Chains, templates: torch.Tensor, assign_from: str) -> torch.Tensor:
    """Nearest class template of each β = 1 chain's visible state, or of ``E[v | h]``.

    The sampled ``v`` of an MNIST RBM is noisy: between two similar digits its nearest
    template can alternate from sweep to sweep without the chain leaving its mode. The
    conditional mean ``σ(b + W h)`` (Rao–Blackwellised visible state) removes that pixel
    noise; its nearest template is taken by Euclidean distance to the binary templates.
    """
    if assign_from == "state":
        return nearest_template(chains.layers[0], templates)
    beta = torch.ones(chains.n_chains, dtype=model.dtype)
    mean = torch.sigmoid(model.conditional_logits(0, chains.layers, beta))
    return nearest_template(mean, templates)


def run_sampler(
    model: bl.RBM, spec: SamplerSpec, templates: torch.Tensor, arguments: argparse.Namespace
) -> tuple[Row, Trace]:
    """Run one sampler on the same sweep budget as every other; measure its mixing.

    One probe step measures the scheme's cost (sweeps per step per β = 1 chain); burn-in and
    recording then take ``ceil(budget / cost)`` steps, so each sampler spends the same number
    of operator sweeps (at least ``MIN_STEPS`` recorded steps, for the τ estimates).
    """
    scheme, counter = build_scheme(spec)
    generator = bl.rng.make_generator(arguments.seed + 1)
    state = scheme.init(model, arguments.chains, generator=generator)
    state, _ = scheme.step(model, state, generator=generator)
    probe_cost = max(counter.chain_sweeps / arguments.chains, 1e-9)
    for _ in range(max(0, math.ceil(arguments.burn_in / probe_cost) - 1)):
        state, _ = scheme.step(model, state, generator=generator)
    n_steps = max(MIN_STEPS, math.ceil(arguments.sweeps / probe_cost))
    counter.chain_sweeps = 0
    chains = scheme.samples(state)
    assignments = [assign_class(model, chains, templates, arguments.assign_from)]
    energies, levels = [], []
    seconds = 0.0
    for _ in range(n_steps):
        start = time.perf_counter()
        state, _ = scheme.step(model, state, generator=generator)
        seconds += time.perf_counter() - start
        chains = scheme.samples(state)
        energies.append(model.energy(chains.layers))
        assignments.append(assign_class(model, chains, templates, arguments.assign_from))
        level = levels_and_betas(scheme, state)
        if level is not None:
            levels.append(level[0])
    energy = torch.stack(energies).numpy()
    sokal = integrated_autocorrelation_time(energy, method="sokal", warn=False)
    ar = integrated_autocorrelation_time(energy, method="ar", warn=False)
    # Each chain about its own mean: the single-chain estimator of the paper (SamplerCompare
    # de-means each series), which measures mixing within the mode a chain sits in.
    ar_within = integrated_autocorrelation_time(energy, method="ar", center="chain", warn=False)
    sokal_within = integrated_autocorrelation_time(energy, method="sokal", center="chain", warn=False)
    n_chain_steps = n_steps * arguments.chains
    cost = counter.chain_sweeps / n_chain_steps
    changes = float(count_mode_changes(torch.stack(assignments)).sum())
    per_steps = 1e4 * changes / n_chain_steps
    level_info = levels_and_betas(scheme, state)
    row = Row(
        label=spec.label,
        steps=n_steps,
        cost=cost,
        tau_sokal=sokal.tau,
        tau_sokal_stderr=sokal.stderr,
        tau_ar=ar.tau,
        tau_ar_stderr=ar.stderr,
        tau_ar_within=ar_within.tau,
        tau_ar_within_stderr=ar_within.stderr,
        tau_sokal_within=sokal_within.tau,
        reliable=sokal.reliable and ar.reliable,
        changes_per_10k_steps=per_steps,
        changes_per_10k_sweeps=per_steps / cost if cost > 0 else math.nan,
        seconds_per_step=seconds / n_steps,
    )
    trace = Trace(
        energies=energy,
        levels=torch.stack(levels).numpy() if levels else None,
        betas=level_info[1].numpy() if level_info is not None else None,
    )
    return row, trace


def add_ratios(rows: list[Row]) -> None:
    reference = next(row for row in rows if row.label == "gibbs")

    def ratio(value: float, base: float) -> float:
        return value / base if base and math.isfinite(base) else math.nan

    for row in rows:
        row.tau_ratio_sokal = ratio(row.tau_sokal, reference.tau_sokal)
        row.tau_ratio_ar = ratio(row.tau_ar, reference.tau_ar)
        row.tau_ratio_ar_within = ratio(row.tau_ar_within, reference.tau_ar_within)
        row.tau_cost_ratio_sokal = ratio(row.tau_sokal * row.cost, reference.tau_sokal * reference.cost)
        row.tau_cost_ratio_ar_within = ratio(
            row.tau_ar_within * row.cost, reference.tau_ar_within * reference.cost
        )
        row.changes_steps_ratio = ratio(row.changes_per_10k_steps, reference.changes_per_10k_steps)
        row.changes_sweeps_ratio = ratio(row.changes_per_10k_sweeps, reference.changes_per_10k_sweeps)
        row.time_ratio = ratio(row.seconds_per_step, reference.seconds_per_step)


# ----------------------------------------------------------------------------- model and data
def load_mnist(root: Path) -> bl.data.Dataset | None:
    if not (root / "mnist.npz").exists() and not (root / "mnist").is_dir():
        return None
    return bl.data.load("mnist", root=root)


def trained_model(data: bl.data.Dataset, arguments: argparse.Namespace) -> tuple[bl.RBM, str]:
    cache = arguments.model_cache or DEFAULT_OUTPUT / (
        f"rbm-784x{arguments.hidden}-{arguments.train_algorithm}-e{arguments.epochs:g}"
        f"-lr{arguments.learning_rate:g}-seed{arguments.seed}.safetensors"
    )
    cache = Path(cache)
    if cache.exists() and not arguments.retrain:
        return bl.RBM.load(cache), f"loaded from {cache}"
    model = bl.RBM(784, arguments.hidden, generator=arguments.seed)
    start = time.perf_counter()
    bl.train(
        model,
        data.train,
        algorithm=arguments.train_algorithm,
        n_epochs=arguments.epochs,
        learning_rate=arguments.learning_rate,
        batch_size=100,
        n_chains=100,
        generator=arguments.seed,
    )
    seconds = time.perf_counter() - start
    model.save(cache)
    return (
        model,
        f"trained in {seconds:.0f} s ({arguments.train_algorithm}, {arguments.epochs:g} epochs, lr {arguments.learning_rate:g}), saved to {cache}",
    )


# ----------------------------------------------------------------------------- output
COLUMNS = (
    ("sampler", "{label}"),
    ("steps", "{steps}"),
    ("cost", "{cost:.3g}"),
    ("τ sokal", "{tau_sokal:.3g} ± {tau_sokal_stderr:.2g}"),
    ("τ ar", "{tau_ar:.3g} ± {tau_ar_stderr:.2g}"),
    ("τ ar within", "{tau_ar_within:.3g} ± {tau_ar_within_stderr:.2g}"),
    ("τ/τG sokal", "{tau_ratio_sokal:.3f}"),
    ("τ/τG ar", "{tau_ratio_ar:.3f}"),
    ("τ/τG within", "{tau_ratio_ar_within:.3f}"),
    ("τ·cost/G sokal", "{tau_cost_ratio_sokal:.3f}"),
    ("τ·cost/G within", "{tau_cost_ratio_ar_within:.3f}"),
    ("chg/10k steps", "{changes_per_10k_steps:.1f}"),
    ("ratio", "{changes_steps_ratio:.2f}"),
    ("chg/10k sweeps", "{changes_per_10k_sweeps:.1f}"),
    ("ratio", "{changes_sweeps_ratio:.2f}"),
    ("time/G", "{time_ratio:.2f}"),
    ("reliable", "{reliable}"),
)


def markdown_table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(title for title, _ in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        cells = [template.format(**asdict(row)) for _, template in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_outputs(
    mnist: tuple[list[Row], dict[str, Trace], list[str]] | None,
    modes_rows: list[ModesRow],
    modes_lines: list[str],
    arguments: argparse.Namespace,
) -> list[Path]:
    output = arguments.output
    output.mkdir(parents=True, exist_ok=True)
    written = []
    sections = ["# Mixing benchmark", ""]
    if mnist is not None:
        rows, traces, header = mnist
        csv_path = output / "mixing.csv"
        with csv_path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(asdict(rows[0])))
            writer.writeheader()
            for row in rows:
                writer.writerow(asdict(row))
        written.append(csv_path)
        sections += ["## Samplers on an RBM trained on MNIST", "", *header, "", markdown_table(rows), ""]
        written += write_figures(traces, output)
    if modes_rows:
        csv_path = output / "modes.csv"
        with csv_path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(asdict(modes_rows[0])))
            writer.writeheader()
            for row in modes_rows:
                writer.writerow(asdict(row))
        written.append(csv_path)
        sections += [
            "## Mode hopping on Artificial Modes (Brügge et al. 2013, §5.3)",
            "",
            f"{arguments.modes_updates} CD-5 updates (lr 0.1, batch 100, 16 hidden); one chain from all-ones for "
            f"{arguments.modes_steps} steps (class changes); {arguments.modes_starts} chains from training examples "
            "(steps to first change, censored chains counted at the cap).",
            "",
            modes_table(modes_rows),
            "",
            *[f"- {line}" for line in modes_lines],
            "",
        ]
    markdown_path = output / "mixing.md"
    markdown_path.write_text("\n".join(sections))
    written.append(markdown_path)
    return written


def write_figures(traces: dict[str, Trace], output: Path) -> list[Path]:
    written = []
    figure = Figure(figsize=(7.5, 4.5), layout="constrained")
    plot_autocorrelation(
        figure.add_subplot(),
        {label: trace.energies for label, trace in traces.items()},
        method="ar",
        title="autocorrelation of the energy (τ by AR fit)",
    )
    written.append(save_figure(figure, output / "mixing-autocorrelation.png"))
    tempered = {label: trace for label, trace in traces.items() if trace.levels is not None}
    if tempered:
        figure = Figure(figsize=(10.0, 3.2 * len(tempered)), layout="constrained")
        axes = figure.subplots(len(tempered), 2, squeeze=False)
        for (label, trace), (left, right) in zip(tempered.items(), axes, strict=True):
            plot_temperature_trajectories(
                left, trace.levels, trace.betas, title=f"{label}: temperature trajectories"
            )
            plot_level_occupancy(right, trace.levels, trace.betas, title=f"{label}: level occupancy")
        written.append(save_figure(figure, output / "mixing-levels.png"))
    return written


# ----------------------------------------------------------------------------- artificial modes
@dataclass
class ModesRow:
    p_mut: float
    operator: str
    repetitions: int
    changes_median: float
    changes_mean: float
    first_change_median: float
    never_changed: float
    max_weight: float


def artificial_modes_study(arguments: argparse.Namespace) -> tuple[list[ModesRow], list[str]]:
    """The paper's mode-hopping setup (Brügge et al. 2013, §5.3) on Artificial Modes.

    For each ``p_mut`` and repetition: an RBM with 16 hidden units trained by CD-5; then, per
    operator, (a) one chain started with every unit on, run ``--modes-steps`` steps, class
    changes counted; (b) ``--modes-starts`` chains started at training examples (hidden
    layer drawn from p(h | v)), steps until the first change of class (censored at
    ``--modes-steps``). Classes are the nearest of the four basic modes (Hamming; ties
    discarded). Gibbs and flip run from the same generator seed.
    """
    modes = bl.data.artificial_mode_patterns().to(torch.float64)
    results: list[ModesRow] = []
    lines = []
    for p_mut in (0.01, 0.1):
        per_operator: dict[str, dict[str, list[float]]] = {
            name: {"changes": [], "first": [], "never": []} for name in ("gibbs", "flip")
        }
        weights = []
        for repetition in range(arguments.modes_repetitions):
            seed = 1000 * repetition + round(100 * p_mut)
            data = bl.data.load("artificial-modes", n_samples=1000, p_mut=p_mut, generator=seed)
            model = bl.RBM(16, 16, generator=seed, weight_std=0.01)
            bl.train(
                model,
                data.train,
                algorithm="cd",
                k=5,
                n_updates=arguments.modes_updates,
                learning_rate=0.1,
                batch_size=100,
                generator=seed,
            )
            weights.append(float(model.weights.detach().abs().max()))
            starts = data.train[: arguments.modes_starts]
            for name in ("gibbs", "flip"):
                operator = bl.operators.get(name)
                generator = bl.rng.make_generator(seed + 7)
                ones = Chains(layers=(torch.ones(1, 16), torch.ones(1, 16)), beta=torch.ones(1))
                classes = [nearest_template(ones.layers[0], modes)]
                chains = ones
                for _ in range(arguments.modes_steps):
                    chains, _ = operator.step(model, chains, generator=generator)
                    classes.append(nearest_template(chains.layers[0], modes))
                per_operator[name]["changes"].append(float(count_mode_changes(torch.stack(classes))[0]))
                beta = torch.ones(starts.shape[0])
                hidden_probability = torch.sigmoid(
                    model.conditional_logits(1, (starts, torch.zeros(starts.shape[0], 16)), beta)
                )
                hidden = (
                    torch.rand(hidden_probability.shape, generator=generator) < hidden_probability
                ).float()
                chains = Chains(layers=(starts.clone(), hidden), beta=beta)
                initial = data.train_labels[: starts.shape[0]]
                # steps_to_first_change(..., initial=initial) computed on the fly, so the
                # loop can stop once every chain has changed class.
                first = torch.full(initial.shape, -1, dtype=torch.int64)
                for step in range(1, arguments.modes_steps + 1):
                    chains, _ = operator.step(model, chains, generator=generator)
                    classes = nearest_template(chains.layers[0], modes)
                    first[(first < 0) & (classes != TIED) & (classes != initial)] = step
                    if bool((first >= 0).all()):
                        break
                changed = first >= 0
                # Censored chains count as arguments.modes_steps in the median (a lower bound).
                steps = torch.where(changed, first, torch.full_like(first, arguments.modes_steps)).to(
                    torch.float64
                )
                per_operator[name]["first"].append(float(steps.median()))
                per_operator[name]["never"].append(float((~changed).to(torch.float64).mean()))
        for name, values in per_operator.items():
            results.append(
                ModesRow(
                    p_mut=p_mut,
                    operator=name,
                    repetitions=arguments.modes_repetitions,
                    changes_median=float(np.median(values["changes"])),
                    changes_mean=float(np.mean(values["changes"])),
                    first_change_median=float(np.median(values["first"])),
                    never_changed=float(np.mean(values["never"])),
                    max_weight=float(np.median(weights)),
                )
            )
        flip_more = sum(
            flip > gibbs
            for flip, gibbs in zip(
                per_operator["flip"]["changes"], per_operator["gibbs"]["changes"], strict=True
            )
        )
        flip_earlier = sum(
            flip < gibbs
            for flip, gibbs in zip(per_operator["flip"]["first"], per_operator["gibbs"]["first"], strict=True)
        )
        lines.append(
            f"Artificial Modes p_mut={p_mut}: flip has more class changes in {flip_more}/{arguments.modes_repetitions} "
            f"RBMs and an earlier median first change in {flip_earlier}/{arguments.modes_repetitions}"
        )
    return results, lines


def modes_table(rows: list[ModesRow]) -> str:
    lines = [
        "| p_mut | operator | RBMs | changes in N steps (median) | (mean) | steps to first change (median of medians) "
        "| never changed | median max abs W |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row.p_mut:g} | {row.operator} | {row.repetitions} | {row.changes_median:.1f} | {row.changes_mean:.1f} "
            f"| {row.first_change_median:.1f} | {row.never_changed:.1%} | {row.max_weight:.2f} |"
        )
    return "\n".join(lines)


# ----------------------------------------------------------------------------- main
def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="short chains (about two minutes on 2 cores)")
    parser.add_argument("--data-root", type=Path, default=DEFAULT_DATA_ROOT, help="folder holding mnist.npz")
    parser.add_argument("--hidden", type=int, default=100, help="hidden units (the paper: 500)")
    parser.add_argument("--epochs", type=int, default=None, help="training epochs (default 5)")
    parser.add_argument(
        "--learning-rate", type=float, default=0.1, help="large, so that the weights grow large"
    )
    parser.add_argument("--train-algorithm", default="pcd", help="pcd (default) or pt, cast, ...")
    parser.add_argument("--model-cache", type=Path, default=None, help="model file to load or write")
    parser.add_argument("--retrain", action="store_true", help="ignore a cached model")
    parser.add_argument(
        "--chains", type=int, default=None, help="β = 1 chains per sampler (default 20, quick 10)"
    )
    parser.add_argument(
        "--sweeps",
        type=int,
        default=None,
        help="recorded sweeps per β = 1 chain, every sampler (default 20000, quick 5000)",
    )
    parser.add_argument(
        "--burn-in", type=int, default=None, help="sweeps discarded first (default 5000, quick 2000)"
    )
    parser.add_argument("--levels", type=int, default=10, help="ladder size for pt, st and tt")
    parser.add_argument("--alpha", type=float, default=0.5, help="flip weight of the mixture operator")
    parser.add_argument(
        "--assign-from",
        choices=("mean", "state"),
        default="mean",
        help="classify E[v | h] (default) or the sampled v itself when counting class changes",
    )
    parser.add_argument(
        "--samplers",
        nargs="*",
        default=None,
        help="tempered samplers to run (default: all registered; the flag alone: none)",
    )
    parser.add_argument(
        "--tempered-operators",
        nargs="+",
        default=None,
        help="operators inside tempered samplers (default gibbs flip)",
    )
    parser.add_argument(
        "--modes-repetitions",
        type=int,
        default=None,
        help="RBMs per p_mut in the Artificial Modes study (default 5, quick 1; 0 skips it)",
    )
    parser.add_argument(
        "--modes-updates", type=int, default=None, help="CD-5 updates (default 5000, quick 2000)"
    )
    parser.add_argument("--modes-steps", type=int, default=10000, help="steps per chain (the paper's 10,000)")
    parser.add_argument(
        "--modes-starts",
        type=int,
        default=None,
        help="chains from training examples (default 1000, quick 300)",
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    arguments = parser.parse_args(argv)
    quick = arguments.quick
    defaults = {
        "epochs": 5,
        "chains": 10 if quick else 20,
        "sweeps": 5000 if quick else 20000,
        "burn_in": 2000 if quick else 5000,
        "tempered_operators": ["gibbs"] if quick else ["gibbs", "flip"],
        "modes_repetitions": 1 if quick else 5,
        "modes_updates": 2000 if quick else 5000,
        "modes_starts": 300 if quick else 1000,
    }
    for name, value in defaults.items():
        if getattr(arguments, name) is None:
            setattr(arguments, name, value)
    return arguments


def mnist_benchmark(arguments: argparse.Namespace) -> tuple[list[Row], dict[str, Trace], list[str]] | None:
    """Every sampler on the MNIST RBM; ``None`` (with a message) when MNIST is absent."""
    data = load_mnist(arguments.data_root)
    if data is None:
        print(f"MNIST part skipped: MNIST not found in {arguments.data_root} (pass --data-root)")
        return None
    if data.train_labels is None:
        print("MNIST part skipped: the MNIST file has no training labels (needed for class templates)")
        return None
    model, provenance = trained_model(data, arguments)
    templates = class_templates(data.train, data.train_labels)
    weights = model.weights.detach()
    header = [
        f"- model: RBM 784×{arguments.hidden}, {provenance}",
        f"- weights: max |W| = {float(weights.abs().max()):.2f}, mean |W| = {float(weights.abs().mean()):.3f}",
        f"- torch {torch.__version__}, {torch.get_num_threads()} thread(s), seed {arguments.seed}",
        f"- {arguments.chains} β = 1 chains per sampler; every sampler gets {arguments.burn_in} burn-in "
        f"and {arguments.sweeps} recorded operator sweeps per β = 1 chain (steps = sweeps / cost); "
        "statistic: joint energy E(v, h)",
        "- class changes: nearest training-class template (class mean > 1/2) of "
        + ("E[v | h] (Euclidean)" if arguments.assign_from == "mean" else "the sampled v (Hamming)")
        + ", ties discarded",
        "- ratios are to plain Gibbs in this run; cost = operator chain-sweeps per step per β = 1 chain",
    ]
    for line in header:
        print(line)
    n_fixed_lines = len(header)
    specs, notes = sampler_specs(arguments)
    for spec in specs:
        if spec.options:
            shown = {
                key: (
                    f"uniform({value.size}, low={float(value.betas[0]):g})"
                    if hasattr(value, "betas")
                    else value
                )
                for key, value in spec.options.items()
            }
            notes.append(f"{spec.label} options: {shown}")
    rows, traces = [], {}
    for spec in specs:
        start = time.perf_counter()
        try:
            row, trace = run_sampler(model, spec, templates, arguments)
        except (BoltzlabError, TypeError, ValueError, RuntimeError) as error:
            notes.append(f"{spec.label} failed: {type(error).__name__}: {error}")
            print(f"{spec.label:>16}: failed ({error})")
            continue
        rows.append(row)
        traces[spec.label] = trace
        print(
            f"{spec.label:>16}: τ_sokal {row.tau_sokal:8.3g}  τ_ar {row.tau_ar:8.3g}  "
            f"τ_ar within {row.tau_ar_within:6.3g}  cost {row.cost:5.3g}  "
            f"changes/10k steps {row.changes_per_10k_steps:7.1f}  ({time.perf_counter() - start:.0f} s)",
            flush=True,
        )
    add_ratios(rows)
    by_label = {row.label: row for row in rows}
    gibbs, flip = by_label["gibbs"], by_label.get("flip")
    if flip is not None:
        header.append(
            f"- flip vs Gibbs: gain 1 − τ_T/τ_G = {1 - flip.tau_ar_within / gibbs.tau_ar_within:+.1%} "
            f"(AR, each chain about its own mean: the paper's estimator), "
            f"{1 - flip.tau_ar / gibbs.tau_ar:+.1%} (AR, pooled), {1 - flip.tau_sokal / gibbs.tau_sokal:+.1%} "
            f"(Sokal, pooled); the paper: {PAPER_GAIN:+.2%} (784×500 trained with 20-PT10, 10^6 steps)"
        )
    header.append(
        "- pooled τ (grand mean over chains) includes chains sitting in different modes and is what a "
        "tempered sampler should shrink; 'within' τ measures mixing inside a chain's current mode"
    )
    header.extend(f"- {note}" for note in notes)
    print()
    print(markdown_table(rows))
    print()
    for line in header[n_fixed_lines:]:
        print(line)
    return rows, traces, header


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    torch.set_num_threads(arguments.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    mnist = mnist_benchmark(arguments)
    modes_rows: list[ModesRow] = []
    modes_lines: list[str] = []
    if arguments.modes_repetitions > 0:
        start = time.perf_counter()
        modes_rows, modes_lines = artificial_modes_study(arguments)
        print()
        print(
            f"Artificial Modes mode hopping ({arguments.modes_updates} CD-5 updates, {arguments.modes_steps} steps, "
            f"{arguments.modes_starts} starts; {time.perf_counter() - start:.0f} s)"
        )
        print(modes_table(modes_rows))
        for line in modes_lines:
            print(line)
    for path in write_outputs(mnist, modes_rows, modes_lines, arguments):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
