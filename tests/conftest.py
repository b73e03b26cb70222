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
def _deterministic_threads():
    # Two threads match CI; fixed so timings and float reductions do not vary between tests.
    torch.set_num_threads(2)
    yield


@pytest.fixture
def shared_data() -> Path:
    """Path of ../shared/data; skips the test with a reason when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real datasets not found at {SHARED_DATA} (../shared/data is absent)")
    return SHARED_DATA
