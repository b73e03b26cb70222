"""boltzlab.registry: name → object tables behind operators, samplers, schemes and estimators.

Properties checked: entries are found by name, case-insensitively and with ``_`` read as
``-``; the decorator returns what it decorates; ``names`` lists the normalised names sorted;
an unknown or non-string name is refused with a ValidationError naming the kind and listing
the known names; registering a name again replaces its entry; ``remove`` forgets a name.
The library's own tables answer through the same rules.
"""

from __future__ import annotations

import pytest

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.registry import Registry


def make_registry() -> Registry:
    registry: Registry = Registry("widget")

    @registry.register("Round_Thing")
    def round_thing() -> str:
        return "round"

    registry.add("square", "a square")
    return registry


def test_register_and_get():
    registry = make_registry()
    entry = registry.get("round-thing")
    assert entry() == "round" and entry.__name__ == "round_thing", "the decorator returns its input"
    assert registry.get("square") == "a square"


def test_names_are_normalised_and_sorted():
    registry = make_registry()
    assert registry.names() == ("round-thing", "square")
    for spelling in ("round-thing", "ROUND_THING", "Round-Thing", "round_thing"):
        assert spelling in registry
        assert registry.get(spelling) is registry.get("round-thing")
    assert "triangle" not in registry
    assert 3 not in registry and None not in registry


def test_unknown_names_are_refused_with_the_choices():
    registry = make_registry()
    with pytest.raises(
        ValidationError, match=r"^unknown widget 'triangle'; choose one of round-thing, square$"
    ):
        registry.get("triangle")
    with pytest.raises(ValidationError, match="unknown widget 7"):
        registry.get(7)
    with pytest.raises(ValidationError, match=r"choose one of $"):
        Registry("gadget").get("anything")


def test_registering_a_name_again_replaces_the_entry():
    # Re-registration is not refused: the last definition under a (normalised) name wins.
    registry = make_registry()
    registry.add("SQUARE", "another square")
    assert registry.get("square") == "another square"
    assert registry.names() == ("round-thing", "square")


def test_remove_forgets_a_name_and_ignores_unknown_ones():
    registry = make_registry()
    registry.remove("Round_Thing")
    assert registry.names() == ("square",)
    with pytest.raises(ValidationError, match="choose one of square"):
        registry.get("round-thing")
    registry.remove("never-registered")
    assert registry.names() == ("square",)


def test_registries_are_independent():
    first, second = make_registry(), Registry("gizmo")
    second.add("square", "elsewhere")
    assert first.get("square") == "a square" and second.get("square") == "elsewhere"
    assert second.names() == ("square",)


def test_library_tables_follow_the_same_rules():
    assert {"gibbs", "flip", "mixture", "hmc"} <= set(bl.operators.available())
    assert type(bl.operators.get("GIBBS")) is type(bl.operators.get("gibbs"))
    with pytest.raises(ValidationError, match=r"unknown operator 'metropolis'; choose one of .*flip.*gibbs"):
        bl.operators.get("metropolis")
    model = bl.RBM(n_visible=3, n_hidden=2, generator=0)
    with pytest.raises(ValidationError, match=r"unknown method 'guess'; choose one of .*ais"):
        bl.estimate_log_z(model, method="guess")
