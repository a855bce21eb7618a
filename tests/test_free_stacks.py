"""Chapter 5's free stacks ("Beyond the GD form"): the stored runs were made with the named
settings, a prefix of one reruns exactly, the stored losses and agreements follow from the
stored weights, the GD-form start is the GD-form stack exactly, and every claim-level sentence
of the section follows from the stored data (each test names its sentence)."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import torch

from nlicl_lib.core.device import use_threads
from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.tasks import sample_prompts
from nlicl_lib.experiments import studies
from nlicl_lib.pages import ch5
from nlicl_lib.theory import depth
from nlicl_lib.training.evaluate import ERROR_BARS, test_loss
from nlicl_lib.training.settings import base_settings, default_train_config
from nlicl_lib.training.train import train

TASK = studies.FREE_TASK
pytestmark = pytest.mark.usefixtures("one_torch_thread")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def free() -> dict:
    return studies.load_free_stacks()


@pytest.fixture(scope="module")
def runs(free) -> list[studies.FreeSummary]:
    return studies.free_summaries(free)


def _run(free: dict, depth_: int, key: str) -> dict:
    return next(r for r in free["depth_runs"][str(depth_)]["runs"] if r["key"] == key)


def _key(start: str, seed: int = studies.FREE_SEED, eta: float | None = None,
         steps: int | None = None) -> str:
    base = base_settings("glu-lsa", "free-stacks")
    return studies.FreeRun(start, seed, base["learning_rate"] if eta is None else eta,
                           base["steps"] if steps is None else steps).key


# --- the settings, the rerun, the stored weights ----------------------------------------------


def test_stored_free_stacks_were_made_with_the_named_settings(free):
    assert free["depths"] == list(studies.FREE_DEPTHS)
    assert free["training"] == asdict(studies.free_training(1))
    assert free["gd_form_training"] == asdict(studies.GD_FORM_TRAINING)
    assert free["seeds"] == list(studies.FREE_SEEDS) and len(studies.FREE_SEEDS) >= 3
    assert free["rates"] == list(studies.FREE_RATES) and len(studies.FREE_RATES) >= 2
    assert free["test"] == {"num_prompts": studies.FREE_TEST_PROMPTS,
                            "test_samples": studies.FREE_TEST_SAMPLES, "seed": studies.FREE_SEED,
                            "batch_size": studies.TEST_BATCH}
    assert studies.FREE_TEST_SAMPLES >= 2 and studies.AGREEMENT_PROMPTS >= 2000
    assert (free["agreement_prompts"], free["agreement_groups"]) == (
        studies.AGREEMENT_PROMPTS, studies.AGREEMENT_GROUPS)
    plan = studies.free_plan()
    assert {run.start for run in plan} == set(studies.STARTS)
    for key, entry in free["depth_runs"].items():
        L = int(key)
        assert [r["key"] for r in entry["runs"]] == [run.key for run in plan]
        assert studies.free_training(L) == default_train_config(
            TASK, studies.free_model_config(L), purpose="free-stacks", seed=studies.FREE_SEED)
        for run, stored in zip(plan, entry["runs"], strict=True):
            config = studies.free_training(L, run.steps, run.seed, run.eta)
            assert stored["learning_rate"] == pytest.approx(run.eta / L, rel=1e-12)
            assert config.learning_rate == pytest.approx(stored["learning_rate"], rel=1e-12)
            assert "diverged_at" in stored or (
                len(stored["history"]) == run.steps // free["history_window"]
                and stored["loss"]["num_prompts"] == studies.FREE_TEST_PROMPTS
                * studies.FREE_TEST_SAMPLES
                and len(stored["loss"]["sample_means"]) == studies.FREE_TEST_SAMPLES
                and len(stored["agreement"]) == L - 1), (L, run.key)


def test_free_settings_refuse_bad_input():
    with pytest.raises(ConfigError):
        studies.free_training(2, eta=0.0)
    with pytest.raises(ConfigError):
        studies.free_stack_from_gd_form(studies.build_free_stack(1))
    wide = build_model(ModelConfig(kind="glu-lsa", feature_slots=3, glu_width=4, glu_reads="x"),
                       TASK)
    with pytest.raises(ConfigError):
        studies.free_stack_from_gd_form(wide)
    with pytest.raises(ConfigError):
        studies.free_agreement(studies.build_free_stack(2), sample_prompts(TASK, 4, 0, 0), 8)


def test_rerunning_the_start_of_a_free_run_gives_the_stored_losses(free):
    """Depth 1, seed 0 at the highest rate: a run trained alone (a run trained with others,
    mapped over them, rounds differently in float32)."""
    run = studies.FreeRun("random", studies.FREE_SEED, max(studies.FREE_RATES),
                          studies.free_training(1).steps)
    stored = _run(free, 1, run.key)
    assert stored["trained_with"] == 1
    head = stored["history_head"]
    result = train(studies.build_free_stack(1, seed=run.seed), TASK,
                   studies.free_training(1, run.steps, run.seed, run.eta), progress=False,
                   callback=lambda step, loss: step + 1 >= len(head))
    np.testing.assert_allclose(result.loss_history, head, rtol=1e-4)


def test_the_stored_free_weights_give_the_stored_test_loss(free):
    """Depth 1, seed 0 at the free rate: the first two of its independent test samples (the
    first prompts of the same test stream) recomputed from its stored weights."""
    stored = _run(free, 1, _key("random"))
    model = studies.free_stack_from_json(1, stored["weights"])
    loss = test_loss(model, TASK, **{**free["test"], "test_samples": 2})
    np.testing.assert_allclose(loss.sample_means, stored["loss"]["sample_means"][:2], rtol=1e-5)
    means = np.asarray(stored["loss"]["sample_means"])
    assert stored["loss"]["mean"] == pytest.approx(means.mean(), rel=1e-12)


def test_the_stored_agreement_follows_from_the_stored_weights(free):
    """Depth 2 from the GD-form start: A_1 on the same prompts and groups."""
    stored = _run(free, 2, _key("gd-form"))
    model = studies.free_stack_from_json(2, stored["weights"])
    mean, error = studies.free_agreement(model, studies.first_test_prompts(
        free["agreement_prompts"]), free["agreement_groups"])
    np.testing.assert_allclose(mean, stored["agreement"], rtol=1e-5)
    np.testing.assert_allclose(error, stored["agreement_std_error"], rtol=1e-3)


# --- the GD-form start ------------------------------------------------------------------------


@pytest.mark.parametrize("L", [1, 3])
def test_the_gd_form_start_is_the_gd_form_stack_exactly(L):
    """float64: a GD-form stack with O(1) Gamma and its free copy predict alike to 1e-12."""
    gd_form = build_model(studies.gd_form_config(L), TASK, seed=3, dtype=torch.float64)
    with torch.no_grad():
        for block in gd_form.blocks:
            block.lsa.gamma.normal_(0.0, 0.3)
    free = studies.free_stack_from_gd_form(gd_form)
    assert free.depth == L and not free.gd_form
    assert [type(p) for p in free.parameters()] and all(
        p.dtype == torch.float64 for p in free.parameters())
    prompts = sample_prompts(TASK, 64, 1, 0, dtype=torch.float64)
    a, b = gd_form(prompts.embed(3)).detach(), free(prompts.embed(3)).detach()
    assert float((a - b).abs().max() / a.abs().max()) < 1e-12


def test_the_stored_gd_form_start_began_at_the_stored_gd_form_stack(free):
    """Depth 2: the GD-form start's first batch loss is the stored GD-form stack's on that batch."""
    entry = free["depth_runs"]["2"]
    gd_form = studies.gd_form_stack_from_json(2, entry["gd_form"]["weights"])
    batch = sample_prompts(TASK, free["training"]["batch_size"], studies.FREE_SEED, 0)
    first = float(((gd_form(batch.embed(3)).detach() - batch.query_label) ** 2).mean())
    for eta in (base_settings("glu-lsa", "free-stacks")["learning_rate"], min(studies.FREE_RATES)):
        head = _run(free, 2, _key("gd-form", eta=eta))["history_head"]
        assert head[0] == pytest.approx(first, rel=1e-5)
    exact = gd_form.double()
    copied = studies.free_stack_from_gd_form(exact)
    prompts = sample_prompts(TASK, 64, 2, 0, dtype=torch.float64)
    a, b = exact(prompts.embed(3)).detach(), copied(prompts.embed(3)).detach()
    assert float((a - b).abs().max() / a.abs().max()) < 1e-12


# --- A_l: which blocks, how measured ---------------------------------------------------------


def test_agreement_is_one_for_a_gd_form_stack_and_falls_with_dense_attention():
    model = depth.reference_model(TASK, 3, 3, gammas=depth.random_gammas(6, 3, seed=1)).double()
    prompts = sample_prompts(TASK, 16, 5, 0, dtype=torch.float64)
    np.testing.assert_allclose(depth.stream_agreement(model, prompts), 1.0, atol=1e-10)
    dense = depth.with_dense_attention(model, 0.05, seed=0)
    assert depth.stream_agreement(dense, prompts).max() < 0.9


def test_agreement_of_a_free_block_falls_when_its_glu_reads_the_label():
    model = studies.build_free_stack(1, dtype=torch.float64)
    prompts = sample_prompts(TASK, 16, 5, 0, dtype=torch.float64)
    with torch.no_grad():
        model.blocks[0].glu.w1[:, -1] = 1.0
        model.blocks[0].glu.w2[:, -1] = 1.0
        model.blocks[0].lsa.p.copy_(torch.eye(7))
    assert depth.stream_agreement(model, prompts)[0] < 0.9


def test_what_the_last_attention_writes_into_the_context_labels_is_never_read(free):
    """"what its attention writes into the context labels, which nothing reads (the prediction is
    the query's label entry alone)": the prediction is the last attention's query update of the
    stream before it, whatever that attention does to the context tokens."""
    model = studies.free_stack_from_json(2, _run(free, 2, _key("gd-form"))["weights"],
                                         dtype=torch.float64)
    prompts = sample_prompts(TASK, 8, 5, 0, dtype=torch.float64)
    with torch.no_grad():
        prediction, stream = model(prompts.embed(3), return_stream=True)
        before = stream["block2.glu"]
        assert torch.equal(prediction, -stream["block2"][:, -1, -1])
        changed = before.clone()
        changed[:, -1, -1] += 1.0  # the query's label entry is read: the prediction moves
        assert not torch.allclose(model.blocks[1].lsa.query_label(changed),
                                  model.blocks[1].lsa.query_label(before))
        np.testing.assert_allclose(-model.blocks[1].lsa.query_label(before), prediction,
                                   rtol=1e-12)


def test_the_loss_hardly_constrains_the_last_block_s_agreement(probe):
    """"in the one-block stack from the first seed, zeroing the label column of Q_1 takes A_1
    from below one half to nearly 1 and moves its predictions by under one percent"."""
    assert probe.before[0] + ERROR_BARS * probe.before[1] < 0.5
    assert probe.after[0] - ERROR_BARS * probe.after[1] > 0.99 and probe.shift < 0.01


