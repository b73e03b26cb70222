"""The command line starts at once: help, version and ``import boltzlab`` import neither torch nor scipy.

Properties checked (docs/architecture.md, "Start-up"):

* ``boltzlab --help``, every subcommand's ``--help``, ``boltzlab reproduce --help`` and
  ``boltzlab --version``, each in a fresh interpreter, leave torch and scipy unimported (what
  they import is checked, not how long it takes: timings are benchmarks/startup.py's);
* ``import boltzlab`` imports no torch, yet ``bl.RBM``, ``from boltzlab import RBM``,
  ``bl.io.load_model`` and ``dir(bl)`` work as with eager imports, and an unknown name is an
  AttributeError;
* the group's table (:data:`boltzlab.cli.main.COMMANDS`) lists each command with the help line
  the command itself declares, under its own name;
* every constant of :mod:`boltzlab.cli.choices` that copies the library's equals it, so a new
  registry name, alphabet, sample format or a changed default cannot leave ``--help`` stale.
"""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest
import torch

import boltzlab
from boltzlab import data, estimators, operators, sampling, training
from boltzlab.cli import choices, sample_files
from boltzlab.cli.logz import methods_taking
from boltzlab.cli.main import COMMANDS, cli
from boltzlab.data import sequence_dataset, sequences
from boltzlab.data.sequence_weights import DEFAULT_IDENTITY
from boltzlab.evaluation import generative
from boltzlab.models import witness
from boltzlab.training import negative, snapshots

# Runs the command line as the `boltzlab` script does, then reports what it imported on the
# last line of stdout (after whatever the command printed).
_RUN_CLI = """
import json, sys
from boltzlab.cli.main import main
sys.argv = ["boltzlab", *json.loads(sys.argv[1])]
try:
    main()
    code = 0
except SystemExit as stop:
    code = stop.code
print(json.dumps({"code": code, **{name: name in sys.modules for name in ("torch", "scipy", "numpy")}}))
"""


def _imported_by(script: str, *args: str) -> tuple[str, dict[str, object]]:
    """Run ``script`` in a fresh interpreter; its output before the last line, and that line's JSON."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120, check=False
    )
    *printed, last = done.stdout.rstrip("\n").split("\n")
    try:
        report = json.loads(last)
    except json.JSONDecodeError:
        pytest.fail(f"no report from the child process: {done.stdout!r} {done.stderr!r}")
    return "\n".join(printed), report


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["--version"], *([name, "--help"] for name in COMMANDS)],
    ids=lambda argv: " ".join(argv),
)
def test_help_and_version_import_neither_torch_nor_scipy(argv: list[str]) -> None:
    printed, report = _imported_by(_RUN_CLI, json.dumps(argv))
    assert report["code"] == 0, printed
    assert printed.strip(), "nothing was printed"
    assert report["torch"] is False and report["scipy"] is False, (argv, report)


def test_import_boltzlab_imports_no_torch() -> None:
    script = 'import json, sys, boltzlab; print(json.dumps({"torch": "torch" in sys.modules}))'
    _, report = _imported_by(script)
    assert report == {"torch": False}


def test_the_package_still_offers_its_names() -> None:
    from boltzlab import RBM
    from boltzlab.models import RBM as defined

    assert RBM is defined and boltzlab.RBM is defined
    assert callable(boltzlab.io.load_model)
    assert callable(boltzlab.estimate_log_z) and callable(boltzlab.train)
    assert isinstance(boltzlab.__version__, str)
    listed = dir(boltzlab)
    assert set(boltzlab.__all__) <= set(listed) and "__version__" in listed
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = boltzlab.no_such_name
    with pytest.raises(AttributeError):
        _ = boltzlab._private_name
    with pytest.raises(ImportError):
        from boltzlab import no_such_name  # noqa: F401


def test_the_group_lists_each_command_with_its_own_help_line() -> None:
    context = click.Context(cli)
    assert cli.list_commands(context) == list(COMMANDS)
    for name, (_module, line) in COMMANDS.items():
        command = cli.get_command(context, name)
        assert isinstance(command, click.Command), name
        assert command.name == name
        assert command.get_short_help_str() == line, name
    assert cli.get_command(context, "no-such-command") is None


@pytest.mark.parametrize(
    ("copy", "owner"),
    [
        (choices.DATASETS, data.available()),
        (choices.OPERATORS, operators.available()),
        (choices.NEGATIVE_PHASES, training.available_phases()),
        (choices.PHASE_ALIASES, negative.PHASE_ALIASES),
        (choices.ESTIMATOR_METHODS, estimators.methods()),
        (choices.TARGET_STDERR_METHODS, tuple(methods_taking("target-stderr"))),
        (choices.MAX_CHAINS_METHODS, tuple(methods_taking("max-chains"))),
        (choices.SAMPLERS, sampling.samplers()),
        (choices.DEFAULT_MAX_SNAPSHOTS, snapshots.DEFAULT_MAX_SNAPSHOTS),
        (choices.DEFAULT_WITNESS_ROWS, witness.DEFAULT_WITNESS_ROWS),
        (choices.MAX_WITNESS_ROWS, witness.MAX_WITNESS_ROWS),
        (choices.ALPHABETS, tuple(sequences.ALPHABETS)),
        (choices.DEFAULT_IDENTITY, DEFAULT_IDENTITY),
        (choices.DEFAULT_SEQUENCE_TEST_FRACTION, sequence_dataset.DEFAULT_SEQUENCE_TEST_FRACTION),
        (choices.SEQUENCE_SPLITS, sequence_dataset.SEQUENCE_SPLITS),
        (choices.DEFAULT_CHECK_SWEEPS, generative.DEFAULT_CHECK_SAMPLING.n_sweeps),
        (choices.DEFAULT_CHECK_CHAINS, generative.DEFAULT_CHECK_SAMPLING.n_chains),
        (choices.SAMPLE_FORMATS, tuple(suffix.lstrip(".") for suffix in sample_files.SAMPLE_FORMATS)),
    ],
    ids=[
        "datasets",
        "operators",
        "negative phases",
        "phase aliases",
        "estimators",
        "target-stderr methods",
        "max-chains methods",
        "samplers",
        "snapshots",
        "witness rows",
        "max witness rows",
        "alphabets",
        "identity",
        "sequence test fraction",
        "sequence splits",
        "check sweeps",
        "check chains",
        "sample formats",
    ],
)
def test_each_copy_in_choices_equals_the_library(copy: object, owner: object) -> None:
    assert copy == owner


def test_the_dtype_names_are_torch_float_types() -> None:
    assert tuple(sorted(choices.DTYPES)) == choices.DTYPES
    for name in choices.DTYPES:
        dtype = getattr(torch, name)
        assert isinstance(dtype, torch.dtype) and dtype.is_floating_point
