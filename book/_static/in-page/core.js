// The book's models and trainer in plain JavaScript, for the static site's in-page panels
// (issue 35). One model, two runtimes: this file mirrors nlicl_lib.core.models (the LSA layer,
// the GLU, the GLU-LSA block and stacks of them), nlicl_lib.core.tasks (prompts) and
// nlicl_lib.training.train (Adam on fresh prompts, the one-cycle schedule, gradient clipping),
// with the gradients written by hand. tests/js/core.test.mjs checks it against the library's
// float64 fixtures (tests/js/fixtures.json, made by nlicl_lib.pages.in_page) to 1e-12.
//
// Shapes are the library's, row-major in Float64Arrays: a prompt's tokens Z are rows,
// (n + 1) x D with D = d + m + 1 (input, m feature slots, label; the query last, its label 0).
// Weights are named as the library's parameters ("blocks.0.lsa.p", "blocks.1.glu.w3", ...).
// Random numbers: xoshiro128** with Marsaglia and Tsang's ziggurat for normals; the same seed gives the same
// run in one browser, not the library's numbers (the statistics are compared, not the draws).

export const STREAM_TRAIN = 0;
export const STREAM_TEST = 1;
export const STREAM_INIT = 2;

// --- random numbers -----------------------------------------------------------------------

function splitmix32(state) {
  return () => {
    state = (state + 0x9e3779b9) | 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    return (z ^ (z >>> 16)) >>> 0;
  };
}

/** A generator of uniform and standard normal numbers from (seed, stream). */
export class Rng {
  constructor(seed, stream = 0) {
    const mix = splitmix32((Math.imul(seed, 0x27d4eb2d) ^ Math.imul(stream + 1, 0x165667b1)) | 0);
    this.s = new Uint32Array([mix(), mix(), mix(), mix()]);
    if (!(this.s[0] | this.s[1] | this.s[2] | this.s[3])) this.s[0] = 1;
  }

  next32() { // xoshiro128**
    const s = this.s;
    const result = Math.imul(rotl(Math.imul(s[1], 5), 7), 9) >>> 0;
    const t = s[1] << 9;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t;
    s[3] = rotl(s[3], 11);
    return result;
  }

  /** Uniform on [0, 1) with 53 random bits. */
  uniform() {
    return ((this.next32() >>> 5) * 67108864 + (this.next32() >>> 6)) / 9007199254740992;
  }

  /** A standard normal number: Marsaglia and Tsang's ziggurat (128 layers; the layer and
   *  the value drawn from separate 32-bit outputs, so that they are independent). */
  normal() {
    for (;;) {
      const iz = this.next32() & 127, hz = this.next32() | 0;
      if (Math.abs(hz) < ZIGGURAT.k[iz]) return hz * ZIGGURAT.w[iz];
      const x = hz * ZIGGURAT.w[iz];
      if (iz === 0) { // the tail beyond r
        let tail, y;
        do {
          tail = -Math.log(this.open()) / ZIGGURAT_R;
          y = -Math.log(this.open());
        } while (y + y < tail * tail);
        return hz > 0 ? ZIGGURAT_R + tail : -ZIGGURAT_R - tail;
      }
      const f = ZIGGURAT.f;
      if (f[iz] + this.uniform() * (f[iz - 1] - f[iz]) < Math.exp(-0.5 * x * x)) return x;
    }
  }

  /** Uniform on (0, 1), never 0 (for a logarithm). */
  open() { return (this.next32() + 0.5) / 4294967296; }

  fillNormal(array, std = 1) {
    for (let i = 0; i < array.length; i++) array[i] = std * this.normal();
    return array;
  }
}

function rotl(x, k) { return (x << k) | (x >>> (32 - k)); }

const ZIGGURAT_R = 3.442619855899;
/** The ziggurat's tables (Marsaglia and Tsang 2000, J. Stat. Softw. 5(8), zigset):
 *  k, the accept thresholds on |hz| < 2^31; w, the scale of hz per layer; f, exp(-x^2/2) at
 *  the layers' edges. */
const ZIGGURAT = (() => {
  const m1 = 2147483648, v = 9.91256303526217e-3;
  const k = new Float64Array(128), w = new Float64Array(128), f = new Float64Array(128);
  let dn = ZIGGURAT_R, tn = dn;
  const q = v / Math.exp(-0.5 * dn * dn);
  k[0] = (dn / q) * m1; k[1] = 0;
  w[0] = q / m1; w[127] = dn / m1;
  f[0] = 1; f[127] = Math.exp(-0.5 * dn * dn);
  for (let i = 126; i >= 1; i--) {
    dn = Math.sqrt(-2 * Math.log(v / dn + Math.exp(-0.5 * dn * dn)));
    k[i + 1] = (dn / tn) * m1;
    tn = dn;
    f[i] = Math.exp(-0.5 * dn * dn);
    w[i] = dn / m1;
  }
  return { k, w, f };
})();

// --- tasks (nlicl_lib.core.tasks) ---------------------------------------------------------

/** The exponent lists of the raw monomials of the given degrees in d variables: each monomial
 *  as the indices of its factors, i1 <= i2 <= ... (the library's target features). */
export function monomials(d, degrees) {
  const out = [];
  for (const k of degrees) {
    const walk = (start, factors) => {
      if (factors.length === k) { out.push(Int32Array.from(factors)); return; }
      for (let i = start; i < d; i++) walk(i, [...factors, i]);
    };
    walk(0, []);
  }
  return out;
}

/** The monomial degrees of a task's target: (k) when homogeneous, else 1..k. */
export function taskDegrees(task) {
  if (task.kind === "linear") return [1];
  if (task.homogeneous) return [task.degree];
  return Array.from({ length: task.degree }, (_, i) => i + 1);
}

/** E[y^2] of a task with identity covariance (the zero predictor's loss): d for a linear task,
 *  the sum over the target's monomials of E[x^(2 alpha)], a product of double factorials. */
export function nullLoss(task) {
  if (task.kind === "linear") return task.input_dim;
  let total = 0;
  for (const factors of monomials(task.input_dim, taskDegrees(task))) {
    const counts = new Map();
    for (const i of factors) counts.set(i, (counts.get(i) || 0) + 1);
    let moment = 1;
    for (const a of counts.values()) for (let j = 2 * a - 1; j > 1; j -= 2) moment *= j;
    total += moment;
  }
  return total;
}

