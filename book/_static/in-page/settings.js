// A chapter panel's settings -> the run the worker trains, from the library's export
// (chK.json, made by nlicl_lib.pages.in_page.panel_export): nothing about the chapters'
// configs is written here, only how to read the export.

/** The index of `value` among a control's values (options, or a slider's grid). */
function valueIndex(values, value) {
  const exact = values.indexOf(value);
  if (exact >= 0) return exact;
  if (typeof value === "number") {
    const near = values.findIndex((v) => typeof v === "number" && Math.abs(v - value) <= 1e-9 * Math.max(1, Math.abs(v)));
    if (near >= 0) return near;
  }
  return -1;
}

/** `settings` ({control name: value}) -> {run, levels, entry} or {error}: the panel's configs
 *  at the deciding controls (the export's entry), the training controls set on the run
 *  (steps; the rate times the entry's learning_rate_scale, the library's division by depth;
 *  the seed where the panel has one), and the theory levels [{value, name, kind}]. */
export function runFor(exported, settings) {
  let index = 0;
  for (const [k, name] of exported.key_params.entries()) {
    const values = exported.key_values[k];
    const position = valueIndex(values, settings[name]);
    if (position < 0) {
      return { error: `${name}: ${JSON.stringify(settings[name])} is not one of the panel's values (${values.join(", ")})` };
    }
    index = index * values.length + position;
  }
  const entry = exported.entries[index];
  if (entry.e !== undefined) return { error: entry.e };
  const fields = { ...exported.base };
  exported.columns.forEach((column, i) => { fields[column] = entry.v[i]; });
  const part = (prefix) => Object.fromEntries(Object.entries(fields)
    .filter(([key]) => key.startsWith(prefix)).map(([key, value]) => [key.slice(prefix.length), value]));
  const train = part("train.");
  const params = Object.fromEntries(exported.params.map((p) => [p.name, p]));
  for (const name of ["steps", "learning_rate", "seed"]) {
    if (!(name in params) || settings[name] === undefined) continue;
    const p = params[name], value = settings[name];
    if (!(typeof value === "number" && value >= p.minimum && value <= p.maximum)) {
      return { error: `${p.label}: ${value} is not allowed; allowed: a number from ${p.minimum} to ${p.maximum}` };
    }
  }
  if (settings.steps !== undefined) train.steps = settings.steps;
  if (settings.learning_rate !== undefined) {
    train.learning_rate = settings.learning_rate * fields.learning_rate_scale;
  }
  if (settings.seed !== undefined && "seed" in params) train.seed = settings.seed;
  const run = { task: part("task."), model: part("model."), train, null_loss: fields.null_loss,
    test_prompts: exported.test_prompts };
  const levels = entry.l.map(([value, name]) => ({ value, name: exported.level_names[name],
    kind: exported.level_kinds[name] }));
  return { run, levels };
}

/** The controls at their defaults. */
export function defaults(exported) {
  return Object.fromEntries(exported.params.map((p) => [p.name, p.default]));
}
