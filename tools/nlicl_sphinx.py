"""Sphinx extension of the nlicl book: what a static, offline, strict site needs on top of
jupyter-book 1.0 and myst-nb 1.4.

``nlicl_lib.display.show`` writes figures as HTML that calls ``Plotly.newPlot`` but does not
carry plotly.js (see its docstring). This extension

* copies ``plotly.min.js`` from the installed ``plotly`` Python package into the site's
  ``_static/vendor/`` when the HTML builder starts, so the library version and the JavaScript
  version always match and nothing is fetched from a CDN;
* adds that script to the ``<head>`` of every page whose body holds an ``nlicl-plotly``
  figure, before require.js (the ipywidgets manager) so the two loaders do not collide;
* re-reads (from the execution cache) and so rewrites every page when a file under
  ``html_static_path`` changed: Sphinx copies static files only in a build that writes pages,
  so editing only ``book/_static/nlicl.css`` would otherwise change nothing;
* drops sphinx-thebe's scripts from the pages when thebe is off (``launch_buttons.thebe``):
  jupyter-book always loads the extension, which then adds its configuration script once per
  reading pass, so a page can declare ``const THEBE_JS_URL`` twice and throw a SyntaxError;
* makes every downloadable ``.ipynb`` the *executed* notebook. myst-nb 1.4 in ``cache`` mode
  writes ``_build/jupyter_execute/<page>.ipynb`` (which sphinx-book-theme copies to
  ``_sources/`` for the download button) from the unexecuted notebook whenever the outputs
  came from the cache rather than from a fresh execution, so those downloads had no outputs.
  After the build, each such notebook is merged with its cached execution.

It is loaded from ``_config.yml`` (``sphinx.local_extensions``).
"""

from __future__ import annotations

import filecmp
import hashlib
import shutil
from pathlib import Path
from typing import Any

PLOTLY_STATIC_PATH = "vendor/plotly.min.js"
FIGURE_MARKER = 'class="nlicl-plotly"'
# myst-nb adds require.js and the widget manager at the default priority (500); plotly.js
# comes first.
PLOTLY_PRIORITY = 400


def _plotly_js_source() -> Path:
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def copy_plotly_js(app: Any) -> None:
    if app.builder.format != "html":
        return
    source = _plotly_js_source()
    target = Path(app.outdir) / "_static" / PLOTLY_STATIC_PATH
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists() or not filecmp.cmp(source, target, shallow=False):
        shutil.copyfile(source, target)


def add_plotly_js(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    if FIGURE_MARKER in context.get("body", ""):
        app.add_js_file(PLOTLY_STATIC_PATH, priority=PLOTLY_PRIORITY)


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


def _merge_cached_outputs(cache: Any, path: Path) -> None:
    """Replace the notebook at ``path`` by its merge with the cached execution, if any."""
    import nbformat

    original = path.read_text(encoding="utf-8")
    notebook = nbformat.reads(original, as_version=4)
    try:
        _, merged = cache.merge_match_into_notebook(notebook)
    except KeyError:  # not in the cache (e.g. the page is not executed)
        return
    text = nbformat.writes(merged)
    if text != original:
        path.write_text(text, encoding="utf-8")


def complete_executed_notebooks(app: Any, exception: Exception | None) -> None:
    config = getattr(app.env, "mystnb_config", None)
    if exception is not None or app.builder.format != "html" or config is None:
        return
    if config.execution_mode != "cache" or not config.execution_cache_path:
        return
    from jupyter_cache import get_cache

    cache = get_cache(config.execution_cache_path)
    outdir = Path(app.outdir)
    for folder in (outdir / "_sources", outdir.parent / "jupyter_execute"):
        for path in sorted(folder.rglob("*.ipynb")):
            _merge_cached_outputs(cache, path)


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", copy_plotly_js)
    app.connect("env-get-outdated", reread_when_static_changed)
    app.connect("html-page-context", add_plotly_js)
    app.connect("html-page-context", drop_thebe, priority=900)
    app.connect("build-finished", complete_executed_notebooks)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
