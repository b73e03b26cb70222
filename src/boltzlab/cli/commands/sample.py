"""``boltzlab sample``'s declaration: its arguments, options and help, light to import.

``boltzlab sample --help`` reads only this module; the work, which imports torch and the
library, is :func:`boltzlab.cli.sample.run`, imported when the command runs
(docs/architecture.md, "Start-up").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from boltzlab.cli.choices import SAMPLE_FORMATS, SAMPLERS
from boltzlab.cli.common import SEED, FiniteFloat, command_options, operator_help

__all__ = ["sample"]


@click.command(
    "sample",
    short_help="Draw samples from a saved model.",
    epilog="""\b
Example:
  boltzlab sample runs/digits/model.safetensors --chains 8 --sweeps 1000 --keep-every 100 --out samples.png
  boltzlab sample runs/digits/model.safetensors --operator flip --out samples-flip.png
  boltzlab sample runs/digits/model.safetensors --chains 100 --sweeps 5000 --out samples.npy
  boltzlab sample runs/digits/model.safetensors --sampler pt --levels 8 --out samples-pt.png
  boltzlab sample runs/digits/model.safetensors --sampler ptt --out samples-ptt.png
  boltzlab sample runs/ww/model.safetensors --chains 100 --sweeps 2000 --burn-in 500 --format fasta""",
)
@click.argument("model_path", metavar="MODEL", type=click.Path(path_type=Path))
@click.option("--sampler", default="plain", show_default=True, help=f"Sampler: {', '.join(SAMPLERS)}.")
@click.option(
    "--levels",
    type=click.IntRange(min=2),
    help="Levels of the ladder (pt, tt: uniform; st, ast, cast: placed by a pilot).",
)
@click.option(
    "--low",
    type=FiniteFloat(min=0.0, max=1.0, max_open=True),
    help="Lowest inverse temperature of the ladder (default 0).",
)
@click.option("--operator", default="gibbs", show_default=True, help=operator_help())
@click.option("--alpha", type=FiniteFloat(), help="Flip weight of --operator mixture (default 0.5).")
@click.option("--chains", type=click.IntRange(min=1), default=8, show_default=True, help="Chains (rows).")
@click.option(
    "--sweeps", type=click.IntRange(min=1), default=1000, show_default=True, help="Sweeps after burn-in."
)
@click.option(
    "--keep-every",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="A sample every N sweeps (columns).",
)
@click.option(
    "--burn-in",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Sweeps before the first kept one.",
)
@click.option(
    "--trajectory",
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="ptt: the training trajectory (a trajectory.safetensors file or run directory; default: "
    "the model file's directory).",
)
@click.option("--seed", type=SEED, default=0, show_default=True)
@click.option("--image-shape", metavar="HxW", help="Image shape, e.g. 28x28 (default: from the model file).")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("samples.png"),
    show_default=True,
    help="File to write, by its extension: .png the picture; .npy (n_kept, n_chains, n_visible) uint8, "
    ".npz (samples, sweeps, chains) or .csv (chain,sweep,v0,... per line) the 0/1 samples (a Potts "
    "RBM's: symbol indices per site); .fasta a Potts RBM's sequences.",
)
@click.option(
    "--format",
    "out_format",
    type=click.Choice(SAMPLE_FORMATS, case_sensitive=False),
    help="What to write when --out does not say it (default: by --out's extension; with no --out, "
    "samples.FORMAT).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON object (files written, shape, settings, verdict, diagnostics) instead.",
)
@command_options
def sample(**options: Any) -> None:
    """Draw consecutive samples of a few chains from a saved model: a PNG (rows = chains), or the
    samples themselves with --out FILE.npy, .npz or .csv (a Potts RBM's also as FILE.fasta).

    Tempered samplers also write OUT-STEM-temperatures.png: where their chains went on the ladder.
    """
    # Imported here, not at the top: the implementation imports torch and the library, and
    # `boltzlab sample --help` must not wait for them.
    from boltzlab.cli import sample as implementation

    implementation.run(**options)