def test_the_gd_form_stacks_agree_to_rounding(free):
    """The table's "|1 - A_l| below ..." of the GD-form stacks (float64)."""
    for key, entry in free["depth_runs"].items():
        assert len(entry["gd_form"]["agreement"]) == int(key) - 1
        np.testing.assert_allclose(entry["gd_form"]["agreement"], 1.0, atol=1e-9)


# --- the section's sentences, from the stored data ---------------------------------------------


@pytest.fixture(scope="module")
def claims(free) -> ch5.FreeStackClaims:
    return ch5.free_stack_claims(free)


@pytest.fixture(scope="module")
def probe(free) -> ch5.LastBlockProbe:
    with use_threads(1):
        return ch5.free_last_block_probe(free)


def test_the_family_s_gd_form_loss_is_the_lower_gd_form_stack(free):
    """"the GD-form loss of its family: here the lower of two GD-form stacks of its shape"."""
    for L in free["depths"]:
        both = studies.gd_form_losses(free, L)
        assert set(both) == {"study", "continued"}
        assert studies.family_gd_form_loss(free, L).mean == min(e.mean for e in both.values())
        assert all(e.integrated == "task+query" for e in both.values())


def test_no_gd_form_start_ends_above_and_the_deeper_end_below(free, runs, claims):
    """"From the GD-form start no run ends above the GD-form loss of its family, at either
    rate ... With one block the run stays within that loss; with more it ends below it"."""
    starts = [r for r in runs if r.start == "gd-form"]
    assert {r.eta for r in starts} == {base_settings("glu-lsa", "free-stacks")["learning_rate"],
                                       min(studies.FREE_RATES)}
    assert all(r.reaches for r in starts) and claims.gd_start_above == ()
    assert claims.gd_start_within == (1,) and claims.gd_start_below == (2, 3)
    for r in starts:
        assert r.below == (r.depth >= 2)
        assert r.below == (r.loss.interval[1] < r.gd_form.interval[0])
    depths = sorted(int(L) for L in free["depth_runs"])
    assert claims.gd_start_within == (depths[0],) and claims.gd_start_below == tuple(depths[1:])


