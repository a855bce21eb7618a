"""MyST to plain Markdown, for the notebooks the book offers outside its build.

The chapters are MyST notebooks: their text holds roles (``{eval}``, ``{prf:ref}``,
``{cite:t}``, ``{doc}``) and directives (``{exercise-start}``, admonitions) that only MyST-NB,
or JupyterLab with ``jupyterlab-myst``, renders. The downloaded ``.ipynb`` and the Colab copy
are read in a plain JupyterLab, in Colab or on GitHub, which render CommonMark with maths and
nothing else: there the text must already say what the site says. :func:`plain_markdown`
rewrites one markdown cell with what the build knows (:class:`Resolver`):

* ``{eval}`expr``` becomes the value the page shows (the cell's ``user_expressions``, written
  by the build, see ``tools/nlicl_exec.py``);
* ``{prf:ref}`label``` becomes "Theorem 9" (the Theory part's numbering), a citation
  ``{cite:t}`key``` "Ahn et al. [2023]" and ``{cite:p}`a,b``` "[Ahn et al., 2023, Zhang et
  al., 2024]", as the site writes them (author-year); ``{doc}``, ``{ref}`` and ``{numref}``
  become their link text or the target's title; ``{math}`x``` becomes ``$x$``;
* ``{exercise-start}`` becomes a box (a blockquote) headed "Exercise 1.1 (title)" around the rest
  of its cell, ``{solution-start}`` one headed "Solution to Exercise 1.1", their ``-end`` fences
  nothing; admonitions become
  blockquotes with a bold title; the Theory part's ``{prf:...}`` directives a bold
  "Theorem 9 (title)" and "Proof.";
* MyST targets ``(label)=`` and comments ``% ...`` go.

Anything else in braces that looks like a role or directive is left as it is and reported by
:func:`leftovers`, which the tests use to fail on a notebook that still holds one.

**For Binder** (``Resolver(for_binder=True)``, used by ``tools/binder_pages.py``), the text
stays MyST, which ``jupyterlab-myst`` renders, and only what it cannot resolve inside one
notebook is rewritten: ``{eval}`` stays (JupyterLab evaluates it when the cell runs), a
``{prf:ref}`` becomes a link ``[Theorem 9](theorems.md#label)``, a ``{doc}`` a link to the
``.md`` file, citations author-year text, and the exercise gates (which ``jupyterlab-myst``
joins only within one cell) admonition boxes with the site's numbers, a solution's folded; the
Theory part's results boxes numbered with the book's one counter (jupyterlab-myst would count
each kind on its own); admonitions, proofs, maths, targets and
comments are left for ``jupyterlab-myst`` to draw.

This module uses the standard library only: Binder's environment runs it without Sphinx.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

ROLE = re.compile(r"\{([A-Za-z][\w:+-]*)\}`([^`]*)`")
FENCE_OPEN = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|:{3,})\{(?P<name>[\w:+-]+)\}\s*(?P<arg>.*)$")
TARGET = re.compile(r"^\s*\(([\w:.-]+)\)=\s*$")
COMMENT = re.compile(r"^\s*%")
OPTION = re.compile(r"^\s*:([\w-]+):\s*(.*)$")
EXPLICIT = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.DOTALL)

LEFTOVER = re.compile(r"\{[A-Za-z][\w:+-]*\}`|^\s*(?:`{3,}|:{3,})\{[\w:+-]+\}|\{glue", re.MULTILINE)
"""A MyST role or directive, or a glue placeholder, left in text meant for plain Markdown."""

GATES = ("exercise-start", "exercise-end", "solution-start", "solution-end")

ADMONITIONS = {
    "note": "Note", "tip": "Tip", "hint": "Hint", "important": "Important", "warning": "Warning",
    "caution": "Caution", "attention": "Attention", "danger": "Danger", "error": "Error",
    "seealso": "See also", "admonition": "", "dropdown": "",
}


@dataclass
class Resolver:
    """What the build knows that the text refers to.

    ``results``: label -> (kind, number, title) of the Theory part's numbered results.
    ``citations``: key -> (author text, year), e.g. ("Ahn et al.", "2023").
    ``titles``: page (docname) -> title. ``labels``: section label -> its title, figure label
    (``mystnb: figure: name:``) -> its number as ``{numref}`` writes it ("Fig. 1.2").
    ``exercises``: exercise label -> its number as the site shows it ("1.1").
    ``docname``: the page being converted (relative ``{doc}`` targets are resolved from it).
    """

    results: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    citations: dict[str, tuple[str, str]] = field(default_factory=dict)
    titles: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    exercises: dict[str, str] = field(default_factory=dict)
    docname: str = ""
    for_binder: bool = False
    results_page: str = "theorems.md"
    problems: list[str] = field(default_factory=list)

    def result(self, label: str, text: str | None = None) -> str:
        if label not in self.results:
            self.problems.append(f"{{prf:ref}} to an unknown label {label!r}")
            return text or label
        kind, number, _ = self.results[label]
        name = text or f"{kind} {number}"
        return f"[{name}]({self.results_page}#{label})" if self.for_binder else name

    def cite(self, keys: str, textual: bool) -> str:
        parts = []
        for key in (k.strip() for k in keys.split(",") if k.strip()):
            if key not in self.citations:
                self.problems.append(f"citation of an unknown key {key!r}")
                parts.append(key)
                continue
            authors, year = self.citations[key]
            parts.append(f"{authors} [{year}]" if textual else f"{authors}, {year}")
        return ", ".join(parts) if textual else f"[{'; '.join(parts)}]"

    def doc(self, target: str, text: str | None) -> str:
        title = text or self.doc_title(target)
        if not self.for_binder:
            return title
        name = target.removesuffix(".md").removesuffix(".ipynb")
        return f"[{title}]({name}.md)"

    def doc_title(self, target: str) -> str:
        name = target.removesuffix(".md").removesuffix(".ipynb")
        if not name.startswith("/"):
            folder = self.docname.rsplit("/", 1)[0] if "/" in self.docname else ""
            name = f"{folder}/{name}" if folder else name
        name = name.lstrip("/")
        if name not in self.titles:
            self.problems.append(f"{{doc}} to an unknown page {target!r}")
            return target
        return self.titles[name]

    def exercise(self, label: str) -> str:
        return self.exercises.get(label, label)


def expression_text(result: dict) -> str:
    """The text the site shows for one ``user_expressions`` result: its ``text/plain``, with a
    string's quotes removed (as MyST-NB and jupyterlab-myst do)."""
    if result.get("status") != "ok":
        return f"<{result.get('ename', 'error')}: {result.get('evalue', '')}>"
    text = result.get("data", {}).get("text/plain", "")
    text = "".join(text) if isinstance(text, list) else text
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        try:
            value = ast.literal_eval(text)
        except (SyntaxError, ValueError):
            return text
        if isinstance(value, str):
            return value
    return text


