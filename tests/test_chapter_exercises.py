"""The chapters' exercises pass with their solution's answer and fail with a wrong one (runs
stubbed: their training is tested with the chapters' claims); each exercise cell is short."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from types import SimpleNamespace

import jupytext
import pytest

from nlicl_lib.pages import chapter_exercises as chx
from nlicl_lib.pages.exercises import ExerciseFailed
from nlicl_lib.theory import capacity, closed_forms

EXERCISES = sorted(chx.CHECKERS)  # the exercises' numbers, "1.1" ...


def checker_name(exercise_id: str) -> str:
    return chx.CHECKERS[exercise_id].__name__


def _stub(monkeypatch, test_loss, theory_loss=1.0, null_loss=1.0) -> list:
    """``run_experiment`` trains nothing: it returns ``test_loss`` and records its calls."""
    calls = []
    result = SimpleNamespace(test_loss=test_loss, normalised_test_loss=test_loss / null_loss,
                             theory=SimpleNamespace(theory_loss=theory_loss))
    monkeypatch.setattr(chx, "run_experiment", lambda *args, **kwargs: calls.append(args) or result)
    return calls


# --- every exercise waits for its answer ---------------------------------------------------------

@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_an_unset_answer_says_what_to_set_and_runs_nothing(exercise_id, capsys, monkeypatch):
    calls = _stub(monkeypatch, 1.0)
    function = chx.CHECKERS[exercise_id]
    answers = [p for p in inspect.signature(function).parameters.values()
               if p.default is inspect.Parameter.empty]
    function(*[None] * len(answers))
    out = capsys.readouterr().out
    assert f"Exercise {exercise_id}: set `{answers[0].name}`" in out and not calls


def test_exercise_1_3_derived_step(capsys):
    chx.check_preconditioner_scale(20 / 26)
    assert "✓ Exercise 1.3" in capsys.readouterr().out
    chx.check_preconditioner_scale(0.769)  # three significant digits are enough
    with pytest.raises(ExerciseFailed):
        chx.check_preconditioner_scale(1.0)  # the plain step
    # the loss it prints: L(gamma I) is lowest at gamma*, with Theorem 5's value there
    gamma, optimum = closed_forms.linear_gd_optimum_isotropic(5, 20)
    assert chx.linear_step_loss(gamma) == pytest.approx(optimum, rel=1e-12)
    assert chx.linear_step_loss(1.0) == pytest.approx(5 * 6 / 20)  # c/n, Proposition 11


def test_exercise_2_3_derived_affine_bound(capsys):
    chx.check_affine_bound_fraction((25 - 5) / 25)
    assert "affine 0.750" in capsys.readouterr().out  # the d = 3 value it prints for comparison
    with pytest.raises(ExerciseFailed):
        chx.check_affine_bound_fraction(0.75)  # the d = 3 value, not the d = 5 one
    with pytest.raises(ExerciseFailed):
        chx.check_affine_bound_fraction(1.0)  # the linear bound


def test_exercise_3_1_kernel_weight():
    chx.check_kernel_linear_weight(2.5)
    with pytest.raises(ExerciseFailed, match="your kernel's loss"):
        chx.check_kernel_linear_weight(0.0)


def test_exercise_3_3_derived_asymptote(capsys):
    chx.check_one_over_n_constant(18 + 120 / 3 - 4)
    out = capsys.readouterr().out
    assert "crossover n = c / E[y²] = 13.5" in out
    with pytest.raises(ExerciseFailed):
        chx.check_one_over_n_constant(2 * 3)  # the linear task's d(d+1) with d = 2 unknowns


def test_exercise_4_1_best_single_feature():
    chx.check_one_slot_feature([1, 0, 0, 1, 0, 1])
    with pytest.raises(ExerciseFailed, match="non-zero mean"):
        chx.check_one_slot_feature([1, 0, 0, 0, 0, 0])


def test_exercise_4_2_slots():
    chx.check_slots_for_degree_three(10 + 20)
    with pytest.raises(ExerciseFailed):
        chx.check_slots_for_degree_three(20)


def test_exercise_4_4_derived_slot_gain(capsys):
    n = chx.SLOT_TASK.context_length
    kappa_c = (n - 1) / n + (7 + 33 + 15) / n  # E[||phi||² x1² x2²] = 55
    chx.check_fourth_slot_gain(1 / kappa_c)
    assert "slot 4 worth" in capsys.readouterr().out
    with pytest.raises(ExerciseFailed):
        chx.check_fourth_slot_gain(1 / (19 / 20 + 55 / 20))  # n = 20, the page's context length
    with pytest.raises(ExerciseFailed):
        chx.check_fourth_slot_gain(1 / 3.7 * 2)


def test_exercise_5_2_is_decided_by_a_clear_margin():
    """The accepted range (the estimate ± the tolerance) holds the estimate's two-standard-error
    interval with room to spare, holds the wide block's l_6 (the reasoned answer), and leaves
    the one-narrow-block answer l_3 (depth adds nothing) far outside."""
    found = chx.wide_against_deep()
    tolerance = chx.STACK_PREDICTION_TOLERANCE
    interval = 2 * found.two_narrow_blocks_error
    assert interval <= tolerance / 2, (interval, tolerance)
    assert abs(found.wide_block - found.two_narrow_blocks) <= tolerance - interval
    assert found.narrow_block - found.two_narrow_blocks >= 2.5 * tolerance
    chx.check_wide_block_against_depth(found.wide_block)
    with pytest.raises(ExerciseFailed, match="above"):
        chx.check_wide_block_against_depth(found.narrow_block)


def test_exercise_3_2_measured_exponent_and_wrong_ones():
    assert chx.glu_gradient_exponent() == pytest.approx(2.0, abs=1e-3)
    chx.check_glu_gradient_exponent(2)
    for wrong in (1, 3):
        with pytest.raises(ExerciseFailed):
            chx.check_glu_gradient_exponent(wrong)
    small, normal = (chx.glu_gradient_norms(init)[0] for init in ("small", "normal"))
    assert small < 1e-3 * normal  # what the solution says the cell prints


def test_exercise_5_3_degree_doubles():
    chx.check_slot_degree(8)
    assert chx.slot_degrees(3) == [2, 4, 8] and chx.slot_degrees(3, "x") == [2, 2, 2]
    with pytest.raises(ExerciseFailed):
        chx.check_slot_degree(6)  # two more per block
    chx.check_slot_degree(4, depth=2)


NOISY_OPTIMUM = 5 * (5 + 1 + 1.0) / (20 + 5 + 1 + 1.0)  # d(d + 1 + s^2)/(n + d + 1 + s^2)


def _kernel():
    return closed_forms.one_step_kernel_gd_optimum(chx.QUADRATIC_TASK).loss


def _three_slots():
    return capacity.best_feature_subspace(chx.QUADRATIC_TASK, 3).loss


# (exercise, the solution's answer, the stubbed trained loss (test, theory, null) it passes with,
#  a wrong answer or a failed run, the stubbed loss then, what the failure says)
TRAINED = [
    ("1.1", (0.02,), lambda: (1.01, 1.0, 1.0), (0.001,), lambda: (3.0, 1.0, 1.0), "raise it"),
    ("1.2", (NOISY_OPTIMUM,), lambda: (NOISY_OPTIMUM * 1.01, 1, 1), (5 * 6 / 26,),
     lambda: (1.0, 1, 1), "your L\\*"),  # the noiseless formula
    ("1.2", (NOISY_OPTIMUM,), lambda: (NOISY_OPTIMUM * 1.01, 1, 1), (NOISY_OPTIMUM,),
     lambda: (NOISY_OPTIMUM * 1.2, 1, 1), "trained test loss"),
    ("2.1", (12 / 15,), lambda: (0.9 * 15, 1, 15), (0.75,), lambda: (0.9 * 15, 1, 15), "your bound"),
    ("2.1", (12 / 15,), lambda: (0.9 * 15, 1, 15), (0.8,), lambda: (0.7 * 15, 1, 15),
     "no model of this class can beat"),
    ("2.2", (1.0,), lambda: (1.01, 1, 1), (0.8,), lambda: (1.01, 1, 1), "your prediction"),
    ("2.2", (1.0,), lambda: (1.01, 1, 1), (0.9,), lambda: (0.9, 1, 1), "beat"),
    ("4.3", (6, 6), lambda: (_kernel() * 1.01, 1, 1), (5, 6),
     lambda: (capacity.slot_increments(chx.QUADRATIC_TASK).loss(5), 1, 1), "item 3"),
    ("5.1", (2,), lambda: (0.85 * _three_slots(), 1, 1), (1,), lambda: (_three_slots(), 1, 1),
     "90% of the best 3-slot block"),
]


@pytest.mark.parametrize(("exercise_id", "answer", "passing", "wrong", "failing", "says"), TRAINED,
                         ids=[f"{row[0]}-{row[5][:12]}" for row in TRAINED])
def test_an_exercise_that_trains_passes_at_its_answer_and_fails_off_it(
        monkeypatch, exercise_id, answer, passing, wrong, failing, says):
    check = chx.CHECKERS[exercise_id]
    calls = _stub(monkeypatch, *passing())
    check(*answer)
    assert calls  # the reader's answer reached a run
    _stub(monkeypatch, *failing())
    with pytest.raises(ExerciseFailed, match=says):
        check(*wrong)


# --- the chapters' cells --------------------------------------------------------------------------

CHAPTERS = sorted((Path(__file__).resolve().parents[1] / "book").glob("ch*.md"))
STUDENT_LINE = re.compile(r"^[A-Za-z_][\w, ]* = None\b")
MAX_LINES_BEFORE = 6


def _exercise_cells(page: Path) -> list[tuple[str, list[str], list[str]]]:
    """(exercise id, its code cells' sources, the sources of its solution's code cells)."""
    cells = jupytext.read(page).cells
    found = []
    current = None
    in_solution = False
    for cell in cells:
        start = re.search(r"\{exercise-start\}[^\n]*\n:label: ex-(\d+)-(\d+)", cell.source)
        if start:
            current = [f"{start.group(1)}.{start.group(2)}", [], []]
            found.append(current)
            continue
        if "{exercise-end}" in cell.source:
            in_solution = False
        elif "{solution-start}" in cell.source:
            in_solution = True
        elif "{solution-end}" in cell.source:
            in_solution = False
            current = None
        if current is not None and cell.cell_type == "code":
            current[2 if in_solution else 1].append(cell.source)
    for exercise_id, code, _ in found:
        assert len(code) <= 1, f"exercise {exercise_id}: {len(code)} code cells, not one"
    return [(i, code, solutions) for i, code, solutions in found]


STUB = re.compile(r"^def (\w+)\(.*\):\n(?:    .*\n)*?    raise NotImplementedError  # .+", re.M)


@pytest.mark.parametrize("page", CHAPTERS, ids=lambda p: p.stem)
def test_each_exercise_cell_is_the_import_the_readers_line_and_one_call(page):
    """A numeric exercise's cell: the import, ``answer = None  # what to put``, one call. A
    coding exercise's: the import, a stub raising NotImplementedError with a comment, one call
    with the stub. A question answered in words has no cell and no checker."""
    found = _exercise_cells(page)
    assert found, "every chapter has exercises"
    kinds = []
    for exercise_id, cells, solutions in found:
        if not cells:  # a question answered in words: a model answer, nothing to run
            assert exercise_id not in chx.CHECKERS and not solutions, exercise_id
            kinds.append("think")
            continue
        [code] = cells
        name = checker_name(exercise_id)
        lines = code.splitlines()
        chapter = exercise_id.split(".")[0]
        assert f"from nlicl_lib.pages.ch{chapter} import {name}" in code, "from its page module"
        calls = re.findall(r"\b(" + "|".join(map(checker_name, EXERCISES)) + r")\(", code)
        assert calls == [name], f"{exercise_id}: exactly one call, of its own exercise"
        stub = STUB.search(code)
        if stub:
            kinds.append("code")
            assert code.count("def ") == 1, f"{exercise_id}: one function to write"
            assert f"{name}({stub.group(1)})" in code, f"{exercise_id}: the stub is checked"
            # the solution defines the same function and checks it
            assert any(f"def {stub.group(1)}(" in source for source in solutions), exercise_id
        else:
            kinds.append("value")
            student = [k for k, line in enumerate(lines) if STUDENT_LINE.match(line)]
            assert student, f"{exercise_id}: no line `answer = None  # ...` for the reader"
            assert student[0] <= MAX_LINES_BEFORE, f"{exercise_id}: {student[0]} lines before it"
            assert all("#" in lines[k] for k in student), f"{exercise_id}: say what to put"
            assert "def " not in code, "the checking code is in the library"
        # the solution calls the same function, with the answer
        assert sum(s.count(f"{name}(") for s in solutions) == 1, exercise_id
    assert len({i for i, _, _ in found}) == len(found)
    # issue 34: one coding exercise and one question in words per chapter, the question last
    assert kinds.count("code") == 1 and kinds.count("think") == 1 and kinds[-1] == "think"


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_every_library_exercise_is_on_its_chapter(exercise_id):
    chapter = exercise_id.split(".")[0]
    [page] = [p for p in CHAPTERS if p.stem.startswith(f"ch{chapter}_")]
    assert f"import {checker_name(exercise_id)}\n" in page.read_text(encoding="utf-8")


# --- every checker, with a wrong answer and with the right one ----------------------------------

NOISELESS_OPTIMUM = 5 * 6 / 26  # d(d+1)/(n+d+1): exercise 1.2 without the noise
TRAINED_LOSS = 1.0117  # a stubbed trained loss / E[y²] for exercise 2.2 (the build's: 1.0117)
THEORY = 1.15381  # a stubbed theory loss, not a round number (exercise 1.1)


def _wide():
    return chx.wide_against_deep()


def _slot_gain():
    found = capacity.slot_increments(chx.SLOT_TASK)
    return found.losses[3] - found.losses[4]


# (exercise, the right answer, its stub (test, theory, null) or None, a wrong answer, its stub,
#  the target a failed check must not show, the direction the message must say)
CHECKS = [
    ("1.1", (0.02,), (THEORY * 1.01, THEORY, 1), (0.001,), (3.0, THEORY, 1), lambda: THEORY,
     "above"),
    ("1.2", (NOISY_OPTIMUM,), (NOISY_OPTIMUM * 1.01, 1, 1), (NOISELESS_OPTIMUM,), None,
     lambda: NOISY_OPTIMUM, "below"),
    ("1.3", (20 / 26,), None, (1.0,), None, lambda: 20 / 26, "above"),
    ("2.1", (0.8,), (0.9 * 15, 1, 15), (0.75,), None, lambda: 0.8, "below"),
    ("2.2", (1.0,), (TRAINED_LOSS, 1, 1), (0.8,), (TRAINED_LOSS, 1, 1), lambda: TRAINED_LOSS,
     "below"),
    ("2.3", (0.8,), None, (0.75,), None, lambda: 0.8, "below"),
    ("3.1", (2.5,), None, (0.0,), None,
     lambda: closed_forms.gd_optimum_from_moments(chx.kernel_moments()).loss, "above"),
    ("3.2", (2,), None, (3,), None, chx.glu_gradient_exponent, "above"),
    ("3.3", (54.0,), None, (6.0,), None, lambda: 54.0, "below"),
    ("4.1", ([1, 0, 0, 1, 0, 1],), None, ([1, 0, 0, 0, 0, 0],), None,
     lambda: capacity.best_feature_subspace(chx.QUADRATIC_TASK, 1).normalised_loss, "above"),
    ("4.2", (30,), None, (20,), None, lambda: 30, "below"),
    ("4.3", (6, 6), (_kernel() * 1.01, 1, 1), (5, 6),
     (capacity.slot_increments(chx.QUADRATIC_TASK).loss(5), 1, 1), _kernel, "above"),
    ("4.4", (40 / 94,), None, (20 / 74,), None, _slot_gain, "below"),
    ("5.1", (2,), (0.85 * _three_slots(), 1, 1), (1,), (_three_slots(), 1, 1),
     lambda: 0.9 * _three_slots(), "above"),
    ("5.2", (0.54,), None, (0.6,), None, lambda: _wide().two_narrow_blocks, "above"),
    ("5.3", (8,), None, (6,), None, lambda: 8, "below"),
]


def shown_forms(target: float) -> list[str]:
    """The ways a check might print ``target``: %g and %f to 2-6 digits, and as an integer."""
    forms = {f"{target:.{digits}g}" for digits in range(2, 7)}
    forms |= {f"{target:.{digits}f}" for digits in range(2, 7)}
    if float(target).is_integer():
        forms.add(str(int(target)))
    return sorted(forms)


def shows(message: str, number: str) -> bool:
    """Whether ``number`` appears in ``message`` as a number of its own (not the 2 of
    "Exercise 3.2", "W2" or "0.25")."""
    return re.search(r"(?<![\w.])" + re.escape(number) + r"(?!\d|\.\d)", message) is not None


@pytest.mark.parametrize(("exercise_id", "right", "right_stub", "wrong", "wrong_stub", "target",
                          "side"), CHECKS, ids=[row[0] for row in CHECKS])
def test_every_checker_fails_a_wrong_answer_without_the_target_and_passes_the_right_one(
        monkeypatch, capsys, exercise_id, right, right_stub, wrong, wrong_stub, target, side):
    check = chx.CHECKERS[exercise_id]
    assert {row[0] for row in CHECKS} | CODING == set(EXERCISES), "a row per checker"
    if wrong_stub is not None:
        _stub(monkeypatch, *wrong_stub)
    with pytest.raises(ExerciseFailed) as failure:
        check(*wrong)
    message = str(failure.value)
    for number in shown_forms(target()):
        assert not shows(message, number), (number, message)
    assert side in message, message
    if right_stub is not None:
        _stub(monkeypatch, *right_stub)
    capsys.readouterr()
    check(*right)
    assert f"✓ Exercise {exercise_id}" in capsys.readouterr().out


def test_the_target_finder_sees_numbers_not_digits_of_names():
    assert shows("your answer = 0.8 is", "0.8") and not shows("Exercise 3.2: W2", "2")
    assert not shows("0.25 and 20", "2") and shows("k = 2.", "2")


CODING = {"1.4", "2.4", "3.4", "4.5", "5.4"}
