"""Chapter 5's claim-level sentences about the depth study, recomputed from the stored data:
each test fails if the data stop supporting the sentence the page prints."""

import copy

import pytest

from nlicl_lib.experiments.studies import (
    FIT_SAMPLES,
    budget_pairs,
    load_studies,
    reference_estimates,
    reference_samples,
    sample_falls,
    trained_estimate,
)
from nlicl_lib.pages import ch5
from nlicl_lib.training.evaluate import intervals_separate


@pytest.fixture(scope="module")
def stored() -> dict:
    return load_studies()


@pytest.mark.parametrize("name", ["d3", "d5"])
def test_at_equal_depth_the_wide_stack_is_never_the_lower_one(stored, name):
    """'at the four shallowest depths the wide stack is lower; deeper, the intervals overlap
    and these estimates do not say which is lower', and 'at equal depth the wide stack is never
    the higher one'."""
    study = stored[name]
    claims = ch5.depth_claims(study)
    narrow, wide = study["slots"]
    assert "narrow" not in claims.wide_vs_narrow
    assert claims.wide_vs_narrow.count("wide") >= len(claims.depths) // 2
    for L, verdict in zip(claims.depths, claims.wide_vs_narrow, strict=True):
        a, b = trained_estimate(study, narrow, L), trained_estimate(study, wide, L)
        assert (verdict == "wide") == (intervals_separate(a, b) and b.mean < a.mean)
    assert claims.wide_vs_narrow == ("wide",) * 4 + ("-",) * (len(claims.depths) - 4)
    assert claims.depths[:4] == (1, 2, 3, 4)


def test_where_the_intervals_overlap_a_deep_stacks_mean_sits_above_its_median(stored):
    """d = 3: 'At depths ... the intervals overlap: there a deep stack's loss rests on a few
    test contexts (the medians in brackets ... sit below the means)'."""
    study = stored["d3"]
    claims = ch5.depth_claims(study)
    unseparated = [L for L, v in zip(claims.depths, claims.wide_vs_narrow, strict=True) if v == "-"]
    assert unseparated and min(unseparated) > 2
    for L in unseparated:
        assert any(trained_estimate(study, m, L).median < trained_estimate(study, m, L).mean
                   for m in study["slots"])


def test_the_narrow_stacks_budget_wins_are_all_deeper_stacks(stored):
    """'where the intervals separate, the narrow stack is the lower one ..., and in every such
    pair it is the deeper stack; the deeper pairs do not separate ... steps, not better
    features'."""
    claims = ch5.depth_claims(stored["d3"])
    wins = [pair for pairs in claims.budget_wins.values() for pair in pairs]
    assert wins, "the narrow stack wins no budget pair: the paragraph has nothing to explain"
    assert not any(claims.budget_losses.values())
    assert all(narrow > wide for narrow, wide in wins)
    for kind, pairs in claims.budget_wins.items():
        every = [(p.narrow_depth, p.wide_depth) for p in budget_pairs(stored["d3"], 3, 6, kind)]
        assert list(pairs) == every[:len(pairs)], kind  # the deeper pairs are the unseparated


def test_the_wide_reference_rises_again_with_one_context_carrying_most_of_a_sample(stored):
    """d = 3: 'In the deep blocks of the wide reference a single test context carries most of
    a sample's loss, and its estimates rise again'."""
    study = stored["d3"]
    wide = study["slots"][1]
    means = [e.mean for e in reference_estimates(study, wide)]
    assert means[-1] > min(means)
    assert max(max(row) for row in study["references"][str(wide)]["worst_share"]) > 0.5


def test_the_narrow_token_costs_a_factor_where_the_wide_stack_is_lower(stored):
    """d = 5: 'At the four shallowest depths the wide stack is lower, and the narrow stack's
    loss is a clear multiple of its loss (the table's last column)'."""
    claims = ch5.depth_claims(stored["d5"])
    assert claims.cost
    for ratio, error in claims.cost.values():
        assert ratio - 2 * error > 1


