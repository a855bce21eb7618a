"""The chapters' diagrams of the machine, written as SVG text: one drawing per chapter, each in a
light and a dark variant drawn by the same function with two palettes.

    python tools/diagrams.py              # writes book/diagrams/chN_<name>_{light,dark}.svg
    python tools/diagrams.py --out DIR    # elsewhere (the drift test compares the two)

A chapter shows the pair in one numbered figure (the light image, the dark one in its legend;
``book/_static/nlicl-diagrams.css`` shows the one that matches the theme's mode). Every drawing
is boxes, arrows and ``<text>`` in the system's sans-serif font, its maths in Unicode (χ₁, φ₂,
ŷ), no external font or script. Text stays legible on a phone: at most about 40 characters a
row, at least ``SMALL`` user units high in a viewBox 640 wide, so about 11 px once the figure
is scaled to a 390 px screen's column.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "book" / "diagrams"
WIDTH = 640  # every viewBox is this wide, so every figure scales its text alike
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
LARGE, TEXT, SMALL = 26, 22, 19  # font sizes, user units
MAX_ROW_CHARS = 40
SCRIPT = re.compile(r"([_^])\{([^}]*)\}")  # _{sub}, ^{super}


@dataclass(frozen=True)
class Palette:
    """The colours of one variant: ink for text and lines, and a (fill, stroke) pair for each
    part of a token: the input x, the slots, the label y, and the query's highlight."""

    name: str
    ink: str
    muted: str
    box: tuple[str, str]
    x: tuple[str, str]
    slots: tuple[str, str]
    label: tuple[str, str]
    query: str


LIGHT = Palette("light", ink="#1b1b1b", muted="#5c5c5c", box=("#f1f1f1", "#5c5c5c"),
                x=("#dbe8f7", "#2b64a8"), slots=("#dcf0dd", "#2c7a3c"),
                label=("#fde4c8", "#b35c07"), query="#8a2be2")
DARK = Palette("dark", ink="#e8e8e8", muted="#a8a8a8", box=("#2a2a2a", "#a8a8a8"),
               x=("#183352", "#86b6ee"), slots=("#173a1f", "#7fcf8f"),
               label=("#4a2f12", "#f2a65e"), query="#c99bff")
PALETTES = (LIGHT, DARK)


class Drawing:
    """SVG elements in a list; ``svg()`` wraps them with the title, description and arrowhead."""

    def __init__(self, palette: Palette, height: int, title: str, desc: str) -> None:
        self.palette, self.height, self.title, self.desc = palette, height, title, desc
        self.parts: list[str] = []

    def rect(self, x: float, y: float, w: float, h: float, colours: tuple[str, str], *,
             dashed: bool = False, stroke: str | None = None, width: float = 2) -> None:
        dash = ' stroke-dasharray="8 6"' if dashed else ""
        self.parts.append(
            f'<rect x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}" rx="6" fill="{colours[0]}" '
            f'stroke="{stroke or colours[1]}" stroke-width="{width:g}"{dash}/>')

    def text(self, x: float, y: float, content: str, *, size: int = TEXT, anchor: str = "middle",
             colour: str | None = None, weight: str = "normal", italic: bool = False) -> None:
        """One row of text; ``_{L}`` and ``^{(ℓ)}`` in ``content`` are written as a subscript
        and a superscript (for what Unicode has no sub- or superscript letter of)."""
        shown = SCRIPT.sub(r"\2", content)
        if len(shown) > MAX_ROW_CHARS:
            raise ValueError(f"content: {len(shown)} characters, more than {MAX_ROW_CHARS} "
                             f"for one row: {content!r}")
        small = round(size * 0.75)
        body = SCRIPT.sub(
            lambda match: f'<tspan baseline-shift="{"sub" if match[1] == "_" else "super"}" '
                          f'font-size="{small}">{match[2]}</tspan>', escape(content))
        style = ' font-style="italic"' if italic else ""
        bold = ' font-weight="bold"' if weight == "bold" else ""
        self.parts.append(
            f'<text x="{x:g}" y="{y:g}" font-size="{size}" text-anchor="{anchor}" '
            f'dominant-baseline="central" fill="{colour or self.palette.ink}"{style}{bold}>'
            f'{body}</text>')

    def arrow(self, x1: float, y1: float, x2: float, y2: float, *, dashed: bool = False,
              colour: str | None = None) -> None:
        dash = ' stroke-dasharray="8 6"' if dashed else ""
        self.parts.append(
            f'<line x1="{x1:g}" y1="{y1:g}" x2="{x2:g}" y2="{y2:g}" stroke="{colour or self.palette.ink}" '
            f'stroke-width="2.5" marker-end="url(#head)"{dash}/>')

    def line(self, points: list[tuple[float, float]], *, colour: str | None = None) -> None:
        path = " ".join(f"{x:g},{y:g}" for x, y in points)
        self.parts.append(f'<polyline points="{path}" fill="none" '
                          f'stroke="{colour or self.palette.muted}" stroke-width="2"/>')

    def svg(self) -> str:
        ink = self.palette.ink
        head = (f'<marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
                f'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
                f'fill="{ink}"/></marker>')
        lines = [
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {self.height}" '
            f'width="{WIDTH}" height="{self.height}" role="img" aria-labelledby="title desc" '
            f'font-family={quoteattr(FONT)}>',
            f'<title id="title">{escape(self.title)}</title>',
            f'<desc id="desc">{escape(self.desc)}</desc>',
            f"<defs>{head}</defs>",
            *self.parts,
            "</svg>",
        ]
        return "\n".join(lines) + "\n"


