"""``kill -9`` at random points of ``boltzlab train``, then ``--resume``: the same model, byte for byte.

A reference run trains uninterrupted. Other runs of the same command are killed with SIGKILL
after a random delay (seeded), which lands during training, between checkpoints or while one
is written (checkpoints every 7 updates), and resumed with ``--resume`` until they finish.
Model files are byte-reproducible (``io.serialize``), so the finished run's
``model.safetensors`` must have the reference's sha256, and the folder must hold no leftover
temporary file and no lock. Slow tier: each kill costs a process start.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from boltzlab.io.run_lock import LOCK_NAME

pytestmark = [pytest.mark.slow, pytest.mark.fault("kill -9 and resume")]

_ENTRY = "from boltzlab.cli.main import main; main()"
_ARGS = ["train", "--data", "digits", "--hidden", "16", "--algorithm", "pcd", "--updates", "600"]
_ARGS += ["--checkpoint-every", "7", "--seed", "5", "--snapshots", "0"]


def _command(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-c", _ENTRY, *_ARGS, "--out", str(out), *extra]


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("reference") / "run"
    subprocess.run(_command(out), check=True, capture_output=True, env=_env(), timeout=300)
    return _sha(out / "model.safetensors")


@pytest.mark.parametrize("seed", range(4))
def test_a_run_killed_at_random_points_resumes_to_the_same_model(
    tmp_path: Path, reference: str, seed: int
) -> None:
    chooser = random.Random(seed)
    out = tmp_path / "run"
    kills = 0
    for attempt in range(12):
        resume = (
            ["--resume"] if (out / "checkpoints").is_dir() and any((out / "checkpoints").iterdir()) else []
        )
        process = subprocess.Popen(
            _command(out, *resume), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env(), text=True
        )
        if attempt < 3:
            # Start-up (imports, data) takes about 2 s; training 600 updates about as long again.
            time.sleep(chooser.uniform(1.5, 4.0))
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                kills += 1
        _, stderr = process.communicate(timeout=300)
        if process.returncode == 0:
            break
        assert process.returncode == -signal.SIGKILL, stderr
    else:
        pytest.fail("the run did not finish in 12 starts")
    assert kills >= 1, "no kill landed: the delays are shorter than the run"
    assert _sha(out / "model.safetensors") == reference
    leftovers = [
        path.name for path in (*out.iterdir(), *(out / "checkpoints").iterdir()) if path.name.endswith(".tmp")
    ]
    assert leftovers == [] and not (out / LOCK_NAME).exists()
