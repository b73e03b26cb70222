"""The flip-the-state study: does flip-the-state beat Gibbs where Brügge et al. say it does?

Brügge, Fischer & Igel (2013), *The flip-the-state transition operator for restricted Boltzmann
machines*, Machine Learning 93(1); docs/algorithms.md §2.2 ("Headline figures"). Four parts, each a
pure function of a configuration, data and a generator (or seed) that returns a frozen result
(the command ``boltzlab reproduce flip-the-state`` writes the files):

* :func:`~boltzlab_experiments.flip_the_state.slem.run_slem` — the fraction of random RBMs
  (weights ``U[−c, c]``, zero biases) whose exact flip sweep ``T_h T_v`` has a smaller SLEM
  than Gibbs' (paper's Fig. 3, upper);
* :func:`~boltzlab_experiments.flip_the_state.learning.run_learning` — exact log-likelihood
  learning curves for CD-k, PCD-k and t-PT_k with Gibbs and with flip, repeated with seeds,
  compared by the Wilcoxon signed-rank test;
* :func:`~boltzlab_experiments.flip_the_state.mixing.run_mixing` — integrated
  autocorrelation time of the energy for Gibbs and flip on MNIST-trained RBMs;
* :func:`~boltzlab_experiments.flip_the_state.modes.run_mode_hopping` — class changes of
  chains on Artificial Modes;
* :func:`~boltzlab_experiments.flip_the_state.model_files.run_model_file_mixing` — the
  mixing part's τ on RBMs the user supplies as model files (``--model-file``), with the
  chains shared by torchrun's ranks.

:func:`~boltzlab_experiments.flip_the_state.findings.findings` turns the results into
verdicts keyed off the numbers; the sizes are TOML presets (``presets/``).
"""

from boltzlab_experiments.findings import Finding
from boltzlab_experiments.flip_the_state.config import DatasetSpec, FlipTheStateConfig, LearningSetup
from boltzlab_experiments.flip_the_state.findings import PAPER_TAU_GAIN, findings, paper_gain_finding
from boltzlab_experiments.flip_the_state.learning import (
    LearningResult,
    LearningRun,
    WilcoxonRow,
    run_learning,
    wilcoxon_table,
)
from boltzlab_experiments.flip_the_state.mixing import MixingResult, run_mixing
from boltzlab_experiments.flip_the_state.model_files import ModelFileMixingConfig, run_model_file_mixing
from boltzlab_experiments.flip_the_state.modes import ModeHoppingResult, run_mode_hopping
from boltzlab_experiments.flip_the_state.slem import SlemStudyResult, run_slem, slem_study

__all__ = [
    "PAPER_TAU_GAIN",
    "DatasetSpec",
    "Finding",
    "FlipTheStateConfig",
    "LearningResult",
    "LearningRun",
    "LearningSetup",
    "MixingResult",
    "ModeHoppingResult",
    "ModelFileMixingConfig",
    "SlemStudyResult",
    "WilcoxonRow",
    "findings",
    "paper_gain_finding",
    "run_learning",
    "run_mixing",
    "run_mode_hopping",
    "run_model_file_mixing",
    "run_slem",
    "slem_study",
    "wilcoxon_table",
]
