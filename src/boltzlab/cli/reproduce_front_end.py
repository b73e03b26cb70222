"""``boltzlab reproduce front-end``: a Gaussian-binary RBM on grey-level images feeding a DBM.

The real-valued front end of Salakhutdinov & Hinton (2009, *Deep Boltzmann machines*, §4.2,
their NORB pipeline), on grey-level MNIST (Fashion-MNIST if MNIST is absent): standardised,
downsampled pixels → Gaussian-binary RBM (CD/PCD) → binary hidden activities → DBM (SAP).
The computation is :func:`boltzlab.experiments.front_end.run_front_end`; this module loads the
grey-level images, writes the files and prints.

Files in OUT: ``summary.md`` (settings, both stages' ``log Z`` and log-likelihoods / bounds
against their independent-unit baselines), ``results.csv`` (the same numbers, one per row),
``gaussian-rbm.safetensors`` and ``dbm.safetensors``.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
import numpy as np
import torch

import boltzlab
from boltzlab import data as datasets
from boltzlab.cli.common import command_options, format_seconds, format_table, report_written
from boltzlab.cli.reproduce_common import (
    data_root_option,
    default_to_one_thread,
    markdown_table,
    plus_minus,
    progress_bar,
    write_csv,
)
from boltzlab.data import readers
from boltzlab.errors import BoltzlabError, ValidationError
from boltzlab.experiments.front_end import FrontEndConfig, FrontEndResult, LogZReport, run_front_end
from boltzlab.io import write_atomic

__all__ = ["front_end", "front_end_summary_markdown", "load_grey_images"]

_DATASETS = ("mnist", "fashion-mnist")


def load_grey_images(
    root: Path | None, *, name: str | None = None, n_train: int | None = None, n_test: int | None = None
) -> tuple[str, np.ndarray, np.ndarray]:
    """``(dataset name, train images, test images)`` as uint8 grey levels, shape ``(n, 28, 28)``.

    The files are found as :func:`boltzlab.data.load` finds them (``root``, ``BOLTZLAB_DATA``,
    the standard locations); ``name`` None tries MNIST, then Fashion-MNIST.
    """
    reasons = []
    for candidate in (name,) if name is not None else _DATASETS:
        try:
            # load() locates the files (and checks them); its binarised copy is not used.
            found = datasets.load(candidate, root=root, n_train=1, n_test=1)
        except (BoltzlabError, OSError) as error:
            reasons.append(f"{candidate}: {' '.join(str(error).split())}")
            continue
        if found.source.endswith(".npz"):
            arrays = readers.read_npz(found.source)
            train, test = arrays["x_train"], arrays["x_test"]
        else:
            paths = found.source.split("; ")  # x_train, y_train, x_test, y_test
            train, test = readers.read_idx(paths[0]), readers.read_idx(paths[2])
        train = train[:n_train] if n_train is not None else train
        test = test[:n_test] if n_test is not None else test
        return candidate, np.asarray(train), np.asarray(test)
    raise ValidationError("no grey-level images for the front end; " + "; ".join(reasons))


def _log_z_text(report: LogZReport) -> str:
    text = f"AIS {plus_minus(report.ais, report.ais_stderr)}"
    if math.isfinite(report.exact):
        text += f", exact {report.exact:.3f} (z = {report.z_score:+.2f})"
    return text


def _rows(result: FrontEndResult) -> list[list[Any]]:
    """``[quantity, value]`` rows of every number the run measured."""
    values = {
        "n_visible": result.standardizer.n_visible,
        "gaussian_log_z_ais": result.gaussian_log_z.ais,
        "gaussian_log_z_ais_stderr": result.gaussian_log_z.ais_stderr,
        "gaussian_log_z_exact": result.gaussian_log_z.exact,
        "gaussian_train_log_likelihood": result.gaussian_train_log_likelihood,
        "gaussian_test_log_likelihood": result.gaussian_test_log_likelihood,
        "gaussian_test_stderr": result.gaussian_test_stderr,
        "independent_gaussian_test_log_likelihood": result.independent_test_log_likelihood,
        "log_jacobian_to_grey_levels": result.standardizer.log_jacobian,
        "reconstruction_error": result.reconstruction_error,
        "code_activity": result.code_activity,
        "dbm_log_z_ais": result.dbm_log_z.ais,
        "dbm_log_z_ais_stderr": result.dbm_log_z.ais_stderr,
        "dbm_log_z_exact": result.dbm_log_z.exact,
        "dbm_train_bound": result.dbm_train_bound,
        "dbm_test_bound": result.dbm_test_bound,
        "independent_bernoulli_code_test_log_likelihood": result.independent_code_log_likelihood,
        "gaussian_seconds": result.gaussian_seconds,
        "dbm_seconds": result.dbm_seconds,
        "seconds": result.seconds,
    }
    return [[key, f"{float(value):.8g}"] for key, value in values.items()]


def front_end_summary_markdown(result: FrontEndResult, *, dataset: str, label: str) -> str:
    """The run's ``summary.md``: settings, the two stages' numbers and their baselines."""
    config, standardizer = result.config, result.standardizer
    height, width = standardizer.image_shape
    sizes = "-".join(str(size) for size in config.dbm_layer_sizes)
    gain = result.gaussian_test_log_likelihood - result.independent_test_log_likelihood
    code_gain = result.dbm_test_bound - result.independent_code_log_likelihood
    header = ["stage", "log Z", "train", "test", "independent units (test)", "gain"]
    rows = [
        [
            f"Gaussian-binary RBM {standardizer.n_visible}×{config.n_hidden}, log p(v)",
            _log_z_text(result.gaussian_log_z),
            f"{result.gaussian_train_log_likelihood:.2f}",
            plus_minus(result.gaussian_test_log_likelihood, result.gaussian_test_stderr),
            f"{result.independent_test_log_likelihood:.2f}",
            f"{gain:+.2f}",
        ],
        [
            f"DBM {sizes}, lower bound on log p(codes)",
            _log_z_text(result.dbm_log_z),
            f"{result.dbm_train_bound:.2f}",
            f"{result.dbm_test_bound:.2f}",
            f"{result.independent_code_log_likelihood:.2f}",
            f"{code_gain:+.2f}",
        ],
    ]
    lines = [
        f"# Real-valued front end ({label})",
        "",
        f"Grey-level {dataset}: {config.n_train or 'all'} training / {config.n_test or 'all'} test images, "
        f"pooled {config.downsample}×{config.downsample} to {height}×{width}, pixels with training "
        f"std < {config.min_pixel_std} dropped ({standardizer.n_visible} kept), standardised (σ = 1 fixed). "
        f"Stage 1: Gaussian-binary RBM, {config.gaussian_algorithm.upper()}, {config.gaussian_updates} updates, "
        f"learning rate {config.gaussian_learning_rate} ({config.gaussian_lr_schedule} schedule), momentum {config.gaussian_momentum}, minibatch "
        f"{config.batch_size}, {config.n_chains} chains; Gaussian base fitted to the pixels. Codes: "
        f"{'h ~ p(h|v)' if config.code_mode == 'sample' else 'p(h|v) > 1/2'} (mean activity "
        f"{result.code_activity:.3f}). Stage 2: DBM {sizes}, greedy pretraining {config.pretrain_updates} "
        f"updates per RBM, SAP {config.dbm_updates} updates at {config.dbm_learning_rate}·2000/(2000 + t). "
        f"log Z by AIS ({config.ais_chains} runs, {config.ais_temperatures} temperatures; ± one standard "
        f"error), exact where the enumerated layers have ≤ {config.exact_limit} units; the likelihoods use "
        f"the exact value when there is one. Seed {config.seed}.",
        "",
        markdown_table(header, rows),
        "",
        "Nats per example. Stage 1 is a density of standardised pixels (add "
        f"{standardizer.log_jacobian:.2f} for grey levels in [0, 1] over the kept pixels); its baseline is "
        "the independent Gaussian fitted to the training pixels (the model without hidden units). Stage 2 "
        "bounds the probability of the binary codes, not of the pixels; its baseline is independent "
        "Bernoulli units with the codes' smoothed rates. The test ± is the standard error over examples.",
        "",
        f"Time: stage 1 {format_seconds(result.gaussian_seconds)}, stage 2 {format_seconds(result.dbm_seconds)}, "
        f"total {format_seconds(result.seconds)}; boltzlab {boltzlab.__version__}, "
        f"{torch.get_num_threads()} torch thread(s).",
        "",
    ]
    return "\n".join(lines)


@click.command(
    "front-end",
    epilog="""\b
