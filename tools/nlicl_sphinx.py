"""Sphinx extension of the nlicl book: what a static, offline, strict site needs on top of
jupyter-book 1.0 and myst-nb 1.4.

``nlicl_lib.book.display.show`` writes figures as HTML that calls ``Plotly.newPlot`` but does not
carry plotly.js (see its docstring). This extension

* adds the vendored plotly.js *cartesian* bundle (``book/_static/vendor/plotly-cartesian.min.js``,
  1.5 MB instead of the full bundle's 4.8 MB) to the ``<head>`` of every page whose body holds
  an ``nlicl-plotly`` figure, so that nothing is fetched from a CDN;
* checks, when the HTML builder starts, that this bundle is the plotly.js version that the
  installed ``plotly`` Python package ships (``plotly/package_data/plotly.min.js``), so that
  upgrading plotly cannot silently pair the library with another plotly.js, and removes from
  the site what earlier builds put there and the site no longer uses (plotly's full bundle,
  the ipywidgets manager);
* checks, when a page is written, that every trace of its figures (and of their animation
  frames) has a type the cartesian bundle draws (:data:`CARTESIAN_TRACES`): plotly.js would
  otherwise leave that trace out without an error;
* fails the build when a page holds saved ipywidgets state: the static site has no widget
  manager (training panels render as static HTML in the book build, see
  ``nlicl_lib.book.widgets.TrainingPanel``), so such a widget would show as nothing;
* re-reads (from the execution cache) and so rewrites every page when a file under
  ``html_static_path`` changed: Sphinx copies static files only in a build that writes pages,
  so editing only ``book/_static/nlicl.css`` would otherwise change nothing;
* drops sphinx-thebe's scripts from the pages when thebe is off (``launch_buttons.thebe``):
  jupyter-book always loads the extension, which then adds its configuration script once per
  reading pass, so a page can declare ``const THEBE_JS_URL`` twice and throw a SyntaxError;
* keeps KaTeX (``sphinxcontrib.katex``, which adds its script, auto-render and stylesheets to
  every page) off the pages without a formula, as Sphinx's MathJax support does: 0.3 MB that
  the search page, the index and the bibliography would load for nothing.

* names myst-nb's toggles of hidden cells by their text and takes ``role="list"`` off the
  bibliography (:func:`accessible_names`: two axe-core findings);
* replaces the theme's icon script (``_static/scripts/fontawesome.js``, 1.49 MB, loaded by every
  page to turn ``<i class="fa-solid fa-bars">`` into SVG at run time) by the SVG of the few
  icons the pages use, written into the HTML when the build finishes (:func:`inline_icons`;
  ``nlicl.css`` sizes them as the script did). An icon the pages create at run time would still
  show, from the theme's icon font.

It is loaded from ``_config.yml`` (``sphinx.local_extensions``).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

from sphinx.errors import ExtensionError

PLOTLY_STATIC_PATH = "vendor/plotly-cartesian.min.js"
"""The vendored plotly.js bundle, relative to ``html_static_path`` (and to the site's
``_static/``)."""
RETIRED_STATIC = ("vendor/plotly.min.js", "nlicl-widgets.js", "vendor/require.js",
                  "vendor/jupyter-widgets", "vendor/mathjax")
"""What earlier builds put in the site's ``_static/`` (plotly's full bundle, the widget
manager, MathJax): removed from it unless ``html_static_path`` holds them again (Sphinx copies static
files but never deletes any)."""
CARTESIAN_TRACES = frozenset({
    "bar", "box", "contour", "heatmap", "histogram", "histogram2d", "histogram2dcontour",
    "image", "pie", "scatter", "scatterternary", "violin",
})
"""The trace types of the cartesian bundle (the README of ``plotly.js-cartesian-dist-min``)."""
FIGURE_MARKER = 'class="nlicl-plotly"'
WIDGET_STATE_MIMETYPE = "application/vnd.jupyter.widget-state+json"
# myst-nb adds its per-page scripts at the default priority (500); plotly.js comes first.
PLOTLY_PRIORITY = 400

_VERSION = re.compile(r"plotly\.js(?: \([^)]*\))? v(\d+\.\d+\.\d+\S*)")
_PLOTLY_CALL = re.compile(r"Plotly\.(newPlot|addFrames)\(\s*([\"'])([^\"']*)\2\s*,\s*")


def _plotly_js_source() -> Path:
    """The full plotly.js bundle that the installed ``plotly`` Python package ships."""
    import plotly

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


def prepare_static(app: Any) -> None:
    """``builder-inited``: check the vendored plotly.js bundle's version and remove the
    site's retired static files (:data:`RETIRED_STATIC`)."""
    if app.builder.format != "html":
        return
    check_plotly_version(vendored_plotly_js(app), _plotly_js_source())
    sources = [Path(app.confdir) / entry for entry in app.config.html_static_path]
    for name in RETIRED_STATIC:
        if any((source / name).exists() for source in sources):
            continue
        target = Path(app.outdir) / "_static" / name
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink(missing_ok=True)


