"""The one-thread policy: ``auto`` is one torch thread for the book's sizes, an explicit count
is honoured and restored."""

from __future__ import annotations

import pytest
import torch

from nlicl_lib.core.device import (
    SMALL_WORK_TOKEN_DIM,
    choose_threads,
    describe_device,
    use_threads,
)


def test_auto_is_one_thread_for_the_books_sizes():
    assert choose_threads() == 1
    assert choose_threads("auto", token_dim=6, batch_size=2000) == 1
    assert choose_threads(None, token_dim=50, batch_size=20000) == 1
    assert choose_threads("auto", token_dim=SMALL_WORK_TOKEN_DIM + 1, batch_size=10) >= 1


@pytest.mark.parametrize("requested", [1, 2, 3, "2"])
def test_an_explicit_count_is_honoured_and_restored(requested):
    before = torch.get_num_threads()
    with use_threads(choose_threads(requested)) as threads:
        assert threads == int(requested) == torch.get_num_threads()
        assert describe_device(torch.device("cpu")) == (
            f"cpu ({threads} thread{'' if threads == 1 else 's'})")
    assert torch.get_num_threads() == before


def test_the_count_is_restored_after_an_error():
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError), use_threads(3):
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before


