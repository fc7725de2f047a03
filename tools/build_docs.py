"""Build the docs site from the notebooks, offline: `python tools/build_docs.py` (or `make docs`).

The notebooks in nbs/ are committed without outputs, and Quarto (what `nbdev_docs` needs) cannot be
installed here, so the site is made in four steps, each done by the tool that already knows how:

1. execute  every notebook (nbs/ and its sub-folders, e.g. nbs/solutions/) runs with execnb's
            `CaptureShell` as `nbdev_test` runs it (no Jupyter kernel; from its own folder; IN_TEST=1;
            default process start method), into build/docs/exec/. Cells flagged with a `tst_flags`
            flag of settings.ini (`#| slow`, `#| notest`) are skipped as `nbdev_test` skips them,
            unless named in `--flags`. An error stops the build, naming the notebook and the cell.
   check    what the site would show must be clean: no traceback, no warning on stderr, no progress
            bar, no machine path (/tmp/, /work/, /root/, /home/) in the output of a shown cell, and
            no cell mixing imports with other code (nbdev would print "Found cells containing
            imports and other code" and re-run it), no figure without alt text (`#| alt: ...`). Each problem is named by notebook, cell number
            and first line; any fails the build, unless BPE_DOCS_STRICT=0 (then they are listed).
2. process  `nbdev.serve.proc_nbs()` writes _proc/: `#| hide` cells dropped, `#| export` code
            replaced by `show_doc` output, backticked names linked to their docs.
3. rewrite  _proc/ is Quarto-flavoured; `plain_nb` turns each notebook into a plain one for Jupyter
            Book (front matter -> title and subtitle, `show_doc` output -> markdown without its
            [source] link, nbdev's absolute doc links -> links between pages, Quarto link attributes
            and `#|` lines dropped, `#| echo: false` -> output only, `|` in code spans of table rows
            escaped, a markdown link around a code span that nbdev linked again unnested), `#| fold`
            -> the cell's code collapsed in a toggle (tag `hide-input`: on the page, one click away),
            `#| alt: TEXT` -> every figure the cell draws gets alt="TEXT". An `#| exports` cell shows its code under `<a id="name">` anchors (the ids
            its `show_doc` headings had, so links keep working, plus index entries for genindex)
            instead of a duplicate signature block. The result goes to build/docs/book/, beside a
            copy of docs/ (the Jupyter Book config, CSS, and the `bpe_docs` Sphinx extension, which
            makes raw `<a id>` anchors link targets) and a `_toc.yml` of three parts: the learner's
            path (why, 00, 01, 02, 04), the production track (02a, 03, 03a, 04a, 05, 05a, 06, 07)
            and the appendix (CLI reference, solutions/, references, developing); index is the root,
            absent pages are left out, pages of no part go to the end of the production track.
4. build    `jupyter-book build -W`: any Sphinx warning (a link to a chapter that does not exist, an
            anchor that is not there) fails the build. The HTML is then copied to _docs/.

Open _docs/index.html. `tests/browser/test_site.py` checks the result in headless Chromium. Nothing
here touches the network: MathJax comes from sphinx-mathjax-offline, search is Sphinx's own.
"""
from __future__ import annotations

import argparse, json, os, re, shutil, subprocess, sys, time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS_CONFIG = ROOT / "docs"            # _config.yml, _static/, bpe_docs.py: copied into the book
BUILD = ROOT / "build" / "docs"        # exec/ (executed notebooks), book/ (Jupyter Book source), _build/
SITE = ROOT / "_docs"                  # the finished site

sys.path.insert(0, str(DOCS_CONFIG))
from bpe_docs import pandoc_slug  # noqa: E402  (the same anchors Sphinx will generate)


def log(msg: str) -> None: print(f"[docs] {msg}", flush=True)


class DocsError(Exception):
    "A docs build failure, with a message naming the notebook or link at fault."


# ---------------------------------------------------------------- 1. execute
def _skip(cell, flags: frozenset) -> bool:
    "True for cells `nbdev_test` would not run: markdown, `#| eval: false`, or flagged with one of `flags`."
    from nbdev.process import extract_directives
    if cell.cell_type != "code" or "nbdev_export(" in cell.source: return True
    d = extract_directives(cell, remove=False)
    if d.get("eval:", [""])[0].lower() == "false": return True
    return bool(flags & d.keys())


