"""The reference inside the repository is complete: every citation of docs/ resolves.

Docstrings, comments and the markdown files cite the docs in three forms, and each must point
at something that exists:

* ``docs/algorithms.md §4.3`` (also ``§2.3, §4.3–4.5`` and ``§3.1–3.4``): a heading of that
  file whose text starts with the section number;
* ``docs/open-questions.md item 15`` (also ``items 10 and 11``, ``items 1–3``): a heading
  ``### 15. …`` of that file;
* ``docs/architecture.md, "Operators"`` (or ``docs/architecture.md ("Operators")``): a heading
  whose text starts with the quoted name;

and a bare ``docs/<name>.md`` must be a file. Besides, nothing in the package, the tests, the
benchmarks or the markdown files may still cite the team's private references that are not in
the repository (the old algorithm, open-question and design notes, or a ``../shared``
folder), the numbered sections of the reference must all be there, and relative links in the
markdown files must resolve.

``BOLTZLAB_DOCS_SCAN_ROOT`` may name another checkout whose sources are scanned instead of
this one's (the docs themselves are always this checkout's); it exists to check a rewritten
copy before the rewrite is applied here.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]
DOCS = REPOSITORY / "docs"
SCAN_ROOT = Path(os.environ.get("BOLTZLAB_DOCS_SCAN_ROOT", REPOSITORY)).resolve()
THIS_FILE = Path(__file__).name

# Sections of docs/algorithms.md that code cites by number; they must never disappear.
ALGORITHM_SECTIONS = (
    *("0", "1", "1.1", "1.2", "1.3", "2", "2.1", "2.2", "2.3", "2.4", "2.5", "2.6"),
    *("3", "3.1", "3.2", "3.3", "3.4", "4", "4.1", "4.2", "4.3", "4.4", "4.5"),
    *("5", "5.1", "5.2", "5.3", "5.4", "6", "7", "8", "9"),
)
OPEN_QUESTION_ITEMS = tuple(str(number) for number in range(1, 29))
ARCHITECTURE_SECTIONS = (
    "The idea in one picture",
    "Layers",
    "Core objects",
    "Tempered family",
    "Operators",
    "Tempering schemes",
    "Public API",
    "Command line",
    "Files",
    "Layout",
    "Where new code goes",
    "House style",
    "Performance facts",
)

# --------------------------------------------------------------------------- the scanner

NUMBER = r"\d+(?:\.\d+)?"
SECTION_GROUP = rf"§\s*{NUMBER}(?:\s*[–-]\s*{NUMBER})?"
CITATION = re.compile(
    r"docs/(?P<file>[A-Za-z0-9_-]+)\.md"
    rf"(?:(?P<sections>\s*{SECTION_GROUP}(?:\s*(?:,|and)\s*{SECTION_GROUP})*)"
    r"|(?P<items>\s+items?\s+\d+(?:\s*(?:,|and|–|-)\s*\d+)*)"
    r'|(?:,\s*|\s*\(\s*)"(?P<name>[^"\n]+)")?'
)
SECTION_RANGE = re.compile(rf"§\s*(?P<first>{NUMBER})(?:\s*[–-]\s*(?P<last>{NUMBER}))?")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
HEADING_NUMBER = re.compile(r"^(\d+(?:\.\d+)*)\.?(?:\s|$)")
LINK = re.compile(r"\[[^\]]*\]\((?!https?:|mailto:|#)(?P<target>[^)\s#]+)(?:#[^)]*)?\)")
# The old private references, spelt so that a mechanical rewrite of citations leaves this
# file alone: the old notes by name, their bare "§" form, the short "OPEN n" form, and the
# sibling folder they lived in.
OLD_CITATION = re.compile(
    "ALGORITHMS" + r"(?:-OPEN)?\.md"
    "|ALGORITHMS" + "-OPEN"
    "|ALGORITHMS" + r"\s+(?:§|pitfall)"
    "|DESIGN" + r"\.md"
    r"|(?<![\w/.-])" + "OP" + r"EN\s+(?:items?\s+)?\d"
)
SHARED_FOLDER = re.compile(r"\.\./" + "shared")


@dataclass(frozen=True)
class Citation:
    """One ``docs/...`` citation: where it is and what it points at."""

    source: str
    line: int
    file: str
    sections: tuple[str, ...] = ()
    items: tuple[str, ...] = ()
    name: str | None = None


def find_citations(text: str, source: str = "<text>") -> list[Citation]:
    """Every ``docs/<file>.md`` citation in ``text`` with its sections, items or quoted name."""
    found = []
    for match in CITATION.finditer(text):
        sections: list[str] = []
        if match.group("sections"):
            for group in SECTION_RANGE.finditer(match.group("sections")):
                sections.append(group.group("first"))
                if group.group("last"):
                    sections.append(group.group("last"))
        items = tuple(re.findall(r"\d+", match.group("items") or ""))
        found.append(
            Citation(
                source=source,
                line=text.count("\n", 0, match.start()) + 1,
                file=match.group("file"),
                sections=tuple(sections),
                items=items,
                name=match.group("name"),
            )
        )
    return found


def headings(path: Path) -> list[str]:
    """Heading texts of a markdown file, outside fenced code blocks."""
    result, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            result.append(match.group(2).replace("`", "").replace("*", "").strip())
    return result


def heading_numbers(path: Path) -> set[str]:
    """Leading numbers of the headings: ``"2.4"`` for ``### 2.4 Wang–Landau …``."""
    numbers = set()
    for text in headings(path):
        match = HEADING_NUMBER.match(text)
        if match:
            numbers.add(match.group(1))
    return numbers


