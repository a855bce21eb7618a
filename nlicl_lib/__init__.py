"""nlicl_lib: the tested library behind the nlicl book.

A newcomer's map: five layers, each importing only from the layers above it in this list
(``tests/test_layering.py`` checks it on every import of the package).

- ``core``: tasks and prompts, models with their config and builder, monomials and their exact
  Gaussian moments, seeding, device, errors, progress bars, the book's labels.
- ``theory``: closed forms, constructions, predictors and baselines, capacity of one block,
  depth algebra and the greedy reference, feature analysis, linearity, the values theory gives.
- ``training``: the trainer of one model, the stacked trainers of many, the test-loss
  estimators, the one source of training settings.
- ``experiments``: one run end to end, sweeps, studies, tuned baselines, ``reproduce``, the CLI.
- ``book``: what the chapters call: figures, sliders over precomputed sweeps, live panels,
  exercises, static display.

The names below are the short path for a reader's first run.
"""

from nlicl_lib.core.book_refs import ref
from nlicl_lib.core.device import describe_device, resolve_device
from nlicl_lib.core.errors import ConfigError, TrainingDivergedError
from nlicl_lib.core.models import GLU, LSA, ModelConfig, build_model
from nlicl_lib.core.monomials import PolyMap
from nlicl_lib.core.seeding import seed_everything
from nlicl_lib.core.tasks import Prompts, TaskConfig, embed, sample_prompts
from nlicl_lib.experiments.run import run_experiment
from nlicl_lib.theory.constructions import gd_lsa, polynomial_kernel_gamma
from nlicl_lib.theory.values import theory_values
from nlicl_lib.training.evaluate import LossEstimate, test_loss
from nlicl_lib.training.settings import default_train_config
from nlicl_lib.training.train import TrainConfig, train

__all__ = [
    "ConfigError", "TrainingDivergedError", "LossEstimate", "LSA", "ModelConfig", "Prompts",
    "TaskConfig", "TrainConfig", "build_model", "default_train_config", "describe_device",
    "embed", "gd_lsa", "resolve_device", "run_experiment", "sample_prompts",
    "seed_everything", "test_loss", "theory_values", "train",
    "GLU", "PolyMap", "polynomial_kernel_gamma", "ref",
]
__version__ = "0.1.0"