/** A batch of prompts: x (batch, n + 1, d) standard normal inputs, y (batch, n + 1) labels,
 *  the target drawn fresh per prompt (coefficients N(0, 1) on the raw monomials, or w for a
 *  linear task), noise_std times N(0, 1) noise on the context labels, the query label clean. */
export function samplePrompts(task, batch, rng, basis = null) {
  const n = task.context_length, d = task.input_dim, t = n + 1;
  const x = rng.fillNormal(new Float64Array(batch * t * d));
  const y = new Float64Array(batch * t);
  const terms = task.kind === "linear" ? null : (basis || monomials(d, taskDegrees(task)));
  const p = terms ? terms.length : d;
  const beta = new Float64Array(p);
  for (let b = 0; b < batch; b++) {
    rng.fillNormal(beta);
    for (let i = 0; i < t; i++) {
      const row = (b * t + i) * d;
      let value = 0;
      if (terms === null) {
        for (let j = 0; j < d; j++) value += beta[j] * x[row + j];
      } else {
        for (let a = 0; a < p; a++) {
          const f = terms[a];
          let product = beta[a];
          for (let j = 0; j < f.length; j++) product *= x[row + f[j]];
          value += product;
        }
      }
      y[b * t + i] = value;
    }
    if (task.noise_std > 0) {
      for (let i = 0; i < n; i++) y[b * t + i] += task.noise_std * rng.normal();
    }
  }
  return { x, y, batch, tokens: t, d };
}

// --- the model (nlicl_lib.core.models) ----------------------------------------------------

const GELU_SCALE = 1 / Math.SQRT2;
const NORMAL_DENSITY = 1 / Math.sqrt(2 * Math.PI);

/** erf(x) to double precision: its Taylor series exp(-x^2) sum 2^k x^(2k+1) / (2k+1)!! (all
 *  terms positive) below 3, the continued fraction of erfc above (Abramowitz-Stegun 7.1.6,
 *  7.1.14), 1 beyond 6 (erfc(6) < 2.2e-17). */
export function erf(x) {
  const a = Math.abs(x);
  if (a > 6) return Math.sign(x);
  let value;
  if (a < 3) {
    let term = a, sum = a;
    for (let k = 1; k < 200; k++) {
      term *= 2 * a * a / (2 * k + 1);
      sum += term;
      if (term < 1e-17 * sum) break;
    }
    value = 2 / Math.sqrt(Math.PI) * Math.exp(-a * a) * sum;
  } else {
    // erfc(a) = exp(-a^2)/sqrt(pi) * 1/(a + (1/2)/(a + 1/(a + (3/2)/(a + 2/(a + ...)))))
    let fraction = 0;
    for (let k = 60; k >= 1; k--) fraction = (k / 2) / (a + fraction);
    value = 1 - Math.exp(-a * a) / Math.sqrt(Math.PI) / (a + fraction);
  }
  return x < 0 ? -value : value;
}

/** The GLU's first-branch activation and its derivative: none, silu, gelu (exact, erf). */
function activation(kind) {
  if (kind === "none") return null;
  if (kind === "silu") {
    return [(a) => a / (1 + Math.exp(-a)), (a) => {
      const s = 1 / (1 + Math.exp(-a));
      return s * (1 + a * (1 - s));
    }];
  }
  if (kind === "gelu") {
    return [(a) => 0.5 * a * (1 + erf(a * GELU_SCALE)),
      (a) => 0.5 * (1 + erf(a * GELU_SCALE)) + a * NORMAL_DENSITY * Math.exp(-0.5 * a * a)];
  }
  throw new Error(`activation: ${JSON.stringify(kind)} is not allowed; allowed: "none", "silu", "gelu"`);
}

/** The resolved model config's shapes: D, and per block its GLU's read and write sizes. */
export function describeModel(model, task) {
  const d = task.input_dim, m = model.kind === "lsa" ? 0 : model.feature_slots;
  const D = d + m + 1;
  if (model.kind === "glu-lsa" && model.glu_writes !== "slots") {
    throw new Error(`glu_writes: ${JSON.stringify(model.glu_writes)} is not allowed in the page; allowed: "slots"`);
  }
  const reads = { x: d, "x+slots": d + m, all: D }[model.glu_reads || "x"];
  const glu = model.kind === "glu-lsa";
  // the GD form (nlicl_lib.core.models.InContextRegressor.gd_form): sparse attention and
  // bilinear GLUs reading x and writing the slots
  const gdForm = glu && model.attention === "sparse" && (model.glu_reads || "x") === "x"
    && (model.activation || "none") === "none";
  return { d, m, D, h: model.glu_width, reads, depth: model.depth, attention: model.attention,
    glu, gdForm, act: activation(model.activation || "none") };
}

/** Weights at initialisation, as nlicl_lib.core.models.build_model draws them (the same
 *  distributions): attention entries N(0, attention_init_std^2); GLU "large": W1, W2 N(0, 4),
 *  W3 sqrt(h) times orthogonal; "normal": N(0, 1) on the input columns, zero on the slot
 *  columns, W3 orthogonal over sqrt(inputs read); "small": every entry N(0, 0.02^2). */
