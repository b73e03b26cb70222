"""What a sampling run returns: the β = 1 chains, kept samples and the verdict (``bl.sample``).

:mod:`boltzlab.sampling` runs the samplers; the result types live here, beside the tempering
diagnostics they carry (adaptation, chain-group agreement), and are re-exported there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.tempering.adaptation import LevelWeightAdaptation
from boltzlab.tempering.agreement import GroupAgreement

__all__ = ["SampleResult", "SchemeInfo"]


@dataclass(frozen=True)
class SampleResult:
    """What a sampling run returns.

    Attributes
    ----------
    chains : Chains
        Final states of the target (β = 1) chains.
    samples : Tensor or None, shape (n_kept, n_chains, n_visible)
        Visible states kept every ``keep_every`` sweeps after burn-in (``None`` if none kept).
    energies : Tensor or None, shape (n_sweeps, n_chains), float64
        Joint energy ``E(x)`` of every chain after every sweep, when recorded.
    info : Any
        Sampler-specific diagnostics (a dataclass); for ``"plain"`` a :class:`PlainInfo`.
    reliable : bool
        The verdict of a tempered sampler (docs/trust.md, "Samplers"): ``False`` when its
        ladder does not reach hot temperatures, its chains did not travel the ladder, or
        independent groups of chains disagree on the β = 1 means, i.e. when its β = 1 samples
        may keep the mode proportions of their starts. The plain sampler has no such
        diagnostic and is always ``True``.
    warnings : tuple of str
        The reasons, each naming the diagnostic, its value and the threshold.
    """

    chains: Chains
    samples: Tensor | None
    energies: Tensor | None
    info: Any = field(default=None, repr=False)
    reliable: bool = True
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class SchemeInfo:
    """Diagnostics of a tempering-scheme run (``sample(..., sampler="pt" | "st" | ...)``).

    Attributes
    ----------
    scheme : str
    operator : str
    n_sweeps, burn_in : int
    summary : Any
        ``scheme.summarize(step_infos, final_state)`` — e.g. swap acceptance per pair,
        level occupancy, per-chain temperature trajectories — or the tuple of per-step infos
        when the scheme has no ``summarize``.
    final_state : Any
        The scheme's last state (for inspection or to continue the run). When the systems
        were sharded over processes, this process's systems only.
    adaptation : LevelWeightAdaptation or None
        For ``st``, ``ast`` and ``cast`` with adaptation on: the ladder, the frozen weights
        and what learning them cost (``adaptation.cost_sweeps`` chain-sweeps, on top of
        ``n_sweeps``).
    groups : GroupAgreement or None
        The chain-group check of the verdict (``None`` with fewer than ``2·N_GROUPS`` chains
        or ``2·N_BATCHES`` sweeps).
    """

    scheme: str
    operator: str
    n_sweeps: int
    burn_in: int
    summary: Any
    final_state: Any = field(repr=False)
    adaptation: LevelWeightAdaptation | None = None
    groups: GroupAgreement | None = None
