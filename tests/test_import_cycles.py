"""tools/import_cycles.py finds import cycles hidden in functions, through package __init__s and behind
imports by name (importlib.import_module).

Each test writes a tiny package under ``tmp_path`` (a fresh name, so no import cache is
shared) and asks the checker about it; nothing here imports boltzlab's own modules.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import sys
from pathlib import Path
from textwrap import dedent
from types import ModuleType

import pytest

CHECKER = Path(__file__).resolve().parents[1] / "tools" / "import_cycles.py"
_NAMES = itertools.count()


@pytest.fixture(scope="module")
def checker() -> ModuleType:
    """The checker script, imported by path (tools/ is not a package)."""
    spec = importlib.util.spec_from_file_location("import_cycles_tool", CHECKER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def make_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Write ``{relative path: source}`` as a new package; returns its (unique) name."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def make(files: dict[str, str]) -> str:
        name = f"cycles_demo_{next(_NAMES)}"
        for relative, source in {"__init__.py": "", **files}.items():
            path = tmp_path / name / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(dedent(source).format(pkg=name), encoding="utf-8")
        importlib.invalidate_caches()
        return name

    return make


def test_a_cycle_behind_an_import_inside_a_function_is_reported_edge_by_edge(checker, make_package):
    name = make_package(
        {
            "a.py": """\
                def late():
                    from {pkg}.b import value
                    return value
            """,
            "b.py": "from {pkg} import c\nvalue = 1\n",
            "c.py": "import {pkg}.a\n",
            "d.py": "from {pkg} import b\n",  # imports into the cycle, is not on it
        }
    )
    cycles = checker.find_cycles(name)
    assert len(cycles) == 1
    chain = [(edge.importer, edge.imported, edge.line) for edge in cycles[0]]
    assert chain == [
        (f"{name}.a", f"{name}.b", 2),
        (f"{name}.b", f"{name}.c", 1),
        (f"{name}.c", f"{name}.a", 1),
    ]
    text = checker.format_cycle(cycles[0])
    assert text.splitlines()[0] == f"{name}.a -> {name}.b -> {name}.c -> {name}.a"
    assert f"{name}/a.py:2: from {name}.b import value  (inside a function)" in text
    assert "inside a function" not in text.splitlines()[2]
    assert checker.main([name]) == 1


def test_an_acyclic_package_with_a_reexporting_init_has_no_cycle(checker, make_package, capsys):
    # __init__ imports its submodules, which import each other one way: the packages above an
    # importer are never an edge of their own, so this is not a cycle through __init__.
    name = make_package(
        {
            "__init__.py": "from {pkg}.top import Top\nfrom {pkg}.sub import Deep\n",
            "top.py": "from {pkg}.base import Base\nfrom {pkg} import sub\n\nclass Top(Base): ...\n",
            "base.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from {pkg}.top import Top\n"
            "class Base: ...\n",
            "sub/__init__.py": "from {pkg}.sub.deep import Deep\n",
            "sub/deep.py": "from . import helper\nfrom ..base import Base\n\nclass Deep(Base): ...\n",
            "sub/helper.py": "def help_(): ...\n",
        }
    )
    assert checker.find_cycles(name) == []
    assert checker.main([name]) == 0
    assert capsys.readouterr().out.strip() == f"no import cycles in {name}"


def test_a_name_taken_from_the_own_package_init_is_a_cycle(checker, make_package):
    name = make_package(
        {
            "__init__.py": "from {pkg}.model import Model\nfrom {pkg}.helper import SIZE\n",
            "helper.py": "SIZE = 3\n",
            "model.py": "def size():\n    from {pkg} import SIZE\n    return SIZE\n\nclass Model: ...\n",
        }
    )
    (cycle,) = checker.find_cycles(name)
    assert [(edge.importer, edge.imported) for edge in cycle] == [
        (name, f"{name}.model"),
        (f"{name}.model", name),
    ]


def test_a_cycle_through_another_packages_init_is_found(checker, make_package):
    # user.py imports low.core, which runs low/__init__.py first; that imports low.extra,
    # which imports user: a cycle no explicit chain of imports shows.
    name = make_package(
        {
            "user.py": "from {pkg}.low.core import f\n",
            "low/__init__.py": "from {pkg}.low import extra\n",
            "low/core.py": "def f(): ...\n",
            "low/extra.py": "def g():\n    import {pkg}.user\n",
        }
    )
    (cycle,) = checker.find_cycles(name)
    edges = {(edge.importer, edge.imported): edge for edge in cycle}
    implicit = edges[(f"{name}.user", f"{name}.low")]
    assert implicit.through == f"{name}.low.core" and implicit.line == 1
    assert "runs" in checker.format_cycle(cycle)


def test_a_module_loaded_by_name_that_imports_its_loader_back_is_a_cycle(checker, make_package):
    # The lazy group's pattern: a table of module names that importlib.import_module loads.
    # grimp does not see those imports; the checker counts each literal naming a module.
    name = make_package(
        {
            "group.py": """\
                import importlib
                TABLE = {{
                    "one": "{pkg}.one",
                    "two": "{pkg}.two",
                }}
                def load(key):
                    return importlib.import_module(TABLE[key])
            """,
            "one.py": "def run():\n    from {pkg}.group import TABLE\n",
            "two.py": "VALUE = 2\n",
            "names.py": 'NAMES = ("{pkg}.two",)  # no import by name here: not an edge\n',
        }
    )
    (cycle,) = checker.find_cycles(name)
    edges = {(edge.importer, edge.imported): edge for edge in cycle}
    loaded = edges[(f"{name}.group", f"{name}.one")]
    assert loaded.by_name and loaded.line == 3
    assert "importlib.import_module loads" in checker.format_cycle(cycle)
    graph = checker.import_graph(name)
    assert f"{name}.two" in graph[f"{name}.group"] and graph[f"{name}.names"] == {}