export function initWeights(model, task, rng) {
  const s = describeModel(model, task), weights = {};
  const F = s.D - 1;
  for (let l = 0; l < s.depth; l++) {
    if (s.glu) {
      const w1 = new Float64Array(s.h * s.reads), w2 = new Float64Array(s.h * s.reads);
      let w3 = new Float64Array(s.m * s.h);
      if (model.glu_init === "small") {
        for (const w of [w1, w2, w3]) rng.fillNormal(w, 0.02);
      } else {
        const std = model.glu_init === "large" ? 2 : 1;
        rng.fillNormal(w1, std);
        rng.fillNormal(w2, std);
        w3 = orthogonal(s.m, s.h, rng);
        const scale = model.glu_init === "large" ? Math.sqrt(s.h) : 1 / Math.sqrt(s.reads);
        for (let i = 0; i < w3.length; i++) w3[i] *= scale;
        if (model.glu_init === "normal") {
          for (let u = 0; u < s.h; u++) {
            for (let c = s.d; c < Math.min(s.reads, s.d + s.m); c++) {
              w1[u * s.reads + c] = 0;
              w2[u * s.reads + c] = 0;
            }
          }
        }
      }
      weights[`blocks.${l}.glu.w1`] = w1;
      weights[`blocks.${l}.glu.w2`] = w2;
      weights[`blocks.${l}.glu.w3`] = w3;
    }
    const std = model.attention_init_std;
    if (s.attention === "full") {
      weights[`blocks.${l}.lsa.p`] = rng.fillNormal(new Float64Array(s.D * s.D), std);
      weights[`blocks.${l}.lsa.q`] = rng.fillNormal(new Float64Array(s.D * s.D), std);
    } else {
      weights[`blocks.${l}.lsa.gamma`] = rng.fillNormal(new Float64Array(F * F), std);
    }
  }
  return weights;
}

/** A rows x cols matrix with orthonormal rows or columns (whichever are fewer), Haar
 *  distributed: Gram-Schmidt on a Gaussian matrix, as torch.nn.init.orthogonal_'s QR. */
function orthogonal(rows, cols, rng) {
  const tall = rows >= cols, r = tall ? rows : cols, c = tall ? cols : rows;
  const a = rng.fillNormal(new Float64Array(r * c)); // column j: a[i * c + j]
  for (let j = 0; j < c; j++) {
    for (let k = 0; k < j; k++) {
      let dot = 0;
      for (let i = 0; i < r; i++) dot += a[i * c + j] * a[i * c + k];
      for (let i = 0; i < r; i++) a[i * c + j] -= dot * a[i * c + k];
    }
    let norm = 0;
    for (let i = 0; i < r; i++) norm += a[i * c + j] ** 2;
    norm = Math.sqrt(norm);
    for (let i = 0; i < r; i++) a[i * c + j] /= norm;
  }
  if (tall) return a;
  const out = new Float64Array(rows * cols); // the transpose: orthonormal rows
  for (let i = 0; i < r; i++) for (let j = 0; j < c; j++) out[j * cols + i] = a[i * c + j];
  return out;
}

/** The model's predictions on a batch and, with `targets` (the query labels) and `scale`,
 *  the loss scale * mean((prediction - target)^2) and its gradient with respect to every
 *  weight. The forward pass is the library's token by token: per block the GLU (every token
 *  plus W3((act(W1 z)) * (W2 z)) on the slots), then the LSA layer (full: Z + PSQZ/n with
 *  S the context's sum of z z^T; sparse: every label moves by -psi^T Gamma g, g = sum_i y_i
 *  psi_i / n); the last layer computes the query's label only; the prediction is minus it. */
export class Model {
  constructor(config, task, weights) {
    this.config = config;
    this.task = task;
    this.s = describeModel(config, task);
    this.weights = weights;
    this.fast = true; // stacks in the GD form run through their prompts' statistics
    const { D, depth } = this.s, t = task.context_length + 1;
    this.stream = Array.from({ length: 2 * depth + 1 }, () => new Float64Array(t * D));
    this.gradStream = new Float64Array(t * D);
    this.gradNext = new Float64Array(t * D);
    this.hidden = Array.from({ length: depth }, () => ({
      a: new Float64Array(t * (this.s.h || 1)), b: new Float64Array(t * (this.s.h || 1)),
      act: new Float64Array(t * (this.s.h || 1)) }));
    // per layer, what its backward pass reads: S and U = PSQ (full), g and v = Gamma g (sparse)
    this.cache = Array.from({ length: depth }, () => ({ S: new Float64Array(D * D),
      U: new Float64Array(D * D), g: new Float64Array(D), v: new Float64Array(D) }));
    this.work = { T1: new Float64Array(D * D), T2: new Float64Array(D * D), dU: new Float64Array(D * D),
      dS: new Float64Array(D * D), r: new Float64Array(D), qz: new Float64Array(D), dr: new Float64Array(D),
      dv: new Float64Array(D), dg: new Float64Array(D), w: new Float64Array(t),
      dhid: new Float64Array(this.s.h || 1) };
  }

  zeroGrads() {
    const grads = {};
    for (const [name, w] of Object.entries(this.weights)) grads[name] = new Float64Array(w.length);
    return grads;
  }

  /** Predictions for every prompt of `prompts`; with `grads` (from zeroGrads), also adds the
   *  gradient of scale * mean((prediction - y_{n+1})^2) and returns that loss. A stack in the
   *  GD form runs through its statistics unless `fast` is false. */
  run(prompts, grads = null, scale = 1) {
    if (this.s.gdForm && this.fast) return this.runStatistics(prompts, grads, scale);
    return this.runTokens(prompts, grads, scale);
  }

  /** :meth:`run` through the tokens, every layer of every block (the plain path). */
  runTokens(prompts, grads = null, scale = 1) {
    const { batch, tokens } = prompts;
    const predictions = new Float64Array(batch);
    let loss = 0;
    for (let b = 0; b < batch; b++) {
      const z = this.stream[0];
      this.embed(prompts, b, z);
      const prediction = this.forward();
      predictions[b] = prediction;
      if (grads !== null) {
        const diff = prediction - prompts.y[b * tokens + tokens - 1];
        loss += diff * diff;
        this.backward(grads, 2 * diff * scale / batch);
      }
    }
    return { predictions, loss: grads === null ? NaN : scale * loss / batch };
  }

  embed(prompts, b, z) {
    const { tokens, d } = prompts, D = this.s.D;
    z.fill(0);
    for (let i = 0; i < tokens; i++) {
      for (let j = 0; j < d; j++) z[i * D + j] = prompts.x[(b * tokens + i) * d + j];
      if (i < tokens - 1) z[i * D + D - 1] = prompts.y[b * tokens + i];
    }
  }

  forward() {
    const { depth, glu } = this.s;
    let k = 0;
    for (let l = 0; l < depth; l++) {
      if (glu) {
        this.gluForward(l, this.stream[k], this.stream[k + 1]);
      } else {
        this.stream[k + 1].set(this.stream[k]);
      }
      k += 1;
      if (l === depth - 1) return -this.queryLabel(l, this.stream[k]);
      this.lsaForward(l, this.stream[k], this.stream[k + 1]);
      k += 1;
    }
    throw new Error("depth: a model has at least one block");
  }

