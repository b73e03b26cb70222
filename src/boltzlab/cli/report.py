"""``boltzlab report RUN_DIR``: one self-contained HTML page of a run, ``RUN_DIR/report.html``.

The page (:mod:`boltzlab.cli.run_report` fills it, :mod:`boltzlab.plotting.report_page`
renders it) shows the configuration, training curves, samples, temperature trajectories and
swap rates where tempering ran, the log Z / log-likelihood table with error bars and verdicts
(from ``evaluation.json``, which ``boltzlab evaluate --out RUN_DIR`` writes), and timings; a
section the run did not record says so. ``boltzlab train`` and ``boltzlab demo`` write it at
the end of a run, ``evaluate --out`` rewrites it with the estimates; this command rebuilds it
at any time. It needs no network and no script: open it in any browser.
"""

from __future__ import annotations

from pathlib import Path

import click

from boltzlab.cli.common import SEED, alone_on_rank_zero, command_options, report_written

__all__ = ["report"]


@click.command(
    "report",
    short_help="Write RUN_DIR/report.html: the whole run on one page.",
    epilog="""\b
Example:
  boltzlab train --data digits --hidden 16 --algorithm pt --levels 5 --out runs/pt
  boltzlab evaluate runs/pt/model.safetensors --data digits --out runs/pt
  boltzlab report runs/pt              # then open runs/pt/report.html""",
)
@click.argument("run_dir", metavar="RUN_DIR", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Where to write the page (default RUN_DIR/report.html).",
)
@click.option(
    "--seed",
    type=SEED,
    default=0,
    show_default=True,
    help="Seed of the samples and the tempered run drawn for the page when the run lacks them.",
)
@command_options
def report(run_dir: Path, out: Path | None, seed: int) -> None:
    """Write one self-contained HTML page of a run: configuration, curves, samples, tempering,
    log Z with verdicts, timings."""
    from boltzlab.cli.run_report import write_report  # here: matplotlib stays out of `boltzlab --help`

    if not alone_on_rank_zero():
        return  # under torchrun, rank 0 runs it whole, alone

    report_written([write_report(run_dir, seed=seed, out=out)])
