// The page's model and trainer (book/_static/in-page/core.js) against the library's, in
// float64: the fixtures (tests/js/fixtures.json) are made by nlicl_lib.pages.in_page from
// nlicl_lib.core.models and nlicl_lib.training.train, and tests/test_in_page.py fails when
// they no longer match what the library computes. Tolerance: 1e-12 of the largest entry of
// the array compared (the library's sums run in another order). The training steps are
// checked one at a time from the library's weights and gradients.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import {
  Adam, Model, Rng, clipGradients, erf, initWeights, learningRateAt, monomials, nullLoss,
  samplePrompts, Trainer,
} from "../../book/_static/in-page/core.js";

const TOLERANCE = 1e-12;
const { cases: fixtures, erf: erfTable } = JSON.parse(
  readFileSync(fileURLToPath(new URL("fixtures.json", import.meta.url))));

const flat = (value) => Float64Array.from(value.flat(Infinity));

function prompts(batch, task) {
  const x = flat(batch.x), y = flat(batch.y);
  return { x, y, batch: batch.y.length, tokens: task.context_length + 1, d: task.input_dim };
}

function close(actual, expected, what) {
  assert.equal(actual.length, expected.length, `${what}: ${actual.length} entries, expected ${expected.length}`);
  let scale = 0, worst = 0, at = -1;
  for (let i = 0; i < expected.length; i++) scale = Math.max(scale, Math.abs(expected[i]));
  for (let i = 0; i < expected.length; i++) {
    const gap = Math.abs(actual[i] - expected[i]);
    if (!(gap <= worst)) { worst = gap; at = i; }
  }
  assert.ok(worst <= TOLERANCE * Math.max(scale, 1e-300),
    `${what}: entry ${at} is ${actual[at]}, the library's ${expected[at]} (gap ${worst}, ` +
    `allowed ${TOLERANCE} x ${scale})`);
}

const weightsOf = (record) => Object.fromEntries(
  Object.entries(record).map(([name, value]) => [name, flat(value)]));

for (const fixture of fixtures) {
  // every model through its tokens; a stack in the GD form also through its statistics
  const paths = ["tokens"];
  if (new Model(fixture.model, fixture.task, weightsOf(fixture.weights)).s.gdForm) paths.push("statistics");
  for (const path of paths) {
    const make = (weights) => {
      const model = new Model(fixture.model, fixture.task, weights);
      model.fast = path === "statistics";
      return model;
    };

    test(`${fixture.name}, through its ${path}: predictions, loss and gradients equal the library's`, () => {
      const model = make(weightsOf(fixture.weights));
      const grads = model.zeroGrads();
      const { predictions, loss } = model.run(prompts(fixture.batches[0], fixture.task), grads,
        1 / fixture.null_loss);
      close(predictions, Float64Array.from(fixture.prediction), "predictions");
      close([loss], [fixture.loss], "loss");
      assert.deepEqual(Object.keys(grads).sort(), Object.keys(fixture.gradients[0]).sort());
      for (const [name, value] of Object.entries(fixture.gradients[0])) {
        close(grads[name], flat(value), `gradient of ${name}`);
      }
    });

    // Step by step from the library's numbers: the gradients at the library's weights before
    // each step, and Adam fed the library's gradients (near Adam's epsilon a step amplifies
    // the gradients' rounding, so the two trajectories are not compared; in_page.fixture).
    test(`${fixture.name}, through its ${path}: three Adam steps equal the library's trainer`, () => {
      const weights = weightsOf(fixture.weights);
      const optimizer = new Adam(weights);
      fixture.batches.forEach((batch, step) => {
        const rate = learningRateAt(fixture.train, step);
        close([rate], [fixture.learning_rates[step]], `learning rate at step ${step}`);
        const before = step === 0 ? fixture.weights : fixture.weights_after[step - 1];
        const model = make(weightsOf(before));
        const grads = model.zeroGrads();
        model.run(prompts(batch, fixture.task), grads, 1 / fixture.null_loss);
        const library = weightsOf(fixture.gradients[step]);
        for (const [name, value] of Object.entries(library)) {
          close(grads[name], value, `gradient of ${name} at step ${step + 1}`);
        }
        clipGradients(library, fixture.train.grad_clip);
        optimizer.step(library, rate);
        for (const [name, value] of Object.entries(fixture.weights_after[step])) {
          close(weights[name], flat(value), `${name} after step ${step + 1}`);
        }
      });
    });
  }

  test(`${fixture.name}: E[y^2] equals the library's`, () => {
    close([nullLoss(fixture.task)], [fixture.null_loss], "E[y^2]");
  });

  test(`${fixture.name}: initial weights have the library's shapes`, () => {
    const weights = initWeights(fixture.model, fixture.task, new Rng(1, 2));
    for (const [name, value] of Object.entries(fixture.weights)) {
      assert.equal(weights[name]?.length, flat(value).length, `${name}: size`);
    }
    assert.deepEqual(Object.keys(weights).sort(), Object.keys(fixture.weights).sort());
  });
}

