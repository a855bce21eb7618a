"""Command line: ``python -m nlicl_lib train|theory|reproduce ...``.

Every bad value is reported as ``error: <--flag>=<value> is not allowed: <what is>`` with exit
status 2, before any training starts and without writing the ``--json`` file: the library's
:class:`~nlicl_lib.core.errors.ConfigError` names its parameter by field name, and :data:`FLAGS`
respells it as the flag. A run whose estimated memory (:mod:`nlicl_lib.core.planning`) is above
what the device has free is refused the same way, naming the size to shrink and the largest
value that fits.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

from nlicl_lib.core.book_refs import ref
from nlicl_lib.core.device import choose_threads, describe_device, resolve_device, use_threads
from nlicl_lib.core.errors import ConfigError, TrainingDivergedError, check_float
from nlicl_lib.core.models import ModelConfig
from nlicl_lib.core.planning import EVAL_BATCH, check_fits
from nlicl_lib.core.progress import progress_enabled
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.experiments import reproduce, stored_results
from nlicl_lib.experiments.run import run_experiment
from nlicl_lib.theory.values import theory_values
from nlicl_lib.training.settings import default_train_config
from nlicl_lib.training.train import TrainConfig

CONTEXT_LENGTH = 20
# Deep GLU-LSA stacks: at n = 20 a depth-8 stack's mean test loss is set by rare contexts with
# unusually large empirical moments, where its fixed steps overshoot (measured in chapter 5: the
# greedy reference's largest test context carries 97% of its loss at depth 8); at n = 100 the
# empirical moments concentrate and depth keeps helping.
DEEP_CONTEXT_LENGTH = 100
DEEP_FROM = 3
INPUT_DIM = 5

FLAGS = {
    # field names (TaskConfig, ModelConfig, TrainConfig, planning) and the library's short names
    "input_dim": "--d", "d": "--d", "context_length": "--n", "n": "--n", "degree": "--degree",
    "noise_std": "--noise", "noise": "--noise", "task": "--task", "model": "--model",
    "depth": "--depth", "feature_slots": "--slots", "slots": "--slots", "glu_width": "--width",
    "width": "--width", "attention": "--attention", "activation": "--activation",
    "glu_reads": "--glu-reads", "glu_init": "--glu-init", "steps": "--steps",
    "batch_size": "--batch", "batch": "--batch", "learning_rate": "--lr", "lr": "--lr",
    "seed": "--seed", "device": "--device", "json": "--json", "json_dir": "--json-dir",
    "threads": "--threads", "relative_error": "--test-error",
}
"""How the command line spells each parameter a :class:`ConfigError` may name."""


def _task_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("task")
    group.add_argument("--task", default="linear", help="linear or poly (default: linear)")
    group.add_argument("--d", type=int, default=INPUT_DIM, help=f"input dimension d (default: {INPUT_DIM})")
    group.add_argument("--n", type=int, default=None,
                       help=f"context length n (default: {CONTEXT_LENGTH}; {DEEP_CONTEXT_LENGTH} for "
                            f"GLU-LSA stacks of {DEEP_FROM} or more blocks, whose test loss at "
                            f"n = {CONTEXT_LENGTH} rests on rare contexts where their fixed "
                            "steps overshoot: chapter 5)")
    group.add_argument("--degree", type=int, default=None,
                       help="polynomial degree k for --task poly (default: 2)")
    group.add_argument("--homogeneous", action="store_true",
                       help="only monomials of degree exactly k")
    group.add_argument("--noise", type=float, default=0.0,
                       help="label noise standard deviation sigma on context labels (default: 0)")


def _model_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("model")
    group.add_argument("--model", default="lsa", help="lsa or glu-lsa (default: lsa)")
    group.add_argument("--depth", type=int, default=1, help="number of blocks L (default: 1)")
    group.add_argument("--slots", type=int, default=None,
                       help="feature slots m (default: 0 for lsa, p_2 for glu-lsa)")
    group.add_argument("--width", type=int, default=None, help="GLU width h (default: m)")
    group.add_argument("--attention", default=None, help="full or sparse (default by model)")
    group.add_argument("--activation", default="none", help="none, silu or gelu on one branch")
    group.add_argument("--glu-reads", default=None,
                       help="what the GLUs read: x, x+slots or all (default: x; x+slots for "
                            "deeper stacks on polynomial tasks of degree 3 or more)")
    group.add_argument("--glu-init", default=None,
                       help="GLU initialisation: normal, small or large (default: large for one block "
                            "reading x, which keeps every feature direction alive in nearly every "
                            "seed (ch. 3); normal for deeper stacks, whose slot-reading weights "
                            "start at zero)")


def _context_length(args: argparse.Namespace) -> int:
    if args.n is not None:
        return args.n
    deep = args.model == "glu-lsa" and isinstance(args.depth, int) and args.depth >= DEEP_FROM
    return DEEP_CONTEXT_LENGTH if deep else CONTEXT_LENGTH


def _make_task(args: argparse.Namespace) -> TaskConfig:
    degree = args.degree if args.degree is not None else (2 if args.task == "poly" else 1)
    return TaskConfig(kind=args.task, input_dim=args.d, context_length=_context_length(args), degree=degree,
                      homogeneous=args.homogeneous,
                      noise_std=args.noise)


def _make_model(args: argparse.Namespace) -> ModelConfig:
    if args.model == "lsa" and args.width is not None:
        raise ConfigError("width", args.width, "no --width for --model lsa")
    if args.model == "lsa" and args.glu_reads is not None:
        raise ConfigError("glu_reads", args.glu_reads, "no --glu-reads for --model lsa")
    return ModelConfig(kind=args.model, depth=args.depth, feature_slots=args.slots, glu_width=args.width,
                       attention=args.attention,
                       glu_reads=args.glu_reads, activation=args.activation,
                       glu_init=args.glu_init)


def _check_output(path: str | None) -> Path | None:
    if path is None:
        return None
    out = Path(path)
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise ConfigError("json", path, "a file in an existing folder")
    return out


def _write_json(path: Path | None, data: dict) -> None:
    if path is None:
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)  # all or nothing: no half-written output


def _sizes_given(args: argparse.Namespace) -> list[str]:
    """The sizes (field names) the command line sets away from their defaults: a run that does
    not fit is blamed on one of them first."""
    defaults = {"n": None, "batch": None, "width": None, "slots": None, "depth": 1, "d": INPUT_DIM}
    fields = {"n": "context_length", "batch": "batch_size", "width": "glu_width",
              "slots": "feature_slots", "depth": "depth", "d": "input_dim"}
    return [fields[name] for name, default in defaults.items() if getattr(args, name) != default]


def _deep(args: argparse.Namespace) -> bool:
    return args.model == "glu-lsa" and isinstance(args.depth, int) and args.depth >= DEEP_FROM


def _purpose(args: argparse.Namespace) -> str:
    """``"cli-deep-stacks"`` (fewer, smaller steps: within a minute on two cores) for GLU-LSA
    stacks of :data:`DEEP_FROM` or more blocks at the default context of
    :data:`DEEP_CONTEXT_LENGTH`; ``"default"`` otherwise. ``--steps`` and ``--batch`` override
    either (chapter 5's study trains 1000 steps of 1000 prompts: ``--steps 1000 --batch 1000``)."""
    return "cli-deep-stacks" if _deep(args) and _context_length(args) >= DEEP_CONTEXT_LENGTH \
        else "default"


def plan_train(args: argparse.Namespace) -> tuple[TaskConfig, ModelConfig, TrainConfig]:
    """The ``(task, model_config, train_config)`` that ``train`` with these parsed arguments
    would run, built and checked (bad values raise :class:`ConfigError`) without building,
    sampling or training anything."""
    task = _make_task(args)
    model = _make_model(args)
    train_config = default_train_config(task, model, purpose=_purpose(args), steps=args.steps,
                                        batch_size=args.batch, learning_rate=args.lr,
                                        seed=args.seed)
    return task, model, train_config


TEST_ERROR = 0.01
"""The Monte Carlo test loss's relative standard error the CLI estimates to (``--test-error``)."""
DEEP_TEST_ERROR = 0.05
"""The same for deep GLU-LSA stacks at n = 100 (as the live panels): their test loss has a
heavy tail, and 1% took up to the estimator's 2,000,000 prompts, minutes at depth 8."""
DEEP_TEST_PROMPTS = 100_000
"""At most this many test prompts for those deep stacks (``--test-error`` given: the
estimator's 2,000,000): at depth 8 even 5% was not reached in 2,000,000 prompts (over 3
minutes, idle); the CLI prints a note with the error reached."""


def test_error(args: argparse.Namespace) -> float:
    """``--test-error``, else :data:`DEEP_TEST_ERROR` for the ``cli-deep-stacks`` runs and
    :data:`TEST_ERROR` for the others."""
    if args.test_error is not None:
        return check_float("relative_error", args.test_error, 0.0, strict_minimum=True)
    return DEEP_TEST_ERROR if _purpose(args) == "cli-deep-stacks" else TEST_ERROR


def max_test_prompts(args: argparse.Namespace) -> int:
    """:data:`DEEP_TEST_PROMPTS` for the ``cli-deep-stacks`` runs without ``--test-error``,
    else the estimator's 2,000,000."""
    deep = args.test_error is None and _purpose(args) == "cli-deep-stacks"
    return DEEP_TEST_PROMPTS if deep else 2_000_000


def token_dim(task: TaskConfig, model: ModelConfig) -> int:
    """$D = d + m + 1$, the dimension of a prompt's tokens."""
    return task.input_dim + model.resolved(task).feature_slots + 1


TRAIN_SECONDS_BUDGET = 40.0
"""Training seconds a command a reader is told to type may plan at
:data:`~nlicl_lib.core.planning.SECONDS_PER_WORK_UNIT` (:func:`~nlicl_lib.core.planning.work_units`):
the rest of its minute goes to start-up (about 2 s), the theory value (a Monte Carlo greedy
reference for deep stacks) and the test loss (about 10 s of CPU for a depth-4 stack at n = 100,
measured with 10 training steps)."""


def cmd_train(args: argparse.Namespace) -> int:
    task, model, train_config = plan_train(args)
    relative_error = test_error(args)
    device = resolve_device(args.device)
    threads = choose_threads(_threads_value(args.threads), token_dim(task, model),
                             max(train_config.batch_size, EVAL_BATCH))
    out = _check_output(args.json)
    # before anything is built or sampled: a run that cannot fit fails here, in microseconds
    check_fits(task, model, train_config.batch_size, device, eval_batch_size=EVAL_BATCH,
               prefer=_sizes_given(args))
    with use_threads(threads):
        if progress_enabled(args.progress):
            # above the bar (elapsed < time left): what runs, and that the test loss follows it
            print(f"training {train_config.steps} steps of {train_config.batch_size} prompts on "
                  f"{describe_device(device)}, then the test loss", file=sys.stderr)
        result = run_experiment(task, model, train_config, device, progress=args.progress,
                                eval_batch_size=EVAL_BATCH, relative_error=relative_error,
                                max_test_prompts=max_test_prompts(args))
    data = result.to_json()
    print(f"task:        {task.describe()}")
    print(f"model:       {model.kind}, depth {model.depth}"
          + (f", slots m={result.model_config.resolved(task).feature_slots}"
             if model.kind != "lsa" else ""))
    print(f"trained:     {result.training.steps} steps in {result.training.seconds:.1f} s on "
          f"{result.device}")
    print(f"test loss:   {data['test_loss']:.5g} ({data['test_loss_method']}; Monte Carlo "
          f"{result.test})")
    print(f"null loss:   {data['null_loss']:.5g}  (zero predictor, E[y^2]); normalised test "
          f"loss {data['normalised_test_loss']:.4f}")
    test = result.test
    if data["test_loss_method"] != "exact" and test.relative_error > 0.02:
        # the estimate stopped at its prompt budget before reaching 1%: a heavy tail
        print(f"note:        the Monte Carlo error is still {100 * test.relative_error:.2g}% after "
              f"{test.num_prompts:,} prompts: a few rare prompts carry much of this loss"
              + ("; a deep stack's fixed steps overshoot on contexts with unusually large "
                 "empirical moments (chapter 5)"
                 + (f", which a longer context (e.g. --n {DEEP_CONTEXT_LENGTH}) makes rarer"
                    if task.context_length < DEEP_CONTEXT_LENGTH else "")
                 if model.kind == "glu-lsa" and model.depth > 1 else ""))
    if data["theory_loss"] is not None:
        print(f"theory:      {data['theory_loss']:.5g}  ({data['theory_name']}; "
              f"{data['theory_kind']}); ratio {data['ratio_to_theory']:.4f}")
    if data["bound_loss"] is not None:
        print(f"linear:      {data['bound_loss']:.5g}  (best linear predictor, "
              f"{ref('cor-linear-bound')}: a lower bound for attention-only models of any depth)")
    _write_json(out, data)
    if out is not None:
        print(f"wrote {out}")
    return 0


def cmd_theory(args: argparse.Namespace) -> int:
    task = _make_task(args)
    model = _make_model(args)
    out = _check_output(args.json)
    values = theory_values(task, model)
    data = {
        "theory_loss": values.theory_loss,
        "theory_name": values.theory_name,
        "theory_kind": values.theory_kind,
        "bound_loss": values.bound_loss,
        "null_loss": values.null_loss,
        "config": {"task": asdict(task), "model": asdict(model.resolved(task))},
    }
    print(f"task:   {task.describe()}; model {model.kind}, depth {model.depth}")
    print(f"null loss (E[y^2]):  {values.null_loss:.6g}")
    if values.theory_loss is not None:
        print(f"theory loss:         {values.theory_loss:.6g}  ({values.theory_name}; "
              f"{values.theory_kind}); normalised {values.theory_loss / values.null_loss:.4f}")
    else:
        print("theory loss:         none (no closed form for this model class)")
    if values.bound_loss is not None:
        print(f"best linear predictor: {values.bound_loss:.6g}  (a bound for LSA of any depth, "
              f"{ref('cor-linear-bound')}; normalised {values.bound_loss / values.null_loss:.4f})")
    _write_json(out, data)
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:

    if args.list:
        for experiment in reproduce.EXPERIMENTS.values():
            print(f"{experiment.name:<26} chapter {experiment.chapter}: {experiment.description}")
        return 0
    if not args.all and not args.only:
        raise ConfigError("experiments", None, "--all or --only NAME [NAME ...] (see --list)")
    run = stored_results.run_and_store if args.store else reproduce.run_experiments
    rows = run(None if args.all else args.only, args.device, args.seed, args.json_dir,
               args.progress, threads=_threads_value(args.threads))
    print(reproduce.format_table(rows))
    if args.json_dir:
        print(f"wrote {len(rows)} JSON files to {args.json_dir}")
    if args.store:
        print(f"wrote {stored_results.STORE_FILE} (the Results page's table)")
    return 0


def _threads_value(text: str) -> int | str:
    """``--threads``: ``auto`` or a number (checked by :func:`choose_threads`, which names the
    flag in its error)."""
    try:
        return int(text)
    except ValueError:
        return text


THREADS_HELP = ("torch's intra-op threads: auto (default: 1 for the book's small models, "
                "whose layers are too small for more) or a number")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nlicl_lib",
                                     description="Train and check in-context regressors.")
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="train a model and compare it with theory")
    _task_args(train)
    _model_args(train)
    group = train.add_argument_group("training")
    group.add_argument("--steps", type=int, default=None,
                       help="training steps (default: the library's settings for the model; "
                            f"400 for GLU-LSA stacks of {DEEP_FROM} or more blocks at "
                            f"n = {DEEP_CONTEXT_LENGTH}, within a minute on two cores: chapter "
                            "5's study trains them --steps 1000 --batch 1000)")
    group.add_argument("--batch", type=int, default=None,
                       help="prompts per step (default: the library's settings; 400 for deep "
                            "GLU-LSA stacks)")
    group.add_argument("--lr", type=float, default=None, help="peak Adam learning rate")
    group.add_argument("--seed", type=int, default=0, help="seed (default: 0)")
    group.add_argument("--device", default="auto", help="auto, cpu, cuda or mps (default: auto)")
    group.add_argument("--test-error", type=float, default=None,
                       help=f"relative standard error of the Monte Carlo test loss (default: "
                            f"{TEST_ERROR}; {DEEP_TEST_ERROR} for deep GLU-LSA stacks, whose "
                            "heavy-tailed loss takes minutes to pin to 1%%)")
    group.add_argument("--threads", default="auto", help=THREADS_HELP)
    group.add_argument("--json", default=None, help="write the results to this JSON file")
    group.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="show a progress bar with the time left (default: when "
                            "interactive)")
    train.set_defaults(func=cmd_train)
    theory = commands.add_parser("theory", help="print the theory values without training")
    _task_args(theory)
    _model_args(theory)
    theory.add_argument("--json", default=None, help="write the values to this JSON file")
    theory.set_defaults(func=cmd_theory)
    reproduce = commands.add_parser("reproduce", help="run every experiment of the book")
    reproduce.add_argument("--all", action="store_true", help="run every experiment")
    reproduce.add_argument("--only", nargs="+", default=None, help="run these experiments")
    reproduce.add_argument("--list", action="store_true", help="list the experiments and stop")
    reproduce.add_argument("--json-dir", default=None, help="write one JSON per experiment here")
    reproduce.add_argument("--store", action="store_true",
                           help="also write the rows the book's Results page shows (with --all)")
    reproduce.add_argument("--seed", type=int, default=0, help="seed (default: 0)")
    reproduce.add_argument("--device", default="auto", help="auto, cpu, cuda or mps")
    reproduce.add_argument("--threads", default="auto", help=THREADS_HELP)
    reproduce.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                           help="show a progress bar (default: when interactive)")
    reproduce.set_defaults(func=cmd_reproduce)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as error:
        print(f"error: {error.spelled(FLAGS)}", file=sys.stderr)
        return 2
    except TrainingDivergedError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
