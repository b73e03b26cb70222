"""Shared fixtures; puts tests/ on sys.path so every test can ``import harness``."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

# The fault-injection suite (CONTRIBUTING.md, "The fault-injection suite"): tests marked
# ``@pytest.mark.fault("category")``, each parametrised case one fault handled. Their outcomes
# are tallied by category on the controller (reports carry the category in user_properties,
# which pytest-xdist forwards from its workers) and printed at the end of the run.
_FAULT_TALLY: dict[str, dict[str, int]] = {}


def pytest_runtest_setup(item: pytest.Item) -> None:
    marker = item.get_closest_marker("fault")
    if marker is not None:
        item.user_properties.append(("fault", marker.args[0]))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    category = dict(report.user_properties).get("fault")
    if category is None or (
        report.when != "call" and not (report.when == "setup" and report.outcome != "passed")
    ):
        return
    counts = _FAULT_TALLY.setdefault(str(category), {"passed": 0, "failed": 0, "skipped": 0})
    counts[report.outcome] += 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _FAULT_TALLY:
        return
    terminalreporter.section("fault-injection suite")
    width = max(len(name) for name in _FAULT_TALLY)
    terminalreporter.write_line(f"{'category'.ljust(width)}  cases  handled  failed  skipped")
    totals = [0, 0, 0, 0]
    for name in sorted(_FAULT_TALLY):
        counts = _FAULT_TALLY[name]
        row = [sum(counts.values()), counts["passed"], counts["failed"], counts["skipped"]]
        totals = [a + b for a, b in zip(totals, row, strict=True)]
        terminalreporter.write_line(
            f"{name.ljust(width)}  {row[0]:5d}  {row[1]:7d}  {row[2]:6d}  {row[3]:7d}"
        )
    terminalreporter.write_line(
        f"{'all'.ljust(width)}  {totals[0]:5d}  {totals[1]:7d}  {totals[2]:6d}  {totals[3]:7d}"
    )


# The shared data sets live in ../shared/data beside the checkout (see its README).
SHARED_DATA = Path(
    os.environ.get("BOLTZLAB_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)


@pytest.fixture(scope="session", autouse=True)
def _hermetic_gemm_cache(tmp_path_factory: pytest.TempPathFactory):
    # The GEMM backend's calibration is cached per machine; tests keep theirs out of the
    # user's cache folder (the backend itself comes from BOLTZLAB_GEMM, auto by default).
    if "BOLTZLAB_CACHE_DIR" not in os.environ:
        os.environ["BOLTZLAB_CACHE_DIR"] = str(tmp_path_factory.mktemp("boltzlab-cache"))
    yield


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


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path of ../shared/data; skips the test with a reason when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real datasets not found at {SHARED_DATA} (../shared/data is absent)")
    return SHARED_DATA


@dataclass(frozen=True)
class TrainedRBM:
    """A 784×20 RBM trained on real data, with its exact log Z (shared; do not modify)."""

    model: Any
    train: Any
    log_z: float


@pytest.fixture(scope="session")
def mnist_rbm(shared_data: Path) -> TrainedRBM:
    """A 784×20 RBM fitted by scikit-learn (so estimator tests do not depend on boltzlab's
    trainer) on the first 10,000 binarised MNIST training images, with the base-rate base and
    its exact log Z (2^20 hidden states). Built once per test session."""
    import numpy as np
    from sklearn.neural_network import BernoulliRBM

    import boltzlab as bl

    with np.load(shared_data / "mnist.npz") as archive:
        images = archive["x_train"][:10_000]
    train = (images.reshape(len(images), -1) > 127).astype(np.float64)
    rbm = BernoulliRBM(n_components=20, learning_rate=0.05, batch_size=100, n_iter=5, random_state=0)
    model = bl.RBM.from_sklearn(rbm.fit(train)).set_base_rate(train)
    torch.set_num_threads(2)
    try:
        log_z = bl.exact_log_z(model)
    finally:
        torch.set_num_threads(1)
    return TrainedRBM(model=model, train=train, log_z=log_z)
