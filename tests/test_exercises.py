"""Self-checking exercises (nlicl_lib.pages.exercises): checks pass, fail with numbers and a hint,
and wait for the reader's answer without stopping a notebook run."""

from __future__ import annotations

import math
import re
from pathlib import Path

import jupytext
import pytest

from nlicl_lib.pages.chapter_exercises import CHECKERS
from nlicl_lib.pages.exercises import (
    ExerciseFailed,
    attempt,
    check_at_least,
    check_at_most,
    check_close,
    check_equal,
)


def test_check_close_passes_within_tolerance_and_fails_with_the_hint(capsys):
    passed = check_close(1.03, 1.0, rel=0.05, exercise="9.1", what="test loss",
                         theory="the optimum")
    assert passed.relative_difference == pytest.approx(0.03)
    assert "✓ Exercise 9.1" in capsys.readouterr().out
    with pytest.raises(ExerciseFailed) as failure:
        check_close(1.2, 1.0, rel=0.05, exercise="9.1", what="test loss",
                    theory="the optimum", hint="train longer")
    assert isinstance(failure.value, AssertionError) and failure.value.hint == "train longer"
    with pytest.raises(ExerciseFailed):
        check_close(0.8, 1.0, rel=0.05)


def test_bounds_and_equality():
    check_at_least(0.99, 1.0, rel=0.02)  # within Monte Carlo error of the bound
    with pytest.raises(ExerciseFailed, match="no model of this class can beat"):
        check_at_least(0.9, 1.0, rel=0.02)
    check_at_most(0.5, 0.6)
    with pytest.raises(ExerciseFailed, match="not below"):
        check_at_most(0.7, 0.6)
    check_equal(6, 6, what="slots")
    with pytest.raises(ExerciseFailed, match="slots = 5"):
        check_equal(5, 6, what="slots", hint="p_2 = 6")


def test_a_diverged_result_fails_with_advice():
    with pytest.raises(ExerciseFailed, match="smaller learning rate"):
        check_close(math.nan, 1.0)


def test_attempt_waits_for_every_answer(capsys):
    calls = []
    assert attempt("9.2", lambda depth, rate: calls.append((depth, rate)), depth=None,
                   rate=0.1) is None
    out = capsys.readouterr().out
    assert calls == [] and "set `depth`" in out and "rate" not in out
    attempt("9.2", lambda depth, rate: calls.append((depth, rate)), depth=3, rate=0.1)
    assert calls == [(3, 0.1)]


CHAPTERS = sorted((Path(__file__).resolve().parents[1] / "book").glob("ch*.md"))


def _cells_without_solutions(page: Path) -> tuple[list, list]:
    """The page's notebook cells, and what is left after removing the cells tagged "solution"
    (what the instructors page's ``nbconvert --TagRemovePreprocessor`` command does)."""
    notebook = jupytext.read(page)
    kept = [c for c in notebook.cells if "solution" not in c.metadata.get("tags", [])]
    return notebook.cells, kept


@pytest.mark.parametrize("page", CHAPTERS, ids=lambda p: p.stem)
def test_removing_the_solution_cells_leaves_each_exercise_and_no_solution(page):
    cells, kept = _cells_without_solutions(page)
    starts = [c for c in cells if "{exercise-start}" in c.source]
    solutions = [c for c in cells if "{solution-start}" in c.source]
    assert len(solutions) == len(starts), "every exercise block has its solution block"
    left = "\n".join(c.source for c in kept)
    # the solution's text (solution-start .. solution-end) and its code go; the exercise stays
    assert "{solution-start}" not in left and "{solution-end}" not in left
    assert left.count("{exercise-start}") == left.count("{exercise-end}") == len(starts)
    for start in starts:
        label = re.search(r":label: (ex-(\d+)-(\d+))", start.source)
        assert label, "each exercise block has a label ex-<chapter>-<number>"
        exercise_id = f"{label.group(2)}.{label.group(3)}"
        if exercise_id not in CHECKERS:  # a question answered in words: nothing to call
            continue
        # one call, the reader's (with the value still to set); the solution's call is gone
        call = f"{CHECKERS[exercise_id].__name__}("
        assert left.count(call) == 1, exercise_id
        assert "\n".join(c.source for c in cells).count(call) == 2, "and the solution's call"


@pytest.mark.parametrize(("check", "value"), [(check_close, 1.5), (check_close, 0.7),
                                              (check_at_least, 0.5), (check_at_most, 1.9)])
def test_a_failed_check_says_how_far_off_and_which_way_but_not_the_target(check, value):
    target = 1.23456
    with pytest.raises(ExerciseFailed) as failure:
        check(value, target, exercise="9.2", what="your answer", theory="the theory")
    message = str(failure.value)
    for digits in (2, 3, 4, 5, 6):
        assert f"{target:.{digits}g}" not in message, message
    difference = 100 * abs(value - target) / target
    assert f"{difference:.2g}%" in message
    assert ("above" if value > target else "below") in message
