"""The inline execution's cache (tools/nlicl_exec.py). Unit tests: no book build."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from notebook_envs import load_tool

ROOT = Path(__file__).resolve().parents[1]


load = load_tool  # tools/<name>.py as a module (tests/notebook_envs.py)


nlicl_exec = load("nlicl_exec")


def test_the_cache_key_follows_code_quoted_expressions_and_inputs_not_prose():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("Text {eval}`prose.a`."),
                nbformat.v4.new_code_cell("prose.a = 1")]
    key = nlicl_exec.page_key(nb, nlicl_exec.eval_expressions(nb), "digest")
    assert nlicl_exec.eval_expressions(nb) == [(0, "prose.a")]

    def changed(edit, digest="digest"):
        copy = nbformat.reads(nbformat.writes(nb), as_version=4)
        edit(copy)
        return nlicl_exec.page_key(copy, nlicl_exec.eval_expressions(copy), digest) != key

    assert not changed(lambda c: setattr(c.cells[0], "source", "Other text {eval}`prose.a`."))
    assert changed(lambda c: setattr(c.cells[0], "source", "Text {eval}`prose.a + 1`."))
    assert changed(lambda c: setattr(c.cells[1], "source", "prose.a = 2"))
    assert changed(lambda c: None, digest="another library")


def test_the_inputs_digest_covers_the_library_and_the_pins(tmp_path):
    (tmp_path / "nlicl_lib").mkdir()
    (tmp_path / "nlicl_lib" / "a.py").write_text("x = 1\n")
    (tmp_path / "requirements.txt").write_text("torch==1\n")
    first = nlicl_exec.inputs_digest(tmp_path)
    (tmp_path / "nlicl_lib" / "data.json").write_text("{}")
    second = nlicl_exec.inputs_digest(tmp_path)
    (tmp_path / "requirements.txt").write_text("torch==2\n")
    third = nlicl_exec.inputs_digest(tmp_path)
    assert len({first, second, third}) == 3
    # the build's own extensions (nlicl_lib/sphinxext) change no page's outputs
    (tmp_path / "nlicl_lib" / "sphinxext").mkdir()
    (tmp_path / "nlicl_lib" / "sphinxext" / "notebooks.py").write_text("y = 2\n")
    assert nlicl_exec.inputs_digest(tmp_path) == third


@pytest.mark.parametrize(("outputs", "wanted"), [
    ([{"output_type": "execute_result", "data": {"text/plain": "1"}, "metadata": {}}],
     {"status": "ok", "data": {"text/plain": "1"}, "metadata": {}}),
    ([{"output_type": "error", "ename": "E", "evalue": "v", "traceback": []}],
     {"status": "error", "ename": "E", "evalue": "v", "traceback": []}),
])
def test_user_expressions_in_jupyterlab_myst_s_format(outputs, wanted):
    assert nlicl_exec.user_expression("x", outputs) == {"expression": "x", "result": wanted}


def test_cell_times_come_from_nbclient_s_timestamps_and_the_slowest_are_listed(tmp_path):
    code = nbformat.v4.new_code_cell("train()")
    code.metadata["execution"] = {"iopub.execute_input": "2026-12-04T10:00:00.500000Z",
                                  "shell.execute_reply": "2026-12-04T10:01:10.000000Z"}
    assert nlicl_exec.cell_seconds(code) == pytest.approx(69.5)
    assert nlicl_exec.cell_seconds(nbformat.v4.new_markdown_cell("x")) is None
    assert nlicl_exec.cell_seconds(nbformat.v4.new_code_cell("x")) is None  # never timed
    for docname, seconds in [("book/ch1", [None, 69.5, 2.0]), ("book/ch2", [3.0])]:
        entry = {"format": nlicl_exec.CACHE_FORMAT, "docname": docname, "cell_seconds": seconds,
                 "sources": ["", "train()\nmore", "plot()"][:len(seconds)] if docname == "book/ch1"
                 else ["fit()"]}
        nlicl_exec.cache_file(tmp_path, docname).write_text(json.dumps(entry))
    assert nlicl_exec.slowest_cells(tmp_path, count=2) == [
        (69.5, "book/ch1", 1, "train()"), (3.0, "book/ch2", 0, "fit()")]