def ch1_prompt(p: Palette) -> Drawing:
    """The prompt Z₀ as tokens in columns (x on top, y below), the query's label 0, the mask
    and where the prediction is read."""
    d = Drawing(p, 470, "The prompt as a matrix of tokens",
                "Columns are tokens: the n context tokens (x_i; y_i) and the query (x_{n+1}; 0), "
                "the input x on top and the label y in the last row. The mask keeps the query "
                "out of the keys and values; the prediction is read, negated, from the query's "
                "label entry after the last layer.")
    columns = [("x₁", "y₁"), ("x₂", "y₂"), ("⋯", "⋯"), ("xₙ", "yₙ")]
    top, split, bottom = 70, 200, 262
    for k, (x_text, y_text) in enumerate(columns):
        left = 96 + 100 * k
        d.rect(left, top, 88, split - top, p.x)
        d.rect(left, split + 8, 88, bottom - split - 8, p.label)
        d.text(left + 44, (top + split) / 2, x_text, size=LARGE)
        d.text(left + 44, (split + 8 + bottom) / 2, y_text, size=LARGE)
    query = 516
    d.rect(query - 8, top - 10, 104, bottom - top + 20, ("none", p.query), dashed=True, width=3)
    d.rect(query, top, 88, split - top, p.x)
    d.rect(query, split + 8, 88, bottom - split - 8, p.label)
    d.text(query + 44, (top + split) / 2, "xₙ₊₁", size=LARGE)
    d.text(query + 44, (split + 8 + bottom) / 2, "0", size=LARGE)
    d.text(44, (top + split) / 2, "x", size=LARGE, italic=True)
    d.text(44, (top + split) / 2 + 30, "d rows", size=SMALL, colour=p.muted)
    d.text(44, (split + 8 + bottom) / 2, "y", size=LARGE, italic=True)
    d.text(286, 30, "context: n tokens", weight="bold")
    d.text(query + 44, 30, "query", weight="bold", colour=p.query)
    d.line([(96, 290), (96, 302), (484, 302), (484, 290)])
    d.text(290, 330, "keys and values: context only")
    d.text(290, 360, "(the mask M leaves the query out)", size=SMALL, colour=p.muted)
    d.arrow(query + 44, bottom + 4, query + 44, 398)
    d.text(query + 44, 420, "ŷ: read here,", size=SMALL)
    d.text(query + 44, 446, "after L layers", size=SMALL)
    return d


