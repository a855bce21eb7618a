"""The pen-and-paper problems of ``book/instructor_problems.md``, parsed from the page's source
(for its tests, which check every problem has a title, a section and a solution, and check the
solutions' formulas against the library).

Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

BLOCK = re.compile(r"^(?P<fence>:{3,}|`{3,})\{(?P<name>exercise|solution)\}[ \t]*(?P<arg>[^\n]*)\n"
                   r"(?P<body>.*?)\n(?P=fence)[ \t]*$", re.M | re.S)
SECTION = re.compile(r"^## (?P<title>.+?)\s*$", re.M)


@dataclass(frozen=True)
class Problem:
    """One ``{exercise}`` of the problems page: its label, title, section (the ``##`` heading
    above it), statement, and the text of its ``{solution}`` (None when it has none)."""

    label: str
    title: str
    section: str
    statement: str
    solution: str | None


def _split_options(body: str) -> tuple[dict[str, str], str]:
    options, lines = {}, body.split("\n")
    while lines and (m := re.match(r"^:([\w-]+):\s*(.*)$", lines[0])):
        options[m.group(1)] = m.group(2).strip()
        lines.pop(0)
    return options, "\n".join(lines).strip("\n")


def problems(source: str) -> list[Problem]:
    """The problems of a page written with sphinx-exercise's ``{exercise}`` and ``{solution}``
    directives (backtick or colon fences), in page order, each with its solution's text."""
    sections = [(m.start(), m.group("title")) for m in SECTION.finditer(source)]
    exercises, solutions = [], {}
    for block in BLOCK.finditer(source):
        options, text = _split_options(block.group("body"))
        if block.group("name") == "solution":
            solutions[block.group("arg").strip()] = text
            continue
        section = next((t for start, t in reversed(sections) if start < block.start()), "")
        exercises.append((options.get("label", ""), block.group("arg").strip(), section, text))
    return [Problem(label, title, section, text, solutions.get(label))
            for label, title, section, text in exercises]
