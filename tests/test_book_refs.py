"""The book cites its own numbered results (book/theorems.md), never the private notes."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from nlicl_lib.core import book_refs

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("check_refs", ROOT / "tools" / "check_refs.py")
check_refs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_refs)


def test_table_matches_the_theory_page_numbering():
    numbering = check_refs.theory_numbering(ROOT / "book" / "theorems.md")
    assert list(numbering) == list(book_refs.RESULTS)
    for label, (kind, number, _title) in book_refs.RESULTS.items():
        assert numbering[label][:2] == (kind, number), label
    # one counter shared by every kind: 1, 2, 3, ... with no gaps
    assert [number for _, number, _ in book_refs.RESULTS.values()] == list(
        range(1, len(book_refs.RESULTS) + 1))


def test_no_page_or_library_string_cites_the_private_notes():
    assert check_refs.problems(ROOT) == []


def _fake_book(tmp_path: Path) -> Path:
    (tmp_path / "book").mkdir()
    (tmp_path / "nlicl_lib" / "core").mkdir(parents=True)
    shutil.copy(ROOT / "book" / "theorems.md", tmp_path / "book" / "theorems.md")
    shutil.copy(ROOT / "nlicl_lib" / "core" / "book_refs.py",
                tmp_path / "nlicl_lib" / "core" / "book_refs.py")
    return tmp_path


def test_the_check_catches_each_kind_of_violation(tmp_path):
    root = _fake_book(tmp_path)
    assert check_refs.problems(root) == []
    page = root / "book" / "page.md"
    page.write_text("As theory.md 3.3 says.\n")
    assert any("theory.md" in p for p in check_refs.problems(root))
    page.write_text("The best step (3.1) is exact.\n")
    assert len(check_refs.problems(root)) == 1
    page.write_text("See {prf:ref}`thm-does-not-exist`.\n")
    assert "undefined" in check_refs.problems(root)[0]
    page.write_text("")
    module = root / "nlicl_lib" / "module.py"
    module.write_text('"""Theorem 4 (thm-feature-optimum)."""\n')
    assert "is Theorem 9" in check_refs.problems(root)[0]
    module.write_text('"""Theorem 9 (thm-feature-optimum)."""\n')
    assert check_refs.problems(root) == []


def test_ref_names_a_result_or_says_what_is_allowed():
    assert book_refs.ref("thm-feature-optimum") == "Theorem 9"
    assert book_refs.ref("cor-linear-bound") == "Corollary 7"
    with pytest.raises(KeyError, match="label='thm-nope'.*allowed: def-prompts"):
        book_refs.ref("thm-nope")