def test_the_gd_form_stack_trained_on_stays_above_the_free_one(free, runs, claims):
    """"the GD-form stack they started from, trained on in GD form as long, stays above them:
    what the free stack gains there is its freedom, not the extra steps"."""
    assert claims.continued_above
    for L in claims.gd_start_below:
        control = studies.gd_form_losses(free, L)["continued"]
        for r in (r for r in runs if r.depth == L and r.start == "gd-form"):
            assert control.interval[0] > r.loss.interval[1]
        assert free["depth_runs"][str(L)]["continued"]["steps"] == free["training"]["steps"]
    report = ch5.free_stack_report(free)  # the numbers the sentence leaves to the report
    for L in claims.gd_start_below:
        for name, stack in studies.gd_form_losses(free, L).items():
            assert ch5._interval(stack) in report, (L, name)


def test_three_random_starts_reach_and_the_seeds_end_apart(runs, claims):
    """"From random starts only a few runs reach the GD-form loss of their family (the report
    marks them); the others end above it, and at every depth the best and the worst seed end
    apart"."""
    random = [r for r in runs if r.start == "random"]
    assert claims.random_runs == len(random) == 18
    assert claims.random_reaching == ((1, 0, 0.01, 2000), (2, 2, 0.01, 1000), (3, 2, 0.01, 1000))
    assert all(r.loss.interval[0] > r.gd_form.interval[1] for r in random if not r.reaches)
    assert claims.seeds_apart == (1, 2, 3) == tuple(sorted({r.depth for r in random}))
    assert len(claims.random_reaching) <= len(random) // 4  # "only a few"


