"""The chapters' exercises (nlicl_lib.pages.chapter_exercises): every exercise passes with its
solution's answer and fails with a wrong one; the chapters' exercise cells are short (the import,
the reader's line, one call) and call the function of their own exercise.

Exercises that train are checked with a stubbed ``run_experiment`` that returns a chosen result
and records what it was asked to train, so the check itself (and the reader's answer reaching
the run) is tested in milliseconds; their training is tested where the chapters' claims are
(tests/test_ch1_lsa_gd.py, tests/test_theory_statements.py, ...).
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from types import SimpleNamespace

import jupytext
import pytest

from nlicl_lib.core.book_refs import RESULTS
from nlicl_lib.pages import chapter_exercises as chx
from nlicl_lib.pages.exercises import ExerciseFailed
from nlicl_lib.theory import capacity, closed_forms

EXERCISES = sorted(chx.CHECKERS)  # the exercises' numbers, "1.1" ...


def checker_name(exercise_id: str) -> str:
    return chx.CHECKERS[exercise_id].__name__


class StubRun:
    """``run_experiment`` that trains nothing: returns ``test_loss`` (and the theory's loss) and
    keeps the configs it was called with."""

    def __init__(self, test_loss: float, theory_loss: float = 1.0, null_loss: float = 1.0):
        self.result = SimpleNamespace(test_loss=test_loss, normalised_test_loss=test_loss / null_loss,
                                      theory=SimpleNamespace(theory_loss=theory_loss))
        self.calls = []

    def __call__(self, task, model, train, progress=None, theory=True, eval_batch_size=20000):
        self.calls.append((task, model, train))
        self.eval_batch_size = eval_batch_size
        return self.result


def _stub(monkeypatch, test_loss, theory_loss=1.0, null_loss=1.0) -> StubRun:
    stub = StubRun(test_loss, theory_loss, null_loss)
    monkeypatch.setattr(chx, "run_experiment", stub)
    return stub


# --- every exercise waits for its answer ---------------------------------------------------------

@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_an_unset_answer_says_what_to_set_and_runs_nothing(exercise_id, capsys, monkeypatch):
    stub = _stub(monkeypatch, 1.0)
    function = chx.CHECKERS[exercise_id]
    answers = [p for p in inspect.signature(function).parameters.values()
               if p.default is inspect.Parameter.empty]
    function(*[None] * len(answers))
    out = capsys.readouterr().out
    assert f"Exercise {exercise_id}: set `{answers[0].name}`" in out and not stub.calls


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_each_docstring_states_the_equation_and_the_result_it_checks(exercise_id):
    doc = chx.CHECKERS[exercise_id].__doc__
    assert doc.startswith(f"Exercise {exercise_id}")
    assert "$" in doc, "the chapter's equation, in the page's symbols"
    assert any(f"({label})" in doc for label in RESULTS), "the result it checks, by label"


# --- chapter 1 ---------------------------------------------------------------------------------

def test_exercise_1_1_passes_at_the_optimum_and_fails_above_it(monkeypatch):
    stub = _stub(monkeypatch, test_loss=1.01, theory_loss=1.0)
    chx.check_learning_rate(0.02)
    assert stub.calls[0][2].learning_rate == 0.02 and stub.calls[0][2].steps == 300
    _stub(monkeypatch, test_loss=3.0, theory_loss=1.0)  # what 0.001 leaves after 300 steps
    with pytest.raises(ExerciseFailed, match="raise it"):
        chx.check_learning_rate(0.001)


def test_exercise_1_2_checks_the_formula_then_the_trained_layer(monkeypatch):
    d, n, sigma = 5, 20, 1.0
    answer = d * (d + 1 + sigma**2) / (n + d + 1 + sigma**2)  # the solution's formula
    stub = _stub(monkeypatch, test_loss=answer * 1.01)
    chx.check_noisy_optimum_formula(answer, d=d, n=n, sigma=sigma)
    assert stub.calls[0][0].noise_std == sigma
    with pytest.raises(ExerciseFailed, match="your L\\*") as failure:
        chx.check_noisy_optimum_formula(d * (d + 1) / (n + d + 1), d=d, n=n, sigma=sigma)  # the noiseless one
    assert "(d + 1 + " not in failure.value.hint, "the hint does not give the formula away"
    _stub(monkeypatch, test_loss=answer * 1.2)
    with pytest.raises(ExerciseFailed, match="trained test loss"):
        chx.check_noisy_optimum_formula(answer, d=d, n=n, sigma=sigma)


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


# --- chapter 2 ---------------------------------------------------------------------------------

def test_exercise_2_1_checks_the_bound_then_the_trained_stack(monkeypatch):
    stub = _stub(monkeypatch, test_loss=0.9 * 15, null_loss=15)
    chx.check_linear_bound_fraction((15 - 3) / 15)
    assert stub.calls[0][1].depth == 2
    with pytest.raises(ExerciseFailed, match="your bound"):
        chx.check_linear_bound_fraction(0.75)
    _stub(monkeypatch, test_loss=0.7 * 15, null_loss=15)  # below the bound: impossible
    with pytest.raises(ExerciseFailed, match="no model of this class can beat"):
        chx.check_linear_bound_fraction(0.8)


def test_exercise_2_2_any_depth_that_does_not_beat_zero(monkeypatch):
    stub = _stub(monkeypatch, test_loss=1.01)
    chx.check_deep_lsa_cannot_beat_zero(3)
    assert stub.calls[0][1].depth == 3 and stub.calls[0][0].homogeneous
    _stub(monkeypatch, test_loss=0.9)
    with pytest.raises(ExerciseFailed):
        chx.check_deep_lsa_cannot_beat_zero(3)


def test_exercise_2_3_derived_affine_bound(capsys):
    chx.check_affine_bound_fraction((25 - 5) / 25)
    assert "affine 0.750" in capsys.readouterr().out  # the d = 3 value it prints for comparison
    with pytest.raises(ExerciseFailed):
        chx.check_affine_bound_fraction(0.75)  # the d = 3 value, not the d = 5 one
    with pytest.raises(ExerciseFailed):
        chx.check_affine_bound_fraction(1.0)  # the linear bound


# --- chapter 3 ---------------------------------------------------------------------------------

def test_exercise_3_1_kernel_weight():
    chx.check_kernel_linear_weight(2.5)
    with pytest.raises(ExerciseFailed, match="your kernel's loss"):
        chx.check_kernel_linear_weight(0.0)


def test_exercise_3_2_initialisation(monkeypatch):
    stub = _stub(monkeypatch, test_loss=1.005, theory_loss=1.0)
    chx.check_glu_initialisation("large")
    model, train = stub.calls[0][1:]
    assert model.glu_init == "large" and train.seed == 1 and train.steps == 1000
    _stub(monkeypatch, test_loss=1.05, theory_loss=1.0)  # a stall on a plateau
    with pytest.raises(ExerciseFailed, match="glu_init"):
        chx.check_glu_initialisation("small")


def test_exercise_3_3_derived_asymptote(capsys):
    chx.check_one_over_n_constant(18 + 120 / 3 - 4)
    out = capsys.readouterr().out
    assert "crossover n = c / E[y²] = 13.5" in out
    with pytest.raises(ExerciseFailed):
        chx.check_one_over_n_constant(2 * 3)  # the linear task's d(d+1) with d = 2 unknowns


# --- chapter 4 ---------------------------------------------------------------------------------

def test_exercise_4_1_best_single_feature():
    chx.check_one_slot_feature([1, 0, 0, 1, 0, 1])
    with pytest.raises(ExerciseFailed, match="non-zero mean"):
        chx.check_one_slot_feature([1, 0, 0, 0, 0, 0])


def test_exercise_4_2_slots():
    chx.check_slots_for_degree_three(10 + 20)
    with pytest.raises(ExerciseFailed):
        chx.check_slots_for_degree_three(20)


def test_exercise_4_3_block_size(monkeypatch):
    kernel = closed_forms.one_step_kernel_gd_optimum(chx.QUADRATIC_TASK).loss
    stub = _stub(monkeypatch, test_loss=kernel * 1.01)
    chx.check_block_size(6, 6)
    model = stub.calls[0][1]
    assert (model.feature_slots, model.glu_width) == (6, 6)
    _stub(monkeypatch, test_loss=capacity.slot_increments(chx.QUADRATIC_TASK).loss(5))
    with pytest.raises(ExerciseFailed, match="item 3"):
        chx.check_block_size(5, 6)  # the best 5-slot block is strictly above the kernel optimum


def test_exercise_4_4_derived_slot_gain(capsys):
    n = chx.SLOT_TASK.context_length
    kappa_c = (n - 1) / n + (7 + 33 + 15) / n  # E[||phi||² x1² x2²] = 55
    chx.check_fourth_slot_gain(1 / kappa_c)
    assert "slot 4 worth" in capsys.readouterr().out
    with pytest.raises(ExerciseFailed):
        chx.check_fourth_slot_gain(1 / (19 / 20 + 55 / 20))  # n = 20, the page's context length
    with pytest.raises(ExerciseFailed):
        chx.check_fourth_slot_gain(1 / 3.7 * 2)


# --- chapter 5 ---------------------------------------------------------------------------------

def test_exercise_5_1_depth(monkeypatch):
    single = capacity.best_feature_subspace(chx.QUADRATIC_TASK, 3).loss
    stub = _stub(monkeypatch, test_loss=0.85 * single)
    chx.check_depth_beats_one_block(2)
    model = stub.calls[0][1]
    assert model.depth == 2 and model.feature_slots == 3
    assert stub.eval_batch_size == 5000  # a panel's batches for a stack at n = 20 (memory)
    _stub(monkeypatch, test_loss=single)
    with pytest.raises(ExerciseFailed, match="90% of the best 3-slot block"):
        chx.check_depth_beats_one_block(1)


def test_exercise_5_2_wide_or_narrow():
    chx.check_wide_block_against_depth(False)
    with pytest.raises(ExerciseFailed):
        chx.check_wide_block_against_depth(True)


def test_exercise_5_3_degree_doubles():
    chx.check_slot_degree(8)
    assert chx.slot_degrees(3) == [2, 4, 8] and chx.slot_degrees(3, "x") == [2, 2, 2]
    with pytest.raises(ExerciseFailed):
        chx.check_slot_degree(6)  # two more per block
    chx.check_slot_degree(4, depth=2)


# --- the chapters' cells --------------------------------------------------------------------------

CHAPTERS = sorted((Path(__file__).resolve().parents[1] / "book").glob("ch*.md"))
STUDENT_LINE = re.compile(r"^[A-Za-z_][\w, ]* = None\b")
MAX_LINES_BEFORE = 6


def _exercise_cells(page: Path) -> list[tuple[str, str, list[str]]]:
    """(exercise id, its code cell's source, the sources of its solution's code cells)."""
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
        assert len(code) == 1, f"exercise {exercise_id}: {len(code)} code cells, not one"
    return [(i, code[0], solutions) for i, code, solutions in found]


@pytest.mark.parametrize("page", CHAPTERS, ids=lambda p: p.stem)
def test_each_exercise_cell_is_the_import_the_readers_line_and_one_call(page):
    found = _exercise_cells(page)
    assert found, "every chapter has exercises"
    for exercise_id, code, solutions in found:
        name = checker_name(exercise_id)
        lines = code.splitlines()
        student = [k for k, line in enumerate(lines) if STUDENT_LINE.match(line)]
        assert student, f"{exercise_id}: no line `answer = None  # ...` for the reader"
        assert student[0] <= MAX_LINES_BEFORE, f"{exercise_id}: {student[0]} lines before it"
        assert all("#" in lines[k] for k in student), f"{exercise_id}: say what to put"
        chapter = exercise_id.split(".")[0]
        assert f"from nlicl_lib.pages.ch{chapter} import {name}" in code, "from its page module"
        calls = re.findall(r"\b(" + "|".join(map(checker_name, EXERCISES)) + r")\(", code)
        assert calls == [name], f"{exercise_id}: exactly one call, of its own exercise"
        assert "def " not in code, "the checking code is in the library"
        # the solution calls the same function, with the answer
        assert sum(s.count(f"{name}(") for s in solutions) == 1, exercise_id
    assert len({i for i, _, _ in found}) == len(found)


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_every_library_exercise_is_on_its_chapter(exercise_id):
    chapter = exercise_id.split(".")[0]
    [page] = [p for p in CHAPTERS if p.stem.startswith(f"ch{chapter}_")]
    assert f"import {checker_name(exercise_id)}\n" in page.read_text(encoding="utf-8")
