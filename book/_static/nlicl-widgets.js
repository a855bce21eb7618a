// Set-up for the ipywidgets HTML manager (vendor/jupyter-widgets/embed-amd.js) on the static
// site. Loaded just before require.js and the manager, on pages that hold widgets
// (nb_ipywidgets_js in _config.yml).
(function () {
  "use strict";

  // 1. The manager finds its icon fonts next to the URL that require.js gives its module
  //    "@jupyter-widgets/html-manager/dist/libembed-amd", by default relative to the page.
  //    Map that module path onto the vendored copy (a global `require` object is the
  //    configuration require.js reads when it loads).
  var vendor = new URL("vendor/jupyter-widgets", document.currentScript.src).href;
  window.require = { paths: { "@jupyter-widgets/html-manager/dist": vendor } };

  // 2. ipywidgets' sliders draw their handle as a role="slider" element without a name (the
  //    widget's description label is not tied to it), which screen readers announce as an
  //    unnamed slider (axe-core: aria-input-field-name, serious). Name each handle after its
  //    widget's description as it appears.
  function nameSliderHandles(root) {
    root.querySelectorAll(".noUi-handle[role='slider']").forEach(function (handle) {
      if (handle.hasAttribute("aria-label") || handle.hasAttribute("aria-labelledby")) {
        return;
      }
      var widget = handle.closest(".widget-slider, .jupyter-widgets");
      var label = widget && widget.querySelector(".widget-label");
      var text = label && label.textContent.trim();
      handle.setAttribute("aria-label", text || "slider");
    });
  }
  new MutationObserver(function () { nameSliderHandles(document); })
    .observe(document.documentElement, { childList: true, subtree: true });

  // 3. Widget labels are typeset through the MathJax 2 API (MathJax.Hub.Queue) whenever
  //    window.MathJax exists; the book loads MathJax 3, which has no Hub. Provide a Hub whose
  //    Queue calls MathJax 3's typesetPromise, both on the configuration object (before
  //    MathJax loads) and on MathJax itself once it is ready (MathJax 3 replaces the global).
  var hub = {
    Queue: function (command) {
      var element = Array.isArray(command) ? command[2] : undefined;
      var live = window.MathJax;
      if (live && live.startup && live.startup.promise && live.typesetPromise) {
        live.startup.promise
          .then(function () { return live.typesetPromise(element ? [element] : undefined); })
          .catch(function (error) { console.warn("MathJax: widget label not typeset", error); });
      } // else: MathJax is not loaded (yet); its own start-up typesets the page.
    },
  };
  var config = (window.MathJax = window.MathJax || {});
  if (config.version) {  // MathJax is already loaded
    config.Hub = config.Hub || hub;
    return;
  }
  config.Hub = hub;
  var startup = (config.startup = config.startup || {});
  var ready = startup.ready;
  startup.ready = function () {
    if (ready) {
      ready();
    } else {
      window.MathJax.startup.defaultReady();
    }
    window.MathJax.Hub = window.MathJax.Hub || hub;
  };
})();