def test_doubling_the_steps_moves_seed_0_and_reaches_only_at_depth_1(runs, claims):
    """"Doubling the steps of the first seed still moves its loss at every depth, and takes it
    to the GD-form loss only with one block: deeper, these runs cannot say whether more steps
    would get there"."""
    T = studies.free_training(1).steps
    for L in studies.FREE_DEPTHS:
        short, long = (next(r for r in runs if r.depth == L and r.start == "random"
                            and r.seed == studies.FREE_SEED and r.steps == steps
                            and r.eta == 0.01) for steps in (T, studies.FREE_DOUBLING * T))
        moved = abs(long.loss.mean - short.loss.mean)
        assert moved > ERROR_BARS * long.loss.error
        assert long.doubled_change == short.doubled_change == pytest.approx(
            moved / (ERROR_BARS * long.loss.error))
        assert long.reaches == (L == 1) and not short.reaches
    assert claims.doubling_unsettled == (1, 2, 3) and claims.doubled_reaching == (1,)


def test_the_deepest_random_run_that_reaches_has_a_heavy_tail(runs, claims):
    """"The deepest random-start run that reaches does so through a wide interval: a single
    test prompt carries a large share of its loss"."""
    depth_, seed, share, width = claims.widest
    reaching = [r for r in runs if r.start == "random" and r.reaches and r.depth == depth_]
    assert (depth_, seed) == (3, 2) and len(reaching) == 1
    run = reaching[0]
    assert share == run.loss.worst_share == max(r.loss.worst_share for r in runs if r.loss)
    assert width == pytest.approx(ERROR_BARS * run.loss.error / run.loss.mean)
    assert width > 0.2 and share > 0.1
    # the interval is wide because of the tail: the other runs' are a few percent
    others = [ERROR_BARS * r.loss.error / r.loss.mean for r in runs if r is not run]
    assert max(others) < width / 2
    assert run.loss.interval[0] <= run.gd_form.interval[1] < run.loss.mean


