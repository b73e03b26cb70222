"""Centred against plain gradients: exact log-likelihoods after the same training, same seeds.

Two models, each small enough for an exact log Z by enumerating its 2^20 hidden states:

* **binary**: a 64×20 RBM on the built-in binarised digits (``bl.data.load("digits")``:
  1,497 training and 300 test images), PCD-1 with 100 chains;
* **spin**: the same 64×20 RBM with ±1 visible units (``SpinRBM``) on the same digits, trained
  in spin coordinates (``--only spin``): the plain spin run against the plain binary one is the
  effect of the units alone;
* **Potts**: a Potts RBM with 20 hidden units on the WW-domain alignment (31 sites, q = 21;
  ``WW_domain_MSA.fasta``), PCD-1 with 100 chains, sequence weights at 80% identity, a
  homology-aware 10% test split (no test sequence within 80% of a training one), and
  log-likelihoods weighted by the sequence weights (computed on the whole alignment).

For every seed, learning rate (binary 0.01 and 0.05, Potts 0.05) and initialisation of the
visible biases (0, the library's default, or the data's log-odds, Hinton 2010 §8, as Melchior
et al. 2016 do) the plain and the centred run start from the same initial model and use the
same training generator (so the minibatches are the same at first); only ``centering`` differs.
Everything else is the library's defaults (batch 100, no momentum, no weight decay, base fitted
to the data). The table reports the exact mean log-likelihood (nats per example) of the
training and test data after ``--updates`` updates, per seed and as mean ± standard error over
seeds, with the centred − plain difference.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/centering.py                 # 3 seeds, 2000 updates
    OMP_NUM_THREADS=1 python benchmarks/centering.py --updates 300 --seeds 0 --no-write

Writes ``benchmarks/results/centering.md`` (``--out``). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import importlib
import math
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import boltzlab as bl
from boltzlab.data.sequences import read_fasta
from boltzlab.models.potts_rbm import PottsRBM
from boltzlab.models.spin_rbm import SpinRBM

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_FASTA = Path("/work/shared/data/proteins/WW_domain_MSA.fasta")


@dataclass(frozen=True)
class Task:
    """One model family with its data: how to build a model and what to train and score on."""

    name: str
    build: Any  # seed -> model
    train: Any
    test: Any
    train_weights: torch.Tensor | None
    test_weights: torch.Tensor | None
    learning_rates: tuple[float, ...]


def binary_task(args: argparse.Namespace) -> Task:
    dataset = bl.data.load("digits")
    return Task(
        name=f"binary RBM 64×{args.hidden}, digits",
        build=lambda seed: bl.RBM(n_visible=dataset.n_visible, n_hidden=args.hidden, generator=seed),
        train=dataset.train,
        test=dataset.test,
        train_weights=None,
        test_weights=None,
        learning_rates=tuple(args.binary_learning_rates),
    )


def spin_task(args: argparse.Namespace) -> Task:
    dataset = bl.data.load("digits")  # 0/1 rows: a spin model reads 0 as −1
    return Task(
        name=f"spin RBM 64×{args.hidden} (±1 visible), digits",
        build=lambda seed: SpinRBM(n_visible=dataset.n_visible, n_hidden=args.hidden, generator=seed),
        train=dataset.train,
        test=dataset.test,
        train_weights=None,
        test_weights=None,
        learning_rates=tuple(args.binary_learning_rates),
    )


def potts_task(args: argparse.Namespace) -> Task:
    weighting = importlib.import_module("boltzlab.data.sequence_weights")
    alignment = read_fasta(args.fasta, alphabet="protein")
    sequences, q = alignment.sequences, alignment.alphabet.q
    started = time.perf_counter()
    weights = weighting.sequence_weights(sequences, q)
    split = weighting.homology_split(sequences, q, 0.1, generator=0)
    print(
        f"WW: {tuple(sequences.shape)}, effective number {float(weights.sum()):.0f}, "
        f"train {split.train.numel()} / test {split.test.numel()} ({time.perf_counter() - started:.0f} s)",
        flush=True,
    )
    n_sites = sequences.shape[1]
    return Task(
        name=f"Potts RBM {n_sites}×{q} sites, {args.hidden} hidden, WW domain",
        build=lambda seed: PottsRBM(
            n_sites=n_sites, n_states=q, n_hidden=args.hidden, alphabet="protein", generator=seed
        ),
        train=sequences[split.train],
        test=sequences[split.test],
        train_weights=weights[split.train],
        test_weights=weights[split.test],
        learning_rates=tuple(args.potts_learning_rates),
    )


def initial_model(task: Task, seed: int, init: str) -> Any:
    """The seed's model; with ``init="data"`` its visible biases start at the data's log-odds
    (per-site log-frequencies for a Potts RBM, then its gauge), as Hinton (2010, §8) advises and
    Melchior et al. (2016) do; ``"zero"`` is the binary models' default (a Potts RBM's is the
    profile: training starts its zero fields there unless ``profile_start`` is False)."""
    model = task.build(seed)
    if isinstance(model, PottsRBM):
        # Training would start zero fields at the profile by itself; "zero" means zero here.
        model.profile_start = init == "data"
    if init == "data":
        model.set_base_rate(task.train, sample_weights=task.train_weights)
        with torch.no_grad():
            # A spin's log-odds of +1 are 2b: half the base's log-odds give its marginals.
            model.visible_bias.copy_(
                model.base_logits / 2 if isinstance(model, SpinRBM) else model.base_logits
            )
        if isinstance(model, PottsRBM):
            model.apply_gauge_()
    return model


def run(
    task: Task, *, seed: int, centering: bool, learning_rate: float, init: str, args: argparse.Namespace
) -> dict[str, float]:
    model = initial_model(task, seed, init)
    started = time.perf_counter()
    bl.train(
        model,
        task.train,
        algorithm="pcd",
        n_chains=args.chains,
        batch_size=args.batch_size,
        n_updates=args.updates,
        learning_rate=learning_rate,
        centering=centering,
        sample_weights=task.train_weights,
        generator=1000 + seed,
        snapshots=0,
    )
    seconds = time.perf_counter() - started
    log_z = bl.exact_log_z(model)
    return {
        "train": bl.log_likelihood(model, task.train, log_z, sample_weights=task.train_weights),
        "test": bl.log_likelihood(model, task.test, log_z, sample_weights=task.test_weights),
        "seconds": seconds,
    }


def _mean_se(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.3f}"
    return f"{statistics.fmean(values):.3f} ± {statistics.stdev(values) / math.sqrt(len(values)):.3f}"


def table(title: str, results: dict[tuple[int, bool], dict[str, float]], seeds: list[int]) -> list[str]:
    lines = [
        f"### {title}",
        "",
        "| seed | plain train | centred train | plain test | centred test | Δ test (centred − plain) | seconds plain / centred |",
        "|---|---|---|---|---|---|---|",
    ]
    for seed in seeds:
        plain, centred = results[seed, False], results[seed, True]
        lines.append(
            f"| {seed} | {plain['train']:.3f} | {centred['train']:.3f} | {plain['test']:.3f} | "
            f"{centred['test']:.3f} | {centred['test'] - plain['test']:+.3f} | "
            f"{plain['seconds']:.1f} / {centred['seconds']:.1f} |"
        )
    column = {
        (split, flag): [results[seed, flag][split] for seed in seeds]
        for split in ("train", "test")
        for flag in (False, True)
    }
    differences = [results[seed, True]["test"] - results[seed, False]["test"] for seed in seeds]
    lines.append(
        f"| mean ± s.e. | {_mean_se(column['train', False])} | {_mean_se(column['train', True])} | "
        f"{_mean_se(column['test', False])} | {_mean_se(column['test', True])} | {_mean_se(differences)} | |"
    )
    return [*lines, ""]


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--updates", type=int, default=2000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--hidden", type=int, default=20)
    parser.add_argument("--chains", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--binary-learning-rates", type=float, nargs="+", default=[0.01, 0.05])
    parser.add_argument("--potts-learning-rates", type=float, nargs="+", default=[0.05])
    parser.add_argument("--inits", choices=("zero", "data"), nargs="+", default=["zero", "data"])
    parser.add_argument("--fasta", type=Path, default=DEFAULT_FASTA)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", choices=("binary", "spin", "potts"))
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "centering.md")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    tasks = []
    if args.only in (None, "binary"):
        tasks.append(binary_task(args))
    if args.only == "spin":
        tasks.append(spin_task(args))
    if args.only in (None, "potts"):
        if args.fasta.is_file():
            tasks.append(potts_task(args))
        else:
            print(f"skipping the Potts model: {args.fasta} is absent", file=sys.stderr)
    command = "OMP_NUM_THREADS=1 python benchmarks/centering.py " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    lines = [
        "# Centred against plain gradients",
        "",
        f"`{command.strip()}`: PCD-1, {args.chains} chains, batch {args.batch_size}, {args.updates} updates, "
        f"seeds {', '.join(map(str, args.seeds))}; exact log-likelihoods in nats per example (log Z by "
        f"enumerating 2^{args.hidden} hidden states). torch {torch.__version__}, {args.threads} thread(s), "
        f"{platform.machine()} {platform.processor() or ''}".rstrip()
        + ".",
        "",
    ]
    for task in tasks:
        # A short run first, so that no timed run pays for first-call costs (imports, GEMM set-up).
        warm = argparse.Namespace(**{**vars(args), "updates": 20})
        run(task, seed=0, centering=True, learning_rate=task.learning_rates[0], init="zero", args=warm)
        for learning_rate in task.learning_rates:
            for init in args.inits:
                results = {}
                for seed in args.seeds:
                    for centering in (False, True):
                        r = run(
                            task,
                            seed=seed,
                            centering=centering,
                            learning_rate=learning_rate,
                            init=init,
                            args=args,
                        )
                        results[seed, centering] = r
                        print(
                            f"{task.name}, lr {learning_rate:g}, {init} biases: seed {seed} "
                            f"{'centred' if centering else 'plain  '} train {r['train']:.3f} test {r['test']:.3f} "
                            f"({r['seconds']:.1f} s)",
                            flush=True,
                        )
                biases = (
                    "visible biases from 0" if init == "zero" else "visible biases at the data's log-odds"
                )
                lines += table(f"{task.name}; learning rate {learning_rate:g}, {biases}", results, args.seeds)
    lines.append(f"Total {time.perf_counter() - started:.0f} s.")
    print("\n".join(lines))
    if not args.no_write:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")
        print(f"wrote {args.out}")
    return lines


if __name__ == "__main__":
    main()
