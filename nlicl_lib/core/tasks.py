r"""In-context regression tasks and the prompt embedding (Definition 1 (def-prompts)).

A prompt holds $n$ context pairs $(x_i, y_i)$ and a query $x_{n+1}$. Inputs are
$x_i \sim \mathcal N(0, \Sigma)$ ($\Sigma = I_d$ unless a covariance is given); the target
function is drawn fresh for every prompt:

- ``linear``: $y = w^\top x$, $w \sim \mathcal N(0, I_d)$;
- ``poly`` of degree $k$: $y = \sum_\alpha \beta_\alpha x^\alpha$ over raw monomials with
  $1 \le |\alpha| \le k$ (or only $|\alpha| = k$ when ``homogeneous``), $\beta_\alpha \sim
  \mathcal N(0, 1)$;
- context labels get noise $\epsilon \sim \mathcal N(0, \sigma^2)$ (``noise_std`` $= \sigma$);
  the query label is clean.

The embedding puts tokens in rows, shape ``(batch, tokens, dim)`` with ``tokens = n + 1`` and
``dim = D = d + m + 1``: $x$ in columns ``[0, d)``, the $m$ zero feature slots in
``[d, d + m)``, the label in column ``D - 1`` (zero for the query).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch

from nlicl_lib.core.errors import ConfigError, check_choice, check_float, check_int, format_bytes
from nlicl_lib.core.monomials import MAX_MONOMIALS, PolyMap, monomial_count
from nlicl_lib.core.seeding import STREAM_TRAIN, generator

TASK_KINDS = ("linear", "poly")


@dataclass(frozen=True, kw_only=True)
class TaskConfig:
    r"""What prompts look like. Validated on construction.

    ``input_dim`` is $d$, ``context_length`` is $n$, ``degree`` is $k$, ``noise_std`` is
    $\sigma$ (a standard deviation, not a variance), ``covariance`` is $\Sigma$ (linear only).
    """

    kind: str = "linear"
    input_dim: int = 5
    context_length: int = 20
    degree: int = 1
    homogeneous: bool = False
    noise_std: float = 0.0
    covariance: tuple[tuple[float, ...], ...] | None = field(default=None, compare=True)

    def __post_init__(self) -> None:
        check_choice("task", self.kind, TASK_KINDS)
        object.__setattr__(self, "input_dim", check_int("input_dim", self.input_dim, minimum=1))
        object.__setattr__(self, "context_length", check_int("context_length", self.context_length, minimum=1))
        object.__setattr__(self, "noise_std", check_float("noise_std", self.noise_std, minimum=0.0))
        degree = check_int("degree", self.degree, minimum=1)
        if self.kind == "linear" and degree != 1:
            raise ConfigError("degree", degree, "1 for the linear task (use task='poly')")
        object.__setattr__(self, "degree", degree)
        self._check_monomial_count()
        if self.covariance is not None:
            if self.kind != "linear":
                raise ConfigError("covariance", "given", "only the linear task takes a covariance")
            cov = np.asarray(self.covariance, dtype=np.float64)
            if cov.shape != (self.input_dim, self.input_dim) or not np.allclose(cov, cov.T):
                raise ConfigError(
                    "covariance", cov.shape, f"a symmetric {self.input_dim}x{self.input_dim} matrix"
                )
            if np.linalg.eigvalsh(cov).min() <= 0:
                raise ConfigError("covariance", "matrix", "a positive definite matrix")
            object.__setattr__(self, "covariance", tuple(tuple(float(v) for v in r) for r in cov))

    def _check_monomial_count(self) -> None:
        r"""The target's $p$ coefficients are at most :data:`MAX_MONOMIALS` (the memory of a
        batch of prompts, whose tokens carry $(k+2)p$ numbers while a target is drawn). When even
        degree 1 has too many ($p_1 = d$ above the cap) the input dimension is named, else the
        degree; the message gives the memory of one prompt and the largest value that fits."""
        count = self.num_monomials
        if count <= MAX_MONOMIALS:
            return
        d, k, n = self.input_dim, self.degree, self.context_length
        per_prompt = format_bytes(4 * prompt_numbers(d, n, count, 0 if self.kind == "linear" else k))
        why = (f"the target would have p = {count:,} coefficients, more than the {MAX_MONOMIALS:,} "
               f"a task may have (they bound the memory of the prompts: {per_prompt} per prompt of "
               f"{n + 1} tokens here, in float32)")
        largest_dim = _largest_input_dim(k, self.homogeneous)
        if d > MAX_MONOMIALS:  # no degree helps: even p_1 = d is over the cap
            raise ConfigError("input_dim", d, f"an input dimension whose task fits in memory: {why}; "
                              f"the largest input_dim at degree {k} is {largest_dim:,}")
        largest = max(j for j in range(1, k) if _monomials(d, j, self.homogeneous) <= MAX_MONOMIALS)
        raise ConfigError("degree", k, f"a degree whose monomial count in d={d} is at most "
                          f"{MAX_MONOMIALS:,}: {why}; the largest degree at d={d} is {largest} "
                          f"(and the largest input_dim at degree {k} is {largest_dim:,})")

    @property
    def degrees(self) -> tuple[int, ...]:
        """The monomial degrees in the target: ``(k,)`` if homogeneous else ``(1, ..., k)``."""
        return (self.degree,) if self.homogeneous else tuple(range(1, self.degree + 1))

    @property
    def num_monomials(self) -> int:
        """How many coefficients a target has: $\\sum_j p_j$ over :attr:`degrees`."""
        return sum(monomial_count(self.input_dim, k) for k in self.degrees)

    @cached_property
    def target_features(self) -> PolyMap:
        r"""$\phi(x)$, the raw monomials the target is a random combination of."""
        return PolyMap.monomials(self.input_dim, self.degrees)

    @property
    def covariance_matrix(self) -> np.ndarray:
        """$\\Sigma$ as an array (the identity when none is given)."""
        if self.covariance is None:
            return np.eye(self.input_dim)
        return np.asarray(self.covariance, dtype=np.float64)

    def describe(self) -> str:
        if self.kind == "linear":
            text = f"linear, d={self.input_dim}, n={self.context_length}"
        else:
            kind = "homogeneous " if self.homogeneous else ""
            text = f"{kind}degree-{self.degree} polynomial, d={self.input_dim}, n={self.context_length}"
        if self.noise_std:
            text += f", noise sigma={self.noise_std:g}"
        return text


def prompt_numbers(input_dim: int, context_length: int, coefficients: int, degree: int,
                   feature_slots: int = 0) -> int:
    r"""Numbers one prompt holds while it is drawn and embedded (:func:`sample_prompts`,
    :func:`embed`): $T d + p + 2T$ (inputs, coefficients, labels and noise), $3 p T$ (the
    target's monomials: each product once, their stack, and its copy with the monomials last,
    :func:`~nlicl_lib.core.monomials.evaluate_monomials`; ``degree`` 0: linear, none) and $2 T D$ (the
    embedding and its zero slots), with $T = n + 1$, $D = d + m + 1$. Used by
    :mod:`nlicl_lib.core.planning`."""
    t = context_length + 1
    monomials = 3 * coefficients * t if degree else 0
    return t * input_dim + coefficients + 2 * t + monomials + 2 * t * (input_dim + feature_slots + 1)


def _monomials(input_dim: int, degree: int, homogeneous: bool) -> int:
    r"""A target's coefficient count: $p_k$ if homogeneous, else $\sum_{j \le k} p_j$."""
    degrees = (degree,) if homogeneous else range(1, degree + 1)
    return sum(monomial_count(input_dim, j) for j in degrees)


