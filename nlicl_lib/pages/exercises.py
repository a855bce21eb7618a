r"""Exercises that check themselves: assert-based comparisons with theory, with hints.

A chapter's exercise is a function of what the reader chooses (a learning rate, a feature
map, a depth) that trains or computes something and ends with a check; the chapters' exercises
live in :mod:`nlicl_lib.pages.chapter_exercises`, one function each::

    def check_deep_lsa_cannot_beat_zero(depth):                              # what the page's cell calls
        exercises.attempt("2.2", _check_deep_lsa_cannot_beat_zero, depth=depth)

    def _check_deep_lsa_cannot_beat_zero(depth):
        result = run_experiment(...)                      # the reader's run
        exercises.check_at_least(
            result.normalised_test_loss, 1.0, exercise="2.2",
            what="test loss / E[y^2]", hint="...",
            theory=f"the zero predictor ({ref('cor-linear-bound')})")  # from nlicl_lib.core.book_refs

and the page's cell is the import, the reader's line and the call::

    depth = None  # the number of LSA layers L, 2 or more
    check_deep_lsa_cannot_beat_zero(depth)

:func:`attempt` runs the exercise once every answer is set (``None`` means not yet: it then
says what to set, so *Run all* never stops at an exercise). A check that fails raises
:class:`ExerciseFailed` (an ``AssertionError``) whose message says by how much and in which
direction the result missed the theory, never the theory's value (it would give the answer
away), and gives the hint; a check that passes shows a line saying so. Texts that
name a result of the book's Theory part (``theory=``, ``hint=``) take its number from
:func:`nlicl_lib.core.book_refs.ref`. On a page the exercise is a numbered sphinx-exercise block;
its solution, in a dropdown after it, ends with a call of the same function with the right
answer in a code cell tagged ``solution`` and hidden behind a toggle. That cell runs when the
book is built, so every exercise is known to be solvable.

A *coding* exercise's cell holds a stub the reader fills in, ``def lsa_prediction(Z, P, Q):
raise NotImplementedError``, and passes the function to its check, which runs
:func:`check_function`: the reader's function and the library's implementation on the same few
random inputs, in float64, within a stated tolerance. A mismatch fails with the input, the
entry, the direction and the size of the error relative to the library's output (never its
values); a stub still unfilled only says so.

Each passed check's output carries ``{"nlicl_exercise": {"id", "title", "seconds",
"device", ...}}`` in its metadata: ``seconds`` is the time since the cell started (the
exercise's run time), kept with the executed notebook.
"""

from __future__ import annotations

import copy
import math
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from html import escape
from typing import Any

import numpy as np
from IPython import get_ipython
from IPython.display import publish_display_data

from nlicl_lib.core.device import describe_device, resolve_device
from nlicl_lib.core.errors import ConfigError, check_float

METADATA_KEY = "nlicl_exercise"

_cell_started: float | None = None


def _on_cell_start(*_args: Any) -> None:
    global _cell_started
    _cell_started = time.perf_counter()


def _watch_cells() -> None:
    """Note when each notebook cell starts, so a check can say how long its cell ran."""
    shell = get_ipython()
    if shell is not None and _on_cell_start not in shell.events.callbacks["pre_run_cell"]:
        shell.events.register("pre_run_cell", _on_cell_start)


_watch_cells()


def cell_seconds() -> float | None:
    """Seconds since the current notebook cell started (``None`` outside a notebook)."""
    return None if _cell_started is None else time.perf_counter() - _cell_started


class ExerciseFailed(AssertionError):
    """A check did not pass; the message has the numbers and the hint."""

    def __init__(self, message: str, hint: str = ""):
        self.hint = hint
        super().__init__(message + (f"\nHint: {hint}" if hint else ""))


