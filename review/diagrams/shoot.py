"""Screenshots of the chapters' diagrams in the built book, for review (issue 34).

Opens each chapter of ``_build/html`` (``make book`` first) from ``file://`` in headless
Chromium, offline (every request that is not a file of the site is aborted), at 390 and
1280 px wide, in the theme's light and dark modes (the book follows the reader's preference,
``default_mode: auto``, so each mode is the browser's ``prefers-color-scheme``). For each
diagram figure it checks that

* the theme is in the mode asked for, and exactly one of the figure's two images shows: the
  light drawing in light mode, the dark one in dark mode, loaded (its SVG decoded);
* that image has a size, lies inside the viewport's width, and sits above the caption, which
  shows one figure number ("Fig. 1.1");

then scrolls the figure into view and saves an element screenshot,
``review/diagrams/<diagram>_<width>_<mode>.png``. Exits 1, naming what failed, if a check fails.

    PYTHONPATH=$PWD .venv/bin/python review/diagrams/shoot.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html" / "book"
OUT = Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
FIGURES = {  # page -> the figure holding its diagram
    "ch1_lsa_is_gd": "fig-ch1-prompt",
    "ch2_attention_alone": "fig-ch2-linear",
    "ch3_glu_kernel": "fig-ch3-glu",
    "ch4_block_size": "fig-ch4-budget",
    "ch5_depth": "fig-ch5-stack",
}
WIDTHS = {390: 844, 1280: 900}  # viewport width -> height
MODES = ("light", "dark")

MEASURE_JS = """(id) => {
  const figure = document.getElementById(id);
  const shown = [...figure.querySelectorAll('img')].filter(
      (img) => getComputedStyle(img).display !== 'none');
  const caption = figure.querySelector('.caption-number');
  const box = (el) => { const r = el.getBoundingClientRect();
                        return {left: r.left, right: r.right, top: r.top, bottom: r.bottom,
                                width: r.width, height: r.height}; };
  return {
    theme: document.documentElement.dataset.theme,
    shown: shown.map((img) => ({src: img.getAttribute('src'), loaded: img.complete
                                && img.naturalWidth > 0, box: box(img)})),
    numbers: figure.querySelectorAll('.caption-number').length,
    number: caption ? caption.textContent.trim() : null,
    caption: caption ? box(caption) : null,
    viewport: document.documentElement.clientWidth,
  };
}"""


def check(measured: dict, mode: str) -> list[str]:
    """What is wrong with one figure as measured by ``MEASURE_JS`` in ``mode``."""
    problems = []
    if measured["theme"] != mode:
        problems.append(f"theme is {measured['theme']!r}, not {mode!r}")
    if len(measured["shown"]) != 1:
        return problems + [f"{len(measured['shown'])} images shown, not 1"]
    image = measured["shown"][0]
    if not image["src"].endswith(f"_{mode}.svg"):
        problems.append(f"shows {image['src']}")
    if not image["loaded"]:
        problems.append(f"{image['src']} did not load")
    box = image["box"]
    if box["width"] < 1 or box["height"] < 1:
        problems.append(f"image of size {box['width']} x {box['height']}")
    if box["left"] < 0 or box["right"] > measured["viewport"] + 1:
        problems.append(f"image from {box['left']:.0f} to {box['right']:.0f} px, "
                        f"viewport {measured['viewport']} px")
    if measured["numbers"] != 1 or not (measured["number"] or "").startswith("Fig."):
        problems.append(f"{measured['numbers']} figure numbers ({measured['number']!r})")
    elif measured["caption"]["height"] < 1 or measured["caption"]["top"] < box["bottom"] - 1:
        problems.append("the caption is hidden or above the image")
    return problems


def shoot(page: Page, name: str, figure_id: str, width: int, mode: str) -> list[str]:
    """Check one figure and save its screenshot; the problems found."""
    page.goto((HTML / f"{name}.html").as_uri(), wait_until="load")
    figure = page.locator(f"#{figure_id}")
    figure.scroll_into_view_if_needed()
    page.wait_for_function(
        "(id) => [...document.getElementById(id).querySelectorAll('img')].every(i => i.complete)",
        arg=figure_id)
    problems = check(page.evaluate(MEASURE_JS, figure_id), mode)
    diagram = figure.locator("img").first.get_attribute("src").split("/")[-1]
    diagram = diagram.rsplit("_", 1)[0]
    figure.screenshot(path=str(OUT / f"{diagram}_{width}_{mode}.png"), animations="disabled")
    return [f"{name} #{figure_id} at {width} px, {mode}: {problem}" for problem in problems]


def main() -> int:
    if not (HTML / "ch1_lsa_is_gd.html").exists():
        print(f"{HTML} is not built: run `make book`", file=sys.stderr)
        return 1
    problems = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for width, height in WIDTHS.items():
            for mode in MODES:
                context = browser.new_context(viewport={"width": width, "height": height},
                                              color_scheme=mode)
                # offline: the site's own files only
                context.route("**/*", lambda route: route.continue_()
                              if route.request.url.startswith("file://") else route.abort())
                page = context.new_page()
                for name, figure_id in FIGURES.items():
                    problems += shoot(page, name, figure_id, width, mode)
                context.close()
        browser.close()
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"{len(FIGURES) * len(WIDTHS) * len(MODES)} screenshots in {OUT}, "
          f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