def figure_trace_types(body: str) -> list[tuple[str, str]]:
    """``(figure id, trace type)`` of every trace, animation frames included, of the
    ``nlicl-plotly`` figures in a page's HTML ``body``.

    Reads the JSON arguments of each figure's ``Plotly.newPlot`` and ``Plotly.addFrames``
    calls (as ``plotly.io.to_html`` writes them), so the ``type`` keys of the layout (axis
    types, the template's defaults for every trace type) do not count. A trace without a
    ``type`` is a scatter, as in plotly.js. Raises ``ValueError`` for a figure whose data
    cannot be read.
    """
    decoder = json.JSONDecoder()
    found: list[tuple[str, str]] = []
    start = body.find(FIGURE_MARKER)
    while start >= 0:
        script = body.find("<script", start)
        end = body.find("</script>", script)
        if script < 0 or end < 0:
            raise ValueError(f"a figure at character {start} has no script")
        calls = list(_PLOTLY_CALL.finditer(body, script, end))
        if not any(call.group(1) == "newPlot" for call in calls):
            raise ValueError(f"a figure at character {start} has no Plotly.newPlot call")
        for call in calls:
            figure_id = call.group(3)
            try:
                value, _ = decoder.raw_decode(body, call.end())
            except json.JSONDecodeError as error:
                raise ValueError(f"figure {figure_id}: unreadable data ({error})") from error
            if call.group(1) == "newPlot":
                traces = value
            else:  # frames: a trace without a type keeps the type of the figure's trace
                traces = [trace for frame in value for trace in frame.get("data", [])
                          if "type" in trace]
            found.extend((figure_id, trace.get("type", "scatter")) for trace in traces)
        start = body.find(FIGURE_MARKER, end)
    return found


def check_plotly_traces(pagename: str, body: str) -> None:
    """Raise ``ExtensionError`` naming the page, the figure and the trace type when a figure
    of ``body`` has a trace that the cartesian bundle cannot draw."""
    try:
        traces = figure_trace_types(body)
    except ValueError as error:
        raise ExtensionError(f"page {pagename}: {error}") from error
    for figure_id, kind in traces:
        if kind not in CARTESIAN_TRACES:
            raise ExtensionError(
                f"page {pagename}: figure {figure_id} has a {kind!r} trace, which the "
                f"vendored plotly.js cartesian bundle ({PLOTLY_STATIC_PATH}) cannot draw; it "
                f"draws {', '.join(sorted(CARTESIAN_TRACES))}. Use one of those, or vendor a "
                "bundle that has it (book/_static/vendor/README.md).")


