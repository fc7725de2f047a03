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
    assert nb["cells"][2]["cell_type"] == "markdown" and show.startswith("### f\n")
    assert "[source]" not in show and "github.com" not in show and "{target=" not in show and "---" not in show
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
    assert "See [`f`](00_page.ipynb#f)" in md and "[g](01_other.ipynb#g)" in md and "[`g`](01_other.ipynb#g)" in md
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


def test_toc_has_three_parts_learners_path_first(tmp_path):
    "Issue 25.1: the learner's path, the production track, the appendix; index is the root; absent pages left out."
    names = ["index", "why", "00_pretokenize", "01_naive_trainer", "02_incremental_trainer", "02a_fast_merge",
             "03_parallel_chunking", "04_encoder", "05_artifacts", "06_cli", "07_benchmark", "cli_reference",
             "references", "developing", "solutions/01_naive_trainer_solutions", "solutions/00_pretokenize_solutions",
             "99_new_chapter"]
    docs = [(f"{n}.ipynb", {"title": n.title()}) for n in reversed(names)]
    order = bd.write_toc(tmp_path, docs)
    assert order == ["index.ipynb", "why.ipynb", "00_pretokenize.ipynb", "01_naive_trainer.ipynb",
                     "02_incremental_trainer.ipynb", "04_encoder.ipynb",
                     "02a_fast_merge.ipynb", "03_parallel_chunking.ipynb", "05_artifacts.ipynb", "06_cli.ipynb",
                     "07_benchmark.ipynb", "99_new_chapter.ipynb",
                     "cli_reference.ipynb", "solutions/00_pretokenize_solutions.ipynb",
                     "solutions/01_naive_trainer_solutions.ipynb", "references.ipynb", "developing.ipynb"]
    toc = yaml.safe_load((tmp_path / "_toc.yml").read_text())
    assert toc["root"] == "index"
    assert [p["caption"] for p in toc["parts"]] == ["Learner's path", "Production track", "Appendix"]
    learn, prod, appendix = toc["parts"]
    assert learn["chapters"][:2] == [{"file": "why", "title": "Why"}, {"file": "00_pretokenize", "title": "00 00_Pretokenize"}]
    assert prod["chapters"][0] == {"file": "02a_fast_merge", "title": "02a 02A_Fast_Merge"}     # numbered with its letter
    assert appendix["chapters"][1] == {"file": "solutions/00_pretokenize_solutions", "title": "Solutions/00_Pretokenize_Solutions"}
    # parts whose pages do not exist yet are left out
    bd.write_toc(tmp_path, [("index.ipynb", {}), ("00_pretokenize.ipynb", {"title": "A"})])
    toc = yaml.safe_load((tmp_path / "_toc.yml").read_text())
    assert [p["caption"] for p in toc["parts"]] == ["Learner's path"]
    with pytest.raises(bd.DocsError, match="index.ipynb is missing"): bd.write_toc(tmp_path, [("00_a.ipynb", {})])