@dataclass(frozen=True)
class CheckResult:
    """A passed check: the reader's ``value``, the theory's ``reference``, how far apart
    (``relative_difference``, signed: positive when the value is larger) and the tolerance."""

    exercise: str
    what: str
    value: float
    reference: float
    relative_difference: float
    tolerance: float
    kind: str
    message: str
    seconds: float | None = None


def _signed_percent(fraction: float) -> str:
    """A relative difference for a message: ``+0.36%``; below 0.01% (rounding, or an exact
    match) it says so instead of printing ``+1.6e-14%``."""
    if fraction == 0:
        return "no difference"
    if abs(fraction) < 1e-4:
        return "less than 0.01% apart"
    return f"{100 * fraction:+.2g}%"


def _off_by(value: float, reference: float, what: str, theory: str) -> str:
    """How far ``value`` is from ``reference`` and in which direction, without the reference:
    a failed check must not give the answer away (``12% above the optimum``)."""
    difference = relative_difference(value, reference)
    side = "above" if difference > 0 else "below"
    size = (f"{100 * abs(difference):.2g}%" if reference != 0
            else f"{abs(difference):.2g}")
    return f"{what} = {value:.5g} is {size} {side} {theory}"


def _tolerance(rel: float) -> str:
    """An allowed relative difference for a message: ``±2%``, or ``rounding only`` for the
    checks that compare a formula with the library's closed form (``rel`` below 0.01%)."""
    return f"allowed ±{100 * rel:.2g}%" if rel >= 1e-4 else "allowed: rounding only"


def relative_difference(value: float, reference: float) -> float:
    r"""$(v - r) / |r|$; the absolute difference when $r = 0$."""
    return (value - reference) / abs(reference) if reference != 0 else value - reference


def _check_numbers(value: float, reference: float, rel: float) -> tuple[float, float, float]:
    value = float(value)
    reference = check_float("reference", reference)
    rel = check_float("rel", rel, 0.0)
    if not math.isfinite(value):
        raise ExerciseFailed(f"the result is {value}, not a finite number",
                             "the run probably diverged: try a smaller learning rate")
    return value, reference, rel


def _passed(exercise: str, what: str, value: float, reference: float, rel: float, kind: str,
            sentence: str, title: str = "") -> CheckResult:
    difference = relative_difference(value, reference)
    label = f"Exercise {exercise}: " if exercise else ""
    message = f"✓ {label}{sentence}"
    result = CheckResult(exercise, what, value, reference, difference, rel, kind, message,
                         cell_seconds())
    _show(result, title)
    return result


def _show(result: CheckResult, title: str) -> None:
    if get_ipython() is None:
        print(result.message)
        return

    metadata = asdict(result)
    metadata.update(id=result.exercise, title=title, device=describe_device(
        resolve_device("auto")))
    publish_display_data(
        {"text/plain": result.message,
         "text/html": f'<p class="nlicl-exercise-passed">{escape(result.message)}</p>'},
        {METADATA_KEY: metadata})


def check_close(value: float, reference: float, rel: float = 0.05, *, exercise: str = "",
                what: str = "the result", theory: str = "theory", hint: str = "",
                title: str = "") -> CheckResult:
    r"""Pass when $|v - r| \le \mathrm{rel} \cdot |r|$: the reader's ``value`` matches the
    ``reference`` that ``theory`` names, within ``rel`` (relative)."""
    value, reference, rel = _check_numbers(value, reference, rel)
    difference = relative_difference(value, reference)
    numbers = (f"{what} = {value:.5g}, {theory} = {reference:.5g} "
               f"({_signed_percent(difference)}; {_tolerance(rel)})")
    if abs(difference) > rel:
        raise ExerciseFailed(f"{_prefix(exercise)}{what} does not match {theory}: "
                             f"{_off_by(value, reference, what, theory)} ({_tolerance(rel)}).",
                             hint)
    return _passed(exercise, what, value, reference, rel, "close",
                   f"{what} matches {theory}: {numbers}.", title)


