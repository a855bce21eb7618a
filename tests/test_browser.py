"""The built book, opened page by page in headless Chromium, offline.

Run it after ``make book`` with ``make browser-test`` (which installs Debian's chromium when
it is missing). It serves ``_build/html`` on localhost and aborts every request that leaves
localhost.

Without a browser (files of the build only):

* no page loads a script, style sheet or image from outside the site, nor the ipywidgets
  manager (``require.js``, ``embed-amd.js``): the static site has no widget views;
* no raw TeX in the text a reader sees: prose, and the text of cell outputs (printed streams,
  ``text/plain`` and ``text/html`` results); code cells' input and code blocks are left out.
  Nor in the figures' text (trace names, titles, axis titles, annotations, slider labels, in
  the ``Plotly.newPlot`` JSON): plotly prints ``$...$`` literally;
* every page's HTML stays under 2 MB, and each notebook page offers its executed ``.ipynb``;
* no executed notebook's output holds a Python warning or a traceback.

For every page at desktop width (``TestDesktop``; one browser page per book page, one test per
concern):

* every plotly figure drew as many traces as its notebook output says (``nlicl_lib.pages.display``
  records the counts in the output's metadata), and every visible trace drew its data inside
  its plot area: a marker per (x, y) pair, a line with at least two points, bars, a heatmap
  image (``window.nlicl.traceMarks``);
* every plotly slider changes the drawn figure at every step (clicked like a reader would),
  and is operable from the keyboard: focusable (``tabindex="0"``), ``role="slider"`` with
  ``aria-valuenow``; ArrowRight changes the figure and increases ``aria-valuenow``;
* every figure has a text alternative: ``role="figure"``, an ``aria-label`` and an
  ``aria-describedby`` that points to a non-empty description;
* no printed line or table of a cell's output is wider than the text column;
* no gap over ``MAX_TITLE_GAP_PX`` between a figure's title and its top legend (or its plot);
* every chapter page holds a static training panel (``div.nlicl-static-panel``: a notice with
  ``role="note"`` first, then a disabled Train button), and no ipywidgets view;
* axe-core finds no ``serious`` or ``critical`` violation, and no colour-contrast item it left
  undecided (``incomplete``), except those it cannot judge for the reasons documented at
  ``AXE_UNDECIDABLE`` (text whose background it could not find is judged by the test); and
  the computed contrast of every visible text element of ``<main>`` against its composited
  background reaches WCAG's 4.5 (3 for large text): both in the theme's light and dark modes;
* opened alone (a cold cache), the page loads at most ``MAX_COLD_LOAD_BYTES``, every request
  counted; a table of page weights is printed at the end of the run;
* every display equation opens at its start: scrolled to its left edge, its left-hand side in
  view (also at phone width);
* nothing fails: no console error, no uncaught exception, no failed or refused request.

At phone width, 390 x 844 (``TestPhone``): every figure fits its column, every visible text of
it (title, legend, axis titles, tick labels, annotations, slider labels) lies inside the
figure, the title overlaps neither the legend, the plot area nor a subplot title, and subplot
titles do not overlap one another; and nothing fails, as above.

Page weight as a reader pays it (``test_pages_share_their_assets_through_the_cache``): the
first chapter opened in a fresh browser, then every other page of the book in the same browser,
its HTTP cache on: each further page transfers little more than its own HTML, because every
page loads the same plotly.js, KaTeX, theme and scripts (``html_js_files``), which the browser
fetched with the first one. The bytes transferred per page are printed at the end of the run.

Navigation (``TestNavigation``, on a chapter page): on a touch phone (390 x 844) and tablet
(768 x 1024), tapping the header's chapter-list button opens a drawer whose five chapter links
are shown on top, inside the viewport, and tapping the backdrop closes it (twice over); the
page-contents button does the same with the page's section headings. At desktop width a click
on the header's sidebar button collapses the primary sidebar and a second click brings it back.

Set ``NLICL_SCREENSHOTS=DIR`` to save a screenshot of every page (desktop, dark and phone), and
``NLICL_HTML_DIR=DIR`` to test another copy of the built site than ``_build/html``.
"""

from __future__ import annotations

import functools
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
MAX_CHAPTER_PAGE_BYTES = 2_000_000  # the HTML file alone
# everything a page loads in a fresh browser: plotly.js's cartesian bundle (1.5 MB), the theme
# (its styles and scripts, and the icon font's glyphs the page shows, without the theme's 1.5 MB
# icon script: book/_templates/layout.html), KaTeX (0.28 MB of script and the fonts the page
# uses), the book's scripts and the page with its figures; every page loads the same shared files
MAX_COLD_LOAD_BYTES = 3_600_000
# what a page transfers beyond its own HTML once the browser holds the shared files (the first
# chapter's): the KaTeX fonts it is the first to use, the searches' index, revalidations
MAX_WARM_EXTRA_BYTES = 150_000
WIDGET_MANAGER_SCRIPTS = ("require.js", "embed-amd.js")
DESKTOP = {"width": 1280, "height": 900}
MAX_TITLE_GAP_PX = 30  # between a figure's title and its legend (or plot)
PHONE = {"width": 390, "height": 844}
BLOCKING_IMPACTS = {"serious", "critical"}
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


def _loads_widget_manager(url: str) -> bool:
    return Path(urlparse(url).path).name in WIDGET_MANAGER_SCRIPTS


def _loaded_urls(page: str) -> list[str]:
    collector = _AssetCollector()
    collector.feed((HTML_DIR / page).read_text(encoding="utf-8"))
    return collector.urls


@pytest.fixture(scope="session")
def built() -> None:
    if not PAGES:
        pytest.skip(NOT_BUILT)


def test_pages_load_nothing_from_outside(built: None) -> None:
    offenders = {page: external for page in PAGES
                 if (external := [url for url in _loaded_urls(page) if _is_external(url)])}
    assert not offenders, f"pages load assets from outside the site: {offenders}"


def test_no_page_loads_the_widget_manager(built: None) -> None:
    """The training panels are static HTML: require.js and the ipywidgets manager are dead
    weight (about 3.8 MB per chapter page)."""
    offenders = {page: scripts for page in PAGES
                 if (scripts := [url for url in _loaded_urls(page) if _loads_widget_manager(url)])}
    assert not offenders, f"pages load the ipywidgets manager: {offenders}"


RAW_TEX = re.compile(
    r"\$|\\(?:operatorname|mathbb|mathcal|mathrm|mathbf|frac|top|sum|ell|Gamma|sigma|cdot|"
    r"sqrt|left|right|hat|tilde|langle|rangle|infty|alpha|beta|lambda|varepsilon)\b"
)
FIGURE_TEX = re.compile(r"\$|\\[A-Za-z]+")


class _ReaderText(HTMLParser):
    """The text of a page's ``<main>`` as a reader sees it: prose and cell outputs.

    Left out: scripts and styles; math (``span.math``/``div.math``: KaTeX draws it); code
    cells' input (``div.cell_input``) and code blocks (``pre``, ``div.highlight*``) outside
    cell outputs. Kept: everything inside ``div.cell_output`` (printed streams and
    ``text/plain`` results are ``<pre>`` there, ``text/html`` results their own HTML), since
    TeX that a cell *prints* reaches the reader as literal text.
    """

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
            "param", "source", "track", "wbr"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._in_main = False
        self._stack: list[tuple[str, bool, bool]] = []  # (tag, skipped, cell output)

    def _skipped(self) -> bool:
        return bool(self._stack) and self._stack[-1][1]

    def _in_output(self) -> bool:
        return bool(self._stack) and self._stack[-1][2]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "main":
            self._in_main = True
        if not self._in_main or tag in self.VOID:
            return
        classes = set((dict(attrs).get("class") or "").split())
        in_output = self._in_output() or "cell_output" in classes
        code_block = tag == "pre" or any(c.startswith("highlight") for c in classes)
        skip = (
            self._skipped()
            or tag in {"script", "style", "template"}
            or (tag in {"span", "div"} and "math" in classes)
            or "cell_input" in classes
            or (code_block and not in_output)
        )
        self._stack.append((tag, skip, in_output))

    def handle_endtag(self, tag: str) -> None:
        if tag == "main":
            self._in_main = False
            self._stack.clear()
            return
        for depth in range(len(self._stack) - 1, -1, -1):  # tolerate unclosed inner tags
            if self._stack[depth][0] == tag:
                del self._stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        if self._in_main and not self._skipped():
            self.parts.append(data)


