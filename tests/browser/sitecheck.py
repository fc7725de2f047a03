"""Check the built docs site in headless Chromium: what a reader would see, from `file://`, offline.

Used by `test_site.py`; also runnable on its own (`python tests/browser/sitecheck.py [_docs]`), which
prints every problem and saves screenshots of the landing page and the first chapter.

`inspect_site` opens every page once and records what the browser saw; `find_problems` turns that
record into a list of problems per check, so that a deliberately broken copy of the site can show
each check failing. Chromium and its driver are Debian's (`/usr/bin/chromium`,
`/usr/bin/chromedriver`); Selenium is given both paths so Selenium Manager never downloads anything.
"""
from __future__ import annotations

import configparser, os, re, sys, tempfile, time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path(os.environ.get("BPE_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("BPE_CHROMEDRIVER", "/usr/bin/chromedriver"))
CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1400,1000"]
WIDTH = 1400                      # the window: ~100-character code lines must fit without scrolling sideways
CHECKS = ("console", "sidebar", "images", "links", "math", "code", "structure", "offline", "search",
          "tables", "xrefs", "layout", "groups", "alt", "rawlinks", "wrapping", "widetables", "ids")
# Issue 25: the sidebar's three parts, in reading order (a page whose notebook does not exist is left out).
LEARNER = ["why.html", "00_pretokenize.html", "01_naive_trainer.html", "02_incremental_trainer.html", "04_encoder.html"]
PRODUCTION = ["00a_array_pretokenize.html", "02a_fast_merge.html", "03_parallel_chunking.html", "03a_training.html", "04a_fast_encoding.html",
              "04b_offsets_and_streams.html", "04c_vocabulary_analysis.html", "04d_continued_training.html",
              "05_artifacts.html", "05a_interop.html", "06_cli.html", "07_benchmark.html"]
APPENDIX = ["cli_reference.html", "solutions/*", "references.html", "developing.html"]
PARTS = (("Learner's path", LEARNER), ("Production track", PRODUCTION), ("Appendix", APPENDIX))
LEARNER_WORDS_MAX = 15_000        # the learner's path: about an hour of prose
RESULTS_MIN = 0.25                # share of a learner page's code cells that show an output
TOKEN_PAGES = ["why.html", "00_pretokenize.html", "01_naive_trainer.html", "04_encoder.html"]
COVERAGE_MIN = 0.80               # share of a module's non-comment source lines shown on its chapter page
FIT_CHARS = 100
ENDINGS = ("Exercises", "Engineering notes", "Details")   # the sections a chapter may end with, in order


def chrome(user_data_dir: str | None = None):
    "A headless Chromium driven by Debian's chromedriver, with the browser console log enabled."
    os.environ.setdefault("SE_OFFLINE", "true")          # belt and braces: Selenium Manager stays offline
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for f in CHROME_FLAGS: opts.add_argument(f)
    opts.add_argument(f"--user-data-dir={user_data_dir or tempfile.mkdtemp(prefix='bpe-chromium-')}")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=opts)


@dataclass
class Page:
    "What the browser saw on one page."
    name: str
    console: list[str] = field(default_factory=list)      # SEVERE console messages
    sidebar: list[tuple[str, str]] = field(default_factory=list)   # (text, href) of the left navigation
    images: list[tuple[str, int]] = field(default_factory=list)    # (src, naturalWidth)
    links: list[str] = field(default_factory=list)         # every <a href>, resolved
    math: tuple[int, int] = (0, 0)                         # (math elements, rendered by MathJax)
    code: list[str] = field(default_factory=list)          # the text of every input code cell
    resources: list[str] = field(default_factory=list)     # every URL the page loaded
    intro: str = ""                                        # the start of the article's text
    h2: list[str] = field(default_factory=list)            # the article's section titles
    pipes: list[str] = field(default_factory=list)         # paragraphs or printed outputs that are markdown tables as text
    hash_links: list[str] = field(default_factory=list)    # article links whose href is just "#"
    overflow: list[tuple[int, str]] = field(default_factory=list)  # (longest line, first line) of code that scrolls sideways
    groups: list[tuple[str, list[str]]] = field(default_factory=list)  # (caption, hrefs) of the sidebar's parts
    words: int = 0                                          # words of the article's prose (no code, no outputs)
    cells: list[tuple[str, bool]] = field(default_factory=list)   # (code, has a visible output) of every input cell, in order
    tokens: int = 0                                         # `.bpe-tokens span[title]` token views' tokens
    alts: list[tuple[str, str]] = field(default_factory=list)     # (src, alt) of every image in the article
    rawlinks: list[str] = field(default_factory=list)       # `](` in rendered text outside code
    pre_styles: list[tuple[str, str, str, str, bool, str]] = field(default_factory=list)  # white-space, overflow-wrap, word-break, overflow-x, wide, first line
    tables: list[tuple[float, float, float, float, str]] = field(default_factory=list)  # (table width, article width, scrollWidth, clientWidth, overflow-x)


@dataclass
class SiteReport:
    site: Path
    pages: dict[str, Page]
    search_hits: list[str]
    search_console: list[str]


JS_PAGE = r"""
const abs = a => a.href;
return {
  sidebar: Array.from(document.querySelectorAll('nav.bd-docs-nav a.reference')).map(a => [a.textContent.trim(), a.href]),
  images: Array.from(document.images).map(i => [i.currentSrc || i.src, i.naturalWidth]),
  links: Array.from(document.querySelectorAll('a[href]')).map(abs),
  math: [document.querySelectorAll('.math').length, document.querySelectorAll('.math mjx-container').length],
  code: Array.from(document.querySelectorAll('.cell_input pre, div.highlight-ipython3 pre')).map(p => p.textContent),
  resources: performance.getEntriesByType('resource').map(e => e.name),
  intro: (document.querySelector('article.bd-article') || document.body).innerText.slice(0, 2000),
  h2: Array.from(document.querySelectorAll('article.bd-article h2')).map(h => h.textContent.replace(/#$/, '').trim()),
  pipes: Array.from(document.querySelectorAll('article.bd-article p, article.bd-article .cell_output pre')).map(p => p.textContent)
         .filter(t => /^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)+\|?\s*$/m.test(t)).map(t => t.slice(0, 120)),
  hash_links: Array.from(document.querySelectorAll('article.bd-article a[href]'))
              .filter(a => a.getAttribute('href') === '#').map(a => a.textContent.trim()),
  overflow: Array.from(document.querySelectorAll('article.bd-article pre')).filter(p => p.scrollWidth > p.clientWidth + 1)
            .map(p => [Math.max(...p.textContent.split('\n').map(l => l.length)), p.textContent.split('\n')[0].slice(0, 80)]),
  groups: Array.from(document.querySelectorAll('nav.bd-docs-nav p.caption')).map(c => {
            let ul = c.nextElementSibling; while (ul && ul.tagName !== 'UL') ul = ul.nextElementSibling;
            return [c.textContent.trim(), ul ? Array.from(ul.querySelectorAll(':scope > li > a.reference')).map(a => a.href) : []]; }),
  words: (() => { const a = document.querySelector('article.bd-article'); if (!a) return 0;
            const c = a.cloneNode(true);
            c.querySelectorAll('.cell_input, .cell_output, div.highlight, pre, .headerlink, script, style, mjx-container, .math').forEach(e => e.remove());
            return (c.textContent.match(/\S+/g) || []).length; })(),
  cells: Array.from(document.querySelectorAll('article.bd-article div.cell')).filter(c => c.querySelector('.cell_input pre'))
           .map(c => [c.querySelector('.cell_input pre').textContent,
                      !!c.querySelector('.cell_output') && c.querySelector('.cell_output').textContent.trim().length + c.querySelectorAll('.cell_output img').length > 0]),
  tokens: document.querySelectorAll('article.bd-article .bpe-tokens span[title]').length,
  alts: Array.from(document.querySelectorAll('article.bd-article img')).map(i => [i.getAttribute('src') || '', i.getAttribute('alt') || '']),
  rawlinks: (() => { const a = document.querySelector('article.bd-article'); if (!a) return [];
            const c = a.cloneNode(true); c.querySelectorAll('pre, code, .cell_input, script, style').forEach(e => e.remove());
            return (c.textContent.match(/.{0,40}\]\(.{0,40}/g) || []); })(),
  pre_styles: Array.from(document.querySelectorAll('article.bd-article pre')).map(p => { const s = getComputedStyle(p);
            return [s.whiteSpace, s.overflowWrap, s.wordBreak, s.overflowX, p.scrollWidth > p.clientWidth + 1, p.textContent.split('\n')[0].slice(0, 80)]; }),
  tables: (() => { const a = document.querySelector('article.bd-article'); if (!a) return [];
            const aw = a.getBoundingClientRect().width;
            return Array.from(a.querySelectorAll('table')).map(t => [t.getBoundingClientRect().width, aw, t.scrollWidth, t.clientWidth,
                   getComputedStyle(t).overflowX, (t.textContent || '').trim().slice(0, 60)]); })(),
};
"""


def _severe(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def _settle(driver, timeout: float = 10) -> None:
    "Wait until images are loaded and MathJax (if the page uses it) has typeset."
    t = time.time()
    while time.time() - t < timeout:
        if driver.execute_script(
            "return Array.from(document.images).every(i => i.complete) && "
            "(!document.querySelector('.math') || !document.querySelector('script[src*=mathjax]') || "
            " document.querySelectorAll('.math').length === document.querySelectorAll('.math mjx-container').length)"):
            return
        time.sleep(0.1)


def inspect_page(driver, url: str, name: str) -> Page:
    _severe(driver)                                      # drop what the previous page logged
    driver.get(url)
    _settle(driver)
    d = driver.execute_script(JS_PAGE)
    return Page(name, _severe(driver), [tuple(x) for x in d["sidebar"]], [tuple(x) for x in d["images"]],
                d["links"], tuple(d["math"]), d["code"], d["resources"], d["intro"], d["h2"],
                d["pipes"], d["hash_links"], [tuple(x) for x in d["overflow"]],
                [(c, list(h)) for c, h in d["groups"]], d["words"], [tuple(x) for x in d["cells"]], d["tokens"],
                [tuple(x) for x in d["alts"]], d["rawlinks"], [tuple(x) for x in d["pre_styles"]], [tuple(x) for x in d["tables"]])


def search(driver, site: Path, query: str, timeout: float = 10) -> tuple[list[str], list[str]]:
    "Run Sphinx's search page from `file://` for `query`; return (result titles, console errors)."
    _severe(driver)
    driver.get(f"{(site / 'search.html').as_uri()}?q={query}")
    t = time.time()
    while time.time() - t < timeout:
        done = driver.execute_script("const s = document.querySelector('#search-results .search-summary');"
                                     "return s && /found|did not match/i.test(s.textContent);")
        if done: break
        time.sleep(0.2)
    hits = driver.execute_script("return Array.from(document.querySelectorAll('#search-results ul.search li a'))"
                                 ".map(a => a.textContent.trim());")
    return hits, _severe(driver)


def inspect_site(driver, site: Path) -> SiteReport:
    "Open every HTML page of `site` once, then search it for 'merge'."
    pages = {}
    for f in site_pages(site):
        name = f.relative_to(site).as_posix()
        pages[name] = inspect_page(driver, f.as_uri(), name)
    hits, console = search(driver, site, "merge")
    return SiteReport(site, pages, hits, console)


def site_pages(site: Path) -> list[Path]:
    "Every HTML page of the site: top level and sub-folders such as solutions/, not the theme's files."
    return sorted(f for f in site.rglob("*.html") if not any(p.startswith("_") for p in f.relative_to(site).parts))


def expected_chapters(nbs: Path = ROOT / "nbs") -> list[str]:
    "The chapter pages the sidebar must list, in reading order: one per `NN_name.ipynb` / `NNa_name.ipynb` of nbs/."
    have = {p.with_suffix(".html").name for p in nbs.glob("[0-9][0-9]*_*.ipynb")}
    known = [p for p in LEARNER + PRODUCTION if p in have]
    return known + sorted(have - set(known))         # a chapter of no part: at the end of the production track


def expected_groups(nbs: Path = ROOT / "nbs") -> list[tuple[str, list[str]]]:
    "The sidebar's parts, (caption, pages relative to the site), with the pages whose notebook exists, in order."
    out = []
    for caption, pages in PARTS:
        got = []
        for p in pages:
            if p == "solutions/*": got += [f"solutions/{q.with_suffix('.html').name}" for q in sorted((nbs / "solutions").glob("*.ipynb"))]
            elif (nbs / p).with_suffix(".ipynb").exists(): got.append(p)
        if caption == "Production track": got += [c for c in expected_chapters(nbs) if c not in LEARNER + PRODUCTION]
        if got: out.append((caption, got))
    return out


CHAPTER_NUM = re.compile(r"(\d\d[a-z]?)_")


def hidden_code(nbs: Path = ROOT / "nbs") -> dict[str, list[str]]:
    "Per page, the code of cells nbdev must not show (`#| hide`, `#| export`, `#| exporti`, `#| default_exp`)."
    import json
    out = {}
    for p in sorted(nbs.rglob("*.ipynb")):
        if any(part.startswith((".", "_")) for part in p.relative_to(nbs).parts): continue
        cells = json.loads(p.read_text(encoding="utf-8"))["cells"]
        srcs = []
        for c in cells:
            src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            lines = src.split("\n")
            heads = [l for l in lines if l.startswith("#|")]
            if c["cell_type"] == "code" and any(re.match(r"#\|\s*(hide|export|exporti|default_exp)\b", l) for l in heads):
                code = "\n".join(l for l in lines if not l.startswith("#|")).strip()
                if code and ("\n" in code or len(code) > 30): srcs.append(code)
        out[p.relative_to(nbs).with_suffix(".html").as_posix()] = srcs
    return out


# ---------------------------------------------------------------- issue 13.1: the code is on the page
def module_of(nb: Path) -> Path | None:
    "The module a notebook exports to (its `#| default_exp`), or None."
    import json
    for c in json.loads(nb.read_text(encoding="utf-8"))["cells"]:
        m = re.search(r"#\|\s*default_exp\s+(\S+)", "".join(c["source"]))
        if m: return ROOT / "bpe_nb" / (m.group(1).replace(".", "/") + ".py")
    return None


def module_lines(mod: Path) -> list[str]:
    "A module's non-comment source lines, stripped (no blanks, no comments, no `__all__` statement)."
    import ast
    text = mod.read_text(encoding="utf-8")
    skip = set()                                 # every line of the `__all__ = [...]` statement nbdev writes
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            skip |= set(range(node.lineno, node.end_lineno + 1))
    out = []
    for i, l in enumerate(text.splitlines(), 1):
        t = l.strip()
        if i in skip: continue
        if not t or t.startswith("#") or t.startswith("__all__") or (t.startswith("'") and t.endswith("',")): continue
        out.append(t)
    return out


def code_coverage(rep: SiteReport, nbs: Path = ROOT / "nbs") -> dict[str, tuple[str, float, list[str]]]:
    "Per chapter page: (module, share of its source lines found verbatim in the page's code blocks, the missing lines)."
    out = {}
    for page in expected_chapters(nbs):
        mod = module_of(nbs / page.replace(".html", ".ipynb"))
        if mod is None or not mod.exists(): continue
        lines = module_lines(mod)
        pg = rep.pages.get(page)
        shown = {l.strip() for code in (pg.code if pg else []) for l in code.split("\n")}
        missing = [l for l in lines if l not in shown]
        out[page] = (mod.relative_to(ROOT).as_posix(), 1 - len(missing) / max(1, len(lines)), missing)
    return out


MERGE_LOOP = {"02_incremental_trainer.html": ["def apply_merge(", "def update_counts(", "def train_incremental("]}


def missing_code(rep: SiteReport, wanted: dict[str, list[str]] = MERGE_LOOP) -> list[str]:
    "The snippets of `wanted` (page -> code that must be shown) that no code block of their page contains."
    out = []
    for page, needles in wanted.items():
        shown = "\n".join(rep.pages[page].code) if page in rep.pages else ""
        out += [f"{page}: no code block shows {n!r}" for n in needles if n not in shown]
    return out


def _doc_url() -> str:
    "nbdev's absolute docs URL (settings.ini doc_host + doc_baseurl): links to it were not rewritten."
    cp = configparser.ConfigParser()
    cp.read(ROOT / "settings.ini")
    d = cp["DEFAULT"]
    host = d.get("doc_host", "").replace("%(user)s", d.get("user", ""))
    return host.rstrip("/") + "/" + d.get("doc_baseurl", "").replace("%(repo)s", d.get("repo", "")).strip("/")


_ids_cache: dict[Path, set[str]] = {}


def _ids(path: Path) -> set[str]:
    if path not in _ids_cache:
        _ids_cache[path] = set(re.findall(r'\bid="([^"]+)"', path.read_text(encoding="utf-8", errors="replace")))
    return _ids_cache[path]


def find_problems(rep: SiteReport,
                  chapters: list[str] | None = None,  # expected sidebar order (default: from nbs/)
                  hidden: dict[str, list[str]] | None = None  # code that must not be shown, per page
                 ) -> dict[str, list[str]]:
    "Every problem the report shows, by check (an empty list means the check passed)."
    chapters = expected_chapters() if chapters is None else chapters
    hidden = hidden_code() if hidden is None else hidden
    site, doc_url = rep.site.resolve(), _doc_url()
    probs = {k: [] for k in CHECKS}
    content = [n for n in rep.pages if n not in ("genindex.html", "search.html")]
    groups = expected_groups()
    for missing in sorted(set(["index.html", *chapters]) - set(rep.pages)):
        probs["links"].append(f"page {missing} was not built")
    for name, pg in rep.pages.items():
        probs["console"] += [f"{name}: {m}" for m in pg.console]
        # sidebar: landing page first, then every chapter in numbered order, nothing missing
        paths = [Path(unquote(urlparse(h).path)) for _, h in pg.sidebar]
        pages = [p.name for p in paths]
        got = [p.name for p in paths if CHAPTER_NUM.match(p.name) and p.parent.name != "solutions"]
        if not pages or pages[0] != "index.html":
            probs["sidebar"].append(f"{name}: the sidebar does not start with the landing page: {pages}")
        if got != chapters:
            probs["sidebar"].append(f"{name}: the sidebar lists {got}, expected {chapters}")
        for text, href in pg.sidebar:
            pp = Path(unquote(urlparse(href).path))
            p = pp.name
            if (m := CHAPTER_NUM.match(p)) and pp.parent.name != "solutions" and not text.startswith(m.group(1) + " "):
                probs["sidebar"].append(f"{name}: sidebar entry {text!r} for {p} is not numbered {m.group(1)}")
        probs["images"] += [f"{name}: image {src} did not load (naturalWidth 0)" for src, w in pg.images if not w]
        if (html := rep.site / name).is_file():  # an id twice: a link to it lands on the first, and the page is not valid HTML
            seen = Counter(re.findall(r'\bid="([^"]+)"', html.read_text(encoding="utf-8", errors="replace")))
            probs["ids"] += [f"{name}: id {i!r} is on the page {n} times" for i, n in seen.items() if n > 1]
        for url in pg.links:
            u = urlparse(url)
            if doc_url and url.startswith(doc_url):
                probs["links"].append(f"{name}: link to the (unpublished) nbdev site: {url}"); continue
            if u.scheme != "file": continue                       # external: not followed offline
            target = Path(unquote(u.path))
            if target.is_dir(): target = target / "index.html"
            if not target.exists():
                probs["links"].append(f"{name}: broken link {url}"); continue
            if site not in target.resolve().parents:
                probs["links"].append(f"{name}: link leaves the site: {url}"); continue
            if u.fragment and target.suffix == ".html" and unquote(u.fragment) not in _ids(target):
                probs["links"].append(f"{name}: link to a missing anchor {url}")
        n, ok = pg.math
        if ok < n: probs["math"].append(f"{name}: {n - ok} of {n} math elements were not rendered by MathJax")
        for code in pg.code:
            probs["code"] += [f"{name}: a directive is visible: {l.strip()!r}" for l in code.split("\n") if l.lstrip().startswith("#|")]
            if "show_doc(" in code: probs["code"].append(f"{name}: a show_doc call is visible")
        shown = "\n".join(pg.code)
        for src in hidden.get(name, []) if name in content else []:
            if src in shown: probs["code"].append(f"{name}: hidden/exported code is visible: {src.splitlines()[0]!r}")
        if re.match(r"\d\d_", name):      # a chapter opens with what you will learn, ends with what comes next
            if "What you will learn" not in pg.intro:
                probs["structure"].append(f"{name}: does not open with 'What you will learn'")
            if "What comes next" not in pg.h2:
                probs["structure"].append(f"{name}: has no section 'What comes next' (sections: {pg.h2})")
            else:                          # after it, only the chapter endings, in this order (CONVENTIONS.md)
                tail = pg.h2[len(pg.h2) - pg.h2[::-1].index("What comes next"):]
                if tail != [e for e in ENDINGS if e in tail]:
                    probs["structure"].append(f"{name}: after 'What comes next' come {tail}; only {list(ENDINGS)}, in this order")
        probs["offline"] += [f"{name}: loaded {r}" for r in pg.resources if not r.startswith(("file:", "data:", "blob:"))]
        probs["tables"] += [f"{name}: a markdown table rendered as text: {t!r}" for t in pg.pipes]
        probs["xrefs"] += [f"{name}: a cross-reference resolves to href=\"#\": {t!r}" for t in pg.hash_links]
        probs["layout"] += [f"{name}: a code block with {n}-character lines scrolls sideways at {WIDTH} px: {first!r}"
                            for n, first in pg.overflow if n <= FIT_CHARS]
        # issue 25: the sidebar's three parts, learner's path first
        got_groups = [(c, [Path(unquote(urlparse(h).path)).relative_to(site).as_posix() for h in hs
                           if site in Path(unquote(urlparse(h).path)).parents]) for c, hs in pg.groups]
        if got_groups != groups:
            probs["groups"].append(f"{name}: the sidebar's parts are {got_groups}, expected {groups}")
        for src, alt in pg.alts:
            if not alt.strip() or FILE_LIKE.fullmatch(alt.strip()):
                probs["alt"].append(f"{name}: image {src.rsplit('/', 1)[-1]} has alt text {alt!r}, not what it shows")
        probs["rawlinks"] += [f"{name}: a raw markdown link in the text: {t!r}" for t in pg.rawlinks]
        for ws, ow, wb, ox, wide, first in pg.pre_styles:
            if ow == "anywhere" or wb in ("break-all", "break-word") or (ws.startswith("pre-wrap") and ow == "break-word"):
                probs["wrapping"].append(f"{name}: a code block may wrap inside a name (white-space {ws}, overflow-wrap {ow}, word-break {wb}): {first!r}")
            elif ws not in ("pre", "pre-wrap", "break-spaces"):
                probs["wrapping"].append(f"{name}: a code block does not keep its lines (white-space {ws}): {first!r}")
            if wide and ox not in ("auto", "scroll"):
                probs["wrapping"].append(f"{name}: a code block wider than the column is cut off (overflow-x {ox}): {first!r}")
        for w, aw, sw, cw, ox, text in pg.tables:
            if w > aw + 1:
                probs["widetables"].append(f"{name}: a table is {w:.0f} px wide in a {aw:.0f} px article: {text!r}")
            elif sw > cw + 1 and ox not in ("auto", "scroll"):
                probs["widetables"].append(f"{name}: a table's last columns are cut off (overflow-x {ox}): {text!r}")
    if not rep.search_hits: probs["search"].append("searching for 'merge' from file:// found nothing")
    probs["search"] += [f"search.html?q=merge: {m}" for m in rep.search_console]
    return probs


FILE_LIKE = re.compile(r"(?i)[0-9a-f]{16,}(\.\w+)?|[\w./-]+\.(png|jpe?g|svg|gif|webp)|image|figure|plot|png")


# ---------------------------------------------------------------- issue 25: the learner's path
def learner_pages(rep: SiteReport) -> list[str]:
    "The learner's path pages the site has."
    return [p for p in LEARNER if p in rep.pages]


def learner_words(rep: SiteReport) -> dict[str, int]:
    "Words of prose (article text without code cells, outputs and code blocks) per learner page."
    return {p: rep.pages[p].words for p in learner_pages(rep)}


def shown_code(pg: Page) -> str:
    "The code of every code cell of a page, folded ones included, in order, as one script (IPython `!`/`%` lines left out)."
    keep = lambda l: not l.lstrip().startswith(("!", "%"))
    return "\n\n".join("\n".join(l for l in code.split("\n") if keep(l)) for code, _ in pg.cells) + "\n"


RUNNER = """import codeop, json, sys, traceback
ns, compile_cell = {"__name__": "__main__"}, codeop.Compile()   # keeps `from __future__` flags for later cells, as Jupyter does
for i, src in enumerate(json.load(open(sys.argv[1], encoding="utf-8"))):
    try: exec(compile_cell(src, f"<cell {i}>", "exec"), ns)   # one cell at a time, as pasted into Python or Jupyter
    except BaseException:
        first = next((l for l in src.split("\\n") if l.strip()), "")
        print(f"code cell {i} of the page ({first[:80]!r}) failed:", file=sys.stderr)
        traceback.print_exc(); sys.exit(1)
"""


def run_as_shown(pg: Page, tmp: Path, timeout: float = 900) -> tuple[int, str]:
    "Run a page's code cells, copied in order, one after the other in a fresh Python from nbs/ (as a reader would); return (exit code, output tail)."
    import json, subprocess
    stem = pg.name.replace("/", "_").replace(".html", "")
    (tmp / f"{stem}_as_shown.py").write_text(shown_code(pg), encoding="utf-8")     # to read, or run by hand
    cells = tmp / f"{stem}_cells.json"
    keep = lambda l: not l.lstrip().startswith(("!", "%"))
    cells.write_text(json.dumps(["\n".join(l for l in code.split("\n") if keep(l)) for code, _ in pg.cells]), encoding="utf-8")
    script = tmp / "run_cells.py"
    script.write_text(RUNNER, encoding="utf-8")
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("IN_TEST", None)
    try: r = subprocess.run([sys.executable, str(script), str(cells)], cwd=ROOT / "nbs", env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired: return -1, f"timed out after {timeout:.0f} s"
    return r.returncode, (r.stdout[-1500:] + "\n" + r.stderr[-3000:]).strip()


def results_share(pg: Page) -> float:
    "The share of a page's code cells that show an output."
    return sum(out for _, out in pg.cells) / max(1, len(pg.cells))


def screenshots(driver, site: Path, out: Path, pages: list[str]) -> list[Path]:
    "Full-page PNG screenshots of `pages` of `site`, written to `out`."
    out.mkdir(parents=True, exist_ok=True)
    shots = []
    for name in pages:
        driver.set_window_size(WIDTH, 1000)
        driver.get((site / name).as_uri())
        _settle(driver)
        h = driver.execute_script("return Math.min(document.documentElement.scrollHeight, 12000)")
        driver.set_window_size(WIDTH, max(h, 800))
        time.sleep(0.3)
        p = out / name.replace(".html", ".png")
        driver.save_screenshot(str(p))
        shots.append(p)
    driver.set_window_size(WIDTH, 1000)
    return shots


def main(argv: list[str]) -> int:
    site = Path(argv[0] if argv else ROOT / "_docs").resolve()
    if not (site / "index.html").exists():
        print(f"no site at {site}: run `make docs` first", file=sys.stderr); return 2
    driver = chrome()
    try:
        t = time.time()
        rep = inspect_site(driver, site)
        probs = find_problems(rep)
        chapters = expected_chapters()
        shots = screenshots(driver, site, ROOT / "build" / "docs" / "screenshots", ["index.html", *chapters[:1]])
    finally: driver.quit()
    print(f"{len(rep.pages)} pages checked in {time.time() - t:.1f} s; search 'merge': {len(rep.search_hits)} results")
    for k, v in probs.items():
        print(f"{k:10} {'ok' if not v else f'{len(v)} problem(s)'}")
        for m in v: print(f"           - {m}")
    words = learner_words(rep)
    print(f"learner's path: {sum(words.values()):,} words of prose (at most {LEARNER_WORDS_MAX:,}): {words}")
    for p in learner_pages(rep):
        pg = rep.pages[p]
        print(f"  {p}: {sum(o for _, o in pg.cells)} of {len(pg.cells)} code cells show an output; {pg.tokens} token-view tokens")
    print("screenshots:", *[str(s) for s in shots])
    return 1 if any(probs.values()) else 0


if __name__ == "__main__": sys.exit(main(sys.argv[1:]))
