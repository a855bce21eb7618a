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

/*
 * The chapters' training panels train in the reader's browser (issue 35). The book build writes
 * each panel as a disabled card (nlicl_lib.pages.panels.TrainingPanel.static_html:
 * div.nlicl-static-panel[data-nlicl-chapter]). Where module Web Workers run, this enables its
 * controls and Train, keeps each slider's readout beside it, and rewords the notice; nothing of
 * the trainer loads until the first press, which imports in-page/panel.js (beside this file)
 * and hands it the panel. Elsewhere the card stays disabled and its notice says why.
 */
(() => {
  "use strict";

  const here = document.currentScript && document.currentScript.src; // at load, not later
  const NOTICE = "This panel trains in your browser: move the controls and press Train (the "
    + "model trains here, in a background thread; nothing is sent anywhere). On Binder or Colab "
    + "(the launch buttons at the top of the page) the same panel runs live in Python.";
  const DEVICE = "Device: this browser, in a Web Worker (one CPU core).";
  const ESTIMATE = "Expected time: measured as it trains (the progress bar shows the time left).";
  const UNABLE = " This browser cannot train it in the page: the in-page trainer needs module "
    + "Web Workers.";

  // The options' `type` is read only by a browser that knows module workers; the URL cannot
  // be parsed, so no worker starts and nothing is requested.
  const moduleWorkers = () => {
    let read = false;
    try {
      new Worker("http://[", { get type() { read = true; return "module"; } }).terminate();
    } catch (error) { /* the URL, as intended */ }
    return read && typeof window.Plotly === "object";
  };

  // Python's format(x, ".3g"), as Param.shown writes a float
  const g3 = (x) => {
    if (x === 0 || !Number.isFinite(x)) return String(x);
    const [mantissa, exponent] = x.toExponential(2).split("e");
    const e = Number(exponent);
    if (e < -4 || e >= 3) {
      return `${mantissa.replace(/\.?0+$/, "")}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
    }
    return x.toFixed(Math.max(0, 2 - e)).replace(/(\.\d*?)0+$/, "$1").replace(/\.$/, "");
  };

  // Param.static_html writes a log slider over the exponent, its readout (and aria-valuetext)
  // as 10^value; an integer step from an integer start is an integer slider (str(value)).
  const readout = (input) => {
    const value = Number(input.value);
    const shown = Number(input.getAttribute("aria-valuetext"));
    const log = Math.abs(shown - value) > 1e-9 && Math.abs(Math.log10(shown) - Number(
      input.defaultValue)) < 1e-3;
    const whole = Number.isInteger(Number(input.step)) && Number.isInteger(Number(input.min));
    return () => (log ? g3(10 ** Number(input.value))
      : whole ? String(Math.round(Number(input.value))) : g3(Number(input.value)));
  };

  // On screen the new wording; on paper (the PDF prints the site) the card's own, since
  // nothing trains there (nlicl.css: .nlicl-screen-only, .nlicl-print-only).
  const reword = (element, text) => {
    const screen = document.createElement("span");
    screen.className = "nlicl-screen-only";
    screen.textContent = text;
    const paper = document.createElement("span");
    paper.className = "nlicl-print-only";
    paper.textContent = element.textContent;
    element.replaceChildren(screen, paper);
  };

  const enable = (panel) => {
    reword(panel.querySelector(".nlicl-static-notice"), NOTICE);
    const lines = panel.querySelectorAll(".nlicl-static-line:not(.nlicl-in-page-time)");
    if (lines.length === 2) [[lines[0], DEVICE], [lines[1], ESTIMATE]].forEach((l) => reword(...l));
    // the default run's time in a browser, measured when the book was (bench/in_page_times.py)
    panel.querySelectorAll(".nlicl-in-page-time").forEach((line) => { line.hidden = false; });
    panel.querySelectorAll("input[type=range]").forEach((input) => {
      const output = panel.querySelector(`output[for="${input.id}"]`);
      const show = readout(input);
      input.addEventListener("input", () => {
        const text = show();
        input.setAttribute("aria-valuetext", text);
        if (output) output.textContent = text;
      });
    });
    panel.querySelectorAll("input, fieldset, button").forEach((control) => {
      control.disabled = false;
      control.removeAttribute("aria-disabled");
    });
    const train = panel.querySelector(".nlicl-static-actions button");
    let ready = null;
    train.addEventListener("click", () => {
      ready = ready || import(new URL("in-page/panel.js", here).href)
        .then((module) => module.attach(panel));
      ready.then((trainer) => trainer.train()).catch((error) => {
        ready = null; // a later press tries again
        let status = panel.querySelector(".nlicl-run-status");
        if (!status) {
          status = document.createElement("p");
          status.className = "nlicl-run-status";
          status.setAttribute("role", "status");
          train.parentElement.after(status);
        }
        status.dataset.state = "error";
        status.textContent = `Not trained: the trainer did not load (${error.message || error}).`;
      });
    });
  };

  const setUp = () => {
    const able = Boolean(here) && moduleWorkers();
    document.querySelectorAll("div.nlicl-static-panel[data-nlicl-chapter]").forEach((panel) => {
      if (able) enable(panel);
      else panel.querySelector(".nlicl-static-notice").append(UNABLE);
    });
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUp);
  else setUp();
})();
