"""What the instructors' pages say about each chapter, computed from the book's own sources.

Nothing here is typed by hand on a page: the goals are read from each chapter's opening box, the
reading times are counted from its prose, and the pen-and-paper problems are parsed from
``book/instructor_problems.md`` (for its tests and for a handout without the solutions,
``tools/problem_handout.py``). The build shows the first two through the directive
``{nlicl-run-times} goals`` / ``{nlicl-run-times} reading`` (``tools/nlicl_instructors.py``).

Standard library only: the Sphinx build imports it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

#: Reading speed for the book's prose, in words per minute. Technical text with maths is read
#: at about 100-150 words per minute (against 200-250 for plain prose); we take the middle.
WORDS_PER_MINUTE = 130
#: A displayed equation takes about as long to read as a sentence: it counts as this many words.
#: An inline formula ($...$) counts as one word.
DISPLAY_EQUATION_WORDS = 12

CHAPTER_FILES = "ch[0-9]_*.md"

GOALS_BOX = re.compile(
    r"^(?P<fence>:{3,})\{admonition\} In this chapter\n:class: nlicl-goals\n(?P<body>.*?)\n(?P=fence)\s*$",
    re.M | re.S)


def chapter_sources(book: Path) -> list[Path]:
    """The chapters' MyST sources (``book/ch1_*.md`` ...), in chapter order."""
    return sorted(Path(book).glob(CHAPTER_FILES), key=lambda p: int(re.match(r"ch(\d+)", p.name)[1]))


# --- goals ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChapterGoals:
    """The chapter's goals box: its lead line ("After it you can:") and its items, as MyST."""

    lead: str
    goals: tuple[str, ...]


def chapter_goals(source: str) -> ChapterGoals | None:
    """The goals of a chapter's ``In this chapter`` box (class ``nlicl-goals``), or None when the
    chapter has none. Each goal is one list item's MyST text, its lines joined."""
    found = GOALS_BOX.search(source)
    if not found:
        return None
    lead, items = [], []
    for line in found.group("body").strip("\n").splitlines():
        if line.startswith("- "):
            items.append(line[2:].strip())
        elif items and line.startswith("  ") and line.strip():
            items[-1] += " " + line.strip()
        elif not items and line.strip():
            lead.append(line.strip())
    if not items:
        return None
    return ChapterGoals(" ".join(lead), tuple(items))


def goals_markdown(book: Path) -> str:
    """MyST for the instructors page: every chapter's goals under a link to the chapter, or a
    line saying that the chapter has no goals box yet."""
    blocks = []
    for path in chapter_sources(book):
        goals = chapter_goals(path.read_text(encoding="utf-8"))
        link = f"{{doc}}`{path.stem}`"
        if goals is None:
            blocks.append(f"**{link}**: this chapter does not open with an *In this chapter* box "
                          "of goals yet.")
            continue
        blocks.append(f"**{link}**. {goals.lead}\n\n" + "\n".join(f"- {g}" for g in goals.goals))
    return "\n\n".join(blocks) + "\n"


# --- reading time -------------------------------------------------------------------------------

FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.S)
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,}|:{3,})\s*(?P<info>.*)$")
DIRECTIVE = re.compile(r"^\{(?P<name>[\w:+-]+)\}\s*(?P<arg>.*)$")
OPTION = re.compile(r"^\s*:[\w-]+:")
#: Directives whose body is not prose: code, maths, raw output, a solution.
NOT_PROSE = {"code-cell", "code", "code-block", "raw", "math", "solution", "glue:figure",
             "bibliography", "toctree", "nlicl-run-times", "figure", "image"}
#: Exercise gates of the chapters: a solution's text lies between the two solution gates.
GATES = {"exercise-start", "exercise-end", "solution-start", "solution-end"}
ROLE = re.compile(r"\{(?P<name>[\w:+-]+)\}`(?P<content>[^`]*)`")
EXPLICIT = re.compile(r"^(?P<text>.*?)\s*<[^<>]+>$", re.S)
DISPLAY_MATH = re.compile(r"(?<!\\)\$\$.+?(?<!\\)\$\$", re.S)
INLINE_MATH = re.compile(r"(?<!\\)\$(?:[^$\\]|\\.)+?(?<!\\)\$", re.S)
AMSMATH = re.compile(r"\\begin\{(\w+\*?)\}.*?\\end\{\1\}", re.S)
WORD = re.compile(r"[^\W_]+(?:['’.-][^\W_]+)*")


@dataclass(frozen=True)
class ProseCount:
    """What a reader reads on a page: ``words`` of prose (inline formulas, inline code and each
    reference or citation one word each) and ``display_equations``."""

    words: int
    display_equations: int

    @property
    def reading_words(self) -> int:
        """The words, with each displayed equation as ``DISPLAY_EQUATION_WORDS`` words."""
        return self.words + DISPLAY_EQUATION_WORDS * self.display_equations

    def reading_minutes(self, words_per_minute: float = WORDS_PER_MINUTE) -> float:
        return self.reading_words / words_per_minute