def _options(lines: list[str]) -> tuple[dict[str, str], list[str]]:
    """Split a directive's body into its leading ``:name: value`` options and the rest."""
    options: dict[str, str] = {}
    index = 0
    while index < len(lines) and OPTION.match(lines[index]):
        match = OPTION.match(lines[index])
        options[match.group(1)] = match.group(2).strip()
        index += 1
    return options, lines[index:]


def _quote(lines: list[str]) -> list[str]:
    return [f"> {line}" if line.strip() else ">" for line in lines]


def _glossary_deflist(lines: list[str]) -> list[str]:
    """A Sphinx glossary's lines (terms flush left, definitions indented) as a definition list:
    each term on its line (several terms of one definition joined by commas), its definition's
    first line after ": ", the rest indented."""
    out: list[str] = []
    starting = False
    for line in lines:
        if not line.strip():
            out.append("")
            continue
        if not line.startswith((" ", "\t")):  # a term
            if starting:  # one definition for several terms: a definition list takes one line
                out[-1] = f"{out[-1]}, {line.strip()}"
                continue
            if out and out[-1].strip():
                out.append("")
            out.append(line.strip())
            starting = True
        elif starting:
            out.append(f": {line.strip()}")
            starting = False
        else:
            out.append(f"  {line.strip()}")
    return out