def test_fold_and_alt_directives():
    "Issue 25.3/7: `#| fold` -> the code in a collapsed toggle (tag hide-input); `#| alt:` -> the figure's alt text, case kept."
    png = {"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}}
    nb = {"cells": [_code("#| fold: true\nimport os"),
                    _code("#| fold: true\n#| alt: Time Against Size: a log-log plot\nplot()", [png]),
                    _code("#| alt: No figure here\nx = 1"),
                    _code("#| echo: false\n#| fold: true\nplot()", [png])]}
    cells = bd.plain_nb(nb)[0]["cells"]
    assert cells[0]["metadata"] == {"tags": ["hide-input"]} and cells[0]["source"] == "import os"
    assert cells[1]["metadata"] == {"tags": ["hide-input"], "mystnb": {"image": {"alt": "Time Against Size: a log-log plot"}}}
    assert cells[2]["metadata"] == {}
    assert cells[3]["metadata"]["tags"] == ["remove-input"]            # echo: false wins: nothing to fold
    assert bd.FLAG_DIRECTIVE.sub(r"\1: true", "#| fold\n#| alt: x\ncode") == "#| fold: true\n#| alt: x\ncode"


def test_a_figure_without_alt_text_is_a_problem():
    png = {"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}}
    nb = {"cells": [_code("plot()", [png]), _code("#| alt: a plot\nplot()", [png]), _code("#| hide\nplot()", [png])]}
    probs = bd.output_problems(nb, "nbs/x.ipynb")
    assert len(probs) == 1 and "cell 0 ('plot()'): a figure without alt text" in probs[0]


def test_a_link_nbdev_nested_in_the_authors_link_is_unnested():
    "Issue 25.7: `[`f`](a.ipynb#f)` becomes `[[`f`](nbdev url)](a.ipynb#f)` after nbdev: made one link again."
    row = "| [[`train_bpe`](https://u.github.io/r/03.html#train_bpe)](03.ipynb#train_bpe)`(path)` | x |"
    assert bd._markdown(row) == "| [`train_bpe`](03.ipynb#train_bpe)`(path)` | x |"


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


# ---------------------------------------------------------------- issue 13: code on the page, clean outputs
def _code(src, outs=()):
    return {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": list(outs), "source": src}


def _sd(name):
    md = f"---\n\n[source](https://github.com/u/r/blob/main/m.py#L1){{target=\"_blank\" style=\"float:right\"}}\n\n### {name}\n\n```python\ndef {name}()\n```"
    return _code(f"#| echo: false\n#| output: asis\nshow_doc({name})",
                 [{"output_type": "execute_result", "metadata": {}, "execution_count": None, "data": {"text/markdown": md}}])


def test_exports_cells_show_their_code_under_an_anchor_instead_of_a_signature():
    fold = '#| code-fold: show\n#| code-summary: "Exported source"\n'     # what nbdev's add_fold writes
    nb = {"cells": [_sd("count_pairs"), _code(fold + "def count_pairs(words):\n    return {}\nLIMIT = 3"),
                    _sd("Tokenizer.encode"), _code(fold + "@patch\ndef encode(self: Tokenizer, text):\n    pass"),
                    _code(fold + 'N = 3\n"The docstring of N."', [{"output_type": "execute_result", "metadata": {}, "execution_count": 1,
                                                                   "data": {"text/plain": "'The docstring of N.'"}}]),
                    _sd("other"),                                         # a plain `#| export` elsewhere: kept
                    _code(fold + "def _helper(): pass")]}
    out, _ = bd.plain_nb(nb)
    cells = out["cells"]
    assert [c["cell_type"] for c in cells] == ["markdown", "code", "markdown", "code", "markdown", "code", "markdown", "code"]
    assert '<a id="n"></a>' in cells[4]["source"] and cells[5]["outputs"] == []     # a constant's docstring is not an output
    del cells[4:6]
    assert '<a id="count_pairs"></a><a id="limit"></a>' in cells[0]["source"] and "{index} count_pairs" in cells[0]["source"]
    assert cells[1]["source"].startswith("def count_pairs(") and "#|" not in cells[1]["source"]
    assert '<a id="tokenizer.encode"></a>' in cells[2]["source"] and cells[3]["source"].startswith("@patch")
    assert cells[4]["source"].startswith("### other")
    assert cells[5]["source"] == "def _helper(): pass" and cells[5]["metadata"] == {}   # shown, nothing folded, no anchor


def test_echo_false_cells_keep_only_their_output():
    out, _ = bd.plain_nb({"cells": [_code("#| echo: false\nplot()", [{"output_type": "stream", "name": "stdout", "text": "x"}])]})
    assert out["cells"][0]["metadata"]["tags"] == ["remove-input"] and out["cells"][0]["outputs"]


def test_markdown_fixes_tables_and_signatures():
    row = "| **special token** | a string such as `<|endoftext|>` or ``a|b`` |\n|---|---|\n\n`x|y` outside a table"
    md = bd._markdown(row)
    assert r"`<\|endoftext\|>`" in md and r"``a\|b``" in md and "`x|y` outside" in md
    assert bd._markdown(r"| `a\|b` |") == r"| `a\|b` |"                  # already escaped: left alone
    sig = bd._show_doc_md("```python\ndef f(\n    c, # from [`count_pretokens`](https://u.github.io/r/p.html#count_pretokens)\n)\n```")
    assert "# from `count_pretokens`\n" in sig and "](" not in sig


def test_output_problems_name_notebook_cell_and_what():
    outs = lambda *o: list(o)
    stream = lambda name, text: {"output_type": "stream", "name": name, "text": text}
    nb = {"cells": [
        _code("ok = 1", outs(stream("stdout", "fine, 100 % done | really"))),
        _code("boom()", outs({"output_type": "error", "ename": "ValueError", "evalue": "bad", "traceback": ["Traceback..."]})),
        _code("warn()", outs(stream("stderr", "x.py:3: UserWarning: careful\n  warnings.warn(...)"))),
        _code("train()", outs(stream("stderr", " 40%|████      | 4/10 [00:01<00:02]"))),
        _code("print(p)", outs({"output_type": "execute_result", "metadata": {}, "execution_count": 1,
                                "data": {"text/plain": "PosixPath('/tmp/tmpab12/x.txt')"}})),
        _code("#| hide\nprint(p)", outs(stream("stdout", "/home/me/secret"))),       # not on the site
    ]}
    probs = bd.output_problems(nb, "nbs/x.ipynb")
    assert len(probs) == 4, probs
    assert probs[0].startswith("nbs/x.ipynb cell 1 ('boom()'): a traceback (ValueError: bad)")
    assert "cell 2" in probs[1] and "UserWarning: careful" in probs[1]
    assert "cell 3" in probs[2] and "progress bar" in probs[2]
    assert "cell 4" in probs[3] and "/tmp/tmpab12/x.txt" in probs[3]


def test_import_cells_finds_what_nbdev_warns_about(tmp_path):
    src = _nb(tmp_path / "m.ipynb", "#| default_exp m", "#| exports\nimport os", "#| exports\ndef f(): return os.sep",
              "import json\nx = json.dumps(1)", "#| hide\nfrom pathlib import Path\nPath('.')", "import re")
    assert bd.import_cells(src) == [3, 4]
    probs = bd.import_problems(tmp_path, [src])
    assert len(probs) == 2 and "cell 3 ('import json')" in probs[0]


def test_check_clean_fails_unless_told_not_to(tmp_path, monkeypatch):
    (tmp_path / "nbs").mkdir()
    src = _nb(tmp_path / "nbs" / "m.ipynb", "print('/work/x')")
    ex = tmp_path / "exec"; ex.mkdir()
    nb = json.loads(src.read_text()); nb["cells"][0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "/work/x\n"}]
    (ex / "m.ipynb").write_text(json.dumps(nb))
    monkeypatch.setattr(bd, "ROOT", tmp_path)
    monkeypatch.delenv(bd.STRICT_ENV, raising=False)
    with pytest.raises(bd.DocsError, match=r"nbs/m.ipynb cell 0 \(\"print\('/work/x'\)\"\): a machine path"):
        bd.check_clean(tmp_path / "nbs", ex, [src])
    monkeypatch.setenv(bd.STRICT_ENV, "0")
    assert len(bd.check_clean(tmp_path / "nbs", ex, [src])) == 1


def test_jupyter_book_resolves_raw_anchors_and_renders_markdown_tables(tmp_path):
    "A link to an `<a id>` anchor (another page's or this page's) passes `-W`; a Markdown() output table is a table."
    book = tmp_path / "book"
    book.mkdir()
    for f in bd.DOCS_CONFIG.iterdir():
        if f.is_file(): (book / f.name).write_bytes(f.read_bytes())
    table = {"output_type": "display_data", "metadata": {}, "data": {"text/markdown": "| a | b |\n|---|---|\n| 1 | 2 |", "text/plain": "<Markdown>"}}
    meta = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}, "language_info": {"name": "python"}}
    nbformat.write(nbformat.v4.new_notebook(metadata=meta, cells=[
        nbformat.v4.new_markdown_cell("# Home\n\nSee [`count_pairs`](00_a.ipynb#count_pairs) and [here](index.ipynb#here).\n\n<a id=\"here\"></a>"),
        nbformat.v4.new_code_cell("show()", outputs=[nbformat.from_dict(table)]),
    ]), book / "index.ipynb")
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A\n\n<a id=\"count_pairs\"></a>\n\ntext")]), book / "00_a.ipynb")
    bd.write_toc(book, [("index.ipynb", {"title": "Home"}), ("00_a.ipynb", {"title": "A"})])
    bd.jupyter_book(book, tmp_path / "out")
    html = (tmp_path / "out" / "_build" / "html" / "index.html").read_text()
    assert 'href="00_a.html#count_pairs"' in html and 'href="#here"' in html
    assert "<table" in html and "| a | b |" not in html


