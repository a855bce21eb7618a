"""Sphinx extension of the nlicl book: the build's part in running the chapters live.

Loaded from ``_config.yml`` (``sphinx.local_extensions``), after ``nlicl_sphinx``.

**Notebooks outside the build.** The site offers each executed page for download
(``_sources/<page>.ipynb``), and Colab opens a copy of it. Both are read where MyST is not
rendered (a plain JupyterLab, Colab, GitHub), so after the build each download is rewritten by
:func:`downloadable_notebook`: its text in plain Markdown with the values, theorem numbers,
citations and exercise headings the page shows (``tools/nlicl_plain.py``), and each figure as
plotly's own output beside the build's HTML, with plotly.js once for viewers that run the
HTML's scripts. Colab opens only ``.ipynb`` files (from GitHub), and a Colab runtime does not
have ``nlicl_lib``: every download gets a Colab copy, ``_colab/<page>.ipynb``, with outputs and
saved widget state removed and a first cell that, on Colab only, installs the library at the
commit the site was built from (``pip install --no-deps git+<repository>@<commit>``, see
:func:`build_commit`; Colab already has torch, numpy, plotly, ipywidgets and tqdm, so nothing
else is installed and no restart is needed). Elsewhere that cell does nothing. The Colab launch
button of each chapter is pointed at that copy on the branch the site is published to
(``nlicl_colab_branch``, default ``gh-pages``, where ``.github/workflows/publish.yml`` deploys
the site), instead of the ``.md`` source that Colab cannot open.

**Run times.** The directive ``{nlicl-run-times}`` (used by the instructors page) becomes, at
the end of the build, two tables computed from the execution cache (``tools/nlicl_exec.py``): each chapter's execution
time in this build (or the last one that executed it) with the device, and the chapters'
exercises with the time their solution cells took (recorded by ``nlicl_lib.book.exercises``) and
whether they fit a one-hour lab. Pages holding the directive are re-read in every build, so
their numbers never go stale; nothing is typed in by hand. ``{nlicl-run-times} goals`` and
``{nlicl-run-times} reading`` are computed from the chapters' sources instead: every chapter's
goals and its reading time (``tools/nlicl_instructors.py``).
"""

from __future__ import annotations

import copy
import math
import os
import platform
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.errors import ConfigError

sys.path.insert(0, str(Path(__file__).resolve().parent))
import binder_pages  # noqa: E402 (tools/ is not a package)
import nlicl_exec  # noqa: E402
import nlicl_instructors  # noqa: E402
import nlicl_plain  # noqa: E402

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


def install_source(repository_url: str, ref: str) -> str:
    """The first cell of a Colab notebook: install nlicl_lib at ``ref`` (the commit the site was
    built from), on Colab only."""
    target = f"git+{repository_url.rstrip('/')}.git@{ref}"
    return (
        "# On Colab: install the book's library, nlicl_lib, at the commit this notebook was built\n"
        "# from (Colab already has torch, numpy, plotly, ipywidgets and tqdm). Anywhere else this\n"
        "# cell does nothing: follow the set-up in the repository's README.\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        "    import subprocess\n"
        "\n"
        "    subprocess.run([sys.executable, \"-m\", \"pip\", \"install\", \"--quiet\", "
        f"\"--no-deps\",\n                    \"{target}\"], check=True)\n"
    )


def build_commit(root: Path) -> str | None:
    """The commit the site is built from: ``NLICL_COMMIT`` (the publishing workflow sets it),
    else ``git rev-parse HEAD`` in ``root``; None outside a git checkout."""
    commit = os.environ.get("NLICL_COMMIT", "").strip()
    if commit:
        return commit
    try:
        found = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                               text=True, check=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return found if re.fullmatch(r"[0-9a-f]{40}", found) else None


def colab_notebook(notebook: Any, repository_url: str, ref: str) -> Any:
    """A copy of ``notebook`` (the downloadable one, its text already plain Markdown) for
    Colab: no outputs, no saved widget state, the install cell first."""
    import nbformat

    result = copy.deepcopy(notebook)
    for cell in result.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
            cell.metadata.pop("execution", None)
    result.metadata.pop("widgets", None)
    install = nbformat.v4.new_code_cell(install_source(repository_url, ref))
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


