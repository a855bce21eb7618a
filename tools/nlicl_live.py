"""Sphinx extension of the nlicl book: the build's part in running the chapters live.

Loaded from ``_config.yml`` (``sphinx.local_extensions``), after ``nlicl_sphinx``.

**Colab notebooks.** Colab opens only ``.ipynb`` files (from GitHub), and a Colab runtime does
not have ``nlicl_lib``. After the build, every executed notebook the site offers for download
(``_sources/<page>.ipynb``) gets a Colab copy, ``_colab/<page>.ipynb``: outputs and saved widget
state removed, and a first cell that, on Colab only, installs the library from the book's
repository (``pip install --no-deps git+<repository>@<branch>``; Colab already has torch,
numpy, plotly, ipywidgets and tqdm, so nothing else is installed and no restart is needed).
Elsewhere that cell does nothing. The Colab launch button of each chapter is pointed at that
copy on the branch the site is published to (``nlicl_colab_branch``, default ``gh-pages``:
publish with ``ghp-import -n -p -f _build/html``), instead of the ``.md`` source that Colab
cannot open.

**Run times.** The directive ``{nlicl-run-times}`` (used by the instructors page) becomes, at
the end of the build, two tables computed from the execution cache: each chapter's execution
time in this build (or the last one that executed it) with the device, and the chapters'
exercises with the time their solution cells took (recorded by ``nlicl_lib.book.exercises``) and
whether they fit a one-hour lab. Pages holding the directive are re-read in every build, so
their numbers never go stale; nothing is typed in by hand.
"""

from __future__ import annotations

import copy
import math
import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.errors import ConfigError

COLAB_DIR = "_colab"
EXERCISE_KEY = "nlicl_exercise"  # nlicl_lib.book.exercises.METADATA_KEY (not imported: no torch here)

# The one-hour lab (see the instructors page): each exercise takes this long to read, edit and
# discuss, plus its measured run time for this many runs; the lab keeps some minutes to open
# Binder or Colab and start the first chapter.
LAB_MINUTES = 60
SETUP_MINUTES = 5
MINUTES_PER_EXERCISE = 10
RUNS_PER_EXERCISE = 3


# --- Colab ---------------------------------------------------------------------------------


def install_source(repository_url: str, branch: str) -> str:
    """The first cell of a Colab notebook: install nlicl_lib, on Colab only."""
    target = f"git+{repository_url.rstrip('/')}.git@{branch}"
    return (
        "# On Colab: install the book's library, nlicl_lib (Colab already has torch, numpy,\n"
        "# plotly, ipywidgets and tqdm). Anywhere else this cell does nothing: follow the\n"
        "# set-up in the repository's README.\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        "    import subprocess\n"
        "\n"
        "    subprocess.run([sys.executable, \"-m\", \"pip\", \"install\", \"--quiet\", "
        f"\"--no-deps\",\n                    \"{target}\"], check=True)\n"
    )


def colab_notebook(notebook: Any, repository_url: str, branch: str) -> Any:
    """A copy of ``notebook`` for Colab: no outputs, no saved widget state, install cell first."""
    import nbformat

    result = copy.deepcopy(notebook)
    for cell in result.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
            cell.metadata.pop("execution", None)
    result.metadata.pop("widgets", None)
    install = nbformat.v4.new_code_cell(install_source(repository_url, branch))
    install.metadata["tags"] = ["colab-install"]
    result.cells.insert(0, install)
    result.metadata.setdefault("colab", {})["provenance"] = []
    # nbformat 4.5 cell ids, stable from one build to the next
    result.nbformat_minor = max(result.get("nbformat_minor", 0), 5)
    install["id"] = "colab-install"
    for index, cell in enumerate(result.cells[1:]):
        cell.setdefault("id", f"cell-{index}")
    return result