def _role_text(match: re.Match) -> str:
    name, content = match.group("name"), match.group("content")
    if name == "math":
        return " formula "
    if name == "eval":
        return " value "  # a number the page computes
    explicit = EXPLICIT.match(content)
    if explicit:
        return f" {explicit.group('text')} "
    if name in ("term", "abbr", "sub", "sup", "kbd", "guilabel", "menuselection"):
        return f" {content} "
    # a cross-reference ({prf:ref}, {doc}, {ref}, {numref}) or a citation: one word per target
    return " ref " * max(1, len([k for k in content.split(",") if k.strip()]))


def prose_text(source: str) -> tuple[str, int]:
    """The prose of a MyST page, with the display equations taken out, and their number.

    Left out: the front matter, code cells and every fenced code block, jupytext cell markers
    (``+++``), directive fences and options, targets ``(label)=``, comments (``%``, ``<!-- -->``),
    solutions (``{solution}`` directives and the text between the chapters' ``solution-start`` and
    ``solution-end`` gates). Directive titles (an admonition's, an exercise's) are kept.
    """
    lines = FRONT_MATTER.sub("", source).split("\n")
    kept: list[str] = []
    displays = 0
    in_solution = False
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        opened = FENCE.match(line)
        if re.fullmatch(r":{3,}", stripped):  # the end of a colon-fenced directive read as prose
            index += 1
            continue
        if opened:
            fence, info = opened.group("fence"), opened.group("info").strip()
            directive = DIRECTIVE.match(info)
            name = directive.group("name") if directive else None
            closed_by = fence[0]
            if name is None or name in NOT_PROSE or name in GATES or fence[0] != ":":
                # a block skipped whole: its body up to the closing fence of the same kind
                body_end = index + 1
                while body_end < len(lines):
                    candidate = lines[body_end].strip()
                    if candidate.startswith(closed_by * len(fence)) \
                            and not candidate.lstrip(closed_by).strip():
                        break
                    body_end += 1
                body = lines[index + 1:body_end]
                if name == "math":
                    displays += 1
                elif name == "solution-start":
                    in_solution = True
                elif name == "solution-end":
                    in_solution = False
                elif name == "exercise-start" and not in_solution:
                    kept.append(directive.group("arg"))
                elif name is not None and name not in NOT_PROSE and name not in GATES:
                    # a backtick-fenced directive with prose (```{note}): keep its text
                    if not in_solution:
                        kept.append(directive.group("arg"))
                        kept.extend(line for line in body if not OPTION.match(line))
                index = body_end + 1
                continue
            # a colon-fenced directive with prose: keep its title, drop its options, and read
            # its body as prose (it is closed by a bare fence line, skipped below)
            if not in_solution:
                kept.append(directive.group("arg"))
            index += 1
            while index < len(lines) and OPTION.match(lines[index]):
                index += 1
            continue
        if stripped.startswith("+++") or re.match(r"^\(.+\)=$", stripped) \
                or stripped.startswith("%"):
            index += 1
            continue
        if stripped.startswith("<!--"):
            while index < len(lines) and "-->" not in lines[index]:
                index += 1
            index += 1
            continue
        if not in_solution:
            kept.append(line)
        index += 1
    text = "\n".join(kept)
    text, found = DISPLAY_MATH.subn(" ", text)
    displays += found
    text, found = AMSMATH.subn(" ", text)  # amsmath environments outside $$ are displays too
    displays += found
    return text, displays


def count_prose(source: str) -> ProseCount:
    """Words of prose and displayed equations of a MyST page (see :func:`prose_text`)."""
    text, displays = prose_text(source)
    text = INLINE_MATH.sub(" formula ", text)
    text = ROLE.sub(_role_text, text)
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", " ", text)  # images
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r" \1 ", text)  # links: their text
    text = re.sub(r"`[^`\n]+`", " code ", text)  # inline code: one word
    text = re.sub(r"<[^>\n]+>", " ", text)  # HTML tags
    return ProseCount(len(WORD.findall(text)), displays)


def reading_markdown(book: Path, words_per_minute: float = WORDS_PER_MINUTE) -> str:
    """MyST for the instructors page: a table of each chapter's words of prose, displayed
    equations and reading time, and the assumptions behind it."""
    rows = ["| Chapter | Words of prose | Displayed equations | Reading time |",
            "| :-- | --: | --: | --: |"]
    for path in chapter_sources(book):
        count = count_prose(path.read_text(encoding="utf-8"))
        rows.append(f"| {{doc}}`{path.stem}` | {count.words} | {count.display_equations} | "
                    f"{count.reading_minutes(words_per_minute):.0f} min |")
    note = (f"Counted from the chapters' sources in this build: the words of prose, without the "
            f"code cells, their outputs and the exercises' solutions (an inline formula, a "
            f"reference or a citation counts as one word), read at {words_per_minute:g} words "
            f"per minute, a usual pace for technical text with maths; each displayed equation "
            f"counts as {DISPLAY_EQUATION_WORDS} words. A first reading that stops to redo the "
            f"derivations takes about twice as long.")
    return "\n".join(rows) + "\n\n" + note + "\n"


# --- pen-and-paper problems ---------------------------------------------------------------------

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
