"""The figure of log-likelihood tracking with RTS against AIS checkpoints.

Carlson, Stinson, Pakman & Paninski (2016), §4.4 (Fig. 6): train and validation
log-likelihoods tracked during training by RTS, with AIS estimates at checkpoints. The data
come from :func:`boltzlab_experiments.rts_tracking.run.run_tracking` (and
:func:`~boltzlab_experiments.rts_tracking.timing.run_timing`). Built without ``pyplot``;
save with :func:`boltzlab.plotting.save_figure`.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from boltzlab.validation import require
from boltzlab_experiments.rts_tracking.run import RTSTrackingResult
from boltzlab_experiments.rts_tracking.timing import TrackingTimings

__all__ = ["tracking_figure"]


def tracking_figure(result: RTSTrackingResult, timings: TrackingTimings | None = None) -> Figure:
    """Left: train and validation log-likelihood, RTS-tracked (lines) and AIS (points ± 2 s.e.).
    Right: ``log Z``, tracked (± 2 s.e. band) and AIS. The title states the tracking overheads
    when ``timings`` are given."""
    require(
        isinstance(result, RTSTrackingResult),
        f"result must be an RTSTrackingResult, got {type(result).__name__}",
    )
    figure = Figure(figsize=(11.0, 4.2), layout="constrained")
    left, right = figure.subplots(1, 2)
    tracked, ais = result.tracked, result.ais
    updates, ais_updates = tracked.updates.numpy(), ais.updates.numpy()
    ais_error = 2 * ais.log_z_stderr.numpy()
    for name, colour in (("train", "C0"), ("validation", "C1")):
        values = getattr(tracked, f"{name}_log_likelihood").numpy()
        if np.isnan(values).all():
            continue
        left.plot(updates, values, color=colour, linewidth=1.5, label=f"{name}, RTS tracked")
        left.errorbar(
            ais_updates,
            getattr(ais, f"{name}_log_likelihood").numpy(),
            yerr=ais_error,
            fmt="o",
            color=colour,
            markerfacecolor="white",
            capsize=3,
            label=f"{name}, AIS",
        )
    left.set_xlabel("parameter update")
    left.set_ylabel("mean log-likelihood (nats per example)")
    left.grid(alpha=0.3)
    left.legend(fontsize="small")
    band = 2 * tracked.log_z_stderr.numpy()
    right.plot(updates, tracked.log_z.numpy(), color="C2", linewidth=1.5, label="RTS tracked log Ẑ")
    right.fill_between(
        updates, tracked.log_z.numpy() - band, tracked.log_z.numpy() + band, color="C2", alpha=0.25
    )
    right.errorbar(
        ais_updates,
        ais.log_z.numpy(),
        yerr=ais_error,
        fmt="s",
        color="k",
        markerfacecolor="white",
        capsize=3,
        label="AIS",
    )
    right.set_xlabel("parameter update")
    right.set_ylabel("log Z (nats)")
    right.grid(alpha=0.3)
    right.legend(fontsize="small")
    config = result.config
    title = (
        f"RTS tracking ({config.label}): RBM {config.n_hidden} hidden, {config.n_chains} chains × "
        f"{config.sweeps} sweeps, K = {config.n_levels}, {config.optimizer} η = {config.learning_rate:g}"
    )
    if timings is not None:
        title += (
            f"\nextra CPU time of tracking: {timings.tracking_fraction:+.0%} over the same sampler untracked, "
            f"{timings.overhead_vs_pcd:+.0%} over PCD with equal chain-sweeps"
        )
    figure.suptitle(title, fontsize="medium")
    return figure
