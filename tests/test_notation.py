"""One symbol, one meaning: the pages keep the book's notation apart where it used to clash."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "book").glob("*.md"))


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.stem)
def test_phi_with_a_block_index_is_never_a_blocks_features(path: Path):
    r"""$\phi_k$ is the degree-$k$ monomials (and $\phi$ the target's features); the features
    block $\ell$ writes into the slots are $\chi_\ell$. A $\phi$ indexed by a block
    ($\phi_\ell$, $\phi_{\ell-1}$, $\phi_L$) would read as both."""
    text = path.read_text(encoding="utf-8")
    assert not re.search(r"\\phi_(\\ell|\{\\ell|L\b)", text), path.name
