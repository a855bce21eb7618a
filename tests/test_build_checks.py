"""The book build's output check (tools/build_book.py): warnings and tracebacks in the executed
notebooks fail the build.

Unit tests on small notebooks written to a temporary folder: no book build, no browser; they
run with ``make test``. The browser test (tests/test_browser.py) runs the same scanner on the
built book.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_build_book():
    spec = importlib.util.spec_from_file_location("build_book", ROOT / "tools" / "build_book.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build_book = load_build_book()

RUNTIME_WARNING = ("/repo/nlicl_lib/theory.py:88: RuntimeWarning: divide by zero encountered "
                   "in divide\n  ratio = a / b\n")


def stream(text: str, name: str = "stderr") -> dict:
    return nbformat.v4.new_output("stream", name=name, text=text)


def notebook(*cells: list[dict], tags: dict[int, list[str]] | None = None) -> dict:
    """A notebook whose i-th code cell has the outputs ``cells[i]`` (and ``tags[i]``)."""
    code_cells = []
    for index, outputs in enumerate(cells):
        cell = nbformat.v4.new_code_cell("pass", outputs=outputs)
        cell.metadata["tags"] = (tags or {}).get(index, [])
        code_cells.append(cell)
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A page"), *code_cells])


def write(folder: Path, name: str, nb: dict) -> Path:
    path = folder / f"{name}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.from_dict(nb), path)
    return path


@pytest.mark.parametrize("category", ["RuntimeWarning", "UserWarning", "DeprecationWarning",
                                      "FutureWarning", "Warning"])
def test_python_warnings_on_stderr_are_found(category: str) -> None:
    nb = notebook([stream(f"/x/y.py:3: {category}: something changed\n  warnings.warn(msg)\n")])
    problems = build_book.output_problems(nb, "book/ch1")
    assert problems == [build_book.OutputProblem("book/ch1", 1, f"/x/y.py:3: {category}: "
                                                                "something changed")]


def test_cell_index_and_line_of_each_problem() -> None:
    nb = notebook(
        [stream("loss 0.12\n", name="stdout")],
        [stream("progress 50%\r"), stream(RUNTIME_WARNING)],
    )
    (problem,) = build_book.output_problems(nb, "book/ch2")
    assert (problem.page, problem.cell) == ("book/ch2", 2)  # cell 0 is the markdown cell
    assert problem.line.endswith("RuntimeWarning: divide by zero encountered in divide")
    assert str(problem) == f"book/ch2, cell 2: {problem.line}"


def test_tracebacks_and_errors_are_found() -> None:
    error = nbformat.v4.new_output("error", ename="ValueError", evalue="bad shape",
                                   traceback=["Traceback ...", "ValueError: bad shape"])
    nb = notebook(
        [stream("Traceback (most recent call last):\n  File ...\n", name="stdout")],
        [error],
        [error],
        tags={2: ["raises-exception"]},
    )
    problems = build_book.output_problems(nb, "p")
    assert [(p.cell, p.line) for p in problems] == [
        (1, "Traceback (most recent call last):"),
        (2, "ValueError: bad shape"),
    ]  # cell 3's error is expected: it is tagged raises-exception


def test_clean_outputs_pass() -> None:
    nb = notebook(
        [stream("Warning: this is stdout, printed on purpose\n", name="stdout")],
        [stream("100%|##########| 200/200 [00:01<00:00]\n")],  # a progress bar on stderr
        [nbformat.v4.new_output("display_data", data={"text/plain": "UserWarning: shown"})],
        [stream("WarningLevel is a name, not a warning: no colon after it\n")],
    )
    assert build_book.output_problems(nb, "p") == []


def test_scan_reads_every_notebook_below_the_folder(tmp_path: Path) -> None:
    write(tmp_path, "book/ch1", notebook([stream(RUNTIME_WARNING)]))
    write(tmp_path, "book/ch2", notebook([stream("fine\n", name="stdout")]))
    write(tmp_path, "book/.ipynb_checkpoints/ch1-checkpoint", notebook([stream(RUNTIME_WARNING)]))
    write(tmp_path, "index", notebook([], [stream("x.py:1: FutureWarning: soon\n")]))
    problems = build_book.scan_executed_notebooks(tmp_path)
    assert [(p.page, p.cell) for p in problems] == [("book/ch1", 1), ("index", 2)]


def test_check_outputs_prints_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    executed = build_book.executed_notebooks_dir(tmp_path)
    write(executed, "book/ch1", notebook([stream("ok\n", name="stdout")]))
    assert build_book.check_outputs(tmp_path) == 0

    write(executed, "book/ch3", notebook([], [stream(RUNTIME_WARNING)]))
    assert build_book.check_outputs(tmp_path) == 1
    err = capsys.readouterr().err
    assert "book/ch3, cell 2: /repo/nlicl_lib/theory.py:88: RuntimeWarning: divide by zero" in err
    assert "1 warning(s) or traceback(s)" in err


def test_check_outputs_fails_without_executed_notebooks(tmp_path: Path) -> None:
    assert build_book.check_outputs(tmp_path) == 1


def test_build_fails_on_warnings_after_a_successful_jupyter_book_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build_book, "ROOT", tmp_path)
    monkeypatch.setattr(build_book.check_refs, "main", lambda: 0)
    builds = []
    monkeypatch.setattr(build_book, "build", lambda *builder: builds.append(builder) or 0)
    executed = build_book.executed_notebooks_dir(tmp_path)
    write(executed, "book/ch1", notebook([stream("ok\n", name="stdout")]))
    assert build_book.main([]) == 0
    # the HTML, then the reader notebooks by the jupyter builder over the same doctrees
    assert builds == [(), ("--builder", "custom", "--custom-builder", "jupyter")]

    write(executed, "book/ch1", notebook([stream(RUNTIME_WARNING)]))
    assert build_book.main([]) == 1
    assert build_book.main(["--check-outputs"]) == 1