def _largest_input_dim(degree: int, homogeneous: bool) -> int:
    """The largest $d$ whose target at ``degree`` has at most :data:`MAX_MONOMIALS` coefficients
    (bisection: the count grows with $d$; $d = 1$ has at most ``degree`` of them)."""
    low, high = 1, MAX_MONOMIALS + 1
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if _monomials(middle, degree, homogeneous) <= MAX_MONOMIALS else (low, middle)
    return low


@dataclass
class Prompts:
    """A batch of prompts.

    ``x``: ``(batch, n + 1, d)`` inputs, the query last. ``y``: ``(batch, n + 1)`` labels; the
    context entries carry the label noise, the query entry (``y[:, -1]``) is the clean target.
    ``coefficients``: ``(batch, p)`` the drawn $w$ or $\\beta$.
    """

    x: torch.Tensor
    y: torch.Tensor
    coefficients: torch.Tensor

    @property
    def context_length(self) -> int:
        return self.x.shape[1] - 1

    @property
    def query_label(self) -> torch.Tensor:
        return self.y[:, -1]

    def embed(self, feature_slots: int = 0) -> torch.Tensor:
        """$Z_0$ with ``feature_slots`` zero rows between $x$ and $y$ (see the module doc)."""
        return embed(self.x, self.y, feature_slots)

    def to(self, dtype: torch.dtype) -> Prompts:
        return Prompts(self.x.to(dtype), self.y.to(dtype), self.coefficients.to(dtype))


