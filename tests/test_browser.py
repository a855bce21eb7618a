"""The built book, opened page by page in headless Chromium, offline: the smoke test of the
static site (``make browser-test``, after ``make book``). It serves ``_build/html`` on
localhost and aborts every request that leaves it.

Without a browser: no page loads anything from outside the site nor the ipywidgets manager;
no raw TeX in the text a reader sees (prose and cell outputs); every page's HTML is under 2 MB
and each notebook page offers its executed ``.ipynb``, whose outputs hold no warning or
traceback.

At desktop width (``TestDesktop``, one browser page per book page): every plotly figure draws
the traces its notebook output records (``nlicl_lib.pages.display`` writes the counts into its
metadata), each visible trace with its data inside the plot area; every slider step, clicked,
changes the figure; each slider names all its steps or shows its current value (never some
labels only); no printed output is wider than the column; every formula is typeset; the
header's icons draw; a chapter shows its training panel (a ``role="note"`` notice, then the Train
button, enabled: Chromium runs the in-page trainer, ``tests/test_in_page_browser.py``) and no
widget view; the page loads at most ``MAX_COLD_LOAD_BYTES`` in
a fresh browser; and nothing fails (console error, uncaught exception, failed request).

At phone width, 390 x 844 (``TestPhone``): every figure and its text fit the column, nothing
else runs past it (a wide formula or table scrolls in its own box) and nothing fails.

At both widths: a table's caption stays whole in view while its table scrolls; a display
equation wider than its box opens at its start; a tap on a solution's title (its link to the
exercise) opens the solution where it is, without jumping to the exercise.

``NLICL_SCREENSHOTS=DIR`` saves a screenshot of every page; ``NLICL_HTML_DIR=DIR`` tests another
copy of the built site.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
import threading
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
HTML_DIR = Path(os.environ.get("NLICL_HTML_DIR", ROOT / "_build" / "html"))  # the built site
SOURCES_DIR = HTML_DIR / "_sources"
PAGE_CHECKS_JS = Path(__file__).resolve().parent / "browser" / "page_checks.js"
AXE_JS = PAGE_CHECKS_JS.parent / "axe.min.js"  # axe-core 4, vendored with its licences
CHROMIUM = Path(os.environ.get("NLICL_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
MAX_PAGE_BYTES = 2_000_000  # the HTML file alone
# everything a page loads in a fresh browser: plotly.js's cartesian bundle (1.5 MB), the theme
# (without its 1.5 MB icon script: book/_templates/layout.html), KaTeX, the book's scripts and
# the page with its figures
MAX_COLD_LOAD_BYTES = 3_600_000
WIDGET_MANAGER_SCRIPTS = ("require.js", "embed-amd.js")
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
SLACK_PX = 1  # tolerance of the geometric checks (plotly rounds positions)
RENDER_TIMEOUT_MS = 30_000
SLIDER_TIMEOUT_MS = 5_000
NETWORK_QUIET_S = 0.5

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
PAGE_PARAMS = PAGES or [pytest.param(None, id="not-built")]


def is_chapter(page: str) -> bool:
    return re.fullmatch(r"book/ch\d+[^/]*\.html", page) is not None


def chapter_pages() -> dict[str, str]:
    """``{"ch1": "book/ch1_lsa_is_gd.html", ...}``, from the built pages."""
    return {re.match(r"book/(ch\d+)", page).group(1): page for page in PAGES if is_chapter(page)}


def notebook_of(page: str) -> Path:
    """The executed notebook that the page's download button offers."""
    return SOURCES_DIR / Path(page).with_suffix(".ipynb")


def expected_figures(page: str) -> dict[str, dict]:
    """figure id -> trace counts, from the ``nlicl`` metadata of the notebook's outputs."""
    notebook = notebook_of(page)
    if not notebook.exists():
        return {}
    return {info["figure_id"]: info
            for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]
            for output in cell.get("outputs", [])
            if (info := output.get("metadata", {}).get("nlicl"))}


# --- the files of the build (no browser) ------------------------------------------------


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


def _loads_widget_manager(url: str) -> bool:
    return Path(urlparse(url).path).name in WIDGET_MANAGER_SCRIPTS


