"""Every ``python -m nlicl_lib`` command the README and the book tell a reader to type is
planned (nothing trained) within the CLI's budget of seconds at the measured rate."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from nlicl_lib.core.planning import SECONDS_PER_WORK_UNIT, work_units
from nlicl_lib.experiments import cli

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "book").glob("*.md"))]
COMMAND = re.compile(r"python3? -m nlicl_lib\s+([^`#\n|)]*)")


def commands() -> list[tuple[str, str, list[str]]]:
    """``(page, line, argv)`` of every command, its argv split as a shell would."""
    found = []
    for page in PAGES:
        for line in page.read_text().splitlines():
            for match in COMMAND.finditer(line):
                found.append((page.relative_to(ROOT).as_posix(), line.strip(),
                              shlex.split(match.group(1).strip())))
    return found


COMMANDS = commands()


def planned_seconds(argv: list[str]) -> float:
    """The seconds of training a ``train`` command plans, at the calibrated rate."""
    args = cli.build_parser().parse_args(argv)
    task, model, train_config = cli.plan_train(args)
    return work_units(task, model, train_config.steps, train_config.batch_size) * SECONDS_PER_WORK_UNIT


def check_command(line: str, argv: list[str]) -> None:
    """Fails (AssertionError) on a command that plans more than the budget."""
    args = cli.build_parser().parse_args(argv)
    if args.command == "train":
        seconds = planned_seconds(argv)
        assert seconds <= cli.TRAIN_SECONDS_BUDGET, (
            f"{' '.join(argv)!r} plans {seconds:.0f} s of training on one thread, more than "
            f"{cli.TRAIN_SECONDS_BUDGET:.0f} s: lower its steps or batch")
    elif args.command == "theory":
        cli._make_task(args), cli._make_model(args)
    else:
        assert args.all and "make reproduce" in line, (
            f"{line!r}: reproduce is the make target's command (minutes), not one for a reader "
            "to wait on; name `make reproduce` beside it")


def test_the_pages_name_the_commands_readers_try():
    pages = {page for page, _, _ in COMMANDS}
    assert "README.md" in pages
    kinds = {argv[0] for _, _, argv in COMMANDS}
    assert "reproduce" in kinds  # make reproduce's line in the README
    assert {"train", "theory"} <= kinds, kinds  # the README's "From the command line"


@pytest.mark.parametrize(("page", "line", "argv"), COMMANDS,
                         ids=[f"{p}:{' '.join(a)}" for p, _, a in COMMANDS])
def test_each_command_fits_in_a_minute(page, line, argv):
    check_command(line, argv)