def embed(x: torch.Tensor, y: torch.Tensor, feature_slots: int = 0) -> torch.Tensor:
    r"""$Z_0 = [x;\ 0_m;\ y]$ per token, the query's label set to 0.

    ``x``: ``(batch, n + 1, d)``; ``y``: ``(batch, n + 1)`` or ``(batch, n)`` (context only).
    Returns ``(batch, n + 1, d + m + 1)``.
    """
    feature_slots = check_int("feature_slots", feature_slots, minimum=0)
    batch, tokens, d = x.shape
    # one allocation filled by copies: half the time of zeros and a concatenation, same values
    z = x.new_empty(batch, tokens, d + feature_slots + 1)
    z[..., :d] = x
    z[..., d:] = 0.0
    z[:, : tokens - 1, -1] = y[:, : tokens - 1]
    return z


PART_SIZE = 1000
"""Prompts per independently seeded part of a batch. Part ``j`` of a batch draws its numbers
from ``(seed, stream, step, j)`` alone, so a batch is the same whatever number of threads fill
it, and a batch of at most ``PART_SIZE`` prompts is one part (seeded as ``(seed, stream, step)``)."""

_pool: tuple[int, ThreadPoolExecutor] | None = None


def labelling_prompts(batch_size: int, device: torch.device | str = "cpu") -> int:
    """The most prompts of a batch whose target monomials exist at once while
    :func:`sample_prompts` computes labels: one part per sampling thread on CPU, one part on
    another device (used by :mod:`nlicl_lib.core.planning`)."""
    workers = _sampling_workers() if torch.device(device).type == "cpu" else 1
    return min(batch_size, PART_SIZE * workers)


def _sampling_workers() -> int:
    """Threads that fill the parts of a batch on CPU: one per core. Independent of torch's
    intra-op threads, so a run that keeps torch single-threaded still samples on every core."""
    return os.cpu_count() or 1


def _run_parts(fill: Callable[[int], None], parts: int, device: torch.device) -> None:
    """Call ``fill(j)`` for every part: on CPU spread over :func:`_sampling_workers` threads
    (random number generation is single-threaded in torch, and it dominates a training step)."""
    workers = min(parts, _sampling_workers()) if device.type == "cpu" else 1
    if workers <= 1:
        for part in range(parts):
            fill(part)
        return
    global _pool
    if _pool is None or _pool[0] != os.getpid() or _pool[1]._max_workers < workers:
        _pool = (os.getpid(), ThreadPoolExecutor(max(workers, os.cpu_count() or 1)))

    def fill_every(first: int) -> None:
        for part in range(first, parts, workers):
            fill(part)

    list(_pool[1].map(fill_every, range(workers)))


def _with_covariance(task: TaskConfig, x: torch.Tensor) -> torch.Tensor:
    r"""Standard normal inputs ``x`` turned into inputs of covariance $\Sigma$ (``x L^T``)."""
    if task.covariance is None:
        return x
    chol = torch.linalg.cholesky(torch.as_tensor(task.covariance_matrix, dtype=torch.float64))
    return x @ chol.T.to(device=x.device, dtype=x.dtype)