def _directive(name: str, fence: str, argument: str, body: list[str], resolver: Resolver,
               values: list[str]) -> list[str]:
    options, content = _options(body)
    inner = _convert_lines(content, resolver, values)
    label = options.get("label", "")
    if resolver.for_binder and name.startswith("prf:") and label in resolver.results:
        # jupyterlab-myst would number each kind on its own (Theorem 1, ...); the book numbers
        # all results with one counter (Theorem 5): the box carries the book's number
        kind, number, _ = resolver.results[label]
        title = _roles(argument, resolver, values)
        return [f"({label})=", f"{fence}{{admonition}} {kind} {number}" + (f" ({title})" if title else ""),
                ":class: note", "", *inner, fence]
    if name == "glossary":
        # Sphinx's glossary is indented (term, then its definition indented); mystmd's, and
        # plain Markdown, take a definition list ("term", then ": definition")
        entries = _glossary_deflist(inner)
        if resolver.for_binder:
            return [f"{fence}{{glossary}}", *entries, fence]
        return entries
    if resolver.for_binder and name not in GATES and name != "nlicl-run-times":
        # jupyterlab-myst draws it: only the roles inside are rewritten
        head = f"{fence}{{{name}}}" + (f" {_roles(argument, resolver, values)}" if argument else "")
        return [head, *[f":{k}: {v}" for k, v in options.items()], *inner, fence]
    if name == "nlicl-run-times":
        return ["*(The run-time tables are measured by the book's build: see the published "
                "site's page.)*"]
    if name == "exercise-start":
        number = resolver.exercise(options.get("label", ""))
        title = _roles(argument, resolver, values)
        return [f"**Exercise {number}**" + (f" ({title})" if title else "")]
    if name == "solution-start":
        return [f"**Solution to Exercise {resolver.exercise(argument.strip())}**"]
    if name in ("exercise-end", "solution-end"):
        return []
    if name in ADMONITIONS:
        title = _roles(argument, resolver, values) or ADMONITIONS[name]
        return _quote(([f"**{title}.**", ""] if title else []) + inner)
    if name == "prf:proof":
        return ["*Proof.*", "", *inner]
    if name.startswith("prf:"):
        label = options.get("label", "")
        heading = resolver.result(label) if label in resolver.results else name[4:].title()
        title = _roles(argument, resolver, values)
        return _quote([f"**{heading}**" + (f" ({title})" if title else "") + ".", "", *inner])
    if name == "math":
        return ["$$", *content, "$$"]
    if name in ("code", "code-block"):
        return [f"```{argument.strip()}", *content, "```"]
    resolver.problems.append(f"directive {{{name}}} has no plain-Markdown form")
    return inner


def _box(heading: str, body: list[str], resolver: Resolver, solution: bool) -> list[str]:
    """An exercise or a solution with its text, boxed: a blockquote in plain Markdown, an
    admonition for jupyterlab-myst (a solution folded, as on the site)."""
    while body and not body[0].strip():
        body = body[1:]
    while body and not body[-1].strip():
        body = body[:-1]
    if not resolver.for_binder:
        return _quote([heading, *([""] + body if body else [])])
    longest = max([len(m.group(1)) for line in body if (m := re.match(r"^\s*(:{3,})", line))],
                  default=2)
    fence = ":" * max(3, longest + 1)
    title = heading.replace("**", "")
    return [f"{fence}{{admonition}} {title}", f":class: {'dropdown' if solution else 'tip'}", "",
            *body, fence]


def _roles(text: str, resolver: Resolver, values: list[str]) -> str:
    def replace(match: re.Match) -> str:
        role, content = match.group(1), match.group(2)
        explicit = EXPLICIT.match(content)
        text_part, target = ((explicit.group("text"), explicit.group("target")) if explicit
                             else (None, content))
        if role == "eval":
            if resolver.for_binder:
                return match.group(0)
            if not values:
                resolver.problems.append(f"no value for {{eval}}`{content}`")
                return match.group(0)
            return values.pop(0)
        if role == "prf:ref":
            return resolver.result(target, text_part)
        if role in ("cite:t", "cite:ts"):
            return resolver.cite(content, textual=True)
        if role in ("cite:p", "cite:ps", "cite"):
            return resolver.cite(content, textual=False)
        if role == "doc":
            return resolver.doc(target, text_part)
        if role in ("ref", "numref"):
            if text_part:
                return text_part
            if target not in resolver.labels:
                resolver.problems.append(f"{{{role}}} to an unknown label {target!r}")
            return resolver.labels.get(target, target)
        if role == "math":
            return match.group(0) if resolver.for_binder else f"${content}$"
        if role in ("term", "abbr", "sub", "sup", "kbd", "samp", "guilabel", "menuselection"):
            return text_part or content
        resolver.problems.append(f"role {{{role}}} has no plain-Markdown form")
        return match.group(0)

    return ROLE.sub(replace, text)