def has_heading_named(path: Path, name: str) -> bool:
    wanted = name.strip().lower()
    return any(text.lower() == wanted or text.lower().startswith(wanted) for text in headings(path))


def problems_of(citation: Citation, docs: Path | None = None) -> list[str]:
    """What is wrong with one citation (an empty list when it resolves), against ``docs``."""
    docs = DOCS if docs is None else docs
    where = f"{citation.source}:{citation.line}: docs/{citation.file}.md"
    path = docs / f"{citation.file}.md"
    if not path.is_file():
        return [f"{where}: no such file"]
    numbers = heading_numbers(path)
    problems = [
        f"{where} §{number}: no such section" for number in citation.sections if number not in numbers
    ]
    problems += [f"{where} item {number}: no such item" for number in citation.items if number not in numbers]
    if citation.name is not None and not has_heading_named(path, citation.name):
        problems.append(f'{where}, "{citation.name}": no heading of that name')
    return problems


def scanned_files(root: Path = SCAN_ROOT) -> list[Path]:
    """Sources and markdown files whose citations must resolve."""
    files: list[Path] = []
    for folder in ("src/boltzlab", "experiments", "benchmarks", "tests"):
        if (root / folder).is_dir():
            files += sorted(
                path
                for path in (root / folder).rglob("*.py")
                if path.name != THIS_FILE
                # Not inside hidden folders: a benchmark's own environment (benchmarks/envs/*/.venv)
                # holds other packages' sources.
                and not any(part.startswith(".") for part in path.relative_to(root / folder).parts)
            )
    for name in ("README.md", "CONTRIBUTING.md"):
        if (root / name).is_file():
            files.append(root / name)
    files += sorted(DOCS.glob("*.md"))
    return files


def markdown_files() -> list[Path]:
    return [
        path for path in (REPOSITORY / "README.md", REPOSITORY / "CONTRIBUTING.md") if path.is_file()
    ] + sorted(DOCS.glob("*.md"))


def relative(path: Path) -> str:
    for base in (SCAN_ROOT, REPOSITORY):
        if path.is_relative_to(base):
            return str(path.relative_to(base))
    return str(path)


# --------------------------------------------------------------------------- the scanner's own tests


def test_scanner_reads_every_citation_form():
    text = (
        "(docs/algorithms.md §2.3, §4.3–4.5) and docs/algorithms.md\n§3.1; "
        "docs/open-questions.md items 10 and 11, docs/open-questions.md item 4): "
        'docs/architecture.md, "Files"; docs/architecture.md ("Command line"); docs/numerics.md.'
    )
    citations = find_citations(text, "example")
    assert [(c.file, c.sections, c.items, c.name) for c in citations] == [
        ("algorithms", ("2.3", "4.3", "4.5"), (), None),
        ("algorithms", ("3.1",), (), None),
        ("open-questions", (), ("10", "11"), None),
        ("open-questions", (), ("4",), None),
        ("architecture", (), (), "Files"),
        ("architecture", (), (), "Command line"),
        ("numerics", (), (), None),
    ]
    assert find_citations("one\ntwo docs/numerics.md")[0].line == 2