@pytest.fixture(scope="session")
def built() -> None:
    if not PAGES:
        pytest.skip(NOT_BUILT)


def test_pages_load_nothing_from_outside_and_no_widget_manager(built: None) -> None:
    """Offline, every page works; the training panels are static HTML, so require.js and the
    ipywidgets manager (about 3.8 MB per chapter page) are dead weight."""
    offenders = {}
    for page in PAGES:
        collector = _AssetCollector()
        collector.feed((HTML_DIR / page).read_text(encoding="utf-8"))
        bad = [url for url in collector.urls if _loads_widget_manager(url)
               or re.match(r"^(?:[a-z][a-z0-9+.-]*:)?//", url, re.IGNORECASE)]
        if bad:
            offenders[page] = bad
    assert not offenders, f"pages load assets from outside the site or the widget manager: {offenders}"


RAW_TEX = re.compile(
    r"\$|\\(?:operatorname|mathbb|mathcal|mathrm|mathbf|frac|top|sum|ell|Gamma|sigma|cdot|"
    r"sqrt|left|right|hat|tilde|langle|rangle|infty|alpha|beta|lambda|varepsilon)\b"
)


def test_pages_are_small_and_offer_their_executed_notebook(built: None) -> None:
    """Each page's HTML is under ``MAX_PAGE_BYTES``; a notebook page links its executed
    notebook, which has outputs and holds no stderr (a Python warning) and no error output but
    in a cell tagged ``raises-exception``."""
    problems = [f"{page}: {size} bytes" for page in PAGES
                if (size := (HTML_DIR / page).stat().st_size) > MAX_PAGE_BYTES]
    notebook_pages = [page for page in PAGES if (source := ROOT / Path(page).with_suffix(".md"))
                      .exists() and "file_format: mystnb" in source.read_text(encoding="utf-8")]
    assert notebook_pages, "no notebook page found"
    for page in notebook_pages:
        notebook = notebook_of(page)
        link = os.path.relpath(notebook, (HTML_DIR / page).parent)
        if not notebook.exists() or f'href="{link}"' not in (HTML_DIR / page).read_text(encoding="utf-8"):
            problems.append(f"{page}: no download link to an executed {link}")
            continue
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        if not any(cell.get("outputs") for cell in cells):
            problems.append(f"{notebook.name} has no outputs")
        for index, cell in enumerate(cells):
            expected = "raises-exception" in cell.get("metadata", {}).get("tags", [])
            problems += [f"{notebook.name}, cell {index}: {str(output)[:120]}"
                         for output in cell.get("outputs", []) if output.get("name") == "stderr"
                         or (output.get("output_type") == "error" and not expected)]
    assert not problems, "\n".join(problems)


# --- the browser -------------------------------------------------------------------------


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def serve_site() -> tuple[ThreadingHTTPServer, str]:
    """The built site served on localhost from a thread: the server and its URL."""
    handler = functools.partial(_QuietHandler, directory=str(HTML_DIR))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


@pytest.fixture(scope="session")
def site_url(built: None) -> Iterator[str]:
    server, url = serve_site()
    yield url
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def browser(site_url: str) -> Iterator[object]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: `make browser-test` installs Debian's chromium")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS,
                                             headless=True)
        yield browser
        browser.close()