  backward(grads, gradPrediction) {
    const { depth, glu } = this.s;
    let g = this.gradStream, next = this.gradNext;
    g.fill(0);
    let k = 2 * depth - 1; // stream[k]: the input of the last LSA layer
    this.queryLabelBackward(depth - 1, this.stream[k], -gradPrediction, g, grads);
    for (let l = depth - 1; l >= 0; l--) {
      if (l < depth - 1) {
        next.fill(0);
        this.lsaBackward(l, this.stream[k], g, next, grads);
        [g, next] = [next, g];
      }
      k -= 1; // stream[k]: the input of block l's GLU
      if (glu) {
        next.set(g);
        this.gluBackward(l, this.stream[k], g, next, grads, l > 0);
        [g, next] = [next, g];
      }
      k -= 1;
    }
  }

  // GLU: out = z + [0; W3 (act(W1 r) * (W2 r)); 0], r the first `reads` entries of z
  gluForward(l, z, out) {
    const { D, d, m, h, reads, act } = this.s, t = this.task.context_length + 1;
    const w1 = this.weights[`blocks.${l}.glu.w1`], w2 = this.weights[`blocks.${l}.glu.w2`];
    const w3 = this.weights[`blocks.${l}.glu.w3`], hid = this.hidden[l];
    const A = hid.a, B = hid.b, AB = hid.act, f = act === null ? null : act[0];
    out.set(z);
    for (let i = 0; i < t; i++) {
      const row = i * D, at = i * h;
      for (let u = 0; u < h; u++) {
        let a = 0, b = 0;
        const wrow = u * reads;
        for (let c = 0; c < reads; c++) {
          const zc = z[row + c];
          a += w1[wrow + c] * zc;
          b += w2[wrow + c] * zc;
        }
        A[at + u] = a;
        B[at + u] = b;
        AB[at + u] = (f === null ? a : f(a)) * b; // the hidden unit
      }
      for (let s = 0; s < m; s++) {
        let value = 0;
        for (let u = 0; u < h; u++) value += w3[s * h + u] * AB[at + u];
        out[row + d + s] += value;
      }
    }
  }

  /** ``needInput``: whether the gradient with respect to the GLU's input is wanted (not for
   *  the first block, whose input is the prompt). */
  gluBackward(l, z, gOut, gIn, grads, needInput = true) {
    const { D, d, m, h, reads, act } = this.s, t = this.task.context_length + 1;
    const w1 = this.weights[`blocks.${l}.glu.w1`], w2 = this.weights[`blocks.${l}.glu.w2`];
    const w3 = this.weights[`blocks.${l}.glu.w3`], hid = this.hidden[l];
    const A = hid.a, B = hid.b, AB = hid.act, f = act === null ? null : act[0];
    const df = act === null ? null : act[1];
    const g1 = grads[`blocks.${l}.glu.w1`], g2 = grads[`blocks.${l}.glu.w2`];
    const g3 = grads[`blocks.${l}.glu.w3`], dhid = this.work.dhid;
    for (let i = 0; i < t; i++) {
      const row = i * D, at = i * h;
      dhid.fill(0);
      for (let s = 0; s < m; s++) {
        const gs = gOut[row + d + s];
        if (gs === 0) continue;
        const srow = s * h;
        for (let u = 0; u < h; u++) {
          dhid[u] += gs * w3[srow + u];
          g3[srow + u] += gs * AB[at + u];
        }
      }
      for (let u = 0; u < h; u++) {
        const a = A[at + u], b = B[at + u], gh = dhid[u];
        if (gh === 0) continue;
        const da = df === null ? gh * b : gh * b * df(a);
        const db = f === null ? gh * a : gh * f(a);
        const wrow = u * reads;
        for (let c = 0; c < reads; c++) {
          const zc = z[row + c];
          g1[wrow + c] += da * zc;
          g2[wrow + c] += db * zc;
        }
        if (needInput) {
          for (let c = 0; c < reads; c++) gIn[row + c] += da * w1[wrow + c] + db * w2[wrow + c];
        }
      }
    }
  }

  // LSA on every token (a block that is not the last): out = z + z (PSQ)^T / n, or, sparse,
  // labels - psi^T Gamma g
  lsaForward(l, z, out) {
    const { D } = this.s, n = this.task.context_length, t = n + 1, F = D - 1, w = this.cache[l];
    out.set(z);
    if (this.s.attention === "sparse") {
      const gamma = this.weights[`blocks.${l}.lsa.gamma`];
      this.sparseG(z, w.g);
      matVec(gamma, w.g, w.v, F);
      for (let i = 0; i < t; i++) {
        let step = 0;
        for (let f = 0; f < F; f++) step += z[i * D + f] * w.v[f];
        out[i * D + F] -= step;
      }
      return;
    }
    const p = this.weights[`blocks.${l}.lsa.p`], q = this.weights[`blocks.${l}.lsa.q`];
    contextMoment(z, n, D, w.S);
    matMul(p, w.S, this.work.T1, D);
    matMul(this.work.T1, q, w.U, D); // U = P S Q
    for (let i = 0; i < t; i++) {
      for (let e = 0; e < D; e++) {
        let value = 0;
        for (let f = 0; f < D; f++) value += z[i * D + f] * w.U[e * D + f];
        out[i * D + e] += value / n;
      }
    }
  }

