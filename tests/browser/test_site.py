"""The docs site in a real browser: every page of `make docs`'s output opened in headless Chromium.

The site is built by tools/build_docs.py unless `_docs/` is newer than every source it is made from
(`tools/check.sh` builds it just before; `BPE_DOCS_REBUILD=1` forces a build). The checks themselves
live in `sitecheck.py`; `test_checker_reports_a_broken_site` breaks a copy of the site in every way
the checks cover and asserts that each one reports it.

Without Chromium the module is skipped, except under CI=true, where it fails.
"""
import os, re, shutil, subprocess, sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import sitecheck as sc  # noqa: E402

ROOT = sc.ROOT
SITE = ROOT / "_docs"
SHOTS = ROOT / "build" / "docs" / "screenshots"
IN_CI = os.environ.get("CI", "").lower() == "true"
# BPE_DOCS_STRICT=0 (as in tools/build_docs.py): the checks that every chapter's code is on its page
# report "xfail" instead of failing, for a tree whose chapters are not all converted to `#| exports` yet.
STRICT = os.environ.get("BPE_DOCS_STRICT", "1").strip().lower() not in ("0", "false", "no", "off")

_missing = [str(p) for p in (sc.CHROMIUM, sc.CHROMEDRIVER) if not p.exists()]
try: import selenium  # noqa: F401
except ImportError: _missing.append("the selenium package")
if _missing:
    _msg = f"browser test needs {', '.join(_missing)} (apt-get install chromium chromium-driver; pip install selenium)"
    if IN_CI: pytest.fail(f"CI=true but {_msg}", pytrace=False)
    pytest.skip(_msg, allow_module_level=True)


def _sources():
    "Everything the site is made from."
    yield ROOT / "settings.ini"
    yield ROOT / "tools" / "build_docs.py"
    for d, pat in ((ROOT / "nbs", "*.ipynb"), (ROOT / "docs", "*"), (ROOT / "bpe_nb", "*.py")):
        yield from (p for p in d.rglob(pat) if p.is_file() and "_proc" not in p.parts)


@pytest.fixture(scope="session")
def site() -> Path:
    "The built site: reused when newer than all its sources, else built now."
    index = SITE / "index.html"
    newest = max(p.stat().st_mtime for p in _sources())
    if os.environ.get("BPE_DOCS_REBUILD") or not index.exists() or index.stat().st_mtime < newest:
        r = subprocess.run([sys.executable, str(ROOT / "tools" / "build_docs.py")], cwd=ROOT, capture_output=True, text=True)
        assert r.returncode == 0, f"docs build failed:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    return SITE


@pytest.fixture(scope="session")
def driver(tmp_path_factory):
    d = sc.chrome(str(tmp_path_factory.mktemp("chromium-profile")))
    yield d
    d.quit()


@pytest.fixture(scope="session")
def report(site, driver) -> sc.SiteReport: return sc.inspect_site(driver, site)


@pytest.fixture(scope="session")
def problems(report) -> dict: return sc.find_problems(report)


def test_every_chapter_is_a_page(report):
    chapters = sc.expected_chapters()
    assert chapters, "no NN_name.ipynb chapter in nbs/"
    assert {"index.html", "search.html", *chapters} <= set(report.pages)


def test_pages_load_without_console_errors(problems): assert problems["console"] == []
def test_sidebar_lists_every_chapter_in_order(problems): assert problems["sidebar"] == []
def test_every_image_loads(problems): assert problems["images"] == []
def test_internal_links_resolve(problems): assert problems["links"] == []
def test_math_renders_offline(problems): assert problems["math"] == []
def test_no_directive_or_hidden_code_visible(problems): assert problems["code"] == []
def test_chapters_open_with_what_you_learn_and_end_with_what_comes_next(problems): assert problems["structure"] == []
def test_nothing_loaded_from_the_network(problems): assert problems["offline"] == []


def test_no_markdown_table_left_as_text(problems): assert problems["tables"] == []
def test_no_cross_reference_resolves_to_hash(problems): assert problems["xrefs"] == []
def test_code_of_100_characters_fits_at_1400_px(problems): assert problems["layout"] == []


def _strict(ok: bool, msg: str):
    if not ok and not STRICT: pytest.xfail(f"BPE_DOCS_STRICT=0: {msg}")
    assert ok, msg


def test_chapter_02_shows_the_merge_loop(report):
    missing = sc.missing_code(report)
    _strict(not missing, "\n".join(missing))


@pytest.mark.parametrize("chapter", sc.expected_chapters())
def test_code_on_the_page(report, chapter):
    "Issue 13.1: at least 80% of the chapter's module's non-comment source lines appear verbatim in its code blocks."
    cov = sc.code_coverage(report)
    if chapter not in cov: pytest.skip(f"{chapter} exports no module")
    mod, share, missing = cov[chapter]
    _strict(share >= sc.COVERAGE_MIN, f"{chapter} shows {share:.0%} of {mod} (needs {sc.COVERAGE_MIN:.0%}); "
            f"{len(missing)} lines missing, e.g.:\n  " + "\n  ".join(missing[:10]))