GITHUB_REPOSITORY = re.compile(r"^https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
"""What ``repository.url`` of ``_config.yml`` must look like: Binder and Colab open GitHub
repositories only, and the Colab install cell installs from ``<url>.git``."""


def _repository(app: Any) -> tuple[str | None, str]:
    options = app.config.html_theme_options or {}
    return options.get("repository_url"), options.get("repository_branch") or "main"


def repository_problems(url: str | None, branch: str | None, readme: str | None = None) -> list[str]:
    """What is wrong with the book's one repository setting (``repository.url`` and
    ``repository.branch`` of ``_config.yml``), which the Binder and Colab buttons, the Colab
    install cell and the README's clone command all use; an empty list when nothing is.

    ``readme`` is the README's text: every ``github.com/<owner>/<repo>`` address in it must be
    the setting's (the README is read by people, so it cannot read the setting itself).
    """
    problems = []
    if not url:
        problems.append("repository.url is not set in _config.yml: the Binder and Colab buttons "
                        "and the Colab install cell need it (https://github.com/<owner>/<repo>)")
    elif not GITHUB_REPOSITORY.match(url.rstrip("/")):
        problems.append(f"repository.url is {url!r} in _config.yml; allowed: "
                        "https://github.com/<owner>/<repo> (Binder and Colab open GitHub only)")
    if not branch:
        problems.append("repository.branch is not set in _config.yml")
    if readme is not None and url and GITHUB_REPOSITORY.match(url.rstrip("/")):
        wanted = url.rstrip("/").removeprefix("https://")
        found = set(re.findall(r"github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*",
                               readme))
        others = sorted(f for f in found if f.removesuffix(".git") != wanted)
        if others:
            problems.append(f"README.md names {others}, but repository.url in _config.yml is "
                            f"{url!r}: the README must use the setting's address")
        if not found:
            problems.append(f"README.md does not name the repository {url!r} (its clone command)")
    return problems


def check_repository(app: Any, config: Any) -> None:
    """Fail the build at its start when the repository setting is unusable (see
    :func:`repository_problems`)."""
    options = config.html_theme_options or {}
    readme = Path(app.srcdir) / "README.md"
    problems = repository_problems(options.get("repository_url"),
                                   options.get("repository_branch"),
                                   readme.read_text(encoding="utf-8") if readme.exists() else None)
    if problems:
        raise ConfigError("; ".join(problems))


def write_colab_notebooks(app: Any, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    import nbformat

    repository_url, branch = _repository(app)
    if not repository_url:
        return
    outdir = Path(app.outdir)
    sources = outdir / "_sources"
    for path in sorted(sources.rglob("*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        target = outdir / COLAB_DIR / path.relative_to(sources)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = nbformat.writes(colab_notebook(notebook, repository_url, branch))
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")


def colab_url(colab: str, repository_url: str, branch: str, pagename: str) -> str:
    """Colab's address of the Colab copy of ``pagename`` on ``branch`` of the repository."""
    owner_repo = repository_url.rstrip("/").split("github.com/")[-1]
    return f"{colab.rstrip('/')}/github/{owner_repo}/blob/{branch}/{COLAB_DIR}/{pagename}.ipynb"


def point_colab_button(app: Any, pagename: str, templatename: str, context: dict,
                       doctree: Any) -> None:
    """Make the page's Colab launch button open the Colab copy (see the module doc)."""
    repository_url, _ = _repository(app)
    launch = (app.config.html_theme_options or {}).get("launch_buttons", {})
    if not repository_url or "github.com/" not in repository_url or not launch.get("colab_url"):
        return
    for group in context.get("header_buttons", []):
        if group.get("label") != "launch-buttons":
            continue
        for button in group.get("buttons", []):
            if button.get("text") == "Colab":
                button["url"] = colab_url(launch["colab_url"], repository_url,
                                          app.config.nlicl_colab_branch, pagename)
                button["tooltip"] = "Open this chapter on Colab (its first cell installs nlicl_lib)"


# --- accessible toggles ---------------------------------------------------------------------

HIDDEN_CELL_SUMMARY = '<summary aria-label="Toggle hidden content">'


def name_toggles_by_their_text(app: Any, pagename: str, templatename: str, context: dict,
                               doctree: Any) -> None:
    """myst-nb's toggles of hidden cells (tags ``hide-cell``, ``hide-input``: the exercises'
    solutions among them) label their ``<summary>`` "Toggle hidden content" while showing
    "Show the solution": a screen reader then announces a name that is not the visible text
    (axe-core: label-content-name-mismatch, serious). Without the label, the name is the text."""
    if HIDDEN_CELL_SUMMARY in context.get("body", ""):
        context["body"] = context["body"].replace(HIDDEN_CELL_SUMMARY, "<summary>")


CITATION_LIST = '<div role="list" class="citation-list">'


def unlist_citations(app: Any, pagename: str, templatename: str, context: dict,
                     doctree: Any) -> None:
    """docutils marks the bibliography ``role="list"`` but its entries ``role="doc-biblioentry"``,
    which a list may not contain (axe-core: aria-required-children, critical). Without the role
    the entries keep their own, which is what a bibliography is."""
    if CITATION_LIST in context.get("body", ""):
        context["body"] = context["body"].replace(CITATION_LIST, '<div class="citation-list">')


# --- run times -----------------------------------------------------------------------------


class run_times_node(nodes.General, nodes.Element):  # noqa: N801 (docutils naming)
    """Placeholder replaced by a table when the page is written (``which``: the table)."""


class RunTimes(Directive):
    """``{nlicl-run-times} chapters`` or ``{nlicl-run-times} exercises``."""

    has_content = False
    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        which = self.arguments[0]
        if which not in ("chapters", "exercises"):
            raise self.error(f"nlicl-run-times: 'chapters' or 'exercises', not {which!r}")
        env = self.state.document.settings.env
        if not hasattr(env, "nlicl_run_time_docs"):
            env.nlicl_run_time_docs = set()
        env.nlicl_run_time_docs.add(env.docname)
        return [run_times_node(which=which)]


@dataclass
class PageRun:
    docname: str
    seconds: float
    exercises: list[dict]


def executed_pages(cache_path: str, notebooks: dict[str, Path]) -> dict[str, PageRun]:
    """docname -> its last execution (seconds) and the exercises its outputs report, for the
    pages whose notebook (``notebooks[docname]``, as myst-nb wrote it) is in the cache.

    Matching by content, as jupyter-cache does, finds the record even when two pages share
    one (identical code)."""
    import nbformat
    from jupyter_cache import get_cache

    cache = get_cache(cache_path)
    pages = {}
    for docname, path in notebooks.items():
        if not path.exists():
            continue
        try:
            record = cache.match_cache_notebook(nbformat.read(path, as_version=4))
        except KeyError:
            continue
        seconds = (record.data or {}).get("execution_seconds")
        if seconds is None:
            continue
        found: dict[str, dict] = {}
        for cell in cache.get_cache_bundle(record.pk).nb.cells:
            for output in cell.get("outputs", []):
                info = output.get("metadata", {}).get(EXERCISE_KEY)
                if info:  # an exercise's last check has its whole cell's time
                    found[info["id"]] = dict(info)
        pages[docname] = PageRun(docname, float(seconds), list(found.values()))
    return pages


def build_machine() -> tuple[str, str]:
    """The device a page's kernel gets with ``device="auto"`` here, and that plus the CPU."""
    try:
        from nlicl_lib.core.device import describe_device, resolve_device

        device = describe_device(resolve_device("auto"))
    except Exception:  # noqa: BLE001 - the page still builds without the library
        device = "cpu"
    processor = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                processor = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return device, f"{device}: {processor}, {os.cpu_count()} cores"


def lab_plan(exercises: list[dict]) -> set[str]:
    """Exercise ids of a one-hour lab: the quickest exercise of each chapter in story order,
    then the next quickest ones, while the budget lasts (see the constants above)."""
    def minutes(info: dict) -> float:
        return MINUTES_PER_EXERCISE + RUNS_PER_EXERCISE * (info.get("seconds") or 0.0) / 60

    budget = LAB_MINUTES - SETUP_MINUTES
    chosen: list[str] = []
    by_chapter: dict[str, list[dict]] = {}
    for info in exercises:
        by_chapter.setdefault(info["id"].split(".")[0], []).append(info)
    firsts = [min(group, key=minutes) for _, group in sorted(by_chapter.items())]
    rest = sorted((i for i in exercises if i not in firsts), key=minutes)
    for info in firsts + rest:
        if minutes(info) <= budget:
            chosen.append(info["id"])
            budget -= minutes(info)
    return set(chosen)


def _table(headers: list[str], rows: list[list[nodes.Node | str]], widths: list[int]
           ) -> nodes.table:
    table = nodes.table(classes=["nlicl-run-times"])
    group = nodes.tgroup(cols=len(headers))
    table += group
    for width in widths:
        group += nodes.colspec(colwidth=width)
    head = nodes.thead()
    group += head
    head += nodes.row("", *[nodes.entry("", nodes.paragraph(text=h)) for h in headers])
    body = nodes.tbody()
    group += body
    for cells in rows:
        row = nodes.row()
        for cell in cells:
            paragraph = nodes.paragraph()
            paragraph += cell if isinstance(cell, nodes.Node) else nodes.Text(cell)
            row += nodes.entry("", paragraph)
        body += row
    return table


def _seconds(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "–"
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"


def fill_run_times(app: Any, doctree: Any, docname: str) -> None:
    placeholders = list(doctree.findall(run_times_node))
    if not placeholders:
        return
    config = getattr(app.env, "mystnb_config", None)
    cache_path = getattr(config, "execution_cache_path", None)
    executed = Path(app.outdir).parent / "jupyter_execute"
    notebooks = {d: executed / f"{d}.ipynb" for d in app.env.found_docs if d != docname}
    pages = executed_pages(cache_path, notebooks) if cache_path else {}
    device, machine = build_machine()
    chapters = list(pages)
    order = {d: i for i, d in enumerate(app.env.toctree_includes.get(app.config.root_doc, []))}
    chapters.sort(key=lambda d: (order.get(d, len(order)), d))

    def link(target: str, text: str | None = None) -> nodes.reference:
        title = text or app.env.titles[target].astext()
        uri = app.builder.get_relative_uri(docname, target)
        return nodes.reference("", title, internal=True, refuri=uri)

    chapter_rows = []
    all_exercises = []
    for target in chapters:
        run = pages[target]
        devices = sorted({e.get("device") for e in run.exercises if e.get("device")})
        all_exercises += [dict(e, docname=target) for e in run.exercises]
        chapter_rows.append([link(target), _seconds(run.seconds), ", ".join(devices) or device,
                             str(len(run.exercises))])
    lab = lab_plan(all_exercises)
    exercise_rows = [
        [info["id"], link(info["docname"], info.get("title") or info["id"]),
         _seconds(info.get("seconds")), "yes" if info["id"] in lab else "–"]
        for info in sorted(all_exercises, key=lambda e: [int(p) for p in e["id"].split(".")
                                                         if p.isdigit()])
    ]
    tables = {
        "chapters": [
            nodes.paragraph(text=(f"Measured in the build of this site, on {machine}: each page "
                                  "executed top to bottom in a fresh kernel.")),
            _table(["Page", "Execution time", "Device", "Exercises"], chapter_rows,
                   [40, 15, 35, 10]),
        ],
        "exercises": [
            _table(["Exercise", "Title", "Solution run time", "One-hour lab"], exercise_rows,
                   [10, 55, 20, 15]),
            nodes.paragraph(text=(
                f"Run times are those of the solution cells in the build, on {machine}. The "
                f"one-hour lab (marked) keeps {SETUP_MINUTES} minutes to open the notebooks and "
                f"gives each exercise {MINUTES_PER_EXERCISE} minutes to read, edit and discuss "
                f"plus {RUNS_PER_EXERCISE} runs; it takes the quickest exercise of each chapter "
                "in order, then the next quickest while the hour lasts.")),
        ],
    }
    for placeholder in placeholders:
        placeholder.replace_self([copy.deepcopy(n) for n in tables[placeholder["which"]]])


def always_reread(app: Any, env: Any, added: set, changed: set, removed: set) -> list[str]:
    """Pages with ``{nlicl-run-times}``: their tables come from other pages' executions."""
    return sorted(getattr(env, "nlicl_run_time_docs", set()) - added - changed - removed)


def purge(app: Any, env: Any, docname: str) -> None:
    getattr(env, "nlicl_run_time_docs", set()).discard(docname)


def merge(app: Any, env: Any, docnames: set, other: Any) -> None:
    if not hasattr(env, "nlicl_run_time_docs"):
        env.nlicl_run_time_docs = set()
    env.nlicl_run_time_docs |= getattr(other, "nlicl_run_time_docs", set())


def setup(app: Any) -> dict[str, Any]:
    app.add_config_value("nlicl_colab_branch", "gh-pages", "html")
    app.connect("config-inited", check_repository)
    app.add_node(run_times_node)
    app.add_directive("nlicl-run-times", RunTimes)
    app.connect("html-page-context", point_colab_button, priority=550)
    app.connect("html-page-context", name_toggles_by_their_text)
    app.connect("html-page-context", unlist_citations)
    app.connect("build-finished", write_colab_notebooks, priority=900)
    app.connect("doctree-resolved", fill_run_times)
    app.connect("env-get-outdated", always_reread)
    app.connect("env-purge-doc", purge)
    app.connect("env-merge-info", merge)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
