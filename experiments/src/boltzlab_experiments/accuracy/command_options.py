"""What the three accuracy commands share: their options, preset and threads, the model cache, the end.

The benchmark RBMs are trained once and cached in ``--model-dir`` (default ``OUT/models``);
a cached model is reused only when its metadata says it was made with the same settings
(:func:`boltzlab_experiments.accuracy.models.benchmark_model_from`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
import torch

from boltzlab import data as datasets
from boltzlab.cli.common import format_seconds, report_written
from boltzlab.errors import BoltzlabError
from boltzlab.io import load_model
from boltzlab_experiments.accuracy.models import (
    MODEL_SPECS,
    BenchmarkModel,
    TrainingConfig,
    benchmark_model_from,
    train_benchmark_model,
)
from boltzlab_experiments.cli import choose_preset, data_root_option, default_to_one_thread
from boltzlab_experiments.findings import Finding
from boltzlab_experiments.tables import write_text

__all__ = [
    "MODEL_SEED",
    "announce",
    "benchmark_options",
    "configure",
    "finish",
    "held_out",
    "load_models",
    "model_option",
]

# Benchmark models are trained with one fixed seed, so that every benchmark seed reuses them.
MODEL_SEED = 0


def benchmark_options(default_out: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options every accuracy benchmark takes."""

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        options = [
            click.option(
                "--out",
                type=click.Path(file_okay=False, path_type=Path),
                default=Path(default_out),
                show_default=True,
                metavar="DIR",
                help="Directory for the tables, the PNG and summary.md.",
            ),
            click.option(
                "--full", is_flag=True, help="Closer to the papers (longer training, more repeats; slow)."
            ),
            click.option(
                "--tiny",
                is_flag=True,
                help="Toy sizes (seconds), to check the pipeline; numbers mean nothing.",
            ),
            click.option("--seed", type=int, default=0, show_default=True, help="Seed of the estimators."),
            click.option(
                "--dataset",
                default="mnist",
                show_default=True,
                metavar="NAME|PATH",
                help="Training data of the RBMs (binarised; its test split feeds RAISE).",
            ),
            data_root_option("the data"),
            click.option(
                "--model-dir",
                type=click.Path(file_okay=False, path_type=Path),
                metavar="DIR",
                help="Where the trained RBMs are cached (default OUT/models); share it between benchmarks.",
            ),
        ]
        for option in reversed(options):
            function = option(function)
        return function

    return decorate


model_option = click.option(
    "--model",
    "model_name",
    type=click.Choice(list(MODEL_SPECS)),
    help="Which trained RBM (default: cd25, like the paper's CD-25 model).",
)


def configure(config_class: Any, *, full: bool, tiny: bool, model_name: str | None = None) -> Any:
    """The preset (``--model`` overriding its RBM), with one torch thread unless ``--full``/``--threads``."""
    config = choose_preset(config_class, full, tiny)
    if model_name is not None:
        config = replace(config, model=model_name)
    default_to_one_thread(full=full)
    return config


def announce(name: str, config: Any, out: Path) -> None:
    click.echo(f"{name} ({config.label}) with {torch.get_num_threads()} torch thread(s); writing to {out}/")


def held_out(dataset: datasets.Dataset) -> torch.Tensor:
    """The test split, else the validation split, else (with a warning) the training data."""
    for split in (dataset.test, dataset.valid):
        if split is not None and split.shape[0] > 0:
            return split
    click.echo(
        f"warning: {dataset.name} has no test or validation split; RAISE uses training examples", err=True
    )
    return dataset.train


def load_models(
    names: Sequence[str], training: TrainingConfig, dataset: datasets.Dataset, source: str, model_dir: Path
) -> tuple[list[BenchmarkModel], list[Path], float]:
    """The benchmark RBMs, loaded from ``model_dir`` when made with these settings, else trained."""
    models, written, seconds = [], [], 0.0
    for name in names:
        path = model_dir / f"{name}.safetensors"
        benchmark = None
        if path.exists():
            with contextlib.suppress(BoltzlabError, OSError):
                benchmark = benchmark_model_from(
                    load_model(path), name, training, dataset=source, seed=MODEL_SEED
                )
            if benchmark is None:
                click.echo(f"{path} was made with other settings; training it again", err=True)
        if benchmark is None:
            click.echo(
                f"training the {MODEL_SPECS[name].label} RBM ({training.n_updates} updates) ...", err=True
            )
            benchmark = train_benchmark_model(name, training, dataset.train, seed=MODEL_SEED, dataset=source)
            seconds += benchmark.train_seconds + benchmark.exact_seconds
            written.append(benchmark.model.save(path))
            click.echo(
                f"  trained in {format_seconds(benchmark.train_seconds)}; exact log Z = {benchmark.exact_log_z:.4f} "
                f"(enumerated in {format_seconds(benchmark.exact_seconds)})",
                err=True,
            )
        else:
            click.echo(
                f"{benchmark.label} RBM from {path}: exact log Z = {benchmark.exact_log_z:.4f}", err=True
            )
        models.append(benchmark)
    return models, written, seconds


def finish(out: Path, summary: str, finding: Finding, written: list[Path], timings: dict[str, float]) -> None:
    written.append(write_text(out / "summary.md", summary))
    click.echo(f"verdict: {finding.claim}? {finding.answer} ({finding.verdict})")
    click.echo(f"  {finding.text}")
    click.echo(f"done in {format_seconds(sum(timings.values()))}")
    report_written(written)
