"""What goes on a run's ``report.html``: read a run directory, fill the page's sections.

:func:`_build_report` reads what ``boltzlab train``, ``demo`` and ``evaluate --out`` leave in a
directory (docs/architecture.md, "Command line") — ``config.toml``, ``metrics.csv``,
``model.safetensors``, ``plots/*.png``, ``evaluation.json`` — and fills six sections in a fixed
order: configuration, training curves, samples, tempering, log Z and log-likelihood, timings
(a reproduction's ``summary.md`` and any other PNGs follow). A Potts RBM's samples section
holds the generative check and the hidden units' weight logos instead of a grid of states
(:func:`boltzlab.cli.run_sections.sequence_samples_section`). A section whose source is absent
says so and how to get it; an unreadable file is reported in its section, not raised, so one
bad file never costs the rest of the page. :func:`write_report` renders it with
:mod:`boltzlab.plotting.report_page`.

Two things are drawn afresh from the saved model when the directory does not hold them,
each within :data:`_REGENERATE_BUDGET` multiply-adds (about a second on one core) so a report
never turns into a long computation: a sample grid when ``plots/samples.png`` is missing,
and, for a run trained with a tempered algorithm, a short run of the matching sampler
(pt → pt, ast → ast, cast → cast, trans-sap → tt) for its temperature trajectories or swap
rates per pair. The training chains' own level histories are not saved, so the page says
that these come from a fresh run on the trained model; the rates the training run itself
recorded are drawn from ``metrics.csv``.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

import boltzlab
from boltzlab import distributed
from boltzlab.cli.common import (
    choose_threads,
    describe_model,
    format_seconds,
    image_shape_of,
    load_model_file,
)
from boltzlab.cli.config import read_config
from boltzlab.cli.run_files import EVALUATION_FILE, METRICS_FILE, read_evaluation, read_metrics
from boltzlab.cli.run_sections import (
    SEQUENCE_FIGURES,
    log_z_section,
    sequence_samples_section,
    timings_section,
)
from boltzlab.errors import BoltzlabError
from boltzlab.estimators import exact_log_z
from boltzlab.models.rbm import RBM
from boltzlab.plotting import figure_png, samples_figure, tempered_sampler_figure, training_figure
from boltzlab.plotting.report_page import (
    SAMPLER_RATE_METRICS,
    BulletList,
    Image,
    Paragraph,
    ReportPage,
    Section,
    Table,
    has_sampler_rates,
    sampler_rates_figure,
    write_page,
)
from boltzlab.sampling import sample
from boltzlab.tempering.adaptation import ADAPT_SWEEPS, ADAPTIVE_SAMPLERS
from boltzlab.training.state import TrainRecord

__all__ = ["SECTION_KEYS"]

_REPORT_FILE = "report.html"
# What the commands that make a run folder write into it; a folder holding none is not a run.
_RUN_FILES = ("config.toml", METRICS_FILE, "model.safetensors", EVALUATION_FILE, "summary.md")
# The six sections every report has, in order (their HTML ids).
SECTION_KEYS = ("configuration", "training", "samples", "tempering", "log-z", "timings")
# Most multiply-adds (weights × chain-sweeps) spent redrawing samples or a tempered run.
_REGENERATE_BUDGET = 2e9
# Training algorithm → the sampler that moves chains the same way.
_TEMPERED_SAMPLERS = {"pt": "pt", "ast": "ast", "cast": "cast", "trans-sap": "tt"}
_SAMPLE_CHAINS, _SAMPLE_SWEEPS = 64, 1000
_TEMPERING_CHAINS, _TEMPERING_SWEEPS = 16, 300


def _png(figure: Any) -> bytes:
    return figure_png(figure, dpi=100)


def _file_image(path: Path, caption: str, max_width: int = 1000) -> Image | None:
    return Image(path.read_bytes(), caption, max_width) if path.is_file() else None


def _sweeps_within_budget(model: Any, chains: int, sweeps: int) -> int:
    """``sweeps`` cut so ``weights × chains × sweeps`` stays within :data:`_REGENERATE_BUDGET`."""
    weights = sum(parameter.numel() for parameter in model.parameters())
    return min(sweeps, int(_REGENERATE_BUDGET // max(1, weights * chains)))


def _field(value: Any) -> str:
    """A metadata value for the table: a record (a Potts run's ``sequences``) as ``key value`` pairs."""
    if isinstance(value, dict):
        return ", ".join(f"{key} {item}" for key, item in value.items())
    return str(value)


def _configuration(config: dict[str, Any] | None, config_error: str | None, model: Any) -> Section:
    blocks: list[Any] = []
    if config is not None:
        rows = tuple(
            (key, ", ".join(map(str, value)) if isinstance(value, list) else str(value))
            for key, value in config.items()
        )
        blocks.append(Table(("option", "value"), rows, caption="config.toml"))
    elif config_error is not None:
        blocks.append(Paragraph(f"config.toml could not be read: {config_error}", "warning"))
    if model is not None:
        metadata = getattr(model, "metadata", {}) or {}
        data = metadata.get("data") if isinstance(metadata.get("data"), dict) else {}
        rows = [("model", describe_model(model))]
        rows += [(f"data {key}", _field(value)) for key, value in data.items() if value is not None]
        if "created_by" in metadata:
            rows.append(("written by", str(metadata["created_by"])))
        blocks.append(Table(("field", "value"), tuple(rows), caption="model.safetensors"))
    if config is not None:
        blocks.append(
            Paragraph(
                "config.toml holds the run's effective options; boltzlab train --config reads it back.",
                "note",
            )
        )
    return Section(
        "configuration",
        "Configuration",
        tuple(blocks),
        "Not recorded in this run: no config.toml or model.safetensors in the directory.",
    )


def _last_values(records: tuple[TrainRecord, ...], final_log_z: float | None) -> Table:
    """The newest value of every metric the history holds, each with its update.

    A metric tracked every N updates may be older than the final model; ``final_log_z`` (the
    final model's exact log Z, :func:`_final_log_z`) then joins the table at the last update.
    """
    names = [*TrainRecord.__dataclass_fields__][2:-1] + sorted({n for r in records for n in r.extra})
    end = records[-1].update
    rows = []
    for name in names:
        found = next(((r.update, r.get(name)) for r in reversed(records) if r.get(name) is not None), None)
        if found is not None and math.isfinite(found[1]):
            label = "training-loop time (s)" if name == "time" else name.replace("_", " ")
            if found[0] != end:
                label += " (last tracked)"
            rows.append((label, f"{found[1]:.6g}", f"{found[0]:,}"))
    if final_log_z is not None:
        rows.append(
            ("log z of the final model (exact, computed for this report)", f"{final_log_z:.6g}", f"{end:,}")
        )
    return Table(
        ("metric", "last value", "at update"),
        tuple(rows),
        caption=f"last recorded values; the run ended at update {end:,}",
        numeric=(1, 2),
    )


def _final_log_z(model: Any, records: tuple[TrainRecord, ...] | None) -> float | None:
    """The final model's exact log Z where exact tracking last ran before the final update.

    Only for an RBM whose enumeration fits the report's budget (:data:`_REGENERATE_BUDGET`):
    the tracked value belongs to an earlier model, and the report must not pass it off as the
    final one.
    """
    if model is None or not isinstance(model, RBM) or not records:
        return None
    tracked = [record.update for record in records if record.log_z is not None]
    if not tracked or tracked[-1] == records[-1].update:
        return None
    if 2 ** min(model.layer_sizes) * max(model.layer_sizes) > _REGENERATE_BUDGET:
        return None
    return float(exact_log_z(model))


def _training(
    run_dir: Path, records: tuple[TrainRecord, ...] | None, error: str | None, final_log_z: float | None
) -> Section:
    blocks: list[Any] = []
    if error is not None:
        blocks.append(Paragraph(f"{METRICS_FILE} could not be read: {error}", "warning"))
    saved = _file_image(run_dir / "plots" / "training.png", "training curves (plots/training.png)")
    if saved is not None:
        blocks.append(saved)
    elif records:
        blocks.append(Image(_png(training_figure(records)), f"training curves drawn from {METRICS_FILE}"))
    if records:
        blocks.append(_last_values(records, final_log_z))
    return Section(
        "training",
        "Training curves",
        tuple(blocks),
        f"Not recorded in this run: no {METRICS_FILE} (written by boltzlab train and demo).",
    )


def _samples(run_dir: Path, model: Any, seed: int) -> tuple[Section, float]:
    saved = _file_image(
        run_dir / "plots" / "samples.png", "samples beside training examples (plots/samples.png)", 820
    )
    if saved is not None:
        return Section("samples", "Samples", (saved,)), 0.0
    if model is None:
        return Section(
            "samples", "Samples", (), "Not recorded in this run: no plots/samples.png and no model."
        ), 0.0
    sweeps = _sweeps_within_budget(model, _SAMPLE_CHAINS, _SAMPLE_SWEEPS)
    if sweeps < 1:
        missing = "No plots/samples.png, and the model is too large to sample within the report's budget."
        return Section("samples", "Samples", (), missing), 0.0
    started = time.perf_counter()
    result = sample(model, n_chains=_SAMPLE_CHAINS, n_sweeps=sweeps, generator=seed)
    states = result.chains.layers[0].cpu()
    figure = samples_figure(states, image_shape=image_shape_of(model), title=f"{_SAMPLE_CHAINS} chains")
    caption = f"{_SAMPLE_CHAINS} chains after {sweeps} Gibbs sweeps from the base, drawn for this report"
    return Section("samples", "Samples", (Image(_png(figure), caption, 700),)), time.perf_counter() - started


def _tempered_run(model: Any, algorithm: str, config: dict[str, Any], seed: int) -> tuple[list[Any], float]:
    """A short run of the sampler matching ``algorithm``: its figure and verdict."""
    sampler = _TEMPERED_SAMPLERS[algorithm]
    levels = config.get("levels")
    sweeps = _sweeps_within_budget(model, _TEMPERING_CHAINS * (levels or 20), _TEMPERING_SWEEPS)
    if sweeps < 20:
        return [
            Paragraph("The model is too large for a tempered run within the report's budget.", "note")
        ], 0.0
    options: dict[str, Any] = {} if levels is None else {"n_levels": int(levels)}
    if sampler in ADAPTIVE_SAMPLERS:  # their level-weight learning counts against the budget too
        options["adapt_sweeps"] = max(1, _sweeps_within_budget(model, _TEMPERING_CHAINS, ADAPT_SWEEPS))
    operator = str(config.get("operator", "gibbs"))
    started = time.perf_counter()
    result = sample(
        model,
        sampler=sampler,
        operator=operator,
        operator_params={"alpha": config["alpha"]} if "alpha" in config else None,
        n_chains=_TEMPERING_CHAINS,
        n_sweeps=sweeps,
        generator=seed,
        **options,
    )
    seconds = time.perf_counter() - started
    title = f"a fresh {sampler} run on the trained model: {_TEMPERING_CHAINS} chains, {sweeps} steps"
    figure = tempered_sampler_figure(result.info.summary, title=title, max_chains=3)
    what = (
        "swap acceptance per neighbour pair (parallel tempering keeps no per-replica trajectories)"
        if sampler == "pt"
        else "temperature trajectories and level occupancy"
        if sampler != "tt"
        else "acceptance of tempered-transition moves"
    )
    caption = (
        f"{what} of a {sampler} run drawn for this report from the trained model "
        "(the training chains' level histories are not saved)"
    )
    blocks: list[Any] = [Image(_png(figure), caption)]
    verdict = "reliable" if result.reliable else "UNRELIABLE"
    blocks.append(Paragraph(f"verdict of that run: {verdict}", "plain" if result.reliable else "warning"))
    if result.warnings:
        blocks.append(BulletList(tuple(result.warnings), "its warnings:"))
    return blocks, seconds


def _tempering(
    config: dict[str, Any], records: tuple[TrainRecord, ...] | None, model: Any, seed: int
) -> tuple[Section, float]:
    algorithm = str(config.get("algorithm", "")).lower()
    blocks: list[Any] = []
    if records and has_sampler_rates(records):
        blocks.append(
            Image(_png(sampler_rates_figure(records)), f"tempering rates during training ({METRICS_FILE})")
        )
        shown = [name for name in SAMPLER_RATE_METRICS if any(r.get(name) is not None for r in records)]
        last = records[-1]
        rows = tuple(
            (name.replace("_", " "), f"{last.get(name):.4f}") for name in shown if last.get(name) is not None
        )
        if rows:
            blocks.append(Table(("rate", "at the last update"), rows, numeric=(1,)))
    seconds = 0.0
    if algorithm in _TEMPERED_SAMPLERS and model is not None:
        try:
            run_blocks, seconds = _tempered_run(model, algorithm, config, seed)
        except BoltzlabError as error:
            run_blocks = [Paragraph(f"the tempered run for this report failed: {error}", "warning")]
        blocks += run_blocks
    what = f"algorithm {algorithm}" if algorithm else "no algorithm recorded"
    missing = (
        f"No tempering in this run ({what}): temperature trajectories and swap rates are recorded "
        "for --algorithm pt, ast, cast and trans-sap."
    )
    return Section("tempering", "Tempering: temperatures and swap rates", tuple(blocks), missing), seconds


def _extra_sections(run_dir: Path) -> list[Section]:
    """A reproduction's summary.md, and PNGs the fixed sections do not show."""
    sections = []
    summary = run_dir / "summary.md"
    if summary.is_file():
        text = summary.read_text(encoding="utf-8", errors="replace")
        paragraphs = tuple(Paragraph(part.strip()) for part in text.split("\n\n") if part.strip())
        sections.append(Section("summary", "Summary (summary.md)", paragraphs))
    shown = {run_dir / "plots" / "training.png", run_dir / "plots" / "samples.png"}
    shown |= {run_dir / path for path in SEQUENCE_FIGURES}
    others = sorted(
        path for path in [*run_dir.glob("*.png"), *run_dir.glob("plots/*.png")] if path not in shown
    )
    if others:
        images = tuple(Image(path.read_bytes(), str(path.relative_to(run_dir))) for path in others)
        sections.append(Section("figures", "Other figures", images))
    return sections


def _read(reader: Any, path: Path) -> tuple[Any, str | None]:
    """``reader(path)`` or ``None`` if the file is absent; a readable error line if it fails."""
    if not path.is_file():
        return None, None
    try:
        return reader(path), None
    except (BoltzlabError, OSError) as error:
        return None, " ".join(str(error).split())


def _build_report(run_dir: str | Path, *, seed: int = 0) -> ReportPage:
    """The report page of the run in ``run_dir`` (module docstring).

    Parameters
    ----------
    run_dir : str or Path
        A directory written by ``boltzlab train``, ``demo``, ``evaluate --out`` or ``reproduce``.
    seed : int, default 0
        Seed of the samples and tempered run drawn for the page when the run lacks them.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise BoltzlabError(f"{run_dir} is not a directory; pass the --out folder of boltzlab train")
    if not any((run_dir / name).is_file() for name in _RUN_FILES):
        # An empty page with exit status 0 looked like success for a mistyped folder.
        raise BoltzlabError(
            f"{run_dir} is not a run folder: it holds none of {', '.join(_RUN_FILES)}; pass the --out "
            "folder of boltzlab train, demo, evaluate --out or reproduce"
        )
    config, config_error = _read(read_config, run_dir / "config.toml")
    records, metrics_error = _read(read_metrics, run_dir / METRICS_FILE)
    evaluation, evaluation_error = _read(read_evaluation, run_dir / EVALUATION_FILE)
    model, model_error = _read(load_model_file, run_dir / "model.safetensors")
    if model is not None and click.get_current_context(silent=True) is not None:
        choose_threads(model)
    final_log_z = _final_log_z(model, records)
    if getattr(model, "n_states", None) is not None:  # a Potts RBM: what sequence users look at
        samples, sample_seconds = sequence_samples_section(run_dir, evaluation), 0.0
    else:
        samples, sample_seconds = _samples(run_dir, model, seed)
    tempering, tempering_seconds = _tempering(config or {}, records, model, seed)
    sections = [
        _configuration(config, config_error, model),
        _training(run_dir, records, metrics_error, final_log_z),
        samples,
        tempering,
        log_z_section(evaluation, evaluation_error, records, run_dir, final_log_z=final_log_z),
        timings_section(records, evaluation, sample_seconds + tempering_seconds),
        *_extra_sections(run_dir),
    ]
    subtitle = [str(run_dir.resolve())]
    if model is not None:
        subtitle.append(describe_model(model))
    elif model_error is not None:
        subtitle.append(f"model.safetensors could not be read: {model_error}")
    written = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return ReportPage(
        title=f"boltzlab run report: {run_dir.name or run_dir.resolve().name}",
        subtitle=tuple(subtitle),
        sections=tuple(sections),
        footer=f"written by boltzlab {boltzlab.__version__} on {written}; one self-contained file "
        f"(drawing for this page took {format_seconds(sample_seconds + tempering_seconds)})",
    )


def write_report(run_dir: str | Path, *, seed: int = 0, out: str | Path | None = None) -> Path:
    """Build the report of ``run_dir`` and write it to ``out`` (default ``run_dir/report.html``).

    Under torchrun only rank 0 calls it, so whatever it samples runs unsharded (``distributed.local``).
    """
    with distributed.local():
        page = _build_report(run_dir, seed=seed)
    return write_page(page, Path(run_dir) / _REPORT_FILE if out is None else out)