  lsaBackward(l, z, gOut, gIn, grads) {
    const { D } = this.s, n = this.task.context_length, t = n + 1, F = D - 1, w = this.work;
    const c = this.cache[l];
    for (let i = 0; i < gOut.length; i++) gIn[i] += gOut[i];
    if (this.s.attention === "sparse") {
      const gamma = this.weights[`blocks.${l}.lsa.gamma`], gg = grads[`blocks.${l}.lsa.gamma`];
      // labels' = labels - psi v, v = Gamma g
      w.dv.fill(0);
      for (let i = 0; i < t; i++) {
        const gl = gOut[i * D + F];
        if (gl === 0) continue;
        for (let f = 0; f < F; f++) {
          w.dv[f] -= gl * z[i * D + f];
          gIn[i * D + f] -= gl * c.v[f];
        }
      }
      this.sparseBackward(z, gamma, gg, gIn, c.g);
      return;
    }
    const p = this.weights[`blocks.${l}.lsa.p`], q = this.weights[`blocks.${l}.lsa.q`];
    const gp = grads[`blocks.${l}.lsa.p`], gq = grads[`blocks.${l}.lsa.q`];
    // out = z + z U^T / n: dz += gOut U / n, dU = gOut^T z / n
    w.dU.fill(0);
    for (let i = 0; i < t; i++) {
      for (let e = 0; e < D; e++) {
        const ge = gOut[i * D + e] / n;
        if (ge === 0) continue;
        for (let f = 0; f < D; f++) {
          gIn[i * D + f] += ge * c.U[e * D + f];
          w.dU[e * D + f] += ge * z[i * D + f];
        }
      }
    }
    this.attentionBackward(z, p, q, gp, gq, gIn, c.S);
  }

  /** dU (work.dU) back to P, Q and the context rows: U = P S Q, S = sum_i z_i z_i^T. */
  attentionBackward(z, p, q, gp, gq, gIn, S) {
    const { D } = this.s, n = this.task.context_length, w = this.work;
    // dP = dU Q^T S, dQ = S P^T dU, dS = P^T dU Q^T
    matMulBT(w.dU, q, w.T1, D); // dU Q^T
    matMul(w.T1, S, w.T2, D);
    for (let i = 0; i < D * D; i++) gp[i] += w.T2[i];
    matMulAT(p, w.dU, w.T2, D); // P^T dU
    matMul(S, w.T2, w.T1, D);
    for (let i = 0; i < D * D; i++) gq[i] += w.T1[i];
    matMulBT(w.T2, q, w.dS, D); // P^T dU Q^T
    // dz_i += (dS + dS^T) z_i for the context rows
    for (let i = 0; i < n; i++) {
      for (let e = 0; e < D; e++) {
        let value = 0;
        for (let f = 0; f < D; f++) value += (w.dS[e * D + f] + w.dS[f * D + e]) * z[i * D + f];
        gIn[i * D + e] += value;
      }
    }
  }

  /** g = sum_{i <= n} y_i psi_i / n into `g` (sparse attention). */
  sparseG(z, g) {
    const { D } = this.s, n = this.task.context_length, F = D - 1;
    g.fill(0);
    for (let i = 0; i < n; i++) {
      const label = z[i * D + F];
      for (let f = 0; f < F; f++) g[f] += label * z[i * D + f];
    }
    for (let f = 0; f < F; f++) g[f] /= n;
  }

  /** From dv (work.dv), v = Gamma g: dGamma += dv g^T, and g = sum_i y_i psi_i / n back to
   *  the context's labels and features. */
  sparseBackward(z, gamma, gg, gIn, g) {
    const { D } = this.s, n = this.task.context_length, F = D - 1, w = this.work;
    for (let e = 0; e < F; e++) for (let f = 0; f < F; f++) gg[e * F + f] += w.dv[e] * g[f];
    for (let f = 0; f < F; f++) {
      let value = 0;
      for (let e = 0; e < F; e++) value += gamma[e * F + f] * w.dv[e];
      w.dg[f] = value / n;
    }
    for (let i = 0; i < n; i++) {
      const label = z[i * D + F];
      let value = 0;
      for (let f = 0; f < F; f++) {
        value += z[i * D + f] * w.dg[f];
        gIn[i * D + f] += label * w.dg[f];
      }
      gIn[i * D + F] += value;
    }
  }

  /** The last layer's query label only, in O(n D): z_q[D] + (p^T S Q z_q) / n with p the
   *  last row of P (full), or z_q[D] - psi_q^T Gamma g (sparse). */
  queryLabel(l, z) {
    const { D } = this.s, n = this.task.context_length, F = D - 1, w = this.work;
    const query = n * D;
    if (this.s.attention === "sparse") {
      const gamma = this.weights[`blocks.${l}.lsa.gamma`], c = this.cache[l];
      this.sparseG(z, c.g);
      matVec(gamma, c.g, c.v, F);
      let step = 0;
      for (let f = 0; f < F; f++) step += z[query + f] * c.v[f];
      return z[query + F] - step;
    }
    const p = this.weights[`blocks.${l}.lsa.p`], q = this.weights[`blocks.${l}.lsa.q`];
    const last = F * D; // the last row of P
    w.r.fill(0);
    for (let i = 0; i < n; i++) {
      let weight = 0;
      for (let e = 0; e < D; e++) weight += p[last + e] * z[i * D + e];
      w.w[i] = weight;
      for (let e = 0; e < D; e++) w.r[e] += weight * z[i * D + e];
    }
    for (let e = 0; e < D; e++) {
      let value = 0;
      for (let f = 0; f < D; f++) value += q[e * D + f] * z[query + f];
      w.qz[e] = value;
    }
    let value = 0;
    for (let e = 0; e < D; e++) value += w.r[e] * w.qz[e];
    return z[query + F] + value / n;
  }

  queryLabelBackward(l, z, gradOut, gIn, grads) {
    const { D } = this.s, n = this.task.context_length, F = D - 1, w = this.work;
    const query = n * D;
    gIn[query + F] += gradOut;
    if (this.s.attention === "sparse") {
      const gamma = this.weights[`blocks.${l}.lsa.gamma`], gg = grads[`blocks.${l}.lsa.gamma`];
      const c = this.cache[l];
      for (let f = 0; f < F; f++) {
        w.dv[f] = -gradOut * z[query + f];
        gIn[query + f] -= gradOut * c.v[f];
      }
      this.sparseBackward(z, gamma, gg, gIn, c.g);
      return;
    }
    const p = this.weights[`blocks.${l}.lsa.p`], q = this.weights[`blocks.${l}.lsa.q`];
    const gp = grads[`blocks.${l}.lsa.p`], gq = grads[`blocks.${l}.lsa.q`];
    const c = gradOut / n, last = F * D;
    // value = r^T Q z_q: dr = c Q z_q, dQ = c r z_q^T, dz_q += c Q^T r
    for (let e = 0; e < D; e++) {
      w.dr[e] = c * w.qz[e];
      for (let f = 0; f < D; f++) gq[e * D + f] += c * w.r[e] * z[query + f];
    }
    for (let f = 0; f < D; f++) {
      let value = 0;
      for (let e = 0; e < D; e++) value += q[e * D + f] * w.r[e];
      gIn[query + f] += c * value;
    }
    // r = sum_i (p . z_i) z_i: dz_i += (p . z_i) dr + (dr . z_i) p, dp += (dr . z_i) z_i
    for (let i = 0; i < n; i++) {
      let dot = 0;
      for (let e = 0; e < D; e++) dot += w.dr[e] * z[i * D + e];
      for (let e = 0; e < D; e++) {
        gIn[i * D + e] += w.w[i] * w.dr[e] + dot * p[last + e];
        gp[last + e] += dot * z[i * D + e];
      }
    }
  }
  // --- the GD form through the prompts' statistics (the fast path) ------------------------

