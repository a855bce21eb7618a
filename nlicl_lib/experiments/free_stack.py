r"""Chapter 5 beyond the GD form: unconstrained GLU-LSA stacks on the depth study's task, against
the block-coordinate picture, precomputed into a small data file (training takes minutes).

Every stack of the depth study (:mod:`nlicl_lib.experiments.depth_study`) has GD-form attention
($P = e_De_D^\top$, $Q = -\mathrm{blkdiag}(\Gamma^\top, 0)$) and GLUs reading $x$ and writing
the slots, so Theorem 13 (thm-depth-bcd) holds for it whatever its weights. A *free* stack drops
both constraints: each block learns all of $P_\ell, Q_\ell \in \mathbb R^{D\times D}$, and its
GLU reads the whole token (label included) and writes every entry,
$z \leftarrow z + W_3\big((W_1 z)\odot(W_2 z)\big)$ with $W_1, W_2 \in \mathbb R^{h\times D}$,
$W_3 \in \mathbb R^{D\times h}$ (:func:`free_model_config`). Its prediction need not be linear in
the labels, and the exact loss given the context does not apply: its test loss is the Monte
Carlo mean of $(\hat y - y_{n+1})^2$ over fresh prompts (:func:`~nlicl_lib.training.evaluate.test_loss`).

**How much of the block-coordinate picture holds** (:func:`stream_agreement`). Write
$s^{(\ell)}_i$ for the label entry of context token $i$ in the residual stream after block
$\ell$ and $\hat y_\ell(x)$ for what the first $\ell$ blocks predict (the query's label entry
after block $\ell$, negated) when $x$ is put in the query's place, the context unchanged. The
recursion says the stream holds the residuals of the partial predictor, $s^{(\ell)}_i =
y_i - \hat y_\ell(x_i)$ (:func:`nlicl_lib.theory.depth.context_residuals`): what the first
$\ell$ blocks took off a context label is what they predict there. The agreement of block
$\ell$, over prompts $b$ and context tokens $i$,

$$A_\ell = 1 - \frac{\sum_{b,i} \big((y_{b,i} - s^{(\ell)}_{b,i}) - \hat y_\ell(x_{b,i})\big)^2}
                    {\sum_{b,i} \hat y_\ell(x_{b,i})^2},$$

is the fraction of the partial predictions at the context points (their summed square) that
the stream's label changes reproduce: 1 for every GD-form stack (up to rounding), below 1 when
the identity fails (negative when the label changes are further from the predictions than
zero is).

**How much of the prediction the recursion explains** (:func:`prediction_r2`). For the free
stack's prediction $\hat y$ and a recursion's $\hat y^{\mathrm{rec}}$ (the greedy reference of the
same shape, or the GD-form stack trained with the study's settings) on the same fresh prompts,
$R^2 = 1 - \sum_b (\hat y_b - \hat y^{\mathrm{rec}}_b)^2 / \sum_b (\hat y_b - \bar{\hat y})^2$.

- :data:`DEPTHS`, :func:`free_training`: what is trained and how;
- :func:`run_free_stacks`: train and measure, as plain JSON data; :func:`load_free_stacks`,
  :data:`DATA_FILE`: the committed results. ``python tools/make_free_stack.py`` rewrites the
  file; ``tests/test_free_stack.py`` reruns part of it.
"""

from __future__ import annotations

import json
import platform
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from nlicl_lib.core.errors import ConfigError, check_int
from nlicl_lib.core.models import InContextRegressor, ModelConfig, build_model
from nlicl_lib.core.tasks import Prompts, TaskConfig, embed
from nlicl_lib.experiments.depth_study import STUDIES, STUDY_TRAINING
from nlicl_lib.experiments.depth_sweep import depth_sweep, shape_key
from nlicl_lib.theory.closed_forms import null_loss
from nlicl_lib.theory.depth import greedy_reference, reference_model, schedule_features
from nlicl_lib.training.evaluate import batches_of_test_prompts, test_loss
from nlicl_lib.training.settings import default_train_config
from nlicl_lib.training.train import TrainConfig, train

DATA_FILE = Path(__file__).parent / "data" / "free_stack.json"
TASK: TaskConfig = STUDIES["d3"].task
SLOTS = 3
DEPTHS = (1, 2, 3)
TEST_PROMPTS = 100_000
AGREEMENT_PROMPTS = 200
FIT_CONTEXTS = 100_000
REFERENCE_TEST_CONTEXTS = 40_000
SEED = 0
HISTORY_WINDOW = 25
HISTORY_HEAD = 50
"""Raw batch losses stored from the start of each run, for the rerun check."""