def check_at_least(value: float, bound: float, rel: float = 0.02, *, exercise: str = "",
                   what: str = "the result", theory: str = "the bound", hint: str = "",
                   title: str = "") -> CheckResult:
    r"""Pass when $v \ge (1 - \mathrm{rel})\, b$: the value does not beat a lower ``bound``
    (``rel`` allows for Monte Carlo error)."""
    value, bound, rel = _check_numbers(value, bound, rel)
    difference = relative_difference(value, bound)
    numbers = f"{what} = {value:.5g}, {theory} = {bound:.5g} ({_signed_percent(difference)})"
    if value < bound - rel * abs(bound):
        raise ExerciseFailed(
            f"{_prefix(exercise)}{_off_by(value, bound, what, theory)}, which theory says no "
            f"model of this class can beat (allowed {100 * rel:.0f}% below for Monte Carlo "
            "error).", hint)
    return _passed(exercise, what, value, bound, rel, "at least",
                   f"{what} stays at or above {theory}: {numbers}.", title)


def check_at_most(value: float, limit: float, rel: float = 0.0, *, exercise: str = "",
                  what: str = "the result", theory: str = "the target", hint: str = "",
                  title: str = "") -> CheckResult:
    r"""Pass when $v \le (1 + \mathrm{rel})\, \ell$: the value gets below ``limit``."""
    value, limit, rel = _check_numbers(value, limit, rel)
    difference = relative_difference(value, limit)
    numbers = f"{what} = {value:.5g}, {theory} = {limit:.5g} ({_signed_percent(difference)})"
    if value > limit + rel * abs(limit):
        raise ExerciseFailed(f"{_prefix(exercise)}{what} is not below {theory}: "
                             f"{_off_by(value, limit, what, theory)}.", hint)
    return _passed(exercise, what, value, limit, rel, "at most",
                   f"{what} is below {theory}: {numbers}.", title)


def check_equal(value: Any, expected: Any, *, exercise: str = "", what: str = "your answer",
                hint: str = "", title: str = "") -> CheckResult:
    """Pass when ``value == expected`` (an integer such as a number of slots, a degree). A
    wrong number is told which way it is off (``above the right value``), not by how much."""
    if value != expected:
        side = ""
        if _is_number(value) and _is_number(expected):
            side = f" {'above' if value > expected else 'below'} the right value"
        raise ExerciseFailed(f"{_prefix(exercise)}{what} = {value!r} is not right: it is"
                             f"{side or ' not the right value'}.", hint)
    message = f"{what} = {value!r} is right."
    reference = float(expected) if isinstance(expected, int | float) else math.nan
    number = float(value) if isinstance(value, int | float) else math.nan
    return _passed(exercise, what, number, reference, 0.0, "equal", message, title)


def _prefix(exercise: str) -> str:
    return f"Exercise {exercise}: " if exercise else ""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)