# --- the notebooks offered outside the build: download and Colab copy ------------------------

PLOTLY_MIMETYPE = "application/vnd.plotly.v1+json"
PLOTLY_LOADER_TAG = "nlicl-plotly-js"


def plotly_loader_output(plotly_js: str) -> Any:
    """An output that defines ``window.Plotly`` where a notebook's HTML outputs run scripts
    (nbconvert's HTML, a trusted notebook): the figures' own scripts then draw. Invisible."""
    import nbformat

    return nbformat.v4.new_output(
        "display_data",
        # ``define``, ``module`` and ``exports`` hidden: where require.js is on the page (the
        # classic notebook, nbconvert's template online), plotly.js would register as an AMD
        # module instead of setting window.Plotly
        data={"text/html": ('<script type="text/javascript">(function () {\n'
                            "var define, module, exports;\n"
                            f"{plotly_js}\n}}).call(window);</script>"),
              "text/plain": ""},
        metadata={"tags": [PLOTLY_LOADER_TAG]})


def downloadable_notebook(notebook: Any, resolver: nlicl_plain.Resolver,
                          plotly_js: str | None) -> Any:
    """The executed page as a reader downloads it (see the module docstring): its text plain
    Markdown with the values, theorem numbers and citations the page shows; each figure both
    as plotly's own output (``application/vnd.plotly.v1+json``, which JupyterLab, VS Code and
    Colab draw) and as the build's HTML, with plotly.js once before the first figure for
    viewers that run the HTML's scripts (nbconvert). Idempotent: a notebook already converted
    (``metadata.nlicl.plain``) is returned as it is."""
    result = copy.deepcopy(notebook)
    if result.metadata.get("nlicl", {}).get("plain"):
        return result
    loader_done = plotly_js is None
    for cell in result.cells:
        if cell.cell_type == "markdown":
            expressions = cell.metadata.pop("user_expressions", [])
            cell.source = nlicl_plain.plain_markdown(cell.source, expressions, resolver)
            continue
        if cell.cell_type != "code":
            continue
        outputs = []
        for output in cell.get("outputs", []):
            figure = output.get("metadata", {}).get("nlicl", {}).pop("figure", None)
            if figure is not None:
                output["data"][PLOTLY_MIMETYPE] = figure
                if not loader_done:
                    outputs.append(plotly_loader_output(plotly_js))
                    loader_done = True
            outputs.append(output)
        cell.outputs = outputs
    # a gate's closing fence alone in its cell leaves nothing to read
    result.cells = [c for c in result.cells if c.cell_type != "markdown" or c.source.strip()]
    result.metadata.setdefault("nlicl", {})["plain"] = True
    return result


def resolver_for(app: Any, docname: str) -> nlicl_plain.Resolver:
    from nlicl_lib.core.book_refs import RESULTS

    env = app.env
    bib = "\n".join((Path(app.srcdir) / f).read_text(encoding="utf-8")
                    for f in getattr(app.config, "bibtex_bibfiles", []))
    std_labels = env.domaindata.get("std", {}).get("labels", {})
    labels = {label: title for label, (_, _, title) in std_labels.items() if title}
    # a figure's label stands for its number, as {numref} writes it on the site ("Fig. 1.2")
    for label, (target_doc, label_id, _) in std_labels.items():
        number = env.toc_fignumbers.get(target_doc, {}).get("figure", {}).get(label_id)
        if number:
            labels[label] = "Fig. " + ".".join(str(n) for n in number)
    return nlicl_plain.Resolver(
        results=dict(RESULTS), citations=nlicl_plain.citations(bib),
        titles={d: env.titles[d].astext() for d in env.found_docs if d in env.titles},
        labels=labels, exercises=binder_pages.exercise_numbers(Path(app.srcdir) / "book"),
        docname=docname)