  /** :meth:`run` of a stack in the GD form from each prompt's statistics, as the library
   *  trains it (InContextRegressor.forward_statistics): with the basis b = (x; phi_2(x)),
   *  g-bar = sum_i y_i b(x_i) / n, S_b-hat = sum_i b(x_i) b(x_i)^T / n (depth > 1), block l's
   *  step K_l = C_l^T Gamma_l C_l with C_l = blkdiag(I_d, sum_{l' <= l} W3_l' U_l'), U_l the
   *  quadratic forms of its units over phi_2,
   *      omega_0 = 0, omega_l = omega_{l-1} + K_l (g-bar - S_b-hat omega_{l-1}),
   *      y-hat = b(x_{n+1})^T omega_L.
   *  The same function as runTokens (tests/js/core.test.mjs checks both in float64); per
   *  prompt O(n |b|^2) for the statistics and O(L |b|^2) for the steps, whatever the width. */
  runStatistics(prompts, grads = null, scale = 1) {
    const { batch, tokens } = prompts, n = tokens - 1;
    const { d, depth } = this.s;
    const pairs = this.pairs || (this.pairs = monomials(d, [2]));
    const size = d + pairs.length;
    const steps = this.preconditioners(pairs);
    const basis = new Float64Array(tokens * size), gbar = new Float64Array(size);
    const moment = new Float64Array(depth > 1 ? size * size : 0);
    const omegas = Array.from({ length: depth + 1 }, () => new Float64Array(size));
    const errors = Array.from({ length: depth }, () => new Float64Array(size));
    const dOmega = new Float64Array(size), dError = new Float64Array(size);
    const dSteps = grads === null ? null : steps.map(() => new Float64Array(size * size));
    const predictions = new Float64Array(batch);
    let loss = 0;
    for (let b = 0; b < batch; b++) {
      for (let i = 0; i < tokens; i++) { // b(x_i) = (x_i; x_j x_k for j <= k)
        const row = (b * tokens + i) * d, out = i * size;
        for (let j = 0; j < d; j++) basis[out + j] = prompts.x[row + j];
        for (let p = 0; p < pairs.length; p++) {
          basis[out + d + p] = prompts.x[row + pairs[p][0]] * prompts.x[row + pairs[p][1]];
        }
      }
      gbar.fill(0);
      moment.fill(0);
      for (let i = 0; i < n; i++) {
        const y = prompts.y[b * tokens + i], at = i * size;
        for (let e = 0; e < size; e++) gbar[e] += y * basis[at + e];
        if (depth > 1) {
          for (let e = 0; e < size; e++) {
            const be = basis[at + e];
            for (let f = e; f < size; f++) moment[e * size + f] += be * basis[at + f];
          }
        }
      }
      for (let e = 0; e < size; e++) {
        gbar[e] /= n;
        for (let f = e; f < size && depth > 1; f++) {
          moment[e * size + f] /= n;
          moment[f * size + e] = moment[e * size + f];
        }
      }
      for (let l = 0; l < depth; l++) {
        const before = omegas[l], error = errors[l], K = steps[l], after = omegas[l + 1];
        for (let e = 0; e < size; e++) {
          let value = gbar[e];
          if (l > 0) for (let f = 0; f < size; f++) value -= moment[e * size + f] * before[f];
          error[e] = value;
        }
        for (let e = 0; e < size; e++) {
          let value = before[e];
          for (let f = 0; f < size; f++) value += K[e * size + f] * error[f];
          after[e] = value;
        }
      }
      const query = n * size;
      let prediction = 0;
      for (let e = 0; e < size; e++) prediction += basis[query + e] * omegas[depth][e];
      predictions[b] = prediction;
      if (grads === null) continue;
      const diff = prediction - prompts.y[b * tokens + n];
      loss += diff * diff;
      const gradPrediction = 2 * diff * scale / batch;
      for (let e = 0; e < size; e++) dOmega[e] = gradPrediction * basis[query + e];
      for (let l = depth - 1; l >= 0; l--) {
        const K = steps[l], dK = dSteps[l], error = errors[l];
        // omega_l = omega_{l-1} + K e: dK += d omega e^T, de = K^T d omega,
        // d omega_{l-1} = d omega - S_b-hat de
        for (let e = 0; e < size; e++) {
          const g = dOmega[e];
          for (let f = 0; f < size; f++) dK[e * size + f] += g * error[f];
        }
        if (l === 0) break;
        for (let f = 0; f < size; f++) {
          let value = 0;
          for (let e = 0; e < size; e++) value += K[e * size + f] * dOmega[e];
          dError[f] = value;
        }
        for (let e = 0; e < size; e++) {
          let value = 0;
          for (let f = 0; f < size; f++) value += moment[e * size + f] * dError[f];
          dOmega[e] -= value;
        }
      }
    }
    if (grads !== null) this.preconditionersBackward(pairs, dSteps, grads);
    return { predictions, loss: grads === null ? NaN : scale * loss / batch };
  }

