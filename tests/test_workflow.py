"""The publishing workflow, ``.github/workflows/publish.yml``: what can be checked without GitHub.

It validates against GitHub's workflow schema (vendored by ``check-jsonschema``, pinned in
requirements.txt: no network), and it agrees with the rest of the repository: it runs every
``make`` target that ``.ci/run`` runs, in the same order, and only targets the Makefile has;
torch comes from the CPU index; the execution cache and pip's downloads are cached; the book's
build knows its commit; and only a push to main publishes ``_build/html`` to the branch the
Colab and Binder buttons open (``nlicl_pages_branch`` of ``nlicl_lib/sphinxext/notebooks.py``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "publish.yml"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
EXEC_CACHE = "_build/.jupyter_cache"  # MyST-NB's execution cache
PIP_CACHE = "~/.cache/pip"
SITE = "_build/html"
GH_PAGES_ACTION = "peaceiris/actions-gh-pages"


# --- reading the files ---------------------------------------------------------------------


def load_workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def triggers(workflow: dict) -> dict:
    """The ``on:`` mapping (PyYAML reads the key ``on`` as the boolean True, YAML 1.1)."""
    on = workflow.get("on", workflow.get(True))
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return dict.fromkeys(on)
    return on or {}


def steps(job: dict) -> list[dict]:
    return job.get("steps") or []


def make_targets(run: str) -> list[str]:
    """The targets of every ``make`` command in a step's script (an option counts as a target,
    so that ``make -C x book`` fails the checks instead of slipping past them)."""
    targets = []
    for args in re.findall(r"(?m)(?:^|[;&|(]\s*)make\b[ \t]+([^;&|\n#)>]+)", run):
        targets += args.split()
    return targets


def job_make_targets(job: dict) -> list[str]:
    return [t for step in steps(job) for t in make_targets(step.get("run", ""))]


def makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set()
    for line in text.splitlines():
        match = re.match(r"^([A-Za-z0-9_.-][A-Za-z0-9_. -]*?)\s*::?(?!=)", line)
        if match:
            targets.update(match.group(1).split())
    return targets


def ci_targets() -> list[str]:
    """The targets ``.ci/run`` makes, in order (its ``make X`` lines, not the echoed names)."""
    text = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    return re.findall(r"(?m)^\s*make\s+([A-Za-z0-9_.-]+)\s*$", text)


def effective_env(workflow: dict, job: dict, step: dict) -> dict:
    return {**(workflow.get("env") or {}), **(job.get("env") or {}), **(step.get("env") or {})}


def uses(step: dict, action: str) -> bool:
    """Whether ``step`` uses ``action`` (``owner/repo[/path]``) at any version."""
    return step.get("uses", "").split("@")[0] == action


def lines(value: object) -> list[str]:
    return [line.strip() for line in str(value or "").splitlines() if line.strip()]


def normal_path(path: str) -> str:
    return path.strip().removeprefix("./").rstrip("/")


def expression(text: object) -> str:
    """``${{ x }}`` (or a bare ``if:`` condition) as ``x``, spaces normalized."""
    text = str(text).strip()
    match = re.fullmatch(r"\$\{\{(.*)\}\}", text, flags=re.S)
    return " ".join((match.group(1) if match else text).split())


def colab_branch() -> str:
    """The branch the Colab and Binder buttons open: ``nlicl_pages_branch`` from _config.yml,
    else the default that the notebooks extension registers."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    configured = ((config.get("sphinx") or {}).get("config") or {}).get("nlicl_pages_branch")
    if configured:
        return configured
    from nlicl_lib.sphinxext.notebooks import setup

    registered = {}
    app = SimpleNamespace(setup_extension=lambda name: None, connect=lambda *a, **k: None,
                          add_builder=lambda *a, **k: None,
                          add_config_value=lambda name, default, *a: registered.update({name: default}))
    setup(app)
    return registered["nlicl_pages_branch"]


