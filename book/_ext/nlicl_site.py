"""Sphinx extension of the nlicl book: the checks a static, offline, strict site needs on top of
jupyter-book 1.x and myst-nb 1.x. Loaded from ``_config.yml`` (``sphinx.extra_extensions``).

What every page loads is configuration, not code: ``html_js_files`` in ``_config.yml`` adds the
vendored plotly.js *cartesian* bundle (``book/_static/vendor/plotly-cartesian.min.js``) and the
book's scripts to every page, and ``sphinxcontrib.katex`` adds KaTeX to every page; the browser
caches them after the first page. This extension only checks:

* when the HTML builder starts, that the vendored bundle is the plotly.js version that the
  installed ``plotly`` Python package ships (``plotly/package_data/plotly.min.js``), so that
  upgrading plotly cannot silently pair the library with another plotly.js
  (``nlicl_lib.pages.display`` checks each figure's trace types against the bundle);
* when a page is written, that it holds no saved ipywidgets state: the static site has no
  widget manager (training panels render as static HTML in the book build, see
  ``nlicl_lib.pages.panels.TrainingPanel``), so such a widget would show as nothing;
* names myst-nb's toggles of hidden cells by their text and takes ``role="list"`` off the
  bibliography (:func:`accessible_names`: two axe-core findings);
* that a change of a file under ``html_static_path`` rewrites every page (re-read from the
  execution cache): Sphinx copies static files only in a build that writes pages, and the
  pages name each static file with its checksum, so editing only ``book/_static/nlicl.css``
  would otherwise change nothing.

And it works around one upstream bug: jupyter-book always loads sphinx-thebe, whose
configuration script (``const THEBE_JS_URL = ...``) sphinx-thebe 0.3.1 registers after the
HTML builder started; Sphinx 7.4 then writes it into every page twice (it re-adds such a
script under the file name ``''`` beside the one it holds under ``None``), and the second copy
throws a SyntaxError. With thebe off (``launch_buttons.thebe``), :func:`drop_thebe` leaves
sphinx-thebe's files out of the pages; remove it once Sphinx or sphinx-thebe is fixed
(``tests/test_sphinxext_site.py`` says when).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import plotly
from sphinx.errors import ExtensionError

PLOTLY_STATIC_PATH = "vendor/plotly-cartesian.min.js"
"""The vendored plotly.js bundle, relative to ``html_static_path`` (and to the site's
``_static/``); ``_config.yml`` names it in ``html_js_files``."""
WIDGET_STATE_MIMETYPE = "application/vnd.jupyter.widget-state+json"

_VERSION = re.compile(r"plotly\.js(?: \([^)]*\))? v(\d+\.\d+\.\d+\S*)")


def plotly_js_source() -> Path:
    """The full plotly.js bundle that the installed ``plotly`` Python package ships."""
    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def plotly_js_version(path: Path) -> str:
    """The version in the header comment of a plotly.js bundle (``plotly.js v4.1.1`` or
    ``plotly.js (cartesian - minified) v4.1.1``). Raises ``ExtensionError`` when there is none."""
    with open(path, encoding="utf-8", errors="replace") as file:
        head = file.read(2000)
    match = _VERSION.search(head)
    if match is None:
        raise ExtensionError(f"{path}: no plotly.js version in its header comment")
    return match.group(1)


def vendored_plotly_js(app: Any) -> Path:
    """The vendored bundle, found under ``html_static_path``."""
    for entry in app.config.html_static_path:
        candidate = Path(app.confdir) / entry / PLOTLY_STATIC_PATH
        if candidate.is_file():
            return candidate
    raise ExtensionError(f"{PLOTLY_STATIC_PATH} is missing from html_static_path "
                         "(see book/_static/vendor/README.md)")


def check_plotly_version(vendored: Path, source: Path) -> str:
    """The common plotly.js version of the vendored bundle and of plotly's own ``source``;
    raises ``ExtensionError`` saying how to update the bundle when they differ."""
    ours, theirs = plotly_js_version(vendored), plotly_js_version(source)
    if ours != theirs:
        raise ExtensionError(
            f"{vendored} is plotly.js v{ours}, but the installed plotly Python package ships "
            f"plotly.js v{theirs} ({source}). Vendor the matching bundle: `npm pack "
            f"plotly.js-cartesian-dist-min@{theirs}`, copy its plotly-cartesian.min.js and "
            "LICENSE, and update book/_static/vendor/README.md.")
    return ours


def check_plotly(app: Any) -> None:
    """``builder-inited``: the vendored plotly.js is the installed plotly's."""
    if app.builder.format == "html":
        check_plotly_version(vendored_plotly_js(app), plotly_js_source())


