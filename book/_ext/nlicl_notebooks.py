"""The reader notebooks: one per page, written by sphinx-tojupyter's ``jupyter`` builder from the
document Sphinx resolved, and served where readers open them.

``make book`` runs the builder after the HTML build, over the same doctrees (nothing is read or
executed again): by then every reference, theorem number, citation and glued value is text. For
each page MyST-NB executed it writes, into the HTML output,

* the download, ``_sources/<page>.ipynb`` (the theme's download button), with the executed
  outputs of ``_build/jupyter_execute/<page>.ipynb``: each figure as plotly's own output beside
  the build's HTML, with plotly.js once before the first figure for viewers that run the HTML's
  scripts (nbconvert);
* the live copy, ``_colab/<page>.ipynb``: no outputs, and a first cell that, on Colab only,
  installs ``nlicl_lib`` at the commit the site was built from. Colab and Binder open this copy
  from the published branch (``nlicl_pages_branch``): Binder builds its environment from
  ``binder/`` on ``repository.branch`` and nbgitpuller pulls the copy in.

The subclasses below fix what sphinx-tojupyter 0.6.0 gets wrong for this book; each fix names the
upstream issue it waits for (the texts are in ``review/issue-31/upstream-issues.md``).
"""

from __future__ import annotations

import base64
import copy
import os
import re
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import nbformat
from docutils import nodes
from jupyter_cache import get_cache
from sphinx.errors import ConfigError
from sphinx.util import logging
from sphinx_tojupyter.builders.jupyter import JupyterBuilder
from sphinx_tojupyter.writers.jupyter import JupyterWriter
from sphinx_tojupyter.writers.translate_all import JupyterTranslator

logger = logging.getLogger(__name__)

COLAB_DIR = "_colab"
PLOTLY_MIMETYPE = "application/vnd.plotly.v1+json"
PLOTLY_BUNDLE = "vendor/plotly-cartesian.min.js"  # under html_static_path