def book_cache_paths() -> list[str]:
    """What ``make book`` clears when the book's inputs digest changes (``BOOK_CACHES`` of the
    Makefile: the execution cache and the doctrees) and the digest's stamp
    (``BOOK_INPUTS_STAMP``): restored together, or the stamp would clear what was restored."""
    names = ("BOOK_CACHES", "BOOK_INPUTS_STAMP", "EXTENSION_INPUTS_STAMP")
    values = [make_variable(name) for name in names]
    assert all(values), f"the Makefile no longer defines {names}: {values}"
    return [path for value in values for path in value.split()]


def make_variable(name: str) -> str:
    """The value of the Makefile's variable ``name``, as make expands it."""
    done = subprocess.run(["make", "-s", "--no-print-directory", "--eval",
                           "nlicl-print-%: ; @echo $($*)", f"nlicl-print-{name}"],
                          cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def default_branch() -> str:
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    return config["repository"]["branch"]


# --- GitHub's expressions, the small part that conditions use --------------------------------

TOKEN = re.compile(r"\s*(?:(?P<string>'(?:[^']|'')*')|(?P<op>==|!=|&&|\|\||!|\(|\))"
                   r"|(?P<name>[A-Za-z_][A-Za-z0-9_.-]*))")
STATUS_FUNCTIONS = {"success": True, "always": True, "cancelled": False, "failure": False}


def evaluate(condition: str, context: dict[str, str]) -> bool:
    """Evaluate an ``if:`` condition made of ``context`` names, string literals, ==, !=, &&,
    ||, ! and the status functions (GitHub compares strings ignoring case). Anything else
    raises ValueError: the test must understand every condition it passes."""
    text, pos, python = expression(condition), 0, []
    names = {"true": True, "false": False}
    while pos < len(text):
        match = TOKEN.match(text, pos)
        if not match or match.end() == pos:
            raise ValueError(f"cannot read {text[pos:]!r} in {condition!r}")
        pos = match.end()
        if match.group("string"):
            python.append(repr(match.group("string")[1:-1].replace("''", "'").lower()))
        elif match.group("op"):
            python.append({"&&": " and ", "||": " or ", "!": " not "}.get(match.group("op"),
                                                                          match.group("op")))
        else:
            name = match.group("name")
            if name in STATUS_FUNCTIONS:
                names[name] = lambda value=STATUS_FUNCTIONS[name]: value
            elif name in context:
                names[name] = context[name].lower()
            elif name not in names:
                raise ValueError(f"{name!r} in {condition!r} is not one of {sorted(context)}")
            python.append(f"_v[{name!r}]")
    return bool(eval("".join(python), {"__builtins__": {}}, {"_v": names}))


def runs(condition: object, event: str, ref: str) -> bool:
    if condition is None:
        return True
    return evaluate(str(condition), {"github.event_name": event, "github.ref": ref})


# --- the tests -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workflow() -> dict:
    return load_workflow()


def test_matches_githubs_workflow_schema():
    """GitHub's workflow schema (SchemaStore's, as vendored by check-jsonschema), and every job
    has a timeout (check-jsonschema's own rule): a hung build must not hold a runner 6 hours."""
    for schema in ("vendor.github-workflows", "custom.github-workflows-require-timeout"):
        result = subprocess.run(
            [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(WORKFLOW)],
            capture_output=True, text=True, timeout=120,
        )
        assert result.returncode == 0, f"{schema}:\n{result.stdout}{result.stderr}"


def test_structure(workflow):
    """The shape GitHub needs, checked by hand as well (independent of the schema's version)."""
    assert triggers(workflow), "no `on:` triggers"
    assert workflow.get("jobs"), "no jobs"
    for job_id, job in workflow["jobs"].items():
        assert job.get("runs-on"), f"job {job_id} has no runs-on"
        assert steps(job), f"job {job_id} has no steps"
        for index, step in enumerate(steps(job)):
            assert ("uses" in step) != ("run" in step), \
                f"step {index} of job {job_id} needs exactly one of `uses` and `run`: {step}"


def test_triggers(workflow):
    on = triggers(workflow)
    assert default_branch() in ((on.get("push") or {}).get("branches") or []), \
        f"the workflow does not run on a push to {default_branch()}"
    assert "pull_request" in on, "pull requests are not built and tested"
    assert "workflow_dispatch" in on, "no manual run"


def test_every_make_target_exists(workflow):
    known = makefile_targets()
    assert {"lint", "test", "book", "browser-test", "notebook-test"} <= known  # the parser works
    used = [t for job in workflow["jobs"].values() for t in job_make_targets(job)]
    assert used, "the workflow runs no make target"
    unknown = sorted(set(used) - known)
    assert not unknown, f"the workflow runs make targets the Makefile lacks: {unknown}"


def test_runs_what_ci_runs_in_its_order(workflow):
    """Every target of .ci/run is made by the workflow, and each job makes its targets in
    .ci/run's order (the browser and notebook tests need the book that `make book` built)."""
    ci = ci_targets()
    assert ci[:4] == ["lint", "test", "test-slow", "book"], f".ci/run's targets read as {ci}"
    jobs = {job_id: job_make_targets(job) for job_id, job in workflow["jobs"].items()}
    made = {t for targets in jobs.values() for t in targets}
    missing = [t for t in ci if t not in made]
    assert not missing, f".ci/run makes {missing}, the workflow does not"
    for job_id, targets in jobs.items():
        in_ci = [t for t in targets if t in ci]
        assert in_ci == sorted(in_ci, key=ci.index), \
            f"job {job_id} makes {in_ci}, .ci/run's order is {ci}"
        if "browser-test" in in_ci or "notebook-test" in in_ci:
            assert "book" in in_ci, f"job {job_id} tests a book it did not build"


def test_torch_comes_from_the_cpu_index(workflow):
    """Every make target sets up .venv first, so every step that runs make must see the CPU
    index; requirements.txt's pin must have no local label, so that it matches `+cpu`."""
    pins = re.findall(r"(?m)^torch\s*==\s*(\S+)", (ROOT / "requirements.txt").read_text())
    assert len(pins) == 1 and re.fullmatch(r"\d+(\.\d+)*", pins[0]), \
        f"requirements.txt should pin torch==X.Y.Z (no local label), found {pins}"
    checked = 0
    for job_id, job in workflow["jobs"].items():
        for step in steps(job):
            if not make_targets(step.get("run", "")):
                continue
            env = effective_env(workflow, job, step)
            assert env.get("PIP_EXTRA_INDEX_URL") == CPU_INDEX, \
                f"job {job_id}, step {step.get('name') or step['run']!r}: torch would be the CUDA build"
            assert "PIP_INDEX_URL" not in env, f"job {job_id} replaces PyPI"
            checked += 1
    assert checked


def test_no_job_needs_node(workflow):
    """Nothing the Makefile runs needs npm (the jupyterlab-myst render check is gone)."""
    assert not re.search(r"\bnpm\b", (ROOT / "Makefile").read_text(encoding="utf-8"))
    for job in workflow["jobs"].values():
        assert not any(uses(s, "actions/setup-node") for s in steps(job))


def test_the_book_build_knows_its_commit(workflow):
    book_steps = [(job, step) for job in workflow["jobs"].values() for step in steps(job)
                  if "book" in make_targets(step.get("run", ""))]
    assert book_steps, "no step runs `make book`"
    for job, step in book_steps:
        commit = effective_env(workflow, job, step).get("NLICL_COMMIT")
        assert commit is not None and expression(commit) == "github.sha", \
            f"NLICL_COMMIT is {commit!r} in the `make book` step, not ${{{{ github.sha }}}}"


def cache_steps(job: dict, path: str, actions: tuple[str, ...]) -> list[int]:
    return [i for i, step in enumerate(steps(job))
            if any(uses(step, a) for a in actions)
            and path in [normal_path(p) for p in lines((step.get("with") or {}).get("path"))]]


def first_step(job: dict, target: str) -> int:
    return next(i for i, step in enumerate(steps(job)) if target in make_targets(step.get("run", "")))


def test_execution_cache_is_where_the_build_keeps_it():
    assert EXEC_CACHE in book_cache_paths()


def test_execution_cache_is_restored_and_saved(workflow):
    for job_id, job in workflow["jobs"].items():
        if "book" not in job_make_targets(job):
            continue
        book = first_step(job, "book")
        restores = [i for i in cache_steps(job, EXEC_CACHE, ("actions/cache", "actions/cache/restore"))
                    if i < book]
        assert restores, f"job {job_id} does not restore {EXEC_CACHE} before `make book`"
        step = steps(job)[restores[0]]
        paths = [normal_path(p) for p in lines(step["with"].get("path"))]
        assert sorted(paths) == sorted(book_cache_paths()), \
            f"the cached paths {paths} are not what `make book` clears with its stamp"
        key = str(step["with"].get("key", ""))
        digest = [s for s in steps(job)[:restores[0]] if "book-digest" in make_targets(s.get("run", ""))]
        assert digest and digest[0].get("id"), "no step with an id computes `make book-digest`"
        assert f"steps.{digest[0]['id']}.outputs.digest" in key, \
            f"the execution cache's key {key!r} is not keyed on the book's inputs digest"
        # A key, once saved, is never overwritten: a key that stays the same from one run to the
        # next would keep the first run's executions forever.
        assert re.search(r"github\.(run_id|sha)", key), \
            f"the execution cache's key {key!r} is the same in every run: it would never be updated"
        prefixes = lines(step["with"].get("restore-keys"))
        assert prefixes, "no restore-keys: an older execution cache would not be restored"
        assert all(key.startswith(p) and p != key for p in prefixes), \
            f"restore-keys {prefixes} are not prefixes of the key {key!r}"
        saved_by_restore = uses(step, "actions/cache")
        saves = [i for i in cache_steps(job, EXEC_CACHE, ("actions/cache/save",)) if i > book]
        assert saved_by_restore or saves, f"job {job_id} never saves {EXEC_CACHE}"
        for i in saves:
            save_key = expression(steps(job)[i]["with"].get("key", ""))
            assert save_key in (expression(key), f"steps.{step.get('id')}.outputs.cache-primary-key"), \
                f"the save step's key {save_key!r} is not the restore step's"


def test_pip_downloads_are_cached(workflow):
    for job_id, job in workflow["jobs"].items():
        targets = job_make_targets(job)
        if not targets:
            continue
        first_make = first_step(job, targets[0])
        found = [i for i in cache_steps(job, PIP_CACHE, ("actions/cache", "actions/cache/restore"))
                 if i < first_make]
        assert found, f"job {job_id} does not restore {PIP_CACHE} before its first make"
        key = str(steps(job)[found[0]]["with"].get("key", "")).replace('"', "'")
        assert "requirements.txt" in key, f"pip's cache key {key!r} ignores requirements.txt"


def deploy_jobs(workflow: dict) -> list[tuple[str, dict, dict]]:
    return [(job_id, job, step) for job_id, job in workflow["jobs"].items() for step in steps(job)
            if uses(step, GH_PAGES_ACTION)]


def test_deploys_the_site_to_the_colab_branch(workflow):
    deploys = deploy_jobs(workflow)
    assert len(deploys) == 1, f"expected one {GH_PAGES_ACTION} step, found {len(deploys)}"
    job_id, job, step = deploys[0]
    options = step.get("with") or {}
    assert normal_path(str(options.get("publish_dir", "public"))) == SITE, \
        f"publishes {options.get('publish_dir')!r}, not {SITE}"
    branch = options.get("publish_branch", "gh-pages")
    assert branch == colab_branch(), \
        f"publishes to {branch!r}, but the Colab button opens branch {colab_branch()!r}"
    assert options.get("enable_jekyll") in (None, False, "false"), "Jekyll would drop _static, _colab"
    index = steps(job).index(step)
    assert any(f"{SITE}/.nojekyll" in s.get("run", "") for s in steps(job)[:index]), \
        f"no step writes {SITE}/.nojekyll before the deployment"
    assert expression(options.get("github_token", "")) == "secrets.GITHUB_TOKEN"

    if "book" not in job_make_targets(job):
        # The site comes from the job that built it, as an artifact.
        downloads = [s for s in steps(job)[:index] if uses(s, "actions/download-artifact")]
        assert downloads and normal_path(str(downloads[0]["with"]["path"])) == SITE
        name = downloads[0]["with"]["name"]
        needs = job.get("needs") or []
        needs = [needs] if isinstance(needs, str) else needs
        uploads = [s for n in needs for s in steps(workflow["jobs"][n])
                   if uses(s, "actions/upload-artifact") and s["with"].get("name") == name]
        assert uploads and normal_path(str(uploads[0]["with"]["path"])) == SITE, \
            f"no job that {job_id} needs uploads {SITE} as artifact {name!r}"


def test_tests_pass_before_anything_is_published(workflow):
    job_id, job, _ = deploy_jobs(workflow)[0]
    needs = job.get("needs") or []
    needs = {needs} if isinstance(needs, str) else set(needs)
    testing = {j for j, other in workflow["jobs"].items() if job_make_targets(other) and j != job_id}
    assert testing <= needs, f"{job_id} may publish before {sorted(testing - needs)} passed"
    if job_make_targets(job):
        index = steps(job).index(deploy_jobs(workflow)[0][2])
        assert set(ci_targets()) <= {t for s in steps(job)[:index] for t in make_targets(s.get("run", ""))}


@pytest.mark.parametrize(("event", "ref", "publishes"), [
    ("push", "refs/heads/DEFAULT", True),
    ("workflow_dispatch", "refs/heads/DEFAULT", True),
    ("pull_request", "refs/pull/7/merge", False),
    ("pull_request", "refs/heads/DEFAULT", False),
    ("push", "refs/heads/feature", False),
    ("workflow_dispatch", "refs/heads/feature", False),
])
def test_publishes_only_from_main(workflow, event, ref, publishes):
    ref = ref.replace("DEFAULT", default_branch())
    _, job, step = deploy_jobs(workflow)[0]
    assert (runs(job.get("if"), event, ref) and runs(step.get("if"), event, ref)) is publishes, \
        f"{event} on {ref}: publishes should be {publishes} (job if: {job.get('if')!r}, step if: {step.get('if')!r})"


def test_evaluate_reads_conditions():
    """The evaluator the previous test relies on."""
    context = {"github.event_name": "push", "github.ref": "refs/heads/main"}
    assert evaluate("${{ github.ref == 'refs/heads/main' && github.event_name != 'pull_request' }}", context)
    assert not evaluate("github.ref == 'refs/heads/main' && !(github.event_name == 'push')", context)
    assert evaluate("success() && github.ref == 'REFS/HEADS/MAIN'", context)
    with pytest.raises(ValueError):
        evaluate("github.base_ref == 'main'", context)
    with pytest.raises(ValueError):
        evaluate("contains(github.ref, 'main')", context)


def test_permissions_are_minimal(workflow):
    """Read-only by default; only the job that pushes gh-pages may write, and only contents."""
    assert workflow.get("permissions") in ({"contents": "read"}, {}), \
        f"workflow permissions {workflow.get('permissions')!r}: want contents: read"
    deploy_id = deploy_jobs(workflow)[0][0]
    for job_id, job in workflow["jobs"].items():
        permissions = job.get("permissions")
        if job_id == deploy_id:
            assert permissions == {"contents": "write"}, f"{job_id} has {permissions!r}"
        else:
            assert permissions is None or "write" not in str(permissions), f"{job_id} may write"


def test_browser_test_runs_on_debian(workflow):
    """`make chromium` installs Debian's chromium only where /usr/bin/chromium is missing, and
    GitHub's Ubuntu image has one of its own: the browser test runs in a Debian container with
    Python 3.11, as on CI."""
    for job_id, job in workflow["jobs"].items():
        if "browser-test" not in job_make_targets(job):
            continue
        container = job.get("container")
        image = container.get("image") if isinstance(container, dict) else container
        assert image and re.match(r"^(docker\.io/)?(library/)?python:3\.11[.\d]*-bookworm$", image), \
            f"job {job_id} runs the browser test in {image!r}, not Debian 12 with Python 3.11"
