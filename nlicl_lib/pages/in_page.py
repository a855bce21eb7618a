r"""What the static site's in-page trainer reads from the library (issue 35): every chapter's
panel as data, and fixtures that keep the page's model equal to the library's.

The site's panels train in the reader's browser (``book/_static/in-page/``: plain JavaScript
with its gradients written by hand, in a module worker). That code is checked against this
library, not trusted:

- :func:`panel_export` turns a chapter's :class:`~nlicl_lib.pages.panels.TrainingPanel` into
  data: its controls, and for every combination of the controls that decide the task and the
  model (not the steps, the rate or the seed) the configs the panel's own ``configure`` gives
  (or the ConfigError it raises, as the live panel words it) with the theory levels the live panel draws
  (:func:`~nlicl_lib.pages.panels.theory_levels`). The training settings are those of
  :mod:`nlicl_lib.training.settings`, through the panel: nothing is copied into the page.
- :func:`fixtures` gives, for every model variant a panel trains, float64 weights, a batch of
  prompts, the loss, and three Adam steps of the library's trainer with the gradients each
  took;
  ``tests/js/`` runs the page's code on them (Node's test runner) to $10^{-12}$, and
  ``tests/test_in_page.py`` regenerates them and fails when they change.

``python -m nlicl_lib.pages.in_page export DIR`` writes ``DIR/ch1.json`` ... ``DIR/ch5.json``
(the book build does, into the site's ``_static/in-page/``); ``fixtures FILE`` writes the
fixtures.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.tasks import TaskConfig, sample_prompts
from nlicl_lib.pages.panels import LEVEL_TRACES, PANELS, TrainingPanel, theory_levels
from nlicl_lib.pages.plots import COLORS, trained_trace
from nlicl_lib.theory.closed_forms import null_loss
from nlicl_lib.training.evaluate import MIN_TEST_PROMPTS
from nlicl_lib.training.train import TrainConfig, train

TRAINING_PARAMS = ("steps", "learning_rate", "seed")
"""Controls that change how a model trains, not which: the page sets them on the run's
``TrainConfig`` (the rate times the entry's ``learning_rate_scale``, the depth's division)."""
FIXTURE_SEED = 7


LEVEL_DIGITS = 8
"""Significant digits of the theory levels in the export (the page shows four)."""


def _entry(panel: TrainingPanel, settings: dict[str, Any]) -> dict[str, Any]:
    r"""The configs, $\mathbb E[y^2]$ and theory levels at ``settings``, flat
    (``"task.input_dim"``, ...), or ``{"error": message}``."""
    try:
        task, model, train_config = panel.configure(settings)
    except ConfigError as error:
        return {"error": error.spelled({k: p.label for k, p in panel.params.items()})}
    theory = panel.theory_at(settings)
    flat = {f"task.{k}": v for k, v in asdict(task).items() if k != "covariance"}
    flat.update({f"model.{k}": v for k, v in asdict(model.resolved(task)).items()})
    flat.update({f"train.{k}": v for k, v in asdict(train_config).items()})
    flat["learning_rate_scale"] = train_config.learning_rate / settings["learning_rate"]
    flat["null_loss"] = theory.null_loss
    levels = [(float(f"{value:.{LEVEL_DIGITS}g}"), name, kind)
              for value, name, kind in theory_levels(theory)]
    return {"fields": flat, "levels": levels}


def panel_export(chapter: str) -> dict[str, Any]:
    """Chapter ``chapter``'s panel as the page reads it (module doc), in columns: ``base``, the
    fields of the configs at the defaults (``"task.context_length"``, ``"model.depth"``,
    ``"train.batch_size"``, ``"learning_rate_scale"``, ``"null_loss"``); ``columns``, those that
    change with the deciding controls (``key_params``); ``entries``, one per combination of
    their values in ``itertools.product`` order (the first control slowest), each ``{"v":
    [value per column], "l": [[level, index in level_names], ...]}`` or ``{"e": message}``;
    ``styles`` (:func:`styles`)."""
    if chapter not in PANELS:
        raise ConfigError("chapter", chapter, "one of " + ", ".join(PANELS))
    panel = PANELS[chapter]("cpu")
    params = list(panel.params.values())
    keys = [p for p in params if p.name not in TRAINING_PARAMS]
    defaults = {p.name: p.default for p in params}
    raw = [_entry(panel, {**defaults, **{p.name: v for p, v in zip(keys, values, strict=True)}})
           for values in itertools.product(*(p.values() for p in keys))]
    base = _entry(panel, defaults)["fields"]
    columns = sorted({k for e in raw if "fields" in e for k, v in e["fields"].items()
                      if v != base[k]})
    names: dict[str, str] = {}
    for e in raw:
        names.update({name: kind for _, name, kind in e.get("levels", [])})
    order = list(names)
    entries = [{"e": e["error"]} if "error" in e else {
        "v": [e["fields"][c] for c in columns],
        "l": [[value, order.index(name)] for value, name, _ in e["levels"]]} for e in raw]
    return {
        "chapter": chapter,
        "title": panel.title,
        "params": [{**asdict(p), "options": list(p.options)} for p in params],
        "x_param": panel.x_param,
        "key_params": [p.name for p in keys],
        "key_values": [p.values() for p in keys],
        "base": base,
        "columns": columns,
        "level_names": order,
        "level_kinds": [names[name] for name in order],
        "entries": entries,
        "test_prompts": MIN_TEST_PROMPTS,
        "styles": styles(),
    }


def styles() -> dict[str, Any]:
    """How the page draws a run, as the book's figures do (:mod:`nlicl_lib.pages.plots`): the
    training curve's and the test marker's colours, and each theory level's line."""
    return {"curve": trained_trace([0], [0], "").line.to_plotly_json(),
            "marker": COLORS["trained2"],
            "levels": {kind: trace([0], [0], "").line.to_plotly_json()
                       for kind, trace in LEVEL_TRACES.items()}}