test("erf equals Python's math.erf to 1e-15 at 61 points from -7 to 7", () => {
  for (const [x, value] of erfTable) {
    assert.ok(Math.abs(erf(x) - value) <= 1e-15 * Math.max(1, Math.abs(value)),
      `erf(${x}) = ${erf(x)}, Python's ${value}`);
  }
});

test("the ziggurat's normals: moments 0, 1, 0, 3 and the tail beyond its last layer", () => {
  const rng = new Rng(11, 0), count = 2_000_000;
  const moments = [0, 0, 0, 0];
  let tail = 0;
  for (let i = 0; i < count; i++) {
    const x = rng.normal();
    moments[0] += x; moments[1] += x * x; moments[2] += x ** 3; moments[3] += x ** 4;
    if (Math.abs(x) > 3.442619855899) tail += 1;
  }
  const [m1, m2, m3, m4] = moments.map((m) => m / count);
  // standard errors at 2e6 draws: sqrt(1/N), sqrt(2/N), sqrt(15/N), sqrt(96/N); 5 of each allowed
  const se = (v) => 5 * Math.sqrt(v / count);
  assert.ok(Math.abs(m1) < se(1), `mean ${m1}`);
  assert.ok(Math.abs(m2 - 1) < se(2), `variance ${m2}`);
  assert.ok(Math.abs(m3) < se(15), `third moment ${m3}`);
  assert.ok(Math.abs(m4 - 3) < se(96), `fourth moment ${m4}`);
  // P(|x| > r) = erfc(r / sqrt 2) = 5.7634e-4: 1153 expected, Poisson sd 34
  const expected = count * (1 - erf(3.442619855899 / Math.SQRT2));
  assert.ok(Math.abs(tail - expected) < 5 * Math.sqrt(expected), `${tail} beyond r, expected ${expected}`);
});

test("samples: normals of mean 0 and variance 1; labels of variance E[y^2]", () => {
  const rng = new Rng(3, 0);
  const task = { kind: "poly", input_dim: 3, context_length: 4, degree: 2, homogeneous: false, noise_std: 0 };
  const batch = samplePrompts(task, 20000, rng);
  let sum = 0, squares = 0;
  for (const v of batch.x) { sum += v; squares += v * v; }
  const count = batch.x.length;
  assert.ok(Math.abs(sum / count) < 5 / Math.sqrt(count), "mean of the inputs");
  assert.ok(Math.abs(squares / count - 1) < 5 * Math.sqrt(2 / count), "variance of the inputs");
  let labels = 0;
  for (const v of batch.y) labels += v * v;
  // E[y^2] = 15 for d = 3, degrees 1 and 2; y^2 is heavy-tailed: 10% allowed at 100,000 labels
  assert.ok(Math.abs(labels / batch.y.length / nullLoss(task) - 1) < 0.1, `E[y^2] ${labels / batch.y.length}`);
  assert.equal(monomials(3, [1, 2]).length, 9);
});

test("a short run lowers the loss of one LSA layer on a linear task", () => {
  const run = {
    task: { kind: "linear", input_dim: 2, context_length: 10, degree: 1, homogeneous: false, noise_std: 0 },
    model: { kind: "lsa", depth: 1, feature_slots: 0, glu_width: null, attention: "full",
      glu_reads: "x", glu_writes: "slots", activation: "none", glu_init: "normal", attention_init_std: 0.02 },
    train: { steps: 200, batch_size: 200, learning_rate: 0.02, schedule: "onecycle", warmup_fraction: 0.1, grad_clip: 1, seed: 0 },
    null_loss: 2,
  };
  const trainer = new Trainer(run);
  const before = trainer.test(4000).mean;
  for (let i = 0; i < run.train.steps; i++) trainer.step();
  const after = trainer.test(4000);
  assert.ok(after.mean < 0.8 * before, `test loss ${after.mean} after, ${before} before`);
});
