"""Fail on any import cycle between the modules of boltzlab, imports inside functions included.

Usage: ``python tools/import_cycles.py [package ...]`` (default ``boltzlab``, which must be
importable, e.g. installed in the virtual environment); exit status 1 when a cycle is found,
each printed as a chain ``a -> b -> c -> a`` followed by the file and line of every edge.
``make test`` runs it after ``lint-imports``: the layers contract (pyproject.toml) keeps
imports pointing down between layers, and this check forbids cycles anywhere, inside one layer
or one package too (docs/architecture.md, "Layers").

**What counts as an import.** The graph is grimp's (the library behind import-linter), which
reads every ``import`` and ``from … import`` statement from the source: at module level, and
inside functions, methods, class bodies, ``try`` and ``if`` blocks alike, so an import moved
into a function to dodge a cycle is still an edge. Relative imports are resolved;
``from pkg import name`` is an import of the submodule ``pkg.name`` when there is one, and of
``pkg`` (its ``__init__.py``) when ``name`` is defined there.

Imports under ``if TYPE_CHECKING:`` are left out: they never run, so they cannot take part in
a cycle at import time, and annotating with a class from a module that imports this one is
what they are for. A module that imports itself is not a cycle between modules.

**Imports by name.** grimp does not see ``importlib.import_module`` or ``__import__``, and
boltzlab imports some of its own modules that way so that ``boltzlab --help`` need not import
torch (docs/architecture.md, "Start-up"): the package ``__init__.py`` loads its public names
from the table ``_EXPORTS`` on first use, and ``boltzlab.cli.main`` loads each subcommand's
module from the table ``COMMANDS``. So in a module that calls either function, every string
literal that is exactly the name of a module of the package counts as an import of it, on the
literal's line; the tables name their modules in full for that reason. A lazily loaded module
that imported its loader back is then a cycle like any other. Only a name built at run time
stays unseen: the package's ``bl.<submodule>`` fallback (``f"boltzlab.{name}"``), an edge from
the root package, which no library module imports back (only the command line's modules do,
and no module below the command line imports those: the layers contract).

**Packages.** Importing ``a.b.c`` first runs ``a/__init__.py`` and ``a/b/__init__.py``, so an
import of a module is also an edge to each package above it, with one exception: the
packages above the *importer* itself. Python initialises those before the importer's body
runs (the importer is being imported from inside one of them, or after them), so depending
on them adds nothing. Concretely:

* ``boltzlab.models`` (``models/__init__.py``) imports ``boltzlab.models.dbm``, which imports
  ``boltzlab.models.base``: the packages above ``base`` are ``boltzlab.models`` and
  ``boltzlab``, both above ``dbm`` too, so there is no edge back to ``models/__init__.py`` and
  no (false) cycle;
* ``from boltzlab.models import DBM`` written in ``boltzlab/models/dbm.py`` is an explicit
  import of ``boltzlab.models`` and closes a real cycle: the name is read from a package
  halfway through its ``__init__.py`` (an ImportError when ``dbm`` happens to be imported
  first);
* ``boltzlab.training.x`` importing ``boltzlab.estimators.exact`` also depends on
  ``boltzlab.estimators``, whose ``__init__.py`` imports every estimator: a cycle through
  another package's ``__init__.py`` is found, and printed as "runs …/__init__.py".

**Cycles** are the strongly connected components of that graph (Tarjan's algorithm); for each
component one shortest cycle is printed through each of its modules not already shown in an
earlier chain of that component, so every module of a component appears at least once.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import grimp

__all__ = ["Edge", "find_cycles", "format_cycle", "import_graph", "main"]


@dataclass(frozen=True)
class Edge:
    """``importer`` depends on ``imported`` through the statement at ``path:line``.

    ``through`` is the module the statement names when the edge is the implicit one to a
    package above it (its ``__init__.py`` runs first), else ``None``; ``by_name`` is true for an
    import by name (a string literal in a module that calls ``importlib.import_module``).
    """

    importer: str
    imported: str
    path: Path
    line: int
    statement: str
    through: str | None = None
    by_name: bool = False


def _ancestors(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:end]) for end in range(len(parts) - 1, 0, -1)]


def _module_paths(package: str, modules: Iterable[str]) -> dict[str, Path]:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{package} is not an importable package")
    root = Path(next(iter(spec.submodule_search_locations)))
    paths = {}
    for module in modules:
        relative = Path(*module.split(".")[1:])
        package_init = root / relative / "__init__.py"
        paths[module] = package_init if package_init.is_file() else root / relative.with_suffix(".py")
    return paths


_IMPORTERS_BY_NAME = frozenset({"import_module", "__import__"})


def imports_by_name(path: Path, modules: Iterable[str]) -> list[tuple[str, int, str]]:
    """``(module, line, source line)`` for each string literal in ``path`` that names one of
    ``modules``, when the file calls ``importlib.import_module`` or ``__import__``; else ``[]``."""
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (OSError, SyntaxError, UnicodeDecodeError):
        return []
    calls = (node.func for node in ast.walk(tree) if isinstance(node, ast.Call))
    if not any(
        (isinstance(func, ast.Name) and func.id in _IMPORTERS_BY_NAME)
        or (isinstance(func, ast.Attribute) and func.attr in _IMPORTERS_BY_NAME)
        for func in calls
    ):
        return []
    known, lines = set(modules), source.splitlines()
    return sorted(
        (node.value, node.lineno, lines[node.lineno - 1].strip())
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in known
    )


def import_graph(package: str) -> dict[str, dict[str, Edge]]:
    """Every module of ``package`` → the modules it depends on → the first edge that says so.

    Explicit imports first (the first statement by line), then imports by name (see module
    docstring) where no statement imports the same module; an implicit edge to a package above
    an imported module only where no explicit import of that package exists.
    """
    graph = grimp.build_graph(package, cache_dir=None, exclude_type_checking_imports=True)
    paths = _module_paths(package, graph.modules)
    edges: dict[str, dict[str, Edge]] = {module: {} for module in graph.modules}
    implicit: list[Edge] = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            if imported == importer:
                continue
            first = min(
                graph.get_import_details(importer=importer, imported=imported),
                key=lambda detail: detail["line_number"],
            )
            edges[importer][imported] = Edge(
                importer, imported, paths[importer], first["line_number"], first["line_contents"]
            )
        for imported, line, statement in imports_by_name(paths[importer], graph.modules):
            if imported != importer and imported not in edges[importer]:
                edges[importer][imported] = Edge(
                    importer, imported, paths[importer], line, statement, by_name=True
                )
        above_importer = {importer, *_ancestors(importer)}
        for imported, edge in sorted(edges[importer].items()):
            implicit.extend(
                Edge(importer, package_above, edge.path, edge.line, edge.statement, through=imported)
                for package_above in _ancestors(imported)
                if package_above not in above_importer and package_above in edges
            )
    for edge in implicit:
        edges[edge.importer].setdefault(edge.imported, edge)
    return edges


def _strongly_connected(graph: dict[str, dict[str, Edge]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components of two or more modules, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return sorted(components)


def _shortest_cycle(graph: dict[str, dict[str, Edge]], start: str, members: set[str]) -> list[Edge]:
    """The shortest cycle from ``start`` back to it inside one strongly connected component."""
    came_from: dict[str, Edge] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for successor, edge in sorted(graph[node].items()):
            if successor not in members:
                continue
            if successor == start:
                cycle = [edge]
                while cycle[0].importer != start:
                    cycle.insert(0, came_from[cycle[0].importer])
                return cycle
            if successor not in came_from:
                came_from[successor] = edge
                queue.append(successor)
    raise AssertionError(f"{start} is on no cycle of its component")  # pragma: no cover


def find_cycles(package: str = "boltzlab") -> list[list[Edge]]:
    """Import cycles between the modules of ``package``, each a list of edges ``a → b → … → a``.

    One cycle per module of each strongly connected component, skipping modules that an
    earlier cycle of the component already passed through; empty when there is none.
    """
    graph = import_graph(package)
    cycles = []
    for component in _strongly_connected(graph):
        members, shown = set(component), set()
        for module in component:
            if module not in shown:
                cycle = _shortest_cycle(graph, module, members)
                shown.update(edge.importer for edge in cycle)
                cycles.append(cycle)
    return cycles


def _in_function(path: Path, line: int) -> bool:
    """Whether the import statement on ``line`` of ``path`` sits inside a function body."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return False
    functions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
    return any(
        isinstance(node, functions) and node.lineno <= line <= (node.end_lineno or node.lineno)
        for node in ast.walk(tree)
    )


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def format_cycle(cycle: Sequence[Edge]) -> str:
    """``a -> b -> … -> a``, then one indented line per edge with its file, line and statement."""
    lines = [" -> ".join([edge.importer for edge in cycle] + [cycle[0].importer])]
    for edge in cycle:
        notes = []
        if _in_function(edge.path, edge.line):
            notes.append("inside a function")
        if edge.by_name:
            notes.append("a module name importlib.import_module loads")
        if edge.through is not None:
            notes.append(f"importing {edge.through} runs {edge.imported}'s __init__.py")
        note = f"  ({'; '.join(notes)})" if notes else ""
        lines.append(
            f"    {edge.importer} -> {edge.imported}: {_display(edge.path)}:{edge.line}: {edge.statement}{note}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print every cycle of each package named (default ``boltzlab``); 1 if any, else 0."""
    packages = list(sys.argv[1:] if argv is None else argv) or ["boltzlab"]
    cycles = [cycle for package in packages for cycle in find_cycles(package)]
    for cycle in cycles:
        print(format_cycle(cycle))
    names = ", ".join(packages)
    if cycles:
        print(f"{len(cycles)} import cycle(s) in {names}; break each (docs/architecture.md, 'Layers')")
        return 1
    print(f"no import cycles in {names}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
