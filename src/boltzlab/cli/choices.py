"""The names and numbers that the commands' options show in ``--help``, as plain constants.

``boltzlab COMMAND --help`` must answer at once (docs/architecture.md, "Start-up"), so the
option declarations (:mod:`boltzlab.cli.commands`) cannot ask the library's registries for
the dataset, operator or estimator names, nor read its constants: that imports torch and
scipy, seconds on a laptop. They read this module instead, which imports nothing.

Two kinds of constant live here:

* **copies** of what a library module owns (a registry's names, a library default): the
  library stays the owner, and tests/cli/test_startup.py checks that each copy equals it, so a
  new operator, estimator, sampler, negative phase or dataset fails that test until its name
  is added here too;
* **the command line's own** limits and defaults (``MAX_EPOCHS``, ``DEFAULT_RAISE_EXAMPLES``,
  ``DEFAULT_METHOD_WORK``, ...), owned here; the implementation modules import them from here.
"""

from __future__ import annotations

__all__ = [
    "ALPHABETS",
    "DATASETS",
    "DEFAULT_CHECK_CHAINS",
    "DEFAULT_CHECK_SWEEPS",
    "DEFAULT_IDENTITY",
    "DEFAULT_MAX_SNAPSHOTS",
    "DEFAULT_METHOD_WORK",
    "DEFAULT_PRETRAIN_UPDATES",
    "DEFAULT_RAISE_EXAMPLES",
    "DEFAULT_SEQUENCE_TEST_FRACTION",
    "DEFAULT_WITNESS_ROWS",
    "DTYPES",
    "ESTIMATOR_METHODS",
    "MAX_ANCHORED_UNITS",
    "MAX_CHAINS_METHODS",
    "MAX_EPOCHS",
    "MAX_LEARNING_RATE",
    "MAX_UPDATES",
    "MAX_WITNESS_ROWS",
    "NEGATIVE_PHASES",
    "OPERATORS",
    "PHASE_ALIASES",
    "SAMPLERS",
    "SAMPLE_FORMATS",
    "SEQUENCE_SPLITS",
    "TARGET_STDERR_METHODS",
    "TENSORBOARD_HELP",
    "TRAIN_MODELS",
    "VISIBLE_UNITS",
]

# --- Copies of the library's names and defaults (tests/cli/test_startup.py compares them) ---

