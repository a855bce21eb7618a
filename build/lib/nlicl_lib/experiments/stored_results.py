"""The stored results of ``reproduce``: the Results page reads them instead of training.

``make reproduce`` (``python -m nlicl_lib reproduce --all --store``) runs every experiment and
writes :data:`STORE_FILE`, committed with the library: one row per experiment (the numbers the
table shows, the seconds it took, its settings and a **key**) and, for the whole file, the commit
it was computed at, the date and the machine.

A row's key is a SHA-256 over what its numbers depend on:

- the experiment's **settings**: its task, model and training configs (``asdict``, with the
  seed), its reference (theory value or linear bound) and its training purpose, found without
  training by :func:`~nlicl_lib.experiments.reproduce.experiment_settings`;
- its **own code**: the source of its ``run`` function (with its registration) and of the
  pipeline every row shares in ``reproduce`` (``_trained_vs_theory``, ``run_experiments``,
  ``Row``), so editing one experiment's definition makes only that row stale;
- the **library code it runs**: every ``nlicl_lib`` module that ``reproduce`` imports, directly
  or through other modules (the static import closure: core, theory, training and
  ``experiments.run``; not the book, the CLI, the studies or the sweeps). The experiments share
  this closure: which parts of a module run is decided at run time by the configs, so a
  narrower per-experiment cut could miss a helper and keep a changed row "fresh".

:func:`stale_rows` recomputes the keys (hashing, no training) and names each row whose
settings or code changed; ``tests/test_stored_results.py`` fails on any.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import os
import platform
import subprocess
import time
from ast import Import, ImportFrom, parse, walk
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from nlicl_lib.core.device import DeviceLike, choose_threads, describe_device, resolve_device
from nlicl_lib.core.errors import ConfigError
from nlicl_lib.experiments import reproduce
from nlicl_lib.experiments.reproduce import EXPERIMENTS, Row, experiment_settings, run_experiments

STORE_FILE = Path(__file__).parent / "data" / "reproduce.json"
"""The stored results (package data: installed with the library)."""
STORE_FORMAT = 1
REFRESH = "make reproduce"
"""The command that recomputes :data:`STORE_FILE`."""

_PACKAGE_ROOT = Path(reproduce.__file__).resolve().parents[1]
_REPO_ROOT = _PACKAGE_ROOT.parent
_PIPELINE = (reproduce._trained_vs_theory, reproduce.run_experiments, reproduce.Row)
"""The code of ``reproduce`` that every row runs besides its own ``run`` function."""


def _sha256(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def _module_path(module: str) -> Path | None:
    """The source file of an ``nlicl_lib`` module (a package's ``__init__.py``), or None."""
    spec = importlib.util.find_spec(module)
    return None if spec is None or spec.origin is None else Path(spec.origin)


def _imported_modules(path: Path, module: str) -> set[str]:
    """The ``nlicl_lib`` modules a source file imports (dotted names), with the packages that
    importing them runs (their ``__init__``)."""
    found = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in walk(parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for name in names:
            if name.split(".")[0] != "nlicl_lib":
                continue
            parts = name.split(".")
            for end in range(1, len(parts) + 1):
                prefix = ".".join(parts[:end])
                if prefix in found:
                    continue
                try:
                    is_module = _module_path(prefix) is not None
                except (ImportError, ValueError):  # `from package import name`: not a module
                    is_module = False
                if is_module:
                    found.add(prefix)
    return found


def library_sources() -> dict[str, str]:
    """SHA-256 of each library module the experiments run, by path below the repository root:
    the import closure of ``reproduce`` without ``reproduce`` itself (its code enters each key
    function by function)."""
    seen: set[str] = set()
    todo = sorted(_imported_modules(Path(reproduce.__file__), reproduce.__name__))
    while todo:
        module = todo.pop()
        if module in seen or module == reproduce.__name__:
            continue
        seen.add(module)
        path = _module_path(module)
        if path is not None and path.suffix == ".py":
            todo += sorted(_imported_modules(path, module) - seen)
    hashes = {}
    for module in seen:
        path = _module_path(module)
        if path is not None and path.suffix == ".py":
            relative = path.resolve().relative_to(_REPO_ROOT).as_posix()
            hashes[relative] = _sha256(path.read_bytes().replace(b"\r\n", b"\n"))  # any checkout
    return dict(sorted(hashes.items()))


def key_parts(name: str, seed: int) -> dict:
    """What experiment ``name``'s row depends on, without the shared library sources: its
    settings and the hashes of its own code and of the shared pipeline."""
    experiment = EXPERIMENTS[name]
    return {"experiment": name, "chapter": experiment.chapter, "seed": seed,
            "settings": experiment_settings(name, seed),
            "run_source": _sha256(inspect.getsource(experiment.run)),
            "pipeline_source": _sha256("\n".join(inspect.getsource(f) for f in _PIPELINE))}


def row_key(parts: dict, sources: dict[str, str]) -> str:
    """The key of a row from its :func:`key_parts` and the :func:`library_sources`."""
    canonical = json.dumps({"format": STORE_FORMAT, **parts, "library": sources}, sort_keys=True,
                           separators=(",", ":"))
    return _sha256(canonical)


def git_commit(root: Path = _REPO_ROOT) -> str | None:
    """``git rev-parse HEAD`` in ``root``, with ``-dirty`` when tracked or untracked files
    differ from it; None outside a git checkout."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                              text=True, check=True, timeout=30).stdout.strip()
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain"],
                                capture_output=True, text=True, check=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("-dirty" if status.strip() else "")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(device: DeviceLike = "auto", threads: int | str = "auto") -> dict:
    """Where results are computed: CPU model, cores, torch and the threads the runs use
    (:func:`~nlicl_lib.core.device.choose_threads` of ``threads``), the device."""
    chosen = choose_threads(threads)
    return {"cpu": _cpu_model(), "cores": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "torch": torch.__version__,
            "torch_threads": chosen,
            "device": describe_device(resolve_device(device), threads=chosen)}


def run_and_store(names: list[str] | None = None, device: DeviceLike = "auto", seed: int = 0,
                  json_dir: str | os.PathLike | None = None, progress: bool | None = None,
                  path: Path = STORE_FILE, threads: int | str = "auto") -> list[Row]:
    """:func:`run_experiments` over every experiment, then write their rows to ``path``. The
    commit and the keys are taken before training: they describe the code that ran."""
    if names:
        raise ConfigError("store", True, "every experiment (--all): the stored file holds them all")
    commit = git_commit()
    sources = library_sources()
    parts = {name: key_parts(name, seed) for name in EXPERIMENTS}
    start = time.perf_counter()
    rows = run_experiments(None, device, seed, json_dir, progress, threads=threads)
    seconds = time.perf_counter() - start
    data = {
        "format": STORE_FORMAT,
        "commit": commit,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seed": seed,
        "seconds": seconds,
        "machine": machine(device, threads),
        "refresh": REFRESH,
        "library": sources,
        "rows": [{**asdict(row), "ratio": row.ratio, "description": EXPERIMENTS[row.experiment].description,
                  "key": row_key(parts[row.experiment], sources), **parts[row.experiment]}
                 for row in rows],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)  # all or nothing
    return rows


@dataclass(frozen=True)
class StoredResults:
    """The content of :data:`STORE_FILE`: ``rows`` as the table takes them, ``data`` as stored."""

    rows: list[Row]
    data: dict

    @property
    def commit(self) -> str:
        return self.data.get("commit") or "unknown"

    @property
    def date(self) -> str:
        return self.data["date"]

    @property
    def machine(self) -> dict:
        return self.data["machine"]


def load_results(path: Path = STORE_FILE) -> StoredResults:
    """Read the stored results (:func:`run_and_store` wrote them)."""
    if not path.exists():
        raise ConfigError("results", str(path), f"a file written by `{REFRESH}`")
    data = json.loads(path.read_text(encoding="utf-8"))
    fields = Row.__dataclass_fields__
    rows = [Row(**{k: v for k, v in row.items() if k in fields}) for row in data["rows"]]
    return StoredResults(rows, data)


def stale_rows(stored: StoredResults) -> dict[str, str]:
    """Each experiment whose stored row no longer matches its settings and code, with why
    (settings, its own code, the shared pipeline, library modules, or a missing/unknown row).
    Recomputes keys only: hashing, no training."""
    data = stored.data
    seed = data.get("seed", 0)
    sources = library_sources()
    changed_modules = sorted(p for p in set(sources) | set(data.get("library", {}))
                             if sources.get(p) != data.get("library", {}).get(p))
    stored_rows = {row["experiment"]: row for row in data["rows"]}
    stale = {}
    for name in EXPERIMENTS:
        if name not in stored_rows:
            stale[name] = "no stored row"
            continue
        row, parts = stored_rows[name], key_parts(name, seed)
        if row.get("key") == row_key(parts, sources):
            continue
        reasons = []
        if row.get("settings") != parts["settings"]:
            reasons.append("settings changed: " + ", ".join(_differences(row.get("settings"),
                                                                         parts["settings"])))
        if row.get("chapter") != parts["chapter"]:
            reasons.append("chapter changed")
        if row.get("run_source") != parts["run_source"]:
            reasons.append("its run function changed")
        if row.get("pipeline_source") != parts["pipeline_source"]:
            reasons.append("the reproduce pipeline changed")
        if changed_modules:
            reasons.append("library modules changed: " + ", ".join(changed_modules))
        stale[name] = "; ".join(reasons) or "key differs"
    for name in stored_rows:
        if name not in EXPERIMENTS:
            stale[name] = "no such experiment any more"
    return stale


def _differences(old: object, new: object, prefix: str = "") -> list[str]:
    """Dotted paths where two JSON-like values differ, with the old and new values."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in sorted(set(old) | set(new), key=str):
            found += _differences(old.get(key), new.get(key), f"{prefix}{key}.")
        return found
    return [] if old == new else [f"{prefix.rstrip('.')} {old!r} -> {new!r}"]
