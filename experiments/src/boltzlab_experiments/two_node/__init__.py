"""The CAST paper's two-node demonstration (Salakhutdinov 2010, §3; docs/algorithms.md §2.4).

* :mod:`~boltzlab_experiments.two_node.run` — Gibbs, FPCD and Wang-Landau on a two-node MRF
  (pure functions returning frozen results);
* :mod:`~boltzlab_experiments.two_node.plots` — the occupancy figure;
* :mod:`~boltzlab_experiments.two_node.command` — ``boltzlab reproduce two-node``.
"""

from boltzlab_experiments.two_node.run import (
    DATA_STATE,
    SAMPLERS,
    START_STATE,
    STATES,
    TwoNodeResult,
    TwoNodeRun,
    gibbs_escape_probability,
    potentials,
    run_two_node,
    run_two_node_sampler,
    state_labels,
    sweep_matrix,
    two_node_rbm,
)

__all__ = [
    "DATA_STATE",
    "SAMPLERS",
    "START_STATE",
    "STATES",
    "TwoNodeResult",
    "TwoNodeRun",
    "gibbs_escape_probability",
    "potentials",
    "run_two_node",
    "run_two_node_sampler",
    "state_labels",
    "sweep_matrix",
    "two_node_rbm",
]
