"""The book cites its own numbered results, never the team's private notes.

``python tools/check_refs.py`` (run by ``tools/build_book.py`` before every build, and by
``tests/test_book_refs.py``) fails when

* a page, a library module, a test, a bench script or a build tool mentions ``theory.md`` or
  an old section tag of it ("(3.3)", "3.5 form", "theory 3.1", ...);
* ``nlicl_lib/core/book_refs.py`` disagrees with the numbering of ``book/theorems.md`` (one counter
  shared by every kind of result, as ``prf_realtyp_to_countertyp`` in ``_config.yml`` sets);
* a "Theorem 9 (thm-feature-optimum)" style mention names a label that does not exist or the
  wrong kind or number for it;
* a page links ``{prf:ref}`` to a label that the Theory part does not define.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

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
EXEMPT = {"tools/check_refs.py", "tests/test_book_refs.py"}
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


def main() -> int:
    found = problems()
    for problem in found:
        print(problem, file=sys.stderr)
    if found:
        print(f"check_refs: {len(found)} problem(s); the book must cite its own numbered results "
              "(see nlicl_lib/core/book_refs.py)", file=sys.stderr)
        return 1
    print("check_refs: references to the Theory part are consistent")
    return 0


if __name__ == "__main__":
    sys.exit(main())