def free_model_config(depth: int, slots: int = SLOTS) -> ModelConfig:
    """A free stack: full $P, Q$ attention, GLUs of width $h = m$ reading and writing the whole
    token, initialised like the study's stacks (``"normal"``) but see :func:`build_free_stack`."""
    return ModelConfig(kind="glu-lsa", depth=depth, feature_slots=slots, glu_width=slots,
                       attention="full", glu_reads="all", glu_writes="all", glu_init="normal")


def free_training(depth: int, steps: int | None = None) -> TrainConfig:
    r"""The settings of the free stack of ``depth`` blocks: purpose ``"free-stacks"``, peak rate
    $\eta / L$ as for every stack, seed :data:`SEED` (``steps``: fewer, for a quick look)."""
    return default_train_config(TASK, free_model_config(depth), purpose="free-stacks",
                                seed=SEED, steps=steps)


def build_free_stack(depth: int, seed: int = SEED, task: TaskConfig = TASK,
                     slots: int = SLOTS, dtype: torch.dtype = torch.float32
                     ) -> InContextRegressor:
    r"""A freshly initialised free stack (:func:`free_model_config`). The ``"normal"``
    initialisation starts the columns of $W_1, W_2$ that read the slots at zero; here the columns
    that read the label start at zero too: with $\mathcal N(0, 1)$ there each block squares the
    label, and the forward pass overflows in float32 at depth 3 before any step. They are
    trained like every other weight."""
    model = build_model(free_model_config(depth, slots), task, seed=seed, dtype=dtype)
    with torch.no_grad():
        for block in model.blocks:
            block.glu.w1[:, -1] = 0.0
            block.glu.w2[:, -1] = 0.0
    return model


def _windowed(history: np.ndarray, window: int = HISTORY_WINDOW) -> list[float]:
    """Means of every ``window`` steps of a batch-loss history."""
    usable = len(history) // window * window
    return np.asarray(history[:usable]).reshape(-1, window).mean(axis=1).tolist()


def _commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).parent, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def state_to_json(model: InContextRegressor) -> dict[str, list]:
    """The model's weights as nested lists (float32 values are exact in JSON's doubles)."""
    return {key: value.detach().cpu().tolist() for key, value in model.state_dict().items()}


def free_stack_from_json(depth: int, weights: dict[str, list],
                         dtype: torch.dtype = torch.float32) -> InContextRegressor:
    """A free stack of ``depth`` blocks with the stored ``weights`` (:func:`state_to_json`)."""
    model = build_free_stack(depth, dtype=dtype)
    model.load_state_dict({k: torch.tensor(v, dtype=dtype) for k, v in weights.items()})
    return model


@torch.no_grad()
def stream_agreement(model: InContextRegressor, prompts: Prompts) -> np.ndarray:
    r"""$A_\ell$ for $\ell = 1, \dots, L$ (module doc), over the context tokens of ``prompts``:
    one minus the summed squared gap between what block $\ell$ and the earlier ones took off
    the context labels, $y_i - s^{(\ell)}_i$, and the partial prediction $\hat y_\ell(x_i)$,
    over the partial predictions' summed square.
    Batched :func:`~nlicl_lib.theory.depth.context_residuals`: each prompt is run once, and once
    per context token with that token's input in the query's place ($B n$ prompts). Runs in
    the model's dtype; shape ``(L,)``, float64."""
    x, y = prompts.x.to(next(model.parameters()).dtype), prompts.y.to(next(model.parameters()).dtype)
    batch, tokens, d = x.shape
    n, slots = tokens - 1, model.feature_slots
    _, stream = model(embed(x, y, slots), return_stream=True)
    # prompt b, token i: the context of prompt b with x_i of it in the query's place
    requeried = x.repeat_interleave(n, dim=0)
    requeried[:, n] = x[:, :n].reshape(batch * n, d)
    _, again = model(embed(requeried, y.repeat_interleave(n, dim=0), slots), return_stream=True)
    out = []
    for ell in range(1, model.depth + 1):
        taken = y[:, :n].double() - stream[f"block{ell}"][:, :n, -1].double()
        partial = -again[f"block{ell}"][:, n, -1].double().reshape(batch, n)
        out.append(1.0 - float(((taken - partial) ** 2).sum() / (partial**2).sum()))
    return np.array(out)


@torch.no_grad()
def prediction_r2(predicted: torch.Tensor, recursion: torch.Tensor) -> float:
    r"""$R^2 = 1 - \sum_b (\hat y_b - \hat y^{\mathrm{rec}}_b)^2 / \sum_b (\hat y_b -
    \bar{\hat y})^2$: the fraction of the variance of ``predicted`` that ``recursion``
    (the same prompts, shape ``(B,)``) explains."""
    p, r = predicted.double(), recursion.double()
    return 1.0 - float(((p - r) ** 2).sum() / ((p - p.mean()) ** 2).sum())