def _shell(src: Path):
    "execnb's `CaptureShell`, except that a cell ending in `;` keeps what it prints (execnb drops it; Jupyter does not)."
    from execnb.shell import CaptureShell
    from fastcore.basics import AttrDict
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    class Shell(CaptureShell):
        def _run(self, raw_cell, store_history=False, silent=False, shell_futures=True, cell_id=None,
                 stdout=True, stderr=True, display=True, verbose=False):   # execnb 0.1's, minus the stdout drop
            with capture_output(display=display, stdout=stdout and not verbose, stderr=stderr and not verbose) as c:
                r = InteractiveShell.run_cell(self, raw_cell, store_history, silent, shell_futures=shell_futures, cell_id=cell_id)
            return AttrDict(result=r, stdout=c.stdout, stderr=c.stderr, display_objects=c.outputs,
                            exception=r.error_in_exec or r.error_before_exec, quiet=raw_cell.rstrip().endswith(";"))
    return Shell(src)


FLAG_DIRECTIVE = re.compile(r"^(#\|\s*fold)\s*$", re.M)   # `#| fold` -> `#| fold: true`


def execute_nb(src: Path,  # the notebook to run
               dest: Path,  # where to write it, with its outputs
               skip_flags: frozenset = frozenset()  # cells with one of these `#|` flags are not run
              ) -> str | None:
    "Run `src` from its own folder as `nbdev_test` does and write it with outputs to `dest`; return the error, if any."
    from execnb.nbio import read_nb, write_nb
    from nbdev.frontmatter import FrontmatterProc
    from nbdev.process import NBProcessor
    from fastcore.basics import str2bool
    if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))   # as nbdev_test: the repo's bpe_nb first
    nb = read_nb(src)
    fm = getattr(NBProcessor(src, procs=FrontmatterProc, process=True).nb, "frontmatter_", {}) or {}
    if not str2bool(fm.get("skip_exec", False)):
        saved = sys.modules["__main__"], os.getcwd(), os.environ.get("IN_TEST")
        os.environ["IN_TEST"] = "1"                            # as nbdev_test
        shell = _shell(src)
        os.chdir(src.parent)
        try: shell.run_all(nb, exc_stop=True, preproc=lambda c: _skip(c, skip_flags))
        except Exception: return shell.prettytb(fname=src)
        finally:                                               # IPython swapped __main__ for the notebook's namespace
            sys.modules["__main__"] = saved[0]; os.chdir(saved[1])
            if saved[2] is None: os.environ.pop("IN_TEST", None)
            else: os.environ["IN_TEST"] = saved[2]
    for c in nb.cells:              # nbdev's processing keeps only `#| key: value` directives: spell flags so
        if c.cell_type == "code": c.source = FLAG_DIRECTIVE.sub(r"\1: true", c.source)   # the rewrite sees them
    dest.parent.mkdir(parents=True, exist_ok=True)
    write_nb(nb, dest)
    return None


def _timed(src: Path, dest: Path, skip_flags: frozenset) -> tuple[str | None, float]:
    t = time.time()
    return execute_nb(src, dest, skip_flags), time.time() - t


def execute_all(nbs: Path,  # the notebook folder (settings.ini's nbs_path)
                dest: Path,  # a copy of it, with every notebook executed
                skip_flags: frozenset,  # `tst_flags` not forced on
                workers: int  # notebooks run in parallel, each in its own process
               ) -> list[Path]:
    "Copy `nbs` to `dest` with every notebook executed; raise `DocsError` listing the notebooks that fail."
    from nbdev.doclinks import nbglob
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(nbs, dest, ignore=shutil.ignore_patterns("_*", ".*", "*.ipynb"))  # images, data files
    srcs = sorted(nbglob(nbs, func=Path))
    if not srcs: raise DocsError(f"no notebooks found in {nbs}")
    # The default start method, as nbdev_test: notebooks that start process pools of their own rely on it.
    with ProcessPoolExecutor(max(1, min(workers, len(srcs)))) as ex:
        jobs = [(s, ex.submit(_timed, s, dest / s.relative_to(nbs), skip_flags)) for s in srcs]
        errors = []
        for s, job in jobs:
            err, secs = job.result()
            log(f"    {s.relative_to(nbs)}: {secs:.1f} s" + (", FAILED" if err else ""))
            if err: errors.append(f"{s.relative_to(ROOT)} failed to execute:\n{err}")
    if errors: raise DocsError("\n\n".join(errors))
    return srcs


# ---------------------------------------------------------------- checks: clean outputs, import cells
STRICT_ENV = "BPE_DOCS_STRICT"    # "0": the checks below only print their findings (see strict())
OUTPUT_RULES = (                  # (what, pattern): any match in an output the site shows fails the build
    ("a traceback", re.compile(r"Traceback \(most recent call last\)")),
    ("a progress bar", re.compile(r"\d{1,3}%\|")),
    ("a machine path", re.compile(r"(?<![\w.~-])/(?:tmp|work|root|home)/[^\s'\"]*")),
)
WARNING_RULE = re.compile(r"\w*Warning:|warnings\.warn")   # on stderr


