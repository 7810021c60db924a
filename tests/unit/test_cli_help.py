"""`gpubot --help` and every subcommand's: a description, and help text for every option."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from bot import cli


def every_parser(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ("gpubot",)
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """`gpubot` and each subcommand under it, however deep, with the words that reach it."""
    yield " ".join(path), parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from every_parser(child, (*path, name))


PARSERS = dict(every_parser(cli.build_parser()))


def test_every_command_is_walked() -> None:
    expected = {
        "sim",
        "demo",
        "serve",
        "pool",
        "pool create",
        "pool show",
        "pool set",
        "pool delete",
        "doctor",
    }
    assert set(PARSERS) == {"gpubot"} | {f"gpubot {name}" for name in expected}


@pytest.mark.parametrize("command", sorted(PARSERS))
def test_every_command_says_what_it_is_for(command: str) -> None:
    parser = PARSERS[command]
    assert (parser.description or "").strip(), f"`{command} --help` has no description"
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            listed = {choice.dest: choice.help for choice in action._choices_actions}
            assert set(listed) == set(action.choices), command
            assert all((text or "").strip() for text in listed.values()), f"{command}: {listed}"


@pytest.mark.parametrize("command", sorted(PARSERS))
def test_every_option_has_help(command: str) -> None:
    parser = PARSERS[command]
    options = [
        a for a in parser._actions if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
    ]
    bare = [
        a.option_strings or [a.dest]
        for a in options
        if not (a.help or "").strip() or a.help == argparse.SUPPRESS
    ]
    assert bare == [], f"`{command}` options without help text: {bare}"


@pytest.mark.parametrize("command", sorted(PARSERS))
def test_every_help_renders(command: str) -> None:
    """A stray `%` in a help text would only fail when someone asks for help."""
    text = PARSERS[command].format_help()
    assert "usage: " + command in text