class ReaderTranslator(JupyterTranslator):
    def visit_container(self, node: nodes.Element) -> None:
        # Upstream "MyST-NB code cells: take them from the notebook" (issue 4): a cell tagged
        # remove-input has no source in the doctree, and tags, outputs and a figure's caption are
        # lost. Each cell is taken from MyST-NB's executed notebook, by its index.
        if node.get("nb_element") != "cell_code":
            return super().visit_container(node)
        cell = self.builder.executed.cells[node["cell_index"]]
        shown = [c for c in node.children if c.get("nb_element") == "cell_code_source"]
        if shown and shown[0].astext().strip() != cell.source.strip():
            logger.warning("%s: cell %d differs from the executed notebook's", self.builder.docname,
                           node["cell_index"], location=node)
        tags = cell.metadata.get("tags", [])
        self.add_markdown_cell()
        self.output.cells.append(nbformat.v4.new_code_cell(
            cell.source, metadata={"tags": tags} if tags else {},
            execution_count=cell.get("execution_count"), outputs=self.builder.outputs(cell)))
        figure = node.next_node(nodes.figure)  # MyST-NB's figure options: its number and caption
        if figure is not None:
            self.anchors(figure["ids"])
            self.markdown_lines.append(f"**{self.figure_label(figure)}** ")
            figure.next_node(nodes.caption).walkabout(self)
            self.add_markdown_cell()
        raise nodes.SkipNode

    def visit_figure(self, node: nodes.Element) -> None:
        # The book's diagrams (tools/diagrams.py) are figures of two SVGs, the dark one in the
        # legend for the site's dark theme, with the paths the source gives. A notebook has one
        # theme the book cannot see and travels as one file: the light drawing, embedded as the
        # cell's attachment, then its number and caption as the site shows them.
        if "nlicl-diagram" not in node["classes"]:
            return super().visit_figure(node)
        image = next(i for i in node.findall(nodes.image) if "nlicl-diagram-light" in i["classes"])
        path = Path(self.builder.srcdir) / image["uri"]
        self.add_markdown_cell()
        self.anchors(node["ids"])
        alt = " ".join(image.get("alt", "").replace("[", "(").replace("]", ")").split())
        self.markdown_lines.append(f"![{alt}](attachment:{path.name})\n\n")
        self.markdown_lines.append(f"**{self.figure_label(node)}** ")
        node.next_node(nodes.caption).walkabout(self)
        self.add_markdown_cell()
        self.output.cells[-1]["attachments"] = {
            path.name: {"image/svg+xml": base64.b64encode(path.read_bytes()).decode("ascii")}}
        raise nodes.SkipNode

    def figure_label(self, figure: nodes.Element) -> str:
        """The figure's number as the site prints it ("Fig. 3.2")."""
        number = self.builder.env.toc_fignumbers[self.builder.docname]["figure"][figure["ids"][0]]
        return self.builder.config.numfig_format["figure"] % ".".join(map(str, number))

    # Upstream "No anchors for sections, results, exercises and glossary terms" (issue 3): links
    # into another notebook (theorems.ipynb#thm-...) land nowhere without them.
    def anchors(self, ids: list[str]) -> None:
        self.markdown_lines += [f'<a id="{i}"></a>' for i in ids]

    def visit_title(self, node: nodes.Element) -> None:
        if type(node.parent) is nodes.admonition:
            # Upstream "An admonition's title becomes a heading" (issue 6): "# In this chapter"
            # in the middle of a page. A bold line, as the page shows it.
            self.add_markdown_cell()
            self.markdown_lines.append("**")
            return
        super().visit_title(node)
        if isinstance(node.parent, (nodes.section, nodes.Admonition)):
            self.anchors(node.parent["ids"])

    def depart_title(self, node: nodes.Element) -> None:
        if type(node.parent) is nodes.admonition:
            self.markdown_lines.append("**\n\n")
        else:
            super().depart_title(node)

    def visit_term(self, node: nodes.Element) -> None:
        super().visit_term(node)
        self.anchors(node["ids"])

    def visit_theorem_node(self, node: nodes.Element) -> None:
        # Upstream "sphinx-proof: every header reads Theorem" (issue 1): with one shared counter
        # (prf_realtyp_to_countertyp) every result is a theorem_node; its kind is "realtype".
        super().visit_theorem_node(node)
        header = self.markdown_lines.pop()
        self.anchors(node["ids"])
        self.markdown_lines.append(header.replace("**Theorem", f"**{node['realtype'].title()}", 1))

    def visit_proof_node(self, node: nodes.Element) -> None:
        # Same issue 1: sphinx-proof starts a proof's text with "Proof." already; no second one.
        self.add_markdown_cell()

    def visit_exercise_enumerable_node(self, node: nodes.Element) -> None:
        # Upstream "sphinx-exercise: headings read ' (title)Exercise 1.1'" (issue 2): the number
        # is appended to the title; put it first.
        super().visit_exercise_enumerable_node(node)
        title = node.children[0]
        title.insert(0, title.pop())

    def visit_solution_node(self, node: nodes.Element) -> None:
        # Same issue 2: a solution's cells are tagged "solution", as its code cell already is, so
        # that nbconvert's TagRemovePreprocessor can hand out the notebook without them.
        self.add_markdown_cell()
        self.solution_start = len(self.output.cells)

    def depart_solution_node(self, node: nodes.Element) -> None:
        # A solution opens closed, as on the page: its code cells collapsed (JupyterLab's
        # jupyter.source_hidden and outputs_hidden, the classic notebook's collapsed), its text
        # under its heading in a <details> block (closed in JupyterLab, nbconvert and GitHub).
        self.add_markdown_cell()
        cells = self.output.cells[self.solution_start:]
        for cell in cells:
            if "solution" not in cell.metadata.setdefault("tags", []):
                cell.metadata.tags.append("solution")
            if cell.cell_type == "code":
                cell.metadata["jupyter"] = {"source_hidden": True, "outputs_hidden": True}
                cell.metadata["collapsed"] = True
        wrapped = 0
        for cell in (cell for cell in cells if cell.cell_type == "markdown"):
            source = collapsed_markdown(cell.source, SOLUTION_SUMMARIES[wrapped > 0])
            wrapped += source != cell.source
            cell.source = source


SOLUTION_SUMMARIES = ("Show the solution", "Show the rest of the solution")
HEADING = re.compile(r"^#{1,6} ")


def collapsed_markdown(source: str, summary: str) -> str:
    """``source`` with its text after its leading headings in a closed ``<details>`` block
    whose summary is ``summary``; unchanged when nothing follows the headings or when it is one
    already. The blank lines around the text let Markdown render it inside the HTML block."""
    lines = source.strip("\n").split("\n")
    start = 0
    while start < len(lines) and (HEADING.match(lines[start]) or not lines[start].strip()):
        start += 1
    head, body = "\n".join(lines[:start]).strip("\n"), "\n".join(lines[start:]).strip("\n")
    if not body or body.startswith("<details"):
        return source
    block = f"<details>\n<summary>{summary}</summary>\n\n{body}\n\n</details>"
    return f"{head}\n\n{block}" if head else block


