"""The one thread policy (``nlicl_lib.core.device``): ``auto`` is one torch thread for the
book's sizes, an explicit count is honoured and restored, a bad value is refused by name, and
the command line, ``reproduce`` and the live panels all go through it."""

from __future__ import annotations

import pytest
import torch
from test_panels import small_panel

from nlicl_lib.core.device import (
    SMALL_WORK_TOKEN_DIM,
    choose_threads,
    describe_device,
    use_threads,
)
from nlicl_lib.core.errors import ConfigError
from nlicl_lib.experiments import cli, reproduce
from nlicl_lib.pages import panels


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


@pytest.mark.parametrize("bad", [0, -1, "many", 1.5, True])
def test_bad_values_are_refused_with_the_parameter_name(bad):
    with pytest.raises(ConfigError, match="threads") as error:
        choose_threads(bad)
    assert error.value.param == "threads"


@pytest.mark.parametrize("command", ["train", "reproduce"])
@pytest.mark.parametrize(("value", "shown"), [("0", "0"), ("-2", "-2"), ("lots", "'lots'")])
def test_the_cli_refuses_a_bad_thread_count_like_its_other_flags(command, value, shown, capsys,
                                                                 monkeypatch):
    def boom(*args, **kwargs):  # pragma: no cover - must not be reached
        raise AssertionError("work started")

    monkeypatch.setattr(cli, "run_experiment", boom)
    monkeypatch.setattr(reproduce, "run_experiment", boom)
    argv = [command, f"--threads={value}"] + (["--only", "ch1-lsa-linear"]
                                               if command == "reproduce" else [])
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --threads={shown} is not allowed: "), err


def test_the_cli_trains_on_the_chosen_threads_and_prints_them(monkeypatch):
    seen = []

    def record(task, model, train_config, device, **kwargs):
        seen.append((torch.get_num_threads(), describe_device(device)))
        raise RuntimeError("stop")

    monkeypatch.setattr(cli, "run_experiment", record)
    before = torch.get_num_threads()
    for argv, threads in ((["train", "--device", "cpu"], 1),
                          (["train", "--device", "cpu", "--threads", "2"], 2)):
        with pytest.raises(RuntimeError, match="stop"):
            cli.main(argv)
        assert seen[-1] == (threads, f"cpu ({threads} thread{'' if threads == 1 else 's'})")
        assert torch.get_num_threads() == before


def test_reproduce_runs_its_experiments_on_the_chosen_threads(monkeypatch):
    seen = []

    def fake(device, seed, progress):
        seen.append(torch.get_num_threads())
        return {"trained_loss": 1.0, "null_loss": 2.0, "reference_loss": 1.0,
                "reference_name": "x", "test_loss_method": "exact"}

    monkeypatch.setitem(reproduce.EXPERIMENTS, "fake",
                        reproduce.Experiment("fake", 9, "fake", fake))
    before = torch.get_num_threads()
    rows = reproduce.run_experiments(["fake"], "cpu", progress=False)
    assert seen == [1] and rows[0].device == "cpu (1 thread)"
    rows = reproduce.run_experiments(["fake"], "cpu", progress=False, threads=2)
    assert seen == [1, 2] and rows[0].device == "cpu (2 threads)"
    assert torch.get_num_threads() == before


def test_a_live_panel_trains_on_one_thread_and_says_so(monkeypatch):
    """A panel runs on one thread (``auto``) whatever torch had before, restores it, and its
    plan line names the count that runs."""
    monkeypatch.delenv("NLICL_BOOK_BUILD", raising=False)
    seen = []
    real = panels.run_experiment

    def record(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(panels, "run_experiment", record)
    with use_threads(2):
        panel = small_panel()
        assert "cpu (1 thread)" in panel.plan_line.value
        panel.train()
        assert seen == [1] and torch.get_num_threads() == 2