def _first_test_prompts(count: int, dtype: torch.dtype = torch.float32) -> Prompts:
    """The first ``count`` prompts of the test stream of :data:`SEED` (batches of 4000, as
    :func:`~nlicl_lib.training.evaluate.test_loss` draws them)."""
    batches = list(batches_of_test_prompts(TASK, SEED, "cpu", dtype, 4000, count))
    return Prompts(torch.cat([b.x for b in batches]), torch.cat([b.y for b in batches]),
                   torch.cat([b.coefficients for b in batches]))


def run_free_stacks(depths: tuple[int, ...] = DEPTHS, device: str = "cpu",
                    progress: bool | None = None, steps: int | None = None) -> dict:
    r"""Train a free stack of every depth in ``depths`` with :func:`free_training` (``steps``:
    fewer, for a quick look), and measure, per depth, on the same :data:`TEST_PROMPTS` fresh
    prompts: its test loss, the greedy reference's (the constructed recursion with the greedy
    $\Gamma_\ell$) and the GD-form stack's trained with the study's settings (retrained here,
    :func:`~nlicl_lib.experiments.depth_sweep.depth_sweep`, whose stored loss the depth study
    holds); $A_\ell$ (:func:`stream_agreement`) of the free and the GD-form stack on
    :data:`AGREEMENT_PROMPTS` prompts; and $R^2$ of the free stack's and the GD-form stack's
    prediction by the reference's (:func:`prediction_r2`). Unnormalised losses (JSON data)."""
    for L in depths:
        check_int("depth", L, minimum=1)
    if not depths:
        raise ConfigError("depths", depths, "at least one depth")
    start = time.perf_counter()
    reference = greedy_reference(TASK, schedule_features(TASK, SLOTS, max(depths)), FIT_CONTEXTS,
                                 REFERENCE_TEST_CONTEXTS, device=device)
    reference_seconds = time.perf_counter() - start
    sweep = depth_sweep(TASK, [(SLOTS, L) for L in depths], STUDY_TRAINING,
                        test_prompts=REFERENCE_TEST_CONTEXTS, device=device, progress=progress)
    shown = _first_test_prompts(AGREEMENT_PROMPTS)
    rows = {}
    for L in depths:
        model = build_free_stack(L)
        run_config = free_training(L, steps)
        result = train(model, TASK, run_config, device=device, progress=progress)
        model = model.cpu()
        constructed = reference_model(TASK, SLOTS, L, gammas=reference.gammas).float()
        gd_form = sweep.models[shape_key(SLOTS, L)].cpu()
        losses = test_loss([model, constructed, gd_form], TASK, TEST_PROMPTS, seed=SEED)
        test = _first_test_prompts(20_000)
        predictions = [m(test.embed(SLOTS)) for m in (model, constructed, gd_form)]
        rows[str(L)] = {
            "depth": L, "learning_rate": run_config.learning_rate, "seconds": result.seconds,
            "history_head": result.loss_history[:HISTORY_HEAD].tolist(),
            "history": _windowed(result.loss_history),
            "loss": losses[0].mean, "std_error": losses[0].std_error,
            "reference_loss": losses[1].mean, "reference_std_error": losses[1].std_error,
            "gd_form_loss": losses[2].mean, "gd_form_std_error": losses[2].std_error,
            "reference_exact_loss": float(reference.loss[L - 1]),
            "reference_exact_std_error": float(reference.std_error[L - 1]),
            "gd_form_exact_loss": sweep.loss[shape_key(SLOTS, L)],
            "gd_form_exact_std_error": sweep.std_error[shape_key(SLOTS, L)],
            "worst": losses[0].worst,
            "agreement": stream_agreement(model, shown).tolist(),
            "gd_form_agreement": stream_agreement(gd_form, shown).tolist(),
            "r2_reference": prediction_r2(predictions[0], predictions[1]),
            "r2_gd_form": prediction_r2(predictions[0], predictions[2]),
            "gd_form_r2_reference": prediction_r2(predictions[2], predictions[1]),
            "weights": state_to_json(model)}
    return {"task": asdict(TASK), "slots": SLOTS, "depths": list(depths),
            "null_loss": null_loss(TASK), "training": asdict(free_training(1, steps)),
            "gd_form_training": asdict(STUDY_TRAINING), "seed": SEED,
            "test_prompts": TEST_PROMPTS, "agreement_prompts": AGREEMENT_PROMPTS,
            "history_window": HISTORY_WINDOW, "rows": rows,
            "reference_seconds": reference_seconds, "gd_form_seconds": sweep.seconds,
            "seconds": time.perf_counter() - start, "device": device,
            "torch": torch.__version__, "machine": platform.machine(),
            "threads": torch.get_num_threads(), "commit": _commit()}