class ReaderWriter(JupyterWriter):
    def _identify_translator(self, builder: Any) -> type:
        return ReaderTranslator


class ReaderNotebookBuilder(JupyterBuilder):
    """sphinx-tojupyter's builder, with :class:`ReaderTranslator`, writing the served copies."""

    _writer_class = ReaderWriter

    def get_outdated_docs(self) -> list[str]:
        # every page: milliseconds each, and its outputs can change without its source
        return sorted(self.env.found_docs)

    def prepare_writing(self, docnames: set[str]) -> None:
        super().prepare_writing(docnames)
        bundles = [Path(self.confdir, d, PLOTLY_BUNDLE) for d in self.config.html_static_path]
        self.plotly_js = next((b.read_text(encoding="utf-8") for b in bundles if b.exists()), None)
        url, branch = _repository(self.config)
        self.install_cell = install_source(url, build_commit(Path(self.srcdir)) or branch) if url else None

    def write_doc(self, docname: str, doctree: nodes.document) -> None:
        executed = Path(self.env.mystnb_config.output_folder, f"{docname}.ipynb")
        self.executed = self.with_outputs(nbformat.read(executed, as_version=4)) \
            if executed.exists() else None
        self.plotly_loaded = self.plotly_js is None
        super().write_doc(docname, doctree)
        notebook = nbformat.read(Path(self.outdir, f"{docname}.ipynb"), as_version=4)
        html = Path(self.outdir).parent / "html"
        if self.executed is not None:  # a page MyST-NB executed: the theme offers its download
            notebook.metadata = nbformat.from_dict({k: v for k, v in self.executed.metadata.items()
                                                    if k in ("kernelspec", "language_info")})
            _write(html / "_sources" / f"{docname}.ipynb", notebook)
        if self.install_cell:  # every page, so that links between the live copies land
            install = self.install_cell if self.executed is not None else None
            _write(html / COLAB_DIR / f"{docname}.ipynb", live_copy(notebook, install))

    def with_outputs(self, notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
        """``notebook`` with its executed outputs, from jupyter-cache's public API. MyST-NB 1.4.0
        writes ``jupyter_execute/<page>.ipynb`` from the notebook it read, while the outputs of
        ``execute_notebooks: cache`` are merged into a copy (``myst_nb/sphinx_.py`` writes
        ``notebook``, not ``nb_client.notebook``): the written file has none."""
        cache = self.env.mystnb_config.execution_cache_path
        if not cache or not Path(cache).is_dir():
            return notebook
        try:
            return get_cache(cache).merge_match_into_notebook(notebook)[1]
        except KeyError:  # never executed: a page without code cells
            return notebook

    def outputs(self, cell: nbformat.NotebookNode) -> list:
        """``cell``'s outputs, each figure also as plotly's own output (see the module doc)."""
        outputs = []
        for output in copy.deepcopy(cell.get("outputs", [])):
            figure = output.get("metadata", {}).get("nlicl", {}).pop("figure", None)
            if figure is not None:
                output["data"][PLOTLY_MIMETYPE] = figure
                if not self.plotly_loaded:
                    outputs.append(plotly_loader_output(self.plotly_js))
                    self.plotly_loaded = True
            outputs.append(output)
        return outputs

    def finish(self) -> None:
        # Upstream "JupyterBuilder.finish() calls exit()" (issue 5): the build would end there,
        # before Sphinx reports its warnings and fires build-finished. Nothing else to finish:
        # this builder neither executes notebooks nor makes a site.
        pass


def _write(path: Path, notebook: nbformat.NotebookNode) -> None:
    """Write ``notebook`` whole or not at all (a rename): a test reading the served copies
    while a rebuild writes them sees the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(nbformat.writes(notebook), encoding="utf-8")
    os.replace(partial, path)


def plotly_loader_output(plotly_js: str) -> nbformat.NotebookNode:
    """An invisible output that defines ``window.Plotly`` where a notebook's HTML outputs run
    scripts (nbconvert's HTML, a trusted notebook), so that the figures' own scripts draw."""
    # define, module and exports hidden: where require.js is on the page (the classic notebook,
    # nbconvert's template online), plotly.js would register as an AMD module instead
    script = f"(function () {{\nvar define, module, exports;\n{plotly_js}\n}}).call(window);"
    return nbformat.v4.new_output("display_data", metadata={"tags": ["nlicl-plotly-js"]}, data={
        "text/html": f'<script type="text/javascript">{script}</script>', "text/plain": ""})


# --- the live copy (Colab, Binder) --------------------------------------------------------------


def install_source(repository_url: str, ref: str) -> str:
    """The live copy's first cell: install nlicl_lib at ``ref`` (the commit the site was built
    from) on Colab only; Colab has the library's dependencies, Binder has the library."""
    target = f"git+{repository_url.rstrip('/')}.git@{ref}"
    return (
        "# On Colab: install the book's library, nlicl_lib, at the commit this notebook was built\n"
        "# from (Colab already has torch, numpy, plotly, ipywidgets and tqdm). Anywhere else this\n"
        "# cell does nothing: Binder has the library, and the repository's README sets up a machine.\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        "    import subprocess\n"
        "\n"
        "    subprocess.run([sys.executable, \"-m\", \"pip\", \"install\", \"--quiet\", "
        f"\"--no-deps\",\n                    \"{target}\"], check=True)\n"
    )


def live_copy(notebook: nbformat.NotebookNode, install: str | None) -> nbformat.NotebookNode:
    """``notebook`` without outputs, the ``install`` cell first (if any), with stable nbformat 4.5
    cell ids."""
    result = copy.deepcopy(notebook)
    for cell in result.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    if install:
        result.cells.insert(0, nbformat.v4.new_code_cell(install, metadata={"tags": ["colab-install"]}))
    result.metadata["colab"] = {"provenance": []}
    result.nbformat_minor = max(result.nbformat_minor, 5)
    for index, cell in enumerate(result.cells):
        cell["id"] = "colab-install" if install and index == 0 else f"cell-{index}"
    return result


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


def _repository(config: Any) -> tuple[str | None, str]:
    options = config.html_theme_options or {}
    return options.get("repository_url"), options.get("repository_branch") or "main"


def live_urls(config: Any, pagename: str) -> dict[str, str]:
    """The Colab and Binder addresses of ``pagename``'s live copy on the published branch."""
    url, branch = _repository(config)
    launch = (config.html_theme_options or {}).get("launch_buttons", {})
    owner_repo = url.rstrip("/").split("github.com/")[-1]
    path = f"{COLAB_DIR}/{pagename}.ipynb"
    pages = config.nlicl_pages_branch
    ui = "lab/tree" if launch.get("notebook_interface") == "jupyterlab" else "tree"
    # nbgitpuller clones the published branch into a folder named after the repository
    pull = "git-pull?" + urlencode({"repo": url, "branch": pages,
                                    "urlpath": f"{ui}/{owner_repo.split('/')[-1]}/{path}"})
    return {"Colab": f"{launch.get('colab_url', '').rstrip('/')}/github/{owner_repo}/blob/{pages}/{path}",
            "Binder": f"{launch.get('binderhub_url', '').rstrip('/')}/v2/gh/{owner_repo}/{branch}?"
                      + urlencode({"urlpath": pull})}


def point_launch_buttons(app: Any, pagename: str, templatename: str, context: dict,
                         doctree: Any) -> None:
    """Make the page's Colab and Binder buttons open its live copy (see the module doc)."""
    if not _repository(app.config)[0]:
        return
    urls = live_urls(app.config, pagename)
    for group in context.get("header_buttons", []):
        for button in group.get("buttons", []) if group.get("label") == "launch-buttons" else []:
            if button.get("text") in urls:
                button["url"] = urls[button["text"]]


# --- the one repository setting -----------------------------------------------------------------

GITHUB_REPOSITORY = re.compile(r"^https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
"""What ``repository.url`` of ``_config.yml`` must look like: Binder and Colab open GitHub
repositories only, and the Colab install cell installs from ``<url>.git``."""


def repository_problems(url: str | None, branch: str | None, readme: str | None = None) -> list[str]:
    """What is wrong with the book's one repository setting (``repository.url`` and
    ``repository.branch`` of ``_config.yml``), which the launch buttons, the Colab install cell
    and the README's clone command all use; an empty list when nothing is. Every
    ``github.com/<owner>/<repo>`` address in ``readme`` (the README's text) must be the setting's."""
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
    """Stop the build at its start when the repository setting is unusable."""
    options = config.html_theme_options or {}
    readme = Path(app.srcdir) / "README.md"
    problems = repository_problems(options.get("repository_url"), options.get("repository_branch"),
                                   readme.read_text(encoding="utf-8") if readme.exists() else None)
    if problems:
        raise ConfigError("; ".join(problems))


def setup(app: Any) -> dict[str, Any]:
    app.setup_extension("sphinx_tojupyter")
    app.add_builder(ReaderNotebookBuilder, override=True)
    app.add_config_value("nlicl_pages_branch", "gh-pages", "html")
    app.connect("config-inited", check_repository)
    app.connect("html-page-context", point_launch_buttons, priority=550)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
