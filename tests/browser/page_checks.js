// Helpers that tests/test_browser.py injects into each built page (window.nlicl).
// They read what plotly.js and the ipywidgets manager have drawn; they change nothing.
(function () {
  "use strict";

  // Elements plotly.js draws, one per drawn trace, by trace family:
  // cartesian and polar traces are <g class="trace">, heatmaps <g class="hm">,
  // contours <g class="contour">; WebGL traces draw into a canvas and are counted from
  // the figure's full data instead (they have no SVG group).
  const SVG_TRACE_SELECTOR = "g.trace, g.hm, g.contour";
  const GL_TYPES = new Set(["scattergl", "splom", "scatter3d", "surface", "mesh3d",
    "cone", "streamtube", "volume", "isosurface", "heatmapgl", "pointcloud", "parcoords"]);

  function graphDiv(figureId) {
    return document.getElementById(figureId);
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

  // Screen position of step `step` of slider `index`, as plotly.js lays the steps out on the
  // rail: stepInset (10 px, plotly's constant) from each end, evenly spaced in between.
  function sliderStepPoint(figureId, index, step) {
    const gd = graphDiv(figureId);
    const groups = gd.querySelectorAll(".slider-container .slider-group");
    const rail = groups[index].querySelector(".slider-rail-touch-rect");
    rail.scrollIntoView({ block: "center", inline: "center" });
    const box = rail.getBoundingClientRect();
    const steps = gd._fullLayout.sliders.filter((s) => s.visible)[index].steps.length;
    const stepInset = 10;
    const fraction = steps > 1 ? step / (steps - 1) : 0;
    return {
      x: box.left + stepInset + (box.width - 2 * stepInset) * fraction,
      y: box.top + box.height / 2,
    };
  }

  function sliderActive(figureId, index) {
    const gd = graphDiv(figureId);
    return gd._fullLayout.sliders.filter((s) => s.visible)[index].active;
  }

  // One entry per ipywidgets view on the page: was it replaced by rendered widget DOM?
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

  window.nlicl = {
    figures, allFiguresDrawn, snapshot, sliderStepPoint, sliderActive,
    widgetViews, allWidgetsRendered,
  };
})();
