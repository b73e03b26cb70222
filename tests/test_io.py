"""File layer: atomic writes, checkpoints, and refusal of foreign, corrupt or hostile files.

Every refusal must be a :class:`ModelFileError` whose single-line message names the file, the
problem and a fix; no other exception may escape a loader for a bad file.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import stat
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import torch
from safetensors.torch import save as safetensors_save

import boltzlab as bl
from boltzlab.errors import ModelFileError, ValidationError
from boltzlab.io import Checkpoint, load_checkpoint, load_model, save_checkpoint, write_atomic

LOADERS = {"model": load_model, "checkpoint": load_checkpoint}


def _assert_refused(loader, path, match: str | None = None) -> str:
    with pytest.raises(ModelFileError, match=match) as caught:
        loader(path)
    text = str(caught.value)
    assert str(path) in text, text
    assert "\n" not in text and ";" in text, text  # one line: problem; fix
    return text


def _raw(header: bytes | dict | list, data: bytes = b"", *, length: int | None = None) -> bytes:
    """A safetensors-like byte string with an arbitrary header (and optionally a lying length)."""
    if not isinstance(header, bytes):
        header = json.dumps(header).encode()
    return (len(header) if length is None else length).to_bytes(8, "little") + header + data


def _entry(start: int, end: int, shape: list[int], dtype: str = "F32") -> dict:
    return {"dtype": dtype, "shape": shape, "data_offsets": [start, end]}


def _npz_bytes() -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, weights=np.zeros((7, 3)))
    return buffer.getvalue()


def _torch_save_bytes(legacy: bool) -> bytes:
    buffer = io.BytesIO()
    torch.save({"weights": torch.zeros(7, 3)}, buffer, _use_new_zipfile_serialization=not legacy)
    return buffer.getvalue()


HOSTILE = {
    "empty": (b"", r"only 0 bytes \(empty or truncated\)"),
    "five bytes": (b"\x01\x02\x03\x04\x05", r"only 5 bytes"),
    "random bytes": (np.random.default_rng(3).bytes(4096), r"claims \d+ bytes"),
    "pickle": (
        pickle.dumps({"weights": [[0.0] * 3] * 7}),
        r"Python pickle.*never unpickles \(that could run code\)",
    ),
    "npz": (_npz_bytes(), r"zip archive \(a NumPy \.npz.*never unpickles"),
    "torch.save zip": (_torch_save_bytes(legacy=False), r"zip archive"),
    "torch.save legacy": (_torch_save_bytes(legacy=True), r"Python pickle"),
    "npy": (b"\x93NUMPY\x01\x00" + bytes(120), r"NumPy \.npy"),
    "header longer than file": (_raw({}, length=10_000), r"claims 10000 bytes but the file has 10"),
    "giant header": (_raw({}, length=2**40), r"over the 100000000-byte limit"),
    "header not JSON": (_raw(b"{nope"), r"corrupt safetensors header"),
    "header not UTF-8": (_raw(b'{"\xff\xfe": 1}'), r"corrupt safetensors header: it is not UTF-8 text"),
    "header a JSON array": (_raw(b"[1]"), r"does not start with '\{'"),
    # A bare "{}" is a valid, empty safetensors file: still not a boltzlab file.
    "empty safetensors file": (_raw(b"{}"), r"without boltzlab's 'format' metadata"),
    "deeply nested header": (_raw(b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}"), r"nested too deeply"),
    "duplicate tensor names": (
        _raw(
            b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}',
            bytes(8),
        ),
        r"names 'w' twice",
    ),
    "metadata not strings": (
        _raw({"__metadata__": {"format": 1}}),
        r"__metadata__ is not a table of strings",
    ),
    "entry not a table": (_raw({"w": 3}), r"'w' lacks dtype, shape or data_offsets"),
    "negative shape": (_raw({"w": _entry(0, 8, [-2])}, bytes(8)), r"'w' has a malformed dtype or shape"),
    "boolean offsets": (
        _raw({"w": {"dtype": "F32", "shape": [1], "data_offsets": [False, True]}}, bytes(1)),
        r"malformed data_offsets",
    ),
    "offsets outside the data": (
        _raw({"w": _entry(0, 4096, [1024])}, bytes(16)),
        r"claims bytes 0\.\.4096 but the data section has 16",
    ),
    "offsets reversed": (
        _raw({"w": _entry(8, 0, [2])}, bytes(8)),
        r"ends \(byte 0\) before it starts \(byte 8\)",
    ),
    "overlapping tensors": (
        _raw({"a": _entry(0, 8, [2]), "b": _entry(4, 12, [2])}, bytes(12)),
        r"tensors 'a' and 'b' overlap",
    ),
    "gap between tensors": (
        _raw({"a": _entry(4, 8, [1])}, bytes(8)),
        r"the tensors account for 4 bytes but the data section has 8",
    ),
    "size does not match shape": (_raw({"a": _entry(0, 8, [3])}, bytes(8)), r"safetensors refused it"),
    "unknown dtype": (_raw({"a": _entry(0, 8, [2], "Q9")}, bytes(8)), r"safetensors refused it"),
    "overflowing shape": (_raw({"a": _entry(0, 8, [2**62, 2**62])}, bytes(8)), r"safetensors refused it"),
    "trailing bytes": (
        _raw({"a": _entry(0, 8, [2])}, bytes(16)),
        r"the tensors account for 8 bytes but the data section has 16",
    ),
}


@pytest.mark.fault("hostile model and checkpoint files")
@pytest.mark.parametrize("loader_name", sorted(LOADERS))
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_loaders_refuse_foreign_corrupt_and_hostile_files(tmp_path, loader_name, case):
    data, match = HOSTILE[case]
    path = tmp_path / "hostile.safetensors"
    path.write_bytes(data)
    _assert_refused(LOADERS[loader_name], path, match)


@pytest.mark.fault("hostile model and checkpoint files")
@pytest.mark.parametrize("loader_name", sorted(LOADERS))
def test_loaders_refuse_missing_files_and_directories(tmp_path, loader_name):
    text = _assert_refused(
        LOADERS[loader_name], tmp_path / "absent.safetensors", r"does not exist; check the path"
    )
    assert "absent.safetensors" in text
    _assert_refused(LOADERS[loader_name], tmp_path, r"not a file")


# ---------------------------------------------------------------------------- atomic writes
def test_write_atomic_writes_creates_parents_and_leaves_no_temporary_files(tmp_path):
    path = tmp_path / "deep" / "er" / "file.bin"
    assert write_atomic(path, b"first") == path
    assert write_atomic(str(path), b"second") == path
    assert path.read_bytes() == b"second"
    assert [entry.name for entry in path.parent.iterdir()] == ["file.bin"]


def test_write_atomic_respects_the_umask(tmp_path):
    previous = os.umask(0o022)
    try:
        path = write_atomic(tmp_path / "file.bin", b"data")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # not mkstemp's private 0o600


@pytest.mark.fault("hostile model and checkpoint files")
def test_write_atomic_crash_keeps_old_file_and_removes_temporary(tmp_path, monkeypatch):
    path = write_atomic(tmp_path / "file.bin", b"old contents")

    def crash(source, target):
        raise KeyboardInterrupt  # a killed run, not merely an error

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(path, b"new contents")
    monkeypatch.undo()
    assert path.read_bytes() == b"old contents"
    assert [entry.name for entry in tmp_path.iterdir()] == ["file.bin"]


# ---------------------------------------------------------------------------- checkpoints
def test_checkpoint_round_trip_restores_generator_to_identical_draws(tmp_path):
    generator = torch.Generator().manual_seed(1234)
    torch.rand(5, generator=generator)  # advance it so the state is not a fresh seed
    model = bl.RBM(n_visible=7, n_hidden=3, generator=0, dtype=torch.float64)
    tensors = {
        "generator": generator.get_state(),
        "weights": model.weights,  # a Parameter that requires grad
        "steps": torch.tensor(17, dtype=torch.int64),
        "strided": torch.arange(12.0).reshape(3, 4).t(),  # not contiguous
        "half": torch.linspace(-1, 1, 5, dtype=torch.bfloat16),
    }
    originals = {name: tensor.detach().clone() for name, tensor in tensors.items()}
    metadata = {"epoch": 3, "config": {"lr": 0.1, "algorithm": "pcd"}, "history": [1.5, -2.0]}
    metadata_before = json.loads(json.dumps(metadata))
    path = save_checkpoint(tmp_path / "ckpt.safetensors", tensors=tensors, metadata=metadata)

    expected_draws = torch.rand(13, generator=generator)
    checkpoint = load_checkpoint(path)
    assert isinstance(checkpoint, Checkpoint)
    assert checkpoint.metadata == metadata
    assert set(checkpoint.tensors) == set(tensors)
    for name, tensor in checkpoint.tensors.items():
        assert tensor.dtype == originals[name].dtype and torch.equal(tensor, originals[name]), name
    restored = torch.Generator()
    restored.set_state(checkpoint.tensors["generator"])
    assert torch.equal(torch.rand(13, generator=restored), expected_draws)
    # Inputs untouched: same tensors, same values, same metadata.
    for name, tensor in tensors.items():
        assert torch.equal(tensor.detach(), originals[name]), name
    assert metadata == metadata_before
    assert [entry.name for entry in tmp_path.iterdir()] == ["ckpt.safetensors"]


def test_checkpoint_copies_do_not_alias_shared_storage(tmp_path):
    base = torch.arange(6.0)
    path = save_checkpoint(tmp_path / "c.safetensors", tensors={"all": base, "view": base[2:4]}, metadata={})
    loaded = load_checkpoint(path).tensors
    assert torch.equal(loaded["view"], torch.tensor([2.0, 3.0]))


def test_save_checkpoint_refuses_bad_metadata_and_tensors(tmp_path):
    with pytest.raises(ModelFileError, match="not JSON-serialisable"):
        save_checkpoint(tmp_path / "c.safetensors", tensors={}, metadata={"bad": torch.zeros(1)})
    with pytest.raises(ValidationError, match=r"tensors\['x'\] must be a torch.Tensor, got int"):
        save_checkpoint(tmp_path / "c.safetensors", tensors={"x": 3}, metadata={})
    assert list(tmp_path.iterdir()) == []


def test_model_and_checkpoint_loaders_refuse_each_others_files(tmp_path):
    model_path = bl.RBM(n_visible=7, n_hidden=3, generator=0).save(tmp_path / "model.safetensors")
    checkpoint_path = save_checkpoint(tmp_path / "ckpt.safetensors", tensors={}, metadata={})
    _assert_refused(load_checkpoint, model_path, r"is a boltzlab model file, not a checkpoint; load it with")
    _assert_refused(load_model, checkpoint_path, r"is a boltzlab checkpoint, not a model file")


@pytest.mark.fault("hostile model and checkpoint files")
@pytest.mark.parametrize(
    ("header", "match"),
    [
        (
            {"format": "boltzlab-checkpoint", "format_version": "2"},
            r"version 2 but this boltzlab reads version 1",
        ),
        ({"format": "boltzlab-checkpoint", "format_version": "x"}, r"not a whole number"),
        ({"format": "boltzlab-checkpoint", "format_version": "1", "metadata": "{"}, r"not valid JSON"),
        (
            {"format": "boltzlab-checkpoint", "format_version": "1", "metadata": "3"},
            r"a JSON int, expected a dict",
        ),
        ({"format_version": "1"}, r"without boltzlab's 'format' metadata"),
    ],
)
def test_load_checkpoint_refuses_bad_headers(tmp_path, header, match):
    path = tmp_path / "c.safetensors"
    path.write_bytes(safetensors_save({"x": torch.zeros(2)}, metadata=header))
    _assert_refused(load_checkpoint, path, match)


@pytest.mark.fault("hostile model and checkpoint files")
def test_read_errors_never_leak_library_exceptions(tmp_path):
    # Flip every byte of a small valid model file in turn: each result either loads or is
    # refused with ModelFileError, never another exception.
    data = bytearray(
        bl.RBM(n_visible=7, n_hidden=3, generator=0).save(tmp_path / "m.safetensors").read_bytes()
    )
    path = tmp_path / "flipped.safetensors"
    for position in range(0, len(data), 3):
        damaged = bytearray(data)
        damaged[position] ^= 0xFF
        path.write_bytes(bytes(damaged))
        try:
            load_model(path)
        except ModelFileError as error:
            assert str(path) in str(error)


@pytest.mark.fault("hostile model and checkpoint files")
def test_zip_with_safetensors_name_is_still_refused(tmp_path):
    path = tmp_path / "model.safetensors"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("weights.npy", b"\x93NUMPY")
    _assert_refused(load_model, path, r"zip archive")


_WRITE_ALL = """
import sys, torch, boltzlab as bl
from boltzlab.io import save_checkpoint
from boltzlab.models.trajectory import Trajectory
out = sys.argv[1]
model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
model.set_base_rate(torch.eye(7)[:5])
model.save(out + "/model.safetensors", metadata={"zeta": 1, "alpha": [2, 3], "mid": {"b": 1, "a": 2}})
save_checkpoint(out + "/checkpoint.safetensors", tensors={"w": torch.arange(6.0)}, metadata={"step": 3, "name": "x", "a": None})
Trajectory.from_models([bl.RBM(weights=s * model.weights.detach()) for s in (0.5, 1.0)]).save(out + "/trajectory.safetensors")
"""


@pytest.mark.slow  # a separate Python process or two (CONTRIBUTING.md, "Two tiers")
def test_identical_content_gives_identical_bytes_in_separate_processes(tmp_path):
    """Model files, checkpoints and trajectories written by two processes are byte for byte the
    same (the safetensors library orders its metadata by a per-process hash), so a checksum of
    a model file identifies its content."""
    folders = []
    for run in range(2):
        folder = tmp_path / f"run{run}"
        folder.mkdir()
        subprocess.run([sys.executable, "-c", _WRITE_ALL, str(folder)], check=True, timeout=120)
        folders.append(folder)
    for name in ("model.safetensors", "checkpoint.safetensors", "trajectory.safetensors"):
        first, second = ((folder / name).read_bytes() for folder in folders)
        assert first == second, name
        length = int.from_bytes(first[:8], "little")
        assert length % 8 == 0
        header = json.loads(first[8 : 8 + length])
        assert next(iter(header)) == "__metadata__" and list(header["__metadata__"]) == sorted(
            header["__metadata__"]
        )
    model = load_model(folders[0] / "model.safetensors")
    assert model.metadata == {"zeta": 1, "alpha": [2, 3], "mid": {"b": 1, "a": 2}}
    assert load_checkpoint(folders[1] / "checkpoint.safetensors").metadata == {
        "step": 3,
        "name": "x",
        "a": None,
    }


@pytest.mark.slow  # a separate Python process or two (CONTRIBUTING.md, "Two tiers")
@pytest.mark.fault("hostile model and checkpoint files")
def test_a_sparse_file_is_refused_from_its_header_before_it_is_read(tmp_path):
    """A small header padded to 1 GiB (a sparse file: no disk used) is refused without reading
    the gigabyte: the header is checked against the file size first."""
    path = tmp_path / "sparse.safetensors"
    model = tmp_path / "small.safetensors"
    bl.RBM(n_visible=3, n_hidden=2, generator=0).save(model)
    with path.open("wb") as stream:
        stream.write(model.read_bytes())
        stream.truncate(1 << 30)
    # The peak resident size is compared with the peak after the imports, in the same process:
    # torch's own import differs by hundreds of MB between machines (CI's peaked at 840 MB).
    script = (
        "import resource, sys\n"
        "from boltzlab.io import load_model\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "try:\n    load_model(sys.argv[1])\nexcept Exception as error:\n    print(type(error).__name__, error)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)\n"
    )
    lines = subprocess.run(
        [sys.executable, "-c", script, str(path)], check=True, capture_output=True, text=True, timeout=120
    ).stdout.splitlines()
    assert lines[0].startswith("ModelFileError") and "corrupt safetensors header" in lines[0], lines
    assert int(lines[1]) < 100_000  # kB: reading the file would add 1 GB (1,048,576 kB)


@pytest.mark.fault("hostile model and checkpoint files")
def test_a_symlink_loop_is_not_called_missing(tmp_path):
    loop = tmp_path / "loop.safetensors"
    loop.symlink_to(loop)
    with pytest.raises(ModelFileError, match="symbolic link whose target is missing or that loops"):
        load_model(loop)
