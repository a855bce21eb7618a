"""Shared test fixtures."""

from __future__ import annotations

import pytest

from nlicl_lib.core.device import use_threads


@pytest.fixture
def one_torch_thread():
    """One torch thread (the tests' models are tiny; a second thread only spins), restored."""
    with use_threads(1):
        yield
