"""What the tests of the scripts in ``benchmarks/`` share: importing one by path, reading its CSV."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_script(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` imported by path (benchmarks/ is not a package), as ``<name>_bench``."""
    spec = importlib.util.spec_from_file_location(f"{name}_bench", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """A CSV a benchmark wrote: its columns and its rows."""
    with path.open(newline="") as file:
        reader = csv.DictReader(file)
        return list(reader.fieldnames or []), list(reader)
