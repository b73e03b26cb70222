"""``boltzlab reproduce two-node``: the CAST paper's two-node MRF, as a figure, a table and a CSV.

Salakhutdinov (2010, §3; docs/algorithms.md §2.4): occupancy of the four states over time under
Gibbs, FPCD and Wang-Landau. The computation is :func:`boltzlab_experiments.two_node.run.run_two_node`;
this module writes ``two-node.png`` and ``two-node.csv`` and prints the final occupancies.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from boltzlab.cli.common import command_options, format_table, report_written
from boltzlab_experiments import REPRODUCE_HELP
from boltzlab_experiments.tables import write_csv
from boltzlab_experiments.two_node.run import (
    TwoNodeResult,
    gibbs_escape_probability,
    run_two_node,
    state_labels,
)

__all__ = ["two_node", "two_node_rows"]


def _ascii(text: str) -> str:
    return text.replace("−", "-")


def two_node_rows(result: TwoNodeResult) -> list[list[Any]]:
    """One CSV row per sampler and step: the state, the running occupancy and the log-weights."""
    rows = []
    for run in result.runs:
        occupancy = run.running_occupancy
        for step in range(1, run.n_steps + 1):
            rows.append(
                [run.sampler, step, _ascii(state_labels()[int(run.states[step])])]
                + [f"{value:.6g}" for value in occupancy[step - 1].tolist()]
                + [f"{value:.6g}" for value in run.log_weights[step].tolist()]
            )
    return rows


@click.command(
    "two-node",
    short_help=REPRODUCE_HELP["two-node"],
    epilog="""\b
Example:
  boltzlab reproduce two-node --out results/two-node --steps 2000 --seed 1""",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("two-node"),
    show_default=True,
    metavar="DIR",
    help="Directory for two-node.png and two-node.csv.",
)
@click.option(
    "--steps", type=click.IntRange(min=1), default=1000, show_default=True, help="Sweeps per sampler."
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--eta",
    type=click.FloatRange(min=0.0),
    default=1.0,
    show_default=True,
    help="Constant step of the weight updates, in nats (the paper's γ = 10 is η = log 11 ≈ 2.40).",
)
@command_options
def two_node(out: Path, steps: int, seed: int, eta: float) -> None:
    """The CAST paper's two-node MRF: Gibbs stays stuck, FPCD falls into the data mode, WL roams.

    Writes the occupancy of the four states over time (two-node.png, one panel per sampler)
    and the numbers behind it (two-node.csv), and prints the final occupancy fractions.
    """
    from boltzlab.plotting import save_figure
    from boltzlab_experiments.two_node.plots import two_node_figure

    result = run_two_node(n_steps=steps, learning_rate=eta, generator=seed)
    labels = [_ascii(label) for label in state_labels()]
    header = ["sampler", "step", "state"] + [f"occupancy{label}" for label in labels]
    header += [f"log_g{label}" for label in labels]
    written = [
        save_figure(two_node_figure(result), out / "two-node.png"),
        write_csv(out / "two-node.csv", header, two_node_rows(result)),
    ]
    click.echo(
        f"final occupancy of the four states after {steps} steps (start (−1,−1), data (1,1), η = {eta:g}):"
    )
    click.echo(
        format_table(
            ["sampler", *state_labels()],
            [[run.sampler, *(f"{value:.3f}" for value in run.occupancy().tolist())] for run in result.runs],
        )
    )
    fpcd = result.run("fpcd").states
    arrived = (fpcd == 0).nonzero()
    click.echo(
        f"Gibbs leaves (−1,−1) within {steps} steps with probability {gibbs_escape_probability(steps):.3g}; "
        + (
            f"FPCD first reached the data mode at step {int(arrived[0])}."
            if arrived.numel()
            else "FPCD never reached it."
        )
    )
    report_written(written)