def test_the_runs_that_reach_keep_the_identity_nearly_but_not_exactly(runs, claims):
    """"On every run that reaches the GD-form loss of its family, those below it included, ...
    A_l is close to 1 but below it by more than its error bar ... much lower agreements occur
    only on runs that do not reach it"."""
    reached = [(a, e) for r in runs if r.reaches
               for a, e in zip(r.agreement, r.agreement_error, strict=True)]
    assert len(reached) == 9  # depth 2: three runs of one block; depth 3: three of two
    assert claims.reach_below_one and all(a + ERROR_BARS * e < 1 for a, e in reached)
    (low, _), (high, _) = claims.reach_agreement
    assert 0.98 < low == min(a for a, _ in reached) and high == max(a for a, _ in reached)
    assert any(r.below for r in runs if r.reaches and r.depth >= 2)
    unreached = [a for r in runs if not r.reaches for a in r.agreement]
    assert all(a >= low for r in runs if r.reaches for a in r.agreement)
    assert min(unreached) == claims.lowest_agreement[0] < 0.5 and not claims.lowest_agreement[2]


def test_the_measuring_box_s_heavy_tail_is_the_largest_prompt_share(runs):
    """"It is heavy-tailed: a single test prompt can carry a sizeable share of a run's summed
    loss"."""
    assert max(r.loss.worst_share for r in runs if r.loss) > 0.1


def test_the_section_leaves_the_numbers_to_the_printed_report():
    """The section's prose states its claims in words (the tests above hold them against the
    stored data); the runs' numbers are in the report it prints, none glued into its text."""
    page = (ROOT / "book" / "ch5_depth.md").read_text()
    section = page[page.index("## Beyond the GD form"):page.index("## Depth raises the degree")]
    assert "{glue:text}" not in section
    assert "print(ch5.free_stack_report(free))" in section


def test_rounding_follows_the_error_bar():
    assert ch5._rounded(0.99878, 0.00009) == "0.99878 ± 0.00009"
    assert ch5._rounded(0.98962, 0.00247) == "0.990 ± 0.002"
    assert ch5._rounded(0.3411, 0.00043) == "0.3411 ± 0.0004"
    assert ch5._rounded(0.0464, 0.0014) == "0.0464 ± 0.0014"


def test_the_report_fits_the_page_and_names_its_error_bars(free):
    report = ch5.free_stack_report(free)
    assert max(len(line) for line in report.splitlines()) <= ch5.PRINT_WIDTH
    assert "± 2 standard errors" in report and report.count("GD-form stack, study settings") == 3


def test_the_script_merges_a_part_only_onto_the_same_gd_form_stacks(free):
    spec = importlib.util.spec_from_file_location("make_free_stack",
                                                  ROOT / "tools" / "make_free_stack.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    stored = json.loads(json.dumps(free))
    fresh = {**json.loads(json.dumps(free)), "parts": ["continued"], "continued_seconds": 1.0,
             "commit": "abc"}
    fresh["depth_runs"]["1"]["continued"]["steps"] = -1
    merged = script.merge(stored, fresh)
    assert merged["depth_runs"]["1"]["continued"]["steps"] == -1
    assert merged["depth_runs"]["1"]["runs"] == free["depth_runs"]["1"]["runs"]
    assert merged["commits"]["continued"] == "abc" and merged["continued_seconds"] == 1.0
    fresh["depth_runs"]["2"]["gd_form"]["weights"] = {}
    with pytest.raises(SystemExit):
        script.merge(stored, fresh)


def test_a_planned_run_refuses_bad_input():
    for bad in ({"start": "warm"}, {"seed": -1}, {"eta": 0.0}, {"steps": 0}):
        with pytest.raises(ConfigError):
            studies.FreeRun(**{"start": "random", "seed": 0, "eta": 0.01, "steps": 10, **bad})


def test_the_stored_gd_form_weights_give_the_stored_gd_form_losses(free):
    """Depth 3, the family's loss of the section's sentences: both GD-form stacks' first two
    test samples recomputed from their stored weights (task and query integrated out)."""
    entry = free["depth_runs"]["3"]
    for stored in (entry["gd_form"], entry["continued"]):
        model = studies.gd_form_stack_from_json(3, stored["weights"])
        loss = test_loss(model, TASK, integrate="task+query", **{**free["test"], "test_samples": 2})
        np.testing.assert_allclose(loss.sample_means, stored["loss"]["sample_means"][:2],
                                   rtol=1e-6)
