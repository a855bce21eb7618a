"""The notebooks the book offers outside its build (tools/nlicl_plain.py, tools/nlicl_live.py)
and the inline execution's cache (tools/nlicl_exec.py). Unit tests: no book build."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from notebook_envs import load_tool

ROOT = Path(__file__).resolve().parents[1]


load = load_tool  # tools/<name>.py as a module (tests/notebook_envs.py)


plain = load("nlicl_plain")
nlicl_exec = load("nlicl_exec")
live = load("nlicl_live")


def resolver(**overrides):
    values = dict(
        results={"thm-linear-optimum": ("Theorem", 5, "The best one-step preconditioner")},
        citations={"ahn2023": ("Ahn et al.", "2023"), "zhang2024": ("Zhang et al.", "2024")},
        titles={"book/instructors": "For instructors"},
        labels={"sec-depth": "Depth"},
        exercises={"ex-1-1": "1.1"},
        docname="book/ch1",
    )
    values.update(overrides)
    return plain.Resolver(**values)


def ok(text):
    return {"expression": "x", "result": {"status": "ok", "data": {"text/plain": text}}}


def test_roles_become_what_the_site_shows():
    source = ("Loss {eval}`f\"{prose.r:.4f}\"` on {eval}`prose.device` "
              "({prf:ref}`thm-linear-optimum`, {prf:ref}`the optimum <thm-linear-optimum>`), "
              "as {cite:t}`ahn2023` show {cite:p}`ahn2023,zhang2024`; see {doc}`instructors`, "
              "{doc}`the plan <instructors>`, {ref}`sec-depth` and {math}`x^2`.")
    r = resolver()
    text = plain.plain_markdown(source, [ok("'0.9995'"), ok("'the CPU'")], r)
    assert text == ("Loss 0.9995 on the CPU (Theorem 5, the optimum), as Ahn et al. [2023] show "
                    "[Ahn et al., 2023; Zhang et al., 2024]; see For instructors, the plan, "
                    "Depth and $x^2$.")
    assert r.problems == [] and plain.leftovers(text) == []


def test_numbers_keep_their_text_and_errors_are_visible():
    assert plain.expression_text({"status": "ok", "data": {"text/plain": "12"}}) == "12"
    assert plain.expression_text({"status": "ok", "data": {"text/plain": repr("it's")}}) == "it's"
    assert plain.expression_text({"status": "ok", "data": {"text/plain": "['a']"}}) == "['a']"
    assert plain.expression_text({"status": "error", "ename": "NameError",
                                  "evalue": "x"}) == "<NameError: x>"


def test_exercises_admonitions_targets_and_comments():
    exercise = "\n".join(["(sec-ex)=", "% a comment",
                          "````{exercise-start} A {eval}`prose.n` step rate", ":label: ex-1-1",
                          "````", "", "Set it to {prf:ref}`thm-linear-optimum`.", ""])
    r = resolver()
    assert plain.plain_markdown(exercise, [ok("3")], r).split("\n") == [
        "> **Exercise 1.1** (A 3 step rate)", ">", "> Set it to Theorem 5."]
    assert plain.plain_markdown("````{exercise-end}\n````", [], r) == ""
    solution = "````{solution-start} ex-1-1\n:class: dropdown\n````\n\nLike this."
    assert plain.plain_markdown(solution, [], r).split("\n") == [
        "> **Solution to Exercise 1.1**", ">", "> Like this."]
    other = "\n".join([":::{tip} Why", "It is {prf:ref}`thm-linear-optimum`.", ":::",
                        "```python", "print('{prf:ref}` stays code')", "```"])
    assert plain.plain_markdown(other, [], r).split("\n") == [
        "> **Why.**", ">", "> It is Theorem 5.", "```python", "print('{prf:ref}` stays code')", "```"]
    assert r.problems == []


def test_binder_pages_keep_what_jupyterlab_myst_draws_and_link_the_rest():
    r = resolver(for_binder=True)
    exercise = "\n".join(["(sec-ex)=", "````{exercise-start} A {eval}`prose.n` step rate",
                          ":label: ex-1-1", "````", "", "Set it ({cite:t}`ahn2023`).",
                          ":::{note}", "See {doc}`instructors`.", ":::"])
    assert plain.plain_markdown(exercise, [], r).split("\n") == [
        "(sec-ex)=", "::::{admonition} Exercise 1.1 (A {eval}`prose.n` step rate)", ":class: tip",
        "", "Set it (Ahn et al. [2023]).", ":::{note}", "See [For instructors](instructors.md).",
        ":::", "::::"]
    solution = "````{solution-start} ex-1-1\n:class: dropdown\n````\nBy {prf:ref}`thm-linear-optimum`."
    assert plain.plain_markdown(solution, [], r).split("\n") == [
        ":::{admonition} Solution to Exercise 1.1", ":class: dropdown", "",
        "By [Theorem 5](theorems.md#thm-linear-optimum)."] + [":::"]
    theorem = ":::{prf:theorem} The best step\n:label: thm-linear-optimum\nIt is $x$.\n:::"
    assert plain.plain_markdown(theorem, [], r).split("\n") == [
        "(thm-linear-optimum)=", ":::{admonition} Theorem 5 (The best step)", ":class: note", "",
        "It is $x$.", ":::"]  # the book's one counter, not jupyterlab-myst's count per kind
    assert r.problems == []


def test_what_cannot_be_resolved_is_reported_not_hidden():
    r = resolver()
    text = plain.plain_markdown("{prf:ref}`nope` {cite:t}`who` {eval}`a` {foo}`bar`", [], r)
    assert plain.leftovers(text) == ["{eval}`", "{foo}`"]  # kept, visible, reported
    assert any("unknown label 'nope'" in p for p in r.problems)
    assert any("unknown key 'who'" in p for p in r.problems)
    assert any("1 {eval} role(s) but 0 value(s)" in p for p in r.problems)
    assert any("role {foo}" in p for p in r.problems)
    assert plain.leftovers("x {glue:text}`a` y\n```{exercise-start} T\n") == [
        "{glue:text}`", "```{exercise-start}"]
    assert plain.leftovers("a {glue} b") == ["{glue"]


def figure_notebook():
    nb = nbformat.v4.new_notebook()
    md = nbformat.v4.new_markdown_cell("Ratio {eval}`prose.r`.")
    md.metadata["user_expressions"] = [ok("0.5")]
    figure = {"data": [{"type": "scatter", "y": [1, 2]}], "layout": {}}
    outputs = [nbformat.v4.new_output(
        "display_data", data={"text/html": "<div>fig</div>", "text/plain": "<fig>"},
        metadata={"nlicl": {"figure_id": f"f{i}", "traces": 1, "figure": figure}})
        for i in range(2)]
    code = nbformat.v4.new_code_cell("show(fig)", outputs=outputs)
    nb.cells = [md, code, nbformat.v4.new_markdown_cell("````{exercise-end}\n````")]
    return nb


def test_downloads_carry_values_and_figures_that_draw_anywhere():
    original = figure_notebook()
    notebook = live.downloadable_notebook(original, resolver(), "/* plotly.js */")
    assert notebook.cells[0].source == "Ratio 0.5."
    assert "user_expressions" not in notebook.cells[0].metadata
    loader, first, second = notebook.cells[1].outputs
    assert "/* plotly.js */" in loader["data"]["text/html"]  # once, before the first figure
    for output in (first, second):
        assert output["data"][live.PLOTLY_MIMETYPE]["data"][0]["type"] == "scatter"
        assert "figure" not in output["metadata"]["nlicl"]
    assert original.cells[0].source == "Ratio {eval}`prose.r`."  # the original is left alone
    assert len(notebook.cells) == 2  # the empty cell the closing gate left is gone
    assert live.downloadable_notebook(notebook, resolver(), "/* plotly.js */") == notebook
    nbformat.validate(notebook)


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
    assert len({first, second, nlicl_exec.inputs_digest(tmp_path)}) == 3


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


def test_figure_labels_become_the_numbers_the_site_gives_them(tmp_path):
    binder_pages = load("binder_pages")
    book = tmp_path / "book"
    book.mkdir()
    figure = ("```{{code-cell}} ipython3\n---\ntags: [hide-input]\nmystnb:\n  figure:\n"
              "    caption: |\n      What to look for.\n    name: {}\n---\nshow(fig)\n```\n")
    (book / "ch2_b.md").write_text("# B\n\n" + figure.format("fig-ch2-a") + "\ntext\n\n"
                                   + "```{code-cell} ipython3\nx = 1\n```\n" + figure.format("fig-ch2-b"))
    (book / "results.md").write_text("# R\n\n" + figure.format("fig-results"))
    (book / "references.bib").write_text("")
    (tmp_path / "_toc.yml").write_text("root: book/intro\nchapters:\n  - file: book/ch2_b\n"
                                       "  - file: book/results\n")
    numbers = binder_pages.figure_numbers(book)
    assert numbers == {"fig-ch2-a": "Fig. 2.1", "fig-ch2-b": "Fig. 2.2", "fig-results": "Fig. 1"}
    r = resolver(labels=numbers)
    assert plain.plain_markdown("As {numref}`fig-ch2-b` shows.", [], r) == "As Fig. 2.2 shows."
    assert r.problems == []
    # the Binder pages resolve the book's own figure references
    binder = binder_pages.resolver("book/ch2_b", book)
    assert binder.labels == numbers


def test_a_sphinx_glossary_becomes_a_definition_list():
    lines = ["in-context learning", "  Solving a task", "  from examples.", "",
             "linear self-attention", "LSA", "  Attention without softmax."]
    assert plain._glossary_deflist(lines) == [
        "in-context learning", ": Solving a task", "  from examples.", "",
        "linear self-attention, LSA", ": Attention without softmax."]
