"""The static site's in-page trainer (``book/_static/in-page/``) against the library.

- The fixtures that ``tests/js/core.test.mjs`` runs the page's model and trainer on
  (``tests/js/fixtures.json``) are what the library computes today: regenerated here and
  compared entry by entry to ``TOLERANCE`` of each array's largest entry, so a change to the
  model or the trainer fails until the fixtures are made again
  (``python -m nlicl_lib.pages.in_page fixtures tests/js/fixtures.json``) and the page's code
  passes on them.
- The page reads each panel's settings from the library's export: ``settings.js`` given a
  panel's controls gives the configs the live panel's ``configure`` gives (run in Node).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.pages import in_page
from nlicl_lib.pages.panels import PANELS

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "js" / "fixtures.json"
SETTINGS_JS = ROOT / "book" / "_static" / "in-page" / "settings.js"
TOLERANCE = 1e-9
"""Not the page's 1e-12: another CPU sums in another order, and three Adam steps of the large
initialisation amplify that (measured, the same machine with MKL's conditional numerical
reproducibility on and off: 4.1e-13 of the array's scale, in the third step's gradients). A
change to the model or the trainer moves the fixtures by far more."""


def _numbers(value: object) -> bool:
    """A number, or a (nested) list of numbers only."""
    if isinstance(value, list):
        return bool(value) and all(_numbers(v) for v in value)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _compare(new: object, old: object, where: str, problems: list[str]) -> None:
    """Walk two JSON values; numbers and arrays of numbers are compared to TOLERANCE of the
    array's largest entry, anything else exactly."""
    if _numbers(old):
        a, b = np.asarray(new, dtype=np.float64), np.asarray(old, dtype=np.float64)
        if a.shape != b.shape:
            problems.append(f"{where}: shape {a.shape}, stored {b.shape}")
            return
        gap, scale = float(np.max(np.abs(a - b), initial=0)), float(np.max(np.abs(b), initial=0))
        if not gap <= TOLERANCE * max(scale, 1e-300):
            problems.append(f"{where}: differs by {gap:.3g} (scale {scale:.3g})")
    elif isinstance(old, dict) and isinstance(new, dict) and set(new) == set(old):
        for key in old:
            _compare(new[key], old[key], f"{where}.{key}", problems)
    elif isinstance(old, list) and isinstance(new, list) and len(new) == len(old):
        for i, (a, b) in enumerate(zip(new, old, strict=True)):
            _compare(a, b, f"{where}[{i}]", problems)
    elif new != old:
        problems.append(f"{where}: {str(new)[:80]}, stored {str(old)[:80]}")


def test_fixtures_are_what_the_library_computes() -> None:
    stored = json.loads(FIXTURES.read_text())
    problems: list[str] = []
    _compare(in_page.fixtures(), stored, "fixtures", problems)
    assert not problems, (
        f"{len(problems)} fixture values differ from the library's (first: {problems[:3]}): "
        "the model or the trainer changed; run `python -m nlicl_lib.pages.in_page fixtures "
        "tests/js/fixtures.json`, then `node --test tests/js/` (the page's code must pass on "
        "the new fixtures)")