def load_free_stacks(path: Path | str | None = None) -> dict:
    """The committed results (:data:`DATA_FILE`)."""
    path = Path(path) if path is not None else DATA_FILE
    if not path.exists():
        raise ConfigError("path", str(path), "the free-stack data file; make it with "
                          "`python tools/make_free_stack.py`")
    return json.loads(path.read_text())


def _compare(value: float, error: float, other: float, other_error: float) -> str:
    """``"below"``, ``"above"`` or ``"within two standard errors of"`` ``other``."""
    if abs(value - other) <= 2 * float(np.hypot(error, other_error)):
        return "within two standard errors of"
    return "below" if value < other else "above"


def free_stack_report(data: dict) -> str:
    r"""The committed free stacks' table, losses over $\mathbb E[y^2]$ on the same fresh prompts
    (Monte Carlo, ± one standard error): per depth the free stack, the GD-form stack and the
    greedy reference; then $A_\ell$ of each block of the free stack and $R^2$ of the free and
    of the GD-form stack's predictions by the reference's."""
    null = data["null_loss"]
    lines = [f"{len(data['rows'])} free stacks, {data['training']['steps']} steps of "
             f"{data['training']['batch_size']} prompts,",
             f"{data['seconds']:.0f} s in all on {data['device']} (torch {data['torch']});",
             f"test: {data['test_prompts']:,} fresh prompts, loss / E[y²] ± standard error",
             " L   free stack        GD-form stack     greedy reference"]
    for key, row in data["rows"].items():
        cells = [f"{row[a] / null:.4f} ± {row[b] / null:.4f}" for a, b in
                 (("loss", "std_error"), ("gd_form_loss", "gd_form_std_error"),
                  ("reference_loss", "reference_std_error"))]
        lines.append(f" {key}   " + "   ".join(cells))
    lines.append(" L   A_l of the free stack's blocks   R² by the reference: free, GD-form")
    for key, row in data["rows"].items():
        agreement = ", ".join(f"{v:.3f}" for v in row["agreement"])
        lines.append(f" {key}   {agreement:31s}  {row['r2_reference']:.3f}, "
                     f"{row['gd_form_r2_reference']:.3f}")
    return "\n".join(lines)


def summary(data: dict) -> dict[str, float | str]:
    r"""The numbers chapter 5 quotes, keyed ``free_...`` (losses over $\mathbb E[y^2]$): for the
    deepest free stack its loss and standard error, the GD-form stack's and the reference's on
    the same prompts and how it compares with each, the smallest and largest $A_\ell$ of its
    blocks, the smallest $A_\ell$ of the GD-form stacks, the $R^2$ values; at how many depths the
    free stack is above the GD-form stack by more than two standard errors; and the run's
    rates, time and depths."""
    null, rows = data["null_loss"], data["rows"]
    deepest = rows[str(max(data["depths"]))]
    loss, error = deepest["loss"] / null, deepest["std_error"] / null
    gd, gd_error = deepest["gd_form_loss"] / null, deepest["gd_form_std_error"] / null
    ref, ref_error = deepest["reference_loss"] / null, deepest["reference_std_error"] / null
    return {
        "free_depth": max(data["depths"]), "free_loss": loss, "free_err": error,
        "free_gd": gd, "free_gd_err": gd_error, "free_ref": ref, "free_ref_err": ref_error,
        "free_vs_gd": _compare(loss, error, gd, gd_error),
        "free_vs_ref": _compare(loss, error, ref, ref_error),
        "free_first_loss": rows[str(min(data["depths"]))]["loss"] / null,
        "free_first_gd": rows[str(min(data["depths"]))]["gd_form_loss"] / null,
        "free_agreement_min": min(min(r["agreement"]) for r in rows.values()),
        "free_agreement_max": max(max(r["agreement"]) for r in rows.values()),
        "free_gd_agreement_min": min(min(r["gd_form_agreement"]) for r in rows.values()),
        "free_r2_ref": deepest["r2_reference"], "free_r2_gd": deepest["r2_gd_form"],
        "free_gd_r2_ref": deepest["gd_form_r2_reference"],
        "free_rate": data["training"]["learning_rate"],
        "free_gd_rate": data["gd_form_training"]["learning_rate"],
        "free_seconds": data["seconds"], "free_worst": max(r["worst"] for r in rows.values()),
        "free_depth_count": len(rows),
        "free_above_gd_count": sum(_compare(r["loss"], r["std_error"], r["gd_form_loss"],
                                            r["gd_form_std_error"]) == "above"
                                   for r in rows.values()),
    }
