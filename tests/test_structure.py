"""The module graph follows the reading order (issue 25): no module imports a later chapter's module, no cycle,
no private name crosses modules, the learner's modules are plain Python, and users get the fast paths by default."""
import ast, re, subprocess, sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "bpe_nb"
# The reading order: the learner's path, then the production track (nbs/index.ipynb, the docs sidebar).
ORDER = ["pretokenize", "naive", "incremental", "encoder",                       # learner's path
         "array_pretokenize", "fast_merge", "chunking", "training", "fast_encoding", "decoding", "analysis", "continuation", "artifacts", "interop", "cli", "benchmark"]
LEARNER = ORDER[:4]


def imports_of(name: str) -> list[tuple[str, list[str]]]:
    "(module, names) of every `bpe_nb` import in module `name`, at any depth (lazy imports in functions too)."
    tree = ast.parse((PKG / f"{name}.py").read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level == 1: pass
            elif mod.startswith("bpe_nb."): mod = mod[len("bpe_nb."):]
            elif mod == "bpe_nb": mod = ""
            else: continue
            if mod == "" :   # `from . import x` / `from bpe_nb import x`: a submodule or a package-level name
                for a in node.names:
                    out.append((a.name if a.name in ORDER else "", [] if a.name in ORDER else [a.name]))
            else: out.append((mod, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("bpe_nb."): out.append((a.name[len("bpe_nb."):], []))
    return out


def test_every_module_is_in_the_reading_order():
    mods = {p.stem for p in PKG.glob("*.py")} - {"__init__", "_modidx"}
    assert mods == set(ORDER), f"modules not in the reading order: {mods ^ set(ORDER)}"


@pytest.mark.parametrize("name", ORDER)
def test_no_import_from_a_later_chapter(name):
    for mod, names in imports_of(name):
        if mod in ("", name): continue   # the package itself (`load_speedups`), or a worker function by its full name
        assert ORDER.index(mod) < ORDER.index(name), f"{name} imports {mod}, a later chapter"


def chapter_numbers() -> dict[str, str]:
    "module -> the number of the notebook that exports it (`03a` for nbs/03a_training.ipynb)."
    out = {}
    for nb in sorted((PKG.parent / "nbs").glob("[0-9]*.ipynb")):
        m = re.search(r"#\| default_exp (\w+)", nb.read_text(encoding="utf-8"))
        if m: out[m.group(1)] = nb.stem.split("_")[0]
    return out


@pytest.mark.parametrize("name", ORDER)
def test_no_import_from_a_later_chapter_number(name):
    "Modules follow chapters by number too: 03a may use 02a but not 04, even though 04 is read first."
    num = chapter_numbers()
    for mod, names in imports_of(name):
        if mod in ("", name): continue
        assert num[mod] < num[name], f"{name} (chapter {num[name]}) imports {mod} (chapter {num[mod]})"


@pytest.mark.parametrize("name", ORDER)
def test_no_private_name_crosses_modules(name):
    for mod, names in imports_of(name):
        if mod == name: continue
        private = [n for n in names if n.startswith("_") and not n.startswith("__")]
        assert not private, f"{name} imports private names {private} from {mod or 'bpe_nb'}"


@pytest.mark.parametrize("name", LEARNER)
def test_the_learners_modules_are_plain_python(name):
    tree = ast.parse((PKG / f"{name}.py").read_text())
    mods = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} | \
           {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0}
    assert "numpy" not in mods, f"{name} imports numpy"


FRESH = """
import sys
{imp}
assert 'bpe_nb.fast_merge' not in sys.modules and 'bpe_nb.fast_encoding' not in sys.modules  # nothing loaded yet
{use}
"""

def _fresh(imp: str, use: str) -> str:
    r = subprocess.run([sys.executable, "-c", FRESH.format(imp=imp, use=use)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_a_tokenizer_from_the_encoder_module_is_fast_without_another_import():
    out = _fresh("from bpe_nb.encoder import Tokenizer",
                 "t = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b'ab'}, [(b'a', b'b')])\n"
                 "assert Tokenizer._encode_piece.__module__ == 'bpe_nb.fast_encoding'\n"
                 "assert hasattr(t, 'encode_file') and hasattr(t, 'encode_batch') and hasattr(t, 'encode_iterable')\n"
                 "print(t.encode('abab'))")
    assert out.strip() == "[256, 256]"


def test_train_incremental_runs_the_fast_loop_without_another_import():
    out = _fresh("from bpe_nb.incremental import train_incremental, FAST_LOOPS",
                 "m = train_incremental({b'abab': 3}, 258, progress=False)\n"
                 "print([f.__module__ for f in FAST_LOOPS], m.merges)")
    assert out.strip() == "['bpe_nb.fast_merge'] [(b'a', b'b'), (b'ab', b'ab')]"


def test_the_top_level_tokenizer_is_fast():
    out = _fresh("import bpe_nb", "t = bpe_nb.Tokenizer({i: bytes([i]) for i in range(256)}, [])\n"
                                  "print(sys.modules.get('bpe_nb.fast_encoding') is not None, hasattr(t, 'encode_file'))")
    assert out.strip() == "True True"
