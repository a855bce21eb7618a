"""The library's layers: core <- theory <- training <- experiments <- pages.

Walks the syntax tree of every module of ``nlicl_lib`` and fails on an import of the library
that points up a layer, and on any import of the library inside a function or class body (the
way a cycle is usually dodged). Third-party imports inside functions are allowed only where the
package is optional (``psutil``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[1] / "nlicl_lib"
LAYERS = ("core", "theory", "training", "experiments", "pages")
OPTIONAL = {"psutil"}


def _modules() -> list[Path]:
    return sorted(p for p in LIB.rglob("*.py"))


def _layer(path: Path) -> str | None:
    """The layer a file belongs to (``None`` for the package's root files)."""
    parts = path.relative_to(LIB).parts
    return parts[0] if len(parts) > 1 else None


def _targets(node: ast.AST, path: Path) -> list[str]:
    """The ``nlicl_lib`` modules an import statement names, as dotted paths below the package."""
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = list(path.relative_to(LIB).parts[:-1])
            base = base[: len(base) - (node.level - 1)]
            module = ".".join(base + ([node.module] if node.module else []))
        elif node.module and node.module.split(".")[0] == "nlicl_lib":
            module = node.module.partition(".")[2]
        else:
            return []
        if module in ("", *LAYERS):  # ``from nlicl_lib.theory import depth``
            return [f"{module}.{a.name}".lstrip(".") for a in node.names]
        return [module]
    if isinstance(node, ast.Import):
        return [a.name.partition(".")[2] for a in node.names if a.name.split(".")[0] == "nlicl_lib"]
    return []


def _violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    rel = path.relative_to(LIB.parent)
    layer = _layer(path)
    found = []
    top_level = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        targets = _targets(node, path)
        nested = id(node) not in top_level
        if nested and isinstance(node, ast.Import) and not targets:
            names = {a.name.split(".")[0] for a in node.names}
            if names - OPTIONAL:
                found.append(f"{rel}:{node.lineno}: import of {sorted(names)} inside a function")
        if nested and isinstance(node, ast.ImportFrom) and not targets and node.module:
            if node.module.split(".")[0] not in OPTIONAL:
                found.append(f"{rel}:{node.lineno}: import from {node.module} inside a function")
        for target in targets:
            if nested:
                found.append(f"{rel}:{node.lineno}: import of nlicl_lib.{target} inside a function")
            target_layer = target.split(".")[0]
            if target_layer not in LAYERS:
                found.append(f"{rel}:{node.lineno}: nlicl_lib.{target} is in no layer")
            elif layer is not None and LAYERS.index(target_layer) > LAYERS.index(layer):
                found.append(f"{rel}:{node.lineno}: {layer} imports nlicl_lib.{target} "
                             f"({target_layer} is above {layer})")
    return found


def test_every_module_is_in_a_layer():
    stray = [p.relative_to(LIB) for p in _modules() if _layer(p) is None
             and p.name not in ("__init__.py", "__main__.py")]
    assert not stray, f"modules outside the layers {LAYERS}: {stray}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(LIB)))
def test_imports_point_down(path):
    assert not _violations(path), "\n".join(_violations(path))


def test_the_checker_catches_an_upward_and_a_nested_import(tmp_path, monkeypatch):
    """The walk itself: a fake ``core`` module importing ``training`` at the top and
    ``experiments`` inside a function gives both violations."""
    fake = tmp_path / "nlicl_lib"
    (fake / "core").mkdir(parents=True)
    bad = fake / "core" / "bad.py"
    bad.write_text("from nlicl_lib.training.train import train\n"
                   "def f():\n    from ..experiments import run\n    import os\n")
    monkeypatch.setattr(__import__(__name__), "LIB", fake)
    found = _violations(bad)
    assert any("core imports nlicl_lib.training.train" in v for v in found), found
    assert any("nlicl_lib.experiments.run inside a function" in v for v in found), found
    assert any("['os'] inside a function" in v for v in found), found


#: Every public function and class of ``nlicl_lib/training/``, with its role: one trainer
#: (``train``), one test-loss estimator (``test_loss``), one source of settings; the rest are
#: their parts. A new public callable fails the test below until it is listed here, so a second
#: trainer or estimator cannot arrive unnoticed.
TRAINING_API = {
    "train": {"train": "the trainer", "TrainConfig": "its settings", "TrainResult": "its record",
              "architecture": "what trains in one pass", "clip_per_member": "its clipping",
              "find_forward_overflow": "why a run diverged", "diagnose_divergence": "its error",
              "StreamOverflow": "where a forward pass overflows"},
    "evaluate": {"test_loss": "the estimator", "LossEstimate": "its result",
                 "batches_of_test_prompts": "its prompts",
                 "squared_error_sampler": "its per-prompt samples",
                 "conditional_squared_errors": "a sample with the task integrated out",
                 "label_linearity_gap": "the check that allows it",
                 "check_linear_in_labels": "the same check, raising",
                 "model_predictor": "a model as a function of prompts",
                 "combine_samples": "its estimates of independent samples joined",
                 "intervals_separate": "the one rule for comparing two losses"},
    "settings": {"default_train_config": "the one source of settings",
                 "base_settings": "a panel's starting values"},
}


def test_training_has_one_trainer_and_one_estimator():
    import importlib
    import inspect

    package = LIB / "training"
    modules = sorted(p.stem for p in package.glob("*.py") if p.stem != "__init__")
    assert modules == sorted(TRAINING_API)
    for name in modules:
        module = importlib.import_module(f"nlicl_lib.training.{name}")
        public = {key for key, value in vars(module).items()
                  if not key.startswith("_") and (inspect.isfunction(value) or inspect.isclass(value))
                  and value.__module__ == module.__name__}
        assert public == set(TRAINING_API[name]), name
