"""Every headline experiment of the book, runnable from one command.

``python -m nlicl_lib reproduce --all --json-dir results/`` runs each registered experiment,
writes one JSON per experiment and prints one table: experiment, trained loss, its reference
(an exact optimum, a lower bound or a Monte Carlo reference, each row says which), their ratio,
seconds and device. Losses in the table are normalised by $\\mathbb E[y^2]$ (the
zero predictor's loss) so rows of different tasks compare. The book's Results page shows the
same table. Chapters register their experiments here with :func:`register`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from html import escape
from pathlib import Path

from nlicl_lib.core.book_refs import ref
from nlicl_lib.core.device import DeviceLike, choose_threads, describe_device, resolve_device, use_threads
from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import ModelConfig
from nlicl_lib.core.progress import Progress
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.experiments.run import run_experiment
from nlicl_lib.theory.values import LOWER_BOUND
from nlicl_lib.training.settings import default_train_config


@dataclass(frozen=True)
class Experiment:
    """``run(device, seed, progress)`` returns a dict with at least ``trained_loss``,
    ``theory_loss``, ``theory_name`` and ``null_loss`` (unnormalised)."""

    name: str
    chapter: int
    description: str
    run: Callable[..., dict]


EXPERIMENTS: dict[str, Experiment] = {}

_PLANNING: ContextVar[bool] = ContextVar("reproduce_planning", default=False)
"""True inside :func:`experiment_settings`: an experiment stops before training and hands back
its settings."""


class _Planned(Exception):
    """Raised by :func:`_trained_vs_theory` while planning: carries the experiment's settings."""

    def __init__(self, settings: dict) -> None:
        super().__init__("planned")
        self.settings = settings


def register(name: str, chapter: int, description: str
             ) -> Callable[[Callable[..., dict]], Callable[..., dict]]:
    """Decorator adding an experiment to :data:`EXPERIMENTS`."""
    def decorate(function: Callable[..., dict]) -> Callable[..., dict]:
        EXPERIMENTS[name] = Experiment(name, chapter, description, function)
        return function
    return decorate


def _trained_vs_theory(task: TaskConfig, model: ModelConfig, device: DeviceLike, seed: int,
                       progress: bool | None,
                       reference: str = "theory", purpose: str = "default") -> dict:
    """Train with the library's settings for ``purpose`` and compare with ``theory_loss`` (or
    ``bound_loss``)."""
    train_config = default_train_config(task, model, purpose=purpose, seed=seed)
    if _PLANNING.get():
        raise _Planned({"task": asdict(task), "model": asdict(model), "train": asdict(train_config),
                        "reference": reference, "purpose": purpose})
    result = run_experiment(task, model, train_config, device, progress=progress)
    data = result.to_json()
    data["trained_loss"] = data["test_loss"]
    if reference == "bound":
        data["reference_loss"] = data["bound_loss"]
        data["reference_name"] = f"best linear predictor ({ref('cor-linear-bound')})"
        data["reference_kind"] = LOWER_BOUND
    else:
        data["reference_loss"] = data["theory_loss"]
        data["reference_name"] = data["theory_name"]
        data["reference_kind"] = data["theory_kind"]
    return data


@register("ch1-lsa-linear", 1, "1-layer LSA, linear regression, d=5, n=20")
def _ch1(device: DeviceLike, seed: int, progress: bool | None) -> dict:
    return _trained_vs_theory(TaskConfig(kind="linear", input_dim=5, context_length=20),
                              ModelConfig(kind="lsa"), device, seed, progress)


@register("ch2-lsa1-quadratic", 2, "1-layer LSA, pure quadratic task, d=3, n=20")
def _ch2_depth1(device: DeviceLike, seed: int, progress: bool | None) -> dict:
    return _trained_vs_theory(TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2,
                                         homogeneous=True),
                              ModelConfig(kind="lsa"), device, seed, progress, reference="bound")


@register("ch2-lsa3-quadratic", 2, "3-layer LSA, pure quadratic task, d=3, n=20")
def _ch2_depth3(device: DeviceLike, seed: int, progress: bool | None) -> dict:
    return _trained_vs_theory(TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2,
                                         homogeneous=True),
                              ModelConfig(kind="lsa", depth=3), device, seed, progress,
                              reference="bound")


@register("ch3-glu-lsa-quadratic", 3, "1 GLU-LSA block (m=h=p2=6), quadratic task, d=3, n=20")
def _ch3(device: DeviceLike, seed: int, progress: bool | None) -> dict:
    return _trained_vs_theory(TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2),
                              ModelConfig(kind="glu-lsa"),
                              device, seed, progress)


