"""What the three accuracy commands share: their options, preset and threads, the model cache, the end.

The benchmark RBMs are trained once and cached in ``--model-dir`` (default ``OUT/models``);
a cached model is reused only when its metadata says it was made with the same settings
(:func:`boltzlab_experiments.accuracy.models.benchmark_model_from`).

The two RTS-paper commands (``rts-vs-ais``, ``estimators-vs-k``) also take :func:`paper_options`:
``--preset`` (e.g. ``paper``), and ``--model-file`` with ``--reference-log-z`` and
``--reference-stderr`` to run on a saved RBM scored against a reference ``log Z``
(:func:`supplied_model`). In a process group of several processes they split their repeats
(:func:`share_of_repeats`, :func:`gather_shares`): their commands carry ``splits_over_ranks``,
so that ``boltzlab reproduce`` keeps torchrun's process group for them
(``torchrun --nproc-per-node 4 --no-python boltzlab reproduce rts-vs-ais ...``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import click
import torch

from boltzlab import data as datasets
from boltzlab import distributed
from boltzlab.cli.common import format_seconds, report_written
from boltzlab.errors import BoltzlabError
from boltzlab.io import load_model
from boltzlab_experiments.accuracy.models import (
    MODEL_SPECS,
    BenchmarkModel,
    TrainingConfig,
    benchmark_model_from,
    supplied_benchmark_model,
    train_benchmark_model,
)
from boltzlab_experiments.cli import choose_preset, data_root_option, default_to_one_thread
from boltzlab_experiments.findings import Finding
from boltzlab_experiments.presets import available_presets
from boltzlab_experiments.tables import write_text

__all__ = [
    "MODEL_SEED",
    "BenchmarkSetup",
    "announce",
    "benchmark_options",
    "check_model_file_options",
    "configure",
    "finish",
    "gather_shares",
    "held_out",
    "load_models",
    "model_option",
    "paper_options",
    "set_up_benchmark",
    "share_of_repeats",
    "supplied_model",
]

# Benchmark models are trained with one fixed seed, so that every benchmark seed reuses them.
MODEL_SEED = 0
# What summary.md says of a reference whose origin --reference-source does not give.
UNNAMED_REFERENCE = "given with --reference-log-z; not computed by this run"

Result = TypeVar("Result")


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


def paper_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--preset`` and the supplied model (``--model-file`` and its reference) of the RTS-paper commands."""
    options = [
        click.option(
            "--preset",
            type=click.Choice(available_presets(__package__)),
            help="Sizes by name (presets/NAME.toml): 'paper' is the paper's (100 chains, K = 100, its "
            "budgets; about an hour of one core on a 784×500 RBM). Default: scaled, or --full/--tiny.",
        ),
        click.option(
            "--model-file",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            metavar="PATH",
            help="Run on this saved RBM (its width must be the data's) instead of training one; needs "
            "--reference-log-z and --reference-stderr.",
        ),
        click.option(
            "--reference-log-z",
            type=float,
            metavar="NATS",
            help="With --model-file: the log Z the estimates are scored against (no exact value exists).",
        ),
        click.option(
            "--reference-stderr",
            type=click.FloatRange(min=0.0),
            metavar="NATS",
            help="With --model-file: the standard error of --reference-log-z.",
        ),
        click.option(
            "--reference-source",
            metavar="TEXT",
            help="With --model-file: where the reference comes from, quoted in summary.md (e.g. 'long AIS runs').",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def configure(
    config_class: Any,
    *,
    full: bool,
    tiny: bool,
    model_name: str | None = None,
    preset: str | None = None,
) -> Any:
    """The preset (``--model`` overriding its RBM), with one torch thread unless ``--full``/``--threads``.

    ``--preset NAME`` names the preset instead of ``--full``/``--tiny`` (not with them).
    """
    if preset is not None:
        if full or tiny:
            raise click.UsageError("give --preset or --full/--tiny, not both")
        config = config_class.preset(preset)
        full = preset == "full"
    else:
        config = choose_preset(config_class, full, tiny)
    if model_name is not None:
        config = replace(config, model=model_name)
    default_to_one_thread(full=full)
    return config


def check_model_file_options(
    model_file: Path | None,
    reference_log_z: float | None,
    reference_stderr: float | None,
    reference_source: str | None,
    *,
    model_name: str | None,
    model_dir: Path | None,
) -> None:
    """Refuse an incomplete or contradictory ``--model-file`` / ``--reference-*`` combination."""
    reference = {
        "--reference-log-z": reference_log_z,
        "--reference-stderr": reference_stderr,
        "--reference-source": reference_source,
    }
    if model_file is None:
        given = [flag for flag, value in reference.items() if value is not None]
        if given:
            raise click.UsageError(f"{', '.join(given)} only go(es) with --model-file PATH")
        return
    missing = [flag for flag in ("--reference-log-z", "--reference-stderr") if reference[flag] is None]
    if missing:
        raise click.UsageError(
            f"--model-file needs {' and '.join(missing)}: a saved RBM's log Z cannot be enumerated here, "
            "so the estimates are scored against a reference you give (e.g. from long AIS runs)"
        )
    if reference_log_z is not None and not math.isfinite(reference_log_z):
        raise click.BadParameter(f"must be finite, got {reference_log_z}", param_hint="--reference-log-z")
    clashing = [flag for flag, value in (("--model", model_name), ("--model-dir", model_dir)) if value]
    if clashing:
        raise click.UsageError(f"{' and '.join(clashing)} choose(s) a trained model; not with --model-file")


def supplied_model(
    path: Path,
    *,
    reference_log_z: float,
    reference_stderr: float,
    reference_source: str | None,
    n_visible: int,
) -> BenchmarkModel:
    """The RBM saved at ``path`` as a benchmark scored against the given reference ``log Z``.

    Its visible layer must be ``n_visible`` wide (the data's: RAISE starts from test rows).
    """
    try:
        model = load_model(path)
        benchmark = supplied_benchmark_model(
            model,
            path.name,
            reference_log_z=reference_log_z,
            reference_stderr=reference_stderr,
            reference_source=reference_source or UNNAMED_REFERENCE,
        )
    except BoltzlabError as error:
        raise click.BadParameter(str(error), param_hint="--model-file") from None
    if benchmark.model.n_visible != n_visible:
        raise click.BadParameter(
            f"{path} has {benchmark.model.n_visible} visible units but the data have {n_visible} columns",
            param_hint="--model-file",
        )
    click.echo(
        f"{benchmark.label} RBM from {path}: {benchmark.model.n_hidden} hidden units, scored against the "
        f"reference log Z = {reference_log_z:.4f} ± {reference_stderr:.4f}",
        err=True,
    )
    return benchmark


def share_of_repeats(n_repeats: int) -> tuple[int, ...] | None:
    """This process's repeats in a process group of several, else ``None`` (all of them, here).

    Rank ``r`` of ``W`` takes the consecutive repeats ``b`` with ``⌊b·W/n_repeats⌋ = r``
    (:func:`boltzlab.distributed.owned_blocks`); with more processes than repeats some idle.
    """
    here = distributed.topology()
    if not here.active or here.world_size == 1:
        return None
    return tuple(distributed.owned_blocks(n_repeats, here))


def gather_shares(share: Result, merge: Callable[[Sequence[Result]], Result]) -> Result:
    """Every process's share of the repeats, merged (a collective); ``share`` itself outside a group.

    Each process merges (so all hold the same result); only rank 0 goes on to write.
    """
    here = distributed.topology()
    if not here.active or here.world_size == 1:
        return share
    return merge(distributed.all_gather(share, what="gathering the repeats"))


def announce(name: str, config: Any, out: Path, *, split_repeats: bool = False) -> None:
    """The first line: which preset, how many threads (and processes, when they split the repeats), where to."""
    here = distributed.topology()
    where = (
        f"on {here.world_size} processes sharing the {config.n_repeats} repeats, each with"
        if split_repeats and here.active and here.world_size > 1
        else "with"
    )
    click.echo(
        f"{name} ({config.label}) {where} {torch.get_num_threads()} torch thread(s); writing to {out}/"
    )


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
    """The benchmark RBMs, loaded from ``model_dir`` when made with these settings, else trained.

    In a process group every process trains alike, alone (``distributed.local``: the same model
    as without torchrun, not a data-parallel one), and rank 0 alone writes the cache.
    """
    save = distributed.topology().is_main  # read outside local(), where every process is rank 0
    with distributed.local():
        return _load_models(names, training, dataset, source, model_dir, save=save)


def _load_models(
    names: Sequence[str],
    training: TrainingConfig,
    dataset: datasets.Dataset,
    source: str,
    model_dir: Path,
    *,
    save: bool,
) -> tuple[list[BenchmarkModel], list[Path], float]:
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
            if save:
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


@dataclass(frozen=True)
class BenchmarkSetup:
    """What an RTS-paper command has once its options are read: the sizes, the data, this
    process's repeats (``None``: all), the RBM to score and what training it wrote and cost."""

    config: Any
    loaded: datasets.Dataset
    repeats: tuple[int, ...] | None
    benchmark: BenchmarkModel
    written: list[Path]
    train_seconds: float


def set_up_benchmark(
    name: str,
    config_class: Any,
    *,
    full: bool,
    tiny: bool,
    preset: str | None,
    dataset: str,
    data_root: Path | None,
    out: Path,
    model_name: str | None,
    model_dir: Path | None,
    model_file: Path | None,
    reference_log_z: float | None,
    reference_stderr: float | None,
    reference_source: str | None,
) -> BenchmarkSetup:
    """The options checked, the preset chosen, the data loaded, this process's share of the
    repeats, and the RBM: trained (or loaded from the cache) or the supplied ``--model-file``."""
    check_model_file_options(
        model_file,
        reference_log_z,
        reference_stderr,
        reference_source,
        model_name=model_name,
        model_dir=model_dir,
    )
    config = configure(config_class, full=full, tiny=tiny, model_name=model_name, preset=preset)
    loaded = datasets.load(dataset, root=data_root)
    repeats = share_of_repeats(config.n_repeats)
    announce(name, config, out, split_repeats=repeats is not None)
    if model_file is None:
        (benchmark,), written, train_seconds = load_models(
            [config.model], config.training, loaded, dataset, model_dir or out / "models"
        )
        return BenchmarkSetup(config, loaded, repeats, benchmark, written, train_seconds)
    assert reference_log_z is not None and reference_stderr is not None  # checked above
    benchmark = supplied_model(
        model_file,
        reference_log_z=reference_log_z,
        reference_stderr=reference_stderr,
        reference_source=reference_source,
        n_visible=loaded.train.shape[1],
    )
    return BenchmarkSetup(config, loaded, repeats, benchmark, [], 0.0)
