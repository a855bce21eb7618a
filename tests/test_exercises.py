"""Self-checking exercises (nlicl_lib.exercises): checks pass, fail with numbers and a hint,
and wait for the reader's answer without stopping a notebook run."""

from __future__ import annotations

import math

import pytest

from nlicl_lib import exercises
from nlicl_lib.exercises import (
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
    message = str(failure.value)
    assert "+20%" in message and "±5%" in message and "Hint: train longer" in message
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


def test_a_passed_check_records_its_cell_time_for_the_instructors_page(monkeypatch):
    published = []
    monkeypatch.setattr("IPython.get_ipython", lambda: object())
    monkeypatch.setattr("IPython.display.publish_display_data",
                        lambda data, metadata: published.append((data, metadata)))
    exercises._on_cell_start()
    check_close(1.0, 1.0, exercise="9.3", what="loss", title="A title")
    data, metadata = published[0]
    info = metadata[exercises.METADATA_KEY]
    assert info["id"] == "9.3" and info["title"] == "A title"
    assert info["seconds"] is not None and 0 <= info["seconds"] < 60
    assert info["device"].startswith(("cpu", "cuda", "mps"))
    assert "✓ Exercise 9.3" in data["text/plain"]