@register("ch4-glu-lsa-m3", 4, "1 GLU-LSA block with m=h=3 < p2 slots, quadratic task, d=3, n=20")
def _ch4(device: DeviceLike, seed: int, progress: bool | None) -> dict:
    # reference: the best 3-dimensional feature span for one block (exact; a lower bound)
    return _trained_vs_theory(TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2),
                              ModelConfig(kind="glu-lsa", feature_slots=3), device, seed, progress)


@register("ch5-depth3-m3", 5, "3 GLU-LSA blocks with m=h=3 slots (GLUs read x), quadratic task, d=3, n=100")
def _ch5_depth3(device: DeviceLike, seed: int, progress: bool | None) -> dict:
    # reference: the block-coordinate recursion of Theorem 13 (thm-depth-bcd) over the same slots,
    # at chapter 5's n = 100 (at n = 20 a fixed step overshoots on rare contexts: chapter 5),
    # trained as chapter 5's depth study trains it
    return _trained_vs_theory(TaskConfig(kind="poly", input_dim=3, context_length=100, degree=2),
                              ModelConfig(kind="glu-lsa", depth=3, feature_slots=3, glu_reads="x"),
                              device, seed, progress, purpose="depth-study")


@register("ch5-cubic-depth2", 5, "2 GLU-LSA blocks with m=h=10 slots, cubic task, d=3, n=20")
def _ch5_cubic(device: DeviceLike, seed: int, progress: bool | None) -> dict:
    # the second GLU multiplies x by stored quadratic slots; reference: the recursion
    return _trained_vs_theory(TaskConfig(kind="poly", input_dim=3, context_length=20, degree=3),
                              ModelConfig(kind="glu-lsa", depth=2, feature_slots=10), device, seed,
                              progress, purpose="cubic-stacks")


def experiment_settings(name: str, seed: int = 0) -> dict:
    """What experiment ``name`` trains with for ``seed`` (task, model and training configs as
    ``asdict``, its reference and purpose), found without training: its ``run`` stops where
    :func:`_trained_vs_theory` would start training."""
    if name not in EXPERIMENTS:
        raise ConfigError("experiment", name, "one of " + ", ".join(EXPERIMENTS))
    token = _PLANNING.set(True)
    try:
        EXPERIMENTS[name].run("cpu", seed, progress=False)
    except _Planned as planned:
        return planned.settings
    finally:
        _PLANNING.reset(token)
    raise ConfigError("experiment", name, "an experiment that trains through _trained_vs_theory")


@dataclass(frozen=True)
class Row:
    experiment: str
    chapter: int
    trained: float
    trained_error: float  # Monte Carlo standard error (0 when the loss is exact)
    reference: float | None
    reference_name: str | None
    seconds: float
    device: str
    reference_kind: str | None = None  # exact optimum, lower bound, Monte Carlo reference, ...

    @property
    def ratio(self) -> float | None:
        if self.reference is None or self.reference == 0:
            return None
        return self.trained / self.reference


def run_experiments(names: list[str] | None = None, device: DeviceLike = "auto", seed: int = 0,
                    json_dir: str | os.PathLike | None = None, progress: bool | None = None,
                    on_row: Callable[[Row], None] | None = None, threads: int | str = "auto"
                    ) -> list[Row]:
    """Run the named experiments (all when ``names`` is None), in chapter order, on torch's
    ``threads`` intra-op threads (:func:`~nlicl_lib.core.device.choose_threads`: ``"auto"`` is
    one for the book's small models; the count before is restored afterwards)."""
    selected = list(EXPERIMENTS) if not names else names
    unknown = [n for n in selected if n not in EXPERIMENTS]
    if unknown:
        raise ConfigError("experiment", unknown[0], "one of " + ", ".join(EXPERIMENTS))
    device = resolve_device(device)
    threads = choose_threads(threads)
    out = None
    if json_dir is not None:
        out = Path(json_dir)
        if out.exists() and not out.is_dir():
            raise ConfigError("json_dir", str(json_dir), "a folder (or a path to create one)")
        out.mkdir(parents=True, exist_ok=True)
    rows = []
    selected.sort(key=lambda n: (EXPERIMENTS[n].chapter, list(EXPERIMENTS).index(n)))
    with use_threads(threads), Progress(len(selected), progress, desc="experiments") as bar:
        for name in selected:
            experiment = EXPERIMENTS[name]
            start = time.perf_counter()
            data = experiment.run(device, seed, progress=False)
            seconds = time.perf_counter() - start
            null = data["null_loss"]
            reference = data.get("reference_loss")
            exact = data.get("test_loss_method") == "exact"
            error = 0.0 if exact else data.get("test_loss_std_error", 0.0) / null
            row = Row(name, experiment.chapter, data["trained_loss"] / null, error,
                      None if reference is None else reference / null,
                      data.get("reference_name"), seconds, describe_device(device),
                      data.get("reference_kind"))
            data.update({"experiment": name, "chapter": experiment.chapter,
                         "description": experiment.description, "seconds": seconds})
            if out is not None:
                tmp = out / f".{name}.json.tmp"
                tmp.write_text(json.dumps(data, indent=2) + "\n")
                os.replace(tmp, out / f"{name}.json")
            rows.append(row)
            if on_row is not None:
                on_row(row)
            bar.update(1)
    return rows


