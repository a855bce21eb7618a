"""The book cites its own numbered results (book/theorems.md) by existing labels, kinds and
numbers."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from nlicl_lib.core import book_refs

ROOT = Path(__file__).resolve().parents[1]

KINDS = {"definition": "Definition", "lemma": "Lemma", "proposition": "Proposition",
         "theorem": "Theorem", "corollary": "Corollary", "remark": "Remark"}
DIRECTIVE = re.compile(r"^:::\{prf:(\w+)\}\s*(.*?)\s*\n:label:\s*(\S+)", re.MULTILINE)
MENTION = re.compile(r"\b(Definition|Lemma|Proposition|Theorem|Corollary|Remark) (\d+) "
                     r"\(([a-z]+-[a-z0-9-]+)\)")
PRF_REF = re.compile(r"\{prf:ref\}`(?:[^`<]*<)?([^`>]+)>?`")
SCANNED = ["book/*.md", "nlicl_lib/**/*.py", "tests/*.py", "bench/*", "tools/*.py", "README.md"]


def theory_numbering(theory_page: Path) -> dict[str, tuple[str, int, str]]:
    """label -> (kind, number, title) in the order the Theory page defines them."""
    numbering, counter = {}, 0
    for kind, title, label in DIRECTIVE.findall(theory_page.read_text(encoding="utf-8")):
        if kind == "proof":
            continue
        counter += 1
        numbering[label] = (KINDS.get(kind, kind.capitalize()), counter, title)
    return numbering


def load_results(root: Path) -> dict[str, tuple[str, int, str]]:
    """``nlicl_lib.core.book_refs.RESULTS``, loaded from the file (no package import needed)."""
    spec = importlib.util.spec_from_file_location("book_refs", root / "nlicl_lib" / "core" / "book_refs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.RESULTS


def scanned_files(root: Path) -> list[Path]:
    files = set()
    for pattern in SCANNED:
        files.update(p for p in root.glob(pattern) if p.is_file() and "__pycache__" not in p.parts)
    return sorted(files)


def problems(root: Path = ROOT) -> list[str]:
    """Every violation, as 'path:line: what'; empty when the references are sound."""
    found = []
    numbering = theory_numbering(root / "book" / "theorems.md")
    results = load_results(root)
    def kind_and_number(table, label):
        return table[label][:2] if label in table else None

    for label in sorted(set(numbering) | set(results)):
        if kind_and_number(numbering, label) != kind_and_number(results, label):
            found.append(f"nlicl_lib/core/book_refs.py: {label}: table says {results.get(label)}, "
                         f"book/theorems.md says {numbering.get(label)}")
    for path in scanned_files(root):
        relative = path.relative_to(root).as_posix()
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace")
                                      .splitlines(), start=1):
            for kind, n, label in MENTION.findall(line):
                expected = numbering.get(label)
                if expected is None:
                    found.append(f"{relative}:{number}: no result labelled {label!r}")
                elif (expected[0], expected[1]) != (kind, int(n)):
                    found.append(f"{relative}:{number}: '{kind} {n} ({label})' but {label} is "
                                 f"{expected[0]} {expected[1]}")
            if path.suffix == ".md":
                for label in PRF_REF.findall(line):
                    if label not in numbering:
                        found.append(f"{relative}:{number}: {{prf:ref}} to undefined {label!r}")
    return found


def test_every_cited_result_exists_with_its_kind_and_number():
    assert problems(ROOT) == []


def test_ref_names_a_result_or_says_what_is_allowed():
    assert book_refs.ref("thm-feature-optimum") == "Theorem 9"
    assert book_refs.ref("cor-linear-bound") == "Corollary 7"
    with pytest.raises(KeyError, match="label='thm-nope'.*allowed: def-prompts"):
        book_refs.ref("thm-nope")
