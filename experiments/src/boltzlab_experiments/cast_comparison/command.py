"""``boltzlab reproduce cast``: SAP, FPCD and CAST learning of a DBM, compared as in the CAST paper.

Salakhutdinov (2010, *Learning deep Boltzmann machines using adaptive MCMC*, Table 1 and
Fig. 5; docs/algorithms.md §3.4): the same DBM trained by SAP, FPCD and CAST with the same budget
and seed on binarised MNIST (Fashion-MNIST if MNIST is absent); the training bound every
``eval_every`` updates (``log Z`` by AIS), the final test bound table, per-example AIS
``log p(v)`` on a few test cases, Gibbs vs adaptive-ST samples of the CAST model, and the
temperature trajectory of one CAST fast chain. The computation is
:func:`boltzlab_experiments.cast_comparison.run.run_cast_comparison`; this module loads data
and prints, :mod:`~boltzlab_experiments.cast_comparison.report` writes the files.

Files in OUT: ``bounds.csv`` (every tracked bound), ``table.csv`` and ``summary.md`` (final
table, stability statistics, verdicts, the paper's numbers), ``bound-curves.png``,
``samples.png``, ``temperature.png`` and ``fast-chain.csv``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from boltzlab import data as datasets
from boltzlab.cli.common import Device, command_options, format_seconds, format_table, report_written
from boltzlab.errors import BoltzlabError, ValidationError
from boltzlab_experiments import REPRODUCE_HELP
from boltzlab_experiments.cast_comparison.config import ALGORITHMS, CASTComparisonConfig
from boltzlab_experiments.cast_comparison.report import write_files
from boltzlab_experiments.cast_comparison.run import run_cast_comparison
from boltzlab_experiments.cast_comparison.verdicts import verdicts
from boltzlab_experiments.cli import choose_preset, data_root_option, default_to_one_thread, progress_bar
from boltzlab_experiments.tables import plus_minus

__all__ = ["cast", "load_cast_data", "parse_layers"]

_DATASETS = ("mnist", "fashion-mnist")


def load_cast_data(root: Path | None, seed: int) -> datasets.Dataset:
    """Binarised MNIST, else Fashion-MNIST; a ValidationError naming both reasons if neither loads."""
    reasons = []
    for name in _DATASETS:
        try:
            return datasets.load(name, root=root, generator=seed)
        except (BoltzlabError, OSError) as error:
            reasons.append(f"{name}: {' '.join(str(error).split())}")
    raise ValidationError("no dataset for the CAST comparison; " + "; ".join(reasons))


def parse_layers(text: str | None) -> tuple[int, ...] | None:
    """``"784,200,200"`` → ``(784, 200, 200)``; ``None`` stays ``None``; at least 3 positive sizes."""
    if text is None:
        return None
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise ValidationError(
            f"--layers must be comma-separated integers like 784,200,200, got {text!r}"
        ) from None
    if len(sizes) < 3 or min(sizes) < 1:
        raise ValidationError(
            f"--layers needs at least 3 positive sizes (visible and 2 hidden), got {text!r}"
        )
    return sizes


@click.command(
    "cast",
    short_help=REPRODUCE_HELP["cast"],
    epilog="""\b
Example:
  boltzlab reproduce cast --out results/cast --data-root /path/to/data
  boltzlab reproduce cast --tiny --out results/cast-tiny
  boltzlab reproduce cast --full --out results/cast-full   # the paper's 784-500-1000, on a GPU""",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("cast-comparison"),
    show_default=True,
    metavar="DIR",
    help="Directory for the figures, tables and summary.md.",
)
@click.option("--full", is_flag=True, help="The paper's size (784-500-1000, 200,000 updates): for a GPU.")
@click.option(
    "--tiny", is_flag=True, help="Toy sizes (seconds), to check the pipeline; the numbers mean nothing."
)
@click.option("--layers", metavar="SIZES", help="DBM layer sizes, e.g. 784,200,200 (overrides the preset).")
@click.option(
    "--updates", type=click.IntRange(min=1), help="Updates of every algorithm (overrides the preset)."
)
@click.option("--eval-every", type=click.IntRange(min=1), help="Updates between tracked bounds.")
@click.option("--pretrain-updates", type=click.IntRange(min=0), help="Pretraining updates per RBM (0: none).")
@click.option(
    "--algorithms",
    default=",".join(ALGORITHMS),
    show_default=True,
    help="Comma-separated algorithms among sap, fpcd, cast.",
)
@click.option("--operator", default="gibbs", show_default=True, help="Transition operator of every chain.")
@click.option(
    "--cast-chains",
    type=click.IntRange(min=1),
    help="CAST's slow (= fast) chains (default 50, the paper's; 100 matches SAP's gradient chains).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="The seed shared by every algorithm.")
@data_root_option("MNIST / Fashion-MNIST")
@click.option(
    "--device", type=Device(), default="cpu", show_default=True, help="Torch device (cuda for --full)."
)
@command_options
def cast(
    out: Path,
    full: bool,
    tiny: bool,
    layers: str | None,
    updates: int | None,
    eval_every: int | None,
    pretrain_updates: int | None,
    algorithms: str,
    operator: str,
    cast_chains: int | None,
    seed: int,
    data_root: Path | None,
    device: str,
) -> None:
    """Salakhutdinov (2010) again: is CAST's DBM learning steadier and better than SAP and FPCD?

    Writes bounds.csv, table.csv, fast-chain.csv, bound-curves.png, samples.png, temperature.png
    and summary.md. The scaled default (784-200-200, 2,000 updates) takes about 6 minutes on one core.
    """
    config = choose_preset(CASTComparisonConfig, full, tiny)
    label = "paper size" if full else "tiny" if tiny else "scaled"
    overrides: dict[str, Any] = {"seed": seed, "operator": operator, "device": device}
    overrides["algorithms"] = tuple(part.strip().lower() for part in algorithms.split(",") if part.strip())
    for name, value in (
        ("layer_sizes", parse_layers(layers)),
        ("n_updates", updates),
        ("eval_every", eval_every),
        ("pretrain_updates", pretrain_updates),
        ("cast_chains", cast_chains),
    ):
        if value is not None:
            overrides[name] = value
    config = replace(config, **overrides)
    default_to_one_thread(full=full)
    dataset = load_cast_data(data_root, seed)
    if dataset.n_visible != config.layer_sizes[0]:
        raise ValidationError(
            f"{dataset.name} has {dataset.n_visible} pixels but --layers starts with {config.layer_sizes[0]}"
        )
    test = dataset.test if dataset.test is not None else dataset.valid
    if test is None:
        raise ValidationError(f"{dataset.name} has no test split")
    sizes = "-".join(str(size) for size in config.layer_sizes)
    click.echo(
        f"CAST comparison ({label}): DBM {sizes} on {dataset.name}, {', '.join(config.algorithms)}, "
        f"{config.n_updates} updates each; writing to {out}/"
    )
    with progress_bar("cast comparison") as progress:
        result = run_cast_comparison(config, dataset.train, test, progress=progress)
    click.echo(
        format_table(
            ["algorithm", "test bound", "largest drop", "late |change|"],
            [
                [
                    run.algorithm,
                    plus_minus(run.test_bound, run.final_log_z_stderr),
                    f"{run.max_drop:.2f}",
                    f"{run.late_mean_abs_change:.2f}",
                ]
                for run in result.runs
            ],
        )
    )
    for line in verdicts(result):
        click.echo(line)
    click.echo(f"done in {format_seconds(result.seconds)}")
    report_written(write_files(out, result, dataset, label))