# --- fixtures: the library's model and trainer, in float64 ----------------------------------

FIXTURE_CASES: dict[str, tuple[TaskConfig, ModelConfig]] = {
    "ch1 lsa linear, noise": (TaskConfig(kind="linear", input_dim=3, context_length=6,
                                         noise_std=0.5), ModelConfig(kind="lsa")),
    "ch2 lsa depth 3, degree 2": (TaskConfig(kind="poly", input_dim=3, context_length=6,
                                             degree=2), ModelConfig(kind="lsa", depth=3)),
    "ch2 lsa depth 2, degree 3 homogeneous": (
        TaskConfig(kind="poly", input_dim=2, context_length=5, degree=3, homogeneous=True),
        ModelConfig(kind="lsa", depth=2)),
    "ch3 glu-lsa, large": (TaskConfig(kind="poly", input_dim=3, context_length=6, degree=2),
                           ModelConfig(kind="glu-lsa", glu_init="large")),
    "ch3 glu-lsa, silu, normal": (
        TaskConfig(kind="poly", input_dim=3, context_length=6, degree=2),
        ModelConfig(kind="glu-lsa", activation="silu", glu_init="normal")),
    "ch3 glu-lsa, gelu, small": (
        TaskConfig(kind="poly", input_dim=3, context_length=6, degree=2),
        ModelConfig(kind="glu-lsa", activation="gelu", glu_init="small")),
    "ch4 glu-lsa m=2, h=4": (TaskConfig(kind="poly", input_dim=3, context_length=6, degree=2),
                             ModelConfig(kind="glu-lsa", feature_slots=2, glu_width=4)),
    "ch5 depth 3, m=2, degree 2": (
        TaskConfig(kind="poly", input_dim=3, context_length=6, degree=2),
        ModelConfig(kind="glu-lsa", depth=3, feature_slots=2)),
    "ch5 depth 2, m=3, degree 3 (GLUs read the slots)": (
        TaskConfig(kind="poly", input_dim=3, context_length=6, degree=3),
        ModelConfig(kind="glu-lsa", depth=2, feature_slots=3, glu_reads="x+slots")),
}
"""Every model variant the panels train (attention full or sparse; GLU reading x or x and its
slots, bilinear or gated by silu or gelu; the three initialisations; depth), on small prompts."""


def _tensors(values: dict[str, torch.Tensor]) -> dict[str, Any]:
    return {name: value.detach().double().tolist() for name, value in values.items()}