  /** Every block's C_l (F x |b|, kept for the backward pass) and K_l = C_l^T Gamma_l C_l. */
  preconditioners(pairs) {
    const { d, m, h, depth, D } = this.s, F = D - 1, size = d + pairs.length;
    const slots = new Float64Array(m * pairs.length); // sum_{l' <= l} W3_l' U_l'
    this.statistics = [];
    const steps = [];
    for (let l = 0; l < depth; l++) {
      const w1 = this.weights[`blocks.${l}.glu.w1`], w2 = this.weights[`blocks.${l}.glu.w2`];
      const w3 = this.weights[`blocks.${l}.glu.w3`], gamma = this.weights[`blocks.${l}.lsa.gamma`];
      const U = quadraticForms(w1, w2, h, d, pairs);
      for (let s = 0; s < m; s++) {
        for (let p = 0; p < pairs.length; p++) {
          let value = 0;
          for (let u = 0; u < h; u++) value += w3[s * h + u] * U[u * pairs.length + p];
          slots[s * pairs.length + p] += value;
        }
      }
      const C = new Float64Array(F * size);
      for (let j = 0; j < d; j++) C[j * size + j] = 1;
      for (let s = 0; s < m; s++) {
        for (let p = 0; p < pairs.length; p++) C[(d + s) * size + d + p] = slots[s * pairs.length + p];
      }
      const GC = new Float64Array(F * size); // Gamma C
      for (let e = 0; e < F; e++) {
        for (let c = 0; c < size; c++) {
          let value = 0;
          for (let f = 0; f < F; f++) value += gamma[e * F + f] * C[f * size + c];
          GC[e * size + c] = value;
        }
      }
      const K = new Float64Array(size * size);
      for (let a = 0; a < size; a++) {
        for (let c = 0; c < size; c++) {
          let value = 0;
          for (let e = 0; e < F; e++) value += C[e * size + a] * GC[e * size + c];
          K[a * size + c] = value;
        }
      }
      this.statistics.push({ U, C });
      steps.push(K);
    }
    return steps;
  }

  /** dK_l back to Gamma_l, and through C_l's slot block sum_{l' <= l} W3_l' U_l' to every
   *  earlier block's W3, W1 and W2 (U's entries are w1_j w2_k + w1_k w2_j, or w1_j w2_j). */
  preconditionersBackward(pairs, dSteps, grads) {
    const { d, m, h, depth, D } = this.s, F = D - 1, size = d + pairs.length, P = pairs.length;
    const dSlots = new Float64Array(m * P); // the gradient of sum_{l' <= l} W3 U, from l on
    for (let l = depth - 1; l >= 0; l--) {
      const gamma = this.weights[`blocks.${l}.lsa.gamma`], gg = grads[`blocks.${l}.lsa.gamma`];
      const { C, U } = this.statistics[l], dK = dSteps[l];
      // K = C^T Gamma C: dGamma = C dK C^T, dC = Gamma C dK^T + Gamma^T C dK
      const CdK = new Float64Array(F * size), CdKT = new Float64Array(F * size);
      for (let e = 0; e < F; e++) {
        for (let c = 0; c < size; c++) {
          let value = 0, valueT = 0;
          for (let a = 0; a < size; a++) {
            value += C[e * size + a] * dK[a * size + c];
            valueT += C[e * size + a] * dK[c * size + a];
          }
          CdK[e * size + c] = value;
          CdKT[e * size + c] = valueT;
        }
      }
      for (let e = 0; e < F; e++) {
        for (let f = 0; f < F; f++) {
          let value = 0;
          for (let c = 0; c < size; c++) value += CdK[e * size + c] * C[f * size + c];
          gg[e * F + f] += value;
        }
      }
      for (let s = 0; s < m; s++) { // only C's slot block depends on the GLUs
        const e = d + s;
        for (let p = 0; p < P; p++) {
          const c = d + p;
          let value = 0;
          for (let f = 0; f < F; f++) {
            value += gamma[e * F + f] * CdKT[f * size + c] + gamma[f * F + e] * CdK[f * size + c];
          }
          dSlots[s * P + p] += value;
        }
      }
      // the slot block is sum_{l' <= l} W3_l' U_l': block l's W3 and U get everything from l on
      const w1 = this.weights[`blocks.${l}.glu.w1`], w2 = this.weights[`blocks.${l}.glu.w2`];
      const w3 = this.weights[`blocks.${l}.glu.w3`];
      const g1 = grads[`blocks.${l}.glu.w1`], g2 = grads[`blocks.${l}.glu.w2`];
      const g3 = grads[`blocks.${l}.glu.w3`];
      for (let s = 0; s < m; s++) {
        for (let u = 0; u < h; u++) {
          let value = 0;
          for (let p = 0; p < P; p++) value += dSlots[s * P + p] * U[u * P + p];
          g3[s * h + u] += value;
        }
      }
      for (let u = 0; u < h; u++) {
        for (let p = 0; p < P; p++) {
          let dU = 0;
          for (let s = 0; s < m; s++) dU += w3[s * h + u] * dSlots[s * P + p];
          if (dU === 0) continue;
          const [j, k] = pairs[p];
          g1[u * d + j] += dU * w2[u * d + k];
          g2[u * d + k] += dU * w1[u * d + j];
          if (j !== k) {
            g1[u * d + k] += dU * w2[u * d + j];
            g2[u * d + j] += dU * w1[u * d + k];
          }
        }
      }
    }
  }
}

/** The units' quadratic forms (a_u^T x)(b_u^T x) over phi_2 (h x p_2; nlicl_lib.core.monomials
 *  .quadratic_form_matrix): a_uj b_uk + a_uk b_uj for j < k, a_uj b_uj for j = k. */
function quadraticForms(w1, w2, h, d, pairs) {
  const U = new Float64Array(h * pairs.length);
  for (let u = 0; u < h; u++) {
    for (let p = 0; p < pairs.length; p++) {
      const [j, k] = pairs[p];
      let value = w1[u * d + j] * w2[u * d + k];
      if (j !== k) value += w1[u * d + k] * w2[u * d + j];
      U[u * pairs.length + p] = value;
    }
  }
  return U;
}

function contextMoment(z, n, D, S) {
  S.fill(0);
  for (let i = 0; i < n; i++) {
    for (let e = 0; e < D; e++) {
      const ze = z[i * D + e];
      if (ze === 0) continue;
      for (let f = 0; f < D; f++) S[e * D + f] += ze * z[i * D + f];
    }
  }
}

