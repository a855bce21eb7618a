"""Shared test fixtures."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def one_torch_thread():
    """Run a test on one torch thread, then restore the setting.

    The tests' models are tiny: one intra-op thread is as fast as two on an idle machine, and on
    a busy one a second thread only spins (10-30x slower steps were measured here).
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
