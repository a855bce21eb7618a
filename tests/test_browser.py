"""The built book, opened page by page in headless Chromium, offline.

Run it after ``make book`` with ``make browser-test`` (which installs Debian's chromium when
it is missing). It serves ``_build/html`` on localhost and aborts every request that leaves
localhost. For every page it checks that

* nothing fails: no console error, no uncaught exception, no failed or refused request;
* every plotly figure drew as many traces as its notebook output says (``nlicl_lib.display``
  records the counts in the output's metadata), and at phone width it fits its column;
* every plotly slider changes the drawn figure at every step (clicked like a reader would);
* every ipywidgets view was rendered by the page's widget manager;
* axe-core finds no ``serious`` or ``critical`` accessibility violation, in the theme's light
  and dark modes.

It also checks, without a browser, that no page loads a script, style sheet or image from
outside the site, that chapter pages stay under 2 MB, and that each notebook page offers its
executed ``.ipynb`` for download.

Set ``NLICL_SCREENSHOTS=DIR`` to save a screenshot of every page (desktop and phone width).
"""

from __future__ import annotations

import functools
import html
import json
import os
import re
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
HTML_DIR = ROOT / "_build" / "html"
SOURCES_DIR = HTML_DIR / "_sources"
BROWSER_DIR = Path(__file__).resolve().parent / "browser"
AXE_JS = BROWSER_DIR / "axe.min.js"
PAGE_CHECKS_JS = BROWSER_DIR / "page_checks.js"
CHROMIUM = Path(os.environ.get("NLICL_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
MAX_CHAPTER_PAGE_BYTES = 2_000_000
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
BLOCKING_IMPACTS = {"serious", "critical"}
RENDER_TIMEOUT_MS = 30_000
SLIDER_TIMEOUT_MS = 5_000

NOT_BUILT = f"the book is not built ({HTML_DIR / 'index.html'} is missing): run `make book`"


def built_pages() -> list[str]:
    """Every HTML page of the site, relative to ``_build/html`` (static files excluded)."""
    if not (HTML_DIR / "index.html").exists():
        return []
    return sorted(
        path.relative_to(HTML_DIR).as_posix()
        for path in HTML_DIR.rglob("*.html")
        if not any(part.startswith(("_", ".")) for part in path.relative_to(HTML_DIR).parts)
    )


PAGES = built_pages()


def notebook_of(page: str) -> Path:
    """The executed notebook that the page's download button offers."""
    return SOURCES_DIR / Path(page).with_suffix(".ipynb")


def expected_figures(page: str) -> dict[str, dict]:
    """figure id -> trace counts, from the ``nlicl`` metadata of the notebook's outputs."""
    notebook = notebook_of(page)
    link = f"_sources/{Path(page).with_suffix('.ipynb').as_posix()}"
    offered = link in (HTML_DIR / page).read_text(encoding="utf-8")
    if not (offered and notebook.exists()):  # a stale notebook an earlier build left behind
        return {}
    figures = {}
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        for output in cell.get("outputs", []):
            info = output.get("metadata", {}).get("nlicl")
            if info:
                figures[info["figure_id"]] = info
    return figures


# --- static checks (no browser) ---------------------------------------------------------


class _AssetCollector(HTMLParser):
    """Collects the URLs a page *loads* (not the links a reader may follow)."""

    LOADING = {"script": "src", "img": "src", "iframe": "src", "source": "src", "embed": "src"}
    LOADING_LINK_RELS = {"stylesheet", "preload", "modulepreload", "icon", "shortcut", "prefetch"}

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag in self.LOADING and values.get(self.LOADING[tag]):
            self.urls.append(values[self.LOADING[tag]] or "")
        if tag == "link" and set((values.get("rel") or "").split()) & self.LOADING_LINK_RELS:
            self.urls.append(values.get("href") or "")


def _is_external(url: str) -> bool:
    return bool(re.match(r"^(?:[a-z][a-z0-9+.-]*:)?//", url, re.IGNORECASE))


@pytest.fixture(scope="session")
def built() -> None:
    if not PAGES:
        pytest.skip(NOT_BUILT)


def test_pages_load_nothing_from_outside(built: None) -> None:
    offenders = {}
    for page in PAGES:
        collector = _AssetCollector()
        collector.feed((HTML_DIR / page).read_text(encoding="utf-8"))
        external = [url for url in collector.urls if _is_external(url)]
        if external:
            offenders[page] = external
    assert not offenders, f"pages load assets from outside the site: {offenders}"


RAW_TEX = re.compile(r"\$|\\(?:operatorname|mathbb|mathcal|frac|top|sum)\b")


def _prose_text(page_html: str) -> str:
    """The page's main text as a reader sees it, without math (MathJax draws it), code and
    scripts: TeX left in it means Markdown broke a formula (a line starting with "+ " inside
    $...$ becomes a list item, for instance)."""
    main = page_html[page_html.find("<main"):page_html.find("</main>")]
    for pattern in (r"<script.*?</script>", r"<pre.*?</pre>",
                    r'<span class="math[^"]*">.*?</span>', r'<div class="math[^"]*">.*?</div>'):
        main = re.sub(pattern, " ", main, flags=re.DOTALL)
    return html.unescape(re.sub(r"<[^>]+>", " ", main))


def test_no_raw_tex_in_the_text(built: None) -> None:
    offenders = {}
    for page in PAGES:
        text = _prose_text((HTML_DIR / page).read_text(encoding="utf-8"))
        hits = [text[max(0, m.start() - 50):m.end() + 30] for m in RAW_TEX.finditer(text)]
        if hits:
            offenders[page] = hits[:3]
    assert not offenders, f"TeX outside MathJax (a formula Markdown broke): {offenders}"


def test_chapter_pages_are_small(built: None) -> None:
    sizes = {page: (HTML_DIR / page).stat().st_size for page in PAGES}
    too_big = {page: size for page, size in sizes.items() if size > MAX_CHAPTER_PAGE_BYTES}
    assert not too_big, f"pages over {MAX_CHAPTER_PAGE_BYTES} bytes: {too_big}"


def test_notebook_pages_offer_the_executed_notebook(built: None) -> None:
    notebook_pages = [page for page in PAGES if (ROOT / Path(page).with_suffix(".md")).exists()
                      and "file_format: mystnb" in (ROOT / Path(page).with_suffix(".md")).read_text()]
    assert notebook_pages, "no notebook page found"
    for page in notebook_pages:
        notebook = notebook_of(page)
        assert notebook.exists(), f"{page}: {notebook} is missing"
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        code_cells = [cell for cell in cells if cell["cell_type"] == "code"]
        assert any(cell.get("outputs") for cell in code_cells), f"{notebook} has no outputs"
        html = (HTML_DIR / page).read_text(encoding="utf-8")
        link = os.path.relpath(notebook, (HTML_DIR / page).parent)
        assert f'href="{link}"' in html, f"{page} has no download link to {link}"


# --- the browser -------------------------------------------------------------------------


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture(scope="session")
def site_url(built: None) -> Iterator[str]:
    handler = functools.partial(_QuietHandler, directory=str(HTML_DIR))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def browser(site_url: str) -> Iterator[object]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: `make browser-test` installs Debian's chromium")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        yield browser
        browser.close()


class PageProblems:
    """Everything that went wrong while a page was open."""

    def __init__(self) -> None:
        self.console_errors: list[str] = []
        self.page_errors: list[str] = []
        self.failed_requests: list[str] = []
        self.blocked_requests: list[str] = []

    def watch(self, page: object) -> None:
        page.on("console", self._on_console)
        page.on("pageerror", lambda error: self.page_errors.append(str(error)))
        page.on("requestfailed", self._on_request_failed)
        page.on("response", self._on_response)

    def _on_console(self, message: object) -> None:
        if message.type == "error":
            self.console_errors.append(f"{message.text} ({message.location.get('url')})")

    def _on_request_failed(self, request: object) -> None:
        self.failed_requests.append(f"{request.url}: {request.failure}")

    def _on_response(self, response: object) -> None:
        if response.status >= 400:
            self.failed_requests.append(f"{response.url}: HTTP {response.status}")

    def block_outside(self, route: object) -> None:
        if urlparse(route.request.url).hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            self.blocked_requests.append(route.request.url)
            route.abort("blockedbyclient")

    def assert_none(self, page: str) -> None:
        problems = {
            "console errors": self.console_errors,
            "uncaught exceptions": self.page_errors,
            "failed requests": self.failed_requests,
            "requests outside localhost (blocked)": self.blocked_requests,
        }
        problems = {name: values for name, values in problems.items() if values}
        assert not problems, f"{page}: {json.dumps(problems, indent=1)}"


def _open(browser: object, url: str, viewport: dict, problems: PageProblems,
          color_scheme: str = "light") -> object:
    context = browser.new_context(viewport=viewport, color_scheme=color_scheme,
                                  service_workers="block")
    context.route("**/*", problems.block_outside)
    page = context.new_page()
    problems.watch(page)
    page.goto(url, wait_until="load")
    page.wait_for_load_state("networkidle")
    page.add_script_tag(path=str(PAGE_CHECKS_JS))
    page.wait_for_function("window.nlicl.allFiguresDrawn() && window.nlicl.allWidgetsRendered()",
                           timeout=RENDER_TIMEOUT_MS)
    return page


def _screenshot(page: object, name: str, suffix: str) -> None:
    folder = os.environ.get("NLICL_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name.replace('/', '_')}-{suffix}.png"),
                        full_page=True)


def _check_figures(page: object, page_name: str) -> None:
    figures = page.evaluate("window.nlicl.figures()")
    expected = expected_figures(page_name)
    assert sorted(f["id"] for f in figures) == sorted(expected), (
        f"{page_name}: figures on the page {[f['id'] for f in figures]} differ from the "
        f"notebook's {sorted(expected)}"
    )
    for figure in figures:
        want = expected[figure["id"]]
        assert figure["dataTraces"] == want["traces"], (page_name, figure, want)
        assert figure["visibleTraces"] == want["drawn_traces"], (page_name, figure, want)
        assert figure["svgTraces"] == want["drawn_traces"], (
            f"{page_name}: figure {figure['id']} drew {figure['svgTraces']} traces, "
            f"its notebook output has {want['drawn_traces']} visible"
        )


def _check_sliders(page: object, page_name: str) -> int:
    moved = 0
    for figure in page.evaluate("window.nlicl.figures()"):
        for index, slider in enumerate(figure["sliders"]):
            before = page.evaluate("id => window.nlicl.snapshot(id)", figure["id"])
            order = [s for s in range(slider["steps"]) if s != slider["active"]]
            for step in order + [slider["active"]]:
                point = page.evaluate(
                    "([id, i, s]) => window.nlicl.sliderStepPoint(id, i, s)",
                    [figure["id"], index, step],
                )
                page.mouse.click(point["x"], point["y"])
                page.wait_for_function(
                    "([id, i, s]) => window.nlicl.sliderActive(id, i) === s",
                    arg=[figure["id"], index, step],
                    timeout=SLIDER_TIMEOUT_MS,
                )
                try:
                    page.wait_for_function(
                        "([id, old]) => window.nlicl.snapshot(id) !== old",
                        arg=[figure["id"], before],
                        timeout=SLIDER_TIMEOUT_MS,
                    )
                except Exception as error:  # playwright's TimeoutError
                    raise AssertionError(
                        f"{page_name}: figure {figure['id']}, slider {index}: step {step} "
                        "did not change the drawn figure"
                    ) from error
                before = page.evaluate("id => window.nlicl.snapshot(id)", figure["id"])
                moved += 1
    return moved


def _check_widgets(page: object, page_name: str) -> None:
    views = page.evaluate("window.nlicl.widgetViews()")
    unrendered = [view["modelId"] for view in views if not view["rendered"]]
    assert not unrendered, f"{page_name}: widget views left unrendered: {unrendered}"


def _check_accessibility(page: object, page_name: str, mode: str) -> None:
    page.add_script_tag(path=str(AXE_JS))
    result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    blocking = [
        {
            "id": violation["id"],
            "impact": violation["impact"],
            "help": violation["help"],
            "nodes": [node["target"] for node in violation["nodes"]][:5],
        }
        for violation in result["violations"]
        if violation["impact"] in BLOCKING_IMPACTS
    ]
    assert not blocking, f"{page_name} ({mode} mode): {json.dumps(blocking, indent=1)}"


def _set_dark_mode(page: object) -> None:
    # pydata-sphinx-theme's dark mode is a data attribute on <html>. The theme animates the
    # colour change; axe must see the final colours, so transitions are switched off first.
    page.add_style_tag(content="*, *::before, *::after { transition: none !important; }")
    page.evaluate(
        "() => new Promise((resolve) => {"
        " document.documentElement.dataset.mode = 'dark';"
        " document.documentElement.dataset.theme = 'dark';"
        " requestAnimationFrame(() => requestAnimationFrame(resolve)); })"
    )


@pytest.mark.parametrize("page_name", PAGES or [pytest.param(None, id="not-built")])
def test_page_in_browser(browser: object, site_url: str, page_name: str) -> None:
    problems = PageProblems()
    page = _open(browser, site_url + page_name, DESKTOP, problems)
    _screenshot(page, page_name, "desktop")
    _check_figures(page, page_name)
    _check_widgets(page, page_name)
    _check_sliders(page, page_name)
    _check_accessibility(page, page_name, "light")
    _set_dark_mode(page)
    _screenshot(page, page_name, "dark")
    _check_accessibility(page, page_name, "dark")
    page.context.close()
    problems.assert_none(page_name)


@pytest.mark.parametrize("page_name", PAGES or [pytest.param(None, id="not-built")])
def test_page_at_phone_width(browser: object, site_url: str, page_name: str) -> None:
    problems = PageProblems()
    page = _open(browser, site_url + page_name, PHONE, problems)
    _screenshot(page, page_name, "phone")
    for figure in page.evaluate("window.nlicl.figures()"):
        assert figure["svgWidth"] <= figure["containerWidth"] + 1, (
            f"{page_name}: figure {figure['id']} is {figure['svgWidth']} px wide in a "
            f"{figure['containerWidth']} px column"
        )
    page.context.close()
    problems.assert_none(page_name)
