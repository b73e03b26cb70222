"""``evaluate`` on a Potts RBM: the generative check, as lines, a JSON object and a scatter PNG.

:func:`run_check` draws samples from the model and compares their single-site frequencies
and connected correlations with the training split's, each training sequence counted with its
weight (:mod:`boltzlab.evaluation.generative`; docs/data.md, "Aligned sequences"). Its budget
is ``--check-sweeps S`` (after a burn-in of ``0.4·S``, a sample of every chain every ``S/100``
sweeps) and ``--check-chains``; ``--check-sweeps 0`` skips it. :func:`check_lines` prints it,
:func:`check_record` is its ``--json`` object (also saved in ``evaluation.json`` by ``evaluate
--out``, where the report page reads it) and :func:`write_check_figure` draws
``plots/correlations.png``.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from torch import nn

from boltzlab.data.sequence_dataset import SequenceDataset
from boltzlab.evaluation.generative import CheckSampling, GenerativeCheck, StatisticFit, generative_check

__all__ = ["CHECK_FIGURE", "check_lines", "check_record", "check_sampling", "run_check", "write_check_figure"]

#: Where ``evaluate --out RUN_DIR`` draws the check, relative to RUN_DIR.
CHECK_FIGURE = Path("plots") / "correlations.png"


def check_sampling(sweeps: int, chains: int) -> CheckSampling:
    """PT on 10 levels: ``sweeps`` after a burn-in of ``0.4·sweeps``, a sample every ``sweeps/100``."""
    return CheckSampling(
        n_chains=chains,
        n_sweeps=sweeps,
        burn_in=(2 * sweeps) // 5,
        keep_every=max(1, sweeps // 100),
    )


def run_check(
    model: nn.Module, dataset: SequenceDataset, *, sweeps: int, chains: int, seed: int
) -> GenerativeCheck:
    """The generative check of ``model`` against ``dataset``'s (weighted) training split."""
    return generative_check(
        model,
        dataset.train,
        sample_weights=dataset.train_weights,
        sampling=check_sampling(sweeps, chains),
        generator=seed,
    )


def _fit(fit: StatisticFit, reference: StatisticFit | None) -> str:
    text = f"Pearson r {fit.pearson:.4f}, slope {fit.slope:.4f} ({fit.n_values:,} values)"
    if reference is not None:
        text += f"; as many draws from the alignment itself: r {reference.pearson:.4f}"
    return text


def check_lines(check: GenerativeCheck, dataset: SequenceDataset) -> list[str]:
    """What ``evaluate`` prints of the check."""
    against = (
        f"the training split's {dataset.train.shape[0]:,} sequences, weighted (N_eff "
        f"{dataset.effective_number('train'):,.1f})"
        if dataset.weighted
        else f"the training split's {dataset.train.shape[0]:,} sequences"
    )
    lines = [
        f"generative check: {check.samples.n_sequences:,} samples against {against}",
        f"  samples: {check.sampling}, {check.seconds:.1f} s",
        f"  single-site frequencies f_i(a): {_fit(check.frequencies, check.reference_frequencies)}",
        f"  connected correlations C_ij(a,b), i < j: {_fit(check.correlations, check.reference_correlations)}",
    ]
    if check.reliable:
        lines.append("  sampler verdict: reliable")
    else:
        lines.append(
            "  sampler verdict: UNRELIABLE (the samples may not be the model's; raise --check-sweeps)"
        )
        lines += [f"    - {warning}" for warning in check.warnings]
    return lines


def check_record(
    check: GenerativeCheck, dataset: SequenceDataset, figure: Path | None = None
) -> dict[str, Any]:
    """The ``generative`` object of ``evaluate --json`` (and of ``evaluation.json``)."""

    def fit(value: StatisticFit | None) -> dict[str, Any] | None:
        return None if value is None else asdict(value)

    return {
        "frequencies": fit(check.frequencies),
        "correlations": fit(check.correlations),
        "reference_frequencies": fit(check.reference_frequencies),
        "reference_correlations": fit(check.reference_correlations),
        "n_samples": check.samples.n_sequences,
        "sampling": check.sampling,
        "reliable": check.reliable,
        "warnings": list(check.warnings),
        "seconds": check.seconds,
        "data": "train",
        "n_sequences": check.data.n_sequences,
        "effective_number": dataset.effective_number("train"),
        "weighted": dataset.weighted,
        "figure": None if figure is None else str(figure),
    }


def write_check_figure(check: GenerativeCheck, path: Path, *, title: str) -> Path:
    """The two scatters (:func:`boltzlab.plotting.sequences.generative_check_figure`) as a PNG."""
    from boltzlab.plotting import save_figure  # here: matplotlib only when a figure is drawn
    from boltzlab.plotting.sequences import generative_check_figure

    return save_figure(generative_check_figure(check, title=title), path, dpi=100)
