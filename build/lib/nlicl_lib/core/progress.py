"""A progress bar that is text in a terminal and a widget in a notebook (tqdm.auto).

It is off when ``enabled`` is False, and by default also in non-interactive runs such as the
book build (``NLICL_BOOK_BUILD=1``) or when stderr is not a terminal and no notebook kernel is
running, so logs stay readable.
"""

from __future__ import annotations

import os
import sys

from tqdm.auto import tqdm


def _in_notebook() -> bool:
    """A Jupyter kernel is running. IPython is asked only if already loaded (every kernel loads
    it), so a terminal run does not pay its import (about 0.15 s)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and shell.__class__.__name__ == "ZMQInteractiveShell"


def progress_enabled(enabled: bool | None) -> bool:
    """Resolve ``None`` (auto) to on in a terminal or notebook, off in the book build."""
    if enabled is not None:
        return bool(enabled)
    if os.environ.get("NLICL_BOOK_BUILD"):
        return False
    return _in_notebook() or sys.stderr.isatty()


class Progress:
    """``with Progress(total, enabled, desc) as bar: bar.update(1, loss=...)``."""

    def __init__(self, total: int, enabled: bool | None = None, desc: str = "training"):
        self._bar = None
        if progress_enabled(enabled):
            self._bar = tqdm(total=total, desc=desc, leave=True, mininterval=0.25)

    def update(self, count: int = 1, **postfix: float) -> None:
        if self._bar is not None:
            if postfix:
                self._bar.set_postfix({k: f"{v:.4g}" for k, v in postfix.items()}, refresh=False)
            self._bar.update(count)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