function matVec(a, x, out, size) {
  for (let e = 0; e < size; e++) {
    let value = 0;
    for (let f = 0; f < size; f++) value += a[e * size + f] * x[f];
    out[e] = value;
  }
}

function matMul(a, b, out, size) { // out = a b
  for (let i = 0; i < size; i++) {
    for (let j = 0; j < size; j++) {
      let value = 0;
      for (let k = 0; k < size; k++) value += a[i * size + k] * b[k * size + j];
      out[i * size + j] = value;
    }
  }
}

function matMulBT(a, b, out, size) { // out = a b^T
  for (let i = 0; i < size; i++) {
    for (let j = 0; j < size; j++) {
      let value = 0;
      for (let k = 0; k < size; k++) value += a[i * size + k] * b[j * size + k];
      out[i * size + j] = value;
    }
  }
}

function matMulAT(a, b, out, size) { // out = a^T b
  for (let i = 0; i < size; i++) {
    for (let j = 0; j < size; j++) {
      let value = 0;
      for (let k = 0; k < size; k++) value += a[k * size + i] * b[k * size + j];
      out[i * size + j] = value;
    }
  }
}

// --- training (nlicl_lib.training.train) -----------------------------------------------------

/** TrainConfig.learning_rate_at: "constant"; "onecycle", a linear warm-up over
 *  w = floor(f T) steps from 0.04 eta to eta, then a cosine down to 0.01 eta; "cosine": w = 0. */
export function learningRateAt(train, step) {
  const eta = train.learning_rate, T = train.steps;
  if (train.schedule === "constant") return eta;
  const warmup = train.schedule === "onecycle" ? Math.floor(train.warmup_fraction * T) : 0;
  if (step < warmup) return eta * (0.04 + 0.96 * step / warmup);
  const progress = (step - warmup) / Math.max(1, T - warmup);
  return eta * (0.01 + 0.99 * 0.5 * (1 + Math.cos(Math.PI * progress)));
}

/** torch.nn.utils.clip_grad_norm_: every gradient times min(1, c / (norm + 1e-6)), the norm
 *  of all of them as one vector. Returns the norm. */
export function clipGradients(grads, maxNorm) {
  let squares = 0;
  for (const g of Object.values(grads)) {
    let own = 0;
    for (let i = 0; i < g.length; i++) own += g[i] * g[i];
    squares += own;
  }
  const norm = Math.sqrt(squares);
  const scale = Math.min(1, maxNorm / (norm + 1e-6));
  for (const g of Object.values(grads)) for (let i = 0; i < g.length; i++) g[i] *= scale;
  return norm;
}

/** torch.optim.Adam with its defaults (betas 0.9, 0.999, eps 1e-8), in torch's order of
 *  operations. */
export class Adam {
  constructor(weights, beta1 = 0.9, beta2 = 0.999, eps = 1e-8) {
    this.weights = weights;
    this.beta1 = beta1; this.beta2 = beta2; this.eps = eps;
    this.t = 0;
    this.m = {}; this.v = {};
    for (const [name, w] of Object.entries(weights)) {
      this.m[name] = new Float64Array(w.length);
      this.v[name] = new Float64Array(w.length);
    }
  }

  step(grads, lr) {
    this.t += 1;
    const { beta1, beta2, eps } = this;
    const stepSize = lr / (1 - beta1 ** this.t);
    const correction = Math.sqrt(1 - beta2 ** this.t);
    for (const [name, w] of Object.entries(this.weights)) {
      const g = grads[name], m = this.m[name], v = this.v[name];
      for (let i = 0; i < w.length; i++) {
        m[i] += (g[i] - m[i]) * (1 - beta1);
        v[i] = v[i] * beta2 + (1 - beta2) * g[i] * g[i];
        w[i] += -stepSize * (m[i] / (Math.sqrt(v[i]) / correction + eps));
      }
    }
  }
}

/** One run, step by step: `trainer.step()` draws a batch of fresh prompts, takes one Adam
 *  step on the normalised loss mean((y_hat - y)^2) / E[y^2] (clipped, at the schedule's rate)
 *  and returns that loss; `trainer.test(count)` estimates the test loss over E[y^2] on
 *  `count` fresh prompts of another stream: {mean, stdError, prompts}. */
export class Trainer {
  constructor(run) {
    const { task, model, train } = run;
    this.run = run;
    this.nullLoss = run.null_loss;
    this.weights = initWeights(model, task, new Rng(train.seed, STREAM_INIT));
    this.model = new Model(model, task, this.weights);
    this.optimizer = new Adam(this.weights);
    this.rng = new Rng(train.seed, STREAM_TRAIN);
    this.basis = task.kind === "linear" ? null : monomials(task.input_dim, taskDegrees(task));
    this.stepIndex = 0;
  }

  step() {
    const { task, train } = this.run;
    const prompts = samplePrompts(task, train.batch_size, this.rng, this.basis);
    const grads = this.model.zeroGrads();
    const { loss } = this.model.run(prompts, grads, 1 / this.nullLoss);
    if (!Number.isFinite(loss)) {
      throw new Error(`training diverged at step ${this.stepIndex}: the loss is ${loss}; ` +
        "try a smaller learning rate");
    }
    if (train.grad_clip) clipGradients(grads, train.grad_clip);
    this.optimizer.step(grads, learningRateAt(train, this.stepIndex));
    this.stepIndex += 1;
    return loss;
  }

  test(count, chunk = 2000, onChunk = null) {
    const rng = new Rng(this.run.train.seed, STREAM_TEST);
    let sum = 0, squares = 0, done = 0;
    const t = this.run.task.context_length + 1;
    while (done < count) {
      const size = Math.min(chunk, count - done);
      const prompts = samplePrompts(this.run.task, size, rng, this.basis);
      const { predictions } = this.model.run(prompts);
      for (let b = 0; b < size; b++) {
        const e = (predictions[b] - prompts.y[b * t + t - 1]) ** 2;
        sum += e;
        squares += e * e;
      }
      done += size;
      if (onChunk) onChunk(done);
    }
    const mean = sum / done;
    const variance = Math.max(0, squares / done - mean * mean);
    return { mean: mean / this.nullLoss, stdError: Math.sqrt(variance / done) / this.nullLoss,
      prompts: done };
  }
}
