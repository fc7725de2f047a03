"""The docs glue (tools/build_docs.py) on small inputs: it fails loudly, and rewrites what it must."""
import json, sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import build_docs as bd  # noqa: E402
from bpe_docs import pandoc_slug  # noqa: E402  (build_docs put docs/ on the path)


def _nb(path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nbformat.write(nb, path)
    return path


def test_execute_nb_names_the_failing_cell_and_skips_slow_cells(tmp_path):
    src = _nb(tmp_path / "bad.ipynb", "x = 1", '#| slow\nraise RuntimeError("the slow cell ran")',
              'assert x == 2, f"x is {x}"')
    err = bd.execute_nb(src, tmp_path / "out" / "bad.ipynb", frozenset({"slow"}))
    assert err and "x is 1" in err and "the slow cell ran" not in err
    assert not (tmp_path / "out" / "bad.ipynb").exists()


def test_execute_nb_keeps_outputs_and_runs_from_the_notebook_folder(tmp_path):
    (tmp_path / "data.txt").write_text("hello from data.txt")
    src = _nb(tmp_path / "ok.ipynb", 'print(open("data.txt").read())', "#| slow\nprint('slow')", "#| slow\n1 + 1")
    assert bd.execute_nb(src, tmp_path / "out" / "ok.ipynb", frozenset({"slow"})) is None
    cells = json.loads((tmp_path / "out" / "ok.ipynb").read_text())["cells"]
    assert "hello from data.txt" in "".join(cells[0]["outputs"][0]["text"])
    assert cells[1]["outputs"] == [] and cells[2]["outputs"] == []
    assert bd.execute_nb(src, tmp_path / "out2" / "ok.ipynb", frozenset()) is None   # --flags slow: runs them
    cells = json.loads((tmp_path / "out2" / "ok.ipynb").read_text())["cells"]
    assert "slow" in "".join(cells[1]["outputs"][0]["text"])


def test_pandoc_slug_matches_nbdev_anchors():
    assert pandoc_slug("Tokenizer.encode") == "tokenizer.encode"
    assert pandoc_slug("count_pretokens") == "count_pretokens"
    assert pandoc_slug("Why pre-tokenize at all") == "why-pre-tokenize-at-all"
    assert pandoc_slug("`pretokenize`") == "pretokenize"
    assert pandoc_slug("2 trainers, 1 result") == "trainers-1-result"


SHOW_DOC_MD = ('---\n\n[source](https://github.com/u/r/blob/main/r/m.py#L1){target="_blank" style="float:right; font-size:smaller"}\n\n'
               '### f\n\n```python\ndef f(\n    x:int, # what x is\n)->int:\n```\n\n*Double `x`, see [`g`](https://u.github.io/r/other.html#g).*')


def _proc_nb() -> dict:
    code = lambda src, outs=(): {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": list(outs), "source": src}
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "raw", "metadata": {}, "source": "---\ndescription: What f does.\noutput-file: page.html\ntitle: The page\n---\n"},
        {"cell_type": "markdown", "metadata": {}, "source": bd.AUTOGEN},
        {"cell_type": "markdown", "metadata": {}, "source": "## [`f`](https://u.github.io/r/page.html#f)\n\nSee [`f`](https://u.github.io/r/page.html#f) and [g](https://u.github.io/r/other.html#g)."},
        code("#| echo: false\n#| output: asis\nshow_doc(f)",
             [{"output_type": "execute_result", "metadata": {}, "execution_count": None, "data": {"text/markdown": SHOW_DOC_MD, "text/plain": "f"}}]),
        code("#| echo: false\nprint(1)", [{"output_type": "stream", "name": "stdout", "text": "1\n"}]),
        code("#| include: false\nsecret()"),
        code("f(2)"),
    ]}


def test_plain_nb_makes_quarto_notebooks_plain():
    nb, fm = bd.plain_nb(_proc_nb())
    assert fm["output-file"] == "page.html"
    srcs = [c["source"] for c in nb["cells"]]
    assert srcs[0] == "# The page\n\n{.lead}\nWhat f does."
    assert not any(bd.AUTOGEN in s for s in srcs) and not any("secret()" in s for s in srcs)
    assert srcs[1].startswith("## `f`\n")                  # a heading keeps the name, not the link
    show = srcs[2]
    assert nb["cells"][2]["cell_type"] == "markdown" and show.startswith("[source](")
    assert "{target=" not in show and "{.showdoc-source}" in show and "---" not in show
    assert "x:int, # what x is" in show
    assert nb["cells"][3]["metadata"]["tags"] == ["remove-input"] and nb["cells"][3]["source"] == "print(1)"
    assert nb["cells"][4]["source"] == "f(2)" and "#|" not in "".join(srcs)


