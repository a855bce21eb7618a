r"""What a training run needs before it starts: its peak memory, its work per step, and whether
it fits the machine; the one source for the command line and the live panels.

A run at a task $(d, n, k)$, a model $(m, h, L)$ and a batch of $B$ prompts holds, per prompt,
$T = n + 1$ tokens of $D = d + m + 1$ numbers each (shape ``(batch, tokens, dim)``):

* the prompt batch: the inputs $x$ ($T d$), the target's $p$ coefficients, and while the labels
  are computed the target's monomials, their stack and its transposed copy ($3 p$ per token,
  polynomial tasks), for the parts of the batch labelled at once (one part of 1000 prompts per
  sampling thread, :func:`~nlicl_lib.core.tasks.labelling_prompts`);
  the embedding $Z_0$ and its zero slots and labels ($2D$ per token);
* per block, the activations autograd keeps: the GLU's two branches and their product ($3h$
  per token), its written slots and the token after it ($m + D$); full attention's statistic
  $S = \sum_i z_i z_i^\top$ and $P S$, $P S Q$ ($3 D^2$ per prompt) and the updated token
  ($3 D$ per token; the last block computes only the query's label, $O(n + D)$);
* their gradients (as many numbers again) while training;
* the weights ($2 D^2$ for full attention, $(D-1)^2$ for sparse, $h(2r + w)$ for a GLU reading
  $r$ and writing $w$ rows), with their gradients, Adam's two moments and the copy of the
  initial weights kept to diagnose a divergence (five copies in all);
* the test-loss batch of $E$ prompts, forward only (no gradients); a GLU-LSA stack of two or
  more blocks is tested with the task integrated out, $\min(n, p)$ forward passes per prompt.

Not counted: the theory values and exact losses computed next to a run (up to 0.8 GB measured
for a depth-3 cubic stack at $d = 3$), which do not grow with $n$ or $B$.

The peak is the larger of a training step and a test batch. :func:`check_fits` compares it with
what the device has free and raises :class:`~nlicl_lib.core.errors.ConfigError` naming the
parameter to shrink (by its field name: ``context_length``, ``batch_size``, ``glu_width``,
``input_dim``, ...; the command line spells them as its flags), its value, the estimate, the
memory available and the largest value that fits. Everything is computed in Python integers
from closed-form counts, so absurd sizes cost microseconds and never overflow.
``tests/test_cli_errors.py`` checks the estimate against measured peaks.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace

import torch

from nlicl_lib.core.errors import ConfigError, format_bytes
from nlicl_lib.core.models import ModelConfig
from nlicl_lib.core.tasks import TaskConfig, labelling_prompts, prompt_numbers

__all__ = ["EVAL_BATCH", "SECONDS_PER_WORK_UNIT", "RunEstimate", "RunShape", "available_memory_bytes",
           "check_fits", "estimate", "estimate_run", "eval_batch_size", "format_bytes", "largest_fitting",
           "memory_limit_bytes", "prompt_numbers", "shape_of", "work_units"]

EVAL_BATCH = 20000
"""Prompts per batch of :func:`nlicl_lib.training.evaluate.test_loss` (its default at a precision, and the
batch of :func:`nlicl_lib.experiments.run.run_experiment`)."""
EVAL_TOKENS = EVAL_BATCH * 21
"""Tokens per test batch of a live panel or an exercise: the library's batch at $n = 20$."""
PADDING = 1.25
"""Margin on the counted numbers for what the count leaves out (allocator slack, small
temporaries); with it the estimate is above the measured peak (see the module doc)."""
SIZE_PARAMS = ("context_length", "batch_size", "glu_width", "feature_slots", "depth", "input_dim")
"""The parameters :func:`check_fits` may ask to shrink, in the order ties are broken."""


@dataclass(frozen=True)
class RunShape:
    r"""The sizes that set a run's memory: ``input_dim`` $d$, ``context_length`` $n$,
    ``coefficients`` $p$ (the target's, $d$ for the linear task), ``degree`` $k$ (0: linear,
    no monomials drawn), ``feature_slots`` $m$, ``glu_width`` $h$ (0: no GLU), ``glu_reads``
    $r$ and ``glu_writes`` $w$ (rows of the token), ``depth`` $L$, ``full_attention``,
    ``batch_size`` $B$, ``eval_batch_size`` $E$, ``itemsize`` (bytes per number)."""

    input_dim: int
    context_length: int
    coefficients: int
    degree: int
    feature_slots: int
    glu_width: int
    glu_reads: int
    glu_writes: int
    depth: int
    full_attention: bool
    batch_size: int
    eval_batch_size: int = EVAL_BATCH
    itemsize: int = 4

    @property
    def tokens(self) -> int:
        """$T = n + 1$."""
        return self.context_length + 1

    @property
    def dim(self) -> int:
        """$D = d + m + 1$."""
        return self.input_dim + self.feature_slots + 1


