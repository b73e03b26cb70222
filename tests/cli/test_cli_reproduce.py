"""``boltzlab reproduce``: its subcommands are plugins found through entry points.

Properties checked, with the discovery replaced by test doubles (the library must not depend
on the experiments package): without any plugin, ``boltzlab reproduce`` and
``boltzlab reproduce NAME`` stop with one ``error:`` line saying how to install them, while
``--help`` still shows the group's help with that hint; a plugin is listed, loaded only when
used and run with its options; a plugin whose package gives its help line
(``REPRODUCE_HELP``) is listed without importing its module; an entry point that is not a
click command is one error line.
The real plugins are tested with the reproductions (experiments/tests).
"""

from __future__ import annotations

import importlib
import itertools
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from boltzlab.cli import reproduce as reproduce_module
from boltzlab.cli.main import cli

_PACKAGES = itertools.count()


class FakeEntryPoint:
    """An entry point whose ``load()`` returns ``target`` and counts the loads (``module``: the
    module it names, if any)."""

    def __init__(self, target: object, module: str | None = None) -> None:
        self.target = target
        self.loads = 0
        if module is not None:
            self.module = module

    def load(self) -> object:
        self.loads += 1
        return self.target


@click.command("hello", epilog="Example:\n  boltzlab reproduce hello --name you")
@click.option("--name", default="world", show_default=True)
def hello(name: str) -> None:
    """Say hello (a stand-in reproduction)."""
    click.echo(f"hello {name}")


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["reproduce", *args])


def assert_install_hint(result: Result) -> None:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0] == f"error: {reproduce_module.INSTALL_HINT}", result.stderr
    assert "pip install -e experiments" in lines[0] and "make install" in lines[0]


def test_without_plugins_every_use_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reproduce_module, "discover", dict)
    assert_install_hint(invoke())
    assert_install_hint(invoke("two-node", "--out", "x"))
    shown = invoke("--help")
    assert shown.exit_code == 0 and "pip install -e experiments" in shown.output


def test_a_plugin_is_listed_loaded_when_used_and_run(monkeypatch: pytest.MonkeyPatch) -> None:
    point = FakeEntryPoint(hello)
    monkeypatch.setattr(reproduce_module, "discover", lambda: {"hello": point})
    assert CliRunner().invoke(cli, ["--help"]).exit_code == 0
    assert point.loads == 0  # the top-level help does not import the reproductions
    listed = invoke("--help")
    assert listed.exit_code == 0 and "hello" in listed.output and "Say hello" in listed.output
    ran = invoke("hello", "--name", "there")
    assert ran.exit_code == 0 and ran.output == "hello there\n"
    assert "Example" in invoke("hello", "--help").output
    unknown = invoke("goodbye")
    assert unknown.exit_code == 2 and "goodbye" in unknown.output


def test_a_plugin_package_help_table_lists_it_without_importing_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A plugin package with its help table, whose command module must not be imported to list it.
    package = f"startup_plugin_{next(_PACKAGES)}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text(
        f"{reproduce_module.HELP_ATTRIBUTE} = {{'hello': 'Say hello, from the table.'}}\n", encoding="utf-8"
    )
    (tmp_path / package / "heavy.py").write_text("raise RuntimeError('imported')\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    point = FakeEntryPoint(hello, module=f"{package}.heavy")
    monkeypatch.setattr(reproduce_module, "discover", lambda: {"hello": point})
    listed = invoke("--help")
    assert listed.exit_code == 0 and "Say hello, from the table." in listed.output, listed.output
    assert point.loads == 0
    assert reproduce_module.listed_help("other", point) is None  # not in the table: loaded to ask it


def test_off_rank_zero_only_a_command_that_splits_its_work_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    # A rank other than 0 under torchrun: reproductions run whole on rank 0, so this rank skips
    # them, unless the command says that it splits its repeats over the ranks itself.
    @click.command("shared")
    def shared() -> None:
        click.echo("my share")

    setattr(shared, reproduce_module.SPLITS_ATTRIBUTE, True)
    monkeypatch.setattr(reproduce_module, "alone_on_rank_zero", lambda: False)
    monkeypatch.setattr(
        reproduce_module,
        "discover",
        lambda: {"hello": FakeEntryPoint(hello), "shared": FakeEntryPoint(shared)},
    )
    skipped = invoke("hello")
    assert skipped.exit_code == 0 and skipped.output == ""
    ran = invoke("shared")
    assert ran.exit_code == 0 and ran.output == "my share\n"


def test_an_entry_point_that_is_not_a_command_is_one_error_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reproduce_module, "discover", lambda: {"broken": FakeEntryPoint(print)})
    result = invoke("broken")
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "not a click command" in lines[0]


def test_discover_reads_the_entry_point_group() -> None:
    found = reproduce_module.discover()
    assert isinstance(found, dict)
    assert all(hasattr(point, "load") for point in found.values())
