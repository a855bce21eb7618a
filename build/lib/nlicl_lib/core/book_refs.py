r"""The numbered results of the book's Theory part (``book/theorems.md``), for text the library writes.

Pages link to a result with ``{prf:ref}`label```; Sphinx numbers it. Strings that the library
prints (figure legends, exercise messages, CLI output) cannot link, so they name the result by
its number through :func:`ref`, and docstrings write ``Theorem 9 (thm-feature-optimum)``.
``tests/test_book_refs.py`` recomputes the numbers from ``book/theorems.md`` (one counter shared by
every kind of result, as ``prf_realtyp_to_countertyp`` in ``_config.yml`` sets) and fails when
this table, or any "Kind N (label)" in the library, the tests or the pages, disagrees with it.
"""

from __future__ import annotations

#: label -> (kind, number, title), in the order of ``book/theorems.md``.
RESULTS: dict[str, tuple[str, int, str]] = {
    "def-prompts": ("Definition", 1, "Prompts, tasks and the embedding"),
    "def-models": ("Definition", 2, "LSA, the GLU layer and the GLU-LSA block"),
    "lem-gaussian-moments": ("Lemma", 3, "Exact Gaussian moments"),
    "prop-lsa-gd": ("Proposition", 4, "An LSA layer is one preconditioned GD step"),
    "thm-linear-optimum": ("Theorem", 5, "The best one-step preconditioner"),
    "thm-query-linear": ("Theorem", 6, "Attention alone is linear in the query, at any depth"),
    "cor-linear-bound": ("Corollary", 7, "No attention-only stack beats the best linear predictor"),
    "prop-glu-kernel": ("Proposition", 8, "A GLU-LSA block is one preconditioned GD step on features"),
    "thm-feature-optimum": ("Theorem", 9, "The best one-step GD on features"),
    "cor-same-span": ("Corollary", 10, "Features that span exactly the target's monomials"),
    "prop-one-over-n": ("Proposition", 11, "The c/n bound and the crossover"),
    "prop-capacity": ("Proposition", 12, "What one block can hold"),
    "thm-depth-bcd": ("Theorem", 13, "Depth as block-coordinate descent"),
    "rem-full-attention": ("Remark", 14, "The GD form of attention is needed"),
    "prop-greedy-reference": ("Proposition", 15, "A reference that can only improve with depth"),
}


def ref(label: str) -> str:
    """``"Theorem 9"`` for ``"thm-feature-optimum"``: how printed text names a numbered result."""
    try:
        kind, number, _ = RESULTS[label]
    except KeyError:
        raise KeyError(f"label={label!r} is not a result of the book's Theory part; "
                       f"allowed: {', '.join(RESULTS)}") from None
    return f"{kind} {number}"
