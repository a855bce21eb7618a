"""nlicl_lib: the tested library behind the nlicl book.

Modules map onto the book's concepts: ``tasks`` (prompts), ``models`` (LSA, GLU, blocks),
``constructions`` (theory's weights), ``predictors`` (explicit GD, ridge, kernel methods),
``theory`` (exact closed forms), ``monomials`` (exact Gaussian moments), ``train``,
``evaluate``, ``experiment`` (all of it as one call), ``plots`` and ``display`` (figures).
"""

from .device import describe_device, resolve_device
from .errors import ConfigError, TrainingDivergedError
from .evaluate import LossEstimate, estimate_loss
from .experiment import (
    ModelConfig,
    build_model,
    default_train_config,
    run_experiment,
    theory_values,
)
from .seeding import seed_everything
from .tasks import Prompts, TaskConfig, embed, sample_prompts
from .train import TrainConfig, train

__all__ = [
    "ConfigError", "TrainingDivergedError", "LossEstimate", "ModelConfig", "Prompts",
    "TaskConfig", "TrainConfig", "build_model", "default_train_config", "describe_device",
    "embed", "estimate_loss", "resolve_device", "run_experiment", "sample_prompts",
    "seed_everything", "theory_values", "train",
]
__version__ = "0.1.0"