def reader_text(page_html: str) -> str:
    parser = _ReaderText()
    parser.feed(page_html)
    parser.close()
    return " ".join(" ".join(parser.parts).split())


@pytest.mark.parametrize("query", ["preconditioner", "kernel"])
def test_search_snippets_show_no_tex(browser: object, site_url: str, query: str) -> None:
    """Sphinx summarises a search hit from the page's HTML, where formulas are TeX source:
    nlicl-math.js puts "…" in their place."""
    context = browser.new_context(viewport=DESKTOP, service_workers="block")
    page = context.new_page()
    page.goto(f"{site_url}search.html?q={query}", wait_until="networkidle")
    page.wait_for_function("() => document.querySelectorAll('#search-results p.context').length"
                           " >= 3", timeout=RENDER_TIMEOUT_MS)
    page.wait_for_timeout(500)  # the last summaries
    snippets = page.eval_on_selector_all("#search-results p.context",
                                         "els => els.map(e => e.textContent)")
    context.close()
    tex = [text for text in snippets if RAW_TEX.search(text) or "\\(" in text or "\\[" in text]
    assert not tex, f"search snippets with TeX source for {query!r}: {tex[:2]}"


class _ProseText(_ReaderText):
    """The article's prose only: no cell output, heading or link text (a term in a heading or
    inside another link cannot carry the glossary link)."""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "article" and "bd-article" in (dict(attrs).get("class") or ""):
            self._in_main = True
            self._stack.clear()
        super().handle_starttag(tag, attrs)
        classes = set((dict(attrs).get("class") or "").split())
        if self._in_main and self._stack and self._stack[-1][0] == tag and (
                "cell_output" in classes or tag in {"h1", "h2", "h3", "h4", "a", "figcaption"}):
            self._stack[-1] = (tag, True, self._stack[-1][2])

    def handle_endtag(self, tag: str) -> None:
        if tag == "article":
            self._in_main = False
            self._stack.clear()
            return
        super().handle_endtag(tag)


def glossary_entries() -> list[tuple[list[str], set[str]]]:
    """Each glossary entry's terms and their anchors (``term-...``), from the built glossary."""
    html = (HTML_DIR / "book" / "glossary.html").read_text(encoding="utf-8")
    entries = []
    for block in re.findall(r"<dt[^>]*>.*?</dt>(?:\s*<dt[^>]*>.*?</dt>)*", html, re.S):
        ids = re.findall(r'<dt id="(term-[^"]+)"', block)
        terms = [re.sub(r"<a class=\"headerlink\".*?</a>|<[^>]+>|¶", "", t, flags=re.S).strip()
                 for t in re.findall(r"<dt[^>]*>(.*?)</dt>", block, re.S)]
        entries.append(([t for t in terms if t], set(ids)))
    return entries


def test_every_glossary_term_a_chapter_uses_links_to_the_glossary(built: None) -> None:
    entries = glossary_entries()
    assert len(entries) >= 15, entries
    missing = {}
    for page in [p for p in PAGES if is_chapter(p) or p == "book/intro.html"]:
        html = (HTML_DIR / page).read_text(encoding="utf-8")
        parser = _ProseText()
        parser.feed(html)
        prose = " ".join(" ".join(parser.parts).split())
        for terms, ids in entries:
            used = [t for t in terms if re.search(  # whole words: "GLU-LSA" is neither term
                rf"(?<![\w-]){re.escape(t)}(s)?(?![\w-])", prose, 0 if t.isupper() else re.I)]
            linked = any(f'glossary.html#{anchor}"' in html for anchor in ids)
            if used and not linked:
                missing.setdefault(page, []).append(used[0])
    assert not missing, f"glossary terms used without a link to the glossary: {missing}"


def test_no_raw_tex_in_the_text(built: None) -> None:
    """TeX outside the maths: a formula Markdown broke (a line starting with "+ " inside $...$
    becomes a list item), or TeX a cell printed ("$P_\\ell$" in a print call)."""
    offenders = {}
    for page in PAGES:
        text = reader_text((HTML_DIR / page).read_text(encoding="utf-8"))
        hits, end = [], -1
        for match in RAW_TEX.finditer(text):
            if match.start() > end:  # one excerpt per stretch of TeX
                hits.append(text[max(0, match.start() - 50):match.end() + 30])
                end = match.end() + 30
        if hits:
            offenders[page] = hits[:3]
    assert not offenders, f"TeX outside the maths (the reader sees it raw): {offenders}"


_NEWPLOT = re.compile(r"Plotly\.newPlot\(\s*")
_COMMA = re.compile(r"\s*,\s*")
_IDENTIFIER = re.compile(r"[\w$.]+")


def figure_specs(page_html: str) -> list[tuple[str, list, dict]]:
    """(id, data, layout) of every ``Plotly.newPlot("id", [data], {layout}, ...)`` call."""
    decoder = json.JSONDecoder()
    specs = []
    for match in _NEWPLOT.finditer(page_html):
        position, args = match.end(), []
        for index in range(3):
            try:
                value, position = decoder.raw_decode(page_html, position)
            except json.JSONDecodeError:
                identifier = _IDENTIFIER.match(page_html, position)
                if index > 0 or identifier is None:
                    raise AssertionError(
                        f"cannot read the figure in {page_html[match.start():][:120]!r}") from None
                value, position = identifier.group(), identifier.end()
            args.append(value)
            comma = _COMMA.match(page_html, position)
            position = comma.end() if comma else position
        specs.append((str(args[0]), args[1], args[2]))
    return specs


FIGURE_TEXT_KEYS = {"name", "text", "title", "label", "prefix", "suffix", "titles", "ticktext",
                    "texttemplate"}


