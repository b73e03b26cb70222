"""``boltzlab reproduce front-end``: a Gaussian-binary RBM on grey-level images feeding a DBM.

The real-valued front end of Salakhutdinov & Hinton (2009, *Deep Boltzmann machines*, §4.2,
their NORB pipeline), on grey-level MNIST (Fashion-MNIST if MNIST is absent): standardised,
downsampled pixels → Gaussian-binary RBM (CD/PCD) → binary hidden activities → DBM (SAP).
The computation is :func:`boltzlab_experiments.front_end.run.run_front_end`; this module loads
the grey-level images and prints, :mod:`~boltzlab_experiments.front_end.report` makes the files.

Files in OUT: ``summary.md`` (settings, both stages' ``log Z`` and log-likelihoods / bounds
against their independent-unit baselines), ``results.csv`` (the same numbers, one per row),
``gaussian-rbm.safetensors`` and ``dbm.safetensors``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import click
import numpy as np

from boltzlab import data as datasets
from boltzlab.cli.common import Device, command_options, format_seconds, format_table, report_written
from boltzlab.data import readers
from boltzlab.errors import BoltzlabError, ValidationError
from boltzlab_experiments import REPRODUCE_HELP
from boltzlab_experiments.cli import data_root_option, default_to_one_thread, progress_bar
from boltzlab_experiments.front_end.config import FrontEndConfig
from boltzlab_experiments.front_end.report import front_end_summary_markdown, log_z_text, result_rows
from boltzlab_experiments.front_end.run import run_front_end
from boltzlab_experiments.tables import plus_minus, write_csv, write_text

__all__ = ["front_end", "load_grey_images"]

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


@click.command(
    "front-end",
    short_help=REPRODUCE_HELP["front-end"],
    epilog="""\b
Example:
  boltzlab reproduce front-end --out results/front-end --data-root /path/to/data
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
@click.option("--device", type=Device(), default="cpu", show_default=True, help="Torch device.")
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
                    log_z_text(result.gaussian_log_z),
                    plus_minus(result.gaussian_test_log_likelihood, result.gaussian_test_stderr),
                    f"{result.independent_test_log_likelihood:.2f}",
                ],
                [
                    "DBM, bound on log p(codes)",
                    log_z_text(result.dbm_log_z),
                    f"{result.dbm_test_bound:.2f}",
                    f"{result.independent_code_log_likelihood:.2f}",
                ],
            ],
        )
    )
    click.echo(f"done in {format_seconds(result.seconds)}")
    metadata = {"experiment": "front-end", "dataset": name, "seed": seed}
    written = [
        write_text(out / "summary.md", front_end_summary_markdown(result, dataset=name, label=label)),
        write_csv(out / "results.csv", ["quantity", "value"], result_rows(result)),
        result.gaussian_model.save(out / "gaussian-rbm.safetensors", metadata=metadata),
        result.dbm_model.save(out / "dbm.safetensors", metadata=metadata),
    ]
    report_written(written)
