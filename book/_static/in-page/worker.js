// The in-page trainer's module worker: trains one run off the main thread and reports as it
// goes (the protocol is in panel.js's header). Loaded only when the reader presses Train.
import { Trainer } from "./core.js";

const REPORT_SECONDS = 0.1;
let stopRequested = false;

self.onmessage = (event) => {
  const message = event.data;
  if (message.type === "stop") stopRequested = true;
  if (message.type === "train") {
    stopRequested = false;
    train(message.run).catch((error) => self.postMessage({ type: "error", message: String(error.message || error) }));
  }
};

// Yield to the event loop (so that a Stop message is read) between slices of steps.
const pause = () => new Promise((resolve) => setTimeout(resolve, 0));

async function train(run) {
  const trainer = new Trainer(run);
  const steps = run.train.steps;
  const start = performance.now();
  let pending = [], lastReport = start, step = 0;
  while (step < steps && !stopRequested) {
    pending.push(trainer.step());
    step += 1;
    const now = performance.now();
    if (now - lastReport >= REPORT_SECONDS * 1000 || step === steps) {
      self.postMessage({ type: "progress", step, steps, losses: pending, seconds: (now - start) / 1000 });
      pending = [];
      lastReport = now;
      await pause();
    }
  }
  if (pending.length) {
    self.postMessage({ type: "progress", step, steps, losses: pending, seconds: (performance.now() - start) / 1000 });
  }
  const trained = performance.now();
  let lastTestReport = trained;
  const result = trainer.test(run.test_prompts, 2000, (prompts) => {
    const now = performance.now();
    if (now - lastTestReport >= REPORT_SECONDS * 1000) {
      self.postMessage({ type: "testing", prompts, total: run.test_prompts });
      lastTestReport = now;
    }
  });
  self.postMessage({ type: "done", stopped: step < steps, steps: step,
    train_seconds: (trained - start) / 1000, test_seconds: (performance.now() - trained) / 1000,
    test_loss: result.mean, std_error: result.stdError, prompts: result.prompts });
}