class PageWatch:
    """What a page did while it was open: its responses, and everything that went wrong."""

    def __init__(self) -> None:
        self.console_errors: list[str] = []
        self.page_errors: list[str] = []
        self.failed_requests: list[str] = []
        self.blocked_requests: list[str] = []
        self.responses: list[object] = []
        self.in_flight = 0
        self.last_activity = time.monotonic()

    def watch(self, page: object) -> None:
        page.on("console", self._on_console)
        page.on("pageerror", lambda error: self.page_errors.append(str(error)))
        page.on("request", self._on_request)
        page.on("requestfinished", self._on_request_done)
        page.on("requestfailed", self._on_request_failed)
        page.on("response", self._on_response)

    def _on_console(self, message: object) -> None:
        if message.type == "error":
            self.console_errors.append(f"{message.text} ({message.location.get('url')})")

    def _on_request(self, request: object) -> None:
        self.in_flight += 1
        self.last_activity = time.monotonic()

    def _on_request_done(self, request: object) -> None:
        self.in_flight -= 1
        self.last_activity = time.monotonic()

    def _on_request_failed(self, request: object) -> None:
        self._on_request_done(request)
        self.failed_requests.append(f"{request.url}: {request.failure}")

    def _on_response(self, response: object) -> None:
        self.responses.append(response)
        if response.status >= 400:
            self.failed_requests.append(f"{response.url}: HTTP {response.status}")

    def block_outside(self, route: object) -> None:
        if urlparse(route.request.url).hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            self.blocked_requests.append(route.request.url)
            route.abort("blockedbyclient")

    def wait_until_quiet(self, page: object) -> None:
        """Until no request is in flight and none started for NETWORK_QUIET_S (web fonts
        that MathJax or the theme ask for after the load event included)."""
        page.evaluate("() => document.fonts.ready.then(() => true)")
        deadline = time.monotonic() + RENDER_TIMEOUT_MS / 1000
        while time.monotonic() < deadline:
            if self.in_flight <= 0 and time.monotonic() - self.last_activity >= NETWORK_QUIET_S:
                return
            page.wait_for_timeout(100)

    def bytes_loaded(self) -> int:
        """Sum of the response bodies (Content-Length, else the body itself)."""
        total = 0
        for response in self.responses:
            length = response.headers.get("content-length")
            if length is not None:
                total += int(length)
                continue
            try:
                total += len(response.body())
            except Exception:  # a redirect or an aborted response has no body
                pass
        return total

    def assert_none(self, page: str) -> None:
        problems = {
            "console errors": self.console_errors,
            "uncaught exceptions": self.page_errors,
            "failed requests": self.failed_requests,
            "requests outside localhost (blocked)": self.blocked_requests,
        }
        problems = {name: values for name, values in problems.items() if values}
        assert not problems, f"{page}: {json.dumps(problems, indent=1)}"


class OpenPage:
    """A book page open in the browser, with what it did so far."""

    def __init__(self, name: str, page: object, watch: PageWatch) -> None:
        self.name = name
        self.page = page
        self.watch = watch

    def js(self, expression: str, arg: object = None) -> object:
        return self.page.evaluate(expression, arg)

    def figures(self) -> list[dict]:
        return self.js("window.nlicl.figures()")


