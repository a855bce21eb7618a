/*
 * A chapter's training panel, trained in the reader's browser (issue 35). The page's loader
 * (book/_static/nlicl-figures.js) imports this module on the first press of Train and calls
 * attach(panel) with the panel's card (nlicl_lib.pages.panels.TrainingPanel.static_html); it
 * then calls train() on every press.
 *
 * attach reads the chapter's export (chK.json beside this file: its controls, every accepted
 * combination's configs and theory levels, the book's figure styles, made by
 * nlicl_lib.pages.in_page), and adds to the
 * card a Stop button, a progress bar with the time left, a status line and a chart. train()
 * turns the controls into a run with settings.js's runFor (or says "Not trained: ..." and runs
 * nothing), posts it to the trainer (worker.js, a module worker, one per panel, kept between
 * runs) and draws what comes back:
 *
 * - progress: the training loss over E[y^2], as the live panel draws it: a moving average over
 *   2% of the run, at most about 300 points, on a log axis, next to the theory levels (each a
 *   horizontal line named and styled as in the book's figures);
 * - testing: the progress bar counts the test prompts;
 * - done: the test loss as a marker with its Monte Carlo error bar, the status line
 *   "Trained N steps in X s in this browser: test loss A ± B × E[y²] (theory ...)", with the
 *   numbers also in data attributes of the status (data-state, data-test-loss, data-std-error,
 *   data-steps, data-seconds, data-train-seconds, data-test-seconds), and a row in the table of
 *   this page's runs against the chapter's x parameter.
 *
 * The controls are disabled during a run; Stop ends the training at the next step and the
 * model trained so far is tested.
 *
 * The messages between this page and the trainer (worker.js):
 *   page -> worker  {type: "train", run}            run: settings.js's runFor(export, settings).run
 *                   {type: "stop"}                  stop at the next step, then test the model
 *   worker -> page  {type: "progress", step, steps, losses, seconds}
 *                                                   about every 100 ms: each step's batch loss
 *                                                   over E[y^2] since the last message
 *                   {type: "testing", prompts, total}
 *                   {type: "done", stopped, steps, train_seconds, test_seconds, test_loss,
 *                    std_error}                     losses over E[y^2]
 *                   {type: "error", message}
 */
import { runFor } from "./settings.js";

const PLOTLY_CONFIG = { responsive: true, displaylogo: false }; // nlicl_lib.pages.display's
const FONT = { color: "#222222", size: 13 };
const PLOT_HEIGHT_PX = 280; // the plot area's share of the chart; the legend's rows come on top
const LEGEND_ROW_PX = 19;
const AVERAGE_FRACTION = 0.02; // the live panel's moving average: 2% of the run
const MAX_POINTS = 300;

/** Python's format(x, f".{digits}g"). */
export function formatG(x, digits) {
  if (x === 0 || !Number.isFinite(x)) return String(x);
  const [mantissa, exponent] = x.toExponential(digits - 1).split("e");
  const e = Number(exponent);
  if (e < -4 || e >= digits) {
    const sign = e < 0 ? "-" : "+";
    return `${mantissa.replace(/\.?0+$/, "")}e${sign}${String(Math.abs(e)).padStart(2, "0")}`;
  }
  return x.toFixed(Math.max(0, digits - 1 - e)).replace(/(\.\d*?)0+$/, "$1").replace(/\.$/, "");
}

const seconds = (s) => (s >= 10 ? `${Math.round(s)} s` : `${s.toFixed(1)} s`);

/** ``name`` broken into lines of at most ``width`` characters (plotly's "<br>"), at spaces. */
function wrap(name, width) {
  const lines = [];
  let line = "";
  for (const word of name.split(" ")) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line ? `${line} ${word}` : word;
    }
  }
  return [...lines, line].join("<br>");
}

const escapeText = (text) => String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;")
  .replace(/>/g, "&gt;");

const exports = new Map(); // chapter -> promise of its export, fetched once per page

function loadExport(chapter) {
  if (!exports.has(chapter)) {
    const url = new URL(`./${chapter}.json`, import.meta.url);
    exports.set(chapter, fetch(url).then((response) => {
      if (!response.ok) throw new Error(`${url.pathname}: HTTP ${response.status}`);
      return response.json();
    }));
  }
  return exports.get(chapter);
}

const attached = new WeakMap();

/** The panel's trainer (made once per card): its export read, its running parts added. */
export async function attach(element) {
  if (!attached.has(element)) {
    attached.set(element, loadExport(element.dataset.nliclChapter)
      .then((exported) => new Panel(element, exported)));
  }
  return attached.get(element);
}

