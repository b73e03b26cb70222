"""Mode hopping of the flip-the-state study: class changes of chains on Artificial Modes.

Brügge, Fischer & Igel (2013, §5.3); docs/algorithms.md §2.2. :func:`run_mode_hopping` trains RBMs
with CD-5 on Artificial Modes and counts, per operator, the steps until the first class change
of chains started at training examples and the class changes of one chain started at the
all-ones state (nearest class template, ties discarded).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab import RBM, Chains, train
from boltzlab.data import Dataset
from boltzlab.evaluation import class_templates, count_mode_changes, nearest_template, steps_to_first_change
from boltzlab.operators import Operator
from boltzlab.operators import get as get_operator
from boltzlab.rng import make_generator
from boltzlab.sampling import initial_chains, iterate
from boltzlab_experiments.flip_the_state.config import FlipTheStateConfig
from boltzlab_experiments.flip_the_state.seeds import Progress, base_seed, derive_seed, report

__all__ = ["ModeHoppingResult", "run_mode_hopping", "track_classes"]


@dataclass(frozen=True)
class ModeHoppingResult:
    """Class changes of chains on CD-k-trained Artificial Modes RBMs.

    Attributes
    ----------
    p_mut : tuple of float
    operators : tuple of str
    start_steps, long_steps : int
        Longest run of the chains started at training examples; length of the all-ones chain.
    first_change : Tensor, shape (n_p_mut, n_models, n_operators, n_starts), int64
        Sweeps until the first class change of each chain started at a training example; −1
        when it did not change within ``start_steps`` (censored).
    class_changes : Tensor, shape (n_p_mut, n_models, n_operators), int64
        Class changes of the chain started at all-ones (tied steps discarded).
    """

    p_mut: tuple[float, ...]
    operators: tuple[str, ...]
    start_steps: int
    long_steps: int
    first_change: Tensor
    class_changes: Tensor

    def changed_fraction(self) -> Tensor:
        """Fraction of started chains that changed class within ``start_steps``; (n_p_mut, n_operators)."""
        return (self.first_change >= 0).to(torch.float64).mean(dim=(1, 3))

    def median_first_change(self) -> Tensor:
        """Median steps to the first change over models and starts, censored chains counted as
        never (+inf); (n_p_mut, n_operators), float64."""
        steps = self.first_change.to(torch.float64)
        steps = torch.where(self.first_change >= 0, steps, torch.full_like(steps, math.inf))
        flat = steps.transpose(1, 2).reshape(len(self.p_mut), len(self.operators), -1)
        # The lower median of a sample with infinities stays well defined (torch.median).
        return flat.median(dim=2).values


def track_classes(
    model: RBM,
    chains: Chains,
    operator: Operator,
    templates: Tensor,
    n_steps: int,
    generator: torch.Generator,
) -> Tensor:
    """Nearest-template class of every chain before and after each of ``n_steps`` sweeps; (n_steps + 1, n)."""
    states = [chains.layers[0]]
    for state, _ in iterate(model, operator, chains, generator=generator, n_sweeps=n_steps):
        states.append(state.layers[0])
    return nearest_template(torch.stack(states), templates)


def run_mode_hopping(
    config: FlipTheStateConfig,
    datasets: Mapping[float, Dataset],
    *,
    generator: torch.Generator | int | None = None,
    progress: Progress | None = None,
) -> ModeHoppingResult:
    """Mode hopping on Artificial Modes (Brügge et al. 2013, §5.3; docs/algorithms.md §2.2).

    Parameters
    ----------
    config : FlipTheStateConfig
    datasets : mapping of p_mut to Dataset
        Labelled Artificial Modes data; the values of ``config.mode_p_mut`` missing here are
        left out.
    generator : torch.Generator or int, optional
        One base seed is drawn from it; each model's training, starts and runs derive their
        seeds from it and their labels.
    progress : callable (done, total, label), optional

    Notes
    -----
    Classes are the nearest thresholded class means (Hamming distance; ties discarded). Both
    operators start from the same training examples and hidden states with the same seed.
    """
    base = base_seed(generator)
    p_values = tuple(p_mut for p_mut in config.mode_p_mut if p_mut in datasets)
    n_ops = len(config.operators)
    first = torch.empty(len(p_values), config.mode_models, n_ops, config.mode_starts, dtype=torch.int64)
    changes = torch.empty(len(p_values), config.mode_models, n_ops, dtype=torch.int64)
    total, done = len(p_values) * config.mode_models, 0
    report(progress, 0, total, "starting")
    for p_index, p_mut in enumerate(p_values):
        data = datasets[p_mut]
        templates = class_templates(data.train, data.train_labels)
        for model_index in range(config.mode_models):
            labels = ("modes", p_mut, model_index)
            model = RBM(data.n_visible, config.mode_hidden, generator=derive_seed(base, *labels, "init"))
            batch_size = min(config.mode_batch_size, data.train.shape[0])
            train(
                model,
                data.train,
                algorithm="cd",
                k=config.mode_k,
                batch_size=batch_size,
                n_updates=config.mode_updates,
                learning_rate=config.mode_learning_rate,
                generator=derive_seed(base, *labels, "train"),
            )
            start_generator = make_generator(derive_seed(base, *labels, "starts"))
            starts = initial_chains(model, config.mode_starts, init=data.train, generator=start_generator)
            ones = initial_chains(model, 1, init=torch.ones(1, data.n_visible), generator=start_generator)
            for op_index, name in enumerate(config.operators):
                operator = get_operator(name)
                classes = track_classes(
                    model,
                    starts,
                    operator,
                    templates,
                    config.mode_start_steps,
                    make_generator(derive_seed(base, *labels, "run")),
                )
                first[p_index, model_index, op_index] = steps_to_first_change(classes)
                long = track_classes(
                    model,
                    ones,
                    operator,
                    templates,
                    config.mode_long_steps,
                    make_generator(derive_seed(base, *labels, "long")),
                )
                changes[p_index, model_index, op_index] = int(count_mode_changes(long[:, 0]))
            done += 1
            report(progress, done, total, f"modes p_mut={p_mut:g} model {model_index}")
    return ModeHoppingResult(
        p_mut=p_values,
        operators=tuple(config.operators),
        start_steps=config.mode_start_steps,
        long_steps=config.mode_long_steps,
        first_change=first,
        class_changes=changes,
    )
