"""DBM model files: the ``"dbm"`` kind round-trips bit for bit and refuses inconsistent files.

The file machinery itself (atomic writes, hostile headers, foreign formats) is tested in
tests/test_io.py and tests/models/test_rbm_io.py; here only what the DBM kind adds: a
variable number of layers (``weights.0 … weights.{L−1}``, ``biases.0 … biases.L``) whose
shapes must chain. Sizes 7-5-3-2 are distinct so a transposed tensor fails loudly.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save as safetensors_save

import boltzlab as bl
from boltzlab.errors import ModelFileError, ValidationError
from boltzlab.io import MODEL_KINDS
from harness import random_dbm

SIZES = (7, 5, 3, 2)
INT_VIEW = {
    torch.float64: torch.int64,
    torch.float32: torch.int32,
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
}


def _model(dtype: torch.dtype = torch.float32, *, fitted: bool = True) -> bl.DBM:
    model = random_dbm(SIZES, seed=17, dtype=dtype, base_rate=fitted)
    model.metadata["trained_by"] = "test"
    return model


def _bit_identical(first: torch.Tensor, second: torch.Tensor) -> bool:
    """Equal bit patterns (``torch.equal`` alone would accept −0.0 for 0.0)."""
    return first.dtype == second.dtype and torch.equal(
        first.view(INT_VIEW[first.dtype]), second.view(INT_VIEW[second.dtype])
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("fitted", [True, False])
def test_round_trip_is_bit_identical_and_keeps_base_and_metadata(tmp_path, dtype, fitted):
    model = _model(dtype, fitted=fitted)
    with torch.no_grad():
        model.biases[2][0] = -0.0  # a signed zero must survive too
    before = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    path = model.save(tmp_path / "dbm.safetensors", metadata={"config": {"epochs": 3}})
    loaded = bl.DBM.load(path)
    assert isinstance(loaded, bl.DBM) and loaded.dtype == dtype
    assert loaded.layer_sizes == SIZES and loaded.update_groups == ((1, 3), (0, 2))
    assert loaded.state_dict().keys() == model.state_dict().keys()
    for name, tensor in model.state_dict().items():
        assert _bit_identical(loaded.state_dict()[name], tensor), name
        assert _bit_identical(tensor, before[name]), f"saving modified {name}"
    assert loaded.base_fitted is fitted
    assert loaded.metadata == {"trained_by": "test", "config": {"epochs": 3}}


def test_round_trip_preserves_densities_and_header(tmp_path):
    model = _model(torch.float64)
    path = model.save(tmp_path / "m.safetensors")
    loaded = bl.DBM.load(path)
    small = random_dbm((3, 3, 2), seed=2, base_rate=True)
    assert bl.exact_log_z(bl.DBM.load(small.save(tmp_path / "s.safetensors"))) == bl.exact_log_z(small)
    chains = model.init_chains(13, generator=torch.Generator().manual_seed(1))
    assert torch.equal(loaded.free_energy(chains.layers, 0.4), model.free_energy(chains.layers, 0.4))
    with safe_open(path, framework="pt") as handle:
        header = handle.metadata()
        # A DBM keeps no witness rows: no certified bound would start from them.
        assert sorted(handle.keys()) == sorted(model.state_dict())
    assert header["kind"] == "dbm" and header["base_fitted"] == "true"
    assert json.loads(header["shapes"])["weights.1"] == [5, 3]
    assert MODEL_KINDS["dbm"].model_class is bl.DBM


def test_rbm_and_dbm_loaders_refuse_each_others_models(tmp_path):
    dbm_path = _model().save(tmp_path / "dbm.safetensors")
    rbm_path = bl.RBM(n_visible=7, n_hidden=3, generator=0).save(tmp_path / "rbm.safetensors")
    with pytest.raises(ValidationError, match="holds a DBM, not an RBM"):
        bl.RBM.load(dbm_path)
    with pytest.raises(ValidationError, match="holds a RBM, not a DBM"):
        bl.DBM.load(rbm_path)


# ---------------------------------------------------------------------------- corrupt files
def _valid_parts() -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    tensors = {name: tensor.detach().clone() for name, tensor in _model().state_dict().items()}
    header = {
        "format": "boltzlab-model",
        "format_version": "1",
        "kind": "dbm",
        "shapes": _shapes_of(tensors),
        "dtype": "float32",
        "base_fitted": "true",
        "metadata": "{}",
    }
    return tensors, header


def _shapes_of(tensors: dict[str, torch.Tensor]) -> str:
    return json.dumps({name: list(tensor.shape) for name, tensor in tensors.items()})


def _edit(change):
    def mutate(tensors, header):
        change(tensors)
        header["shapes"] = _shapes_of(tensors)

    return mutate


def _drop(*names):
    def change(tensors):
        for name in names:
            del tensors[name]

    return change


def _replace(name, make):
    def change(tensors):
        tensors[name] = make(tensors[name])

    return change


def _nan_in_weights(tensors, header):
    tensors["weights.1"][2, 1] = float("nan")


CORRUPTIONS = [
    (
        _edit(_drop("biases.1")),
        r"tensors \['biases\.1'\] are missing \(kind 'dbm' needs base_logits, biases\.0",
    ),
    (
        _edit(_replace("weights.1", lambda w: w.t().contiguous())),
        r"tensor 'weights\.1' should have shape \(5, 5\) given the others \(found .*weights\.1 \(3, 5\)",
    ),
    (
        _edit(_drop("weights.1", "weights.2", "biases.2", "biases.3")),
        r"needs tensors 'weights\.0' and 'weights\.1'.*found 1",
    ),
    (_edit(_drop("weights.1")), r"needs tensors 'weights\.0' and 'weights\.1'.*found 1"),
    (
        _edit(_replace("weights.0", lambda w: w.reshape(-1))),
        r"'weights\.0' has shape \(35,\), expected \(n_0, n_1\)",
    ),
    (_edit(_replace("base_logits", lambda b: b[:5].clone())), r"'base_logits' should have shape \(7,\)"),
    (_nan_in_weights, r"tensor 'weights\.1' has 1 NaN or infinite values"),
]


@pytest.mark.parametrize(("corrupt", "message"), CORRUPTIONS)
def test_load_refuses_inconsistent_dbm_files_naming_the_problem(tmp_path, corrupt, message):
    tensors, header = _valid_parts()
    corrupt(tensors, header)
    path = tmp_path / "broken.safetensors"
    path.write_bytes(safetensors_save(tensors, metadata=header))
    with pytest.raises(ModelFileError, match=message) as caught:
        bl.DBM.load(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.fault("hostile model and checkpoint files")
def test_valid_parts_load_so_each_corruption_is_the_only_fault(tmp_path):
    tensors, header = _valid_parts()
    path = tmp_path / "fine.safetensors"
    path.write_bytes(safetensors_save(tensors, metadata=header))
    assert bl.DBM.load(path).layer_sizes == SIZES


def test_stray_weight_after_a_gap_is_unexpected(tmp_path):
    tensors, header = _valid_parts()
    tensors["weights.4"] = torch.zeros(2, 2)
    header["shapes"] = _shapes_of(tensors)
    path = tmp_path / "stray.safetensors"
    path.write_bytes(safetensors_save(tensors, metadata=header))
    with pytest.raises(ModelFileError, match=r"unexpected tensors \['weights\.4'\] for kind 'dbm'"):
        bl.DBM.load(path)
