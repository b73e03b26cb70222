"""``boltzlab reproduce rts-tracking``: track train/validation log-likelihood with RTS during training.

Carlson et al. (2016, §4.4; docs/algorithms.md §4.3). The computations are
:func:`~boltzlab_experiments.rts_tracking.run.run_tracking` and
:func:`~boltzlab_experiments.rts_tracking.timing.run_timing`; this module loads the data,
shows progress, writes ``tracking.png``, ``tracking.csv``, ``timing.csv`` and ``summary.md``
and prints.
"""

from __future__ import annotations

from pathlib import Path

import click
import torch

from boltzlab import data as datasets
from boltzlab.cli.common import command_options, format_table, report_written
from boltzlab_experiments import REPRODUCE_HELP
from boltzlab_experiments.cli import choose_preset, data_root_option, default_to_one_thread, progress_bar
from boltzlab_experiments.rts_tracking.config import RTSTrackingConfig
from boltzlab_experiments.rts_tracking.report import (
    TIMING_HEADER,
    TRACKING_HEADER,
    timing_rows,
    tracking_rows,
    tracking_summary,
)
from boltzlab_experiments.rts_tracking.run import run_tracking
from boltzlab_experiments.rts_tracking.timing import run_timing
from boltzlab_experiments.tables import write_csv, write_text

__all__ = ["rts_tracking"]


@click.command(
    "rts-tracking",
    short_help=REPRODUCE_HELP["rts-tracking"],
    epilog="""\b
Example:
  boltzlab reproduce rts-tracking --out results/rts-tracking --data-root /path/to/data
  boltzlab reproduce rts-tracking --tiny --no-timing --out /tmp/rts""",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("rts-tracking"),
    show_default=True,
    metavar="DIR",
    help="Directory for tracking.png, tracking.csv, timing.csv and summary.md.",
)
@click.option(
    "--full", is_flag=True, help="The paper's sizes (hours on two cores) instead of the scaled default."
)
@click.option(
    "--tiny", is_flag=True, help="Toy sizes (seconds), to check the pipeline; the numbers mean nothing."
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--dataset",
    default="nade-dna",
    show_default=True,
    help="Binary dataset with a validation split (nade-dna: 1400/600; dna has no validation split).",
)
@data_root_option("the data")
@click.option("--no-timing", is_flag=True, help="Skip the three timing runs.")
@command_options
def rts_tracking(
    out: Path, full: bool, tiny: bool, seed: int, dataset: str, data_root: Path | None, no_timing: bool
) -> None:
    """Carlson et al. (2016, §4.4): track train/validation log-likelihood with RTS during training.

    Pretrains an RBM with CD-1, trains it with RMSspectral on simulated-tempering chains whose
    log Ẑ the damped RTS update keeps current, runs AIS every few hundred updates on the same
    model, and times the tracking against the same sampler untracked and against PCD with the
    same chain-sweeps. Writes tracking.png (tracked vs AIS), tracking.csv, timing.csv and
    summary.md. The scaled default takes a few minutes on one core (one torch thread unless
    --threads is given; --full uses torch's default).
    """
    from boltzlab.plotting import save_figure
    from boltzlab_experiments.rts_tracking.plots import tracking_figure

    config = choose_preset(RTSTrackingConfig, full, tiny)
    loaded = datasets.load(dataset, root=data_root)
    default_to_one_thread(full=full)
    click.echo(
        f"rts-tracking ({config.label}) on {dataset} with {torch.get_num_threads()} torch thread(s); writing to {out}/"
    )
    with progress_bar("tracking") as progress:
        result = run_tracking(config, loaded, seed=seed, progress=progress)
    timings = None
    if not no_timing and config.timing_updates > 0:
        with progress_bar("timing") as progress:
            timings = run_timing(config, loaded, seed=seed, progress=progress)
    written = [
        save_figure(tracking_figure(result, timings), out / "tracking.png"),
        write_csv(out / "tracking.csv", TRACKING_HEADER, tracking_rows(result)),
    ]
    if timings is not None:
        written.append(write_csv(out / "timing.csv", TIMING_HEADER, timing_rows(timings)))
    summary = tracking_summary(result, timings, dataset=dataset, seed=seed)
    written.append(write_text(out / "summary.md", summary))
    difference, stderr = result.differences()
    click.echo(
        format_table(
            ["update", "tracked − AIS log Z", "s.e."],
            [
                [str(int(update)), f"{float(d):+.3f}", f"{float(s):.3f}"]
                for update, d, s in zip(result.ais.updates.tolist(), difference, stderr, strict=True)
            ],
        )
    )
    if timings is not None:
        click.echo(
            f"extra CPU time of tracking: {timings.tracking_fraction:+.1%} over the same sampler untracked "
            f"(callback {timings.callback_fraction:+.1%}, ĉ sums and update {timings.bookkeeping_fraction:+.1%}); "
            f"{timings.overhead_vs_pcd:+.1%} over PCD with equal chain-sweeps"
        )
    report_written(written)