def format_table(rows: list[Row]) -> str:
    """A plain-text table; losses are normalised by E[y^2]."""
    header = (f"{'experiment':<26} {'trained':>18} {'reference':>9} {'ratio':>7} {'seconds':>8}  "
              f"reference kind")
    lines = [header, "-" * len(header)]
    for row in rows:
        reference = "-" if row.reference is None else f"{row.reference:.4f}"
        ratio = "-" if row.ratio is None else f"{row.ratio:.4f}"
        trained = f"{row.trained:.4f} " + (f"+- {row.trained_error:.4f}" if row.trained_error
                                            else "(exact)")
        lines.append(f"{row.experiment:<26} {trained:>18} {reference:>9} {ratio:>7} "
                     f"{row.seconds:>8.1f}  {row.reference_kind or '-'}")
    devices = sorted({row.device for row in rows})
    lines.append(f"losses normalised by E[y^2] (+- Monte Carlo standard error), on {', '.join(devices)}; "
                 f"{REFERENCE_KINDS}")
    lines.extend(f"  {r.experiment}: {r.reference_name}" for r in rows if r.reference_name)
    return "\n".join(lines)


REFERENCE_KINDS = ("ratio = trained / reference. Against an exact optimum or a lower bound a ratio "
                   "below 1 is impossible beyond the Monte Carlo error; against a Monte Carlo "
                   "reference (a constructed predictor, not a bound) it is allowed.")


def table_html(rows: list[Row]) -> str:
    """The table of :func:`format_table` as accessible HTML (for the book's Results page): five
    columns, the reference's value with its kind; the reference's full name is in each cell's
    ``title`` and in the list the page prints under the table."""
    head = ("<thead><tr>" + "".join(f'<th scope="col">{escape(h)}</th>' for h in (
        "experiment", "trained loss", "reference (kind)", "ratio", "seconds")) + "</tr></thead>")
    body = []
    for row in rows:
        reference = ("–" if row.reference is None else
                     f"{row.reference:.4f} ({escape(row.reference_kind or 'reference')})")
        ratio = "–" if row.ratio is None else f"{row.ratio:.4f}"
        cells = [f'<th scope="row"><code>{escape(row.experiment)}</code></th>',
                 f"<td>{row.trained:.4f} " + (f"± {row.trained_error:.4f}" if row.trained_error
                                              else "(exact)") + "</td>",
                 f'<td title="{escape(row.reference_name or "")}">{reference}</td>',
                 f"<td>{ratio}</td>", f"<td>{row.seconds:.1f}</td>"]
        body.append("<tr>" + "".join(cells) + "</tr>")
    devices = ", ".join(sorted({escape(row.device) for row in rows}))
    caption = ("<caption>Losses normalised by E[y²], the zero predictor's loss, with their Monte "
               f"Carlo standard error (or exact), on {devices}. {escape(REFERENCE_KINDS)}</caption>")
    return ('<div class="nlicl-table-wrap" role="region" tabindex="0" aria-label="Results">'
            f'<table class="nlicl-results">{caption}{head}<tbody>{"".join(body)}</tbody>'
            "</table></div>")


def experiment_list_html(rows: list[Row]) -> str:
    """Each experiment's description (task, model, $d$, $n$) and its reference's full name and
    kind, as an HTML description list (for the Results page, under :func:`table_html`)."""
    items = []
    for row in rows:
        experiment = EXPERIMENTS[row.experiment]
        reference = ("no reference" if row.reference_name is None else
                     f"reference: {escape(row.reference_name)} ({escape(row.reference_kind or '')})")
        items.append(f"<dt><strong>{escape(row.experiment)}</strong> (chapter {experiment.chapter})</dt>"
                     f"<dd>{escape(experiment.description)}; {reference}.</dd>")
    return f'<dl class="nlicl-experiments">{"".join(items)}</dl>'