def test_scanner_reports_what_does_not_resolve(tmp_path: Path):
    (tmp_path / "guide.md").write_text("# Guide\n\n## 1. One\n\n### 1.1 Sub\n\n## Files\n", encoding="utf-8")
    good = find_citations('docs/guide.md §1.1, docs/guide.md item 1, docs/guide.md, "Files"')
    assert all(problems_of(citation, tmp_path) == [] for citation in good)
    bad = find_citations(
        'docs/guide.md §2.4, docs/guide.md items 1 and 7, docs/guide.md ("Nope"), docs/gone.md'
    )
    problems = [problem for citation in bad for problem in problems_of(citation, tmp_path)]
    assert len(problems) == 4
    assert any("§2.4" in p for p in problems) and any("item 7" in p for p in problems)
    assert any('"Nope"' in p for p in problems) and any("docs/gone.md: no such file" in p for p in problems)


def test_old_reference_pattern_matches_the_old_forms_only():
    old = [
        "ALGORITHMS" + ".md §4.3",
        "ALGORITHMS" + "-OPEN item 18",
        "(ALGORITHMS" + " §3.3)",
        "DESIGN" + ".md",
    ]
    old += ["OP" + "EN item 3", "(OP" + "EN 28)"]
    assert all(OLD_CITATION.search(text) for text in old)
    new = ["docs/algorithms.md §4.3", "docs/open-questions.md item 18", "ALGORITHMS = ('sap',)", "OpenBLAS"]
    assert not any(OLD_CITATION.search(text) for text in new)


# --------------------------------------------------------------------------- the docs themselves


@pytest.mark.parametrize(
    ("name", "numbers"),
    [("algorithms.md", ALGORITHM_SECTIONS), ("open-questions.md", OPEN_QUESTION_ITEMS)],
)
def test_reference_numbering_is_complete(name: str, numbers: tuple[str, ...]):
    present = heading_numbers(DOCS / name)
    missing = [number for number in numbers if number not in present]
    assert not missing, f"docs/{name} lacks the numbered headings {missing}"


def test_architecture_has_the_sections_cited_by_name():
    missing = [
        name for name in ARCHITECTURE_SECTIONS if not has_heading_named(DOCS / "architecture.md", name)
    ]
    assert not missing, f"docs/architecture.md lacks the headings {missing}"


def test_docs_index_lists_every_page():
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    unlisted = [
        path.name for path in DOCS.glob("*.md") if path.name != "README.md" and path.name not in index
    ]
    assert not unlisted, f"docs/README.md does not list {unlisted}"


def test_markdown_links_resolve():
    broken = []
    for path in markdown_files():
        for match in LINK.finditer(path.read_text(encoding="utf-8")):
            if not (path.parent / match.group("target")).exists():
                broken.append(f"{relative(path)}: {match.group('target')}")
    assert not broken, "broken relative links:\n" + "\n".join(broken)


# --------------------------------------------------------------------------- the citations


def test_every_docs_citation_resolves():
    problems = []
    for path in scanned_files():
        text = path.read_text(encoding="utf-8")
        for citation in find_citations(text, relative(path)):
            problems += problems_of(citation)
    assert not problems, "citations of docs/ that do not resolve:\n" + "\n".join(problems)


def test_nothing_cites_the_private_references():
    offending = []
    for path in scanned_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if OLD_CITATION.search(line):
                offending.append(f"{relative(path)}:{number}: {line.strip()}")
    assert not offending, (
        "citations of references outside the repository (rewrite them to docs/):\n" + "\n".join(offending)
    )


def test_package_and_readme_do_not_point_outside_the_repository():
    paths = [path for path in scanned_files() if not _is_test_or_benchmark(path)]
    offending = []
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if SHARED_FOLDER.search(line):
                offending.append(f"{relative(path)}:{number}: {line.strip()}")
    assert not offending, (
        "references to a folder outside the repository (say that BOLTZLAB_DATA sets the data "
        "location instead):\n" + "\n".join(offending)
    )


def _is_test_or_benchmark(path: Path) -> bool:
    """Tests and benchmarks may default to a data folder beside the checkout; the package may not."""
    return path.is_relative_to(SCAN_ROOT) and path.relative_to(SCAN_ROOT).parts[0] in ("tests", "benchmarks")