def strict() -> bool:
    "True unless `BPE_DOCS_STRICT=0`: then clean-output and import-cell problems are printed, not fatal."
    return os.environ.get(STRICT_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def _rel(p: Path) -> str:
    "`p` relative to the repository when it is inside it (for messages)."
    try: return p.resolve().relative_to(ROOT.resolve()).as_posix()
    except ValueError: return str(p)


def _first_line(code: str) -> str:
    return next((l for l in code.split("\n") if l.strip()), "")[:80]


def _out_text(o: dict) -> str:
    "Every text an output shows: a stream, a value's or a display's text/plain, markdown or html, an error's traceback."
    if o.get("output_type") == "stream": return _text(o.get("text", ""))
    if o.get("output_type") == "error": return "\n".join(o.get("traceback", [])) + f"\n{o.get('ename')}: {o.get('evalue')}"
    data = o.get("data", {})
    return "\n".join(_text(data[k]) for k in ("text/plain", "text/markdown", "text/html") if k in data)


def _images(outs: list) -> bool:
    "True when the outputs `outs` of a cell hold a figure (any image/* data)."
    return any(k.startswith("image/") for o in outs for k in o.get("data", {}))


def output_problems(nb: dict,  # an executed notebook, as JSON
                    name: str  # how to name it in messages, e.g. nbs/07_benchmark.ipynb
                   ) -> list[str]:
    "What the site would show that it must not: tracebacks, warnings, progress bars, machine paths, figures without alt text; one line each."
    probs = []
    for i, c in enumerate(nb["cells"]):
        if c["cell_type"] != "code": continue
        opts, code = _directives(_text(c.get("source", "")))
        if "hide" in opts or opts.get("include") == "false" or opts.get("output") == "false": continue
        where = f"{name} cell {i} ({_first_line(code)!r})"
        if _images(c.get("outputs", [])) and not opts.get("alt"):
            probs.append(f"{where}: a figure without alt text: add a line `#| alt: what the figure shows` to the cell")
        for o in c.get("outputs", []):
            text = _out_text(o)
            if o.get("output_type") == "error": probs.append(f"{where}: a traceback ({o.get('ename')}: {o.get('evalue')})")
            elif o.get("output_type") == "stream" and o.get("name") == "stderr" and (m := WARNING_RULE.search(text)):
                line = next(l for l in text.split("\n") if m.group(0) in l)
                probs.append(f"{where}: a warning on stderr: {line.strip()[:120]!r}")
            for what, rule in OUTPUT_RULES:
                if o.get("output_type") == "error" and what == "a traceback": continue
                if m := rule.search(text): probs.append(f"{where}: {what} in its output: {m.group(0)[:80]!r}")
    return list(dict.fromkeys(probs))


def import_cells(src: Path) -> list[int]:
    "The cells for which nbdev's docs processing prints 'Found cells containing imports and other code' (and re-runs them)."
    import warnings
    from fastcore.basics import str2bool
    from nbdev.frontmatter import FrontmatterProc
    from nbdev.process import NBProcessor
    from nbdev.processors import _do_eval, _show_docs, _want_doc
    nb = NBProcessor(src, procs=FrontmatterProc, process=True).nb
    fm = getattr(nb, "frontmatter_", {}) or {}
    cells = nb.cells
    trees = [t for c in cells for t in (c.parsed_() or [])]
    has_docs = any(_want_doc(c) for c in cells) or bool(_show_docs(trees))
    if not has_docs or str2bool(fm.get("skip_showdoc", False)): return []
    bad = []
    for c in cells:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _do_eval(c)
        if any("imports and other code" in str(w.message) for w in caught): bad.append(c.idx_)
    return bad


def import_problems(nbs: Path, srcs: list[Path]) -> list[str]:
    "One line per cell that mixes imports with other code, naming the notebook, the cell and its first line."
    out = []
    for src in srcs:
        cells = json.loads(src.read_text(encoding="utf-8"))["cells"]
        for i in import_cells(src):
            code = _directives(_text(cells[i]["source"]))[1]
            out.append(f"{_rel(src)} cell {i} ({_first_line(code)!r}): imports and other code in one cell "
                       "(nbdev re-runs it to make the docs and prints 'Found cells containing imports'): give the imports a cell of their own")
    return out


def check_clean(nbs: Path, exec_dir: Path, srcs: list[Path]) -> list[str]:
    "Run the output and import-cell checks on every notebook; raise `DocsError` with all findings (print them if not `strict()`)."
    probs = import_problems(nbs, srcs)
    for s in srcs:
        nb = json.loads((exec_dir / s.relative_to(nbs)).read_text(encoding="utf-8"))
        probs += output_problems(nb, _rel(s))
    if probs and strict():
        raise DocsError(f"{len(probs)} problem(s) in what the site would show (set {STRICT_ENV}=0 to list them without failing):\n  "
                        + "\n  ".join(probs))
    for p in probs: log(f"    NOT CLEAN ({STRICT_ENV}=0): {p}")
    return probs


# ---------------------------------------------------------------- 2. process
def process(exec_dir: Path, workers: int) -> Path:
    "Run nbdev's docs processing (`proc_nbs`, not `nbdev_proc_nbs`, which tries to install Quarto) on `exec_dir`."
    from nbdev.serve import proc_nbs
    cwd = os.getcwd()
    os.chdir(ROOT)                    # proc_nbs finds settings.ini from the cwd; it skips paths with `.` parts,
    try: return Path(proc_nbs(path=str(exec_dir.relative_to(ROOT)), force=True, n_workers=workers))
    except Exception as e:            # nbdev re-runs the cells that hold imports to make show_doc output
        raise DocsError(f"nbdev's docs processing (proc_nbs) failed: {e}\nnbdev re-executes every cell that "
                        "contains an import (even a `#| hide` one) in a fresh namespace: give imports cells of "
                        "their own, without other code.") from e
    finally: os.chdir(cwd)            # so it gets a path relative to the repo root


# ---------------------------------------------------------------- 3. rewrite
QUARTO_ATTRS = re.compile(r'\)\{target="_blank"[^}]*\}')          # [source](url){target="_blank" style=...}
MD_LINK = re.compile(r"(?<!!)\[([^\]]*)\]\(([^)\s]+)\)")           # [text](url), not images
FENCE = re.compile(r"^\s*(```|~~~)")
AUTOGEN = "<!-- WARNING: THIS FILE WAS AUTOGENERATED! DO NOT EDIT! -->"


def _md_lines(md: str):
    "Yield (index, line, in_code) for the lines of markdown `md`."
    fenced = False
    for i, line in enumerate(md.split("\n")):
        if FENCE.match(line): fenced = not fenced; yield i, line, True
        else: yield i, line, fenced


def _headings_unlinked(md: str) -> str:
    "Headings keep the text of links, not the links: `## [`f`](url)` -> `## `f``."
    lines = md.split("\n")
    for i, line, code in _md_lines(md):
        if not code and re.match(r"#{1,6} ", line): lines[i] = MD_LINK.sub(r"\1", line)
    return "\n".join(lines)


RAW_ANCHOR = re.compile(r'<a\s+(?:id|name)="([^"]+)"')


def _headings(md: str) -> list[str]:
    "The text of each heading of `md`, without its markup."
    return [re.sub(r"[`*]", "", MD_LINK.sub(r"\1", line.lstrip("#"))).strip()  # (nbdev links names: `[f](url)` reads f, as `_headings_unlinked`)
            for _, line, code in _md_lines(md) if not code and re.match(r"#{1,6} ", line)]


def _raw_ids(md: str) -> set[str]:
    "The ids of the raw `<a id=\"x\">` anchors of `md`."
    return {m for _, line, code in _md_lines(md) if not code for m in RAW_ANCHOR.findall(line)}


def _heading_ids(md: str) -> set[str]:
    "The anchors of `md`: those Sphinx gives its headings (via `bpe_docs.pandoc_slug`), and raw `<a id=\"x\">` ones."
    return {pandoc_slug(h) for h in _headings(md)} | _raw_ids(md)


def _section_ids(md: str) -> set[str]:
    "The ids the headings of `md` get in the HTML: docutils' `make_id` of their text (`### encode_file` is `encode-file`)."
    from docutils.nodes import make_id
    return {make_id(h) for h in _headings(md)}


def _drop_anchors(md: str, ids: set[str]) -> str:
    "`md` without its raw `<a id=\"x\"></a>` anchors whose id is in `ids` (a heading of the page has it: the id once)."
    return re.sub(r'<a\s+id="([^"]+)"></a>\n?\n?', lambda m: "" if m.group(1) in ids else m.group(0), md)


KEEP_CASE = {"alt"}          # directives whose value is text to show, not a flag


def _directives(src: str) -> tuple[dict, str]:
    "Split the leading `#| key: value` lines of a code cell from its code."
    lines, opts = src.split("\n"), {}
    while lines and (lines[0].lstrip().startswith("#|") or not lines[0].strip()):   # nbdev adds code-fold lines too
        k, _, v = lines.pop(0).lstrip()[2:].partition(":")
        k, v = k.strip(), v.strip().strip('"')
        if k: opts[k] = v if k in KEEP_CASE else v.lower()
    return opts, "\n".join(lines).strip("\n")


def _text(x) -> str: return "".join(x) if isinstance(x, list) else x


def _md_cell(source: str) -> dict: return {"cell_type": "markdown", "metadata": {}, "source": source}


SOURCE_LINK = re.compile(r"\[source\]\([^)]*\)(\{[^}]*\})?[ \t]*\n?")   # show_doc's [source](github...) link
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def _fence_links_unlinked(md: str) -> str:
    "Inside fenced code (a `show_doc` signature), `[`name`](url)` -> `` `name` ``: links do not render in code."
    lines = md.split("\n")
    for i, line, code in _md_lines(md):
        if code and not FENCE.match(line): lines[i] = MD_LINK.sub(r"\1", line)
    return "\n".join(lines)


def _table_pipes_escaped(md: str) -> str:
    "In table rows, `|` inside a code span becomes `\\|`: else `<|endoftext|>` in backticks splits the cell."
    lines = md.split("\n")
    for i, line, code in _md_lines(md):
        if code or not line.lstrip().startswith("|"): continue
        lines[i] = CODE_SPAN.sub(lambda m: m.group(1) + re.sub(r"(?<!\\)\|", r"\\|", m.group(2)) + m.group(1), line)
    return "\n".join(lines)


def _show_doc_md(md: str) -> str:
    "`show_doc` markdown for MyST: no `---` rule, no [source] link to an unpublished repository, no links inside the signature."
    md = re.sub(r"\A\s*---\s*\n", "", md)
    md = SOURCE_LINK.sub("", QUARTO_ATTRS.sub(")", md))
    return _fence_links_unlinked(md).strip()


NESTED_LINK = re.compile(r"\[\[(`[^`\]]+`)\]\([^)\s]+\)\]\(([^)\s]+)\)")   # [[`f`](nbdev's url)](author's url)


def _links_unnested(md: str) -> str:
    "`[[`f`](url1)](url2)` -> `[`f`](url2)`: nbdev links a code span that the author had already made a link (Markdown has no nested links, so it would render raw)."
    lines = md.split("\n")
    for i, line, code in _md_lines(md):
        if not code: lines[i] = NESTED_LINK.sub(r"[\1](\2)", line)
    return "\n".join(lines)


def _markdown(md: str) -> str:
    "What every markdown cell and markdown output goes through."
    return _table_pipes_escaped(_links_unnested(_headings_unlinked(QUARTO_ATTRS.sub(")", md))))


def _is_exports(opts: dict) -> bool:
    "An `#| exports` cell: nbdev removed the directive but marked the cell `code-summary: \"Exported source\"`."
    return "exports" in opts or opts.get("code-summary") == "exported source"


def defined_names(code: str) -> list[str]:
    "The names a cell defines at top level, as `show_doc` titles them (`f`, `Cls`, `Cls.method` for `@patch`), then public assignments."
    import ast
    from nbdev.showdoc import showdoc_nm
    try: tree = ast.parse(code)
    except SyntaxError: return []
    defs, assigned = [], []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            nm = showdoc_nm(node)
            if not node.name.startswith("_") or node.name.startswith("__"): defs.append(nm)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            todo = list(node.targets if isinstance(node, ast.Assign) else [node.target])
            while todo:  # names, in tuples too; not the object of `Cls.attr = ...` or `d[k] = ...`, which it only changes
                t = todo.pop(0)
                if isinstance(t, (ast.Tuple, ast.List)): todo[:0] = t.elts
                elif isinstance(t, ast.Starred): todo.insert(0, t.value)
                elif isinstance(t, ast.Name) and not t.id.startswith("_"): assigned.append(t.id)
    return [*defs, *assigned]


def _ends_with_docstring(code: str) -> bool:
    "True when the cell's last statement is a bare string: the docstring of a constant, not a value to show."
    import ast
    try: body = ast.parse(code).body
    except SyntaxError: return False
    return bool(body) and isinstance(body[-1], ast.Expr) and isinstance(body[-1].value, ast.Constant) \
        and isinstance(body[-1].value.value, str)


def _private(name: str) -> bool:
    "True for a private name: `_Tally`, `_Cutter.first`, `Tokenizer._encode_chunk` (a component starts with `_`)."
    return any(part.startswith("_") for part in name.split("."))


def _anchor_cell(names: list[str],
                 taken: set[str] | None = None  # ids the page already has (updated): a heading's, or an earlier anchor's, is not repeated
                ) -> dict:
    "Anchors (the ids `show_doc`'s headings had: `count_pairs`, `tokenizer.encode`) and index entries for the public `names`."
    ids = [i for i in dict.fromkeys(pandoc_slug(n) for n in names) if taken is None or i not in taken]
    if taken is not None: taken.update(ids)
    md = "".join(f'<a id="{i}"></a>' for i in ids)
    public = [n for n in dict.fromkeys(names) if not _private(n)]   # genindex lists the public API only
    md += "".join(f"\n\n```{{index}} {n}\n```" for n in public)
    return {**_md_cell(md), "metadata": {"bpe_anchor": True}}


def plain_nb(nb: dict,  # a notebook of _proc/, as JSON
             ) -> tuple[dict, dict]:
    "Make a Quarto-flavoured _proc/ notebook plain for Jupyter Book; return it and its front matter."
    cells, fm = [], {}
    exported = set()        # names defined in `#| exports` cells: their code is shown, so no show_doc block
    taken, sections = set(), set()  # the HTML ids of the page's headings and raw anchors (an exports cell's anchor repeats none); its headings'
    for c in nb["cells"]:
        if c["cell_type"] == "code":
            opts, code = _directives(_text(c.get("source", "")))
            if _is_exports(opts): exported.update(defined_names(code))
        elif c["cell_type"] == "markdown":
            md = _text(c.get("source", ""))
            ids = _section_ids(md); sections |= ids; taken |= ids | _raw_ids(md)
    for i, c in enumerate(nb["cells"]):
        src = _text(c.get("source", ""))
        if c["cell_type"] == "raw" and i == 0 and src.lstrip().startswith("---"):
            fm = yaml.safe_load(src.strip().strip("-")) or {}
            head = f"# {fm.get('title', '')}".rstrip()
            if fm.get("description"): head += f"\n\n{{.lead}}\n{fm['description']}"
            cells.append(_md_cell(head))
        elif c["cell_type"] == "markdown":
            if src.strip() == AUTOGEN: continue
            cells.append(_md_cell(_markdown(_drop_anchors(src, sections))))  # (a raw anchor a heading repeats is for the notebook's own view)
        elif c["cell_type"] == "code":
            opts, code = _directives(src)
            outs = c.get("outputs", [])
            if opts.get("include") == "false": continue
            if opts.get("output") == "asis":     # show_doc: its markdown output becomes the cell
                m = re.fullmatch(r"show_doc\(([\w.]+)\)", code.strip())
                if m and m.group(1) in exported: continue   # the code itself is on the page, under an anchor
                md = "\n\n".join(_text(o["data"]["text/markdown"]) for o in outs if "text/markdown" in o.get("data", {}))
                if md.strip(): cells.append(_md_cell(_markdown(_show_doc_md(md))))
                continue
            if _is_exports(opts):
                if (names := defined_names(code)) and (anchors := _anchor_cell(names, taken))["source"]: cells.append(anchors)
                if _ends_with_docstring(code): outs = [o for o in outs if o.get("output_type") != "execute_result"]
            tags = (["remove-input"] if opts.get("echo") == "false" or not code else
                    ["hide-input"] if "fold" in opts and opts["fold"] not in ("false", "no") else []) + \
                   (["remove-output"] if opts.get("output") == "false" else [])
            if not code and not outs: continue
            meta = {"tags": tags} if tags else {}
            if opts.get("alt") and _images(outs): meta["mystnb"] = {"image": {"alt": opts["alt"]}}
            for o in outs:
                if "text/markdown" in o.get("data", {}):
                    o["data"]["text/markdown"] = _markdown(_text(o["data"]["text/markdown"]))
            cells.append({"cell_type": "code", "execution_count": None, "metadata": meta, "outputs": outs, "source": code})
        else: cells.append(c)
    meta = {"kernelspec": nb.get("metadata", {}).get("kernelspec", {"name": "python3", "display_name": "Python 3", "language": "python"}),
            "language_info": {"name": "python"}}
    return {"nbformat": 4, "nbformat_minor": 4, "metadata": meta, "cells": cells}, fm


def _relink(md: str, here: str, pages: dict, anchors: dict, doc_url: str) -> str:
    "Point nbdev's absolute doc links (`{doc_url}/page.html#anchor`) at the book's own pages; leave code alone."
    def fix(m):
        text, url = m.groups()
        if not url.startswith(doc_url + "/"): return m.group(0)
        page, _, anchor = url[len(doc_url) + 1:].partition("#")
        if page not in pages:
            raise DocsError(f"{here}: link {url!r} points at page {page!r}, which no notebook makes "
                            f"(pages: {', '.join(sorted(pages))}); run nbdev_export, or fix the notebook")
        doc = pages[page]
        if anchor not in anchors[doc]: anchor = ""   # e.g. a private helper without a show_doc heading
        if doc == here and not anchor: return text   # a link to the page one is reading goes nowhere (href="#")
        target = os.path.relpath(doc, os.path.dirname(here) or ".")
        return f"[{text}]({target}{'#' + anchor if anchor else ''})"
    lines = md.split("\n")
    for i, line, code in _md_lines(md):
        if not code: lines[i] = MD_LINK.sub(fix, line)
    return "\n".join(lines)


def rewrite(proc: Path, book: Path, doc_url: str) -> list[tuple[str, dict]]:
    "Write `proc`'s notebooks as plain notebooks (and its other files as they are) to `book`; return (doc, front matter) pairs."
    shutil.rmtree(book, ignore_errors=True)
    shutil.copytree(proc, book, ignore=shutil.ignore_patterns("*.ipynb", ".*", "_quarto.yml", "sidebar.yml"))
    docs, pages, anchors = {}, {}, {}
    for f in sorted(proc.rglob("*.ipynb")):
        rel = f.relative_to(proc).as_posix()
        nb, fm = plain_nb(json.loads(f.read_text(encoding="utf-8")))
        docs[rel] = (nb, fm)
        pages[fm.get("output-file", Path(rel).with_suffix(".html").as_posix())] = rel
        anchors[rel] = set().union(*(_heading_ids(_text(c["source"])) for c in nb["cells"] if c["cell_type"] == "markdown"))
    for rel, (nb, fm) in docs.items():
        for c in nb["cells"]:
            if c["cell_type"] == "markdown": c["source"] = _relink(_text(c["source"]), rel, pages, anchors, doc_url)
            for o in c.get("outputs", []):
                if "text/markdown" in o.get("data", {}):
                    o["data"]["text/markdown"] = _relink(_text(o["data"]["text/markdown"]), rel, pages, anchors, doc_url)
        out = book / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return [(rel, fm) for rel, (nb, fm) in docs.items()]


PARTS = (   # (caption, pages in reading order); a page that does not exist is left out
    ("Learner's path", ["why.ipynb", "00_pretokenize.ipynb", "01_naive_trainer.ipynb", "02_incremental_trainer.ipynb",
                        "04_encoder.ipynb"]),
    ("Production track", ["00a_array_pretokenize.ipynb", "02a_fast_merge.ipynb", "03_parallel_chunking.ipynb", "03a_training.ipynb",
                          "04a_fast_encoding.ipynb", "04b_offsets_and_streams.ipynb", "04c_vocabulary_analysis.ipynb", "04d_continued_training.ipynb", "05_artifacts.ipynb", "05a_interop.ipynb", "06_cli.ipynb",
                          "07_benchmark.ipynb"]),
    ("Appendix", ["cli_reference.ipynb", "solutions/*", "references.ipynb", "developing.ipynb"]),
)
OTHER_PART = "Production track"  # where a page named in no part goes (at its end): new chapters stay visible


def toc_order(rels: list[str]) -> list[tuple[str, list[str]]]:
    "The sidebar's parts: (caption, pages) in the order of `PARTS`, index excluded, absent pages and empty parts left out."
    rels = sorted(set(rels) - {"index.ipynb"})
    parts, placed = [], set()
    for caption, wanted in PARTS:
        pages = []
        for w in wanted:
            pages += sorted(r for r in rels if r.startswith("solutions/")) if w == "solutions/*" else [w] if w in rels else []
        parts.append((caption, pages)); placed.update(pages)
    rest = [r for r in rels if r not in placed]
    parts = [(c, ps + rest if c == OTHER_PART else ps) for c, ps in parts]
    return [(c, ps) for c, ps in parts if ps]


def write_toc(book: Path, docs: list[tuple[str, dict]]) -> list[str]:
    "Write `_toc.yml`: index.ipynb is the landing page, then the parts of `toc_order`; return the page order."
    rels = [rel for rel, _ in docs]
    if "index.ipynb" not in rels: raise DocsError("nbs/index.ipynb is missing: it is the landing page")
    parts = toc_order(rels)
    titles = dict(docs)
    def entry(rel):
        title = titles[rel].get("title") or Path(rel).stem
        num = re.match(r"(\d+[a-z]?)_", rel)        # top-level chapters only: solutions/NN_x keep their title
        return {"file": str(Path(rel).with_suffix("")), "title": f"{num.group(1)} {title}" if num else title}
    toc = {"format": "jb-book", "root": "index",
           "parts": [{"caption": c, "chapters": [entry(r) for r in ps]} for c, ps in parts]}
    (book / "_toc.yml").write_text("# Written by tools/build_docs.py\n" + yaml.safe_dump(toc, sort_keys=False, allow_unicode=True),
                                   encoding="utf-8")
    return ["index.ipynb", *(r for _, ps in parts for r in ps)]


# ---------------------------------------------------------------- 4. build
def jupyter_book(book: Path, out: Path) -> None:
    "Run `jupyter-book build -W --keep-going` on `book`; any warning is a failure."
    shutil.rmtree(out / "_build", ignore_errors=True)
    cmd = [sys.executable, "-c", "import sys; from jupyter_book.cli.main import main; sys.exit(main())",
           "build", str(book), "--path-output", str(out), "--all", "-W", "--keep-going", "-q"]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    noise = re.compile(r"^(Running Jupyter-Book|Source Folder|Config Path|Output Path|Running Sphinx v|=+$|$)")
    text = re.sub(r"\x1b\[[0-9;]*m", "", r.stdout + r.stderr)     # Sphinx colours its warnings
    report = "\n".join(l for l in text.splitlines() if not noise.match(l.strip()))
    if r.returncode != 0: raise DocsError(f"jupyter-book build failed (exit {r.returncode}):\n{report}")


def build(flags: tuple[str, ...] = (),  # `tst_flags` to run anyway, e.g. ("slow",)
          workers: int | None = None,  # parallel notebook processes (default: CPU count)
          site: Path = SITE  # where the finished site goes
         ) -> Path:
    "Execute, process, rewrite and build: the whole docs site, in `site`. Raise `DocsError` on any failure."
    from nbdev.config import get_config
    os.chdir(ROOT)
    # Every process of the build (notebook workers, proc_nbs workers, what notebooks start) imports this
    # repository's bpe_nb, even where another copy is installed.
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))   # and this process (proc_nbs's workers fork it)
    cfg = get_config()
    workers = workers or os.cpu_count() or 1
    skip = frozenset(cfg.get("tst_flags", "").split()) - set(flags)
    t0 = time.time()
    log(f"1/4 executing notebooks (skipping cells flagged {sorted(skip) or 'nothing'}) into {BUILD.relative_to(ROOT)}/exec")
    srcs = execute_all(cfg.nbs_path, BUILD / "exec", skip, workers)
    t1 = time.time(); log(f"    {t1 - t0:.1f} s")
    log("    checking outputs (no tracebacks, warnings, progress bars, machine paths) and import cells")
    check_clean(cfg.nbs_path, BUILD / "exec", srcs)
    log("2/4 nbdev.serve.proc_nbs")
    proc = process(BUILD / "exec", workers)
    t2 = time.time(); log(f"    {t2 - t1:.1f} s")
    log(f"3/4 rewriting {proc.relative_to(ROOT)}/ into {BUILD.relative_to(ROOT)}/book")
    book = BUILD / "book"
    docs = rewrite(proc, book, cfg.doc_host.rstrip("/") + "/" + cfg.doc_baseurl.strip("/"))
    for f in DOCS_CONFIG.iterdir():
        if f.name == "__pycache__": continue
        (shutil.copytree if f.is_dir() else shutil.copy2)(f, book / f.name)
    order = write_toc(book, docs)
    log(f"    pages: {', '.join(order)}")
    log("4/4 jupyter-book build")
    jupyter_book(book, BUILD)
    shutil.rmtree(site, ignore_errors=True)
    shutil.copytree(BUILD / "_build" / "html", site)
    log(f"    {time.time() - t2:.1f} s; total {time.time() - t0:.1f} s")
    log(f"site: {site / 'index.html'}")
    return site


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--flags", nargs="*", default=[], help="tst_flags to execute anyway (e.g. --flags slow)")
    p.add_argument("--workers", type=int, default=None, help="notebooks executed in parallel (default: CPU count)")
    p.add_argument("--site", type=Path, default=SITE, help=f"output folder (default: {SITE.relative_to(ROOT)})")
    a = p.parse_args(argv)
    try: build(tuple(a.flags), a.workers, a.site.resolve())
    except DocsError as e:
        print(f"\nDOCS BUILD FAILED: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__": sys.exit(main())
