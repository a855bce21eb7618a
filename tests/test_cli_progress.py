"""``python -m nlicl_lib train --progress`` shows a bar with the elapsed and remaining time
(tqdm, given the number of steps) under a line saying what runs; ``--no-progress`` shows none."""

from __future__ import annotations

import re

from nlicl_lib.experiments import cli

ARGV = ["train", "--steps", "30", "--batch", "50", "--device", "cpu"]


def test_the_bar_shows_elapsed_and_remaining_time(capsys):
    assert cli.main([*ARGV, "--progress"]) == 0
    err = capsys.readouterr().err
    assert "training 30 steps of 50 prompts on cpu (1 thread), then the test loss" in err
    # tqdm: "30/30 [00:00<00:00, 171.11it/s, loss=...]": elapsed<remaining and the rate
    assert re.search(r"30/30 \[\d\d:\d\d<\d\d:\d\d, +[\d.]+(it/s|s/it)", err), err


def test_no_progress_shows_no_bar(capsys):
    assert cli.main([*ARGV, "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "it/s" not in captured.err and "training 30 steps" not in captured.err
    assert "trained:     30 steps" in captured.out and "cpu (1 thread)" in captured.out
