r"""Every ``python -m nlicl_lib ...`` command the README and the book tell a reader to type
finishes within a minute on two idle cores.

Each command is parsed by the CLI's own parser and planned by the CLI's own code
(:func:`nlicl_lib.experiments.cli.plan_train`: the task, model and training settings it would
run, nothing built or trained), and its planned work
:func:`~nlicl_lib.core.planning.work_units` $=$ steps $\times$ batch $\times L (n + 1) D^2$ (depth
$L$, $n + 1$ tokens of dimension $D = d + m + 1$) is held to
:data:`~nlicl_lib.experiments.cli.TRAIN_SECONDS_BUDGET` seconds at
:data:`~nlicl_lib.core.planning.SECONDS_PER_WORK_UNIT` (measured on one torch thread: see
its note; the rest of the minute is start-up and the test loss).

``theory`` trains nothing: it is parsed and its configs built. ``reproduce --all`` is the
``make reproduce`` target (every experiment of the book, minutes): it is parsed, and allowed
only where the page says it is what ``make reproduce`` runs; its own budget is the sum of its
experiments' work, not checked here.
"""

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
BUDGET_UNITS = cli.TRAIN_SECONDS_BUDGET / SECONDS_PER_WORK_UNIT


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


def test_ten_times_the_steps_is_over_the_budget():
    """The check can fail: the heaviest command with ten times its steps plans more than the
    budget, and the lightest is refused at a hundred times."""
    trains = [argv for _, _, argv in COMMANDS if argv[0] == "train"]
    assert trains
    seconds = {tuple(argv): planned_seconds(argv) for argv in trains}
    heaviest = list(max(seconds, key=seconds.get))
    lightest = list(min(seconds, key=seconds.get))
    for argv, factor in ((heaviest, 10), (lightest, 100)):
        args = cli.build_parser().parse_args(argv)
        steps = cli.plan_train(args)[2].steps
        more = [*argv, "--steps", str(factor * steps)]
        with pytest.raises(AssertionError, match="plans"):
            check_command("", more)


def test_work_units_follow_the_formula():
    args = cli.build_parser().parse_args(["train"])  # chapter 1: d = 5, n = 20, LSA, D = 6
    task, model, train_config = cli.plan_train(args)
    assert work_units(task, model, train_config.steps, train_config.batch_size) == (
        train_config.steps * train_config.batch_size * 1 * 21 * 6 ** 2)
    args = cli.build_parser().parse_args(["train", "--model", "glu-lsa", "--task", "poly",
                                          "--d", "3", "--depth", "8"])
    task, model, train_config = cli.plan_train(args)
    assert task.context_length == cli.DEEP_CONTEXT_LENGTH
    assert work_units(task, model, train_config.steps, train_config.batch_size) == (
        train_config.steps * train_config.batch_size * 8 * 101 * (3 + 6 + 1) ** 2)


