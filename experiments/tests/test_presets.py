"""Reading TOML presets into config dataclasses (:mod:`boltzlab_experiments.presets`).

Properties checked: values are converted by the field's type (integers to floats, arrays to
tuples, nested tables to dataclasses, a table to ``(key, value)`` pairs in order, ``"none"``
to ``None``); a field left out keeps its default; an unknown key, a value of the wrong type,
a missing preset and a missing section are refused naming what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from boltzlab.errors import ValidationError
from boltzlab_experiments.presets import available_presets, build, load_preset


@dataclass(frozen=True)
class Inner:
    name: str
    options: tuple[tuple[str, float | int | str], ...] = ()


@dataclass(frozen=True)
class Outer:
    scale: float
    sizes: tuple[tuple[int, int], ...]
    inner: Inner
    batch: int | None
    extra: dict[str, Any]
    flag: bool = False


def test_values_follow_the_field_types() -> None:
    table = {
        "scale": 2,
        "sizes": [[2, 3], [4, 5]],
        "inner": {"name": "a", "options": {"p": 0.1, "n": 7}},
        "batch": "none",
        "extra": {"k": 1},
    }
    built = build(Outer, table)
    assert built == Outer(2.0, ((2, 3), (4, 5)), Inner("a", (("p", 0.1), ("n", 7))), None, {"k": 1})
    assert isinstance(built.scale, float) and built.flag is False


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"typo": 1}, "unknown setting"),
        ({"scale": "big"}, "scale must be a number"),
        ({"sizes": [[2, 3, 4]]}, "must hold 2 values"),
        ({"batch": 1.5}, "batch must be of type int"),
        ({"flag": 1}, "flag must be of type bool"),
        ({"inner": "a"}, "inner must be a table"),
    ],
)
def test_bad_values_are_refused_by_name(change: dict, message: str) -> None:
    table = {"scale": 1, "sizes": [], "inner": {"name": "a"}, "batch": 3, "extra": {}} | change
    with pytest.raises(ValidationError, match=message):
        build(Outer, table)


def test_missing_presets_and_sections_are_refused() -> None:
    from boltzlab_experiments.accuracy.models import TrainingConfig

    package = "boltzlab_experiments.accuracy"
    assert available_presets(package) == ("full", "paper", "scaled", "tiny")
    with pytest.raises(ValidationError, match=r"no preset 'huge'.*full, paper, scaled, tiny"):
        load_preset(TrainingConfig, package, "huge", section="training")
    with pytest.raises(ValidationError, match=r"no \[nothing\] table"):
        load_preset(TrainingConfig, package, "tiny", section="nothing")
