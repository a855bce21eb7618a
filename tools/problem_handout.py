"""Write the pen-and-paper problems of ``book/instructor_problems.md`` without their solutions.

    python tools/problem_handout.py [OUT.md]      (default: problems.md)

The output is plain Markdown for students: a heading for each chapter, each problem's title and
statement, the Theory part's references as the site numbers them ("Theorem 5"), maths kept as
``$...$``. The solutions are left out; the problems are read with
``nlicl_lib.book.instructors.problems`` and their MyST made plain by ``tools/nlicl_plain.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import binder_pages  # noqa: E402 (tools/ is not a package)
import nlicl_plain  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "book" / "instructor_problems.md"


def handout(page: Path = PAGE) -> tuple[str, list[str]]:
    """The problems' statements as plain Markdown, and what could not be made plain."""
    from nlicl_lib.book.instructors import problems
    from nlicl_lib.core.book_refs import RESULTS

    book = page.parent
    resolver = nlicl_plain.Resolver(
        results=dict(RESULTS),
        citations=nlicl_plain.citations((book / "references.bib").read_text(encoding="utf-8")),
        titles=binder_pages.page_titles(book), exercises=binder_pages.exercise_numbers(book),
        docname=f"book/{page.stem}")
    lines = ["# Problems for pen and paper", ""]
    section = None
    for problem in problems(page.read_text(encoding="utf-8")):
        if problem.section != section:
            section = problem.section
            lines += [f"## {nlicl_plain.plain_markdown(section, [], resolver)}", ""]
        title = nlicl_plain.plain_markdown(problem.title, [], resolver)
        lines += [f"### {title}", "", nlicl_plain.plain_markdown(problem.statement, [], resolver), ""]
    return "\n".join(lines), resolver.problems


def main(argv: list[str]) -> int:
    target = Path(argv[0]) if argv else Path("problems.md")
    text, problems = handout()
    for problem in problems:
        print(f"problem_handout: {problem}", file=sys.stderr)
    if problems:
        return 1
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target} (no solutions)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
