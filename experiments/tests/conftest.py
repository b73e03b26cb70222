"""Shared fixtures of the reproductions' tests: one torch thread, the shared real datasets, the CLI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner, Result

from boltzlab.cli.main import cli

# The shared data sets live in shared/data in the folder that holds the checkout (see its README).
SHARED_DATA = Path(
    os.environ.get("BOLTZLAB_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared" / "data")
)


@pytest.fixture(autouse=True)
def _one_thread():
    # Tiny presets: a second OpenMP thread only adds synchronisation on a busy machine.
    torch.set_num_threads(1)
    yield


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path of the shared data sets; skips the test with a reason when they are absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real datasets not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture
def reproduce():
    """``reproduce(*args)``: run ``boltzlab reproduce ARGS`` in this process, through click's runner."""

    def run(*args: str | Path) -> Result:
        return CliRunner().invoke(cli, ["reproduce", *(str(arg) for arg in args)])

    return run