@dataclass(frozen=True)
class RunEstimate:
    """Bytes and floating-point operations of a run (see the module doc for what is counted).
    ``peak_bytes`` includes :data:`PADDING`."""

    shape: RunShape
    parameters: int
    prompt_bytes: int
    train_step_bytes: int
    eval_bytes: int
    peak_bytes: int
    flops_per_step: int

    def describe(self) -> str:
        """One line: the peak and where it comes from."""
        s = self.shape
        which = ("a training step" if self.train_step_bytes >= self.eval_bytes
                 else f"a test batch of {s.eval_batch_size:,} prompts")
        return (f"about {format_bytes(self.peak_bytes)} at its peak ({which}; {s.batch_size:,} "
                f"prompts of {s.tokens:,} tokens x {s.dim:,} numbers per step, "
                f"{self.parameters:,} weights)")


def shape_of(task: TaskConfig, model: ModelConfig, batch_size: int,
             eval_batch_size: int = EVAL_BATCH, dtype: torch.dtype = torch.float32) -> RunShape:
    """The :class:`RunShape` of a run (``model``'s defaults resolved for ``task``)."""
    config = model.resolved(task)
    d, m = task.input_dim, config.feature_slots
    dim = d + m + 1
    glu = config.kind == "glu-lsa"
    reads = {"x": d, "x+slots": d + m, "all": dim}[config.glu_reads]
    writes = m if config.glu_writes == "slots" else dim
    return RunShape(
        input_dim=d, context_length=task.context_length, coefficients=task.num_monomials,
        degree=0 if task.kind == "linear" else task.degree, feature_slots=m,
        glu_width=config.glu_width if glu else 0, glu_reads=reads if glu else 0,
        glu_writes=writes if glu else 0, depth=config.depth,
        full_attention=config.attention == "full", batch_size=batch_size,
        eval_batch_size=eval_batch_size, itemsize=torch.empty((), dtype=dtype).element_size())


def estimate_run(shape: RunShape) -> RunEstimate:
    """Peak memory and work per training step of a run of ``shape`` (module doc)."""
    t, n, dim, h, depth = shape.tokens, shape.context_length, shape.dim, shape.glu_width, shape.depth
    glu_per_token = 3 * h + shape.feature_slots + dim if h else 0
    if shape.full_attention:
        attention = 3 * dim * dim + 3 * t * dim  # S, PS, PSQ per prompt; the updated tokens
        last = n + 2 * dim  # the query's label only
        weights = 2 * dim * dim
        attention_flops = 2 * n * dim * dim + 4 * dim**3 + 2 * t * dim * dim
    else:
        attention = dim + t * (dim + 2)
        last = n + dim
        weights = (dim - 1) ** 2
        attention_flops = 2 * n * dim + 2 * t * dim * dim + 2 * t * dim
    activations = depth * t * glu_per_token + (depth - 1) * attention + last
    parameters = depth * (weights + h * (2 * shape.glu_reads + shape.glu_writes))
    prompt = prompt_numbers(shape.input_dim, n, shape.coefficients, shape.degree, shape.feature_slots)
    # the target's monomials exist only for the parts of a batch being labelled at once
    monomials = prompt - prompt_numbers(shape.input_dim, n, shape.coefficients, 0, shape.feature_slots)
    prompt -= monomials
    train_numbers = (5 * parameters + shape.batch_size * (prompt + 2 * activations)
                     + labelling_prompts(shape.batch_size) * monomials)
    # forward only: one block's activations are alive at a time; a GLU-LSA stack (no exact loss)
    # is tested with the task integrated out, min(n, p) forward passes per prompt (run_experiment)
    passes = min(n, shape.coefficients) if h and depth > 1 else 1
    eval_numbers = (parameters + shape.eval_batch_size * (prompt + passes * (t * glu_per_token + attention))
                    + labelling_prompts(shape.eval_batch_size) * monomials)
    size = shape.itemsize
    glu_flops = 2 * t * h * (2 * shape.glu_reads + shape.glu_writes)
    forward_flops = depth * (glu_flops + attention_flops)
    sampling_flops = t * shape.input_dim + shape.coefficients + (shape.degree + 2) * shape.coefficients * t
    return RunEstimate(
        shape=shape, parameters=parameters, prompt_bytes=size * prompt,
        train_step_bytes=size * train_numbers, eval_bytes=size * eval_numbers,
        peak_bytes=math.ceil(PADDING * size * max(train_numbers, eval_numbers)),
        flops_per_step=shape.batch_size * (sampling_flops + 3 * forward_flops) + 4 * parameters)


