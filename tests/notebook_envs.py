"""Run notebooks in kernels of other package versions: the test harness of the Colab and Binder
checks (``tests/test_colab.py``, the Binder test).

* :func:`ensure_venv` makes (or reuses) a virtual environment ``.envs/<name>`` of the
  repository from requirement files, e.g. ``tests/envs/colab-requirements.txt`` (Colab's
  versions). It is reused while a stamp file holds the hash of those files' contents, of the
  ``after`` commands and of the Python that made it; any change rebuilds it from scratch. pip's
  download cache (``~/.cache/pip`` unless ``PIP_CACHE_DIR`` says otherwise) is kept, so a
  rebuild downloads nothing it had before.
* :func:`run_notebook` executes a notebook top to bottom in a fresh kernel of such an
  environment's Python (``python -m ipykernel_launcher``), driven by nbclient from the test's
  own interpreter, on the CPU and without the book build's environment, and measures the
  kernel's time and peak memory.

Not a test module (no ``test_`` prefix); tests import it as ``notebook_envs``: pytest's default
``prepend`` import mode puts ``tests/`` (which has no ``__init__.py``) on ``sys.path``.
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

PEAK_MEMORY_CODE = (
    "import resource, sys\n"
    "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
    "print(peak * (1 if sys.platform == 'darwin' else 1024))"  # bytes
)
"""The cell appended to every notebook: prints the kernel's peak resident memory in bytes
(as ``tests/test_notebooks.py`` measures it)."""


class EnvError(RuntimeError):
    """A command that sets up an environment failed; the message names it and ends with the
    tail of its output."""


class CellError(RuntimeError):
    """A cell of a notebook run by :func:`run_notebook` raised: the message is nbclient's (the
    cell's source and its traceback), without the terminal colours."""


ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass
class Run:
    """One execution of a notebook by :func:`run_notebook`."""

    seconds: float
    """Wall time of the execution, kernel start-up included."""
    peak_bytes: int
    """The kernel's peak resident memory (``ru_maxrss``), in bytes."""
    notebook: nbformat.NotebookNode
    """The executed notebook (prelude cells and the memory cell included)."""


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
    """The hash a reusable environment's stamp holds: the requirement files' contents (in
    order), the ``after`` commands, the contents of the files they name (a script such as
    ``binder/postBuild``; relative paths from the repository root) and the Python that builds
    the environment."""
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
    """The Python of the environment ``.envs/<name>`` (which may not exist)."""
    return ENVS_DIR / name / "bin" / "python"


def ensure_venv(name: str, requirement_files: list[Path],
                after: Sequence[Sequence[str]] = ()) -> Path:
    """Create (or reuse) the virtual environment ``ROOT/.envs/<name>`` and return its Python.

    A new environment is made with this interpreter's ``venv`` module, then gets
    ``pip install -r`` of every file of ``requirement_files`` (one pip call, so that they are
    resolved together), then each command of ``after`` (an argv list, run in the repository
    root with the environment's ``bin`` first on ``PATH`` and ``VIRTUAL_ENV`` set). Reused as it
    is when its stamp matches :func:`env_digest`; otherwise removed and built again. A failing
    step raises :class:`EnvError` and leaves no stamp, so the next call starts over.
    """
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
    """``base`` (default ``os.environ``) with ``python``'s ``bin`` folder first on ``PATH`` and
    ``VIRTUAL_ENV`` set to its environment (``PYTHONHOME`` and ``PYTHONPATH`` removed)."""
    env = dict(os.environ if base is None else base)
    for key in ("PYTHONHOME", "PYTHONPATH", "VIRTUAL_ENV"):
        env.pop(key, None)
    bin_dir = Path(python).parent
    env["PATH"] = os.pathsep.join([str(bin_dir), *filter(None, env.get("PATH", "").split(os.pathsep))])
    env["VIRTUAL_ENV"] = str(bin_dir.parent)
    return env


def kernel_environment(python: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """The kernel's environment: ``env`` (default ``os.environ``) as in a reader's session:
    the environment's ``bin`` first on ``PATH``, on the CPU (``CUDA_VISIBLE_DEVICES`` empty),
    without the book build's switch (``NLICL_BOOK_BUILD``) and without ``PYTHONPATH``."""
    result = venv_environment(python, env)
    result.pop("NLICL_BOOK_BUILD", None)
    result["CUDA_VISIBLE_DEVICES"] = ""
    result.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # ipykernel's debugger: no warning
    return result


def _prepared(notebook: nbformat.NotebookNode, prelude: Sequence[str]) -> nbformat.NotebookNode:
    """A copy of ``notebook``: outputs and saved widget state cleared, ``prelude`` cells first,
    the memory cell last."""
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
    """Execute ``notebook`` top to bottom in a fresh kernel of ``python`` (an environment's
    interpreter with ipykernel), with ``folder`` as the kernel's working directory.

    The notebook is copied; the copy's outputs are cleared, ``prelude`` cells (sources) are put
    before its cells and a cell measuring the kernel's peak memory after them. The kernel
    (``python -m ipykernel_launcher -f {connection_file}``, from a kernelspec written to a
    temporary folder) runs with :func:`kernel_environment` of ``env``; nbclient drives it from
    this interpreter; the kernel is shut down afterwards. ``timeout_s`` bounds each cell. An
    error in a cell raises :class:`CellError`, whose message holds the cell and its traceback.
    """
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