class Panel {
  constructor(element, exported) {
    this.element = element;
    this.exported = exported;
    this.params = exported.params;
    this.runs = [];
    this.worker = null;
    this.running = false;
    this.trainButton = element.querySelector(".nlicl-static-actions button");
    this.build();
  }

  build() {
    // a line the loader wrote when an earlier press could not load this module
    this.element.querySelectorAll(".nlicl-run-status").forEach((line) => line.remove());
    const actions = this.element.querySelector(".nlicl-static-actions");
    this.stopButton = document.createElement("button");
    this.stopButton.type = "button";
    this.stopButton.className = "nlicl-run-stop";
    this.stopButton.textContent = "Stop";
    this.stopButton.hidden = true;
    this.stopButton.addEventListener("click", () => this.stop());
    actions.append(" ", this.stopButton);

    const run = document.createElement("div");
    run.className = "nlicl-run";
    run.innerHTML = '<div class="nlicl-run-progress" hidden><progress max="1" value="0"></progress>'
      + '<span class="nlicl-run-time"></span></div>'
      + '<p class="nlicl-run-status" role="status" aria-live="polite" data-state="idle"></p>'
      + '<div class="nlicl-run-chart" hidden></div>'
      + '<table class="nlicl-run-table" hidden><caption></caption><thead></thead><tbody></tbody>'
      + "</table>";
    actions.after(run);
    this.progressRow = run.querySelector(".nlicl-run-progress");
    this.progress = run.querySelector("progress");
    this.progress.setAttribute("aria-label", "training progress");
    this.timeLeft = run.querySelector(".nlicl-run-time");
    this.status = run.querySelector(".nlicl-run-status");
    this.chart = run.querySelector(".nlicl-run-chart");
    this.table = run.querySelector(".nlicl-run-table");
  }

  param(name) {
    return this.params.find((p) => p.name === name);
  }

  controlId(param) {
    return `${this.element.id}-${param.name}`;
  }

  /** {name: value} of the controls, as the live panel's widgets give them. */
  settings() {
    const settings = {};
    for (const param of this.params) {
      const id = this.controlId(param);
      if (param.options.length) {
        const checked = this.element.querySelector(`input[name="${CSS.escape(id)}"]:checked`);
        const value = checked ? checked.value : String(param.default);
        settings[param.name] = param.options.find((option) => String(option) === value);
        continue;
      }
      const raw = Number(document.getElementById(id).value);
      if (param.log) {
        // the default exactly when the slider stands where it started (its value is rounded)
        settings[param.name] = Math.abs(raw - Math.log10(param.default)) < 1e-6
          ? param.default : 10 ** raw;
      } else {
        const index = Math.round((raw - param.minimum) / param.step);
        settings[param.name] = Number((param.minimum + index * param.step).toFixed(12));
      }
    }
    return settings;
  }

  setControlsDisabled(disabled) {
    this.element.querySelectorAll(".nlicl-static-controls input, .nlicl-static-controls fieldset")
      .forEach((control) => { control.disabled = disabled; });
    this.trainButton.disabled = disabled;
    this.stopButton.hidden = !disabled;
    this.stopButton.disabled = false;
    this.stopButton.textContent = "Stop";
  }

  setStatus(state, html, data = {}) {
    this.status.dataset.state = state;
    for (const key of ["testLoss", "stdError", "steps", "seconds", "trainSeconds",
      "testSeconds", "stopped"]) {
      delete this.status.dataset[key];
    }
    Object.assign(this.status.dataset, data);
    this.status.innerHTML = html;
  }

  train() {
    if (this.running) return;
    const settings = this.settings();
    let planned;
    try {
      planned = runFor(this.exported, settings);
    } catch (error) {
      planned = { error: String(error && error.message ? error.message : error) };
    }
    if (planned.error) {
      this.setStatus("refused", `<b>Not trained:</b> ${escapeText(planned.error)}`);
      return;
    }
    this.running = true;
    this.current = { settings, run: planned.run, levels: planned.levels, pressed: performance.now() };
    this.steps = settings.steps;
    this.setControlsDisabled(true);
    this.progressRow.hidden = false;
    this.progress.max = this.steps;
    this.progress.value = 0;
    this.timeLeft.textContent = "starting …";
    this.setStatus("training", `Training ${this.steps} steps in this browser, then the test loss …`);
    this.startCurve(planned.levels);
    const worker = this.ensureWorker();
    worker.postMessage({ type: "train", run: planned.run });
  }

