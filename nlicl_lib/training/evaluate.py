r"""Test loss on fresh prompts, with its Monte Carlo error.

One estimator, :func:`test_loss`: prompts come from the test stream of the seed (never seen in
training), either a fixed number of them, shared by every predictor compared, or batches added
until the standard error of the mean squared error is below ``relative_error`` of the mean
(default 1%), so every printed loss carries its own error bar.

**Integrating the task out** (``integrate="task"``). The targets are $y = \beta^\top\phi(x)$ with
$\beta \sim \mathcal N(0, I_p)$ (Definition 1 (def-prompts)), and a plain Monte Carlo mean of
$(\hat y - y_{n+1})^2$ is heavy-tailed. Many predictors are *linear in the context labels* at
fixed inputs, $\hat y = \sum_{i \le n} a_i(X)\, y_i$: every GD-form stack whose GLUs never read
the label (Theorem 13 (thm-depth-bcd)), GD and ridge on fixed features, kernel GD. For them
$\hat y = c(X)^\top\beta + a(X)^\top\epsilon$ with $c(X) = \sum_i a_i(X)\,\phi(x_i)$, so the
loss given the inputs $X = (x_1, \dots, x_{n+1})$ is exact,

$$\mathbb E_{\beta, \epsilon}\big[(\hat y - y_{n+1})^2 \mid X\big]
  = \|c(X) - \phi(x_{n+1})\|^2 + \sigma^2 \|a(X)\|^2 ,$$

and only $X$ is sampled (:func:`conditional_squared_errors`). $c(X)$ is read off the predictor
itself: its prediction when the context labels are $y_i = \phi_k(x_i)$ is $c_k(X)$, and when
they are $y_i = [i = j]$ it is $a_j(X)$. The predictor is first checked to be linear in the
labels (:func:`label_linearity_gap`). This removes the spread over $\beta$ only: for
$u = c(X) - \phi(x_{n+1})$ the plain sample is $(u^\top\beta)^2$, whose variance
$3\,\mathbb E\|u\|^4 - \mathcal L^2$ falls to $\mathbb E\|u\|^4 - \mathcal L^2$, at most a
factor 3; most of the spread comes from the inputs.

**Integrating the query out too** (``integrate="task+query"``, GD-form stacks only). By
Theorem 13 (thm-depth-bcd) a stack's prediction is $\hat y = \Psi(x_{n+1})^\top K(\text{context})
\,\beta$ (plus a noise term), with $\Psi = (\psi_1; \dots; \psi_L)$ its features, exact
polynomials of $x$. The query is independent of the context, so the loss given the context is
$\operatorname{tr}(K^\top T K) - 2\operatorname{tr}(K^\top C) + \operatorname{tr} S$ with the
exact moments $T = \mathbb E[\Psi\Psi^\top]$, $C = \mathbb E[\Psi\phi^\top]$,
$S = \mathbb E[\phi\phi^\top]$ (Lemma 3 (lem-gaussian-moments)), and only the $n$ context
inputs are sampled (:func:`nlicl_lib.theory.depth.context_conditional_loss`). Every estimate is an
unbiased mean of independent samples, with its standard error.

**Heavy tails** (``test_samples``). A loss with heavy tails (a few contexts carry much of the
mean) is underestimated, and its standard error with it, by a sample that has not met its
tail. With ``test_samples`` $= K \ge 2$ the test prompts are $K$ independent samples (disjoint
stretches of the test stream) and the estimate also carries the $K$ sample means
$\bar e_1, \dots, \bar e_K$: their median (a summary robust to one sample's tail) and the
standard error of the mean read off their spread, $s_K / \sqrt K$. Every interval of the book
is :data:`ERROR_BARS` standard errors either side of the mean, with the larger of the two
standard errors (:attr:`LossEstimate.interval`; :func:`combine_samples` joins estimates of
independent samples made elsewhere, such as chapter 5's references), and a sentence that
compares two losses holds only where their intervals separate (:func:`intervals_separate`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from nlicl_lib.core.errors import ConfigError, check_choice, check_float, check_int
from nlicl_lib.core.models import InContextRegressor
from nlicl_lib.core.seeding import STREAM_TEST
from nlicl_lib.core.tasks import Prompts, TaskConfig, sample_prompts
from nlicl_lib.theory.depth import context_conditional_loss

#: Largest relative violation of $\hat y(y + y') = \hat y(y) + \hat y(y')$ accepted as rounding
#: (float32) before :func:`conditional_squared_errors` refuses a predictor.
LINEARITY_TOLERANCE = 1e-3
ERROR_BARS = 2.0
"""Every interval of the book is this many standard errors either side of the mean."""


@dataclass(frozen=True)
class LossEstimate:
    r"""A test loss from :func:`test_loss`: ``mean`` $\pm$ ``std_error`` of the per-prompt
    samples $e$ over ``num_prompts`` test prompts; ``normalised`` $\pm$
    ``normalised_std_error``: its ratio to the zero predictor's loss $\frac1N\sum y_{n+1}^2$ on
    the *same* prompts (a paired ratio, far more precise than dividing by $\mathbb E[y^2]$; the
    error is the delta method's); ``worst``: the largest sample over that zero loss, and
    ``worst_share``: its share of the sum of all samples (near 0 for a light-tailed loss, near 1
    when one prompt carries the mean); ``integrated``: what was integrated out exactly rather
    than sampled (module doc): ``"none"``, ``"task"`` or ``"task+query"``; ``sample_means``:
    the means of the independent test samples it pools (empty for one sample; module doc)."""

    mean: float
    std_error: float
    num_prompts: int
    integrated: str = "none"
    normalised: float = math.nan
    normalised_std_error: float = math.nan
    worst: float = math.nan
    worst_share: float = math.nan
    sample_means: tuple[float, ...] = ()

    @property
    def relative_error(self) -> float:
        return self.std_error / self.mean if self.mean > 0 else 0.0

    @property
    def median(self) -> float:
        """The median of the sample means (the mean itself for one sample)."""
        return float(np.median(self.sample_means)) if self.sample_means else self.mean

    @property
    def between_std_error(self) -> float:
        r"""The standard error of the mean from the spread of the sample means, $s_K/\sqrt K$
        (``nan`` for fewer than two samples)."""
        k = len(self.sample_means)
        return float(np.std(self.sample_means, ddof=1) / math.sqrt(k)) if k >= 2 else math.nan

    @property
    def error(self) -> float:
        """The standard error intervals use: the larger of ``std_error`` (pooled over prompts)
        and :attr:`between_std_error` (over samples)."""
        between = self.between_std_error
        return self.std_error if math.isnan(between) else max(self.std_error, between)

    @property
    def interval(self) -> tuple[float, float]:
        r"""``mean`` $\pm$ :data:`ERROR_BARS` $\times$ :attr:`error`."""
        return self.mean - ERROR_BARS * self.error, self.mean + ERROR_BARS * self.error

    def scaled(self, factor: float) -> LossEstimate:
        r"""The same estimate with every loss divided by ``factor`` (e.g. $\mathbb E[y^2]$)."""
        return replace(self, mean=self.mean / factor, std_error=self.std_error / factor,
                       sample_means=tuple(v / factor for v in self.sample_means))

    def __str__(self) -> str:
        exact = "" if self.integrated == "none" else f", {self.integrated} integrated exactly"
        return (f"{self.mean:.5g} ± {self.std_error:.2g} (Monte Carlo error "
                f"{100 * self.relative_error:.2g}%, {self.num_prompts:,} prompts{exact})")


def combine_samples(estimates: Sequence[LossEstimate]) -> LossEstimate:
    r"""One estimate of a loss from estimates on independent test samples (module doc): the
    mean weighted by their prompt counts $N_k$, the pooled standard error
    $\sqrt{\sum_k N_k^2 \mathrm{se}_k^2} / N$, the sample means (each estimate's own, or its own
    sample means when it pools several), and the largest single prompt's share of the whole sum."""
    parts = list(estimates)
    if not parts:
        raise ConfigError("estimates", "[]", "at least one LossEstimate")
    if len({e.integrated for e in parts}) != 1:
        raise ConfigError("estimates", [e.integrated for e in parts], "one kind of integration")
    counts = np.array([e.num_prompts for e in parts], dtype=np.float64)
    total = counts.sum()
    means = np.array([e.mean for e in parts])
    sums = means * counts

    def pooled(values: list[float], errors: list[float]) -> tuple[float, float]:
        return (float(np.dot(counts, values) / total),
                float(np.sqrt(np.sum((counts * np.asarray(errors)) ** 2)) / total))

    mean, std_error = pooled(means.tolist(), [e.std_error for e in parts])
    normalised, normalised_error = pooled([e.normalised for e in parts],
                                          [e.normalised_std_error for e in parts])
    worst_sums = np.array([e.worst_share for e in parts]) * sums
    return LossEstimate(mean, std_error, int(total), parts[0].integrated, normalised,
                        normalised_error, float(max(e.worst for e in parts)),
                        float(worst_sums.max() / sums.sum()) if sums.sum() > 0 else 0.0,
                        tuple(v for e in parts for v in (e.sample_means or (e.mean,))))


def intervals_separate(a: LossEstimate, b: LossEstimate) -> bool:
    """Whether the intervals (:attr:`LossEstimate.interval`) of two losses do not overlap: the
    only case in which the book says one is below the other."""
    return a.interval[1] < b.interval[0] or b.interval[1] < a.interval[0]


def model_predictor(model: InContextRegressor) -> Callable[[Prompts], torch.Tensor]:
    """Wrap a model as a predictor on prompts (embedding with its own feature slots)."""
    def predict(prompts: Prompts) -> torch.Tensor:
        return model(prompts.embed(model.feature_slots))
    return predict


def _with_labels(prompts: Prompts, labels: torch.Tensor) -> Prompts:
    """The same inputs with context labels ``labels`` ``(B, n)`` (query label 0: never read)."""
    y = torch.cat([labels, labels.new_zeros(labels.shape[0], 1)], dim=1)
    return Prompts(prompts.x, y, prompts.coefficients)


@torch.no_grad()
def label_linearity_gap(predict: Callable[[Prompts], torch.Tensor], prompts: Prompts,
                        seed: int = 0) -> float:
    r"""$\max |\hat y(y + y') - \hat y(y) - \hat y(y')| / \max |\hat y(y + y')|$ at the inputs of
    ``prompts``, for two random label vectors $y, y'$ (standard normal, drawn from ``seed``):
    0 up to rounding for a predictor linear in the context labels."""
    n = prompts.context_length
    gen = torch.Generator(device="cpu").manual_seed(seed)
    first, second = (torch.randn(prompts.x.shape[0], n, generator=gen, dtype=torch.float64)
                     .to(device=prompts.x.device, dtype=prompts.x.dtype) for _ in range(2))
    both = predict(_with_labels(prompts, first + second)).double()
    apart = (predict(_with_labels(prompts, first)).double()
             + predict(_with_labels(prompts, second)).double())
    return float((both - apart).abs().max() / both.abs().max().clamp_min(1e-300))


@torch.no_grad()
def conditional_squared_errors(predict: Callable[[Prompts], torch.Tensor], prompts: Prompts,
                               task: TaskConfig, max_copies: int = 40000) -> torch.Tensor:
    r"""$\mathbb E_{\beta,\epsilon}[(\hat y - y_{n+1})^2 \mid X]$ for each prompt's inputs $X$
    (module doc), float64, shape ``(..., B)`` like ``predict``'s output (a leading axis of
    stacked models is kept). Exact for a predictor linear in the context labels; only the
    inputs of ``prompts`` are used (their labels and coefficients are ignored).

    The predictor runs on $\min(n, p)$ relabelled copies of every prompt ($p$ copies with labels
    $\phi_k(x_i)$, or $n$ with unit labels when $n < p$ or there is label noise), at most
    ``max_copies`` prompts at a time."""
    n = prompts.context_length
    phi = task.target_features(prompts.x)  # (B, n + 1, p)
    batch, p = phi.shape[0], phi.shape[-1]
    by_units = task.noise_std > 0 or n < p
    copies = n if by_units else p
    chunk = max(1, max_copies // copies)
    out = []
    for start in range(0, batch, chunk):
        x = prompts.x[start:start + chunk]
        b = x.shape[0]
        if by_units:  # labels e_j: the prediction is a_j(X)
            labels = torch.eye(n, dtype=x.dtype, device=x.device).expand(b, n, n)
        else:  # labels phi_k(x_i): the prediction is c_k(X)
            labels = phi[start:start + chunk, :n].transpose(1, 2)  # (b, p, n)
        relabelled = Prompts(x.repeat_interleave(copies, dim=0),
                             torch.cat([labels.reshape(b * copies, n),
                                        x.new_zeros(b * copies, 1)], dim=1),
                             x.new_zeros(b * copies, 1))
        response = predict(relabelled).double()
        response = response.reshape(*response.shape[:-1], b, copies)
        query = phi[start:start + chunk, n].double()  # (b, p)
        if by_units:
            c = torch.einsum("...bj,bjk->...bk", response, phi[start:start + chunk, :n].double())
            noise = task.noise_std**2 * (response**2).sum(-1)
        else:
            c, noise = response, 0.0
        out.append(((c - query) ** 2).sum(-1) + noise)
    return torch.cat(out, dim=-1)


def check_linear_in_labels(predict: Callable[[Prompts], torch.Tensor], prompts: Prompts,
                           tolerance: float = LINEARITY_TOLERANCE) -> float:
    """:func:`label_linearity_gap` on (up to) the first 64 prompts; raises
    :class:`~nlicl_lib.core.errors.ConfigError` when it exceeds ``tolerance``, since the task can then
    not be integrated out. Returns the gap."""
    head = Prompts(prompts.x[:64], prompts.y[:64], prompts.coefficients[:64])
    gap = label_linearity_gap(predict, head)
    if not gap <= tolerance:
        raise ConfigError("integrate", "task", "a predictor linear in the context labels "
                          "(GD-form attention, GLUs not reading the label); "
                          f"relative gap {gap:.2e}")
    return gap


INTEGRATIONS = ("none", "task", "task+query")


def squared_error_sampler(predict: Callable[[Prompts], torch.Tensor] | InContextRegressor,
                          task: TaskConfig, integrate: str = "none"
                          ) -> Callable[[Prompts], torch.Tensor]:
    r"""The per-prompt samples every test-loss estimate of the library averages (module doc):
    a function of a batch of prompts returning float64 values ``(..., B)`` whose mean is the
    test loss. ``integrate``: ``"none"``, $(\hat y - y_{n+1})^2$; ``"task"``, its exact mean over
    $\beta$ and the noise given the inputs (a predictor linear in the context labels, checked on
    the first batch); ``"task+query"``, its exact mean over $\beta$, the noise and the query given
    the context (``predict`` must be a GD-form stack, an
    :class:`~nlicl_lib.core.models.InContextRegressor`)."""
    check_choice("integrate", integrate, INTEGRATIONS)
    if integrate == "task+query":
        if not isinstance(predict, InContextRegressor):
            raise ConfigError("integrate", integrate, "'none' or 'task' for a predictor that is "
                              "not a GD-form stack (InContextRegressor)")
        return context_conditional_loss(predict, task)
    if isinstance(predict, InContextRegressor):
        predict = model_predictor(predict)
    if integrate == "none":
        return lambda prompts: (predict(prompts).double() - prompts.query_label.double()) ** 2
    checked = []

    def sample(prompts: Prompts) -> torch.Tensor:
        if not checked:
            checked.append(check_linear_in_labels(predict, prompts))
        return conditional_squared_errors(predict, prompts, task)
    return sample


def batches_of_test_prompts(task: TaskConfig, seed: int = 0, device: torch.device | str = "cpu",
                            dtype: torch.dtype = torch.float32, batch_size: int = 4000,
                            num_prompts: int | None = None) -> Iterator[Prompts]:
    """The test stream of ``seed`` (``STREAM_TEST``, never seen in training) in batches:
    batch $t$ is ``sample_prompts(task, size, seed, t, device, STREAM_TEST, dtype)``, so every
    caller with the same task, seed and batch size sees the same prompts. ``num_prompts``: stop
    after that many (the last batch smaller); ``None``: an endless stream of full batches."""
    batch_size = check_int("batch", batch_size, minimum=1)
    if num_prompts is not None:
        num_prompts = check_int("num_prompts", num_prompts, minimum=1)
    device = torch.device(device)
    drawn, step = 0, 0
    while num_prompts is None or drawn < num_prompts:
        size = batch_size if num_prompts is None else min(batch_size, num_prompts - drawn)
        yield sample_prompts(task, size, seed, step, device, STREAM_TEST, dtype)
        drawn += size
        step += 1


Predictor = Callable[[Prompts], torch.Tensor] | InContextRegressor

MIN_TEST_PROMPTS = 40_000
"""The fewest prompts :func:`test_loss` tests on when it stops at a precision (``min_prompts``),
so that the standard error it stops on is itself estimated from many prompts; the in-page
trainer tests on this many (:mod:`nlicl_lib.pages.in_page`)."""


@torch.no_grad()
def test_loss(predictors: Predictor | Sequence[Predictor], task: TaskConfig,
              num_prompts: int | None = None, *, relative_error: float | None = None,
              seed: int = 0, device: torch.device | str = "cpu", batch_size: int | None = None,
              dtype: torch.dtype | None = None, integrate: str = "none", min_prompts: int = MIN_TEST_PROMPTS,
              max_prompts: int = 2_000_000, return_samples: bool = False, test_samples: int = 1
              ) -> LossEstimate | list[LossEstimate] | tuple[list[LossEstimate], np.ndarray]:
    r"""The library's one test-loss estimator: the Monte Carlo test loss of one predictor (a
    model or a function of prompts), or of several on the *same* test prompts (paired), each a
    :class:`LossEstimate`.

    The prompts are the test stream of ``seed`` (:func:`batches_of_test_prompts`, never seen in
    training), in batches of ``batch_size`` (default 4000 for a fixed count, 20000 when it stops
    at a precision). Either ``num_prompts`` of them, or, with ``relative_error`` (the default,
    1%, when neither is given), batches until every predictor's standard error is at most that
    fraction of its mean (at least ``min_prompts``, at most about ``max_prompts``).

    The per-prompt samples $e$ are those of :func:`squared_error_sampler` (``integrate``: what
    is integrated out exactly; ``"task"`` costs $\min(n, p)$ predictions per prompt,
    ``"task+query"`` (GD-form stacks) less than one); the paired normaliser is $z =
    y_{n+1}^2$ of the same prompts. Over $N$ prompts: ``mean`` $= \bar e$, ``std_error`` $=
    \sqrt{(\overline{e^2} - \bar e^2)/N}$, ``normalised`` $= r = \bar e / \bar z$ with the
    delta method's error $\sqrt{(\overline{e^2} - 2r\,\overline{ez} + r^2\,\overline{z^2} -
    (\bar e - r\bar z)^2)/N} \,/\, \bar z$. ``dtype`` of the prompts: float64 for
    ``"task+query"``, else that of the first model, else float32. ``test_samples`` $= K \ge 2$
    (with ``num_prompts``): $K$ independent samples of ``num_prompts`` prompts each, one after
    another in the stream, each estimated alone and joined by :func:`combine_samples` (module
    doc: heavy tails). Returns one estimate for one predictor, a list for a list; with
    ``return_samples`` also the samples, ``(E, N)``."""
    check_choice("integrate", integrate, INTEGRATIONS)
    single = not isinstance(predictors, (list, tuple))
    listed = [predictors] if single else list(predictors)
    if not listed:
        raise ConfigError("predictors", predictors, "at least one model or predictor")
    if num_prompts is not None and relative_error is not None:
        raise ConfigError("num_prompts", num_prompts, "None when relative_error is given")
    if num_prompts is None:
        relative_error = check_float("relative_error", 0.01 if relative_error is None
                                     else relative_error, 0.0, strict_minimum=True)
        max_prompts = check_int("max_prompts", max_prompts, minimum=1)
    else:
        num_prompts = check_int("num_prompts", num_prompts, minimum=1)
    test_samples = check_int("test_samples", test_samples, minimum=1)
    if test_samples > 1 and num_prompts is None:
        raise ConfigError("test_samples", test_samples, "1 unless num_prompts (per sample) is given")
    batch_size = check_int("batch_size", batch_size or (4000 if relative_error is None else 20000),
                           minimum=1)
    if dtype is None or integrate == "task+query":
        first = listed[0]
        dtype = (torch.float64 if integrate == "task+query" else next(first.parameters()).dtype
                 if isinstance(first, InContextRegressor) else torch.float32)
    samplers = [squared_error_sampler(p, task, integrate) for p in listed]
    sums = np.zeros((len(listed), 5))  # per predictor: sums of e, z, e^2, z^2, e z
    worst = np.zeros(len(listed))
    kept, count = [], 0
    if test_samples > 1:
        return _independent_samples(samplers, task, seed, device, dtype, batch_size, num_prompts,
                                    test_samples, integrate, single, return_samples)
    for prompts in batches_of_test_prompts(task, seed, device, dtype, batch_size, num_prompts):
        e = torch.stack([sample(prompts) for sample in samplers])  # (E, b)
        z = prompts.query_label.double() ** 2
        for k, row in enumerate(e):
            sums[k] += np.array([float(v.sum()) for v in (row, z, row * row, z * z, row * z)])
            worst[k] = max(worst[k], float(row.max()))
        if return_samples:
            kept.append(e.cpu())
        count += e.shape[1]
        if relative_error is not None:
            mean, square = sums[:, 0] / count, sums[:, 2] / count
            error = np.sqrt(np.maximum(square - mean**2, 0.0) / count)
            if count >= max_prompts or (count >= min(min_prompts, max_prompts)
                                        and np.all(error <= relative_error * mean)):
                break
    losses = [_from_sums(sums[k], worst[k], count, integrate) for k in range(len(listed))]
    result = losses[0] if single else losses
    return (result, torch.cat(kept, dim=1).numpy()) if return_samples else result


def _from_sums(sums: np.ndarray, worst: float, count: int, integrate: str) -> LossEstimate:
    """A :class:`LossEstimate` from the sums of $e, z, e^2, z^2, ez$ over ``count`` prompts."""
    e_mean, z_mean, e2, z2, ez = sums / count
    ratio = e_mean / z_mean
    var_e = max(e2 - e_mean**2, 0.0)
    var_ratio = max(e2 - 2 * ratio * ez + ratio**2 * z2 - (e_mean - ratio * z_mean) ** 2, 0.0)
    return LossEstimate(float(e_mean), float(np.sqrt(var_e / count)), count, integrate,
                        float(ratio), float(np.sqrt(var_ratio / count) / z_mean),
                        float(worst / z_mean), float(worst / sums[0]) if sums[0] > 0 else 0.0)


def _independent_samples(samplers: list, task: TaskConfig, seed: int, device: torch.device | str, dtype: torch.dtype,
                         batch_size: int, per_sample: int, count: int, integrate: str,
                         single: bool, return_samples: bool
                         ) -> LossEstimate | list[LossEstimate] | tuple[list[LossEstimate], np.ndarray]:
    """:func:`test_loss` on ``count`` independent samples of ``per_sample`` prompts."""
    stream = batches_of_test_prompts(task, seed, device, dtype, batch_size, per_sample * count)
    es, zs = [], []
    for prompts in stream:
        es.append(torch.stack([sample(prompts) for sample in samplers]).cpu())
        zs.append(prompts.query_label.double().cpu() ** 2)
    e, z = torch.cat(es, dim=1).numpy(), torch.cat(zs).numpy()
    losses = []
    for row in e:
        parts = []
        for k in range(count):
            a, b = row[k * per_sample:(k + 1) * per_sample], z[k * per_sample:(k + 1) * per_sample]
            sums = np.array([a.sum(), b.sum(), (a * a).sum(), (b * b).sum(), (a * b).sum()])
            parts.append(_from_sums(sums, float(a.max()), per_sample, integrate))
        losses.append(combine_samples(parts))
    result = losses[0] if single else losses
    return (result, e) if return_samples else result


test_loss.__test__ = False  # a library function, not a test, where a test module imports it