def add_plotly_js(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    """``html-page-context``: check the page's figures and load plotly.js where it has some."""
    body = context.get("body", "")
    if FIGURE_MARKER in body:
        check_plotly_traces(pagename, body)
        app.add_js_file(PLOTLY_STATIC_PATH, priority=PLOTLY_PRIORITY)


def _is_widget_state(asset: Any) -> bool:
    return (getattr(asset, "attributes", None) or {}).get("type") == WIDGET_STATE_MIMETYPE


def refuse_widget_state(app: Any, pagename: str, templatename: str, context: dict,
                        doctree: Any) -> None:
    """``html-page-context`` (after myst-nb's): fail when the page holds saved ipywidgets
    state. myst-nb adds the state, and ``nb_ipywidgets_js``, to a page whose executed notebook
    has any (every widget *created* in the kernel is saved, shown or not); the site has no
    widget manager, so the widget would show as nothing."""
    if any(_is_widget_state(asset) for asset in context.get("script_files", [])):
        raise ExtensionError(
            f"page {pagename} holds ipywidgets state, but the static site has no widget "
            "manager: create no widgets in the book build (NLICL_BOOK_BUILD=1), as "
            "nlicl_lib.book.widgets.TrainingPanel does, and show static HTML instead.")


def _static_digest(app: Any) -> str:
    digest = hashlib.sha256()
    for entry in app.config.html_static_path:
        root = Path(app.confdir) / entry
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()


def reread_when_static_changed(
    app: Any, env: Any, added: set, changed: set, removed: set
) -> list[str]:
    if app.builder.format != "html":  # the notebook builder after it reads the same doctrees
        return []
    digest = _static_digest(app)
    if getattr(env, "nlicl_static_digest", None) == digest:
        return []
    env.nlicl_static_digest = digest
    return sorted(env.found_docs - added - changed)


def _thebe_enabled(app: Any) -> bool:
    options = app.config.html_theme_options or {}
    return bool(options.get("launch_buttons", {}).get("thebe"))


def _is_thebe_asset(asset: Any) -> bool:
    filename = getattr(asset, "filename", None) or str(asset)
    body = (getattr(asset, "attributes", None) or {}).get("body", "")
    return "sphinx-thebe" in filename or "THEBE_JS_URL" in body


def drop_thebe(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    if _thebe_enabled(app):
        return
    for key in ("script_files", "css_files"):
        if key in context:
            context[key] = [asset for asset in context[key] if not _is_thebe_asset(asset)]


KATEX_ASSETS = frozenset({"katex.min.js", "auto-render.min.js", "katex_autorenderer.js",
                          "katex-math.css", "katex.min.css"})
"""The names of the files ``sphinxcontrib.katex`` adds to every page (its ``katex_*_path``
defaults and the stylesheet ``_config.yml`` names)."""


def _is_katex_asset(asset: Any) -> bool:
    filename = getattr(asset, "filename", None) or str(asset)  # "_static/katex.min.js"
    return filename.rsplit("/", 1)[-1] in KATEX_ASSETS


def katex_only_with_maths(app: Any, pagename: str, templatename: str, context: dict,
                          doctree: Any) -> None:
    """``html-page-context``: drop KaTeX's files from a page that has no formula."""
    if app.env.get_domain("math").has_equations(pagename):
        return
    for key in ("script_files", "css_files"):
        if key in context:
            context[key] = [asset for asset in context[key] if not _is_katex_asset(asset)]


ICON_SCRIPT = "_static/scripts/fontawesome.js"
_ICON_SCRIPT_TAG = re.compile(r'[ \t]*<script[^>]*src="[^"]*scripts/fontawesome\.js[^"]*"[^>]*></script>\n?')
_ICON_TAG = re.compile(r'<(i|span) class="([^"]*\bfa-[^"]*)"([^>]*)></\1>')
_ICON_PACKS = {"fab": "brands", "far": "regular", "fas": "solid"}
_PACK_CLASSES = {"fab": "brands", "fa-brands": "brands", "far": "regular", "fa-regular": "regular",
                 "fas": "solid", "fa-solid": "solid"}
_NOT_ICONS = {"fa-solid", "fa-regular", "fa-brands", "fa-lg", "fa-xs", "fa-sm", "fa-fw", "fa-2x",
              "fa-3x", "fa-spin", "fa-pulse", "fa-border"}
_ICON_ENTRY = re.compile(r'(?:[{,])("?)([a-z0-9-]+)\1:\[(\d+),(\d+),\[[^\]]*\],"[0-9a-f]+","([^"]+)"\]')


def icon_paths(script: str) -> dict[str, dict[str, tuple[int, int, str]]]:
    """``{pack: {name: (width, height, path)}}`` from the theme's fontawesome.js: each pack is an
    object literal ``var p={name:[w,h,[aliases],"unicode","path"],...}`` registered by
    ``d("fab",p)`` (brands), ``d("far",p)`` (regular) or ``d("fas",p)`` (solid)."""
    packs: dict[str, dict[str, tuple[int, int, str]]] = {}
    for register in re.finditer(r'd\("(fab|far|fas)",p\)', script):
        start = script.rfind("var p={", 0, register.start())
        body = script[start + len("var p="): register.start()]
        packs[_ICON_PACKS[register.group(1)]] = {
            m.group(2): (int(m.group(3)), int(m.group(4)), m.group(5))
            for m in _ICON_ENTRY.finditer(body)}
    return packs


def inline_icon_tags(html: str, packs: dict[str, dict[str, tuple[int, int, str]]]) -> str:
    """``html`` with every empty ``<i>`` or ``<span class="fa-... fa-NAME">`` whose icon is in ``packs`` written as its
    SVG (classes and attributes kept) and the icon script's ``<script>`` tag removed."""
    def svg(match: re.Match) -> str:
        classes, attributes = match.group(2).split(), match.group(3)
        pack = next((_PACK_CLASSES[c] for c in classes if c in _PACK_CLASSES), "solid")
        names = [c[3:] for c in classes if c.startswith("fa-") and c not in _NOT_ICONS]
        icon = next((packs.get(pack, {}).get(name) for name in names
                     if name in packs.get(pack, {})), None)
        if icon is None:
            return match.group(0)  # left to the icon font
        width, height, path = icon
        hidden = "" if "aria-hidden" in attributes else ' aria-hidden="true"'
        return (f'<svg class="{" ".join(classes)} svg-inline--fa"{attributes}{hidden} '
                f'focusable="false" role="img" xmlns="http://www.w3.org/2000/svg" '
                f'viewBox="0 0 {width} {height}"><path fill="currentColor" d="{path}"></path></svg>')
    return _ICON_SCRIPT_TAG.sub("", _ICON_TAG.sub(svg, html))


def inline_icons(app: Any, exception: Exception | None) -> None:
    """After an HTML build: every page's icons as inline SVG, without the icon script."""
    if exception is not None or app.builder.format != "html":
        return
    script = Path(app.outdir) / ICON_SCRIPT
    if not script.exists():
        return
    packs = icon_paths(script.read_text(encoding="utf-8"))
    if not packs.get("solid"):
        raise ExtensionError(f"nlicl: no icons found in {script}: the theme's icon script changed")
    for page in Path(app.outdir).rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        inlined = inline_icon_tags(html, packs)
        if inlined != html:
            page.write_text(inlined, encoding="utf-8")


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
    app.connect("html-page-context", accessible_names)
    app.connect("builder-inited", prepare_static)
    app.connect("env-get-outdated", reread_when_static_changed)
    app.connect("html-page-context", add_plotly_js)
    app.connect("html-page-context", drop_thebe, priority=900)
    app.connect("html-page-context", katex_only_with_maths, priority=900)
    app.connect("html-page-context", refuse_widget_state, priority=950)
    app.connect("build-finished", inline_icons)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