def _convert_lines(lines: list[str], resolver: Resolver, values: list[str]) -> list[str]:
    out: list[str] = []
    index = 0
    in_code = None  # the fence of a plain code block, inside which nothing is rewritten
    while index < len(lines):
        line = lines[index]
        if in_code is not None:
            out.append(line)
            if line.strip() == in_code:
                in_code = None
            index += 1
            continue
        opened = FENCE_OPEN.match(line)
        if opened:
            fence = opened.group("fence")
            body, index = [], index + 1
            depth = 0
            while index < len(lines):
                inner = FENCE_OPEN.match(lines[index])
                if inner and inner.group("fence")[0] == fence[0] \
                        and len(inner.group("fence")) == len(fence):
                    depth += 1
                elif lines[index].strip() == fence:
                    if depth == 0:
                        break
                    depth -= 1
                body.append(lines[index])
                index += 1
            index += 1  # the closing fence
            converted = _directive(opened.group("name"), fence, opened.group("arg"), body,
                                   resolver, values)
            if opened.group("name") in ("exercise-start", "solution-start"):
                # the rest of the cell is the exercise's (the solution's) text: in a box
                converted = _box(converted[0], _convert_lines(lines[index:], resolver, values),
                                 resolver, solution=opened.group("name") == "solution-start")
                index = len(lines)
            out.extend(opened.group("indent") + c if c else c for c in converted)
            continue
        if re.match(r"^\s*(`{3,}|~{3,})", line):
            in_code = re.match(r"^\s*(`{3,}|~{3,})", line).group(1)
            out.append(line)
            index += 1
            continue
        if (TARGET.match(line) or COMMENT.match(line)) and not resolver.for_binder:
            index += 1
            continue
        out.append(_roles(line, resolver, values))
        index += 1
    return out


def plain_markdown(source: str, user_expressions: list[dict], resolver: Resolver) -> str:
    """``source`` (one MyST markdown cell) as plain Markdown; ``user_expressions`` are the
    cell's evaluated ``{eval}`` roles in order. Problems go to ``resolver.problems``."""
    values = [expression_text(entry.get("result", {})) for entry in user_expressions]
    if not resolver.for_binder and len(values) != len(ROLE_EVAL.findall(source)):
        resolver.problems.append(f"{len(ROLE_EVAL.findall(source))} {{eval}} role(s) but "
                                 f"{len(values)} value(s) in: {source[:80]!r}")
    text = "\n".join(_convert_lines(source.split("\n"), resolver, values))
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n")


ROLE_EVAL = re.compile(r"\{eval\}`[^`]*`")


def leftovers(text: str) -> list[str]:
    """The MyST roles, directive fences and glue placeholders left in ``text``."""
    return [m.group(0).strip() for m in LEFTOVER.finditer(text)]


BIB_ENTRY = re.compile(r"@\w+\s*\{\s*([^,\s]+)\s*,(.*?)\n\}", re.DOTALL)


def _bib_field(body: str, name: str) -> str | None:
    match = re.search(rf"\b{name}\s*=\s*\{{((?:[^{{}}]|\{{[^{{}}]*\}})*)\}}", body, re.IGNORECASE)
    return match.group(1) if match else None


def _last_name(person: str) -> str:
    person = " ".join(person.split())
    if "," in person:
        return person.split(",", 1)[0].strip()
    words = person.split(" ")
    return words[-1]


def citations(bib_text: str) -> dict[str, tuple[str, str]]:
    """key -> (authors as the site's author-year style writes them, year), read from the text
    of a BibTeX file (``@type{key, author = {Last, First and ...}, year = {2023}, ...}``)."""
    found = {}
    for key, body in BIB_ENTRY.findall(bib_text):
        authors = _bib_field(body, "author") or ""
        names = [re.sub(r"[{}]", "", _last_name(p)) for p in re.split(r"\s+and\s+", authors)
                 if p.strip()]
        text = f"{names[0]} et al." if len(names) >= 3 else " and ".join(names) or key
        found[key] = (text, (_bib_field(body, "year") or "n.d.").strip())
    return found