def _open(browser: object, site_url: str, page_name: str, viewport: dict) -> OpenPage:
    """The page, loaded and settled: its figures drawn."""
    watch = PageWatch()
    context = browser.new_context(viewport=viewport, color_scheme="light", service_workers="block")
    context.route("**/*", watch.block_outside)
    page = context.new_page()
    watch.watch(page)
    page.goto(site_url + page_name, wait_until="load")
    page.wait_for_load_state("networkidle")
    page.add_script_tag(path=str(PAGE_CHECKS_JS))
    page.wait_for_function("window.nlicl.allFiguresDrawn() && window.nlicl.allWidgetsRendered()",
                           timeout=RENDER_TIMEOUT_MS)
    opened = OpenPage(page_name, page, watch)
    folder = os.environ.get("NLICL_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        size = f"{viewport['width']}px"
        page.screenshot(path=str(Path(folder) / f"{page_name.replace('/', '_')}-{size}.png"),
                        full_page=True)
    return opened


def _fail_all(page_name: str, what: str, problems: list[str]) -> None:
    assert not problems, f"{page_name}: {what}:\n" + "\n".join(problems)


def _trace_problems(figure_id: str, trace: dict) -> list[str]:
    label = f"figure {figure_id}, trace {trace['index']} {trace['name']!r} ({trace['type']})"
    if trace.get("gl"):
        return []  # drawn into a canvas: nothing to count
    if not trace["group"]:
        return [f"{label}: no drawn group"]
    problems = []
    markers = trace.get("markers")
    if markers:
        want = max(1, markers["expected"])
        if markers["drawn"] < want:
            problems.append(f"{label}: drew {markers['drawn']} markers for {markers['expected']} "
                            "(x, y) pairs")
        if markers["offPlot"]:
            problems.append(f"{label}: {markers['offPlot']} markers outside the plot area "
                            f"{markers['area']}, e.g. at {markers['offSample']}")
    lines = trace.get("lines")
    if lines and not markers:  # a line-only trace: the line is all the reader sees
        if lines["longest"] < 2:
            problems.append(f"{label}: drew no line ({lines['segments']} path(s), longest "
                            f"{lines['longest']} point(s))")
        elif not lines["inPlot"]:
            problems.append(f"{label}: its line lies outside the plot area")
    for kind, what in (("bars", "bars"), ("images", "heatmap image"), ("fills", "fill"),
                       ("paths", "paths")):
        marks = trace.get(kind)
        if marks is None:
            continue
        if marks["drawn"] < 1:
            problems.append(f"{label}: drew no {what}")
        elif not marks.get("inPlot", True):
            problems.append(f"{label}: its {what} lies outside the plot area")
    if trace.get("text") and trace["text"]["drawn"] < 1 and not markers and not lines:
        problems.append(f"{label}: drew no text")
    if not any(trace.get(kind) for kind in ("markers", "lines", "bars", "images", "fills",
                                            "paths", "text")):
        problems.append(f"{label}: draws nothing (mode {trace.get('mode')!r}, no fill)")
    return problems


def _inside(inner: dict, outer: dict) -> bool:
    return (inner["left"] >= outer["left"] - SLACK_PX and inner["right"] <= outer["right"] + SLACK_PX
            and inner["top"] >= outer["top"] - SLACK_PX
            and inner["bottom"] <= outer["bottom"] + SLACK_PX)


def _box(box: dict) -> str:
    return f"[{box['left']:.0f}, {box['top']:.0f}, {box['right']:.0f}, {box['bottom']:.0f}]"


HEADER_ICONS_JS = """() => Array.from(document.querySelectorAll(
    '.bd-header-article i[class*="fa-"], header i[class*="fa-"]'))
  .filter((i) => i.getClientRects().length && getComputedStyle(i).display !== 'none')
  .map((i) => {
    const before = getComputedStyle(i, '::before');
    const font = getComputedStyle(i).fontFamily;
    return {classes: i.className, glyph: before.content, font,
            loaded: document.fonts.check(`${getComputedStyle(i).fontWeight} 16px ${font}`),
            width: Math.round(i.getBoundingClientRect().width)};
  })"""

UNTYPESET_MATH_JS = """() => Array.from(document.querySelectorAll('span.math, div.math'))
  .filter((m) => !m.querySelector('.katex') || m.querySelector('.katex-error'))
  .map((m) => (m.textContent || '').trim().slice(0, 60))"""


# the elements of the article that end past its right edge and sit in no box of their own
# that scrolls sideways and fits the column; and whether the page itself scrolls sideways
OVERFLOW_JS = """() => {
  const column = document.querySelector('article.bd-article') || document.querySelector('main');
  const edge = column.getBoundingClientRect().right + 1;
  const wide = [];
  for (const element of column.querySelectorAll('.katex .base, table, pre, img, .nlicl-plotly')) {
    const box = element.getBoundingClientRect();
    if (box.width === 0 || box.right <= edge) continue;
    let scrolls = false;
    for (let a = element.parentElement; a && a !== column; a = a.parentElement) {
      if (['auto', 'scroll'].includes(getComputedStyle(a).overflowX)) {
        scrolls = a.getBoundingClientRect().right <= edge;
        break;
      }
    }
    const source = (element.closest('.katex') || element).querySelector('annotation') || element;
    if (!scrolls) wide.push(`${element.tagName.toLowerCase()} ${JSON.stringify(
      (source.textContent || '').trim().slice(0, 40))} ends at x = ${Math.round(box.right)}`);
  }
  if (document.documentElement.scrollWidth > innerWidth + 1) {
    wide.push(`the page is ${document.documentElement.scrollWidth} px wide`);
  }
  return wide;
}"""


# the text of the article as a reader sees it: prose and cell outputs (a printed line, a text
# or HTML result), without the typeset maths, scripts, code cells' input and code blocks
READER_TEXT_JS = """() => {
  const article = (document.querySelector('article.bd-article') || document.body).cloneNode(true);
  article.querySelectorAll('script, style, template, .math, .katex, .cell_input').forEach((e) => e.remove());
  article.querySelectorAll('pre, div[class*="highlight"]').forEach((e) => {
    if (!e.closest('.cell_output')) e.remove();
  });
  return article.textContent.replace(/\\s+/g, ' ');
}"""


def _slider_label_problems(opened: OpenPage) -> list[str]:
    """Each slider names every step or none: all its step labels drawn, none overlapping
    another or leaving the figure; or no step label at all and the current value shown. Not
    some: plotly draws every second label when they do not fit, and the ticks between them
    (Fig. 3.4's worst seeds) name nothing."""
    problems = []
    for figure in opened.figures():
        sliders = opened.js("id => window.nlicl.sliderLabels(id)", figure["id"])
        for index, slider in enumerate(sliders):
            where, labels = f"figure {figure['id']}, slider {index}", slider["labels"]
            if not labels:
                if slider["value"] is None:
                    problems.append(f"{where}: no step label and no current value")
                continue
            if len(labels) != slider["steps"]:
                problems.append(f"{where}: {len(labels)} of {slider['steps']} step labels drawn "
                                f"({[label['text'] for label in labels]})")
            ordered = sorted(labels, key=lambda label: label["box"]["left"])
            problems += [f"{where}: {a['text']!r} {_box(a['box'])} overlaps {b['text']!r} "
                         f"{_box(b['box'])}" for a, b in itertools.pairwise(ordered)
                         if a["box"]["right"] > b["box"]["left"] + SLACK_PX]
            problems += [f"{where}: {label['text']!r} {_box(label['box'])} leaves the figure "
                         f"{_box(slider['figure'])}" for label in labels
                         if not _inside(label["box"], slider["figure"])]
    return problems


def _caption_problems(opened: OpenPage) -> list[str]:
    """A table's caption is read whole whatever the table's scroll: at the scroll box's start
    and at its end, the caption lies inside the box's visible width, its text not cut."""
    problems = []
    for caption in opened.js("window.nlicl.tableCaptions()"):
        if caption["overflows"]:
            problems.append(f"caption {caption['text']!r}: its text overflows its box")
        for at in caption["positions"]:
            box, seen = at["caption"], at["visible"]
            if box["left"] < seen["left"] - SLACK_PX or box["right"] > seen["right"] + SLACK_PX:
                problems.append(f"caption {caption['text']!r} at scrollLeft {at['scrollLeft']}: "
                                f"{_box(box)}, the scroll box shows {_box(seen)}")
    return problems


def _display_maths_problems(opened: OpenPage) -> list[str]:
    """A display equation wider than its box opens at its start: scrolled to 0, its first
    glyph inside the box (the theme's row-reverse flex box opened it at its end)."""
    problems = []
    for maths in opened.js("window.nlicl.wideDisplayMaths()"):
        where = f"equation {maths['tex']!r}"
        if abs(maths["scrollLeft"]) > SLACK_PX:
            problems.append(f"{where}: opens scrolled to {maths['scrollLeft']} px")
        glyph = maths["glyph"]
        if glyph is None:
            problems.append(f"{where}: no glyph found")
        elif (glyph["box"]["left"] < maths["box"]["left"] - SLACK_PX
              or glyph["box"]["right"] > maths["box"]["right"] + SLACK_PX):
            problems.append(f"{where}: first glyph {glyph['text']!r} at {_box(glyph['box'])}, "
                            f"outside its box {_box(maths['box'])}")
    return problems


def _solution_title_problems(opened: OpenPage) -> list[str]:
    """A tap on a solution's title (most of it the link "Exercise 3.1 (...)") opens the
    solution where it is: its body drawn, the title where it was, no jump to the exercise."""
    before = opened.js("window.nlicl.solutionState()")
    if before is None:
        return []
    if before["open"]:
        return [f"solution {before['id']} is open before any tap"]
    title = opened.page.locator(".solution.dropdown > .admonition-title").first
    link = title.locator("a").first
    target = link if link.count() else title
    target.scroll_into_view_if_needed()
    before = opened.js("window.nlicl.solutionState()")
    target.click()
    try:
        opened.page.wait_for_function("() => window.nlicl.solutionState().open",
                                      timeout=SLIDER_TIMEOUT_MS)
    except Exception:  # playwright's TimeoutError
        pass
    after = opened.js("window.nlicl.solutionState()")
    problems = []
    if not after["open"]:
        problems.append(f"solution {after['id']}: the tap on its title did not open it")
    if after["hash"] != before["hash"] or abs(after["titleTop"] - before["titleTop"]) > 2:
        problems.append(f"solution {after['id']}: the tap moved the page (address "
                        f"{before['hash']!r} -> {after['hash']!r}, title at "
                        f"{before['titleTop']:.0f} -> {after['titleTop']:.0f} px)")
    return problems


@pytest.fixture(scope="class")
def desktop(browser: object, site_url: str, page_name: str) -> Iterator[OpenPage]:
    opened = _open(browser, site_url, page_name, DESKTOP)
    yield opened
    opened.page.context.close()


@pytest.mark.parametrize("page_name", PAGE_PARAMS, scope="class")
class TestDesktop:
    """One browser page per book page (the class-scoped fixture), shared by the tests in
    order; the slider test leaves every slider where it found it."""

    def test_figures_draw_their_traces_and_points(self, desktop: OpenPage) -> None:
        """As many drawn traces as the notebook output says, and every visible trace shows its
        data inside its plot area (a figure with a linear x axis over category names draws its
        traces' groups but no point)."""
        figures = desktop.figures()
        expected = expected_figures(desktop.name)
        assert sorted(f["id"] for f in figures) == sorted(expected), (
            f"{desktop.name}: figures on the page {[f['id'] for f in figures]}, in the "
            f"notebook {sorted(expected)}")
        problems = []
        for figure in figures:
            want = expected[figure["id"]]
            got = (figure["dataTraces"], figure["visibleTraces"], figure["svgTraces"])
            if got != (want["traces"], want["drawn_traces"], want["drawn_traces"]):
                problems.append(f"figure {figure['id']}: (traces, visible, drawn) {got}, the "
                                f"notebook's {want['traces']} traces, {want['drawn_traces']} visible")
            for trace in desktop.js("id => window.nlicl.traceMarks(id)", figure["id"]):
                problems += _trace_problems(figure["id"], trace)
        _fail_all(desktop.name, "figures that do not draw their data", problems)

    def test_every_slider_step_changes_the_figure(self, desktop: OpenPage) -> None:
        for figure in desktop.figures():
            for index, slider in enumerate(figure["sliders"]):
                order = [s for s in range(slider["steps"]) if s != slider["active"]]
                for step in order + [slider["active"]]:
                    before = desktop.js("id => window.nlicl.snapshot(id)", figure["id"])
                    point = desktop.js("([id, i, s]) => window.nlicl.sliderStepPoint(id, i, s)",
                                       [figure["id"], index, step])
                    desktop.page.mouse.click(point["x"], point["y"])
                    try:
                        desktop.page.wait_for_function(
                            "([id, i, s, old]) => window.nlicl.sliderActive(id, i) === s"
                            " && window.nlicl.snapshot(id) !== old",
                            arg=[figure["id"], index, step, before], timeout=SLIDER_TIMEOUT_MS)
                    except Exception as error:  # playwright's TimeoutError
                        raise AssertionError(f"{desktop.name}: figure {figure['id']}: slider "
                                             f"{index}, step {step} did not change the figure"
                                             ) from error

    def test_sliders_work_from_the_keyboard(self, desktop: OpenPage) -> None:
        """A reader without a mouse: each figure's first slider takes the focus (role "slider",
        aria-valuenow), and an arrow key moves it and changes the figure; the other arrow
        brings it back."""
        for figure in [f for f in desktop.figures() if f["sliders"]]:
            slider, where = figure["sliders"][0], f"{desktop.name}: figure {figure['id']}"
            key, back = (("ArrowLeft", "ArrowRight") if slider["active"] >= slider["steps"] - 1
                         else ("ArrowRight", "ArrowLeft"))
            assert desktop.js("id => window.nlicl.focusSlider(id, 0)", figure["id"]), (
                f"{where}: slider 0 takes no keyboard focus or has no role/aria-valuenow")
            before = desktop.js("id => window.nlicl.snapshot(id)", figure["id"])
            desktop.page.keyboard.press(key)
            desktop.page.wait_for_function(
                "([id, old]) => window.nlicl.snapshot(id) !== old", arg=[figure["id"], before],
                timeout=SLIDER_TIMEOUT_MS)
            desktop.page.keyboard.press(back)
            desktop.page.wait_for_function(
                "([id, s]) => window.nlicl.sliderActive(id, 0) === s",
                arg=[figure["id"], slider["active"]], timeout=SLIDER_TIMEOUT_MS)

    def test_no_serious_accessibility_violation(self, desktop: OpenPage) -> None:
        """axe-core (vendored in tests/browser/) finds no serious or critical violation."""
        desktop.page.add_script_tag(path=str(AXE_JS))
        found = desktop.js(
            "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
            ".filter((v) => v.impact === 'serious' || v.impact === 'critical')"
            ".map((v) => `${v.id} (${v.impact}): ${v.nodes.slice(0, 3).map((n) => n.target)}`)")
        _fail_all(desktop.name, "axe", found)

    def test_outputs_fit_the_column_and_formulas_are_typeset(self, desktop: OpenPage) -> None:
        """No printed line or table of a cell's output is wider than the text column, and KaTeX
        typeset every formula (it leaves one it cannot parse as its TeX source)."""
        wide = desktop.js(
            "() => Array.from(document.querySelectorAll("
            "'div.cell_output pre, div.cell_output table'))"
            ".filter((e) => e.scrollWidth > e.clientWidth + 1)"
            ".map((e) => [e.scrollWidth, e.clientWidth, e.textContent.split('\\n')"
            ".reduce((a, b) => (a.length >= b.length ? a : b)).slice(0, 90)])")
        problems = [f"{w} px in {c} px: {line!r}" for w, c, line in wide]
        problems += [f"formula not typeset: {raw!r}" for raw in desktop.js(UNTYPESET_MATH_JS)]
        _fail_all(desktop.name, "outputs wider than their column, raw formulas", problems)

    def test_no_raw_tex_in_the_text(self, desktop: OpenPage) -> None:
        """TeX outside the maths: a formula Markdown broke (a line starting with "+ " inside
        $...$ becomes a list item), or TeX a cell printed ("$P_\\ell$" in a print call)."""
        text = desktop.js(READER_TEXT_JS)
        _fail_all(desktop.name, "TeX outside the maths (the reader sees it raw)", [
            text[max(0, m.start() - 50):m.end() + 30] for m in RAW_TEX.finditer(text)][:3])

    def test_header_icons_draw_from_the_icon_font(self, desktop: OpenPage) -> None:
        """The header's icons are the theme's <i class="fa-..."> drawn by Font Awesome's
        webfont (book/_templates/layout.html leaves out the theme's 1.5 MB icon script)."""
        desktop.watch.wait_until_quiet(desktop.page)
        icons = desktop.js(HEADER_ICONS_JS)
        assert icons, f"{desktop.name}: no visible icon in the header"
        _fail_all(desktop.name, "header icons that do not draw", [
            f"{i['classes']}: glyph {i['glyph']!r}, font {i['font']!r} loaded {i['loaded']}, "
            f"{i['width']} px wide" for i in icons
            if i["glyph"] in ("none", "normal", "") or not i["loaded"] or i["width"] < 4])

    def test_static_training_panel(self, desktop: OpenPage) -> None:
        """The static site shows no ipywidgets view; a chapter shows its training panel as a
        card: the notice (``role="note"``) first, saying the panel trains in this browser, then
        the Train button, enabled (Chromium runs module workers, so the page's loader in
        nlicl-figures.js enables the controls; the trainer itself loads only on the press)."""
        views = desktop.js("window.nlicl.widgetViews()")
        assert not views, f"{desktop.name}: {len(views)} ipywidgets view(s)"
        panels = desktop.js("window.nlicl.staticPanels()")
        if not is_chapter(desktop.name):
            return
        assert panels, f"{desktop.name}: no div.nlicl-static-panel (a chapter's training panel)"
        problems = []
        for index, panel in enumerate(panels):
            if panel["firstChildRole"] != "note":
                problems.append(f"panel {index}: its first child is <{panel['firstChild']}>, "
                                "not the role='note' notice")
            if "trains in your browser" not in (panel["noticeText"] or ""):
                problems.append(f"panel {index}: its notice reads {panel['noticeText']!r}")
            train = [b for b in panel["buttons"] if "train" in b["text"].lower()]
            if not train:
                problems.append(f"panel {index}: no Train button")
            problems += [f"panel {index}: {b['text']!r} is disabled or before the notice"
                         for b in train if b["disabled"] or not b["afterNotice"]]
        _fail_all(desktop.name, "training panels", problems)

    def test_slider_steps_are_all_named_or_the_value_shown(self, desktop: OpenPage) -> None:
        _fail_all(desktop.name, "sliders with unnamed steps at 1280 px",
                  _slider_label_problems(desktop))

    def test_table_captions_stay_whole(self, desktop: OpenPage) -> None:
        _fail_all(desktop.name, "table captions cut at 1280 px", _caption_problems(desktop))

    def test_display_maths_open_at_their_start(self, desktop: OpenPage) -> None:
        _fail_all(desktop.name, "display maths at 1280 px", _display_maths_problems(desktop))

    def test_cold_load_weight(self, desktop: OpenPage) -> None:
        desktop.watch.wait_until_quiet(desktop.page)
        size = desktop.watch.bytes_loaded()
        largest = sorted(((int(r.headers.get("content-length") or 0), urlparse(r.url).path)
                          for r in desktop.watch.responses), reverse=True)[:5]
        assert size <= MAX_COLD_LOAD_BYTES, (
            f"{desktop.name} loads {size / 1e6:.2f} MB in a fresh browser, over "
            f"{MAX_COLD_LOAD_BYTES / 1e6} MB; largest: {largest}")

    def test_a_solution_title_opens_the_solution(self, desktop: OpenPage) -> None:
        _fail_all(desktop.name, "solution titles at 1280 px", _solution_title_problems(desktop))

    def test_nothing_failed(self, desktop: OpenPage) -> None:
        desktop.watch.assert_none(desktop.name)


@pytest.fixture(scope="class")
def phone(browser: object, site_url: str, page_name: str) -> Iterator[OpenPage]:
    opened = _open(browser, site_url, page_name, PHONE)
    yield opened
    opened.page.context.close()


@pytest.mark.parametrize("page_name", PAGE_PARAMS, scope="class")
class TestPhone:
    """The page at phone width, 390 x 844 CSS pixels."""

    def test_figures_and_their_text_fit(self, phone: OpenPage) -> None:
        """Every figure fits its column, and every visible text of it (title, legend, axis
        titles, tick labels, annotations, slider labels) lies inside the figure."""
        problems = []
        for figure in phone.figures():
            if figure["svgWidth"] > figure["containerWidth"] + SLACK_PX:
                problems.append(f"figure {figure['id']} is {figure['svgWidth']} px wide in a "
                                f"{figure['containerWidth']} px column")
            layout = phone.js("id => window.nlicl.figureTextLayout(id)", figure["id"])
            problems += [f"figure {figure['id']}: {text['kind']} {text['text']!r} at "
                         f"{_box(text['box'])} leaves the figure {_box(layout['figure'])}"
                         for text in layout["texts"] if not _inside(text["box"], layout["figure"])]
        _fail_all(phone.name, "figures cut off at 390 px", problems)

    def test_nothing_runs_past_the_column(self, phone: OpenPage) -> None:
        """A formula or table wider than the column scrolls in its own box; the page itself
        never scrolls sideways."""
        _fail_all(phone.name, "wider than the column at 390 px", phone.js(OVERFLOW_JS))

    def test_slider_steps_are_all_named_or_the_value_shown(self, phone: OpenPage) -> None:
        _fail_all(phone.name, "sliders with unnamed steps at 390 px", _slider_label_problems(phone))

    def test_table_captions_stay_whole(self, phone: OpenPage) -> None:
        _fail_all(phone.name, "table captions cut at 390 px", _caption_problems(phone))

    def test_display_maths_open_at_their_start(self, phone: OpenPage) -> None:
        _fail_all(phone.name, "display maths at 390 px", _display_maths_problems(phone))

    def test_a_solution_title_opens_the_solution(self, phone: OpenPage) -> None:
        _fail_all(phone.name, "solution titles at 390 px", _solution_title_problems(phone))

    def test_nothing_failed(self, phone: OpenPage) -> None:
        phone.watch.assert_none(phone.name)
