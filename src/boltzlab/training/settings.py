"""JSON-able records of negative-phase options, for ``describe`` and checkpoint headers."""

from __future__ import annotations

from typing import Any

import torch

from boltzlab.tempering.ladders import Ladder

__all__ = ["operator_record", "setting_record"]


def setting_record(value: Any) -> Any:
    """A JSON-able record of one option value.

    Parameters
    ----------
    value : Any
        An option as given: a ladder, a tensor or array, a list or tuple, a scalar or string,
        ``None``, or a callable (e.g. a γ schedule function).

    Returns
    -------
    Any
        A ladder's β values and a tensor's or array's values as a flat list of float; a list
        or tuple as a list of records; a scalar, string or ``None`` unchanged; anything else
        (a callable, say) as its ``repr``, since a function cannot be written to JSON.
    """
    if isinstance(value, Ladder):
        value = value.betas
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [setting_record(item) for item in value]
    if callable(value):
        return repr(value)
    try:
        values = torch.as_tensor(value, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        return repr(value)
    return [float(item) for item in values.detach().flatten().tolist()]


def operator_record(operator: Any) -> dict[str, Any]:
    """An operator by name and parameters, for files people read: ``{"operator": "mixture",
    "operator_params": {"alpha": 0.5}}`` rather than its ``repr`` ``"MixtureOperator(alpha=0.5)"``.

    The name is the one :func:`boltzlab.operators.get` takes (``operator.name``; the class name
    for an operator without one); the parameters are its public attributes that are plain
    values (:func:`setting_record`), which for the built-in operators are their constructor's.
    """
    name = getattr(operator, "name", None)
    params = {
        key: setting_record(value)
        for key, value in sorted(vars(operator).items())
        if not key.startswith("_") and (value is None or isinstance(value, (bool, int, float, str)))
    }
    return {"operator": name if isinstance(name, str) else type(operator).__name__, "operator_params": params}