def _is_widget_state(asset: Any) -> bool:
    return (getattr(asset, "attributes", None) or {}).get("type") == WIDGET_STATE_MIMETYPE


def refuse_widget_state(app: Any, pagename: str, templatename: str, context: dict,
                        doctree: Any) -> None:
    """``html-page-context`` (after myst-nb's): fail when the page holds saved ipywidgets
    state. myst-nb adds the state to a page whose executed notebook has any (every widget
    *created* in the kernel is saved, shown or not); the site has no widget manager
    (``nb_ipywidgets_js`` is empty), so the widget would show as nothing."""
    if any(_is_widget_state(asset) for asset in context.get("script_files", [])):
        raise ExtensionError(
            f"page {pagename} holds ipywidgets state, but the static site has no widget "
            "manager: create no widgets in the book build (NLICL_BOOK_BUILD=1), as "
            "nlicl_lib.pages.panels.TrainingPanel does, and show static HTML instead.")


def _thebe_enabled(app: Any) -> bool:
    options = app.config.html_theme_options or {}
    return bool(options.get("launch_buttons", {}).get("thebe"))


def _is_thebe_asset(asset: Any) -> bool:
    filename = getattr(asset, "filename", None) or str(asset)
    body = (getattr(asset, "attributes", None) or {}).get("body", "")
    return "sphinx-thebe" in filename or "THEBE_JS_URL" in body


def drop_thebe(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    """``html-page-context``: no sphinx-thebe file on the page while thebe is off."""
    if _thebe_enabled(app):
        return
    for key in ("script_files", "css_files"):
        if key in context:
            context[key] = [asset for asset in context[key] if not _is_thebe_asset(asset)]


def static_digest(app: Any) -> str:
    """A digest of every file under ``html_static_path`` (names and contents)."""
    digest = hashlib.sha256()
    for entry in app.config.html_static_path:
        root = Path(app.confdir) / entry
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()


def reread_when_static_changed(app: Any, env: Any, added: set, changed: set,
                               removed: set) -> list[str]:
    """``env-get-outdated``: every page when a static file changed since the last build."""
    if app.builder.format != "html":  # the notebook builder after it reads the same doctrees
        return []
    digest = static_digest(app)
    if getattr(env, "nlicl_static_digest", None) == digest:
        return []
    env.nlicl_static_digest = digest
    return sorted(env.found_docs - added - changed)


HIDDEN_CELL_SUMMARY = '<summary aria-label="Toggle hidden content">'
CITATION_LIST = '<div role="list" class="citation-list">'


def accessible_names(app: Any, pagename: str, templatename: str, context: dict,
                     doctree: Any) -> None:
    """Two ARIA fixes. myst-nb's toggles of hidden cells (the exercises' solutions among them)
    label their ``<summary>`` "Toggle hidden content" while showing "Show the solution" (axe-core:
    label-content-name-mismatch): without the label, the name is the text. docutils marks the
    bibliography ``role="list"`` but its entries ``role="doc-biblioentry"``, which a list may not
    contain (axe-core: aria-required-children): without the role, the entries keep theirs."""
    body = context.get("body", "")
    context["body"] = body.replace(HIDDEN_CELL_SUMMARY, "<summary>").replace(
        CITATION_LIST, '<div class="citation-list">')


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", check_plotly)
    app.connect("env-get-outdated", reread_when_static_changed)
    app.connect("html-page-context", drop_thebe, priority=900)
    app.connect("html-page-context", refuse_widget_state, priority=950)
    app.connect("html-page-context", accessible_names)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