@pytest.mark.parametrize("chapter", [c for c in sc.expected_chapters() if c[:2] < "07"])
def test_chapter_has_exercises_linked_to_solutions(report, chapter):
    "Issue 13.8: chapters 00-06 end with an Exercises section that links to their solutions page."
    pg = report.pages[chapter]
    sols = [u for u in pg.links if "/solutions/" in u]
    _strict("Exercises" in pg.h2 and bool(sols), f"{chapter}: sections {pg.h2}; links to solutions/: {sols}")


def test_search_for_merge_returns_results(report, problems):
    assert problems["search"] == []
    assert len(report.search_hits) >= 2, report.search_hits


def test_api_docs_show_signatures_with_parameter_docs(site):
    "show_doc output made it: a signature with its docments comment, e.g. pretokenize's `text` parameter."
    html = (site / "00_pretokenize.html").read_text(encoding="utf-8")
    text = re.sub(r"<[^>]+>", "", html)
    assert "def pretokenize(" in text and "# the text to cut" in text


def test_screenshots(site, driver):
    "Full-page screenshots of the landing page and the first chapter, for review, in build/docs/screenshots/."
    shots = sc.screenshots(driver, site, SHOTS, ["index.html", sc.expected_chapters()[0]])
    for p in shots: assert p.stat().st_size > 20_000, f"{p} looks blank"


# ---------------------------------------------------------------- the checks can fail
def _break(site: Path, tmp: Path) -> tuple[Path, str]:
    "A copy of `site` with one chapter page broken in every way the checks look for."
    bad = tmp / "site"
    shutil.copytree(site, bad)
    chapters = sc.expected_chapters()
    page = chapters[0]
    html = (bad / page).read_text(encoding="utf-8")
    # drop the last chapter from this page's sidebar
    last = re.escape(chapters[-1])
    html, n = re.subn(rf'<li class="toctree-l1[^"]*"><a class="reference internal" href="{last}">.*?</a></li>', "", html, flags=re.S)
    assert n == 1, "could not find the sidebar entry to remove"
    junk = """
<img src="_images/no-such-plot.png" alt="missing plot">
<a href="no_such_chapter.html">a chapter that is not there</a>
<a href="index.html#no-such-anchor">an anchor that is not there</a>
<span class="math notranslate nohighlight">\\(x^2\\)</span>
<div class="cell_input"><pre>#| hide
show_doc(pretokenize)</pre></div>
<script>console.error("deliberate console error")</script>
<img src="https://cdn.bpe-nb.invalid/logo.png" alt="from a CDN">
<p>| a | b |
| --- | --- |
| 1 | 2 |</p>
<a class="reference internal" href="#">count_pairs</a>
<div class="cell_output"><pre>| printed | table |
|---|---|</pre></div>
<pre style="width: 200px">x = "a code line of ninety characters, which must fit in the column at 1400 px width" + "!"</pre>
"""
    html = html.replace('<article class="bd-article">', '<article class="bd-article">' + junk, 1)
    html = html.replace("What you will learn", "What you may learn")
    html = html.replace('<h2>What comes next', '<h2>What came before', 1)
    (bad / page).write_text(html, encoding="utf-8")
    (bad / "searchindex.js").unlink()              # search has no index any more
    two = bad / "02_incremental_trainer.html"      # chapter 02 shows none of its code
    if two.exists():
        gone = two.read_text(encoding="utf-8").replace("cell_input", "cell_gone").replace("highlight-ipython3", "highlight-gone")
        two.write_text(gone, encoding="utf-8")
    for p in (bad / "_images").glob("*"): p.unlink()  # every real plot is gone
    return bad, page


def test_checker_reports_a_broken_site(site, driver, tmp_path):
    bad, page = _break(site, tmp_path)
    rep = sc.inspect_site(driver, bad)
    probs = sc.find_problems(rep)
    said = {k: "\n".join(v) for k, v in probs.items()}
    assert "deliberate console error" in said["console"]
    assert f"{page}: the sidebar lists" in said["sidebar"]
    assert "no-such-plot.png" in said["images"]
    assert "no_such_chapter.html" in said["links"] and "no-such-anchor" in said["links"]
    assert f"{page}:" in said["math"]
    assert "'#| hide'" in said["code"] and "show_doc call" in said["code"]
    assert "What you will learn" in said["structure"] and f"{page}: has no section 'What comes next'" in said["structure"]
    assert "cdn.bpe-nb.invalid" in said["offline"]
    assert "found nothing" in said["search"]
    assert f"{page}: a markdown table rendered as text" in said["tables"] and "printed | table" in said["tables"]
    assert f"{page}: a cross-reference resolves to href" in said["xrefs"] and "count_pairs" in said["xrefs"]
    assert f"{page}: a code block with 91-character lines scrolls sideways" in said["layout"]
    if "02_incremental_trainer.html" in rep.pages:
        assert "def apply_merge(" in "\n".join(sc.missing_code(rep))
        mod, share, missing = sc.code_coverage(rep)["02_incremental_trainer.html"]
        assert share < sc.COVERAGE_MIN and mod == "bpe_nb/incremental.py"
    if any((site / "_images").glob("*")):         # a real plot removed is reported on its own page
        assert said["images"].count("did not load") > 1