def figure_strings(value: object, path: str = "") -> Iterator[tuple[str, str]]:
    """(path, string) of every text a figure can show: trace names and text labels, titles,
    axis titles, annotations, legend titles, slider labels and the per-step titles a slider
    sets (in its steps' ``args`` or in ``layout.meta.nlicl_sliders.titles``). The layout's
    template (plotly's theme) is left out."""
    if isinstance(value, dict):
        for key, item in value.items():
            if path == "layout" and key == "template":
                continue
            yield from figure_strings(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from figure_strings(item, f"{path}[{index}]")
    elif isinstance(value, str):
        last_key = re.sub(r"\[\d+\]", "", path).rsplit(".", 1)[-1]
        if last_key in FIGURE_TEXT_KEYS:
            yield path, value


def test_no_raw_tex_in_figure_text(built: None) -> None:
    """plotly.js typesets "$...$" only with MathJax 2 configured for it; the book's figures
    show it as literal text. Use Unicode (ℓ, Γ, ², ·) in figure text."""
    offenders = []
    for page in PAGES:
        for figure_id, data, layout in figure_specs((HTML_DIR / page).read_text(encoding="utf-8")):
            strings = [*figure_strings(data, "data"), *figure_strings(layout, "layout")]
            offenders += [f"{page}: figure {figure_id}, {path}: {text!r}"
                          for path, text in strings if FIGURE_TEX.search(text)]
    assert not offenders, "TeX in figure text (plotly prints it raw):\n" + "\n".join(offenders)


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
        page_html = (HTML_DIR / page).read_text(encoding="utf-8")
        link = os.path.relpath(notebook, (HTML_DIR / page).parent)
        assert f'href="{link}"' in page_html, f"{page} has no download link to {link}"


def test_executed_notebooks_hold_no_warnings(built: None) -> None:
    """No stderr (a Python warning is printed there; the strict build fails on it too, with
    ``execute.stderr_output: warn``) and no error output but in a cell tagged
    ``raises-exception``, in the notebooks the site offers."""
    problems = []
    for notebook in sorted(SOURCES_DIR.rglob("*.ipynb")):
        for index, cell in enumerate(json.loads(notebook.read_text(encoding="utf-8"))["cells"]):
            expected = "raises-exception" in cell.get("metadata", {}).get("tags", [])
            for output in cell.get("outputs", []):
                if output.get("name") == "stderr" or (
                        output.get("output_type") == "error" and not expected):
                    problems.append(f"{notebook.name}, cell {index}: {str(output)[:120]}")
    assert not problems, "warnings or tracebacks in the outputs:\n" + "\n".join(problems)


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


class _PageWeights:
    """pytest plugin: the bytes each page loaded, printed as a table after the run."""

    def __init__(self) -> None:
        self.bytes: dict[str, int] = {}
        self.walk: list[tuple[str, int, int]] = []  # (page, bytes transferred, HTML bytes)

    def pytest_terminal_summary(self, terminalreporter: object) -> None:
        if self.bytes:
            terminalreporter.section("bytes each page loads in a fresh browser")
            for page, size in sorted(self.bytes.items()):
                flag = "  over the limit" if size > MAX_COLD_LOAD_BYTES else ""
                terminalreporter.write_line(f"{page:<36} {size / 1e6:7.2f} MB{flag}")
            terminalreporter.write_line(f"(at most {MAX_COLD_LOAD_BYTES / 1e6:.1f} MB)")
        if self.walk:
            terminalreporter.section("bytes transferred per page, as a reader pays them "
                                     "(one browser, its cache on)")
            for index, (page, size, html) in enumerate(self.walk):
                cache = "cold" if index == 0 else "warm"
                terminalreporter.write_line(f"{cache} {page:<36} {size / 1e6:7.3f} MB "
                                            f"(its HTML {html / 1e6:.3f} MB)")
            total = sum(size for _, size, _ in self.walk)
            terminalreporter.write_line(f"all {len(self.walk)} pages: {total / 1e6:.2f} MB")


@pytest.fixture(scope="session")
def page_weights(request: pytest.FixtureRequest) -> _PageWeights:
    weights = _PageWeights()
    request.config.pluginmanager.register(weights, "nlicl-page-weights")
    return weights


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

    def set_mode(self, mode: str) -> None:
        """pydata-sphinx-theme's light or dark mode (a data attribute on <html>). The theme
        animates the colour change; checks must see the final colours, so transitions are
        switched off first."""
        self.page.add_style_tag(content="*, *::before, *::after { transition: none !important; }")
        self.js(
            "(mode) => new Promise((resolve) => {"
            " document.documentElement.dataset.mode = mode;"
            " document.documentElement.dataset.theme = mode;"
            " requestAnimationFrame(() => requestAnimationFrame(resolve)); })",
            mode,
        )


def _open(browser: object, site_url: str, page_name: str, viewport: dict,
          **context_options: object) -> OpenPage:
    """The page, loaded and settled; ``context_options`` go to playwright's ``new_context``
    (``has_touch``, ``is_mobile`` for a phone or a tablet)."""
    watch = PageWatch()
    context = browser.new_context(viewport=viewport, color_scheme="light",
                                  service_workers="block", **context_options)
    context.route("**/*", watch.block_outside)
    page = context.new_page()
    watch.watch(page)
    page.goto(site_url + page_name, wait_until="load")
    page.wait_for_load_state("networkidle")
    page.add_script_tag(path=str(PAGE_CHECKS_JS))
    # Widget views, if a page still has any, are waited for so that the checks see a settled
    # page; TestDesktop.test_static_training_panels fails on them.
    page.wait_for_function("window.nlicl.allFiguresDrawn() && window.nlicl.allWidgetsRendered()",
                           timeout=RENDER_TIMEOUT_MS)
    return OpenPage(page_name, page, watch)


def _screenshot(opened: OpenPage, suffix: str) -> None:
    folder = os.environ.get("NLICL_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        path = Path(folder) / f"{opened.name.replace('/', '_')}-{suffix}.png"
        opened.page.screenshot(path=str(path), full_page=True)


def _wait_for_change(opened: OpenPage, figure_id: str, before: str, what: str) -> None:
    try:
        opened.page.wait_for_function(
            "([id, old]) => window.nlicl.snapshot(id) !== old",
            arg=[figure_id, before],
            timeout=SLIDER_TIMEOUT_MS,
        )
    except Exception as error:  # playwright's TimeoutError
        raise AssertionError(f"{opened.name}: figure {figure_id}: {what} did not change the "
                             "drawn figure") from error


def _box(box: dict) -> str:
    return (f"[{box['left']:.0f}, {box['top']:.0f}, {box['right']:.0f}, {box['bottom']:.0f}]")


def _overlap(a: dict, b: dict) -> bool:
    """The boxes share more than SLACK_PX in both directions."""
    width = min(a["right"], b["right"]) - max(a["left"], b["left"])
    height = min(a["bottom"], b["bottom"]) - max(a["top"], b["top"])
    return width > SLACK_PX and height > SLACK_PX


def _inside(inner: dict, outer: dict) -> bool:
    return (inner["left"] >= outer["left"] - SLACK_PX and inner["right"] <= outer["right"] + SLACK_PX
            and inner["top"] >= outer["top"] - SLACK_PX
            and inner["bottom"] <= outer["bottom"] + SLACK_PX)


def _fail_all(page_name: str, what: str, problems: list[str]) -> None:
    assert not problems, f"{page_name}: {what}:\n" + "\n".join(problems)


# Reasons (axe's messageKey) for which axe leaves a colour-contrast item "incomplete" and that
# the test accepts. Every other reason fails, "equalRatio" (text and background of one colour,
# which axe takes for deliberately hidden text) in particular.
AXE_UNDECIDABLE = {
    # One or two characters (a tick label "0", a "¶" anchor) or icon-font glyphs: axe cannot
    # tell a word from a symbol.
    "shortTextContent": "too short to be read as a word",
    "nonBmp": "icon-font glyph",
}
# Reasons for which axe could not find the background: another element lies over part of the
# text (the sticky header over the scrolled sidebar), or the text is SVG. Outside figures the
# test judges such an element itself (window.nlicl.contrastOf: composited ancestors' colours).
AXE_BACKGROUND_UNKNOWN = {"bgOverlap", "elmPartiallyObscured", "elmPartiallyObscuring",
                          "outsideViewport",
                          # a gradient lies behind it: the scroll cue of a formula's box (the
                          # judge sees through that one, and only that one: SCROLL_CUE)
                          "bgGradient"}
# Figures are skipped whatever the reason: plotly draws their text on its own opaque paper (an
# SVG rect, which neither axe nor a CSS ancestor walk can see), in colours that do not follow
# the theme (nlicl_lib.pages.display.prepare_figure: white paper, dark text).
FIGURE_SELECTOR = ".nlicl-plotly, .js-plotly-plot"

AXE_RUN = """async (figureSelector) => {
  const result = await axe.run(document, {resultTypes: ['violations', 'incomplete']});
  const contrast = result.incomplete.filter((item) => item.id === 'color-contrast');
  const nodes = contrast.flatMap((item) => item.nodes).map((node) => {
    const target = node.target.length === 1 ? String(node.target[0]) : null;
    let element = null;
    try { element = target ? document.querySelector(target) : null; } catch (e) { }
    const data = node.any.map((check) => check.data).find((d) => d && d.messageKey) || {};
    return {
      target: node.target.map(String).join(' '),
      reason: data.messageKey || 'unknown',
      // SVG text axe reports without a usable selector is plotly's (the pages have no other)
      inFigure: element ? Boolean(element.closest(figureSelector))
        : /^<(text|tspan)\b/.test(node.html),
      contrast: element && !element.closest(figureSelector) ? window.nlicl.contrastOf(element)
        : null,
      html: node.html.slice(0, 100),
    };
  });
  return {violations: result.violations, contrastIncomplete: nodes};
}"""


def check_accessibility(opened: OpenPage, mode: str) -> None:
    opened.set_mode(mode)
    if not opened.js("() => typeof axe !== 'undefined'"):
        opened.page.add_script_tag(path=str(AXE_JS))
    result = opened.js(AXE_RUN, FIGURE_SELECTOR)
    problems = [
        json.dumps({
            "id": violation["id"],
            "impact": violation["impact"],
            "help": violation["help"],
            "nodes": [node["target"] for node in violation["nodes"]][:5],
        })
        for violation in result["violations"]
        if violation["impact"] in BLOCKING_IMPACTS
    ]
    for node in result["contrastIncomplete"]:
        if node["inFigure"] or node["reason"] in AXE_UNDECIDABLE:
            continue
        judged = node["contrast"]
        if node["reason"] in AXE_BACKGROUND_UNKNOWN and judged and not judged.get("unknown") \
                and judged["ratio"] >= judged["required"]:
            continue
        problems.append(f"color-contrast undecided by axe ({node['reason']}) at {node['target']}"
                        f" {node['html']!r}; computed: {_contrast_text(judged)}")
    _fail_all(opened.name, f"{mode} mode, axe", problems)


def _contrast_text(judged: dict | None) -> str:
    if not judged:
        return "nothing (no element)"
    if judged.get("unknown"):
        return "nothing (a background image lies behind it)"
    return (f"{judged['ratio']}:1, needs {judged['required']}:1 ({judged['fontSize']} px, "
            f"{judged['colour']} on {judged['background']})")


def check_contrast(opened: OpenPage, mode: str) -> None:
    opened.set_mode(mode)
    result = opened.js("window.nlicl.textContrast()")
    problems = [f"{o['text']!r} ({o['element']}): {_contrast_text(o)}" for o in result["offenders"]]
    _fail_all(opened.name, f"{mode} mode, text contrast ({result['checked']} elements checked)",
              problems)


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


def _press_arrow_on_first_slider(opened: OpenPage, figure: dict) -> list[str]:
    """Focus the figure's first slider and press ArrowRight (ArrowLeft when it is at its last
    step): the figure must change and aria-valuenow move the same way; then press back."""
    figure_id = figure["id"]
    slider = figure["sliders"][0]
    key, back, sign = ("ArrowRight", "ArrowLeft", 1)
    if slider["active"] >= slider["steps"] - 1:
        key, back, sign = ("ArrowLeft", "ArrowRight", -1)
    where = f"figure {figure_id}, slider 0"
    if not opened.js("id => window.nlicl.focusSlider(id, 0)", figure_id):
        return [f"{where}: cannot take the keyboard focus"]
    before = opened.js("id => window.nlicl.snapshot(id)", figure_id)
    value_before = float(opened.js("id => window.nlicl.sliderAria(id)", figure_id)[0]["valuenow"])
    opened.page.keyboard.press(key)
    try:
        _wait_for_change(opened, figure_id, before, f"{key} on slider 0")
    except AssertionError as error:
        return [str(error).split(": ", 1)[1]]
    try:  # the slider is re-queried: plotly may have redrawn it, the update may take a frame
        opened.page.wait_for_function(
            "([id, old]) => { const a = window.nlicl.sliderAria(id)[0];"
            " return a !== undefined && a.valuenow !== null && Number(a.valuenow) !== old; }",
            arg=[figure_id, value_before], timeout=SLIDER_TIMEOUT_MS)
    except Exception:  # playwright's TimeoutError
        return [f"{where}: {key} changed the figure, but aria-valuenow stayed at {value_before:g}"]
    value_after = float(opened.js("id => window.nlicl.sliderAria(id)", figure_id)[0]["valuenow"])
    problems = []
    if (value_after - value_before) * sign <= 0:
        problems.append(f"{where}: {key} moved aria-valuenow from {value_before:g} to "
                        f"{value_after:g} (want {'up' if sign > 0 else 'down'})")
    opened.js("id => window.nlicl.focusSlider(id, 0)", figure_id)
    opened.page.keyboard.press(back)
    try:
        opened.page.wait_for_function("([id, i, s]) => window.nlicl.sliderActive(id, i) === s",
                                      arg=[figure_id, 0, slider["active"]],
                                      timeout=SLIDER_TIMEOUT_MS)
    except Exception:  # playwright's TimeoutError
        problems.append(f"{where}: {back} did not bring it back to step {slider['active']}")
    return problems


def _largest_responses(watch: PageWatch, count: int = 5) -> str:
    sizes = sorted(((int(r.headers.get("content-length") or 0), r.url) for r in watch.responses),
                   reverse=True)[:count]
    return "largest: " + ", ".join(f"{urlparse(url).path} {size / 1e6:.2f} MB"
                                   for size, url in sizes)


# --- desktop width -----------------------------------------------------------------------


@pytest.fixture(scope="class")
def desktop(browser: object, site_url: str, page_name: str) -> Iterator[OpenPage]:
    opened = _open(browser, site_url, page_name, DESKTOP)
    _screenshot(opened, "desktop")
    yield opened
    opened.page.context.close()


@pytest.mark.parametrize("page_name", PAGE_PARAMS, scope="class")
class TestDesktop:
    """One browser page per book page (the class-scoped fixture): the tests run in order and
    share it. The sliders tests leave every slider where they found it."""

    def test_figures_draw_their_traces(self, desktop: OpenPage) -> None:
        figures = desktop.figures()
        expected = expected_figures(desktop.name)
        assert sorted(f["id"] for f in figures) == sorted(expected), (
            f"{desktop.name}: figures on the page {[f['id'] for f in figures]} differ from the "
            f"notebook's {sorted(expected)}"
        )
        for figure in figures:
            want = expected[figure["id"]]
            assert figure["dataTraces"] == want["traces"], (desktop.name, figure, want)
            assert figure["visibleTraces"] == want["drawn_traces"], (desktop.name, figure, want)
            assert figure["svgTraces"] == want["drawn_traces"], (
                f"{desktop.name}: figure {figure['id']} drew {figure['svgTraces']} traces, "
                f"its notebook output has {want['drawn_traces']} visible"
            )

    def test_figures_draw_their_points(self, desktop: OpenPage) -> None:
        """Every visible trace shows its data inside its plot area. (A figure whose x axis is
        linear over category names draws its traces' groups, but no point: the category names
        are not numbers.)"""
        problems = []
        for figure in desktop.figures():
            for trace in desktop.js("id => window.nlicl.traceMarks(id)", figure["id"]):
                problems += _trace_problems(figure["id"], trace)
        _fail_all(desktop.name, "traces that do not show their data", problems)

    def test_outputs_fit_the_column(self, desktop: OpenPage) -> None:
        """No printed line or table of a cell's output is wider than the text column (it
        would scroll sideways inside its box)."""
        wide = desktop.js(
            "() => Array.from(document.querySelectorAll("
            "'div.cell_output pre, div.cell_output table'))"
            ".filter((e) => e.scrollWidth > e.clientWidth + 1)"
            ".map((e) => [e.scrollWidth, e.clientWidth, e.textContent.split('\\n')"
            ".reduce((a, b) => (a.length >= b.length ? a : b)).slice(0, 90)])")
        _fail_all(desktop.name, "outputs wider than their column",
                  [f"{w} px in {c} px: {line!r}" for w, c, line in wide])

    def test_no_gap_above_the_plot(self, desktop: OpenPage) -> None:
        """plotly's automargin puts what comes under the title (the plot, a top legend, subplot
        titles, a colour bar) right under it: no gap, and no blank space under the figure."""
        gaps = desktop.js(
            "() => Array.from(document.querySelectorAll('.nlicl-plotly .js-plotly-plot'))"
            ".map((gd) => { const title = gd.querySelector('.infolayer .gtitle');"
            " if (!title || !title.textContent) { return null; }"
            " const tops = [gd._fullLayout._size.t + gd.getBoundingClientRect().top].concat("
            " Array.from(gd.querySelectorAll('.infolayer .legend, .infolayer .annotation,"
            " .colorbar')).map((p) => p.getBoundingClientRect())"
            ".filter((b) => b.height > 0).map((b) => b.top));"
            " return [gd.id, Math.round(Math.min(...tops)"
            " - title.getBoundingClientRect().bottom)]; })"
            ".filter((gap) => gap !== null)")
        _fail_all(desktop.name, f"gaps over {MAX_TITLE_GAP_PX} px under a figure's title",
                  [f"{figure}: {gap} px" for figure, gap in gaps if gap > MAX_TITLE_GAP_PX])
        blank = desktop.js(
            "() => Array.from(document.querySelectorAll('.nlicl-plotly')).map((w) =>"
            " [w.getAttribute('data-nlicl-figure'), Math.round(w.getBoundingClientRect().height"
            " - w.querySelector('.js-plotly-plot').getBoundingClientRect().height)])")
        _fail_all(desktop.name, "blank space under a figure (its box is taller than the plot)",
                  [f"{figure}: {extra} px" for figure, extra in blank if extra > 2])

    def test_log_axes_show_at_least_two_labels(self, desktop: OpenPage) -> None:
        # every view a slider shows is checked in test_sliders_change_the_figure
        bare = [f"figure {figure['id']}: {axis}" for figure in desktop.figures()
                for axis in desktop.js(LOG_AXIS_LABELS_JS, figure["id"]) if axis["labels"] < 2]
        _fail_all(desktop.name, "log axes with fewer than two tick labels", bare)

    def test_sliders_change_the_figure(self, desktop: OpenPage) -> None:
        for figure in desktop.figures():
            for index, slider in enumerate(figure["sliders"]):
                before = desktop.js("id => window.nlicl.snapshot(id)", figure["id"])
                order = [s for s in range(slider["steps"]) if s != slider["active"]]
                for step in order + [slider["active"]]:
                    point = desktop.js("([id, i, s]) => window.nlicl.sliderStepPoint(id, i, s)",
                                       [figure["id"], index, step])
                    desktop.page.mouse.click(point["x"], point["y"])
                    desktop.page.wait_for_function(
                        "([id, i, s]) => window.nlicl.sliderActive(id, i) === s",
                        arg=[figure["id"], index, step],
                        timeout=SLIDER_TIMEOUT_MS,
                    )
                    _wait_for_change(desktop, figure["id"], before, f"slider {index}, step {step}")
                    before = desktop.js("id => window.nlicl.snapshot(id)", figure["id"])
                    bare = [axis for axis in desktop.js(LOG_AXIS_LABELS_JS, figure["id"])
                            if axis["labels"] < 2]
                    assert not bare, (
                        f"{desktop.name}, figure {figure['id']}, slider {index} at step {step}: "
                        f"log axes with fewer than two tick labels: {bare}")

    def test_sliders_work_from_the_keyboard(self, desktop: OpenPage) -> None:
        problems = []
        for figure in desktop.figures():
            if not figure["sliders"]:
                continue
            aria = desktop.js("id => window.nlicl.sliderAria(id)", figure["id"])
            for index, slider in enumerate(aria):
                if slider["tabindex"] != "0" or slider["role"] != "slider" \
                        or slider["valuenow"] is None:
                    problems.append(f"figure {figure['id']}, slider {index}: tabindex="
                                    f"{slider['tabindex']!r}, role={slider['role']!r}, "
                                    f"aria-valuenow={slider['valuenow']!r} (want '0', 'slider', "
                                    "a number)")
            if problems:
                continue
            problems += _press_arrow_on_first_slider(desktop, figure)
        _fail_all(desktop.name, "sliders a keyboard cannot operate", problems)

    def test_figures_have_text_alternatives(self, desktop: OpenPage) -> None:
        problems = []
        for figure in desktop.js("window.nlicl.figureAlternatives()"):
            wrong = []
            if figure["role"] != "figure":
                wrong.append(f"role={figure['role']!r}")
            if not figure["label"]:
                wrong.append("no aria-label")
            if not figure["describedby"]:
                wrong.append("no aria-describedby")
            elif figure["missing"]:
                wrong.append(f"aria-describedby names missing ids {figure['missing']}")
            elif not figure["description"]:
                wrong.append(f"the description {figure['describedby']} is empty")
            if wrong:
                problems.append(f"figure {figure['id']}: {', '.join(wrong)}")
        _fail_all(desktop.name, "figures without a text alternative", problems)

    def test_static_training_panels(self, desktop: OpenPage) -> None:
        views = desktop.js("window.nlicl.widgetViews()")
        assert not views, (f"{desktop.name}: {len(views)} ipywidgets view(s): the static site "
                           "shows static panels instead")
        manager = [r.url for r in desktop.watch.responses if _loads_widget_manager(r.url)]
        assert not manager, f"{desktop.name} loads the ipywidgets manager: {manager}"
        panels = desktop.js("window.nlicl.staticPanels()")
        if not is_chapter(desktop.name):
            return
        assert panels, f"{desktop.name}: no div.nlicl-static-panel (a chapter's training panel)"
        problems = []
        for index, panel in enumerate(panels):
            if panel["firstChildRole"] != "note":
                problems.append(f"panel {index}: its first child is <{panel['firstChild']}> with "
                                f"role={panel['firstChildRole']!r}, not the role='note' notice")
            # The Train button: the one that says so, else the panel's first button.
            train = [b for b in panel["buttons"] if "train" in b["text"].lower()]
            train = train or panel["buttons"][:1]
            if not train:
                problems.append(f"panel {index}: no button")
            for button in train:
                if not button["disabled"]:
                    problems.append(f"panel {index}: button {button['text']!r} is not disabled")
                if panel["noticeText"] is not None and not button["afterNotice"]:
                    problems.append(f"panel {index}: button {button['text']!r} comes before the "
                                    f"notice {panel['noticeText']!r}")
        _fail_all(desktop.name, "static training panels", problems)

    def test_accessibility_light(self, desktop: OpenPage) -> None:
        check_accessibility(desktop, "light")

    def test_text_contrast_light(self, desktop: OpenPage) -> None:
        check_contrast(desktop, "light")

    def test_accessibility_dark(self, desktop: OpenPage) -> None:
        check_accessibility(desktop, "dark")
        _screenshot(desktop, "dark")

    def test_text_contrast_dark(self, desktop: OpenPage) -> None:
        check_contrast(desktop, "dark")

    def test_page_weight(self, desktop: OpenPage, page_weights: _PageWeights,
                         record_property: object) -> None:
        desktop.watch.wait_until_quiet(desktop.page)
        size = desktop.watch.bytes_loaded()
        page_weights.bytes[desktop.name] = size
        record_property("bytes_loaded", size)
        assert size <= MAX_COLD_LOAD_BYTES, (
            f"{desktop.name} loads {size / 1e6:.2f} MB, over {MAX_COLD_LOAD_BYTES / 1e6} MB: "
            + _largest_responses(desktop.watch))

    def test_display_maths_open_at_their_start(self, desktop: OpenPage) -> None:
        check_display_maths_start(desktop)

    def test_header_icons_draw_from_the_icon_font(self, desktop: OpenPage) -> None:
        """The header's icons are the theme's <i class="fa-..."> drawn by Font Awesome's
        webfont (book/_templates/layout.html leaves out the theme's 1.5 MB icon script): each
        visible one has a glyph (its ::before content), its font loaded, and some width."""
        icons = desktop.js(HEADER_ICONS_JS)
        assert icons, f"{desktop.name}: no visible icon in the header"
        problems = [f"{i['classes']}: glyph {i['glyph']!r}, font {i['font']!r} loaded "
                    f"{i['loaded']}, {i['width']} px wide" for i in icons
                    if i["glyph"] in ("none", "normal", "") or not i["loaded"] or i["width"] < 4]
        _fail_all(desktop.name, "header icons that do not draw", problems)

    def test_every_formula_is_typeset(self, desktop: OpenPage) -> None:
        # KaTeX leaves a formula it cannot parse as its TeX source (and logs an error)
        raw = desktop.js(UNTYPESET_MATH_JS)
        _fail_all(desktop.name, "formulas KaTeX did not typeset", raw)

    def test_nothing_failed(self, desktop: OpenPage) -> None:
        desktop.watch.assert_none(desktop.name)


# --- phone width ---------------------------------------------------------------------------


@pytest.fixture(scope="class")
def phone(browser: object, site_url: str, page_name: str) -> Iterator[OpenPage]:
    opened = _open(browser, site_url, page_name, PHONE)
    _screenshot(opened, "phone")
    yield opened
    opened.page.context.close()


@pytest.mark.parametrize("page_name", PAGE_PARAMS, scope="class")
class TestPhone:
    """The page at phone width, 390 x 844 CSS pixels."""

    def test_figures_fit_the_column(self, phone: OpenPage) -> None:
        for figure in phone.figures():
            assert figure["svgWidth"] <= figure["containerWidth"] + SLACK_PX, (
                f"{phone.name}: figure {figure['id']} is {figure['svgWidth']} px wide in a "
                f"{figure['containerWidth']} px column"
            )

    def test_figure_text_is_not_clipped(self, phone: OpenPage) -> None:
        problems = []
        for figure in phone.figures():
            layout = phone.js("id => window.nlicl.figureTextLayout(id)", figure["id"])
            problems += [
                f"figure {figure['id']}: {text['kind']} {text['text']!r} at {_box(text['box'])} "
                f"leaves the figure {_box(layout['figure'])}"
                for text in layout["texts"] if not _inside(text["box"], layout["figure"])
            ]
        _fail_all(phone.name, "figure text cut off at the figure's edge", problems)

    def test_figure_text_does_not_overlap(self, phone: OpenPage) -> None:
        problems = []
        for figure in phone.figures():
            layout = phone.js("id => window.nlicl.figureTextLayout(id)", figure["id"])
            title = layout["title"]
            if title:
                where = f"figure {figure['id']}: the title {title['text']!r} {_box(title['box'])}"
                problems += [f"{where} overlaps the legend entry {entry['text']!r} "
                             f"{_box(entry['box'])}"
                             for entry in layout["legendEntries"] if _overlap(title["box"], entry["box"])]
                problems += [f"{where} overlaps the plot area {_box(area)}"
                             for area in layout["plotAreas"] if _overlap(title["box"], area)]
                problems += [f"{where} overlaps the subplot title {other['text']!r} "
                             f"{_box(other['box'])}" for other in layout["subplotTitles"]
                             if _overlap(title["box"], other["box"])]
            titles = layout["subplotTitles"]
            problems += [
                f"figure {figure['id']}: subplot titles {a['text']!r} {_box(a['box'])} and "
                f"{b['text']!r} {_box(b['box'])} overlap"
                for i, a in enumerate(titles) for b in titles[i + 1:] if _overlap(a["box"], b["box"])
            ]
        _fail_all(phone.name, "overlapping figure text", problems)

    def test_display_maths_open_at_their_start(self, phone: OpenPage) -> None:
        check_display_maths_start(phone)

    def test_maths_fits_or_scrolls_with_a_cue(self, phone: OpenPage) -> None:
        # KaTeX breaks inline formulas only at top-level relations and operators and never
        # breaks a display: a formula wider than the column must sit in a box that scrolls
        # sideways (and shows that it does), never run past the screen's edge. Its boxes
        # (.base) are measured: a display's outer boxes are as wide as the column.
        problems = [p for p in phone.js(WIDER_THAN_COLUMN_JS, ".katex .base")
                    if not (p["scrolls"] and p["cue"])]
        _fail_all(phone.name, "formulas cut off at 390 px", [
            f"{p['kind']} formula {p['text'][:30]!r} ends at x = {p['right']} in a column ending at "
            f"{p['column']}" + (" (its scroll box shows no cue)" if p["scrolls"] else "")
            for p in problems])

    def test_no_line_starts_with_the_punctuation_after_a_formula(self, phone: OpenPage) -> None:
        # a browser may break the line after KaTeX's boxes: nlicl-math.js glues the comma or
        # full stop that follows a formula to it
        stray = phone.js(PUNCTUATION_AFTER_MATH_JS)
        _fail_all(phone.name, "lines at 390 px that start with the punctuation after a formula",
                  [f"{p['punctuation']!r} after {p['formula']!r}" for p in stray])

    def test_tables_fit_or_scroll(self, phone: OpenPage) -> None:
        problems = [p for p in phone.js(WIDER_THAN_COLUMN_JS, "table") if not p["scrolls"]]
        _fail_all(phone.name, "tables wider than the column at 390 px", [
            f"table {p['text']!r} ends at x = {p['right']} in a column ending at {p['column']}"
            for p in problems])

    def test_slider_steps_are_finger_sized_and_announced(self, phone: OpenPage) -> None:
        # WCAG 2.2 target size (minimum): 24 CSS px per step; each step's label is either drawn
        # or announced (the ARIA slider's aria-valuetext, set by the page script)
        problems = []
        for slider in phone.js(SLIDER_STEPS_JS):
            where = f"figure {slider['figure']}, slider {slider['index']}"
            if slider["spacing"] is not None and slider["spacing"] < 24:
                problems.append(f"{where}: {slider['steps']} steps on a {slider['rail']} px rail, "
                                f"{slider['spacing']:.1f} px each (want at least 24)")
            if not slider["valuetext"]:
                problems.append(f"{where}: no aria-valuetext announcing the step's label")
        _fail_all(phone.name, "slider steps a finger cannot hit", problems)

    def test_no_toolbar_over_a_figure_title(self, phone: OpenPage) -> None:
        problems = []
        for figure in phone.figures():
            layout = phone.js("id => window.nlicl.figureTextLayout(id)", figure["id"])
            bar = phone.js(MODEBAR_BOX_JS, figure["id"])
            if bar and layout["title"] and _overlap(bar, layout["title"]["box"]):
                problems.append(f"figure {figure['id']}: the toolbar {_box(bar)} covers the title "
                                f"{layout['title']['text']!r} {_box(layout['title']['box'])}")
        _fail_all(phone.name, "plotly's toolbar over a title", problems)

    def test_nothing_failed(self, phone: OpenPage) -> None:
        phone.watch.assert_none(phone.name)


def test_pages_share_their_assets_through_the_cache(browser: object, site_url: str,
                                                    page_weights: _PageWeights) -> None:
    """Page weight as a reader pays it: the first chapter in a fresh browser, then every other
    page in the same one (its HTTP cache on), counting the bytes each page transfers (Chrome's
    encoded lengths: a file the cache holds costs nothing, a revalidated one its headers)."""
    first = toc_chapters()[0]
    walk = [first] + [page for page in PAGES if page != first]
    # no request routing here: playwright turns the HTTP cache off for a routed context
    context = browser.new_context(viewport=DESKTOP, color_scheme="light", service_workers="block")
    problems = []
    for index, page_name in enumerate(walk):
        page = context.new_page()
        cdp = context.new_cdp_session(page)
        transferred = []
        cdp.on("Network.loadingFinished", lambda event, got=transferred: got.append(
            event["encodedDataLength"]))
        cdp.send("Network.enable")
        page.goto(site_url + page_name, wait_until="load")
        page.wait_for_load_state("networkidle")
        page.evaluate("() => document.fonts.ready.then(() => true)")
        size, html = sum(transferred), (HTML_DIR / page_name).stat().st_size
        page_weights.walk.append((page_name, size, html))
        if index == 0 and size > MAX_COLD_LOAD_BYTES:
            problems.append(f"{page_name}, opened first: {size / 1e6:.2f} MB")
        if index > 0 and size > html + MAX_WARM_EXTRA_BYTES:
            problems.append(f"{page_name}: {size / 1e6:.3f} MB with the shared files cached, "
                            f"its HTML {html / 1e6:.3f} MB")
        page.close()
    context.close()
    _fail_all("the book", "pages that pay for more than their own HTML once the browser holds "
              f"the shared files (at most {MAX_WARM_EXTRA_BYTES / 1e3:.0f} kB more)", problems)


DISPLAY_MATHS_START_JS = """() => Array.from(document.querySelectorAll('article.bd-article div.math'))
  .filter((box) => box.getClientRects().length && box.querySelector('.katex-html'))  // shown, typeset
  .map((box) => {
    // the start of the formula: the leftmost of KaTeX's boxes on its first line
    const bases = Array.from(box.querySelectorAll('.katex-html .base'));
    const start = Math.min(...bases.map((b) => b.getBoundingClientRect().left));
    return {text: (box.querySelector('annotation') || box).textContent.trim().slice(0, 50),
            scrollLeft: box.scrollLeft, overflows: box.scrollWidth > box.clientWidth + 1,
            boxLeft: Math.round(box.getBoundingClientRect().left), start: Math.round(start)};
  })"""


def check_display_maths_start(opened: OpenPage) -> None:
    """Every display equation opens at its start: its scroll box at its left edge and the
    first of its boxes (its left-hand side) inside the box, not scrolled out to the left."""
    problems = [f"{m['text']!r}: scrollLeft {m['scrollLeft']}, starts at x = {m['start']} in a "
                f"box from x = {m['boxLeft']}" + (" (it scrolls)" if m["overflows"] else "")
                for m in opened.js(DISPLAY_MATHS_START_JS)
                if m["scrollLeft"] != 0 or m["start"] < m["boxLeft"] - SLACK_PX]
    _fail_all(opened.name, "display equations that open scrolled away from their start", problems)


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

PUNCTUATION_AFTER_MATH_JS = """() => {
  const out = [];
  for (const formula of document.querySelectorAll('article.bd-article span.math')) {
    const next = formula.nextSibling;
    if (!next || next.nodeType !== Node.TEXT_NODE) continue;
    const match = next.data.match(/^\\u2060?([,.;:!?)\\]’”…])/);
    if (!match) continue;
    const at = next.data.indexOf(match[1]);
    const range = document.createRange();
    range.setStart(next, at);
    range.setEnd(next, at + 1);
    const mark = range.getBoundingClientRect();
    const boxes = formula.getClientRects();
    if (!mark.height || !boxes.length) continue;  // hidden (a closed dropdown)
    if (mark.top >= boxes[boxes.length - 1].bottom - 1) {  // below the formula's last line
      out.push({punctuation: match[1],
                formula: ((formula.querySelector('annotation') || formula).textContent || '').trim().slice(0, 40)});
    }
  }
  return out;
}"""

LOG_AXIS_LABELS_JS = """id => {
  // the tick labels each log axis of a figure draws in its current view: a log axis autoscaled
  // to a slider panel needs at least two to be read
  const gd = document.getElementById(id);
  const layout = gd && gd._fullLayout;
  if (!layout) return [];
  return Object.keys(layout).filter((k) => /^[xy]axis\\d*$/.test(k))
    .map((k) => layout[k]).filter((axis) => axis && axis.type === 'log' && axis.visible)
    .map((axis) => ({axis: axis._id, labels: Array.from(gd.querySelectorAll(`g.${axis._id}tick text`))
      .filter((t) => (t.textContent || '').trim()).length}));
}"""

WIDER_THAN_COLUMN_JS = """selector => {
  // the elements matching selector in the article that end past its right edge, each with the
  // nearest box around it that scrolls sideways (if any): whether that box fits the column,
  // and whether it shows a scroll cue (a gradient background)
  const column = document.querySelector('article.bd-article') || document.querySelector('main');
  const edge = column.getBoundingClientRect().right + 1;
  const wide = [];
  const seen = new Set();  // one entry per formula (KaTeX draws one in several boxes)
  for (const element of column.querySelectorAll(selector)) {
    const box = element.getBoundingClientRect();
    if (box.width === 0 || box.right <= edge) continue;
    const owner = element.closest('.katex') || element;
    if (seen.has(owner)) continue;
    seen.add(owner);
    const source = owner.querySelector('annotation') || owner;  // a formula's TeX
    let scroller = null;
    for (let a = element.parentElement; a && a !== column; a = a.parentElement) {
      if (['auto', 'scroll'].includes(getComputedStyle(a).overflowX)) { scroller = a; break; }
    }
    wide.push({kind: element.closest('.katex-display') ? 'display' : 'inline',
               text: (source.textContent || '').trim().slice(0, 40), right: Math.round(box.right),
               column: Math.round(edge - 1),
               scrolls: Boolean(scroller && scroller.getBoundingClientRect().right <= edge),
               cue: Boolean(scroller && getComputedStyle(scroller).backgroundImage.includes('gradient'))});
  }
  return wide;
}"""

SLIDER_STEPS_JS = """() => {
  const out = [];
  document.querySelectorAll('.nlicl-plotly').forEach((wrapper) => {
    const gd = wrapper.querySelector('.js-plotly-plot');
    if (!gd || !gd._fullLayout) return;
    const rails = wrapper.querySelectorAll('rect.slider-rail-rect');
    const groups = wrapper.querySelectorAll('.slider-group');
    (gd._fullLayout.sliders || []).filter((s) => s.visible).forEach((slider, index) => {
      const rail = rails[index] ? rails[index].getBoundingClientRect().width : 0;
      const steps = slider.steps.length;
      out.push({figure: wrapper.getAttribute('data-nlicl-figure'), index: index, steps: steps,
                rail: Math.round(rail), spacing: steps > 1 && rail ? rail / (steps - 1) : null,
                valuetext: groups[index] ? groups[index].getAttribute('aria-valuetext') : null});
    });
  });
  return out;
}"""

MODEBAR_BOX_JS = """id => {
  const wrapper = document.querySelector(`.nlicl-plotly[data-nlicl-figure="${id}"]`);
  const bar = wrapper?.querySelector('.modebar-container .modebar');
  if (!bar || getComputedStyle(bar.parentElement).display === 'none') return null;
  const r = bar.getBoundingClientRect();
  return r.width > 0 ? {left: r.left, top: r.top, right: r.right, bottom: r.bottom} : null;
}"""


# --- navigation: the sidebars' toggle buttons ----------------------------------------------
# Under 992 px the chapter list (primary sidebar) and under 1200 px the page contents
# (secondary sidebar) are drawers that the header's buttons open; at desktop width the chapter
# button collapses the sidebar instead. A button that nothing handles, or that two handlers
# toggle twice, leaves a phone reader with Previous/Next only (issue 21).

NAV_PAGE = "book/ch3_glu_kernel.html"  # a chapter: the page a reader navigates from
TABLET = {"width": 768, "height": 1024}
TOUCH_SCREENS = [pytest.param(PHONE, id="phone-390"), pytest.param(TABLET, id="tablet-768")]
NAV_TIMEOUT_MS = 3_000  # the drawers slide in and the sidebar slides out (0.2-0.3 s)
NAV_SETTLE_MS = 600  # after a tap: time for a second handler to undo what the first did

# What a reader sees of both sidebars. An element counts as shown when it is rendered inside
# the viewport and is the topmost element at its centre (not under a backdrop or off-screen).
NAV_STATE_JS = """(chapters) => {
  const shown = (element) => {
    const box = element.getBoundingClientRect();
    if (box.width < 1 || box.height < 1 || getComputedStyle(element).visibility !== 'visible'
        || box.left < 0 || box.top < 0 || box.right > innerWidth || box.bottom > innerHeight) {
      return false;
    }
    const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
    return hit !== null && element.contains(hit);
  };
  const text = (element) => {
    const copy = element.cloneNode(true);
    copy.querySelectorAll('.headerlink').forEach((anchor) => anchor.remove());
    return copy.textContent.replace(/\\s+/g, ' ').trim();
  };
  const navLinks = Array.from(document.querySelectorAll('.bd-docs-nav a'));
  const sidebar = document.querySelector('.bd-sidebar-primary');
  const box = sidebar ? sidebar.getBoundingClientRect() : null;
  return {
    chapters: chapters.map((url) => {
      const link = navLinks.find((a) => a.href.split('#')[0] === url);
      return {url, found: Boolean(link), shown: link ? shown(link) : false};
    }),
    headings: Array.from(document.querySelectorAll('#pst-page-toc-nav li.toc-h2 > a'))
      .map((link) => {
        const section = document.getElementById(decodeURIComponent(link.hash.slice(1)));
        const heading = section && section.querySelector('h2');
        return {text: text(link), heading: heading ? text(heading) : null, shown: shown(link)};
      }),
    sidebar: box ? {width: Math.round(box.width), right: Math.round(box.right),
                    visibility: getComputedStyle(sidebar).visibility} : null,
  };
}"""


def toc_chapters() -> list[str]:
    """The five chapters' pages (_toc.yml's book/chN_... files), relative to the site."""
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    return [f"{name}.html" for name in re.findall(r"file:\s*(book/ch\d+\S*)", toc)]


def _chapters_shown(state: dict) -> bool:
    return bool(state["chapters"]) and all(c["shown"] for c in state["chapters"])


def _chapters_hidden(state: dict) -> bool:
    return not any(c["shown"] for c in state["chapters"])


def _headings_shown(state: dict) -> bool:
    return bool(state["headings"]) and all(h["shown"] and h["text"] == h["heading"]
                                           for h in state["headings"])


def _headings_hidden(state: dict) -> bool:
    return not any(h["shown"] for h in state["headings"])


def _sidebar_collapsed(state: dict) -> bool:
    sidebar = state["sidebar"]
    return _chapters_hidden(state) and (
        sidebar is None or sidebar["width"] == 0 or sidebar["right"] <= 0
        or sidebar["visibility"] != "visible")


def _describe(state: dict) -> str:
    chapters, headings, sidebar = state["chapters"], state["headings"], state["sidebar"]
    missing = [c["url"] for c in chapters if not c["found"]]
    wrong = [f"{h['text']!r} (heading {h['heading']!r})" for h in headings
             if h["text"] != h["heading"]]
    return (f"{sum(c['shown'] for c in chapters)} of {len(chapters)} chapter links shown"
            + (f" ({len(missing)} not in the sidebar: {missing})" if missing else "")
            + f", {sum(h['shown'] for h in headings)} of {len(headings)} page headings shown"
            + (f" (links that do not match their heading: {wrong})" if wrong else "")
            + (f"; primary sidebar {sidebar['width']} px wide, right edge at {sidebar['right']}"
               f" px, visibility {sidebar['visibility']}" if sidebar else "; no primary sidebar"))


class NavPage:
    """The navigation page open at one size, with its chapters' absolute URLs."""

    def __init__(self, opened: OpenPage, site_url: str) -> None:
        self.opened = opened
        self.page = opened.page
        self.chapters = [site_url + chapter for chapter in toc_chapters()]

    def state(self) -> dict:
        return self.opened.js(NAV_STATE_JS, self.chapters)

    def toggle(self, which: str) -> object:
        """The one visible header button of the chapter list ("primary") or of the page
        contents ("secondary")."""
        buttons = self.page.locator(f"button.{which}-toggle:visible")
        assert buttons.count() == 1, (
            f"{self.opened.name}: {buttons.count()} visible {which}-toggle buttons, want 1")
        return buttons.first

    def expect(self, want: object, what: str, action: str) -> None:
        """Waits until ``want(state)`` holds, then checks that it still holds NAV_SETTLE_MS
        later (a second handler closes a drawer the first opened)."""
        deadline = time.monotonic() + NAV_TIMEOUT_MS / 1000
        state = self.state()
        while not want(state) and time.monotonic() < deadline:
            self.page.wait_for_timeout(100)
            state = self.state()
        size = self.page.viewport_size
        where = f"{self.opened.name} at {size['width']}x{size['height']}, after {action}"
        assert want(state), f"{where}: {what} is not so: {_describe(state)}"
        self.page.wait_for_timeout(NAV_SETTLE_MS)
        state = self.state()
        assert want(state), (f"{where}: {what}, then no longer {NAV_SETTLE_MS} ms later "
                             f"(toggled twice?): {_describe(state)}")


@pytest.fixture(params=TOUCH_SCREENS)
def touch_nav(request: pytest.FixtureRequest, browser: object,
              site_url: str) -> Iterator[NavPage]:
    """The navigation page on a touch screen (a phone, a tablet), fresh for each test."""
    if not (HTML_DIR / NAV_PAGE).exists():
        pytest.skip(f"{NAV_PAGE} is not built")
    opened = _open(browser, site_url, NAV_PAGE, request.param, has_touch=True, is_mobile=True)
    yield NavPage(opened, site_url)
    opened.watch.assert_none(opened.name)
    opened.page.context.close()


@pytest.fixture
def desktop_nav(browser: object, site_url: str) -> Iterator[NavPage]:
    if not (HTML_DIR / NAV_PAGE).exists():
        pytest.skip(f"{NAV_PAGE} is not built")
    opened = _open(browser, site_url, NAV_PAGE, DESKTOP)
    yield NavPage(opened, site_url)
    opened.watch.assert_none(opened.name)
    opened.page.context.close()


def _screenshot_nav(nav: NavPage, suffix: str) -> None:
    size = nav.page.viewport_size
    _screenshot(nav.opened, f"{size['width']}-{suffix}")


class TestNavigation:
    """The header's sidebar buttons, tapped on a phone and a tablet, clicked on a desktop."""

    def test_chapter_list_opens_and_closes(self, touch_nav: NavPage) -> None:
        nav = touch_nav
        assert len(nav.chapters) == 5, f"_toc.yml lists {nav.chapters}, want five chapters"
        size = nav.page.viewport_size
        nav.expect(_chapters_hidden, "the chapter list is closed", "loading the page")
        for time_round in ("first", "second"):
            nav.toggle("primary").tap()
            nav.expect(_chapters_shown, "the drawer shows the five chapters' links",
                       f"tapping the chapter-list button ({time_round} time)")
            _screenshot_nav(nav, f"chapters-{time_round}")
            # the backdrop, right of the drawer (at most 75 % of the width, 350 px)
            nav.page.touchscreen.tap(size["width"] - 10, size["height"] // 2)
            nav.expect(_chapters_hidden, "the chapter list is closed again",
                       f"tapping the backdrop ({time_round} time)")

    def test_page_contents_open_and_close(self, touch_nav: NavPage) -> None:
        nav = touch_nav
        size = nav.page.viewport_size
        nav.expect(_headings_hidden, "the page contents are closed", "loading the page")
        for time_round in ("first", "second"):
            nav.toggle("secondary").tap()
            nav.expect(_headings_shown, "the drawer shows the page's headings",
                       f"tapping the page-contents button ({time_round} time)")
            _screenshot_nav(nav, f"contents-{time_round}")
            nav.page.touchscreen.tap(10, size["height"] // 2)  # the backdrop, left of it
            nav.expect(_headings_hidden, "the page contents are closed again",
                       f"tapping the backdrop ({time_round} time)")

    def test_desktop_sidebar_collapses(self, desktop_nav: NavPage) -> None:
        nav = desktop_nav
        nav.expect(_chapters_shown, "the sidebar shows the five chapters' links",
                   "loading the page")
        for time_round in ("first", "second"):
            nav.toggle("primary").click()
            nav.expect(_sidebar_collapsed, "the primary sidebar is collapsed",
                       f"clicking the sidebar button ({time_round} time)")
            _screenshot_nav(nav, f"collapsed-{time_round}")
            nav.toggle("primary").click()
            nav.expect(_chapters_shown, "the sidebar shows the five chapters' links again",
                       f"clicking the sidebar button again ({time_round} time)")