Example:
  boltzlab reproduce front-end --out results/front-end --data-root ../shared/data
  boltzlab reproduce front-end --tiny --out results/front-end-tiny
  boltzlab reproduce front-end --hidden 20 --updates 5000 --out results/front-end-20""",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("front-end"),
    show_default=True,
    metavar="DIR",
    help="Directory for summary.md, results.csv and the two model files.",
)
@click.option(
    "--tiny", is_flag=True, help="Toy sizes (seconds), to check the pipeline; the numbers mean little."
)
@click.option(
    "--dataset",
    type=click.Choice(_DATASETS),
    help="Grey-level images to use (default: MNIST, else Fashion-MNIST).",
)
@click.option("--hidden", type=click.IntRange(min=1), help="Hidden units of the Gaussian-binary RBM.")
@click.option("--dbm-hidden", metavar="SIZES", help="DBM hidden layer sizes, e.g. 100,100.")
@click.option("--updates", type=click.IntRange(min=1), help="Training updates of each stage.")
@click.option("--n-train", type=click.IntRange(min=1), help="Training images used.")
@click.option("--n-test", type=click.IntRange(min=1), help="Test images used.")
@click.option("--algorithm", type=click.Choice(("cd", "pcd")), help="Training of the Gaussian-binary RBM.")
@click.option("--seed", type=int, default=0, show_default=True)
@data_root_option("MNIST / Fashion-MNIST")
@click.option("--device", default="cpu", show_default=True, help="Torch device.")
@command_options
def front_end(
    out: Path,
    tiny: bool,
    dataset: str | None,
    hidden: int | None,
    dbm_hidden: str | None,
    updates: int | None,
    n_train: int | None,
    n_test: int | None,
    algorithm: str | None,
    seed: int,
    data_root: Path | None,
    device: str,
) -> None:
    """Gaussian-binary RBM on grey-level images, then a DBM on its binary hidden activities.

    Writes summary.md, results.csv, gaussian-rbm.safetensors and dbm.safetensors. The scaled
    default (14×14 MNIST, 20,000 images, 100 hidden units, DBM 100-100-100) takes minutes on one core.
    """
    config = FrontEndConfig.tiny() if tiny else FrontEndConfig.scaled()
    label = "tiny" if tiny else "scaled"
    overrides: dict[str, Any] = {"seed": seed, "device": device}
    if dbm_hidden is not None:
        try:
            overrides["dbm_hidden"] = tuple(int(part) for part in dbm_hidden.split(","))
        except ValueError:
            raise ValidationError(
                f"--dbm-hidden must be comma-separated integers, got {dbm_hidden!r}"
            ) from None
    if updates is not None:
        overrides.update(gaussian_updates=updates, dbm_updates=updates)
    for name, value in (
        ("n_hidden", hidden),
        ("n_train", n_train),
        ("n_test", n_test),
        ("gaussian_algorithm", algorithm),
    ):
        if value is not None:
            overrides[name] = value
    config = replace(config, **overrides)
    default_to_one_thread()
    name, train_images, test_images = load_grey_images(
        data_root, name=dataset, n_train=config.n_train, n_test=config.n_test
    )
    sizes = "-".join(str(size) for size in config.dbm_layer_sizes)
    click.echo(
        f"front end ({label}): grey-level {name}, Gaussian-binary RBM with {config.n_hidden} hidden units "
        f"→ DBM {sizes}; writing to {out}/"
    )
    with progress_bar("front end") as progress:
        result = run_front_end(config, train_images, test_images, progress=progress)
    click.echo(
        format_table(
            ["stage", "log Z", "test", "independent units"],
            [
                [
                    "Gaussian-binary RBM, log p(v)",
                    _log_z_text(result.gaussian_log_z),
                    plus_minus(result.gaussian_test_log_likelihood, result.gaussian_test_stderr),
                    f"{result.independent_test_log_likelihood:.2f}",
                ],
                [
                    "DBM, bound on log p(codes)",
                    _log_z_text(result.dbm_log_z),
                    f"{result.dbm_test_bound:.2f}",
                    f"{result.independent_code_log_likelihood:.2f}",
                ],
            ],
        )
    )
    click.echo(f"done in {format_seconds(result.seconds)}")
    metadata = {"experiment": "front-end", "dataset": name, "seed": seed}
    written = [
        write_atomic(
            out / "summary.md",
            front_end_summary_markdown(result, dataset=name, label=label).encode("utf-8"),
        ),
        write_csv(out / "results.csv", ["quantity", "value"], _rows(result)),
        result.gaussian_model.save(out / "gaussian-rbm.safetensors", metadata=metadata),
        result.dbm_model.save(out / "dbm.safetensors", metadata=metadata),
    ]
    report_written(written)
