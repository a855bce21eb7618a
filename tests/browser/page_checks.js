// Helpers that tests/test_browser.py injects into each built page (window.nlicl).
// They read what plotly.js and the theme have drawn and return plain data (counts, boxes);
// the assertions live in the Python test. They change nothing.
(function () {
  "use strict";

  // Elements plotly.js draws, one per drawn trace, by trace family:
  // cartesian and polar traces are <g class="trace">, heatmaps <g class="hm">,
  // contours <g class="contour">; WebGL traces draw into a canvas and are counted from
  // the figure's full data instead (they have no SVG group).
  const SVG_TRACE_SELECTOR = "g.trace, g.hm, g.contour";
  const GL_TYPES = new Set(["scattergl", "splom", "scatter3d", "surface", "mesh3d",
    "cone", "streamtube", "volume", "isosurface", "heatmapgl", "pointcloud", "parcoords"]);
  // Tolerance, in CSS pixels, of every "lies inside" test (plotly rounds some positions).
  const SLACK_PX = 1;

  function graphDiv(figureId) {
    return document.getElementById(figureId);
  }

  function box(rect) {
    return { left: rect.left, top: rect.top, right: rect.right, bottom: rect.bottom,
      width: rect.width, height: rect.height };
  }

  function figures() {
    return Array.from(document.querySelectorAll(".nlicl-plotly")).map((wrapper) => {
      const id = wrapper.getAttribute("data-nlicl-figure");
      const gd = graphDiv(id);
      const drawn = gd && gd._fullData !== undefined;
      const fullData = drawn ? gd._fullData : [];
      const glDrawn = fullData.filter((t) => t.visible === true && GL_TYPES.has(t.type)).length;
      return {
        id: id,
        drawn: drawn,
        dataTraces: gd && gd.data ? gd.data.length : 0,
        visibleTraces: fullData.filter((t) => t.visible === true).length,
        svgTraces: gd ? gd.querySelectorAll(SVG_TRACE_SELECTOR).length + glDrawn : 0,
        sliders: drawn ? (gd._fullLayout.sliders || []).filter((s) => s.visible)
          .map((s) => ({ steps: s.steps.length, active: s.active })) : [],
        width: gd ? gd.getBoundingClientRect().width : 0,
        svgWidth: gd && gd.querySelector(".main-svg")
          ? gd.querySelector(".main-svg").getBoundingClientRect().width : 0,
        containerWidth: wrapper.parentElement.getBoundingClientRect().width,
      };
    });
  }

  function allFiguresDrawn() {
    return figures().every((f) => f.drawn);
  }

  // --- what each trace drew ------------------------------------------------------------

  // A data value plotly can place: not missing, not NaN or infinite, and positive on a log
  // axis. Strings count (categories, dates): on an axis of the wrong type they are data the
  // figure fails to show, which is what the check is for.
  function placeable(value, axisType) {
    if (value === null || value === undefined || value === "") { return false; }
    const number = typeof value === "number" ? value : Number(value);
    if (typeof value === "number" && !Number.isFinite(value)) { return false; }
    if (axisType === "log" && Number.isFinite(number) && number <= 0) { return false; }
    return true;
  }

  // Number of (x, y) pairs of a scatter trace that the reader should see as markers.
  function placeablePairs(trace, xa, ya) {
    const n = trace._length !== undefined ? trace._length
      : Math.max(trace.x ? trace.x.length : 0, trace.y ? trace.y.length : 0);
    let count = 0;
    for (let i = 0; i < n; i++) {
      const xOk = !trace.x || placeable(trace.x[i], xa && xa.type);
      const yOk = !trace.y || placeable(trace.y[i], ya && ya.type);
      if (xOk && yOk) { count++; }
    }
    return count;
  }

  // The trace's drawn group (plotly binds the trace's calcdata to it with d3).
  function traceGroup(gd, index) {
    return Array.from(gd.querySelectorAll(SVG_TRACE_SELECTOR)).find((group) => {
      const cd = group.__data__;
      return Array.isArray(cd) && cd[0] && cd[0].trace && cd[0].trace.index === index;
    }) || null;
  }

  // "translate(x,y)" or "translate(x y)": the position plotly gave a marker, in the
  // coordinates of its subplot's plot area (origin top left, size xa._length x ya._length).
  function translation(element) {
    const match = /translate\(\s*([-+\d.eE]+)[ ,]+([-+\d.eE]+)\s*\)/
      .exec(element.getAttribute("transform") || "");
    return match ? { x: Number(match[1]), y: Number(match[2]) } : null;
  }

  function insideArea(x, y, area) {
    return x >= -SLACK_PX && x <= area.width + SLACK_PX
      && y >= -SLACK_PX && y <= area.height + SLACK_PX;
  }

  // Does an SVG element's own box (getBBox, in its subplot's coordinates) reach the plot area?
  function meetsArea(element, area) {
    const b = element.getBBox();
    return b.x <= area.width + SLACK_PX && b.x + b.width >= -SLACK_PX
      && b.y <= area.height + SLACK_PX && b.y + b.height >= -SLACK_PX;
  }

  // Number of vertices of an SVG path ("M1,2L3,4" has 2; each drawing command ends on one).
  function pathVertices(d) {
    return (d.match(/[MLHVCSQTA]/gi) || []).length;
  }

  // For every visible trace of the figure: what it drew, per kind of mark, so that the test
  // can check that each trace shows its data inside the plot area. Kinds:
  //   markers  {expected, drawn, offPlot, offSample}: path.point per placeable (x, y) pair
  //   lines    {segments, longest, inPlot}: path.js-line, vertices of the longest segment
  //   fills    {drawn, inPlot}: path.js-fill with a non-empty d
  //   text     {drawn}: g.textpoint
  //   bars     {drawn, inPlot}: g.point path that is not plotly's blank "M0,0Z"
  //   images   {drawn, inPlot}: heatmap <image> with a non-zero size
  //   paths    {drawn}: any other trace type: its group's non-empty paths
  function traceMarks(figureId) {
    const gd = graphDiv(figureId);
    const layout = gd._fullLayout;
    return gd._fullData.filter((t) => t.visible === true).map((trace) => {
      const result = { index: trace.index, name: trace.name || "", type: trace.type,
        mode: trace.mode || null };
      if (GL_TYPES.has(trace.type)) { result.gl = true; return result; }
      const group = traceGroup(gd, trace.index);
      result.group = group !== null;
      if (!group) { return result; }
      const plotinfo = layout._plots && layout._plots[(trace.xaxis || "") + (trace.yaxis || "")];
      const xa = plotinfo && plotinfo.xaxis;
      const ya = plotinfo && plotinfo.yaxis;
      const area = plotinfo ? { width: xa._length, height: ya._length } : null;
      if (trace.type === "scatter") {
        const mode = trace.mode || "";
        if (mode.includes("markers")) {
          const points = Array.from(group.querySelectorAll("path.point"));
          const positions = points.map(translation).filter((p) => p !== null);
          const off = area ? positions.filter((p) => !insideArea(p.x, p.y, area)) : [];
          result.markers = {
            expected: placeablePairs(trace, xa, ya),
            drawn: points.length,
            offPlot: off.length,
            offSample: off.slice(0, 3),
            area: area,
          };
        }
        if (mode.includes("lines")) {
          const lines = Array.from(group.querySelectorAll("path.js-line"))
            .filter((path) => (path.getAttribute("d") || "").trim() !== "");
          result.lines = {
            segments: lines.length,
            longest: Math.max(0, ...lines.map((p) => pathVertices(p.getAttribute("d")))),
            inPlot: area ? lines.some((p) => meetsArea(p, area)) : true,
          };
        }
        if (mode.includes("text")) {
          result.text = { drawn: group.querySelectorAll("g.textpoint").length };
        }
        if (trace.fill && trace.fill !== "none") {
          const fills = Array.from(group.querySelectorAll("path.js-fill"))
            .filter((path) => (path.getAttribute("d") || "").trim() !== "");
          result.fills = {
            drawn: fills.length,
            inPlot: area ? fills.some((p) => meetsArea(p, area)) : true,
          };
        }
      } else if (trace.type === "bar") {
        const bars = Array.from(group.querySelectorAll("g.point path"))
          .filter((path) => !/^M0,0Z$/i.test((path.getAttribute("d") || "").trim()));
        result.bars = {
          drawn: bars.length,
          inPlot: area ? bars.some((p) => meetsArea(p, area)) : true,
        };
      } else if (trace.type === "heatmap") {
        const images = Array.from(group.querySelectorAll("image")).filter((image) => {
          const b = image.getBBox();
          return b.width > 0 && b.height > 0;
        });
        result.images = {
          drawn: images.length,
          inPlot: area ? images.some((p) => meetsArea(p, area)) : true,
        };
      } else {
        result.paths = {
          drawn: Array.from(group.querySelectorAll("path"))
            .filter((path) => (path.getAttribute("d") || "").trim() !== "").length,
        };
      }
      return result;
    });
  }

  // --- sliders ---------------------------------------------------------------------------

  // What the figure shows, without the slider or menu widgets themselves (moving a slider
  // always redraws its grip and label; the test wants to know that the *data* changed).
  function snapshot(figureId) {
    const gd = graphDiv(figureId);
    return Array.from(gd.querySelectorAll(".main-svg")).map((svg) => {
      const copy = svg.cloneNode(true);
      copy.querySelectorAll(".slider-container, .updatemenu-container")
        .forEach((node) => node.remove());
      return copy.innerHTML;
    }).join("\n");
  }

  function sliderGroups(figureId) {
    return Array.from(graphDiv(figureId).querySelectorAll(".slider-container .slider-group"));
  }

  // Screen position of step `step` of slider `index`, as plotly.js lays the steps out on the
  // rail: stepInset (10 px, plotly's constant) from each end, evenly spaced in between.
  function sliderStepPoint(figureId, index, step) {
    const gd = graphDiv(figureId);
    const rail = sliderGroups(figureId)[index].querySelector(".slider-rail-touch-rect");
    rail.scrollIntoView({ block: "center", inline: "center" });
    const rect = rail.getBoundingClientRect();
    const steps = gd._fullLayout.sliders.filter((s) => s.visible)[index].steps.length;
    const stepInset = 10;
    const fraction = steps > 1 ? step / (steps - 1) : 0;
    return {
      x: rect.left + stepInset + (rect.width - 2 * stepInset) * fraction,
      y: rect.top + rect.height / 2,
    };
  }

  // The keyboard side of a slider (book/_static/nlicl-figures.js): focus it as Tab would,
  // and read its role and aria-valuenow.
  function focusSlider(figureId, index) {
    const group = sliderGroups(figureId)[index];
    group.scrollIntoView({ block: "center" });
    group.focus();
    return document.activeElement === group
      && group.getAttribute("role") === "slider" && group.getAttribute("aria-valuenow") !== null;
  }

  function sliderActive(figureId, index) {
    const gd = graphDiv(figureId);
    return gd._fullLayout.sliders.filter((s) => s.visible)[index].active;
  }


  // --- text of the figures: where each visible piece of SVG text lies --------------------

  const FIGURE_TEXT_KINDS = [
    ["title", ".gtitle"],
    ["legend", ".legendtext"],
    ["legend title", ".legendtitletext"],
    ["axis title", ".infolayer text[class$='title']:not(.gtitle):not(.legendtitletext)"],
    ["tick label", "g[class*='axislayer'] text"],
    ["annotation", ".annotation-text"],
    ["slider label", ".slider-label"],
    ["slider value", ".slider-current-value"],
    ["colorbar", ".colorbar text"],
  ];

  // A piece of SVG text as the reader reads it: plotly writes each line of a multi-line text
  // as a <tspan class="line">.
  function svgText(element) {
    const lines = element.querySelectorAll("tspan.line");
    const text = lines.length ? Array.from(lines).map((line) => line.textContent).join(" ")
      : element.textContent;
    return text.replace(/\s+/g, " ").trim().slice(0, 80);
  }

  function visibleText(element) {
    if (!element.textContent.trim()) { return false; }
    if (element.checkVisibility && !element.checkVisibility({ opacityProperty: true,
      visibilityProperty: true })) { return false; }
    const rect = element.getBoundingClientRect();
    return rect.width > 0 && rect.height > 0;
  }

  // Boxes (viewport coordinates) of a figure's visible SVG texts and of the figure.
  function figureTextLayout(figureId) {
    const gd = graphDiv(figureId);
    const container = gd.querySelector(".svg-container") || gd.querySelector(".main-svg");
    const seen = new Set();
    const texts = [];
    for (const [kind, selector] of FIGURE_TEXT_KINDS) {
      for (const element of gd.querySelectorAll(selector)) {
        if (seen.has(element) || element.closest(".hoverlayer") || !visibleText(element)) {
          continue;
        }
        seen.add(element);
        texts.push({ kind: kind, text: svgText(element),
          box: box(element.getBoundingClientRect()) });
      }
    }
    return {
      figure: box(container.getBoundingClientRect()),
      texts: texts,
    };
  }

  // --- static training panels --------------------------------------------------------------

  // Each training panel of the static site (trained in the page where the browser can: see
  // nlicl-figures.js): its first child (the notice, role="note"), the notice's start, and its
  // buttons, disabled or not, and whether each comes after the panel's notice.
  function staticPanels() {
    return Array.from(document.querySelectorAll("div.nlicl-static-panel")).map((panel) => {
      const first = panel.firstElementChild;
      const notice = panel.querySelector('[role="note"]');
      const buttons = Array.from(panel.querySelectorAll("button"));
      return {
        firstChild: first ? first.tagName.toLowerCase() : null,
        firstChildRole: first ? first.getAttribute("role") : null,
        noticeText: notice ? notice.textContent.trim().slice(0, 80) : null,
        buttons: buttons.map((button) => ({
          text: button.textContent.trim(),
          disabled: button.hasAttribute("disabled"),
          afterNotice: Boolean(notice && notice !== button && !notice.contains(button)
            && (notice.compareDocumentPosition(button) & Node.DOCUMENT_POSITION_FOLLOWING)),
        })),
      };
    });
  }

  // One entry per ipywidgets view on the page: was it replaced by rendered widget DOM?
  // The static site should hold none (its training panels are static HTML); the test waits
  // for any that are there to render, so that the other checks see a settled page.
  function widgetViews() {
    const tags = document.querySelectorAll(
      'script[type="application/vnd.jupyter.widget-view+json"]');
    return Array.from(tags).map((tag) => {
      const area = tag.previousElementSibling;
      const rendered = Boolean(area && area.classList.contains("widget-subarea")
        && area.querySelector(".jupyter-widgets, .lm-Widget, .widget-box") !== null);
      return { modelId: JSON.parse(tag.textContent).model_id, rendered: rendered };
    });
  }

  function allWidgetsRendered() {
    return widgetViews().every((w) => w.rendered);
  }

  // --- what a reader can read of sliders, table captions and display maths -----------------

  // Per visible slider of the figure: its step count, its drawn step labels (text and box),
  // the current value plotly writes above the rail (null when none is drawn) and the
  // figure's box.
  function sliderLabels(figureId) {
    const gd = graphDiv(figureId);
    const container = gd.querySelector(".svg-container") || gd.querySelector(".main-svg");
    const specs = (gd._fullLayout.sliders || []).filter((s) => s.visible);
    return Array.from(gd.querySelectorAll(".slider-container .slider-group")).map((group, i) => {
      const labels = Array.from(group.querySelectorAll(".slider-labels .slider-label"))
        .filter(visibleText).map((t) => ({ text: svgText(t), box: box(t.getBoundingClientRect()) }));
      const value = Array.from(group.querySelectorAll(":scope > text.slider-label"))
        .find(visibleText);
      return {
        steps: specs[i] ? specs[i].steps.filter((s) => s.visible !== false).length : 0,
        labels: labels,
        value: value ? { text: svgText(value), box: box(value.getBoundingClientRect()) } : null,
        figure: box(container.getBoundingClientRect()),
      };
    });
  }

  // Each table caption in a box that scrolls sideways: its box and the box's visible part, at
  // the scroll box's start and at its end; whether the caption's own text overflows it.
  async function tableCaptions() {
    const frame = () => new Promise((resolve) => requestAnimationFrame(() => resolve()));
    const found = [];
    for (const caption of document.querySelectorAll("article caption, main caption")) {
      let scroller = caption.parentElement;
      while (scroller && !["auto", "scroll"].includes(getComputedStyle(scroller).overflowX)) {
        scroller = scroller.parentElement;
      }
      if (!scroller) continue;
      const start = scroller.scrollLeft;
      const positions = [];
      for (const left of [0, scroller.scrollWidth]) {
        scroller.scrollLeft = left;
        await frame();
        positions.push({ scrollLeft: scroller.scrollLeft,
          caption: box(caption.getBoundingClientRect()),
          visible: box(scroller.getBoundingClientRect()) });
      }
      scroller.scrollLeft = start;
      found.push({ text: caption.textContent.trim().slice(0, 60), positions: positions,
        overflows: caption.scrollWidth > caption.clientWidth + 1,
        tableWider: scroller.scrollWidth > scroller.clientWidth + 1 });
    }
    return found;
  }

  // Each display equation wider than its box: its scroll position, its box, and the box of its
  // first glyph (the first piece of KaTeX's HTML with text, the equation number left out).
  function wideDisplayMaths() {
    return Array.from(document.querySelectorAll("div.math"))
      .filter((m) => m.scrollWidth > m.clientWidth + 1 && m.getClientRects().length)
      .map((m) => {
        const walker = document.createTreeWalker(m.querySelector(".katex-html") || m,
          NodeFilter.SHOW_TEXT, { acceptNode: (node) => (node.textContent.trim()
            && !node.parentElement.closest(".eqno, .katex-mathml")
            ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_SKIP) });
        const first = walker.nextNode();
        const range = document.createRange();
        if (first) range.selectNodeContents(first);
        const annotation = m.querySelector("annotation");
        return {
          tex: (annotation ? annotation.textContent : m.textContent).trim().slice(0, 50),
          scrollLeft: m.scrollLeft,
          box: box(m.getBoundingClientRect()),
          glyph: first ? { text: first.textContent.trim().slice(0, 5),
            box: box(range.getBoundingClientRect()) } : null,
        };
      });
  }

  // The first solution dropdown of the page: its title link's text and whether it is open
  // (its body drawn), and where its title sits in the viewport.
  function solutionState() {
    const solution = document.querySelector(".solution.dropdown");
    if (!solution) return null;
    const title = solution.querySelector(":scope > .admonition-title");
    const body = Array.from(solution.children).filter((c) => c !== title);
    return {
      id: solution.id,
      open: body.some((c) => c.getClientRects().length && c.getBoundingClientRect().height > 0),
      titleTop: title.getBoundingClientRect().top,
      scrollY: window.scrollY,
      hash: window.location.hash,
    };
  }

  window.nlicl = {
    figures, allFiguresDrawn, traceMarks, snapshot, sliderStepPoint, sliderActive, focusSlider,
    figureTextLayout, staticPanels, widgetViews, allWidgetsRendered, sliderLabels, tableCaptions,
    wideDisplayMaths, solutionState,
  };
})();