#: :func:`boltzlab.data.available`: the datasets ``--data`` takes by name.
DATASETS = (
    "adult",
    "artificial-modes",
    "bars-and-stripes",
    "binary-alphadigits",
    "caltech101-silhouettes",
    "digits",
    "dna",
    "fashion-mnist",
    "mnist",
    "mushrooms",
    "nade-dna",
    "nips",
)
#: :func:`boltzlab.operators.available`: the transition operators of ``--operator``.
OPERATORS = ("flip", "gibbs", "hmc", "mixture")
#: :func:`boltzlab.training.available_phases`: the negative phases of ``train --algorithm``.
NEGATIVE_PHASES = ("ast", "cast", "cd", "fpcd", "pcd", "pl", "pt", "rts", "trans-sap")
#: :data:`boltzlab.training.negative.PHASE_ALIASES`: other names ``--algorithm`` accepts.
PHASE_ALIASES = {"sap": "pcd"}
#: :func:`boltzlab.estimators.methods`: the estimators of ``logz --method`` and ``evaluate --methods``.
ESTIMATOR_METHODS = (
    "ais",
    "anchored-ais",
    "exact",
    "mbar",
    "raise",
    "rts",
    "ti",
    "ti-rb",
    "trajectory-ais",
    "trajectory-mbar",
    "trajectory-rts",
    "ts",
)
#: The methods whose record takes ``--target-stderr`` (:func:`boltzlab.cli.logz.methods_taking`),
#: by family.
TARGET_STDERR_METHODS = (
    "ais",
    "anchored-ais",
    "mbar",
    "rts",
    "ti",
    "ti-rb",
    "ts",
    "trajectory-mbar",
    "trajectory-rts",
)
#: The methods whose record takes ``--max-chains``, by family.
MAX_CHAINS_METHODS = (
    "ais",
    "anchored-ais",
    "mbar",
    "rts",
    "ti",
    "ti-rb",
    "ts",
    "trajectory-mbar",
    "trajectory-rts",
)
#: :func:`boltzlab.sampling.samplers`: the samplers of ``sample --sampler``.
SAMPLERS = ("ast", "cast", "plain", "pt", "ptt", "st", "tt")
#: :data:`boltzlab.training.snapshots.DEFAULT_MAX_SNAPSHOTS`: ``train --snapshots``'s default.
DEFAULT_MAX_SNAPSHOTS = 64
#: :data:`boltzlab.models.witness.DEFAULT_WITNESS_ROWS` and ``MAX_WITNESS_ROWS``: ``train --witness-rows``.
DEFAULT_WITNESS_ROWS = 1000
MAX_WITNESS_ROWS = 100_000
#: :data:`boltzlab.data.sequences.ALPHABETS`: the built-in alphabets of ``--alphabet`` (besides
#: ``custom:SYMBOLS``).
ALPHABETS = ("protein", "rna", "dna")
#: :data:`boltzlab.data.sequence_weights.DEFAULT_IDENTITY`: ``--identity``'s default.
DEFAULT_IDENTITY = 0.8
#: :data:`boltzlab.data.sequence_dataset.DEFAULT_SEQUENCE_TEST_FRACTION`: the test split of a
#: FASTA file when no fraction is given.
DEFAULT_SEQUENCE_TEST_FRACTION = 0.1
#: :data:`boltzlab.data.sequence_dataset.SEQUENCE_SPLITS`: ``--split``.
SEQUENCE_SPLITS = ("homology", "random")
#: :data:`boltzlab.evaluation.generative.DEFAULT_CHECK_SAMPLING`: ``evaluate --check-sweeps`` and
#: ``--check-chains``.
DEFAULT_CHECK_SWEEPS = 500
DEFAULT_CHECK_CHAINS = 100
#: :data:`boltzlab.cli.sample_files.SAMPLE_FORMATS`: ``sample --format`` (the extensions, without the dot).
SAMPLE_FORMATS = ("png", "npy", "npz", "csv", "fasta")

# --- The command line's own limits and defaults (owned here) ---

#: Limits that catch a slip of the exponent (``--epochs 1e20`` started with an ETA of 10^15 hours;
#: ``--learning-rate 1e30`` finished with weights of 1e30).
MAX_EPOCHS = 1_000_000
MAX_UPDATES = 1_000_000_000
MAX_LEARNING_RATE = 10.0
#: ``train --dtype``: the names of the float types a model may be trained in (``boltzlab.cli.train``
#: maps them to torch's).
DTYPES = ("float32", "float64")
#: ``train --model``: an RBM (``--hidden``) or a DBM (``--layers``).
TRAIN_MODELS = ("rbm", "dbm")
#: ``train --visible-units``: 0/1 units or ±1 spins (docs/algorithms.md §1.7).
VISIBLE_UNITS = ("binary", "spin")
#: ``train --pretrain``: CD-1 updates of each RBM of a DBM's greedy pretraining.
DEFAULT_PRETRAIN_UPDATES = 1000
#: RAISE's held-out examples (``logz`` and ``evaluate`` ``--examples``).
DEFAULT_RAISE_EXAMPLES = 100
#: Units of an RBM's smaller layer up to which ``evaluate`` runs anchored AIS by default.
MAX_ANCHORED_UNITS = 256
#: Weight-sweeps one method of ``evaluate`` may spend by default: chain-sweeps ×
#: :func:`boltzlab.cli.cost_cap.weights_per_sweep`. Under a minute of AIS at 784×500 (measured:
#: 100 chains × 14,500 temperatures in 47 s on two threads, 71 s on one, witness included).
DEFAULT_METHOD_WORK = 1.0e12
#: ``train --tensorboard``'s help.
TENSORBOARD_HELP = (
    "Log scalars, sample images and weight histograms for TensorBoard to DIR "
    "(default RUN_DIR/tensorboard); needs pip install 'boltzlab[tensorboard]'."
)
