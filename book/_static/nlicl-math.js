/*
 * Long formulas on a narrow screen (issue 23). MathJax 3 does not break lines, so an inline
 * formula wider than its paragraph runs past the right edge of a phone's screen and is cut off.
 * After MathJax has typeset the page, and again when the window is resized, every inline formula
 * wider than its paragraph is wrapped in a `span.nlicl-math-scroll`, which scrolls sideways
 * (nlicl.css draws a shadow at the edge that has more). Display equations already sit in the
 * theme's scrolling `div.math`, which nlicl.css gives the same cue. Formulas that fit are not
 * touched, so their baseline stays the text's.
 *
 * Search results: Sphinx's search summarises a page from its HTML, where a formula is still TeX
 * source (MathJax typesets it only in the browser), so snippets showed "\\(\\mathcal L^*\\)". The
 * summary's text extraction (`Search.htmlToText`, searchtools.js) is wrapped to put "…" where a
 * formula was.
 */
(() => {
  "use strict";

  const WRAP = "nlicl-math-scroll";

  const wrapWide = () => {
    for (const formula of document.querySelectorAll('mjx-container:not([display="true"])')) {
      const holder = formula.parentElement;
      if (!holder || holder.classList.contains(WRAP)) continue;
      const block = formula.closest("p, li, dd, td, th, div") || holder;
      if (formula.getBoundingClientRect().width <= block.clientWidth + 1) continue;
      const wrap = document.createElement("span");
      wrap.className = WRAP;
      wrap.tabIndex = 0; // a keyboard can scroll it too
      wrap.setAttribute("role", "group");
      wrap.setAttribute("aria-label", "formula, scrolls sideways");
      holder.insertBefore(wrap, formula);
      wrap.appendChild(formula);
    }
  };

  const afterTypesetting = (tries) => {
    const mathjax = window.MathJax;
    if (mathjax && mathjax.startup && mathjax.startup.promise) {
      mathjax.startup.promise.then(wrapWide);
    } else if (tries > 0) {
      window.setTimeout(() => afterTypesetting(tries - 1), 100);
    }
  };

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
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", () => {
      patchSearch();
      afterTypesetting(100);
    });
  } else {
    patchSearch();
    afterTypesetting(100);
  }
})();
