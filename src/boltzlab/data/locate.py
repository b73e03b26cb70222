"""Where file-backed datasets are looked for: ``root``, then ``BOLTZLAB_DATA``, then
the standard install locations; the first complete match wins.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from boltzlab.errors import DataError

__all__ = ["ENVIRONMENT_VARIABLE", "STANDARD_LOCATIONS", "Found", "locate"]

ENVIRONMENT_VARIABLE = "BOLTZLAB_DATA"
# Folders searched after root and BOLTZLAB_DATA. Debian's dataset-fashion-mnist installs the
# four gzipped IDX files in /usr/share/datasets/fashion-mnist; Keras caches mnist.npz (same
# keys as ours) and the Fashion-MNIST IDX files under ~/.keras/datasets.
STANDARD_LOCATIONS: dict[str, tuple[Path, ...]] = {
    "mnist": (Path("~/.keras/datasets"),),
    "fashion-mnist": (Path("/usr/share/datasets/fashion-mnist"), Path("~/.keras/datasets/fashion-mnist")),
}
DATA_README = "docs/data.md"


@dataclass(frozen=True, slots=True)
class Found:
    """Where a dataset was found: one .npz file, or one file per part."""

    npz: Path | None = None
    parts: dict[str, Path] | None = None


def locate(
    name: str,
    root: Any,
    *,
    npz_names: tuple[str, ...],
    part_names: dict[str, tuple[str, ...]],
    subdirectories: tuple[str, ...],
    loose_parts_in_environment: bool,
    how_to_get: str,
) -> Found:
    """Search root, BOLTZLAB_DATA, then the standard locations; the first complete match wins."""
    directories: list[tuple[Path, bool]] = []
    if root is not None:
        root_path = Path(root).expanduser()
        if root_path.is_file():
            if root_path.suffix == ".npz":
                return Found(npz=root_path)
            root_path = root_path.parent
        directories += [(root_path, True)] + [(root_path / sub, True) for sub in subdirectories]
    environment = os.environ.get(ENVIRONMENT_VARIABLE, "")
    for entry in filter(None, environment.split(os.pathsep)):
        folder = Path(entry).expanduser()
        directories += [(folder, loose_parts_in_environment)] + [
            (folder / sub, True) for sub in subdirectories
        ]
    directories += [(Path(folder).expanduser(), True) for folder in STANDARD_LOCATIONS.get(name, ())]
    looked = []
    for directory, parts_allowed in directories:
        if not directory.is_dir():
            looked.append(f"{directory} (no such folder)")
            continue
        for npz_name in npz_names:
            if (directory / npz_name).is_file():
                return Found(npz=directory / npz_name)
        if parts_allowed and part_names:
            present = {
                key: next((directory / n for n in names if (directory / n).is_file()), None)
                for key, names in part_names.items()
            }
            if all(present.values()):
                return Found(parts={key: path for key, path in present.items() if path is not None})
            missing = [names[0] for key, names in part_names.items() if present[key] is None]
            if len(missing) < len(part_names):
                looked.append(f"{directory} (incomplete: missing {', '.join(missing)})")
                continue
        looked.append(str(directory))
    wanted = " or ".join(
        npz_names + ((" + ".join(names[0] for names in part_names.values()),) if part_names else ())
    )
    where = f"in {'; '.join(looked)}" if looked else "but no folder was given"
    environment_note = "" if environment else f" ({ENVIRONMENT_VARIABLE} is not set)"
    raise DataError(
        f"dataset {name!r} not found: looked for {wanted} {where}{environment_note}. To get it: {how_to_get}"
    )
