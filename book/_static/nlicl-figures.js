/*
 * The sliders of the book's plotly figures (nlicl_lib.pages.display.show writes each figure as a
 * div.nlicl-plotly holding plotly's own graph div; _config.yml loads this file on every page).
 * What plotly.js does not do itself:
 *
 * - Keyboard access. Every plotly slider becomes an ARIA slider: its .slider-group gets
 *   tabindex="0", role="slider" and aria-value* (again after each redraw, since plotly redraws
 *   the SVG); ArrowLeft/ArrowDown, ArrowRight/ArrowUp, Home and End move it, applying the step
 *   as a mouse change does (Plotly[step.method](gd, ...step.args), then sliders[i].active), and
 *   keep the focus on it. A focused slider gets the class nlicl-focused and a
 *   rect.nlicl-focus-ring drawn around it (nlicl.css draws the outline where browsers draw one
 *   on SVG elements).
 * - Several sliders at once. plotly applies a step as it was written, with the other sliders at
 *   their first value; for a figure of several static sliders (nlicl_lib.pages.plots.slider_figure,
 *   which records the grid in layout.meta.nlicl_sliders) a change from the mouse or the keyboard
 *   shows the combination of every slider's choice.
 * - Every step labelled, or none. Where its step labels do not fit side by side plotly draws
 *   only every second (or third ...) one, and the other steps' ticks read as nothing; the
 *   last label, centred on the rail's end, may also run past the figure's edge. Then
 *   each label is broken into two lines at the space nearest its middle (a plotly "<br>"); if
 *   they still do not fit (a phone), no step label is drawn and the slider's current value,
 *   which plotly writes above the rail, names the chosen step.
 */
