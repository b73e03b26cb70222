"""Tempering runs with their chains sharded over processes: which schemes can, and the gathering.

Parallel tempering, simulated tempering, AST and CAST run ``n_chains`` independent systems
(a PT system is one whole ladder of replicas; a CAST system a slow and a fast chain). With
the chains cut into blocks (:func:`boltzlab.distributed.shard`), each process runs whole
systems of its blocks and nothing is exchanged while they run: every draw of the schemes
covers all the process's systems — PT's ``K`` levels and CAST's slow and fast chains are
stacked copies of them — so a :class:`~boltzlab.rng.BlockGenerator` gives each block its
own stream, and the β = 1 samples are the same on 1, 2 or 4 processes for the same seed
and block count (docs/architecture.md, "Scaling out"). At the end each step's diagnostics
are gathered in block order (:func:`gather_step_infos`), so the summary and the verdict are
those of one process running every block: per-system values bit for bit, per-level means
(flip rates) and the verdict's group means up to float rounding, as they are averaged from
each process's share.

What is not sharded runs whole on every process: tempered transitions and trajectory
tempering (not written for it yet), and AST and CAST adapting their weights for ever. With
shared weights (``shared_weights=True``) every Wang–Landau update would need every other
process's levels at every step; with one weight vector per chain it would not, but their
summaries report every chain's weights, which are not gathered. AST and CAST as
``bl.sample`` runs them by default — weights adapted on all processes' chains, then frozen —
are sharded.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from boltzlab import distributed
from boltzlab.distributed import Shard
from boltzlab.errors import DistributedError
from boltzlab.tempering.replica_swaps import ReplicaExchangeState

__all__ = ["SHARDED_SCHEMES", "gather_step_infos", "merge_leaf", "shardable", "summary_state"]

#: Schemes whose systems ``bl.sample`` shards over processes (AST and CAST with frozen weights).
SHARDED_SCHEMES = ("pt", "st", "ast", "cast")
#: Step-info fields with one entry per system, and the dimension that holds the systems.
_CHAIN_AXES = {
    "swap_accepted": 1,  # PT: (K − 1, n_chains)
    "round_trips": 0,
    "previous_levels": 0,
    "proposed_levels": 0,
    "levels": 0,
    "accepted": 0,
}
#: Step-info fields that are means over the process's systems (weighted by its share).
_CHAIN_MEANS = ("flip_rate",)


def shardable(name: str, adapting: bool) -> bool:
    """Whether ``bl.sample(sampler=name)`` can shard its systems (module docstring)."""
    if name in ("ast", "cast"):
        return adapting
    return name in SHARDED_SCHEMES


def _leaves(info: Any, prefix: str = "") -> dict[str, Any]:
    """The fields of a step info, nested dataclasses flattened to ``outer.inner`` names."""
    out: dict[str, Any] = {}
    for field in dataclasses.fields(info):
        value = getattr(info, field.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            out.update(_leaves(value, f"{prefix}{field.name}."))
        else:
            out[f"{prefix}{field.name}"] = value
    return out


def _rebuild(template: Any, leaves: dict[str, Any], step: int, prefix: str = "") -> Any:
    """Step ``step`` of ``leaves`` (stacked over steps) as an info shaped like ``template``."""
    values = {}
    for field in dataclasses.fields(template):
        value = getattr(template, field.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            values[field.name] = _rebuild(value, leaves, step, f"{prefix}{field.name}.")
        else:
            values[field.name] = leaves[f"{prefix}{field.name}"][step]
    return type(template)(**values)


def _stacked(step_infos: list[Any]) -> dict[str, Any]:
    """Every leaf over the steps: tensors stacked (steps first, on the CPU), other values listed."""
    columns = [_leaves(info) for info in step_infos]
    out: dict[str, Any] = {}
    for name in columns[0]:
        values = [column[name] for column in columns]
        out[name] = torch.stack(values).cpu() if isinstance(values[0], torch.Tensor) else values
    return out


def merge_leaf(name: str, parts: list[Any], shares: list[float]) -> Any:
    """One leaf, stacked over steps, from every process (rank order), systems put together."""
    field = name.rsplit(".", 1)[-1]
    if not isinstance(parts[0], torch.Tensor):
        return parts[0]  # the same on every process (e.g. whether CAST exchanged this step)
    if field in _CHAIN_AXES:
        return torch.cat(parts, dim=_CHAIN_AXES[field] + 1)  # + 1: steps come first
    if field in _CHAIN_MEANS:
        total = parts[0] * shares[0]
        for part, share in zip(parts[1:], shares[1:], strict=True):
            total = total + part * share
        return total
    if any(not torch.equal(part, parts[0]) for part in parts[1:]):
        raise DistributedError(
            f"the step diagnostic {name!r} differs between processes and has no declared chain axis; "
            "declare it in boltzlab.tempering.sharding"
        )
    return parts[0]  # the same on every process (which pairs were proposed)


def gather_step_infos(step_infos: list[Any], shard: Shard, device: torch.device) -> list[Any]:
    """Every process's step infos merged, step by step, as one process running all chains reports them.

    A collective, exchanging one stacked tensor per field. Per-system fields are concatenated
    in block order; per-level means are weighted by each process's share of the systems (equal
    to one process's up to rounding); any other field must be the same on every process, or
    :class:`~boltzlab.errors.DistributedError` is raised. The merged tensors are put on
    ``device``.
    """
    if not step_infos or distributed.topology().world_size == 1:
        return step_infos  # one process holds every block: nothing to gather
    gathered = distributed.all_gather(
        (shard.rows, _stacked(step_infos)), what="gathering the step diagnostics"
    )
    shares = [rows / shard.n_items for rows, _ in gathered]
    merged = {
        name: merge_leaf(name, [leaves[name] for _, leaves in gathered], shares) for name in gathered[0][1]
    }
    merged = {
        name: value.to(device) if isinstance(value, torch.Tensor) else value for name, value in merged.items()
    }
    return [_rebuild(step_infos[0], merged, step) for step in range(len(step_infos))]


def summary_state(state: Any) -> Any:
    """``state`` as a scheme's ``summarize`` reads it after :func:`gather_step_infos` (a collective).

    Replica exchange counts its systems from the replica table, which is gathered; simulated
    tempering and CAST read only what every process shares (the weights).
    """
    if isinstance(state, ReplicaExchangeState):
        return dataclasses.replace(
            state, replica=distributed.gather_rows(state.replica, dim=1, what="gathering the replica table")
        )
    return state
