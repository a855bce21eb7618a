"""The book cites its own numbered results (book/theorems.md), never the private notes.

:func:`problems` fails when

* a page, a library module, a test, a bench script or a build tool mentions ``theory.md`` or
  an old section tag of it ("(3.3)", "3.5 form", "theory 3.1", ...);
* ``nlicl_lib/core/book_refs.py`` disagrees with the numbering of ``book/theorems.md`` (one counter
  shared by every kind of result, as ``prf_realtyp_to_countertyp`` in ``_config.yml`` sets);
* a "Theorem 9 (thm-feature-optimum)" style mention names a label that does not exist or the
  wrong kind or number for it;
* a page links ``{prf:ref}`` to a label that the Theory part does not define (the strict build
  fails on it too, later).
"""

from __future__ import annotations

import importlib.util
import re
import shutil
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
# Old tags of theory.md: its file name, "(3.3)", "(3.1;", "3.5 form", "theory 3.1", "3.4:" ...
OLD_TAGS = [
    re.compile(r"theory\.md", re.IGNORECASE),
    re.compile(r"\(3\.[1-5][);,:]"),
    re.compile(r"\b3\.[1-5] (?:form|formula|gives|puts)\b"),
    re.compile(r"\btheory 3\.[1-5]\b", re.IGNORECASE),
    re.compile(r"\b(?:of|see|in|by) 3\.[1-5]\b"),
]
# The check and its test quote the forbidden strings on purpose.
EXEMPT = {"tests/test_book_refs.py"}
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
        if relative in EXEMPT:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace")
                                      .splitlines(), start=1):
            for pattern in OLD_TAGS:
                if pattern.search(line):
                    found.append(f"{relative}:{number}: cites theory.md or one of its section "
                                 f"tags ({pattern.pattern!r}): {line.strip()[:100]}")
                    break
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



def test_table_matches_the_theory_page_numbering():
    numbering = theory_numbering(ROOT / "book" / "theorems.md")
    assert list(numbering) == list(book_refs.RESULTS)
    for label, (kind, number, _title) in book_refs.RESULTS.items():
        assert numbering[label][:2] == (kind, number), label
    # one counter shared by every kind: 1, 2, 3, ... with no gaps
    assert [number for _, number, _ in book_refs.RESULTS.values()] == list(
        range(1, len(book_refs.RESULTS) + 1))


def test_no_page_or_library_string_cites_the_private_notes():
    assert problems(ROOT) == []


def _fake_book(tmp_path: Path) -> Path:
    (tmp_path / "book").mkdir()
    (tmp_path / "nlicl_lib" / "core").mkdir(parents=True)
    shutil.copy(ROOT / "book" / "theorems.md", tmp_path / "book" / "theorems.md")
    shutil.copy(ROOT / "nlicl_lib" / "core" / "book_refs.py",
                tmp_path / "nlicl_lib" / "core" / "book_refs.py")
    return tmp_path


def test_the_check_catches_each_kind_of_violation(tmp_path):
    root = _fake_book(tmp_path)
    assert problems(root) == []
    page = root / "book" / "page.md"
    page.write_text("As theory.md 3.3 says.\n")
    assert any("theory.md" in p for p in problems(root))
    page.write_text("The best step (3.1) is exact.\n")
    assert len(problems(root)) == 1
    page.write_text("See {prf:ref}`thm-does-not-exist`.\n")
    assert "undefined" in problems(root)[0]
    page.write_text("")
    module = root / "nlicl_lib" / "module.py"
    module.write_text('"""Theorem 4 (thm-feature-optimum)."""\n')
    assert "is Theorem 9" in problems(root)[0]
    module.write_text('"""Theorem 9 (thm-feature-optimum)."""\n')
    assert problems(root) == []


def test_ref_names_a_result_or_says_what_is_allowed():
    assert book_refs.ref("thm-feature-optimum") == "Theorem 9"
    assert book_refs.ref("cor-linear-bound") == "Corollary 7"
    with pytest.raises(KeyError, match="label='thm-nope'.*allowed: def-prompts"):
        book_refs.ref("thm-nope")