def _gradients(model: torch.nn.Module, task: TaskConfig, batch: Any, slots: int
               ) -> tuple[torch.Tensor, float, dict[str, torch.Tensor]]:
    r"""The prediction on ``batch``, its loss over $\mathbb E[y^2]$ (what the trainer
    minimises) and the loss's gradients, unclipped, at ``model``'s weights."""
    model.zero_grad()
    prediction = model(batch.embed(slots))
    loss = torch.mean((prediction - batch.query_label) ** 2) / null_loss(task)
    loss.backward()
    gradients = {k: v.grad.detach().clone() for k, v in model.named_parameters()}
    model.zero_grad()
    return prediction.detach(), float(loss.detach()), gradients


def fixture(name: str, batch_size: int = 8, steps: int = 3) -> dict[str, Any]:
    r"""One case of :data:`FIXTURE_CASES`: the float64 model at initialisation, the first
    training batch's prediction and normalised loss, and ``steps`` Adam steps of
    :func:`~nlicl_lib.training.train.train`: each step's batch, the gradients at the weights
    before it (unclipped), its learning rate and the weights after it.

    The page is checked step by step from the library's numbers (its gradients at the
    library's weights; its Adam fed the library's gradients), not along its own trajectory:
    where a clipped gradient entry is near Adam's $\epsilon$ = 1e-8, its step amplifies a
    float64 rounding of the gradient about $10^4$ times (measured: 1.4e-12 of the weights'
    scale after one step of the large initialisation)."""
    task, config = FIXTURE_CASES[name]
    slots = config.resolved(task).feature_slots
    train_config = TrainConfig(steps=steps, batch_size=batch_size, learning_rate=0.05,
                               seed=FIXTURE_SEED)
    model = build_model(config, task, seed=FIXTURE_SEED, dtype=torch.float64)
    batches = [sample_prompts(task, batch_size, FIXTURE_SEED, step, dtype=torch.float64)
               for step in range(steps)]
    initial = {k: v.detach().clone() for k, v in model.named_parameters()}
    prediction, loss, first = _gradients(model, task, batches[0], slots)
    gradients, after = [first], []

    def record(step: int, _loss: float) -> None:
        after.append(_tensors(dict(model.named_parameters())))
        if step + 1 < steps:  # the next step's gradients, on a copy (the trainer owns .grad)
            gradients.append(_gradients(copy.deepcopy(model), task, batches[step + 1], slots)[2])

    train(model, task, train_config, progress=False, callback=record)
    return {
        "name": name,
        "task": {k: v for k, v in asdict(task).items() if k != "covariance"},
        "model": asdict(config.resolved(task)),
        "train": asdict(train_config),
        "null_loss": null_loss(task),
        "weights": _tensors(initial),
        "batches": [{"x": b.x.tolist(), "y": b.y.tolist()} for b in batches],
        "prediction": prediction.tolist(),
        "loss": loss,
        "gradients": [_tensors(g) for g in gradients],
        "learning_rates": [train_config.learning_rate_at(s) for s in range(steps)],
        "weights_after": after,
    }


ERF_POINTS = [round(-7 + 0.23 * i, 2) for i in range(61)]
"""Where the page's erf (exact gelu) is checked against Python's ``math.erf``."""


def fixtures() -> dict[str, Any]:
    """Every case of :data:`FIXTURE_CASES` (:func:`fixture`), and ``math.erf`` at
    :data:`ERF_POINTS`."""
    return {"cases": [fixture(name) for name in FIXTURE_CASES],
            "erf": [[x, math.erf(x)] for x in ERF_POINTS]}


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("export", "fixtures"):
        print("usage: python -m nlicl_lib.pages.in_page export DIR | fixtures FILE",
              file=sys.stderr)
        return 2
    os.environ.setdefault("NLICL_BOOK_BUILD", "1")  # panels as data: no widgets
    if argv[0] == "export":
        out = Path(argv[1])
        out.mkdir(parents=True, exist_ok=True)
        for chapter in PANELS:
            text = json.dumps(panel_export(chapter), separators=(",", ":"), allow_nan=False)
            (out / f"{chapter}.json").write_text(text)
    else:
        Path(argv[1]).write_text(json.dumps(fixtures(), indent=None, allow_nan=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
