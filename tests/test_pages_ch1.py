"""Chapter 1's page module: its runs, figures and table against the numbers theory gives."""

from __future__ import annotations

import numpy as np
import pytest

from nlicl_lib import TaskConfig, TrainConfig, gd_lsa
from nlicl_lib.core.device import use_threads
from nlicl_lib.pages import ch1
from nlicl_lib.theory import lsa_gd

D, N = 3, 8
DEPTHS = [1, 2]
NOISE = [0.0, 0.5]


@pytest.fixture(scope="module")
def computed():
    task = TaskConfig(kind="linear", input_dim=D, context_length=N)
    config = TrainConfig(steps=30, batch_size=64, learning_rate=0.04, seed=1)
    with use_threads(1):
        first = ch1.train_one_layer(task, seed=0, train_config=config)
        sweep = ch1.train_depth_sweep(D, N, DEPTHS, NOISE, config, seed=1)
        tuned = lsa_gd.tuned_gd_losses(D, N, DEPTHS, NOISE, num_prompts=4000, seed=0)
    return task, first, sweep, tuned


def test_one_layer_figures_show_the_optimum_and_the_rescaled_weights(computed):
    task, first, _, _ = computed
    scale, optimum = ch1.linear_gd_optimum_isotropic(D, N)
    normaliser = ch1.null_loss(task)
    assert normaliser == D and first.least_squares.mean < 1e-6  # n > d noiseless examples fix w
    trained = first.model.blocks[0].lsa
    fig = ch1.weights_figure(trained, gd_lsa(D, [scale]).blocks[0].lsa)
    p = trained.P.detach().double().numpy()
    np.testing.assert_allclose(fig.data[0].z, p / p[-1, -1])  # (cP, Q/c) is the same layer
    assert np.asarray(fig.data[3].z)[:D, :D] == pytest.approx(-scale * np.eye(D))


def test_depth_figure_and_table_set_trained_stacks_against_tuned_gd(computed):
    task, _, sweep, tuned = computed
    assert sweep.runs == [(s, L) for s in NOISE for L in DEPTHS]
    assert set(sweep.bayes) == {0.5}  # no noise: the Bayes loss is exactly 0
    assert len(sweep.model(0.0, 2).blocks) == 2
    table = ch1.depth_table(DEPTHS, NOISE, sweep.trained, tuned, sweep.bayes, D, N)
    # loss / E[y^2], E[y^2] = d, as in the depth figure
    exact = ch1.linear_gd_optimum_isotropic(D, N, 0.5)[1]
    assert table.rows[2][3] == f"{exact / D:.4f}" and table.rows[0][-1] == "0 (exact)"
    noisy = sweep.trained[0.5, 2]
    assert table.rows[3][1] == ch1.pm(noisy.mean / D, noisy.std_error / D)
    assert table.rows[3][4] == ch1.pm(sweep.bayes[0.5].mean / D, sweep.bayes[0.5].std_error / D)
    fig = ch1.depth_figure(DEPTHS, NOISE, sweep.trained, tuned, sweep.bayes, ch1.null_loss(task))
    assert fig.data[0].y[0] == pytest.approx(sweep.trained[0.0, 1].mean / D, rel=1e-12)