  stop() {
    if (!this.running || !this.worker) return;
    this.worker.postMessage({ type: "stop" });
    this.stopButton.disabled = true;
    this.stopButton.textContent = "Stopping …";
  }

  ensureWorker() {
    if (!this.worker) {
      this.worker = new Worker(new URL("./worker.js", import.meta.url), { type: "module" });
      this.worker.addEventListener("message", (event) => this.receive(event.data));
      this.worker.addEventListener("error", (event) => {
        event.preventDefault();
        this.fail(`the trainer stopped: ${event.message || "its script did not load"}`);
      });
      this.worker.addEventListener("messageerror", () => this.fail("a message from the trainer "
        + "could not be read"));
    }
    return this.worker;
  }

  receive(message) {
    if (!this.running) return;
    if (message.type === "progress") this.onProgress(message);
    else if (message.type === "testing") this.onTesting(message);
    else if (message.type === "done") this.onDone(message);
    else if (message.type === "error") this.fail(message.message);
  }

  onProgress({ step, steps, losses, seconds: elapsed }) {
    this.steps = steps;
    this.progress.max = steps;
    this.progress.value = step;
    if (step > 0 && elapsed > 0) {
      const left = ((steps - step) * elapsed) / step;
      this.timeLeft.textContent = `step ${step} of ${steps}, about ${seconds(left)} left`;
    }
    this.extendCurve(losses);
  }

  onTesting({ prompts, total }) {
    this.progress.max = total;
    this.progress.value = prompts;
    this.timeLeft.textContent = `testing: ${prompts.toLocaleString("en")} of `
      + `${total.toLocaleString("en")} prompts`;
    if (this.status.dataset.state !== "testing") {
      this.setStatus("testing", `Testing on ${total.toLocaleString("en")} fresh prompts …`);
    }
  }

  onDone(done) {
    this.running = false;
    const { settings, levels, pressed } = this.current;
    const wall = (performance.now() - pressed) / 1000;
    const theory = levels.find((level) => level.kind === "theory");
    const bound = levels.find((level) => level.kind === "bound");
    const loss = done.test_loss;
    const error = done.std_error;
    let text = done.stopped
      ? `Stopped after ${done.steps} of ${this.steps} steps, trained in ${done.train_seconds.toFixed(1)} s in this browser: `
      : `Trained ${done.steps} steps in ${done.train_seconds.toFixed(1)} s in this browser: `;
    text += `test loss <b>${formatG(loss, 4)}</b> ± ${formatG(error, 2)} × E[y²]`;
    if (theory) {
      text += ` (${escapeText(theory.name)}: <b>${formatG(theory.value, 4)}</b>, ratio `
        + `${(loss / theory.value).toFixed(3)})`;
    }
    if (bound) text += `; best linear predictor ${formatG(bound.value, 4)}`;
    text += `. Tested in ${done.test_seconds.toFixed(1)} s on fresh prompts.`;
    this.setStatus("done", text, {
      testLoss: String(loss), stdError: String(error), steps: String(done.steps),
      stopped: String(Boolean(done.stopped)), seconds: String(wall),
      trainSeconds: String(done.train_seconds), testSeconds: String(done.test_seconds),
    });
    this.progress.max = 1;
    this.progress.value = 1;
    this.timeLeft.textContent = `done in ${seconds(wall)}`;
    this.finishCurve(done);
    this.runs.push({ settings, loss, error, theory, steps: done.steps, stopped: done.stopped });
    this.showRuns();
    this.setControlsDisabled(false);
  }

  fail(message) {
    if (!this.running) return;
    this.running = false;
    if (this.worker) this.worker.terminate(); // a fresh one for the next press
    this.worker = null;
    this.setStatus("error", `<b>Not trained:</b> ${escapeText(message)}`);
    this.timeLeft.textContent = "";
    this.progressRow.hidden = true;
    this.setControlsDisabled(false);
  }

  // --- the chart -------------------------------------------------------------------------

