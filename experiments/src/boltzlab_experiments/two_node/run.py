"""The CAST paper's two-node demonstration: Gibbs sticks, FPCD falls into the data, WL roams.

Salakhutdinov (2010, *Learning Deep Boltzmann Machines using Adaptive MCMC*, ICML, §3 "Connection
to FPCD"; docs/algorithms.md §2.4). A binary Markov random field on ``x = (x_1, x_2) ∈ {−1, 1}²``
with potentials ``φ(1,1) = φ(−1,−1) = 5`` and ``φ(−1,1) = φ(1,−1) = −5``, i.e.
``log p(x) = c·x_1·x_2 − log Z`` with ``c = 5``: two modes 10 nats above the two other states.
Every chain starts at ``(−1, −1)``; the single data point is ``(1, 1)``. The state space is
split into the four singletons (docs/open-questions.md item 19: the paper's text lists ``{−1,1}``
twice, a typo), in this order::

    X_0 = {(1, 1)}   X_1 = {(−1, 1)}   X_2 = {(1, −1)}   X_3 = {(−1, −1)}

and each sampler sweeps the chain (``x_2`` given ``x_1``, then ``x_1`` given ``x_2``: the
hidden-first order of an RBM) on the *weighted* target ``p(x)/g_{k(x)}``, one log-weight
``log g_k`` per state, after which the weights move:

* ``"gibbs"`` — no weights (``log g = 0``): plain block Gibbs. The MRF is the 1×1 RBM with
  ``W = 4c = 20`` and ``b = c_h = −2c = −10`` on ``{0, 1}`` under ``x = 2v − 1``
  (:func:`two_node_rbm`), and the sweep equals the library's Gibbs operator on it.
  From a mode it leaves with probability ``1 − σ(2c)² ≈ 2e^{−10}`` per sweep.
* ``"wang-landau"`` — ``log g_k ← log g_k + η_t·1[x_{t+1} ∈ X_k]``: the state just visited
  becomes less attractive, so the chain is pushed on and visits all four states about equally.
* ``"fpcd"`` — ``log g_k ← log g_k + η_t·(1[x_{t+1} ∈ X_k] − 1[x_0 ∈ X_k])`` with ``x_0`` the
  data point: FPCD's fast weights on the same parametrisation. The data term lowers the data
  state's weight at every step, so once the chain reaches ``(1, 1)`` the two terms cancel
  there, its weight stops changing, and the chain stays: FPCD is pulled to the data mode,
  which is why it is not a valid MCMC method.

**Step size.** ``η_t = η`` constant (default ``η = 1``). The paper's learning runs use the
Wang-Landau factor ``γ_t = 10``, i.e. ``η = log(1 + γ) = log 11 ≈ 2.40`` (docs/open-questions.md
item 13); the toy's value is not in our copy of the paper. With ``η = 1`` a chain needs about
ten steps to climb the 10-nat barrier, so the approach to the plateaus is visible on the
plot; pass ``learning_rate=math.log(11)`` for the paper's factor.

**What "roughly equally" means for WL.** With a constant η the visit counts ``n_k`` follow the
effective log-densities ``φ_k − η·n_k``, which the adaptation keeps within a few nats of each
other once the barrier is climbed; so ``n_k ≈ (φ_k + const)/η``: the two modes get
``Δφ/(2η) = c/η`` more visits than the mean and the two other states ``c/η`` fewer, and the
occupancy fractions differ from 1/4 by ``O(c/(η·n_steps))`` — 0.5 % for 1,000 steps at η = 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.models.rbm import RBM
from boltzlab.rng import resolve_generator, spawn
from boltzlab.validation import check_positive_int

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

STATES: tuple[tuple[int, int], ...] = ((1, 1), (-1, 1), (1, -1), (-1, -1))
"""The four singleton partitions ``X_0 … X_3``, as ``(x_1, x_2)``."""
START_STATE = 3  # (−1, −1)
DATA_STATE = 0  # (1, 1)
SAMPLERS = ("gibbs", "fpcd", "wang-landau")
DEFAULT_COUPLING = 5.0


def state_labels() -> tuple[str, ...]:
    """``("(1,1)", "(−1,1)", "(1,−1)", "(−1,−1)")``: the states in index order, for tables and plots."""
    return tuple(f"({x1},{x2})".replace("-", "−") for x1, x2 in STATES)


def _state_index(x1: int, x2: int) -> int:
    # (1, 1) → 0, (−1, 1) → 1, (1, −1) → 2, (−1, −1) → 3.
    return (1 - x1) // 2 + (1 - x2)


def potentials(coupling: float = DEFAULT_COUPLING) -> Tensor:
    """``φ(x) = coupling·x_1·x_2`` of the four states; float64, shape (4,)."""
    return torch.tensor([coupling * x1 * x2 for x1, x2 in STATES], dtype=torch.float64)


def two_node_rbm(coupling: float = DEFAULT_COUPLING, *, dtype: torch.dtype = torch.float64) -> RBM:
    """The MRF as a 1×1 RBM on {0, 1}: ``W = 4c``, ``b = c_h = −2c`` (``x = 2v − 1``).

    ``c·x_1·x_2 = 4c·v·h − 2c·v − 2c·h + c``, so the RBM's ``−E(v, h)`` is the potential up to
    the constant ``c``. The visible unit is ``x_1``, the hidden unit ``x_2``. Library joint
    state ``j = v + 2h`` is this module's state ``3 − j``.
    """
    return RBM(
        weights=torch.tensor([[4.0 * coupling]], dtype=torch.float64),
        visible_bias=torch.tensor([-2.0 * coupling], dtype=torch.float64),
        hidden_bias=torch.tensor([-2.0 * coupling], dtype=torch.float64),
        dtype=dtype,
    )


def _probability_plus(log_plus: float, log_minus: float) -> float:
    """``P(x = +1)`` from the two log-densities: ``σ(log_plus − log_minus)``, overflow-free."""
    difference = log_plus - log_minus
    if difference >= 0:
        return 1.0 / (1.0 + math.exp(-difference))
    odds = math.exp(difference)
    return odds / (1.0 + odds)


def _sweep(state: int, log_density: list[float], uniform_second: float, uniform_first: float) -> int:
    """One sweep: ``x_2`` given ``x_1``, then ``x_1`` given ``x_2``, under ``log_density`` (4 entries)."""
    x1, x2 = STATES[state]
    p_x2 = _probability_plus(log_density[_state_index(x1, 1)], log_density[_state_index(x1, -1)])
    x2 = 1 if uniform_second < p_x2 else -1
    p_x1 = _probability_plus(log_density[_state_index(1, x2)], log_density[_state_index(-1, x2)])
    x1 = 1 if uniform_first < p_x1 else -1
    return _state_index(x1, x2)


def sweep_matrix(log_density: Tensor) -> Tensor:
    """Exact transition matrix of one sweep under a log-density table; float64, (4, 4).

    ``T[i, j] = P(x_{t+1} = X_j | x_t = X_i)``, ``x_2`` updated first, then ``x_1``.

    Parameters
    ----------
    log_density : Tensor, shape (4,)
        Unnormalised log-density of the four states (e.g. ``potentials() − log_weights``).
    """
    if not isinstance(log_density, Tensor) or log_density.shape != (4,):
        raise ValidationError(f"log_density must be a tensor of shape (4,), got {log_density!r}")
    values = [float(value) for value in log_density.to(torch.float64)]
    matrix = torch.zeros(4, 4, dtype=torch.float64)
    for state, (x1, _) in enumerate(STATES):
        p_x2 = _probability_plus(values[_state_index(x1, 1)], values[_state_index(x1, -1)])
        for x2, p_second in ((1, p_x2), (-1, 1.0 - p_x2)):
            p_x1 = _probability_plus(values[_state_index(1, x2)], values[_state_index(-1, x2)])
            matrix[state, _state_index(1, x2)] += p_second * p_x1
            matrix[state, _state_index(-1, x2)] += p_second * (1.0 - p_x1)
    return matrix


def gibbs_escape_probability(n_steps: int, *, coupling: float = DEFAULT_COUPLING) -> float:
    """Probability that plain Gibbs leaves its starting mode ``(−1, −1)`` within ``n_steps`` sweeps.

    Staying one sweep has probability ``σ(2c)²`` (neither unit flips against the other), so
    the answer is ``1 − σ(2c)^{2n}``, about ``2n·e^{−2c}`` while that is small.
    """
    n_steps = check_positive_int(n_steps, "n_steps")
    log_stay = -2.0 * math.log1p(math.exp(-2.0 * coupling))  # log σ(2c)²
    return -math.expm1(n_steps * log_stay)


@dataclass(frozen=True)
class TwoNodeRun:
    """One sampler's chain on the two-node MRF.

    Attributes
    ----------
    sampler : str
        ``"gibbs"``, ``"fpcd"`` or ``"wang-landau"``.
    states : Tensor, shape (n_steps + 1,), int64
        State index (into :data:`STATES`) before the first step and after every step.
    log_weights : Tensor, shape (n_steps + 1, 4), float64
        ``log g_k`` before the first step (zeros) and after every step's update.
    """

    sampler: str
    states: Tensor
    log_weights: Tensor

    @property
    def n_steps(self) -> int:
        return self.states.shape[0] - 1

    @property
    def running_occupancy(self) -> Tensor:
        """Fraction of steps ``1..t`` spent in each state, for ``t = 1..n_steps``; float64, (n_steps, 4)."""
        visits = torch.nn.functional.one_hot(self.states[1:], 4).to(torch.float64).cumsum(0)
        steps = torch.arange(1, self.n_steps + 1, dtype=torch.float64)[:, None]
        return visits / steps

    def occupancy(self, start: int = 0, stop: int | None = None) -> Tensor:
        """Fraction of the states after steps ``start+1 … stop`` in each state; float64, (4,)."""
        stop = self.n_steps if stop is None else stop
        if not 0 <= start < stop <= self.n_steps:
            raise ValidationError(f"need 0 <= start < stop <= {self.n_steps}, got start={start}, stop={stop}")
        visited = self.states[start + 1 : stop + 1]
        return torch.bincount(visited, minlength=4).to(torch.float64) / visited.numel()


@dataclass(frozen=True)
class TwoNodeResult:
    """The three chains of the demonstration and their settings.

    Attributes
    ----------
    runs : tuple of TwoNodeRun
        One per sampler, in :data:`SAMPLERS` order.
    coupling : float
        ``c`` in ``φ(x) = c·x_1·x_2`` (5 in the paper).
    learning_rate : float
        The constant step ``η`` of the weight updates (nats per step).
    n_steps : int
    """

    runs: tuple[TwoNodeRun, ...]
    coupling: float
    learning_rate: float
    n_steps: int

    def run(self, sampler: str) -> TwoNodeRun:
        """The chain of ``sampler``."""
        for run in self.runs:
            if run.sampler == sampler:
                return run
        raise ValidationError(f"sampler must be one of {', '.join(SAMPLERS)}, got {sampler!r}")

    def occupancy_table(self) -> Tensor:
        """Final occupancy fractions; float64, shape (n_samplers, 4), rows in ``runs`` order."""
        return torch.stack([run.occupancy() for run in self.runs])


def _check_number(value: float, name: str, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValidationError(f"{name} must be a finite number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise ValidationError(f"{name} must be {'> 0' if positive else '>= 0'}, got {value!r}")
    return float(value)


def run_two_node_sampler(
    sampler: str,
    *,
    n_steps: int = 1000,
    learning_rate: float = 1.0,
    coupling: float = DEFAULT_COUPLING,
    generator: torch.Generator | int | None = None,
) -> TwoNodeRun:
    """Run one sampler of the demonstration from ``(−1, −1)`` (module docstring).

    Parameters
    ----------
    sampler : {"gibbs", "fpcd", "wang-landau"}
    n_steps : int, default 1000
        Sweeps.
    learning_rate : float, default 1.0
        ``η``, the constant step of the log-weight updates (ignored by ``"gibbs"``).
    coupling : float, default 5.0
        ``c``: the modes lie ``2c`` nats above the other two states.
    generator : torch.Generator or int, optional
        Two uniforms per sweep are drawn from it.

    Returns
    -------
    TwoNodeRun
    """
    if sampler not in SAMPLERS:
        raise ValidationError(f"sampler must be one of {', '.join(SAMPLERS)}, got {sampler!r}")
    n_steps = check_positive_int(n_steps, "n_steps")
    learning_rate = _check_number(learning_rate, "learning_rate", positive=False)
    coupling = _check_number(coupling, "coupling", positive=False)
    generator = resolve_generator(generator)
    uniforms = torch.rand(n_steps, 2, generator=generator, dtype=torch.float64).tolist()
    phi = potentials(coupling).tolist()
    log_weights = [0.0, 0.0, 0.0, 0.0]
    states, weight_history = [START_STATE], [list(log_weights)]
    state = START_STATE
    for uniform_second, uniform_first in uniforms:
        log_density = [phi[k] - log_weights[k] for k in range(4)]
        state = _sweep(state, log_density, uniform_second, uniform_first)
        if sampler != "gibbs":
            log_weights[state] += learning_rate
        if sampler == "fpcd":
            log_weights[DATA_STATE] -= learning_rate
        states.append(state)
        weight_history.append(list(log_weights))
    return TwoNodeRun(
        sampler=sampler,
        states=torch.tensor(states, dtype=torch.int64),
        log_weights=torch.tensor(weight_history, dtype=torch.float64),
    )


def run_two_node(
    *,
    n_steps: int = 1000,
    learning_rate: float = 1.0,
    coupling: float = DEFAULT_COUPLING,
    generator: torch.Generator | int | None = None,
) -> TwoNodeResult:
    """Run Gibbs, FPCD and Wang-Landau on the two-node MRF, each from ``(−1, −1)``.

    Each sampler gets its own child generator (:func:`boltzlab.rng.spawn`), so the same seed
    gives the same three chains. Arguments as in :func:`run_two_node_sampler`.

    Examples
    --------
    >>> result = run_two_node(n_steps=200, generator=0)
    >>> tuple(result.run("wang-landau").states.shape), tuple(result.occupancy_table().shape)
    ((201,), (3, 4))
    """
    generators = spawn(resolve_generator(generator), len(SAMPLERS))
    runs = tuple(
        run_two_node_sampler(
            sampler, n_steps=n_steps, learning_rate=learning_rate, coupling=coupling, generator=child
        )
        for sampler, child in zip(SAMPLERS, generators, strict=True)
    )
    return TwoNodeResult(
        runs=runs, coupling=float(coupling), learning_rate=float(learning_rate), n_steps=runs[0].n_steps
    )
