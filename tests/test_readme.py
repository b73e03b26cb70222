"""The README's examples run as written, and the README says what a newcomer needs.

Every fenced code block of README.md is collected: ``python`` blocks are executed in a
temporary directory; every ``boltzlab …`` line of a ``bash``, ``sh`` or ``console`` block is
run in order, in one shared temporary directory (later commands read what earlier ones wrote),
through click's test runner in this process. Set-up lines (``make``, ``pip``, ``torchrun``,
``export``) are not run: they install or configure rather than demonstrate. A command whose
dataset lives in files absent from this machine is skipped with the reason. The README also
keeps showing ``make demo`` and ``make test``, says why each dependency in pyproject.toml is
there, sets the data location with ``BOLTZLAB_DATA`` rather than a folder outside the
repository, and points to docs/ and CONTRIBUTING.md.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import boltzlab as bl
from boltzlab.cli.main import cli
from boltzlab.errors import BoltzlabError

# Every README example and command runs end to end: the slow tier (make test-all).
pytestmark = pytest.mark.slow

REPOSITORY = Path(__file__).resolve().parents[1]
README = REPOSITORY / "README.md"
FENCE = re.compile(r"^```(?P<language>[\w-]*)[^\n]*\n(?P<body>.*?)^```", re.MULTILINE | re.DOTALL)
SHELL_LANGUAGES = {"bash", "sh", "shell", "console"}
# Lines that set up rather than demonstrate, and why they are not run.
SETUP_COMMANDS = {
    "make": "set-up: make creates the virtual environment and installs (make test would run the suite itself)",
    "pip": "set-up: installs packages",
    "pip3": "set-up: installs packages",
    "torchrun": "set-up: launches several processes",
    "export": "shell configuration, not an example",
}
BUILT_IN_DATA = {"digits", "bars-and-stripes", "artificial-modes"}


@dataclass(frozen=True)
class Block:
    language: str
    body: str
    line: int


def readme_blocks() -> list[Block]:
    text = README.read_text(encoding="utf-8")
    return [
        Block(match.group("language").lower(), match.group("body"), text.count("\n", 0, match.start()) + 1)
        for match in FENCE.finditer(text)
    ]


def shell_lines(block: Block) -> list[str]:
    """Commands of a shell block: prompts and trailing comments removed, blank lines dropped."""
    commands = []
    for raw in block.body.splitlines():
        line = raw.strip()
        if line.startswith("$ "):
            line = line[2:]
        line = re.sub(r"\s+#.*$", "", line)
        if line and not line.startswith("#"):
            commands.append(line)
    return commands


PYTHON_BLOCKS = [block for block in readme_blocks() if block.language == "python"]
COMMANDS = [
    command
    for block in readme_blocks()
    if block.language in SHELL_LANGUAGES
    for command in shell_lines(block)
]


@pytest.fixture(scope="module")
def command_directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One working directory for all README commands, in README order."""
    return tmp_path_factory.mktemp("readme-commands")


def missing_dataset(arguments: list[str]) -> str | None:
    """Why a command cannot run here (its dataset's files are absent), or None."""
    names = [arguments[i + 1] for i, argument in enumerate(arguments[:-1]) if argument == "--data"]
    root = next(
        (arguments[i + 1] for i, argument in enumerate(arguments[:-1]) if argument == "--data-root"), None
    )
    for name in names:
        if name in BUILT_IN_DATA or Path(name).exists():
            continue
        try:
            bl.data.load(name, root=root)
        except BoltzlabError as error:
            return f"dataset {name!r} is not on this machine ({str(error).splitlines()[0][:160]})"
    return None


# --------------------------------------------------------------------------- what the README says


def test_readme_has_runnable_examples():
    assert PYTHON_BLOCKS, "README.md shows no python example"
    assert any(command.startswith("boltzlab ") for command in COMMANDS), "README.md shows no command"


def test_readme_shows_the_two_make_targets():
    assert "make demo" in COMMANDS and "make test" in COMMANDS


def test_readme_explains_every_dependency():
    project = tomllib.loads((REPOSITORY / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    names = [re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0] for requirement in requirements]
    text = README.read_text(encoding="utf-8")
    table = text[text.index("## Dependencies") :]
    unexplained = [name for name in names if f"`{name}" not in table]
    assert not unexplained, f"README.md's dependency table does not explain {unexplained}"


def test_readme_sets_data_location_and_points_to_docs():
    text = README.read_text(encoding="utf-8")
    assert "BOLTZLAB_DATA" in text
    assert "../" + "shared" not in text, "README.md refers to a folder outside the repository"
    assert "(docs/" in text and "(CONTRIBUTING.md)" in text
    for target in re.findall(r"\]\((?!https?:)([^)#\s]+)", text):
        assert (REPOSITORY / target).exists(), f"README.md links to {target}, which does not exist"


# --------------------------------------------------------------------------- the examples


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[f"line-{block.line}" for block in PYTHON_BLOCKS])
def test_python_example_runs(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()
    try:
        exec(compile(block.body, f"README.md:{block.line}", "exec"), {"__name__": "__readme__"})
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("command", COMMANDS, ids=[command[:60] for command in COMMANDS])
def test_command_runs(command: str, command_directory: Path, monkeypatch: pytest.MonkeyPatch):
    arguments = shlex.split(command)
    if arguments[0] in SETUP_COMMANDS:
        pytest.skip(SETUP_COMMANDS[arguments[0]])
    assert arguments[0] == "boltzlab", (
        f"README.md shows a command that is neither boltzlab nor set-up: {command}"
    )
    reason = missing_dataset(arguments)
    if reason:
        pytest.skip(reason)
    monkeypatch.chdir(command_directory)
    threads = torch.get_num_threads()
    try:
        result = CliRunner().invoke(cli, arguments[1:], env={"COLUMNS": "100"})
    finally:
        torch.set_num_threads(threads)
    assert result.exit_code == 0, f"`{command}` exited with {result.exit_code}:\n{result.output}"
    if "--out" in arguments:
        written = Path(arguments[arguments.index("--out") + 1])
        assert written.exists(), f"`{command}` did not write {written}"