def check_function(student: Callable[..., Any], reference: Callable[..., Any],
                   inputs: Sequence[tuple], *, rel: float = 1e-9, atol: float = 1e-12,
                   labels: Sequence[str] | None = None, exercise: str = "",
                   what: str = "your function", theory: str = "the library",
                   hint: str = "", title: str = "") -> CheckResult | None:
    r"""Pass when ``student(*args)`` equals ``reference(*args)`` for every ``args`` of
    ``inputs``, entry by entry within $|s - r| \le \mathrm{atol} + \mathrm{rel}\,|r|$, both
    compared as float64 arrays: the check of a coding exercise, where the reader writes a
    function and ``reference`` is the library's implementation of it.

    ``labels`` describe the inputs in a failure (``"n = 5, D = 4"``; default: their shapes).
    The first input that does not match fails the check with its label, the entry that misses
    most, by how much and in which direction, never the reference's values. A ``student``
    still raising ``NotImplementedError`` (the page's stub) only says so and returns ``None``,
    so that running every cell never stops at an exercise; an output of the wrong shape fails
    with both shapes."""
    if labels is not None and len(labels) != len(inputs):
        raise ConfigError("labels", len(labels), f"one label per input ({len(inputs)})")
    if not inputs:
        raise ConfigError("inputs", inputs, "at least one tuple of arguments")
    rel = check_float("rel", rel, 0.0)
    atol = check_float("atol", atol, 0.0)
    allowed = (f"allowed {atol:.0e} + {rel:.0e} × |value|" if rel or atol
               else "allowed: no difference")
    name = getattr(student, "__name__", "your function")
    worst = 0.0
    for index, args in enumerate(inputs):
        label = labels[index] if labels is not None else _describe(args)
        where = f"input {index + 1} of {len(inputs)} ({label})"
        expected = np.asarray(reference(*args), dtype=np.float64)
        try:
            got = student(*copy.deepcopy(args))  # a copy: the reader's code may write into it
        except NotImplementedError:
            print(textwrap.fill(f"{_prefix(exercise)}`{name}` still raises NotImplementedError: "
                                "replace that line by your code and run the cell.", 68))
            return None
        try:
            got = np.asarray(got, dtype=np.float64)
        except (TypeError, ValueError) as error:
            raise ExerciseFailed(f"{_prefix(exercise)}{what} returned {type(got).__name__} "
                                 f"at {where}, not numbers ({error}).", hint) from None
        if got.shape != expected.shape:
            raise ExerciseFailed(
                f"{_prefix(exercise)}{what} returned an array of shape {got.shape} at {where}; "
                f"{theory} returns shape {expected.shape}.", hint)
        if not np.all(np.isfinite(got)):
            raise ExerciseFailed(f"{_prefix(exercise)}{what} returned a non-finite value at "
                                 f"{where}.", hint)
        error = np.abs(got - expected)
        excess = error - (atol + rel * np.abs(expected))
        if np.any(excess > 0):
            entry = np.unravel_index(int(np.argmax(excess)), error.shape)
            side = "above" if got[entry] > expected[entry] else "below"
            at = f", entry {tuple(int(i) for i in entry)}" if error.ndim else ""
            # relative to the size of the reference's output, so that the message does not
            # give its values away (an absolute error would, for a sign error)
            scale = float(np.max(np.abs(expected)))
            size = (f"{error[entry] / scale:.2g} times the size of {theory}'s output"
                    if scale > 0 else f"{error[entry]:.2g}")
            size = f"{side} {theory}'s value by {size}"
            raise ExerciseFailed(
                f"{_prefix(exercise)}{what} does not match {theory} at {where}{at}: "
                f"it is {size} ({allowed}).", hint)
        worst = max(worst, float(np.max(error, initial=0.0)))
    sentence = (f"{what} matches {theory} on all {len(inputs)} inputs (largest difference "
                f"{worst:.1e}, float64; {allowed}).")
    return _passed(exercise, what, worst, 0.0, rel, "function", sentence, title)


def _describe(args: tuple) -> str:
    """The arguments of a failed input by shape (arrays) or value (numbers)."""
    parts = []
    for arg in args:
        shape = getattr(arg, "shape", None)
        parts.append(f"shape {tuple(shape)}" if shape is not None else repr(arg))
    return ", ".join(parts)


def attempt(exercise: str, run: Callable[..., Any], /, **answers: Any) -> None:
    """Run ``run(**answers)`` once every answer is set; while one is ``None``, say which to
    set instead (so running every cell never stops at an exercise). Returns nothing, so that
    a cell ending with it shows only the check's line."""
    if not exercise:
        raise ConfigError("exercise", exercise, "an exercise id such as '2.1'")
    missing = [name for name, value in answers.items() if value is None]
    if missing:
        names = ", ".join(f"`{name}`" for name in missing)
        # wrapped: the line sits in the exercise's box, narrower than the page
        print(textwrap.fill(f"Exercise {exercise}: set {names} (now None) and run the cell.",
                            68))
        return
    run(**answers)