def test_private_names_keep_their_anchor_but_stay_out_of_the_index():
    md = bd._anchor_cell(["_Tally.add", "count_pairs", "Tokenizer._x"])["source"]
    assert "{index} count_pairs" in md
    assert "{index} _Tally" not in md and "{index} Tokenizer._x" not in md
    for anchor in ("tally.add", "count_pairs", "tokenizer._x"):  # the ids nbdev's headings had
        assert f'<a id="{anchor}"></a>' in md, anchor


def test_defined_names_are_the_names_a_cell_binds():
    "`Cls.attr = ...` and `d[k] = ...` change an object defined elsewhere: no anchor of theirs (it would repeat the class's)."
    code = "def f(): pass\nclass C: pass\nC.attr = 0\nd['k'] = 1\nA, (B, *D) = 1, (2, 3, 4)\n_p = 1\nN: int = 3"
    assert bd.defined_names(code) == ["f", "C", "A", "B", "D", "N"]


def test_no_id_twice_on_a_page():
    "An exports cell's anchor that a heading of the page already has in the HTML is left out, and so is a raw anchor a heading repeats."
    fold = '#| code-fold: show\n#| code-summary: "Exported source"\n'
    md = lambda s: {"cell_type": "markdown", "metadata": {}, "source": s}
    nb = {"cells": [md("## `pretokenize`\n\nSplits.\n\n## `count_pairs`"),  # HTML ids: pretokenize, count-pairs
                    _code(fold + "def pretokenize(text): return []\ndef count_pairs(words): return {}"),
                    _code(fold + "def _p(): pass\ncount_pairs.x = 1"),  # a second anchor for `count_pairs`: none
                    md('<a id="details"></a>\n\n## Details\n\n<a id="kept"></a>\n\nText.')]}
    out, _ = bd.plain_nb(nb)
    page = "\n".join("".join(c["source"]) for c in out["cells"])
    assert '<a id="pretokenize">' not in page and page.count('<a id="count_pairs"></a>') == 1
    assert "{index} pretokenize" in page and "{index} count_pairs" in page  # both still in the index
    assert '<a id="details">' not in page and '<a id="kept"></a>' in page and "## Details" in page
    assert sum(1 for c in out["cells"] if c["cell_type"] == "code") == 2  # both code cells stay; the second has no anchor cell


def test_readme_keeps_the_two_commands():
    "Issue 25.8: the two commands moved to the Developing page, but the README (made from index + that section) keeps them."
    import make_readme
    cells = make_readme.borrowed_cells()
    assert len(cells) == 1 and "make demo" in cells[0].source and "make test" in cells[0].source
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make demo" in readme and "make test" in readme