def estimate(task: TaskConfig, model: ModelConfig, batch_size: int,
             eval_batch_size: int = EVAL_BATCH, dtype: torch.dtype = torch.float32) -> RunEstimate:
    """:func:`estimate_run` of :func:`shape_of` the configs."""
    return estimate_run(shape_of(task, model, batch_size, eval_batch_size, dtype))


def eval_batch_size(task: TaskConfig, model: ModelConfig | None = None) -> int:
    """Prompts per test batch of a run in a reader's kernel (live panels, exercises): the
    library's 20 000 up to $n = 20$, fewer for longer contexts, so that a batch holds at most
    :data:`EVAL_TOKENS` tokens; a quarter of that for a stack of two or more blocks, whose test
    loss takes one forward pass per coefficient of the task (measured: 312 MiB at $n = 100$ for
    a batch of 4158 prompts, which took chapter 5 run live over Binder's 1 GB)."""
    tokens = EVAL_TOKENS // 4 if model is not None and model.depth > 1 else EVAL_TOKENS
    return max(1000, min(EVAL_BATCH, tokens // (task.context_length + 1)))


# --- how long it trains ----------------------------------------------------------------------

SECONDS_PER_WORK_UNIT = 2.6e-9
r"""Seconds of training per :func:`work_units` unit on one torch thread, idle: the CPU time
(user + sys) of 30 training steps of GLU-LSA stacks at n = 100, d = 3, m = 6 (D = 10) and 500
prompts, measured with ``time.process_time`` on a shared 2-core machine (load about 6, so wall
time was 3-4x longer): 2.65e-9 at depth 4, 2.59e-9 at depth 8. Chapter 1's default, 600 x 2000 x
21 x 6^2 = 0.91e9 units, trained in 1.5 s at load 1.7 (1.65e-9). ``tests/test_cli_budget.py``
holds every command the README and the book tell readers to type to a budget at this rate."""


def work_units(task: TaskConfig, model: ModelConfig, steps: int, batch_size: int) -> int:
    r"""The planned training work: steps $\times$ batch $\times$ $L (n + 1) D^2$, the cost of one
    prompt through a model of depth $L$ with $n + 1$ tokens of dimension $D$ (attention's
    projections and a GLU's are $(n + 1) D^2$ each per block; the $(n + 1)^2 D$ score products
    are smaller for $n + 1 \le D$, and about as large for the book's $n \le 100$, $D \ge 6$,
    where the measured rate :data:`SECONDS_PER_WORK_UNIT` absorbs them)."""
    shape = shape_of(task, model, batch_size)
    return steps * batch_size * shape.depth * shape.tokens * shape.dim**2


# --- what the machine has ------------------------------------------------------------------


def _cgroup_memory_left() -> int | None:
    """Bytes left under the container's memory limit (cgroup v2 or v1), if it has one."""
    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
         "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        try:
            with open(limit_file) as f:
                limit = f.read().strip()
            with open(usage_file) as f:
                usage = int(f.read().strip())
        except (OSError, ValueError):
            continue
        if limit.isdigit() and int(limit) < 2**60:
            return int(limit) - usage
    return None


def _system_memory_available() -> int | None:
    """The system's available memory: ``psutil`` when installed, else ``os.sysconf``."""
    try:
        import psutil  # optional: ipykernel brings it, the command line does not need it

        return int(psutil.virtual_memory().available)
    except ImportError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return None


def available_memory_bytes(device: torch.device | str) -> int | None:
    """Free memory of ``device``: CUDA's free memory; on the CPU (and MPS, which shares it) the
    smaller of the system's available memory and what the container's limit leaves (a Binder
    session has one). ``None`` when unknown."""
    device = torch.device(device)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    if device.type not in ("cpu", "mps"):
        return None
    candidates = [v for v in (_system_memory_available(), _cgroup_memory_left()) if v is not None]
    return min(candidates) if candidates else None


def memory_limit_bytes(device: torch.device | str, fraction: float = 0.9,
                       cap: int | None = None) -> int | None:
    """The largest run to accept on ``device``: ``fraction`` of its free memory, and on the CPU
    at most ``cap``. ``None``: unknown (no limit)."""
    device = torch.device(device)
    free = available_memory_bytes(device)
    limits = [] if free is None else [int(fraction * free)]
    if device.type == "cpu" and cap is not None:
        limits.append(cap)
    return min(limits) if limits else None


# --- refusing what does not fit ------------------------------------------------------------


def _largest(fits: Callable[[int], bool], below: int, minimum: int) -> int | None:
    """The largest value in ``[minimum, below)`` with ``fits(value)`` (``fits`` decreasing in the
    value), by bisection; ``None`` when ``minimum`` does not fit."""
    if below <= minimum or not fits(minimum):
        return None
    low, high = minimum, below  # fits(low), not fits(high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


def largest_fitting(param: str, task: TaskConfig, model: ModelConfig, batch_size: int,
                    limit: int, eval_batch_size: int = EVAL_BATCH,
                    dtype: torch.dtype = torch.float32) -> int | None:
    """The largest value of ``param`` (one of :data:`SIZE_PARAMS`) below its current one whose
    run's peak is at most ``limit`` bytes, the other settings kept; ``None``: none fits.
    Values the configs refuse (e.g. a task with too many monomials) count as not fitting."""
    resolved = model.resolved(task)
    current = {"context_length": task.context_length, "batch_size": batch_size,
               "glu_width": resolved.glu_width or 0, "feature_slots": resolved.feature_slots,
               "depth": resolved.depth, "input_dim": task.input_dim}[param]

    def fits(value: int) -> bool:
        try:
            if param in ("context_length", "input_dim"):
                run = estimate(replace(task, **{param: value}), model, batch_size, eval_batch_size, dtype)
            elif param == "batch_size":
                run = estimate(task, model, value, eval_batch_size, dtype)
            else:  # the unresolved model: a default width follows the slots
                run = estimate(task, replace(model, **{param: value}), batch_size, eval_batch_size, dtype)
        except ConfigError:
            return False
        return run.peak_bytes <= limit

    if param == "glu_width" and resolved.kind != "glu-lsa":
        return None
    minimum = 1 if param != "feature_slots" else (0 if resolved.kind == "lsa" else 1)
    if param == "feature_slots" and resolved.kind == "lsa":
        return None
    return _largest(fits, current, minimum)


def _peak_at_minimum(param: str, task: TaskConfig, model: ModelConfig, batch_size: int,
                     eval_batch_size: int, dtype: torch.dtype) -> float:
    """The peak with ``param`` at its smallest value (``inf`` where the configs refuse it)."""
    try:
        if param in ("context_length", "input_dim"):
            return estimate(replace(task, **{param: 1}), model, batch_size, eval_batch_size, dtype).peak_bytes
        if param == "batch_size":
            return estimate(task, model, 1, eval_batch_size, dtype).peak_bytes
        return estimate(task, replace(model, **{param: 1}), batch_size, eval_batch_size, dtype).peak_bytes
    except ConfigError:
        return math.inf


def check_fits(task: TaskConfig, model: ModelConfig, batch_size: int,
               device: torch.device | str = "cpu", limit: int | None = None,
               eval_batch_size: int = EVAL_BATCH, dtype: torch.dtype = torch.float32,
               prefer: Collection[str] = (), where: str | None = None) -> RunEstimate:
    """The run's :class:`RunEstimate`, or :class:`ConfigError` when its peak is above ``limit``
    bytes (default: :func:`memory_limit_bytes` of ``device``; no check when that is unknown).

    The error names the size to shrink: among ``prefer`` (the sizes the caller set itself) when
    one of them alone can make the run fit, else among all of :data:`SIZE_PARAMS`, the one whose
    largest fitting value (the others kept) is the furthest below its value, e.g.
    ``context_length=100000000 is not allowed: a run that fits in memory: it needs about 336 TiB
    ..., more than the 18 GiB free for it on cpu; the largest context_length that fits is 5,234``.
    ``where`` replaces the text after "more than"."""
    run = estimate(task, model, batch_size, eval_batch_size, dtype)
    if limit is None:
        limit = memory_limit_bytes(device)
    if limit is None or run.peak_bytes <= limit:
        return run
    resolved = model.resolved(task)
    values = {"context_length": task.context_length, "batch_size": batch_size,
              "glu_width": resolved.glu_width, "feature_slots": resolved.feature_slots,
              "depth": resolved.depth, "input_dim": task.input_dim}
    largest = {param: largest_fitting(param, task, model, batch_size, limit, eval_batch_size, dtype)
               for param in SIZE_PARAMS}
    fixes = [p for p in SIZE_PARAMS if largest[p] is not None]
    where = where or f"the {format_bytes(limit)} free for it on {torch.device(device).type}"
    needs = f"a run that fits in memory: it needs {run.describe()}, more than {where}"
    if not fixes:
        # no one size alone makes it fit: name the one whose smallest value comes closest
        param = min((p for p in SIZE_PARAMS if values[p]),
                    key=lambda p: _peak_at_minimum(p, task, model, batch_size, eval_batch_size, dtype))
        raise ConfigError(param, values[param],
                          f"{needs}, and no smaller {param} alone makes it fit (nor any other one size)")
    fixes = [p for p in fixes if p in prefer] or fixes
    param = max(fixes, key=lambda p: values[p] / max(largest[p], 1))
    raise ConfigError(param, values[param], f"{needs}; the largest {param} that fits is {largest[param]:,}")
