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


# Each old double use, as a pattern that must not come back on any page: (pattern, why).
RETIRED = {
    "loss_is_not_ell": (r"\\ell\(w\)",
                        r"$\ell$ is the layer/block index; the in-context loss is $J$"),
    "context_statistic_is_not_S": (r"S(_\\ell)? = Z\b|S = Z M Z|P(_\\ell)? S(_\\ell)? Q",
                                   r"$S$ is $\mathbb E[\phi\phi^\top]$; the statistic $Z M Z^\top$ is $H$"),
    "statistic_is_not_A": (r"A_\\ell = \\sum_\{i \\le n\} z|P_\\ell A_\\ell Q_\\ell",
                           r"$A_\ell$ is the depth proof's cross moment; the statistic is $H_\ell$"),
    "mask_is_not_moments": (r"\\hat M\b|(?<![A-Za-z\\])M = \\mathbb\s*E|\^\\top M W_|C_\\ell M ",
                            r"$M$ is the mask; the moments of $b$ are $S_b$, $\hat S_b$"),
    "block_kernel_is_not_K": (r"K = A\^\\top|trained K\b",
                              r"$K$ is Proposition 12's matrix; $A^\top\Gamma A$ is $G$"),
    "glu_map_is_not_C": (r"blkdiag\}?\(I_(3|d), C\)",
                         r"$C$ is $\mathbb E[\psi\phi^\top]$; the GLU's map is $U$"),
    "empirical_moments_are_S_hat": (r"\\hat C\b", r"$\frac1n\sum_i x_i x_i^\top$ is $\hat S$"),
    "quadratic_coefficients_are_not_B": (r"u\^\\top B u", r"$B$ is the feature optimum's matrix"),
    "agreement_is_not_A": (r"A_\\ell = 1 -", r"the agreement is $\rho_\ell$"),
    "noise_term_is_not_h": (r"\bh = \\frac1n", r"$h$ is the GLU width; the noise term is $\xi$"),
    "layer_product_is_pi": (r"T\(\\text\{context\}\)|(?<![A-Za-z\\])R = \\prod",
                            r"$T$ is $\mathbb E[\psi\psi^\top]$; the product of layer maps is $\Pi$"),
    "slot_loss_is_not_ell": (r"(?<![_\\A-Za-z])\\ell_",
                             r"an indexed $\ell$ would be a loss; the best $m$-slot loss is $\mathcal L^*_m$"),
}


@pytest.mark.parametrize("name", sorted(RETIRED))
def test_retired_double_use_stays_gone(name: str):
    pattern, why = RETIRED[name]
    found = [f"{path.name}:{number}"
             for path in PAGES
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(pattern, line)]
    assert not found, f"{why}: {found}"


def test_retired_patterns_catch_the_old_text():
    """Each pattern matches the text it retired, so the test above can fail."""
    old = {"loss_is_not_ell": r"loss $\ell(w) = \frac1{2n}$",
           "context_statistic_is_not_S": r"$S = Z M Z^\top$",
           "statistic_is_not_A": r"$A_\ell = \sum_{i \le n} z_i^{(\ell-1)}$",
           "mask_is_not_moments": r"$M = \mathbb E[b b^\top]$",
           "block_kernel_is_not_K": r"is $K = A^\top\Gamma A$",
           "glu_map_is_not_C": r"$A = \mathrm{blkdiag}(I_3, C)$",
           "empirical_moments_are_S_hat": r"write $\hat C = \frac1n$",
           "quadratic_coefficients_are_not_B": r"t^2\, u^\top B u$",
           "agreement_is_not_A": r"$$A_\ell = 1 - \frac{}{}$$",
           "noise_term_is_not_h": r"and $h = \frac1n \sum_i \epsilon_i x_i$",
           "layer_product_is_pi": r"$z_{n+1}^{(L)} = T(\text{context})\, z$",
           "slot_loss_is_not_ell": r"$\ell_m = \ell_0 - \sum_i \lambda_i$"}
    assert set(old) == set(RETIRED)
    for name, text in old.items():
        assert re.search(RETIRED[name][0], text), name


def notation_symbols() -> list[str]:
    """The first cell of every row of the glossary's notation table."""
    text = (ROOT / "book" / "glossary.md").read_text(encoding="utf-8")
    section = text.split("## Notation", 1)[1]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    return [row.split("|")[1].strip() for row in rows[1:]]  # rows[0] is the header


def test_notation_table_lists_each_symbol_once():
    cells = notation_symbols()
    assert len(cells) >= 40
    symbols = [symbol.strip() for cell in cells for symbol in re.findall(r"\$([^$]+)\$", cell)]
    duplicates = sorted({symbol for symbol in symbols if symbols.count(symbol) > 1})
    assert not duplicates, duplicates


def test_notation_table_covers_the_chapters_main_symbols():
    listed = {symbol.strip() for cell in notation_symbols()
              for symbol in re.findall(r"\$([^$]+)\$", cell)}
    wanted = {"d", "n", "D", "m", "h", "k", "p_k", "L", r"\ell", "Z", "P", "M", r"\Gamma",
              r"\psi", r"\phi", r"\phi_k", r"\chi_\ell", "S", "T", "C", "B", "K", "G", "U",
              r"\sigma", r"\Sigma", "H", "J", "S_b", r"\hat S_b", r"\mathbb E[y^2]"}
    assert wanted <= listed, sorted(wanted - listed)
