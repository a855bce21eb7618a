"""The coding exercises: check_function (a reader's function against the library's, in float64)
and each chapter's coding exercise, with its solution, a sign error, a stub and a wrong shape."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.pages import chapter_exercises as chx
from nlicl_lib.pages.exercises import ExerciseFailed, check_function

INPUTS = [(np.array([1.0, 2.0]),), (np.array([[0.5, -1.5], [2.5, 3.0]]),)]


def square(v):
    return v**2


def test_a_correct_function_passes(capsys):
    passed = check_function(lambda v: v * v, square, INPUTS, exercise="9.4", what="yours")
    assert passed.value <= 1e-15 and "✓ Exercise 9.4: yours matches" in capsys.readouterr().out


def test_a_sign_error_names_the_input_the_entry_and_the_direction_not_the_values():
    with pytest.raises(ExerciseFailed) as failure:
        check_function(lambda v: -v * v if v.ndim == 2 else v * v, square, INPUTS,
                       labels=["a vector", "a matrix"], what="yours", theory="the library")
    message = str(failure.value)
    assert "input 2 of 2 (a matrix), entry (1, 1)" in message  # the largest miss: 2 * 3²
    assert "below the library's value" in message
    assert "2 times the size of the library's output" in message  # relative, not absolute
    rest = message.split("(allowed")[0].replace("input 2 of 2", "").replace("(1, 1)", "")
    for value in ("9", "6.25", "2.25", "0.25", "-9"):  # the reference's entries, the reader's
        assert not re.search(rf"(?<![\w.]){re.escape(value)}(?!\d)", rest), message


def test_an_unfilled_stub_says_so_and_does_not_stop_the_notebook(capsys):
    def my_function(v):
        raise NotImplementedError  # replace this line by your code

    assert check_function(my_function, square, INPUTS, exercise="9.4") is None
    out = capsys.readouterr().out
    assert "Exercise 9.4: `my_function` still raises NotImplementedError" in out


def test_a_wrong_shape_or_a_non_number_fails_with_both_shapes():
    with pytest.raises(ExerciseFailed, match=r"shape \(1, 2\) at input 1 of 2.*shape \(2,\)"):
        check_function(lambda v: (v * v)[None], square, INPUTS)
    with pytest.raises(ExerciseFailed, match="not numbers"):
        check_function(lambda v: "four", square, INPUTS)
    with pytest.raises(ExerciseFailed, match="non-finite"):
        check_function(lambda v: np.full_like(v, np.nan), square, INPUTS)


def test_the_tolerance_is_stated_and_applied():
    check_function(lambda v: v * v * (1 + 1e-10), square, INPUTS, rel=1e-9)
    with pytest.raises(ExerciseFailed, match="allowed 1e-12"):
        check_function(lambda v: v * v * (1 + 1e-6), square, INPUTS, rel=1e-9)
    with pytest.raises(ExerciseFailed, match="allowed: no difference"):
        check_function(lambda v: v * v + 1e-14, square, INPUTS, rel=0.0, atol=0.0)
    with pytest.raises(ConfigError, match="labels"):
        check_function(square, square, INPUTS, labels=["one"])


def test_the_readers_function_gets_a_copy_of_the_inputs():
    def in_place(v):
        v *= v
        return v

    check_function(in_place, square, INPUTS)
    assert INPUTS[0][0].tolist() == [1.0, 2.0]


# --- each chapter's coding exercise: the solution passes, a slip fails --------------------------

def lsa_prediction(z, p, q):
    n = z.shape[1] - 1
    context = z[:, :n]
    return -(z[-1, n] + (p @ context @ context.T @ q @ z[:, n])[-1] / n)


def gd_weights(x, y, gammas):
    n, d = x.shape
    w = np.zeros(d)
    for gamma in gammas:
        w = w + gamma @ (x.T @ (y - x @ w)) / n
    return w


def phi2_glu_weights(d):
    pairs = [(j, k) for j in range(d) for k in range(j, d)]
    return (np.eye(d)[[j for j, _ in pairs]], np.eye(d)[[k for _, k in pairs]],
            np.eye(len(pairs)))


def slots_needed(d, k):
    return sum(math.comb(d + j - 1, j) for j in range(2, k + 1))


def block_step(r, psi, gamma):
    n = len(r) - 1
    return r - psi @ gamma @ (psi[:n].T @ r[:n] / n)


# (exercise, the solution, a function with a slip, what the failure must name)
SLIPS = [
    ("1.4", lsa_prediction, lambda z, p, q: -lsa_prediction(z, p, q), "input 1 of 3 (n = 3, D = 2)"),
    ("1.4", lsa_prediction,  # the query left in the keys and values (no mask)
     lambda z, p, q: -(z[-1, -1] + (p @ z @ z.T @ q @ z[:, -1])[-1] / (z.shape[1] - 1)),
     "input 1 of 3"),
    ("2.4", gd_weights, lambda x, y, gammas: sum(g @ (x.T @ y) / len(y) for g in gammas),
     "input 2 of 3 (n = 10, d = 3, L = 2)"),  # the labels never become residuals
    ("3.4", phi2_glu_weights, lambda d: tuple(-w if i == 2 else w
                                              for i, w in enumerate(phi2_glu_weights(d))),
     "input 1 of 3 (d = 2, ten random x)"),
    ("4.5", slots_needed, lambda d, k: sum(math.comb(d + j - 1, j) for j in range(1, k + 1)),
     "input 1 of 6 (d = 3, k = 2)"),  # counting degree 1 too
    ("5.4", block_step, lambda r, psi, gamma: r + psi @ gamma @ (psi[:-1].T @ r[:-1] / (len(r) - 1)),
     "input 1 of 3 (n = 4, f = 2)"),  # the sign of the step
    ("5.4", block_step,  # the query summed into g
     lambda r, psi, gamma: r - psi @ gamma @ (psi.T @ r / (len(r) - 1)), "input 1 of 3"),
]


@pytest.mark.parametrize(("exercise_id", "solution", "slip", "where"), SLIPS,
                         ids=[f"{row[0]}-{k}" for k, row in enumerate(SLIPS)])
def test_each_coding_exercise_passes_its_solution_and_fails_a_slip(capsys, exercise_id, solution,
                                                                  slip, where):
    check = chx.CHECKERS[exercise_id]
    check(solution)
    assert f"✓ Exercise {exercise_id}" in capsys.readouterr().out
    with pytest.raises(ExerciseFailed) as failure:
        check(slip)
    message = str(failure.value)
    assert where in message and ("above" in message or "below" in message), message


@pytest.mark.parametrize("exercise_id", ["1.4", "2.4", "3.4", "4.5", "5.4"])
def test_each_coding_exercise_waits_for_its_stub(capsys, exercise_id):
    def stub(*args):
        raise NotImplementedError

    chx.CHECKERS[exercise_id](stub)
    assert f"Exercise {exercise_id}: `stub` still raises NotImplementedError" in (
        capsys.readouterr().out.replace("\n", " "))


def test_exercise_3_4_weights_of_the_wrong_shape_say_what_is_needed():
    with pytest.raises(ExerciseFailed, match=r"needs \(h, 2\), \(h, 2\) and \(3, h\)"):
        chx.check_phi2_glu(lambda d: (np.eye(d), np.eye(d), np.eye(d)))
