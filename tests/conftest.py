"""Shared fixtures; puts tests/ on sys.path so every test can ``import harness``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

# The shared data sets live in ../shared/data beside the checkout (see its README).
SHARED_DATA = Path(
    os.environ.get("BOLTZLAB_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)


@pytest.fixture(autouse=True)
def _one_thread():
    # Most tests use tiny models, where a second OpenMP thread only adds synchronisation and,
    # on a busy machine, can slow small elementwise ops a hundredfold. Tests that enumerate
    # large state spaces ask for the `two_threads` fixture instead.
    torch.set_num_threads(1)
    yield


@pytest.fixture
def two_threads():
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(1)


@pytest.fixture
def shared_data() -> Path:
    """Path of ../shared/data; skips the test with a reason when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real datasets not found at {SHARED_DATA} (../shared/data is absent)")
    return SHARED_DATA