def ch2_linear(p: Palette) -> Drawing:
    """Two lanes: the context sets the weights; the query only passes through a linear map."""
    d = Drawing(p, 430, "Why the prediction stays linear in the query",
                "The context tokens go through the L layers on their own and fix the weights "
                "v(context); the query x_{n+1} has no path back into the context and only meets "
                "a linear map, so the prediction is v(context) transposed times x_{n+1} at any "
                "depth.")
    d.rect(10, 30, 250, 96, p.label)
    d.text(135, 62, "context", weight="bold")
    d.text(135, 96, "(xᵢ, yᵢ), i ≤ n")
    d.rect(340, 30, 290, 96, p.box)
    d.text(485, 62, "layers 1 … L")
    d.text(485, 96, "H_{ℓ} = Σᵢ zᵢ zᵢᵀ")
    d.arrow(262, 78, 336, 78)
    d.rect(10, 250, 250, 96, p.x, stroke=p.query, width=3)
    d.text(135, 282, "query", weight="bold", colour=p.query)
    d.text(135, 316, "xₙ₊₁")
    d.rect(340, 250, 290, 96, p.box)
    d.text(485, 282, "linear map")
    d.text(485, 316, "ŷ = v(context)ᵀ xₙ₊₁")
    d.arrow(262, 298, 336, 298)
    d.arrow(485, 128, 485, 246)
    d.text(472, 172, "weights", anchor="end", size=SMALL)
    d.text(472, 200, "v(context)", anchor="end", size=SMALL)
    d.arrow(135, 248, 135, 130, dashed=True, colour=p.muted)
    d.text(150, 175, "✗ no path back", anchor="start", size=SMALL, colour=p.muted)
    d.text(150, 201, "(mask M)", anchor="start", size=SMALL, colour=p.muted)
    d.text(320, 395, "linear in xₙ₊₁ at every depth L", weight="bold")
    return d


def _token(d: Drawing, left: float, top: float, slots: str, slot_note: str) -> None:
    """One token drawn as a column: x, the m slots, the label y."""
    p = d.palette
    d.rect(left, top, 120, 70, p.x)
    d.text(left + 60, top + 35, "x", size=LARGE, italic=True)
    d.rect(left, top + 78, 120, 90, p.slots)
    d.text(left + 60, top + 110, slots, size=LARGE)
    d.text(left + 60, top + 142, slot_note, size=SMALL, colour=p.muted)
    d.rect(left, top + 176, 120, 44, p.label)
    d.text(left + 60, top + 198, "y", size=LARGE, italic=True)


def ch3_glu(p: Palette) -> Drawing:
    """The GLU writes φ₂(x) into the slots; attention then takes one GD step on (x; φ₂)."""
    d = Drawing(p, 480, "The GLU writes features, attention takes a step",
                "A token holds x, m feature slots that start at zero, and the label y. The GLU's "
                "h units read x and write the quadratic monomials phi_2(x) into the slots; the "
                "attention layer in GD form then takes one preconditioned gradient step, with "
                "Gamma, on the features psi = (x; phi_2).")
    d.text(70, 26, "token", weight="bold")
    d.text(630, 26, "after the GLU", anchor="end", weight="bold")
    _token(d, 10, 50, "0", "m slots")
    _token(d, 510, 50, "φ₂(x)", "m slots")
    d.rect(200, 118, 240, 110, p.box)
    d.text(320, 150, "GLU, h units", weight="bold")
    d.text(320, 190, "(aᵤᵀx)(bᵤᵀx)")
    d.line([(130, 85), (165, 85), (165, 150)], colour=p.ink)
    d.arrow(165, 150, 196, 150)
    d.arrow(442, 172, 506, 172)
    d.text(474, 206, "W₃", size=SMALL)
    d.arrow(570, 272, 570, 318)
    d.rect(150, 322, 480, 70, p.box)
    d.text(390, 344, "attention (GD form, Γ):", weight="bold")
    d.text(390, 374, "one GD step on ψ = (x; φ₂)")
    d.text(320, 438, "ŷ = (1/n) Σᵢ yᵢ ψ(xₙ₊₁)ᵀ Γ ψ(xᵢ)")
    return d


