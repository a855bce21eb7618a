/*
 * Long formulas on a narrow screen. KaTeX breaks an inline formula only after a
 * relation or an operator at its top level, so a formula with none (a long fraction, a bracket)
 * can still be wider than its paragraph and run past the right edge of a phone's screen.
 * Once KaTeX has typeset the page (on DOMContentLoaded) and its fonts have loaded, and again when
 * the window is resized, every inline formula wider than its paragraph is wrapped in a
 * `span.nlicl-math-scroll`, which scrolls sideways
 * (nlicl.css draws a shadow at the edge that has more). Display equations already sit in the
 * theme's scrolling `div.math`, which nlicl.css gives the same cue; one that scrolls is made
 * focusable, so that a keyboard can scroll it. Formulas that fit are not
 * touched, so their baseline stays the text's.
 *
 * Punctuation that follows an inline formula is glued to it (`span.nlicl-glue`), so that a line
 * never starts with the comma or full stop after a formula.
 *
 * Search results: Sphinx's search summarises a page from its HTML, where a formula is still TeX
 * source (KaTeX typesets it only in the browser), so snippets showed "\\(\\mathcal L^*\\)". The
 * summary's text extraction (`Search.htmlToText`, searchtools.js) is wrapped to put "…" where a
 * formula was.
 */
(() => {
  "use strict";

  const WRAP = "nlicl-math-scroll";
  const SCROLLS = "formula, scrolls sideways"; // the accessible name of a box that scrolls

  const wrapWide = () => {
    for (const formula of document.querySelectorAll("span.math > .katex")) {
      const holder = formula.parentElement;
      if (!holder || holder.classList.contains(WRAP)) continue;
      const block = formula.closest("p, li, dd, td, th, div") || holder;
      if (formula.getBoundingClientRect().width <= block.clientWidth + 1) continue;
      const wrap = document.createElement("span");
      wrap.className = WRAP;
      wrap.tabIndex = 0; // a keyboard can scroll it too
      wrap.setAttribute("role", "group");
      wrap.setAttribute("aria-label", SCROLLS);
      holder.insertBefore(wrap, formula);
      wrap.appendChild(formula);
    }
    // a display equation that scrolls can be scrolled from the keyboard too
    for (const display of document.querySelectorAll("div.math")) {
      if (display.scrollWidth > display.clientWidth + 1) {
        display.tabIndex = 0;
        display.setAttribute("role", "group");
        display.setAttribute("aria-label", SCROLLS);
      } else if (display.getAttribute("aria-label") === SCROLLS) {
        display.removeAttribute("tabindex");
        display.removeAttribute("role");
        display.removeAttribute("aria-label");
      }
    }
  };

  // Punctuation right after an inline formula (", so", ". A"): the browser may break the line
  // after KaTeX's last box, so a comma could start the next line. The formula and the
  // punctuation go into a span.nlicl-glue, which does not wrap (nlicl.css) while the formula
  // inside it still wraps between its own boxes.
  const PUNCTUATION = /^[,.;:!?)\]’”…]+/;
  const gluePunctuation = () => {
    for (const formula of document.querySelectorAll("span.math")) {
      const next = formula.nextSibling;
      const holder = formula.parentElement;
      if (!holder || holder.classList.contains("nlicl-glue")) continue;
      if (!next || next.nodeType !== Node.TEXT_NODE) continue;
      const match = next.data.match(PUNCTUATION);
      if (!match) continue;
      next.splitText(match[0].length); // `next` keeps the punctuation, the rest follows
      const glue = document.createElement("span");
      glue.className = "nlicl-glue";
      holder.insertBefore(glue, formula);
      glue.append(formula, next);
    }
  };

  // KaTeX's auto-render typesets on DOMContentLoaded, before the load event
  const afterTypesetting = () => document.fonts.ready.then(wrapWide);

  const FORMULA = "…";

  const patchSearch = () => {
    // searchtools.js declares `const Search` at the top level: a global binding, not on window
    if (typeof Search === "undefined" || !Search.htmlToText || Search.nliclFormulas) return;
    const toText = Search.htmlToText;
    Search.htmlToText = (htmlString, anchor) => {
      const page = new DOMParser().parseFromString(htmlString, "text/html");
      page.querySelectorAll("span.math, div.math").forEach((formula) => {
        formula.replaceWith(page.createTextNode(FORMULA));
      });
      return toText(page.documentElement.outerHTML, anchor);
    };
    Search.nliclFormulas = true;
  };

  let pending = 0;
  window.addEventListener("resize", () => {
    window.clearTimeout(pending);
    pending = window.setTimeout(wrapWide, 150);
  });
  const onReady = () => {
    patchSearch();
    gluePunctuation();
  };
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", onReady);
  } else {
    onReady();
  }
  if (document.readyState === "complete") {
    afterTypesetting();
  } else {
    window.addEventListener("load", afterTypesetting);
  }
})();
