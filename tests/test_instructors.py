"""The instructors' pages: the plan names exercises that exist, every problem has a solution,
and the solutions' formulas agree with the library."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.pages import instructors
from nlicl_lib.theory import capacity, closed_forms
from nlicl_lib.theory.linearity import best_affine_loss

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"

PAGE = BOOK / "instructors.md"
PROBLEMS_PAGE = BOOK / "instructor_problems.md"
CHAPTERS = sorted(BOOK.glob("ch[0-9]_*.md"))


# --- the instructors page -------------------------------------------------------------------------


def exercise_numbers() -> set[str]:
    """"1.1", "1.2", ...: the chapters' exercises, whose labels (ex-1-1) follow their order."""
    numbers = set()
    for chapter, path in enumerate(CHAPTERS, start=1):
        labels = re.findall(r"^````\{exercise-start\}.*\n:label: (ex-\d+-\d+)$",
                            path.read_text(encoding="utf-8"), re.M)
        assert labels == [f"ex-{chapter}-{k}" for k in range(1, len(labels) + 1)], path.name
        numbers |= {f"{chapter}.{k}" for k in range(1, len(labels) + 1)}
    return numbers


def test_the_plan_names_exercises_that_exist():
    numbers = exercise_numbers()
    text = PAGE.read_text(encoding="utf-8")
    plan = text[text.index("## A five-week module"):text.index("## Running the notebooks")]
    named = set(re.findall(r"Exercise (\d+\.\d+)", plan))
    assert named and named <= numbers, f"no such exercise: {sorted(named - numbers)}"
    weeks = re.findall(r"^\| (\d+) \| \{doc\}`(\w+)`", plan, re.M)
    assert [stem for _, stem in weeks] == [p.stem for p in CHAPTERS]
    problems = {p.label for p in instructors.problems(PROBLEMS_PAGE.read_text(encoding="utf-8"))}
    for number in re.findall(r"(\d\.\d)", " ".join(re.findall(r"Problems? [\d. and;]+", plan))):
        assert f"pp-{number.replace('.', '-')}" in problems
    # no measured number typed into the plan: durations come from the tables
    assert not re.search(r"\d+\s*(min|minutes|s|seconds|hours?)\b", plan)


# --- the problems ---------------------------------------------------------------------------------

PROBLEMS = instructors.problems(PROBLEMS_PAGE.read_text(encoding="utf-8"))


def test_every_problem_has_a_distinct_label_a_title_and_a_solution():
    labels = [p.label for p in PROBLEMS]
    assert len(labels) == len(set(labels))
    for problem in PROBLEMS:
        assert problem.statement and problem.solution, f"{problem.label} has no solution"
    text = PROBLEMS_PAGE.read_text(encoding="utf-8")
    solutions = re.findall(r"^````\{solution\} (\S+)\n:class: dropdown$", text, re.M)
    assert sorted(solutions) == sorted(labels), "every solution is a closed dropdown of a problem"


# --- the solutions' formulas, against the library -----------------------------------------------


@pytest.mark.parametrize("d", [2, 3, 5])
@pytest.mark.parametrize("n", [10, 40])
@pytest.mark.parametrize("sigma", [0.0, 0.5])
def test_pp_1_2_best_isotropic_step(d, n, sigma):
    scale, loss = closed_forms.linear_gd_optimum_isotropic(d, n, sigma)
    assert scale == pytest.approx(n / (n + d + 1 + sigma**2))
    gamma = n / (n + d + 1 + sigma**2)  # the minimiser of d (γ² (n+d+1+σ²)/n - 2γ + 1)
    assert d * (gamma**2 * (n + d + 1 + sigma**2) / n - 2 * gamma + 1) == pytest.approx(loss)
    task = TaskConfig(kind="linear", input_dim=d, context_length=n, noise_std=sigma)
    assert closed_forms.linear_gd_optimum(task).loss == pytest.approx(loss)
    # half the zero predictor's loss at n = d + 1 + σ²
    half = closed_forms.linear_gd_optimum_isotropic(d, d + 1, 0.0)[1]
    assert half == pytest.approx(d / 2)


def test_pp_1_3_two_steps_are_the_series():
    rng = np.random.default_rng(0)
    d, n = 3, 7
    x, y = rng.standard_normal((n, d)), rng.standard_normal(n)
    g, c = x.T @ y / n, x.T @ x / n
    g1, g2 = rng.standard_normal((d, d)), rng.standard_normal((d, d))
    theta1 = g1 @ g
    theta2 = theta1 + g2 @ ((x.T @ (y - x @ theta1)) / n)
    assert np.allclose(theta2, (g1 + g2 - g2 @ c @ g1) @ g)


@pytest.mark.parametrize("d", [1, 2, 3, 5])
def test_pp_2_2_quadratic_floors(d):
    pure = TaskConfig(kind="poly", input_dim=d, context_length=20, degree=2, homogeneous=True)
    assert closed_forms.null_loss(pure) == pytest.approx(d * (d + 5) / 2)
    assert closed_forms.best_linear_loss(pure) == pytest.approx(d * (d + 5) / 2)
    assert best_affine_loss(pure) == pytest.approx(d * (d + 3) / 2)
    mixed = TaskConfig(kind="poly", input_dim=d, context_length=20, degree=2)
    assert closed_forms.null_loss(mixed) == pytest.approx(d * (d + 7) / 2)
    assert closed_forms.best_linear_loss(mixed) / closed_forms.null_loss(mixed) == \
        pytest.approx(1 - 2 / (d + 7))


@pytest.mark.parametrize("d", [1, 2, 4])
def test_pp_3_2_the_constant_of_the_linear_task(d):
    from nlicl_lib.core.monomials import PolyMap, second_moment, squared_norm, weighted_second_moment

    x = PolyMap.monomials(d, [1])
    s = second_moment(x)
    f = weighted_second_moment(squared_norm(x), x)
    c = np.trace(np.linalg.solve(s, f)) - np.trace(s)
    assert c == pytest.approx(d * (d + 1))
    for n in (5, 30):
        assert closed_forms.linear_gd_optimum_isotropic(d, n)[1] == pytest.approx(c / (n + d + 1))


@pytest.mark.parametrize("d", [1, 2, 3, 6])
@pytest.mark.parametrize("k", [2, 3, 4])
def test_pp_4_1_token_size_of_the_kernel(d, k):
    size = capacity.required_embedding(d, k)
    assert size.monomials == math.comb(d + k - 1, k)
    assert size.token_dim == math.comb(d + k, k)
    assert closed_forms.required_slots(d, k) == math.comb(d + k, k) - d - 1  # pp-5-2, part 3


@pytest.mark.parametrize("d", [2, 3, 4])
@pytest.mark.parametrize("n", [5, 50])
@pytest.mark.parametrize("sigma", [0.0, 1.0])
def test_pp_4_2_every_cross_term_is_worth_the_same(d, n, sigma):
    task = TaskConfig(kind="poly", input_dim=d, context_length=n, degree=2, noise_std=sigma)
    increments = capacity.slot_increments(task)
    value, count, s, kappa = increments.groups["cross terms"]
    assert count == d * (d - 1) // 2 and s == pytest.approx(1.0)
    assert kappa == pytest.approx((n - 1) / n + (d + 7) * (d + 8) / (2 * n) + sigma**2 / n)
    assert value == pytest.approx(2 * n / (2 * (n - 1) + (d + 7) * (d + 8) + 2 * sigma**2))