def test_depth_takes_the_narrow_stacks_below_every_single_block(stored):
    """d = 5: 'below the best single block of their token size from depth a on, and below the
    best single block of any size from depth b on, their whole interval below the line'."""
    study = stored["d5"]
    claims = ch5.depth_claims(study)
    for hits, first in ((claims.narrow_below_single, 2), (claims.narrow_below_kernel, 3)):
        assert hits and list(hits) == [L for L in claims.depths if L >= first], first
    assert min(claims.narrow_below_single) <= min(claims.narrow_below_kernel)
    assert 1 not in claims.narrow_below_single  # one block cannot beat its own bound


def test_the_greedy_reference_is_no_bound_for_the_trained_wide_stacks(stored):
    """d = 3: 'The trained narrow stacks stay close to their reference: not separated from it
    at most depths, above it once (a stack still improving, starred) and below it once. The
    trained wide stacks are below theirs at depths 2 to 4 ...: the greedy reference is no bound
    for them'."""
    claims = ch5.depth_claims(stored["d3"])
    assert claims.wide_vs_reference[1:4] == ("below",) * 3
    assert "above" not in claims.wide_vs_reference
    verdicts = claims.narrow_vs_reference
    assert verdicts.count("above") == verdicts.count("below") == 1
    assert verdicts.count("-") > len(verdicts) / 2
    above = claims.depths[verdicts.index("above")]
    assert f"m3-L{above}" in claims.unsettled


def test_the_claims_follow_the_data_when_it_changes(stored):
    """The claim functions read the stored numbers: the one-block narrow stack moved far below
    the wide one turns that depth's verdict round."""
    study = copy.deepcopy(stored["d3"])
    narrow, wide = study["slots"]
    L = study["depths"][0]
    run = study["trained"][f"m{narrow}-L{L}"]
    low = trained_estimate(study, wide, L).mean * study["null_loss"] / 10
    run["loss"].update(mean=low, std_error=low / 100,
                       sample_means=[low] * len(run["loss"]["sample_means"]))
    claims = ch5.depth_claims(study)
    assert claims.wide_vs_narrow[0] == "narrow"
    assert claims.narrow_vs_reference[0] == "below"
    assert reference_estimates(study, narrow)[L - 1].mean > low / study["null_loss"]


def test_the_five_slot_stacks_stay_close_to_their_reference(stored):
    """d = 5: 'They stay within a tenth of their greedy reference at every depth; where they
    are above it beyond one block, training had not finished (the stars)'."""
    study = stored["d5"]
    narrow = study["slots"][0]
    claims = ch5.depth_claims(study)
    references = reference_estimates(study, narrow)
    for L in claims.depths:
        ratio = trained_estimate(study, narrow, L).mean / references[L - 1].mean
        assert abs(ratio - 1) < 0.1, L
    above = [L for L, v in zip(claims.depths, claims.narrow_vs_reference, strict=True)
             if v == "above"]
    assert above and "below" in claims.narrow_vs_reference
    unsettled = {f"m{narrow}-L{L}" for L in above[1:]}
    assert unsettled <= set(claims.unconverged)


def test_the_wide_references_tail_grows_with_depth_and_the_narrow_one_falls(stored):
    """d = 5: 'The five-slot reference's estimate falls at every block in every sample. The
    15-slot one ... one test context carries most of a sample's loss, and its estimates rise
    again, in more samples the deeper the block, far above the trained stacks'."""
    study = stored["d5"]
    narrow, wide = study["slots"]
    assert sample_falls(reference_samples(study, narrow)).falling == FIT_SAMPLES
    rises = sample_falls(reference_samples(study, wide)).rises
    assert rises and list(rises.values()) == sorted(rises.values())
    assert max(max(row[-3:]) for row in study["references"][str(wide)]["worst_share"]) > 0.5
    last = study["depths"][-1]
    assert (reference_estimates(study, wide)[last - 1].median
            > trained_estimate(study, wide, last).median)