def write_notebooks(app: Any, exception: Exception | None) -> None:
    """After the build: each downloadable ``_sources/<page>.ipynb`` made readable outside the
    build (:func:`downloadable_notebook`), then its Colab copy (:func:`colab_notebook`)
    installing the library at the commit the site was built from."""
    if exception is not None or app.builder.format != "html":
        return
    import nbformat

    outdir = Path(app.outdir)
    sources = outdir / "_sources"
    static = [Path(app.confdir) / p for p in app.config.html_static_path]
    bundle = next((d / "vendor" / "plotly-cartesian.min.js" for d in static
                   if (d / "vendor" / "plotly-cartesian.min.js").exists()), None)
    plotly_js = bundle.read_text(encoding="utf-8") if bundle else None
    repository_url, branch = _repository(app)
    ref = build_commit(Path(app.srcdir)) or branch
    problems = []
    for path in sorted(sources.rglob("*.ipynb")):
        docname = path.relative_to(sources).with_suffix("").as_posix()
        resolver = resolver_for(app, docname)
        notebook = downloadable_notebook(nbformat.read(path, as_version=4), resolver, plotly_js)
        problems += [f"{docname}: {problem}" for problem in resolver.problems]
        text = nbformat.writes(notebook)
        if path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        if not repository_url:
            continue
        target = outdir / COLAB_DIR / path.relative_to(sources)
        target.parent.mkdir(parents=True, exist_ok=True)
        colab = nbformat.writes(colab_notebook(notebook, repository_url, ref))
        if not target.exists() or target.read_text(encoding="utf-8") != colab:
            target.write_text(colab, encoding="utf-8")
    if problems:
        from sphinx.errors import ExtensionError

        raise ExtensionError("the downloadable notebooks' text could not be made plain "
                             "Markdown:\n" + "\n".join(problems))


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
    """``{nlicl-run-times} chapters`` or ``{nlicl-run-times} exercises`` (from the execution
    cache), ``{nlicl-run-times} goals`` or ``{nlicl-run-times} reading`` (from the chapters'
    sources, see ``tools/nlicl_instructors.py``)."""

    has_content = False
    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        which = self.arguments[0]
        if which not in ("chapters", "exercises", *nlicl_instructors.SOURCE_TABLES):
            raise self.error(f"nlicl-run-times: 'chapters', 'exercises', 'goals' or 'reading', "
                             f"not {which!r}")
        env = self.state.document.settings.env
        if not hasattr(env, "nlicl_run_time_docs"):
            env.nlicl_run_time_docs = set()
        env.nlicl_run_time_docs.add(env.docname)
        if which in nlicl_instructors.SOURCE_TABLES:
            return nlicl_instructors.source_nodes(self, which)
        return [run_times_node(which=which)]


@dataclass
class PageRun:
    docname: str
    seconds: float
    exercises: list[dict]


def executed_pages(cache_dir: Path, docnames: list[str]) -> dict[str, PageRun]:
    """docname -> its last execution (seconds) and the exercises its outputs report, for the
    pages of ``docnames`` that have an entry in the execution cache (``tools/nlicl_exec.py``)."""
    pages = {}
    for docname in docnames:
        entry = nlicl_exec.load_entry(Path(cache_dir), docname)
        if entry is None or entry.get("runtime") is None:
            continue
        found: dict[str, dict] = {}
        for cell in entry["cells"]:
            for output in (cell or {}).get("outputs", []):
                info = output.get("metadata", {}).get(EXERCISE_KEY)
                if info:  # an exercise's last check has its whole cell's time
                    found[info["id"]] = dict(info)
        pages[docname] = PageRun(docname, float(entry["runtime"]), list(found.values()))
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
    cache_dir = Path(app.outdir).parent / nlicl_exec.CACHE_DIR_NAME
    pages = executed_pages(cache_dir, sorted(d for d in app.env.found_docs if d != docname))
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
    app.connect("build-finished", write_notebooks, priority=900)
    app.connect("doctree-resolved", fill_run_times)
    app.connect("env-get-outdated", always_reread)
    app.connect("env-purge-doc", purge)
    app.connect("env-merge-info", merge)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
