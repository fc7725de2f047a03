"The top-level API (`bpe_nb/__init__.py`, exported from nbs/index.ipynb): cheap to import, every name resolves."
import importlib, pydoc, subprocess, sys

import bpe_nb


def test_every_public_name_resolves_to_its_chapters_object():
    assert set(bpe_nb.__all__) == set(bpe_nb._LAZY)
    for name in bpe_nb.__all__:
        assert getattr(bpe_nb, name) is getattr(importlib.import_module(f"bpe_nb.{bpe_nb._LAZY[name]}"), name), name
    assert {"train_bpe", "train_from_iterator", "Tokenizer", "load", "save", "get_encoding"} <= set(bpe_nb.__all__)
    assert set(bpe_nb.__all__) <= set(dir(bpe_nb))


def test_unknown_names_are_attribute_errors():
    try: bpe_nb.no_such_name
    except AttributeError as e: assert "no_such_name" in str(e)
    else: raise AssertionError("no AttributeError")
    assert not hasattr(bpe_nb, "also_missing")


def test_import_is_cheap_and_help_names_the_chapters():
    code = "import sys, bpe_nb; print(sorted(m for m in ('numpy', 'regex', 'bpe_nb.encoder') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    text = pydoc.render_doc(bpe_nb, renderer=pydoc.plaintext)
    for needle in ("train_bpe", "03a training", "05a", "get_encoding", "Tokenizer", "bpe-nb train", "bpe_nb.fast_encoding"):
        assert needle in text, needle
    assert bpe_nb.__version__
