"""The publishing workflow, ``.github/workflows/publish.yml``, checked without GitHub."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "publish.yml"
SITE = "_build/html"


@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def steps(job: dict) -> list[dict]:
    return job.get("steps") or []


def make_targets(run: str) -> list[str]:
    """The targets of every ``make`` command of a script (an option counts as a target)."""
    return [t for args in re.findall(r"(?m)(?:^|[;&|(]\s*)make\b[ \t]+([^;&|\n#)>]+)", run)
            for t in args.split()]


def job_targets(job: dict) -> list[str]:
    return [t for step in steps(job) for t in make_targets(step.get("run", ""))]


def uses(step: dict, action: str) -> bool:
    return step.get("uses", "").split("@")[0] == action


def runs(condition: object, event: str, ref: str) -> bool:
    """An ``if:`` made of github.ref, github.event_name, string literals, ==, !=, &&, || and !."""
    if condition is None:
        return True
    text = re.sub(r"^\$\{\{(.*)\}\}$", r"\1", str(condition).strip(), flags=re.S)
    text = text.replace("github.event_name", repr(event)).replace("github.ref", repr(ref))
    text = text.replace("&&", " and ").replace("||", " or ").replace("!=", " != ")
    text = re.sub(r"!(?!=)", " not ", text)
    assert re.fullmatch(r"[\s'\w/.()=!-]*", text), f"cannot read {condition!r}"
    return bool(eval(text, {"__builtins__": {}}))  # noqa: S307 (a checked expression)


def test_matches_githubs_workflow_schema():
    """GitHub's schema (SchemaStore's, vendored by check-jsonschema), and every job has a
    timeout: a hung build must not hold a runner six hours."""
    for schema in ("vendor.github-workflows", "custom.github-workflows-require-timeout"):
        result = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema",
                                 schema, str(WORKFLOW)], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, f"{schema}:\n{result.stdout}{result.stderr}"


@pytest.mark.parametrize(("event", "ref", "publishes"), [
    ("push", "refs/heads/DEFAULT", True), ("workflow_dispatch", "refs/heads/DEFAULT", True),
    ("pull_request", "refs/pull/7/merge", False), ("pull_request", "refs/heads/DEFAULT", False),
    ("push", "refs/heads/feature", False), ("workflow_dispatch", "refs/heads/feature", False),
])
def test_publishes_the_tested_site_to_the_colab_branch_from_main_only(workflow, event, ref,
                                                                      publishes):
    branch = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["branch"]
    ref = ref.replace("DEFAULT", branch)
    deploys = [(job_id, job, step) for job_id, job in workflow["jobs"].items()
               for step in steps(job) if uses(step, "peaceiris/actions-gh-pages")]
    assert len(deploys) == 1
    job_id, job, step = deploys[0]
    assert (runs(job.get("if"), event, ref) and runs(step.get("if"), event, ref)) is publishes
    assert step["with"]["publish_dir"].rstrip("/") in (SITE, f"./{SITE}")
    assert step["with"].get("publish_branch", "gh-pages") == "gh-pages"  # the buttons' branch
    assert any(f"{SITE}/.nojekyll" in s.get("run", "") for s in steps(job))
    testing = {j for j, other in workflow["jobs"].items() if job_targets(other)}
    needs = job.get("needs") or []
    assert testing <= ({needs} if isinstance(needs, str) else set(needs)), f"{job_id} needs {needs}"
    assert workflow.get("permissions") == {"contents": "read"}
    assert job.get("permissions") == {"contents": "write"}
