"""Prompt sampling in seeded parts (the speed-up of bench/train_step.py) keeps batches a pure
function of (seed, stream, step): the same whatever the number of threads."""

from __future__ import annotations

import pytest
import torch

from nlicl_lib.core import tasks
from nlicl_lib.core.tasks import PART_SIZE, TaskConfig, sample_prompts

TASKS = [
    TaskConfig(kind="linear", input_dim=5, context_length=20, noise_std=0.5),
    TaskConfig(kind="poly", input_dim=3, context_length=10, degree=2),
    TaskConfig(kind="linear", input_dim=2, context_length=3, covariance=((2.0, 0.5), (0.5, 1.0))),
]


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.describe())
def test_batches_do_not_depend_on_the_thread_count(task, monkeypatch):
    batch = 2 * PART_SIZE + 321
    monkeypatch.setattr(tasks, "_sampling_workers", lambda: 1)
    serial = sample_prompts(task, batch, seed=4, step=7)
    monkeypatch.setattr(tasks, "_sampling_workers", lambda: 2)
    parallel = sample_prompts(task, batch, seed=4, step=7)
    monkeypatch.setattr(tasks, "_sampling_workers", lambda: 3)
    assert torch.equal(sample_prompts(task, batch, seed=4, step=7).y, parallel.y)
    for name in ("x", "y", "coefficients"):
        assert torch.equal(getattr(serial, name), getattr(parallel, name))
    # parts are independent draws, not copies of each other
    assert not torch.equal(parallel.x[:10], parallel.x[PART_SIZE:PART_SIZE + 10])


