"""τ of the energy, flip against Gibbs, on RBMs the user supplies as model files.

Brügge, Fischer & Igel (2013) report that flip-the-state needs 17.28 % fewer steps than Gibbs
for the same variance of the energy on 784×500 MNIST RBMs trained with 20-PT10 (paper §5;
docs/algorithms.md §2.2). The study's own mixing part (:func:`~.mixing.run_mixing`) trains
small RBMs; this module measures the same quantity on given models, with the same
measurement (:func:`~.mixing.measure_operator`: burn-in from the starting states, then τ of
the joint energy pooled over chains by Sokal's window and by an AR fit).

The paper ran one chain of 10⁶ sweeps per model; here many shorter independent chains are
pooled, which at one thread is far faster for the same number of chain-sweeps (a sweep of
100 chains costs little more than a sweep of one). τ must stay well below the chain length
for the pooled estimate to be reliable (``reliable`` flags chains shorter than 50 τ).

In a ``torch.distributed`` process group the ranks share the chains: each runs whole blocks
of them (``blocks``) and the energies are gathered in chain order before τ is estimated, so
the numbers are those of one process with the same ``blocks``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from boltzlab import RBM, distributed
from boltzlab import progress as sweep_reports
from boltzlab.errors import ValidationError
from boltzlab.io import load_model
from boltzlab_experiments.flip_the_state.mixing import (
    MixingResult,
    OperatorMixing,
    measure_operator,
    mixing_result,
)
from boltzlab_experiments.flip_the_state.seeds import base_seed, derive_seed

__all__ = [
    "INIT_CHOICES",
    "ModelFileMixingConfig",
    "load_rbm",
    "local_chains",
    "run_model_file_mixing",
    "training_label",
]

INIT_CHOICES = ("data", "base")

SweepProgress = Callable[[int, int, str], None]
"""``progress(sweeps_done, sweeps_total, label)``, in sweeps of all chains over every run."""


@dataclass(frozen=True, kw_only=True)
class ModelFileMixingConfig:
    """How the chains of each model and operator run.

    The defaults are sized for a 784×500 RBM at one thread: a sweep of 100 chains with the
    energy recorded took 5.1–6.3 ms (Gibbs and flip alike, on a shared two-core machine), so
    one model's Gibbs and flip runs of 5,000 + 50,000 sweeps take 10–12 minutes. On a PCD-1
    MNIST RBM the chains' 2,000-sweep means still differed between chains as if τ were a few
    hundred sweeps (a slow component the short lags do not show), hence a burn-in five times the
    paper's 1,000 and 50,000 recorded sweeps, about 100 τ.

    Attributes
    ----------
    n_chains : int
        Independent chains per model and operator, pooled for τ.
    n_steps : int
        Recorded sweeps per chain, after the burn-in.
    burn_in : int
        Unrecorded sweeps from the starting states (the paper used 1,000).
    max_lag : int
        Lags of the autocorrelation function kept for the figure and ``mixing-acf.csv`` (τ
        itself uses every lag).
    blocks : int
        The chains are cut into this many blocks, each with its own random stream; the
        numbers are the same on any number of processes up to ``blocks``.
    init : str
        ``"data"``: chains start from random MNIST training examples, as the study's mixing
        part does; ``"base"``: from exact samples of the model's base distribution.
    operators : tuple of str
        Must hold ``"gibbs"`` and ``"flip"`` (the gain compares them).
    """

    n_chains: int = 100
    n_steps: int = 50_000
    burn_in: int = 5000
    max_lag: int = 5000
    blocks: int = distributed.DEFAULT_BLOCKS
    init: str = "data"
    operators: tuple[str, ...] = ("gibbs", "flip")

    def __post_init__(self) -> None:
        checks = [
            (self.n_chains >= 1, f"--chains must be at least 1, got {self.n_chains}"),
            # Three points are the fewest an autocorrelation time is estimated from.
            (self.n_steps >= 3, f"--steps must be at least 3, got {self.n_steps}"),
            (self.burn_in >= 0, f"--burn-in must be 0 or more, got {self.burn_in}"),
            (self.max_lag >= 1, f"--max-lag must be at least 1, got {self.max_lag}"),
            (
                1 <= self.blocks <= self.n_chains,
                f"--blocks must be between 1 and the {self.n_chains} chains, got {self.blocks}",
            ),
            (
                self.init in INIT_CHOICES,
                f"--init must be one of {', '.join(INIT_CHOICES)}, got {self.init!r}",
            ),
            (
                {"gibbs", "flip"} <= set(self.operators),
                f"the operators must include gibbs and flip, got {self.operators}",
            ),
        ]
        for passed, message in checks:
            if not passed:
                raise ValidationError(message)


def load_rbm(path: str | Path) -> RBM:
    """The RBM in ``path`` (:func:`boltzlab.io.load_model`), on this process's device.

    Refused with one line when the file holds another kind of model (a DBM, a Gaussian RBM):
    flip-the-state's gain is the paper's claim for binary RBMs. Under torchrun with CUDA each
    rank loads it onto its own GPU (:func:`boltzlab.distributed.default_device`).
    """
    model: nn.Module = load_model(Path(path), device=distributed.default_device())
    if not isinstance(model, RBM):
        raise ValidationError(
            f"{path}: holds a {type(model).__name__}, not an RBM; τ of flip against Gibbs is measured on "
            "binary RBMs (train one with 'boltzlab train')"
        )
    return model


def training_label(model: nn.Module) -> str:
    """How the model was trained, from its file's metadata: e.g. ``"PCD-1, 10000 updates"``.

    ``"not recorded"`` when the file does not say (a model saved outside ``boltzlab train``).
    """
    training = getattr(model, "metadata", {}).get("training")
    if not isinstance(training, dict) or "algorithm" not in training:
        return "not recorded"
    # The paper's notation: CD-k, PCD-k, t-PT_k (here PT-k with its options after it).
    label = str(training["algorithm"]).upper()
    if training.get("k") is not None:
        label += f"-{training['k']}"
    params = training.get("algorithm_params") or {}
    if isinstance(params, dict) and params:
        label += " (" + ", ".join(f"{key} {value}" for key, value in params.items()) + ")"
    if training.get("n_updates") is not None:
        label += f", {training['n_updates']} updates"
    return label


def local_chains(n_chains: int, blocks: int, where: distributed.Topology | None = None) -> int:
    """Chains the process ``where`` (default: this one) runs when ``n_chains`` are cut into
    ``blocks``: the sizes of its blocks (:func:`boltzlab.distributed.owned_blocks`); all of
    them when alone."""
    sizes = distributed.block_sizes(n_chains, blocks)
    return sum(sizes[block] for block in distributed.owned_blocks(blocks, where))


def _sweep_listener(
    progress: SweepProgress | None, chains: int, done_before: int, total: int, label: str
) -> sweep_reports.ProgressHook:
    """A :func:`boltzlab.progress.reporting` hook that turns chain-sweeps into sweeps.

    The sampler reports this process's chain-sweeps after every sweep; the bar is redrawn at
    most 200 times over the whole run: redrawing it every sweep would cost as much as a sweep
    of a small model, and fill a log with lines.
    """
    counted = 0
    every = max(1, total // 200)

    def listen(event: sweep_reports.ProgressEvent) -> None:
        nonlocal counted
        if not isinstance(event, sweep_reports.Sweeps):  # stages and budget rounds: no sweeps
            return
        before = counted // chains
        counted += event.chain_sweeps
        after = counted // chains
        if progress is not None and after // every > before // every:
            progress(done_before + after, total, label)

    return listen


def run_model_file_mixing(
    models: Sequence[RBM],
    names: Sequence[str],
    config: ModelFileMixingConfig,
    *,
    data: Tensor | None = None,
    generator: torch.Generator | int | None = None,
    progress: SweepProgress | None = None,
) -> MixingResult:
    """τ of the energy of every model under each operator of ``config``.

    Parameters
    ----------
    models : sequence of RBM
        Of one size (the result has one ``layer_sizes``).
    names : sequence of str
        One per model, e.g. the files' names.
    config : ModelFileMixingConfig
    data : Tensor, shape (n_examples, n_visible), optional
        Where the chains start when ``config.init == "data"`` (random rows); required then.
    generator : torch.Generator or int, optional
        One base seed; model ``i``'s chains get ``derive_seed(base, "model-file", i, "sample")``,
        the same for every operator, so Gibbs and flip start from the same states.
    progress : callable, optional
        ``progress(sweeps_done, sweeps_total, label)``, with sweeps counted over every model
        and operator (burn-in included).

    Returns
    -------
    MixingResult
        With ``model_names`` and ``seconds`` set. In a process group a collective; every rank
        returns the same numbers (but its own ``seconds``).
    """
    if len(models) == 0 or len(models) != len(names):
        raise ValidationError(f"give one name per model, got {len(models)} models and {len(names)} names")
    sizes = {tuple(model.layer_sizes) for model in models}
    if len(sizes) != 1:
        listed = ", ".join(
            f"{name} {'×'.join(map(str, m.layer_sizes))}" for name, m in zip(names, models, strict=True)
        )
        raise ValidationError(f"the model files must all have the same layer sizes, got {listed}")
    (layer_sizes,) = sizes
    start: str | Tensor = "base"
    if config.init == "data":
        if data is None:
            raise ValidationError("init 'data' needs the training examples the chains start from")
        if data.shape[1] != layer_sizes[0]:
            raise ValidationError(
                f"the data have {data.shape[1]} visible units but the models {layer_sizes[0]}; "
                "start the chains from the models' base distribution instead (--init base)"
            )
        start = data
    base = base_seed(generator)
    n_models, n_operators = len(models), len(config.operators)
    measured: list[list[OperatorMixing]] = []
    weight_scale = torch.tensor(
        [float(model.weights.detach().abs().mean()) for model in models], dtype=torch.float64
    )
    run_sweeps = config.burn_in + config.n_steps
    total = n_models * n_operators * run_sweeps
    chains_here = local_chains(config.n_chains, config.blocks)
    for model_index, (model, name) in enumerate(zip(models, names, strict=True)):
        init = start if isinstance(start, str) else start.to(model.device)
        row: list[OperatorMixing] = []
        measured.append(row)
        for operator_index, operator in enumerate(config.operators):
            done = (model_index * n_operators + operator_index) * run_sweeps
            listener = _sweep_listener(progress, chains_here, done, total, f"{name} {operator}")
            with sweep_reports.reporting(listener):
                row.append(
                    measure_operator(
                        model,
                        operator,
                        n_chains=config.n_chains,
                        n_steps=config.n_steps,
                        burn_in=config.burn_in,
                        max_lag=config.max_lag,
                        init=init,
                        generator=derive_seed(base, "model-file", model_index, "sample"),
                        blocks=config.blocks,
                    )
                )
            if progress is not None:
                progress(done + run_sweeps, total, f"{name} {operator}")
    return mixing_result(
        measured,
        operators=config.operators,
        layer_sizes=layer_sizes,
        n_steps=config.n_steps,
        n_chains=config.n_chains,
        weight_scale=weight_scale,
        model_names=names,
    )
