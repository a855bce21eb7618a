"""Run notebooks in kernels of other package versions, for the Colab and Binder tests:
:func:`ensure_venv` makes (or reuses, while its stamp holds the hash of its requirement files,
``after`` commands and Python) a venv ``.envs/<name>``; :func:`run_notebook` executes a notebook
top to bottom in a fresh kernel of such a venv, on the CPU and without the book build's
environment, and measures its time and peak memory. (Not a test module: pytest's ``prepend``
import mode puts ``tests/`` on ``sys.path``.)
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
ENVS_DIR = ROOT / ".envs"
STAMP_NAME = ".nlicl-env-stamp"
KERNEL_NAME = "nlicl-venv"
OUTPUT_TAIL_LINES = 40

PEAK_MEMORY_CODE = (  # the last cell: the kernel's peak resident memory in bytes
    "import resource, sys\n"
    "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
    "print(peak * (1 if sys.platform == 'darwin' else 1024))"
)


class EnvError(RuntimeError):
    """A set-up command failed: the message names it and ends with its output's tail."""


class CellError(RuntimeError):
    """A cell raised: nbclient's message (the cell and its traceback), without colours."""


ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass
class Run:
    """One execution of a notebook by :func:`run_notebook`."""

    seconds: float  # wall time, kernel start-up included
    peak_bytes: int  # the kernel's peak resident memory (ru_maxrss)
    notebook: nbformat.NotebookNode  # executed, with the prelude and the memory cell


def _tail(text: str, lines: int = OUTPUT_TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _run(argv: Sequence[str], *, cwd: Path, env: dict[str, str] | None = None) -> None:
    """Run ``argv``; on failure raise :class:`EnvError` naming it, with its output's tail."""
    argv = [str(a) for a in argv]
    try:
        done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, check=False)
    except OSError as error:
        raise EnvError(f"`{shlex.join(argv)}` (in {cwd}) could not start: {error}") from error
    if done.returncode != 0:
        raise EnvError(f"`{shlex.join(argv)}` (in {cwd}) exited with {done.returncode}; "
                       f"the last lines of its output:\n{_tail(done.stdout)}")


def env_digest(requirement_files: Sequence[Path], after: Sequence[Sequence[str]] = ()) -> str:
    """The stamp's hash: the requirement files, the ``after`` commands and the files they
    name (a script such as ``binder/postBuild``), and the Python that builds the venv."""
    digest = hashlib.sha256()
    digest.update(f"{sys.version}\n{sys.base_prefix}\n".encode())
    for path in requirement_files:
        digest.update(Path(path).read_bytes())
        digest.update(b"\0")
    commands = [list(map(str, command)) for command in after]
    digest.update(json.dumps(commands).encode())
    for argument in (a for command in commands for a in command):  # a script they run
        path = Path(argument) if Path(argument).is_absolute() else ROOT / argument
        try:
            if path.is_file():
                digest.update(path.read_bytes())
        except (OSError, ValueError):  # not a path: a name too long, a NUL byte
            pass
    return digest.hexdigest()


def venv_python(name: str) -> Path:
    return ENVS_DIR / name / "bin" / "python"


def ensure_venv(name: str, requirement_files: list[Path],
                after: Sequence[Sequence[str]] = ()) -> Path:
    """The Python of ``.envs/<name>``: reused when its stamp matches :func:`env_digest`, else
    made anew: ``pip install -r`` of every requirement file in one call, then each ``after``
    command in the repository root with the venv first on ``PATH``. A failing step raises
    :class:`EnvError` and leaves no stamp."""
    folder = ENVS_DIR / name
    python = venv_python(name)
    stamp = folder / STAMP_NAME
    wanted = env_digest(requirement_files, after)
    if python.exists() and stamp.exists() and stamp.read_text(encoding="utf-8").strip() == wanted:
        return python
    if folder.exists():
        shutil.rmtree(folder)
    ENVS_DIR.mkdir(parents=True, exist_ok=True)
    _run([sys.executable, "-m", "venv", folder], cwd=ROOT)
    env = venv_environment(python)
    install = [python, "-m", "pip", "install", "--quiet"]
    for path in requirement_files:
        install += ["-r", Path(path).resolve()]
    if requirement_files:
        _run(install, cwd=ROOT, env=env)
    for command in after:
        _run(list(command), cwd=ROOT, env=env)
    stamp.write_text(wanted + "\n", encoding="utf-8")
    return python