(() => {
  "use strict";

  const FOCUS_COLOUR = "#1a4b8c"; // 8.9:1 against the figures' white paper
  const KEYS = { ArrowLeft: -1, ArrowDown: -1, ArrowRight: 1, ArrowUp: 1 };

  const plain = (text) => String(text === undefined || text === null ? "" : text)
    .replace(/<br\s*\/?>/gi, " ").replace(/<[^>]*>/g, "").replace(/\s+/g, " ").trim();

  const attach = (gd) => {
    const Plotly = window.Plotly;
    if (!gd || !gd.on || !Plotly || !gd.layout || !(gd.layout.sliders || []).length) return;
    const spec = gd.layout.meta && gd.layout.meta.nlicl_sliders;
    const combine = Boolean(spec && spec.names && spec.names.length > 1
      && spec.names.length === gd.layout.sliders.length);
    const active = gd.layout.sliders.map((slider) => slider.active || 0);
    let queue = Promise.resolve();

    const steps = (index) => ((gd.layout.sliders || [])[index] || {}).steps || [];

    // the panel of the combination of every slider's choice
    const showCombination = () => {
      if (!combine) return Promise.resolve();
      const key = spec.keys.findIndex((k) => k.every((value, s) => value === active[s]));
      if (key < 0) return Promise.resolve();
      const visible = spec.panel_of_trace.map((panel) => panel === key);
      const layout = Object.assign({}, spec.layouts ? spec.layouts[key] : {});
      if (spec.titles) layout["title.text"] = spec.titles[key];
      return Plotly.update(gd, { visible: visible }, layout);
    };

    const groups = () => Array.from(gd.querySelectorAll(".slider-container .slider-group"));
    const indexOf = (group) => {
      const datum = group.__data__;
      return datum && typeof datum._index === "number" ? datum._index : groups().indexOf(group);
    };
    const groupAt = (index) => groups().find((group) => indexOf(group) === index) || null;

    // a visible focus indicator drawn in the SVG, for browsers that draw no outline on SVG
    const ring = (group, on) => {
      const old = group.querySelector(".nlicl-focus-ring");
      if (old) old.remove();
      if (!on || !group.getBBox) return;
      const box = group.getBBox();
      const rect = document.createElementNS(group.namespaceURI, "rect");
      const attributes = { class: "nlicl-focus-ring", x: box.x - 3, y: box.y - 3,
        width: box.width + 6, height: box.height + 6, rx: 2, fill: "none",
        stroke: FOCUS_COLOUR, "stroke-width": 2, "pointer-events": "none" };
      Object.entries(attributes).forEach(([name, value]) => rect.setAttribute(name, value));
      group.appendChild(rect);
    };

    // the step labels: 0 as written, 1 on two lines, 2 hidden (see the file's comment)
    const labelLevel = gd.layout.sliders.map(() => 0);
    const written = gd.layout.sliders.map((slider) => (slider.steps || []).map((step) => step.label));
    const visibleSteps = (index) => steps(index).filter((step) => step.visible !== false);
    const twoLines = (label) => {
      const text = String(label === undefined || label === null ? "" : label);
      if (/<br\s*\/?>/i.test(text)) return text;
      const spaces = [...text.matchAll(/ /g)].map((match) => match.index);
      if (!spaces.length) return text;
      const middle = spaces.reduce((best, at) => (
        Math.abs(at - text.length / 2) < Math.abs(best - text.length / 2) ? at : best));
      return `${text.slice(0, middle)}<br>${text.slice(middle + 1)}`;
    };
    const fitLabels = () => {
      groups().forEach((group) => {
        const index = indexOf(group);
        const slider = (gd.layout.sliders || [])[index];
        const labels = group.querySelector(".slider-labels");
        if (!slider || !labels) return;
        if (labelLevel[index] >= 2) {
          labels.style.display = "none";
          return;
        }
        const drawn = labels.querySelectorAll(".slider-label-group").length;
        const svg = gd.querySelector(".main-svg");
        const edge = svg ? svg.getBoundingClientRect() : null;
        const cut = edge && Array.from(labels.querySelectorAll(".slider-label")).some((label) => {
          const box = label.getBoundingClientRect();
          return box.width > 0 && (box.left < edge.left - 1 || box.right > edge.right + 1);
        });
        if (drawn >= visibleSteps(index).length && !cut) return;
        labelLevel[index] += 1;
        if (labelLevel[index] === 1) {
          const update = {};
          steps(index).forEach((step, s) => {
            const wrapped = twoLines(step.label);
            if (wrapped !== step.label) update[`sliders[${index}].steps[${s}].label`] = wrapped;
          });
          if (Object.keys(update).length) {
            queue = queue.then(() => Plotly.relayout(gd, update))
              .catch((error) => window.console && window.console.error(error));
            return;
          }
          labelLevel[index] = 2;
        }
        labels.style.display = "none";
        // the labels as written again, so that the current value keeps to one line
        const update = {};
        steps(index).forEach((step, s) => {
          if (step.label !== written[index][s]) {
            update[`sliders[${index}].steps[${s}].label`] = written[index][s];
          }
        });
        if (slider.currentvalue && slider.currentvalue.visible === false) {
          update[`sliders[${index}].currentvalue.visible`] = true;
        }
        if (Object.keys(update).length) {
          queue = queue.then(() => Plotly.relayout(gd, update))
            .catch((error) => window.console && window.console.error(error));
        }
      });
    };

    // plotly redraws the sliders' SVG: (re)set the ARIA slider attributes after every draw
    const decorate = () => {
      fitLabels();
      groups().forEach((group) => {
        const index = indexOf(group);
        const slider = (gd.layout.sliders || [])[index];
        if (!slider) return;
        const list = steps(index);
        const now = typeof slider.active === "number" ? slider.active : active[index];
        const step = list[now] || {};
        const name = plain(slider.currentvalue && slider.currentvalue.prefix).replace(/[:\s]+$/, "");
        const attributes = {
          tabindex: "0", role: "slider", "aria-orientation": "horizontal",
          "aria-label": name || `slider ${index + 1}`, "aria-valuemin": "0",
          "aria-valuemax": String(Math.max(0, list.length - 1)), "aria-valuenow": String(now),
          "aria-valuetext": plain(step.label !== undefined ? step.label : now),
        };
        Object.entries(attributes).forEach(([key, value]) => group.setAttribute(key, value));
        ring(group, document.activeElement === group && group.classList.contains("nlicl-focused"));
      });
    };

    const move = (index, target) => {
      const list = steps(index);
      target = Math.max(0, Math.min(list.length - 1, target));
      if (!list.length || target === active[index]) return;
      active[index] = target;
      const step = list[target];
      queue = queue.then(() => {
        // the step exactly as plotly applies it on a mouse change ...
        const method = step.method || "restyle";
        if (step.execute !== false && method !== "skip" && typeof Plotly[method] === "function") {
          return Plotly[method](gd, ...(step.args || []));
        }
        return null;
      }).then(() => Plotly.relayout(gd, { [`sliders[${index}].active`]: target })) // ... its grip
        .then(showCombination)
        .then(() => { // ... and the focus kept on the slider plotly has redrawn
          decorate();
          const group = groupAt(index);
          if (group && document.activeElement !== group) {
            group.classList.add("nlicl-focused");
            group.focus({ preventScroll: true });
          }
          decorate();
        })
        .catch((error) => window.console && window.console.error(error));
    };

    gd.on("plotly_sliderchange", (event) => {
      let index = event.slider._index;
      if (index === undefined) index = (gd.layout.sliders || []).indexOf(event.slider);
      if (index < 0 || index >= active.length) return;
      active[index] = event.step._index;
      // the step's own method runs in the next animation frame; show the combination after it
      window.requestAnimationFrame(() => window.requestAnimationFrame(
        () => showCombination().then(decorate)));
    });
    gd.addEventListener("keydown", (event) => {
      const group = event.target && event.target.closest ? event.target.closest(".slider-group") : null;
      if (!group || !gd.contains(group) || event.altKey || event.ctrlKey || event.metaKey) return;
      const index = indexOf(group);
      let target;
      if (KEYS[event.key]) target = active[index] + KEYS[event.key];
      else if (event.key === "Home") target = 0;
      else if (event.key === "End") target = steps(index).length - 1;
      else return;
      event.preventDefault(); // the arrows and Home/End would scroll the page
      move(index, target);
    });
    gd.addEventListener("focusin", (event) => {
      const group = event.target;
      if (!group.classList || !group.classList.contains("slider-group")) return;
      let keyboard = true;
      try { keyboard = group.matches(":focus-visible"); } catch (error) { keyboard = true; }
      group.classList.toggle("nlicl-focused", keyboard);
      ring(group, keyboard);
    });
    gd.addEventListener("focusout", (event) => {
      const group = event.target;
      if (!group.classList || !group.classList.contains("slider-group")) return;
      group.classList.remove("nlicl-focused");
      ring(group, false);
    });
    ["plotly_afterplot", "plotly_relayout", "plotly_restyle", "plotly_update"].forEach(
      (name) => gd.on(name, decorate));
    decorate();
  };

  // The figures' own scripts call Plotly.newPlot while the page is parsed (plotly.js loads in
  // the head); by DOMContentLoaded every graph div exists and listens for events.
  const attachAll = () => document.querySelectorAll(".nlicl-plotly .plotly-graph-div").forEach(attach);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", attachAll);
  } else {
    attachAll();
  }
})();