def ch4_budget(p: Palette) -> Drawing:
    """Six units into six slots hold every quadratic monomial; three slots hold a 3-dim span."""
    d = Drawing(p, 500, "Slots m and units h: the block's budget",
                "For d = 3 there are p_2 = d(d+1)/2 = 6 quadratic monomials. A block with h = 6 "
                "units and m = 6 slots writes all of them; a block with m = 3 slots holds only a "
                "three-dimensional span U phi_2 of them, and the rest of phi_2 does not fit.")
    d.text(320, 26, "d = 3: p₂ = d(d+1)/2 = 6 quadratics", weight="bold")
    monomials = ["x₁²", "x₂²", "x₃²", "x₁x₂", "x₁x₃", "x₂x₃"]

    def units_and_slots(top: float, labels: list[str], ghosts: int) -> None:
        for k in range(6):
            centre = 56 + 104 * k
            if k < len(labels):
                d.parts.append(f'<circle cx="{centre}" cy="{top + 18}" r="16" fill="{p.box[0]}" '
                               f'stroke="{p.box[1]}" stroke-width="2"/>')
                d.text(centre, top + 18, "×", size=SMALL)
                d.arrow(centre, top + 36, centre, top + 62)
                d.rect(centre - 48, top + 66, 96, 56, p.slots)
                d.text(centre, top + 94, labels[k], size=TEXT)
            else:
                d.rect(centre - 48, top + 66, 96, 56, ("none", p.muted), dashed=True)
        if ghosts:
            d.text(56 + 104 * 4, top + 142, "no room", size=SMALL, colour=p.muted)

    d.text(320, 76, "m = 6 slots, h = 6 units: all of φ₂")
    units_and_slots(96, monomials, 0)
    d.text(320, 268, "m = 3 slots: a 3-dim span U φ₂")
    units_and_slots(288, ["(Uφ₂)₁", "(Uφ₂)₂", "(Uφ₂)₃"], 3)
    d.parts.append(f'<circle cx="40" cy="474" r="12" fill="{p.box[0]}" stroke="{p.box[1]}" '
                   f'stroke-width="2"/>')
    d.text(62, 474, "GLU unit (aᵀx)(bᵀx)", anchor="start", size=SMALL)
    d.rect(370, 462, 28, 24, p.slots)
    d.text(408, 474, "slot", anchor="start", size=SMALL)
    return d


def ch5_stack(p: Palette) -> Drawing:
    """Blocks 1..L rewrite the same m slots; the label row carries the residuals down."""
    d = Drawing(p, 640, "The stack: blocks rewrite the slots, labels carry residuals",
                "The token flows down through blocks 1 to L. Block l's GLU writes its own "
                "features chi_l into the same m slots, replacing the previous block's; its "
                "attention takes a gradient step, and the label row carries the residuals "
                "r(0) = y, r(1), ..., r(L) down the stack. The query's label ends as minus "
                "the prediction.")
    d.text(80, 26, "x", size=LARGE, italic=True)
    d.text(250, 26, "m slots", weight="bold")
    d.text(470, 26, "label row", weight="bold")
    stages = [("0", "r^{(0)} = y"), ("χ₁", "r^{(1)}"), ("χ₂", "r^{(2)}"), ("χ_{L}", "r^{(L)}")]
    for top, (slots, label) in zip((50, 188, 326, 512), stages, strict=True):
        d.rect(20, top, 120, 50, p.x)
        d.text(80, top + 25, "x", size=LARGE, italic=True)
        d.rect(150, top, 200, 50, p.slots)
        d.text(250, top + 25, slots, size=LARGE)
        d.rect(360, top, 220, 50, p.label, width=3)
        d.text(470, top + 25, label, size=LARGE)
    blocks = ["block 1: writes χ₁, GD step", "block 2: writes χ₂, GD step",
              "block L: writes χ_{L}, GD step"]
    for top, block in zip((122, 260, 446), blocks, strict=True):
        d.arrow(300, top - 22, 300, top - 3)
        d.rect(20, top, 560, 44, p.box)
        d.text(300, top + 22, block)
        d.arrow(300, top + 44, 300, top + 63)
    d.text(300, 404, "⋮", size=LARGE)
    d.text(320, 588, "context labels: the residuals r^{(ℓ)}")
    d.text(320, 620, "the query's label: −ŷ after block L")
    return d


DIAGRAMS: dict[str, Callable[[Palette], Drawing]] = {
    "ch1_prompt": ch1_prompt,
    "ch2_linear": ch2_linear,
    "ch3_glu": ch3_glu,
    "ch4_budget": ch4_budget,
    "ch5_stack": ch5_stack,
}


def render(name: str, palette: Palette) -> str:
    """The SVG text of diagram ``name`` (a key of ``DIAGRAMS``) in ``palette``."""
    if name not in DIAGRAMS:
        raise ValueError(f"name: {name!r} is not a diagram; choose one of {sorted(DIAGRAMS)}")
    return DIAGRAMS[name](palette).svg()


def write_all(out_dir: Path = OUT_DIR) -> list[Path]:
    """Write every diagram in both palettes to ``out_dir/<name>_<palette>.svg``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name in DIAGRAMS:
        for palette in PALETTES:
            path = out_dir / f"{name}_{palette.name}.svg"
            path.write_text(render(name, palette), encoding="utf-8")
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="folder to write the SVGs to")
    args = parser.parse_args(argv)
    for path in write_all(args.out):
        print(path)


if __name__ == "__main__":
    main()