def test_rewrite_points_nbdev_links_at_pages(tmp_path):
    proc, book = tmp_path / "proc", tmp_path / "book"
    proc.mkdir()
    (proc / "00_page.ipynb").write_text(json.dumps(_proc_nb()))
    other = _proc_nb()
    other["cells"][0]["source"] = "---\noutput-file: other.html\ntitle: Other\n---\n"
    other["cells"][2]["source"] = "## g\n\nBack to [`f`](https://u.github.io/r/page.html#f) and [`h`](https://u.github.io/r/page.html#h)."
    (proc / "01_other.ipynb").write_text(json.dumps(other))
    (proc / "plot.png").write_bytes(b"png")
    docs = dict(bd.rewrite(proc, book, "https://u.github.io/r"))
    assert set(docs) == {"00_page.ipynb", "01_other.ipynb"} and (book / "plot.png").exists()
    page = json.loads((book / "00_page.ipynb").read_text())
    md = "\n".join(c["source"] for c in page["cells"] if c["cell_type"] == "markdown")
    assert "See [`f`](#f)" in md and "[g](01_other.ipynb#g)" in md and "[`g`](01_other.ipynb#g)" in md
    assert "u.github.io" not in md
    md2 = "\n".join(c["source"] for c in json.loads((book / "01_other.ipynb").read_text())["cells"] if c["cell_type"] == "markdown")
    assert "[`f`](00_page.ipynb#f)" in md2
    assert "[`h`](00_page.ipynb)" in md2                  # no heading `h` on that page: link the page


def test_rewrite_rejects_a_link_to_a_page_no_notebook_makes(tmp_path):
    nb = _proc_nb()
    nb["cells"][2]["source"] = "See [`z`](https://u.github.io/r/gone.html#z)."
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "00_page.ipynb").write_text(json.dumps(nb))
    with pytest.raises(bd.DocsError, match="gone.html"):
        bd.rewrite(tmp_path / "proc", tmp_path / "book", "https://u.github.io/r")


def test_toc_lists_index_then_numbered_chapters(tmp_path):
    order = bd.write_toc(tmp_path, [("01_b.ipynb", {"title": "B"}), ("index.ipynb", {"title": "r"}), ("00_a.ipynb", {"title": "A"})])
    assert order == ["index.ipynb", "00_a.ipynb", "01_b.ipynb"]
    toc = yaml.safe_load((tmp_path / "_toc.yml").read_text())
    assert toc["root"] == "index" and toc["chapters"] == [{"file": "00_a", "title": "00 A"}, {"file": "01_b", "title": "01 B"}]
    with pytest.raises(bd.DocsError, match="index.ipynb is missing"): bd.write_toc(tmp_path, [("00_a.ipynb", {})])


def test_jupyter_book_fails_on_a_link_to_a_missing_chapter(tmp_path):
    book = tmp_path / "book"
    book.mkdir()
    for f in bd.DOCS_CONFIG.iterdir():
        if f.is_file(): (book / f.name).write_bytes(f.read_bytes())
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Home\n\nNext: [the missing chapter](01_missing.ipynb)")])
    nbformat.write(nb, book / "index.ipynb")
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A\n\ntext")]), book / "00_a.ipynb")
    bd.write_toc(book, [("index.ipynb", {"title": "Home"}), ("00_a.ipynb", {"title": "A"})])
    with pytest.raises(bd.DocsError, match="01_missing.ipynb"):
        bd.jupyter_book(book, tmp_path / "out")


def test_a_cell_ending_in_semicolon_keeps_its_prints_but_not_its_value(tmp_path):
    src = _nb(tmp_path / "semi.ipynb", 'print("printed"); 41 + 1;')
    assert bd.execute_nb(src, tmp_path / "out.ipynb") is None
    outs = json.loads((tmp_path / "out.ipynb").read_text())["cells"][0]["outputs"]
    assert [o["output_type"] for o in outs] == ["stream"] and "printed" in "".join(outs[0]["text"])
