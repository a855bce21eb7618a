"""Screenshots of a chapter's panel trained in the page (issue 35), at 390 and 1280 px, light
and dark: ``python review/issue-35/shoot.py [ch4]`` after ``make book`` (offline Chromium)."""

from __future__ import annotations

import functools
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests import test_browser as site  # noqa: E402

OUT = Path(__file__).resolve().parent


def main(chapters: list[str]) -> None:
    from playwright.sync_api import sync_playwright

    handler = functools.partial(site._QuietHandler, directory=str(site.HTML_DIR))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    pages = {Path(p).name.split("_")[0]: p for p in site.PAGES if site.is_chapter(p)}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(site.CHROMIUM),
                                             args=site.CHROMIUM_ARGS, headless=True)
        for chapter in chapters:
            for width, height in ((390, 844), (1280, 800)):
                for scheme in ("light", "dark"):
                    context = browser.new_context(viewport={"width": width, "height": height},
                                                  color_scheme=scheme)
                    context.route("**/*", lambda route: route.continue_()
                                  if urlparse(route.request.url).hostname in site.LOCAL_HOSTS
                                  else route.abort())
                    page = context.new_page()
                    page.goto(url + pages[chapter], wait_until="networkidle")
                    panel = page.locator(f'div.nlicl-static-panel[data-nlicl-chapter="{chapter}"]')
                    panel.scroll_into_view_if_needed()
                    panel.screenshot(path=str(OUT / f"{chapter}_before_{width}_{scheme}.png"))
                    panel.locator(".nlicl-static-actions button").first.click()
                    page.wait_for_function(
                        "(c) => { const s = document.querySelector(`div.nlicl-static-panel"
                        "[data-nlicl-chapter='${c}'] .nlicl-run-status`);"
                        " return s && s.dataset.state === 'done'; }", arg=chapter, timeout=120_000)
                    page.wait_for_timeout(300)
                    panel.screenshot(path=str(OUT / f"{chapter}_after_{width}_{scheme}.png"))
                    context.close()
        browser.close()
    server.shutdown()


if __name__ == "__main__":
    main(sys.argv[1:] or ["ch4"])
