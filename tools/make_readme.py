"""Generate README.md from nbs/index.ipynb without Quarto (`nbdev_readme` needs it).

The landing notebook, up to its first `## Appendix` heading, is executed (with execnb, the executor nbdev itself uses, so no Jupyter kernel
is needed), cells marked `#| hide` (or exported, or drawing a figure) are dropped, and so is everything
from the first `## Appendix` heading on (the site shows it; a README has no use for it); `#|` directive
lines are removed. The section "The two commands" of nbs/developing.ipynb (`make demo`, `make test`)
follows "Install and run", so the README keeps them although the landing page leaves them to the
Developing page. nbconvert's markdown exporter writes the result. Run it as `python tools/make_readme.py` (or `make readme`).
"""
import os, re, sys
from pathlib import Path

import nbformat
from execnb.nbio import read_nb, write_nb
from execnb.shell import CaptureShell
from nbconvert import MarkdownExporter

ROOT = Path(__file__).resolve().parents[1]
DIRECTIVE = re.compile(r"^\s*#\|.*$\n?", re.M)


def _hidden(cell) -> bool:
    "True for cells nbdev would hide from the docs, and for figures (a README cannot embed them)."
    if any(re.match(r"\s*#\|\s*(hide|export|exporti|default_exp)\b", l) for l in cell.source.splitlines()[:5]): return True
    return any(k.startswith("image/") for o in cell.get("outputs", []) for k in o.get("data", {}))


def borrowed_cells(src: Path = ROOT / "nbs" / "developing.ipynb", heading: str = "## The two commands") -> list:
    "The markdown cells of `src` that start with `heading` (none if `src` is missing)."
    if not src.exists(): return []
    return [c for c in read_nb(src).cells if c.cell_type == "markdown" and c.source.startswith(heading)]


def main(src: Path = ROOT / "nbs" / "index.ipynb", dest: Path = ROOT / "README.md") -> None:
    "Execute `src` and write its visible cells as markdown to `dest`."
    nb = read_nb(src)
    end = next((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and c.source.startswith("## Appendix")),
               len(nb.cells))
    nb.cells = nb.cells[:end]                # the appendix is neither shown nor run (nbdev_test runs it)
    cwd = os.getcwd()
    os.chdir(src.parent)                     # notebooks run from nbs/, as nbdev_test runs them
    try: CaptureShell().run_all(nb, exc_stop=True)
    finally: os.chdir(cwd)
    nb.cells = [c for c in nb.cells if not _hidden(c)]
    at = next((i + 1 for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and c.source.startswith("## Install and run")),
              len(nb.cells))
    nb.cells[at:at] = borrowed_cells()
    for c in nb.cells: c.source = DIRECTIVE.sub("", c.source)
    tmp = dest.with_suffix(".tmp.ipynb")
    write_nb(nb, tmp)
    node = nbformat.read(tmp, as_version=4)
    tmp.unlink()
    node.metadata["language_info"] = {"name": "python"}   # so code blocks are fenced as python
    body, _ = MarkdownExporter().from_notebook_node(node)
    body = re.sub(r"\]\(([\w/]+\.ipynb(?:#[\w.-]+)?)\)", r"](nbs/\1)", body)   # links to notebooks, relative to the repo root
    note = "<!-- Generated from nbs/index.ipynb by tools/make_readme.py (make readme): edit the notebook, not this file. -->\n\n"
    dest.write_text(note + body.strip() + "\n", encoding="utf-8")
    print(f"wrote {dest.relative_to(ROOT)}")


if __name__ == "__main__": main()