def test_fixtures_cover_every_variant_the_panels_train() -> None:
    """Every attention form, GLU reading, activation and initialisation the panels offer
    appears in a fixture (the page must be checked on each)."""
    cases = json.loads(FIXTURES.read_text())["cases"]
    seen = {(c["model"]["kind"], c["model"]["attention"], c["model"]["glu_reads"],
             c["model"]["activation"], c["model"]["glu_init"], c["model"]["depth"] > 1)
            for c in cases}
    attention = {s[1] for s in seen}
    assert attention == {"full", "sparse"}
    glu = [s for s in seen if s[0] == "glu-lsa"]
    assert {s[2] for s in glu} == {"x", "x+slots"}
    assert {s[3] for s in glu} == {"none", "silu", "gelu"}
    assert {s[4] for s in glu} == {"large", "normal", "small"}
    assert {s[5] for s in seen} == {True, False}
    tasks = {(c["task"]["kind"], c["task"]["homogeneous"], c["task"]["noise_std"] > 0) for c in cases}
    assert {("linear", False, True), ("poly", True, False), ("poly", False, False)} <= tasks


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node (node --test)")
@pytest.mark.parametrize("chapter", ["ch2", "ch3"])
def test_page_settings_are_the_panels(chapter: str, tmp_path: Path) -> None:
    """settings.js, reading the export, gives the configs of the live panel's configure at
    several settings (the defaults, others, the training controls moved)."""
    export = in_page.panel_export(chapter)
    (tmp_path / "export.json").write_text(json.dumps(export))
    panel = PANELS[chapter]("cpu")
    defaults = {name: p.default for name, p in panel.params.items()}
    trials = [defaults]
    for name in export["key_params"]:
        for value in panel.params[name].values()[::2]:
            trials.append({**defaults, name: value, "steps": 300, "learning_rate": 0.005})
    (tmp_path / "trials.json").write_text(json.dumps(trials))
    script = (f"import {{ runFor }} from {json.dumps(SETTINGS_JS.as_uri())};\n"
              "import { readFileSync } from 'node:fs';\n"
              f"const e = JSON.parse(readFileSync({json.dumps(str(tmp_path / 'export.json'))}));\n"
              f"const t = JSON.parse(readFileSync({json.dumps(str(tmp_path / 'trials.json'))}));\n"
              "console.log(JSON.stringify(t.map((s) => runFor(e, s))));\n")
    out = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True,
                         text=True, check=True).stdout
    for settings, got in zip(trials, json.loads(out), strict=True):
        try:
            task, model, train = panel.configure(settings)
        except ConfigError as error:
            assert got == {"error": error.spelled({k: p.label for k, p in panel.params.items()})}
            continue
        run = got["run"]
        assert run["task"] == {k: v for k, v in asdict(task).items() if k != "covariance"}
        assert run["model"] == asdict(model.resolved(task))
        assert run["train"].keys() == asdict(train).keys()
        for key, value in asdict(train).items():
            expected = pytest.approx(value, rel=1e-12) if isinstance(value, float) else value
            assert run["train"][key] == expected, (settings, key)
        theory = panel.theory_at(settings)
        assert run["null_loss"] == pytest.approx(theory.null_loss, rel=1e-12)
        assert [level["value"] for level in got["levels"]] == pytest.approx(
            [value for value, _, _ in in_page.theory_levels(theory)], rel=1e-7)


def test_export_names_refused_settings_as_the_panel_does() -> None:
    """A combination the panel refuses is an entry with the panel's message (chapter 5: cubic
    stacks deeper than 3), not a run."""
    panel = PANELS["ch5"]("cpu")
    settings = {name: p.default for name, p in panel.params.items()} | {"degree": 3, "depth": 4}
    entry = in_page._entry(panel, settings)
    assert "error" in entry and "depth" in entry["error"] and "at most 3" in entry["error"]


def test_bad_chapter_is_named() -> None:
    with pytest.raises(ConfigError, match="chapter"):
        in_page.panel_export("ch9")


def test_static_cards_name_their_chapter_and_quote_the_measured_time(monkeypatch) -> None:
    """Each chapter's static card names its chapter for the page's trainer and carries, hidden
    until the page can train, the seconds ``bench/in_page_times.py --store`` measured."""
    import nlicl_lib.pages.panels as panels

    monkeypatch.setenv("NLICL_BOOK_BUILD", "1")
    stored = json.loads(panels.IN_PAGE_TIMES.read_text())
    for chapter, make in PANELS.items():
        html = make("cpu").static_html()
        assert f'data-nlicl-chapter="{chapter}"' in html
        seconds = stored["chapters"][chapter]["seconds"]
        assert 'class="nlicl-static-line nlicl-in-page-time" hidden>' in html
        assert f"trained and tested in {seconds:.0f} s" in html