def venv_environment(python: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default ``os.environ``) with the venv first on ``PATH``, ``VIRTUAL_ENV`` set and
    ``PYTHONHOME``/``PYTHONPATH`` removed."""
    env = dict(os.environ if base is None else base)
    for key in ("PYTHONHOME", "PYTHONPATH", "VIRTUAL_ENV"):
        env.pop(key, None)
    bin_dir = Path(python).parent
    env["PATH"] = os.pathsep.join([str(bin_dir), *filter(None, env.get("PATH", "").split(os.pathsep))])
    env["VIRTUAL_ENV"] = str(bin_dir.parent)
    return env


def kernel_environment(python: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """As in a reader's session: the venv's, on the CPU, without ``NLICL_BOOK_BUILD``."""
    result = venv_environment(python, env)
    result.pop("NLICL_BOOK_BUILD", None)
    result["CUDA_VISIBLE_DEVICES"] = ""
    result.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # ipykernel's debugger: no warning
    return result


def _prepared(notebook: nbformat.NotebookNode, prelude: Sequence[str]) -> nbformat.NotebookNode:
    """A copy: outputs and widget state cleared, ``prelude`` cells first, the memory cell last."""
    result = copy.deepcopy(notebook)
    for cell in result.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    result.metadata.pop("widgets", None)
    first = [nbformat.v4.new_code_cell(source) for source in prelude]
    result.cells = first + list(result.cells) + [nbformat.v4.new_code_cell(PEAK_MEMORY_CODE)]
    result.nbformat_minor = max(result.get("nbformat_minor", 0), 5)  # cell ids, unique ones
    for index, cell in enumerate(result.cells):
        cell["id"] = f"nlicl-{index}"
    return result


def run_notebook(python: Path, notebook: nbformat.NotebookNode, folder: Path, *,
                 timeout_s: int = 600, prelude: Sequence[str] = (),
                 env: dict[str, str] | None = None) -> Run:
    """Execute a copy of ``notebook`` (:func:`_prepared`) in a fresh kernel of ``python`` (an
    environment's interpreter with ipykernel) in ``folder``, with :func:`kernel_environment`
    of ``env``; ``timeout_s`` bounds each cell. A failing cell raises :class:`CellError`."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    prepared = _prepared(notebook, prelude)
    with tempfile.TemporaryDirectory(prefix="nlicl-kernelspec-") as kernels:
        spec_dir = Path(kernels) / KERNEL_NAME
        spec_dir.mkdir()
        spec = {"argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": f"Python ({python})", "language": "python"}
        (spec_dir / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
        manager = AsyncKernelManager(kernel_name=KERNEL_NAME,
                                     kernel_spec_manager=KernelSpecManager(kernel_dirs=[kernels]))
        client = NotebookClient(prepared, km=manager, timeout=timeout_s, allow_errors=False,
                                kernel_name=KERNEL_NAME,
                                resources={"metadata": {"path": str(folder)}})
        # No stand-in for the Output widget (the tests read what cells print): nbclient's sends on
        # the shell channel while awaiting a reply there, whose wake-up is then missed until the
        # cell timeout (jupyter/nbclient#312; a 5 s panel press held 600 s in 2 of 3 CI runs)
        client.widget_registry = {}
        start = time.perf_counter()
        # cleanup_kc: shut the kernel down afterwards (nbclient keeps a kernel it did not start)
        try:
            client.execute(cleanup_kc=True, env=kernel_environment(python, env), cwd=str(folder))
        except CellExecutionError as error:
            raise CellError(ANSI_ESCAPE.sub("", str(error))) from None
        seconds = time.perf_counter() - start
    outputs = [o for o in prepared.cells[-1].outputs if o.get("output_type") == "stream"]
    peak = int(outputs[-1]["text"].strip().splitlines()[-1])
    return Run(seconds=seconds, peak_bytes=peak, notebook=prepared)
