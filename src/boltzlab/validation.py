"""Argument checks for the public doors: they name the argument, what came, what was expected.

Inner kernels trust their inputs; these run once per public call.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from boltzlab.errors import ValidationError

__all__ = [
    "as_binary_tensor",
    "as_model_data",
    "as_real_tensor",
    "as_spin_tensor",
    "check_chains_match",
    "check_device",
    "check_finite_model",
    "check_nonnegative_int",
    "check_positive_int",
    "check_probability",
    "check_sample_weights",
    "require",
]


def require(condition: bool, message: str) -> None:
    """Raise :class:`ValidationError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise ValidationError(message)


def check_positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValidationError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_nonnegative_int(value: Any, name: str) -> int:
    """``value`` if it is an ``int`` (not a bool) ``>= 0``; :class:`ValidationError` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(f"{name} must be a non-negative integer, got {value!r}")
    return value


def check_probability(value: Any, name: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValidationError(f"{name} must be a number in [0, 1], got {value!r}") from None
    if not 0.0 <= number <= 1.0:
        raise ValidationError(f"{name} must be in [0, 1], got {number}")
    return number


def check_sample_weights(
    weights: Any, n_examples: int, name: str = "sample_weights", *, device: str | torch.device = "cpu"
) -> Tensor:
    """Per-example weights as a float64 tensor of shape ``(n_examples,)`` on ``device`` (a copy).

    Accepts tensors, NumPy arrays and sequences; refuses another shape, NaN or ±inf, a negative
    weight and an all-zero vector (there would be nothing to average), naming the first bad entry.
    Weights need not sum to one: every use normalises them (a weighted mean, or rows drawn with
    probability ``w_n / Σ w``).
    """
    if isinstance(weights, Tensor):
        tensor = weights.detach()
        if tensor.device.type == "meta":
            raise ValidationError(f"{name} is on the 'meta' device, which holds shapes but no values")
    else:
        try:
            tensor = torch.as_tensor(np.asarray(weights))
        except (TypeError, ValueError) as error:
            raise ValidationError(f"{name} could not be read as an array: {error}") from None
    if tensor.dtype == torch.bool or tensor.is_complex():
        raise ValidationError(f"{name} must hold real numbers, got dtype {tensor.dtype}")
    if tuple(tensor.shape) != (n_examples,):
        raise ValidationError(
            f"{name} must have shape ({n_examples},), one weight per example, got shape {tuple(tensor.shape)}"
        )
    tensor = tensor.to(device=device, dtype=torch.float64).clone()
    bad = torch.nonzero(~torch.isfinite(tensor)).flatten()
    if bad.numel():
        raise ValidationError(f"{name} must be finite; entry {int(bad[0])} is {float(tensor[bad[0]])}")
    negative = torch.nonzero(tensor < 0).flatten()
    if negative.numel():
        raise ValidationError(
            f"{name} must be non-negative; entry {int(negative[0])} is {float(tensor[negative[0]])}"
        )
    if not float(tensor.sum()) > 0.0:
        raise ValidationError(f"{name} sum to 0: at least one example needs a positive weight")
    return tensor


def _example_matrix(data: Any, name: str, *, n_units: int | None) -> Tensor:
    """``data`` read as a non-empty 2-D tensor ``(n_examples, n_units)``; not yet copied or cast.

    Accepts tensors (detached), NumPy arrays and nested sequences; refuses other ranks, a
    wrong number of units and empty data.
    """
    if isinstance(data, Tensor):
        tensor = data.detach()
        if tensor.device.type == "meta":
            raise ValidationError(
                f"{name} is on the 'meta' device, which holds shapes but no values; pass the data "
                "itself (on the CPU or the model's device)"
            )
    else:
        try:
            tensor = torch.as_tensor(np.asarray(data))
        except (TypeError, ValueError) as error:
            raise ValidationError(f"{name} could not be read as an array: {error}") from None
    if tensor.dim() != 2:
        raise ValidationError(
            f"{name} must have shape (n_examples, n_units), got shape {tuple(tensor.shape)}; "
            "flatten images first, e.g. x.reshape(len(x), -1)"
        )
    if n_units is not None and tensor.shape[1] != n_units:
        raise ValidationError(f"{name} has {tensor.shape[1]} units per example, the model expects {n_units}")
    if tensor.shape[0] == 0:
        raise ValidationError(f"{name} is empty (0 examples)")
    return tensor


def _finite_matrix(data: Any, name: str, *, n_units: int | None) -> Tensor:
    """:func:`_example_matrix` with booleans as uint8 and NaN/inf refused; not yet copied or cast."""
    tensor = _example_matrix(data, name, n_units=n_units)
    if tensor.dtype == torch.bool:
        tensor = tensor.to(torch.uint8)
    if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
        raise ValidationError(f"{name} contains NaN or infinite values")
    return tensor


def as_binary_tensor(
    data: Any,
    name: str,
    *,
    n_units: int | None = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
) -> Tensor:
    """``data`` as a 2-D 0/1 tensor of ``dtype`` on ``device`` (a copy; the input is untouched).

    Accepts tensors, NumPy arrays and nested sequences of shape ``(n_examples, n_units)``.
    Refuses other ranks, a wrong number of units, NaN/inf, and values other than 0 and 1.
    """
    tensor = _finite_matrix(data, name, n_units=n_units)
    if not bool(((tensor == 0) | (tensor == 1)).all()):
        bad = tensor[(tensor != 0) & (tensor != 1)]
        raise ValidationError(
            f"{name} must be binary (0/1); found {bad.numel()} other values, e.g. {bad.flatten()[0].item()!r}. "
            "Binarise it first, e.g. (x > 0.5) or boltzlab.data.binarize"
        )
    return tensor.to(device=device, dtype=dtype).clone()


def as_spin_tensor(
    data: Any,
    name: str,
    *,
    n_units: int | None = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
) -> Tensor:
    """Spin data (±1) as the 0/1 tensor a spin layer holds inside: ``v = (s + 1)/2`` (a copy).

    Accepts ±1 values, or 0/1 values with 0 for −1 (the internal form, as chains hold it;
    ``1`` means +1 in both). Refuses a mix of −1 and 0 (it cannot say which form was meant),
    any other value, NaN/inf and the shapes :func:`as_binary_tensor` refuses.
    """
    tensor = _finite_matrix(data, name, n_units=n_units)
    minus, zero = bool((tensor == -1).any()), bool((tensor == 0).any())
    if minus and zero:
        raise ValidationError(
            f"{name} mixes -1 and 0: a spin layer takes ±1 values, or 0/1 with 0 meaning -1, not both"
        )
    if minus:
        bad = tensor[(tensor != -1) & (tensor != 1)]
        if bad.numel():
            raise ValidationError(
                f"{name} must hold spins (±1); found {bad.numel()} other values, e.g. {bad.flatten()[0].item()!r}"
            )
        tensor = (tensor == 1).to(torch.uint8)
    return as_binary_tensor(tensor, name, n_units=n_units, dtype=dtype, device=device)


def as_real_tensor(
    data: Any,
    name: str,
    *,
    n_units: int | None = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
) -> Tensor:
    """``data`` as a 2-D finite real tensor of ``dtype`` on ``device`` (a copy).

    Accepts tensors, NumPy arrays and nested sequences of shape ``(n_examples, n_units)``;
    refuses other ranks, a wrong number of units, empty data and NaN/inf.
    """
    tensor = _example_matrix(data, name, n_units=n_units)
    if tensor.dtype == torch.bool or tensor.is_complex():
        raise ValidationError(f"{name} must hold real numbers, got dtype {tensor.dtype}")
    tensor = tensor.to(device=device, dtype=dtype)
    if not bool(torch.isfinite(tensor).all()):
        raise ValidationError(f"{name} contains NaN or infinite values (in {dtype})")
    return tensor.clone()


def as_model_data(model: Any, data: Any, name: str) -> Tensor:
    """``data`` checked for ``model``: a copy in the model's dtype and on its device.

    A model with real-valued visible units (e.g. :class:`~boltzlab.models.gaussian_rbm.GaussianRBM`)
    checks its own data through a ``validate_data(data, name)`` method; every other model
    gets :func:`as_binary_tensor` with ``n_units = model.layer_sizes[0]``.
    """
    hook = getattr(model, "validate_data", None)
    if callable(hook):
        return hook(data, name)
    return as_binary_tensor(data, name, n_units=model.layer_sizes[0], dtype=model.dtype, device=model.device)


def check_chains_match(model: Any, chains: Any, *, name: str = "chains", fix: str | None = None) -> None:
    """``chains`` in the model's dtype and on its device, or one error that names both and the fix.

    ``chains`` is anything with ``layers`` (a tuple of tensors) and ``beta`` (a tensor), e.g.
    :class:`~boltzlab.chains.Chains`. Chains are never converted silently: a float64 state for a
    float32 model (states built with numpy, say) is usually a slip, and would otherwise end in
    torch's "mat1 and mat2 must have the same dtype" deep inside a matrix product. Data, whose
    0/1 values convert exactly, is converted instead (:func:`as_model_data`).

    Parameters
    ----------
    model : TemperedModel
        Anything with ``dtype`` and ``device``; a model without them is not checked.
    chains : Chains
    name : str, default "chains"
        What the message calls the chains (e.g. ``"start chains"``).
    fix : str, optional
        How to fix it; default: convert with ``chains.to(...)`` or make them from the model.
    """
    sizes = getattr(model, "layer_sizes", None)
    if sizes is not None:
        widths = tuple(layer.shape[1] for layer in chains.layers)
        if widths != tuple(sizes):
            raise ValidationError(
                f"the {name} have layers of {_units(widths)} but the model's layers have {_units(sizes)}; "
                "make them with model.init_chains(...) or model.chains_from(data)"
            )
    dtype, device = getattr(model, "dtype", None), getattr(model, "device", None)
    if dtype is None or device is None:
        return
    device_type = torch.device(device).type
    layer_dtypes = {layer.dtype for layer in chains.layers} | {chains.beta.dtype}
    layer_devices = {layer.device.type for layer in chains.layers} | {chains.beta.device.type}
    if layer_dtypes == {dtype} and layer_devices == {device_type}:
        return
    found = ", ".join(sorted(str(d) for d in layer_dtypes)) + " on " + ", ".join(sorted(layer_devices))
    if fix is None:
        fix = (
            f"convert them with chains.to(dtype={dtype}, device='{device}'), or make them with "
            "model.init_chains(...) or model.chains_from(data)"
        )
    raise ValidationError(f"the {name} are {found} but the model is {dtype} on {device_type}: {fix}")


def _units(widths: Any) -> str:
    return " + ".join(str(int(width)) for width in widths) + " units"


def check_binary_layers(chains: Any, binary: Any, *, name: str = "chains") -> None:
    """Refuse chains whose binary layers hold values other than 0 and 1 (one synchronisation).

    A layerwise operator reads a 0.5 as "not 1" in one place and as half a unit in a matrix
    product in another, so such chains would be moved by a kernel that is no Markov chain of
    the model, silently. ``binary`` gives, per layer, whether it is binary.
    """
    layers = [layer for layer, is_binary in zip(chains.layers, binary, strict=True) if is_binary]
    if not layers:
        return
    flags = torch.stack([(layer * (layer - 1)).ne(0).any() for layer in layers])
    if not bool(flags.any()):
        return
    index = [i for i, is_binary in enumerate(binary) if is_binary][int(flags.to(torch.int8).argmax())]
    layer = chains.layers[index]
    bad = layer[(layer != 0) & (layer != 1)]
    raise ValidationError(
        f"the {name}' layer {index} must hold 0/1 values; found {bad.numel()} others, e.g. "
        f"{bad.flatten()[0].item()!r}. Binarise the states, or make them with model.init_chains(...) "
        "or model.chains_from(data)"
    )


def check_one_hot_layers(chains: Any, states: dict[int, int], *, name: str = "chains") -> None:
    """Refuse chains whose categorical layers are not one-hot (one 1 per site of ``q`` columns).

    ``states`` maps a layer index to its states per site ``q``; the layer's width must be a
    multiple of it. One synchronisation per layer.
    """
    for index, n_states in states.items():
        layer = chains.layers[index]
        sites = layer.reshape(layer.shape[0], -1, n_states)
        binary = (layer * (layer - 1)).eq(0).all()
        if bool(binary & sites.sum(2).eq(1).all()):
            continue
        raise ValidationError(
            f"the {name}' layer {index} must be one-hot, one 1 in each site's {n_states} columns; "
            "make the states with model.init_chains(...) or model.chains_from(sequences)"
        )


def check_finite_model(model: Any, door: str) -> None:
    """Refuse a model whose parameters or buffers hold NaN or ±inf, naming the tensor and the fix.

    Every number computed from such a model is NaN or infinite, and some checks pass on NaN
    (a comparison with NaN is False either way), so a verdict on it would be meaningless: the
    public doors (``estimate_log_z``, ``exact_log_z``, ``log_likelihood``, ``sample``) call this
    first. A model without ``named_parameters``/``named_buffers`` (not a ``torch.nn.Module``) is
    not checked. One device synchronisation per call.

    Parameters
    ----------
    model : TemperedModel
    door : str
        The public function refusing, for the message (e.g. ``"estimate_log_z"``).
    """
    named = []
    for attribute in ("named_parameters", "named_buffers"):
        method = getattr(model, attribute, None)
        if callable(method):
            named.extend(method())
    checked = [
        (name, tensor)
        for name, tensor in named
        if (tensor.is_floating_point() or tensor.is_complex()) and tensor.device.type != "meta"
    ]
    # One device synchronisation for the common case, a sound model; details only on failure.
    if not checked or bool(torch.stack([torch.isfinite(tensor).all() for _, tensor in checked]).all()):
        return
    for name, tensor in checked:
        finite = torch.isfinite(tensor)
        if bool(finite.all()):
            continue
        bad = int((~finite).sum())
        kinds = [
            label
            for label, hit in (
                ("NaN", bool(torch.isnan(tensor).any())),
                ("+inf", bool(torch.isposinf(tensor).any())),
                ("-inf", bool(torch.isneginf(tensor).any())),
            )
            if hit
        ]
        raise ValidationError(
            f"{door}: the model's {name!r} holds {bad} non-finite value(s) ({', '.join(kinds)}) of "
            f"{tensor.numel()}, so every estimate, likelihood or sample from it would be meaningless; "
            "a training run that diverged leaves such a model: load an earlier checkpoint, or "
            "retrain with a lower learning rate"
        )


def check_device(device: Any, name: str = "device") -> torch.device:
    """``device`` as a :class:`torch.device` this process can use, or one error that says why not.

    torch's own messages for a device it cannot use are about shared libraries ("Cannot get
    CUDA generator without ATen_cuda library") or list twenty device types; this names what was
    asked for, what the machine has and the fix.
    """
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValidationError(
            f"{name} {device!r} is not a device torch knows; use 'cpu', 'cuda' or 'cuda:N' (an NVIDIA GPU), or 'mps'"
        ) from None
    if resolved.type == "meta":
        raise ValidationError(f"{name} 'meta' holds shapes but no values; use 'cpu' or 'cuda'")
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            # A command-line flag is answered in flags: "--device cpu", not "device='cpu'".
            cpu = f"{name} cpu" if name.startswith("--") else f"{name}='cpu'"
            raise ValidationError(
                f"{name} {device!r} asks for a GPU, but this PyTorch sees none (torch.cuda.is_available() is "
                f"False; torch {torch.__version__}, CUDA build {torch.version.cuda or 'none'}); use {cpu}, "
                "or install a CUDA build of torch on a machine with an NVIDIA GPU"
            )
        count = torch.cuda.device_count()
        if resolved.index is not None and resolved.index >= count:
            raise ValidationError(
                f"{name} {device!r}: this machine has {count} CUDA device(s), numbered 0 to {count - 1}"
            )
    if resolved.type == "mps" and not torch.backends.mps.is_available():
        cpu = f"{name} cpu" if name.startswith("--") else f"{name}='cpu'"
        raise ValidationError(f"{name} {device!r}: Apple's MPS backend is not available here; use {cpu}")
    return resolved