  startCurve(levels) {
    const steps = this.steps;
    this.window = Math.max(1, Math.floor(steps * AVERAGE_FRACTION));
    this.every = Math.max(1, Math.floor((steps - this.window + 1) / MAX_POINTS));
    this.recent = [];
    this.sum = 0;
    this.seen = 0;
    this.chart.hidden = false;
    const width = this.chart.clientWidth || this.element.clientWidth || 600;
    const nameWidth = Math.max(28, Math.floor(width / 7.5) - 6);
    const traces = [{
      x: [], y: [], name: "training loss (moving average)", mode: "lines", type: "scatter",
      line: this.exported.styles.curve,
    }, ...levels.map((level) => ({
      x: [0, steps], y: [level.value, level.value], name: wrap(level.name, nameWidth),
      mode: "lines", type: "scatter", line: this.exported.styles.levels[level.kind],
      hovertemplate: `${escapeText(level.name)}: %{y:.4g}<extra></extra>`,
    }))];
    const rows = traces.reduce((sum, trace) => sum + trace.name.split("<br>").length, 1);
    const layout = {
      height: PLOT_HEIGHT_PX + 60 + LEGEND_ROW_PX * rows, autosize: true, font: FONT, paper_bgcolor: "white",
      plot_bgcolor: "white", margin: { l: 8, r: 16, t: 8, b: 8 }, hovermode: "closest",
      legend: { orientation: "h", x: 0, xanchor: "left", y: 1.02, yanchor: "bottom",
        bgcolor: "rgba(255,255,255,0.9)" },
      // room after the last step for the test loss's marker
      xaxis: { title: { text: "training step" }, range: [0, steps * 1.04], automargin: true,
        gridcolor: "#ebebeb", zeroline: false, showline: true, linecolor: "#444" },
      yaxis: { title: { text: "loss / E[y²]" }, type: "log", automargin: true,
        gridcolor: "#ebebeb", showline: true, linecolor: "#444" },
    };
    this.chart.setAttribute("role", "img");
    this.chart.setAttribute("aria-label", "Training loss of this run in the browser over "
      + `E[y²], on a log scale, against the training step, with ${levels.map((l) => l.name)
        .join("; ")}`);
    window.Plotly.newPlot(this.chart, traces, layout, PLOTLY_CONFIG);
    this.chart.dataset.points = "0";
  }

  /** The moving average of the last ``window`` losses at every ``every``-th step from
   * ``window`` on (the live panel's figure: np.convolve(..., "valid")[::every]). */
  extendCurve(losses) {
    const xs = [];
    const ys = [];
    for (const loss of losses) {
      this.recent.push(loss);
      this.sum += loss;
      this.seen += 1;
      if (this.recent.length > this.window) this.sum -= this.recent.shift();
      if (this.seen >= this.window && (this.seen - this.window) % this.every === 0) {
        xs.push(this.seen);
        ys.push(this.sum / this.window);
      }
    }
    if (!xs.length) return;
    window.Plotly.extendTraces(this.chart, { x: [xs], y: [ys] }, [0]);
    this.chart.dataset.points = String(this.chart.data[0].x.length);
  }

  finishCurve(done) {
    window.Plotly.addTraces(this.chart, {
      x: [done.steps], y: [done.test_loss], name: "test loss", mode: "markers", type: "scatter",
      marker: { color: this.exported.styles.marker, size: 12, symbol: "diamond" },
      error_y: { type: "data", array: [done.std_error], visible: true, color: this.exported.styles.marker },
    });
  }

  // --- the runs of this page against the x parameter ---------------------------------------

  showRuns() {
    const x = this.param(this.exported.x_param);
    const last = this.runs[this.runs.length - 1];
    const same = this.runs.filter((run) => this.params.every((p) => p.name === x.name
      || run.settings[p.name] === last.settings[p.name]));
    const order = (run) => (x.options.length ? x.options.indexOf(run.settings[x.name])
      : run.settings[x.name]);
    same.sort((a, b) => order(a) - order(b));
    this.table.hidden = false;
    this.table.querySelector("caption").textContent = `Test loss of this page's runs against ${x.label}`
      + (this.params.length > 1 ? ", the other settings as in the last run" : "");
    this.table.querySelector("thead").innerHTML = `<tr><th scope="col">${escapeText(x.label)}</th>`
      + '<th scope="col">test loss / E[y²]</th><th scope="col">theory</th></tr>';
    this.table.querySelector("tbody").innerHTML = same.map((run) => {
      const value = run.settings[x.name];
      const shown = typeof value === "number" && !Number.isInteger(value) ? formatG(value, 3) : value;
      const stopped = run.stopped ? ` (stopped at step ${run.steps})` : "";
      return `<tr><td>${escapeText(shown)}</td><td>${formatG(run.loss, 4)} ± `
        + `${formatG(run.error, 2)}${stopped}</td><td>${run.theory ? formatG(run.theory.value, 4)
          : "–"}</td></tr>`;
    }).join("");
  }
}