def sample_inputs(task: TaskConfig, batch_size: int, seed: int, step: int,
                  device: torch.device | str = "cpu", stream: int = STREAM_TRAIN,
                  dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The inputs ``x`` of :func:`sample_prompts` with the same arguments, the very same
    numbers, ``(batch_size, n + 1, d)``, without drawing the task or computing labels (which
    at long contexts take most of the memory): for what needs only the inputs, such as the
    recursion of a GD-form stack with the task integrated out."""
    batch_size = check_int("batch_size", batch_size, minimum=1)
    device = torch.device(device)
    x = torch.empty(batch_size, task.context_length + 1, task.input_dim, device=device,
                    dtype=dtype)
    bounds = [(start, min(start + PART_SIZE, batch_size))
              for start in range(0, batch_size, PART_SIZE)]

    def fill(part: int) -> None:
        start, stop = bounds[part]
        gen = generator(seed, stream, step, device, part)
        torch.randn(stop - start, *x.shape[1:], generator=gen, out=x[start:stop])

    _run_parts(fill, len(bounds), device)
    return _with_covariance(task, x)


def sample_prompts(
    task: TaskConfig,
    batch_size: int,
    seed: int,
    step: int,
    device: torch.device | str = "cpu",
    stream: int = STREAM_TRAIN,
    dtype: torch.dtype = torch.float32,
) -> Prompts:
    """A batch of prompts that is a pure function of ``(task, batch_size, seed, stream, step)``.

    The numbers are drawn on ``device`` (so CPU and CUDA runs of one seed differ, each
    reproducible on its own), in parts of :data:`PART_SIZE` prompts with their own generators,
    filled in parallel on CPU; the result does not depend on the number of threads.
    """
    batch_size = check_int("batch_size", batch_size, minimum=1)
    device = torch.device(device)
    n, d = task.context_length, task.input_dim
    num_coefficients = d if task.kind == "linear" else task.target_features.num_outputs
    x = torch.empty(batch_size, n + 1, d, device=device, dtype=dtype)
    coefficients = torch.empty(batch_size, num_coefficients, device=device, dtype=dtype)
    noise = torch.empty(batch_size, n, device=device, dtype=dtype) if task.noise_std > 0 else None
    bounds = [(start, min(start + PART_SIZE, batch_size))
              for start in range(0, batch_size, PART_SIZE)]

    # the labels are computed in each part (in parallel), unless a covariance must transform x
    y = (torch.empty(batch_size, n + 1, device=device, dtype=dtype)
         if task.covariance is None else None)

    def fill(part: int) -> None:
        start, stop = bounds[part]
        gen = generator(seed, stream, step, device, part)
        torch.randn(stop - start, n + 1, d, generator=gen, out=x[start:stop])
        torch.randn(stop - start, num_coefficients, generator=gen, out=coefficients[start:stop])
        if noise is not None:
            torch.randn(stop - start, n, generator=gen, out=noise[start:stop])
        if y is not None:
            y[start:stop] = _labels(task, x[start:stop], coefficients[start:stop],
                                    None if noise is None else noise[start:stop])

    _run_parts(fill, len(bounds), device)
    if y is None:
        x = _with_covariance(task, x)
        y = _labels(task, x, coefficients, noise)
    return Prompts(x, y, coefficients)


def _labels(task: TaskConfig, x: torch.Tensor, coefficients: torch.Tensor,
            noise: torch.Tensor | None) -> torch.Tensor:
    r"""$y_i = w^\top x_i$ (linear) or $\beta^\top \phi(x_i)$ for every token, plus
    ``noise_std`` times ``noise`` on the context labels; the query's label stays clean."""
    n = x.shape[1] - 1
    if task.kind == "linear":
        y = torch.einsum("btd,bd->bt", x, coefficients)
    else:
        y = torch.einsum("btp,bp->bt", task.target_features(x), coefficients)
    if noise is not None:
        y = torch.cat([y[:, :n] + task.noise_std * noise, y[:, n:]], dim=1)
    return y
