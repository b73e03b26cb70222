"""The package declares every reproduction as a ``boltzlab reproduce`` plugin, with its example.

Properties checked: the ``boltzlab.reproduce`` entry points name exactly the eight commands,
each loads to a click command of that name whose help line is the package's ``REPRODUCE_HELP``
entry (what ``boltzlab reproduce --help`` lists without importing the commands), and importing
the package imports no torch; ``boltzlab reproduce --help`` lists them and every
command's ``--help`` shows an example; every study's presets load into its config (the
``label`` is the preset's name); the library itself never imports this package.
"""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import click
import pytest

import boltzlab
from boltzlab_experiments import REPRODUCE_HELP
from boltzlab_experiments.accuracy.estimators_vs_k import EstimatorsVsKConfig
from boltzlab_experiments.accuracy.models import TrainingConfig
from boltzlab_experiments.accuracy.rts_vs_ais import RTSvsAISConfig
from boltzlab_experiments.accuracy.varopt import VaroptConfig
from boltzlab_experiments.cast_comparison.config import CASTComparisonConfig
from boltzlab_experiments.flip_the_state.config import FlipTheStateConfig
from boltzlab_experiments.front_end.config import FrontEndConfig
from boltzlab_experiments.rts_tracking.config import RTSTrackingConfig

COMMANDS = {
    "two-node",
    "flip-the-state",
    "rts-tracking",
    "rts-vs-ais",
    "estimators-vs-k",
    "varopt",
    "cast",
    "front-end",
}


def test_entry_points_name_every_command() -> None:
    points = {point.name: point for point in entry_points(group="boltzlab.reproduce")}
    assert set(points) == COMMANDS
    for name, point in points.items():
        command = point.load()
        assert isinstance(command, click.Command) and command.name == name
        assert command.get_short_help_str() == REPRODUCE_HELP[name]
    assert set(REPRODUCE_HELP) == COMMANDS


def test_the_package_with_the_help_table_imports_no_torch() -> None:
    script = "import sys, boltzlab_experiments; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize("command", [[], *([name] for name in sorted(COMMANDS))])
def test_reproduce_help_shows_an_example(command: list[str], reproduce) -> None:
    result = reproduce(*command, "--help")
    assert result.exit_code == 0 and "Example" in result.output, result.output
    if not command:
        assert all(name in result.output for name in COMMANDS)


@pytest.mark.parametrize(
    ("config_class", "presets"),
    [
        (FlipTheStateConfig, ("tiny", "scaled", "full")),
        (RTSTrackingConfig, ("tiny", "scaled", "full")),
        (TrainingConfig, ("tiny", "scaled", "full")),
        (RTSvsAISConfig, ("tiny", "scaled", "full")),
        (EstimatorsVsKConfig, ("tiny", "scaled", "full")),
        (VaroptConfig, ("tiny", "scaled", "full")),
        (CASTComparisonConfig, ("tiny", "scaled", "full")),
        (FrontEndConfig, ("tiny", "scaled")),
    ],
)
def test_every_preset_loads(config_class: type, presets: tuple[str, ...]) -> None:
    for name in presets:
        config = getattr(config_class, name)()
        assert isinstance(config, config_class)
        if hasattr(config, "label") and config_class is not RTSTrackingConfig:
            assert config.label == name
    assert RTSTrackingConfig.full().label == "paper"


def test_the_library_never_imports_the_experiments() -> None:
    library = Path(boltzlab.__file__).parent
    mentions = [
        str(path.relative_to(library))
        for path in library.rglob("*.py")
        if re.search(r"^\s*(from|import)\s+boltzlab_experiments", path.read_text(encoding="utf-8"), re.M)
    ]
    assert mentions == []
