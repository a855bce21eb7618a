/*
 * The header's sidebar buttons: the chapter list ("primary") and the page contents
 * ("secondary").
 *
 * pydata-sphinx-theme 0.17 renders a primary and a secondary toggle in its top navbar (which
 * sphinx-book-theme hides with CSS) and binds its drawer handler to the *first* `.primary-toggle`
 * / `.secondary-toggle` of the page (`document.querySelector`). sphinx-book-theme 1.3 renders
 * its own, visible toggles in the article header and binds its "collapse the sidebar on a wide
 * screen" handler to the first `.primary-toggle` too. Both handlers land on the hidden navbar
 * buttons; the buttons a reader sees have none, so a tap does nothing at any width
 * (pydata-sphinx-theme issue 2451, sphinx-book-theme issues 917 and 988).
 *
 * This script takes over only where a tap is lost: after each click on a toggle it checks
 * whether anything answered (a drawer opened, the sidebar's classes changed). If nothing did,
 * and the themes bound a different button of the same kind, it passes the click on to that
 * button, so that the themes' own code opens the drawer (narrow screens) or collapses the
 * sidebar (wide screens). Once a theme release binds the visible buttons itself, something
 * answers the click and this script does nothing.
 */
(() => {
  "use strict";

  const KINDS = ["primary", "secondary"];
  let forwarding = false;

  // Whatever the themes change when a toggle works: the drawers (<dialog> elements), the
  // sidebars' classes (sphinx-book-theme's `pst-sidebar-hidden`) and aria-expanded.
  const snapshot = () =>
    Array.from(
      document.querySelectorAll(
        "dialog, .bd-sidebar-primary, .bd-sidebar-secondary, [aria-expanded]",
      ),
    )
      .map((element) =>
        [
          element.id,
          element.open,
          element.className,
          element.getAttribute("aria-expanded"),
        ].join(":"),
      )
      .join("|");

  document.addEventListener(
    "click",
    (event) => {
      if (forwarding || !(event.target instanceof Element)) {
        return;
      }
      const kind = KINDS.find((name) =>
        event.target.closest(`button.${name}-toggle`),
      );
      if (!kind) {
        return;
      }
      const button = event.target.closest(`button.${kind}-toggle`);
      // The button the themes listen to: the first of its kind (see above).
      const bound = document.querySelector(`.${kind}-toggle`);
      if (bound === button) {
        return;
      }
      const before = snapshot();
      // After the click has run through every handler on the page.
      setTimeout(() => {
        if (snapshot() !== before) {
          return; // a theme handled the click itself
        }
        forwarding = true;
        try {
          bound.click();
        } finally {
          forwarding = false;
        }
        // The visible button keeps Bootstrap's tooltip open after a tap; hide it.
        const tooltip =
          window.bootstrap && window.bootstrap.Tooltip
            ? window.bootstrap.Tooltip.getInstance(button)
            : null;
        if (tooltip) {
          tooltip.hide();
        }
      }, 0);
    },
    true,
  );
})();

/*
 * A dropdown's title opens it, wherever it is tapped. sphinx-exercise writes a solution's title
 * as "Solution to <a href="#ex-...">Exercise 3.1 (...)</a>", and sphinx-togglebutton makes the
 * whole title toggle the dropdown, but a tap on the link (most of the title) follows the link
 * instead: the page jumps to the exercise, and togglebutton's handler, which knows only the
 * title, its button and the button's icon as targets, fails on the link. A click anywhere in a
 * toggled admonition's title other than its button is passed to the button.
 */
(() => {
  "use strict";

  document.addEventListener(
    "click",
    (event) => {
      const target = event.target instanceof Element ? event.target : null;
      const title = target ? target.closest(".admonition.toggle > .admonition-title") : null;
      if (!title || target === title || target.closest(".toggle-button")) {
        return; // togglebutton's own targets
      }
      const button = title.querySelector(".toggle-button");
      if (!button) {
        return;
      }
      event.preventDefault(); // not the link's jump
      event.stopPropagation();
      button.click();
    },
    true,
  );
})();
