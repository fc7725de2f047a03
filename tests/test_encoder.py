"The encoder: exact against tiktoken's GPT-2, priority replay, both merge paths, streaming, files, errors."
import json
import pickle
import random
import re
import tracemalloc
from itertools import islice
from pathlib import Path

import numpy as np
import pytest
import tiktoken
from hypothesis import given, settings, strategies as st

import bpe_nb.encoder as encoder
import bpe_nb.fast_encoding as fast  # chapter 04a: the fast paths (load_speedups imports it for users)
from bpe_nb.chunking import file_ranges, read_blocks
from bpe_nb.encoder import (MergeStep, PieceExplanation, Tokenizer, UnknownTokenError, format_explanation,
                            read_gpt2_files, read_gpt2_merges)
from bpe_nb.fast_encoding import merge_heap as _merge_heap, merge_scan as _merge_scan
from bpe_nb.naive import merge_pair
from bpe_nb.pretokenize import (CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN, R50K_PATTERN, PROVEN_PATTERNS,
                                count_pretokens, pretokenize, printable_to_bytes, split_special)

EOT = "<|endoftext|>"
from conftest import TEST_DATA as SHARED, tiktoken_gpt2
CS336 = SHARED / "cs336"
BUNDLED = Path(encoder.__file__).parent / "data" / "tinystories_sample_1M.txt"


# ---------------------------------------------------------------- fixtures (built once per module)
@pytest.fixture(scope="module")
def gpt2_files():
    vocab, merges = read_gpt2_files(CS336 / "gpt2_vocab.json", CS336 / "gpt2_merges.txt")
    return vocab, merges


@pytest.fixture(scope="module")
def gpt2(gpt2_files):
    return Tokenizer(*gpt2_files, special_tokens=[EOT])


@pytest.fixture(scope="module")
def gpt2_two(gpt2_files):
    "GPT-2 with a second special token that starts with the first (longest-first matching)."
    return Tokenizer(*gpt2_files, special_tokens=[EOT, EOT * 2])


@pytest.fixture(scope="module")
def reference():
    "tiktoken's GPT-2 encoding, built offline from the same vocab file (the rank of a token is its id)."
    return tiktoken_gpt2({EOT: 50256})


# ---------------------------------------------------------------- reading GPT-2 files
def test_read_gpt2_files_matches_a_plain_reading(gpt2_files):
    vocab, merges = gpt2_files
    raw = json.loads((CS336 / "gpt2_vocab.json").read_text(encoding="utf-8"))
    assert vocab == {i: printable_to_bytes(t) for t, i in raw.items()}
    lines = (CS336 / "gpt2_merges.txt").read_text(encoding="utf-8").splitlines()
    assert merges == [tuple(printable_to_bytes(x) for x in line.split(" ")) for line in lines]
    assert len(vocab) == 50257 and len(merges) == 50000


def test_read_gpt2_files_skips_a_version_header(tmp_path):
    (tmp_path / "v.json").write_text(json.dumps({"a": 0, "b": 1, "ab": 2, "Ġ": 3}), encoding="utf-8")
    (tmp_path / "m.txt").write_text("#version: 0.2\na b\n", encoding="utf-8")
    (tmp_path / "m2.txt").write_text("a b\r\n\n", encoding="utf-8")
    v, m = read_gpt2_files(tmp_path / "v.json", tmp_path / "m.txt")
    assert v == {0: b"a", 1: b"b", 2: b"ab", 3: b" "} and m == [(b"a", b"b")]
    assert read_gpt2_files(tmp_path / "v.json", tmp_path / "m2.txt")[1] == [(b"a", b"b")]


@pytest.mark.parametrize("vocab, merges, message", [
    ({"a": 0}, "a b c\n", "m.txt:1: expected two tokens"),
    ({"a": 0}, "a  b\n", "m.txt:1: expected two tokens"),
    ({"a": 0}, "a \u4e2d\n", "m.txt:1: '\u4e2d' is not a GPT-2 printable byte"),
    ({"a": 0, "b": 0}, "", "id 0 is given to several tokens"),
    ({"a": "0"}, "", "the id of 'a' must be a non-negative int"),
    ({"a b": 0}, "", "token 'a b'"),
])
def test_read_gpt2_files_errors_say_where(tmp_path, vocab, merges, message):
    (tmp_path / "v.json").write_text(json.dumps(vocab), encoding="utf-8")
    (tmp_path / "m.txt").write_text(merges, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        read_gpt2_files(tmp_path / "v.json", tmp_path / "m.txt")


def test_read_gpt2_merges_alone(tmp_path, gpt2_files):
    assert read_gpt2_merges(CS336 / "gpt2_merges.txt") == gpt2_files[1]
    (tmp_path / "m.txt").write_text("#version: 0.2\n\u0120 t\r\n\nh e\n", encoding="utf-8")
    assert read_gpt2_merges(tmp_path / "m.txt") == [(b" ", b"t"), (b"h", b"e")]
    (tmp_path / "bad.txt").write_text("a b\na\n", encoding="utf-8")
    with pytest.raises(ValueError, match="bad.txt:2: expected two tokens"):
        read_gpt2_merges(tmp_path / "bad.txt")
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        read_gpt2_merges(tmp_path / "nope.txt")


def test_read_gpt2_files_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.json"):
        read_gpt2_files(tmp_path / "nope.json", CS336 / "gpt2_merges.txt")
    with pytest.raises(FileNotFoundError, match="no such file"):
        Tokenizer.from_files(CS336 / "gpt2_vocab.json", tmp_path / "nope.txt")


# ---------------------------------------------------------------- exactness against tiktoken
def _shared_text_files():
    files = sorted(p for p in SHARED.rglob("*") if p.is_file()) + [BUNDLED]
    return [pytest.param(p, id=str(p.relative_to(SHARED)) if SHARED in p.parents else "bundled-sample")
            for p in files]


def test_the_shared_data_holds_the_files_the_issue_names():
    names = {p.name for p in SHARED.rglob("*")} | {BUNDLED.name}
    assert {"corpus.en", "tinystories_sample.txt", "address.txt", "german.txt",
            "tinystories_sample_1M.txt"} <= names


@pytest.mark.parametrize("path", _shared_text_files())
def test_equals_tiktoken_on_every_shared_file(gpt2, reference, path):
    text = path.read_bytes().decode("utf-8")  # exact bytes: no newline translation
    ids = gpt2.encode(text)
    assert ids == reference.encode(text, allowed_special="all")
    assert gpt2.decode(ids) == text


FRAGMENTS = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\x85", "\u2028", "\x0b",
             "\x1c", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "don't", "I'm", "''", "'", "0", "7",
             "42", "1234567", "3.14", "\u00bd", "\u00b2", "\u0661\u0662", "Hello", "world", " the", "\u00e9",
             "e\u0301", "\u4e2d\u6587", "\u65e5\u672c\u8a9e", "\ud55c\uad6d\uc5b4", "\U0001f44d", "\U0001f44d\U0001f3fd",
             "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\U0001f917", EOT, "<|", "|>", "endoftext", "!", "?!",
             "...", "\u2014", "$", "\x00", "\ufeff", "\u200b"]
# Any assigned character. Code points that Python 3.11's Unicode 14 leaves unassigned ("Cn") are left
# out: the `regex` package knows a newer Unicode than tiktoken's Rust regex (U+3D000 is a letter for one
# and not the other), so on them the two *pre-tokenizers* legitimately disagree.
assigned = st.characters(blacklist_categories=("Cs", "Cn"))
stress_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(assigned, max_size=8)), max_size=40).map("".join)


@settings(max_examples=1200, deadline=None)
@given(stress_text)
def test_equals_tiktoken_on_generated_strings(gpt2, reference, text):
    ids = gpt2.encode(text)
    assert ids == reference.encode(text, allowed_special="all")
    assert gpt2.decode(ids) == text


@settings(max_examples=600, deadline=None)
@given(stress_text, st.sampled_from([1, 8, 64]))
def test_mostly_ascii_cutting_equals_tiktoken(gpt2, reference, text, sparse):
    "`_find_mixed` (ASCII stretches by `re`, non-ASCII ones widened to safe cuts by `regex`) at any threshold."
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fast, "_MIXED_SPARSE", sparse)  # 1: every non-ASCII text is cut
        ids = gpt2.encode(text)
    assert ids == reference.encode(text, allowed_special="all")


def test_mostly_ascii_text_is_cut(gpt2, reference, monkeypatch):
    "On the regex path, a long English text with a few non-ASCII characters goes through the cutting path, and equals tiktoken."
    text = BUNDLED.read_text(encoding="utf-8")
    assert not text.isascii()
    monkeypatch.setattr(fast, "_BULK_MIN", 1 << 40)  # the regex path: the bulk path takes such a text whole (tested below)
    monkeypatch.setattr(fast, "_ARRAY_MIN", 1 << 40)
    calls = []
    real = fast._find_mixed
    monkeypatch.setattr(fast, "_find_mixed", lambda *a: calls.append(a[0]) or real(*a))
    gpt2._cache.clear()
    assert gpt2.encode(text) == reference.encode(text, allowed_special="all")
    assert any(len(fast._NON_ASCII.findall(t)) * fast._MIXED_SPARSE <= len(t) for t in calls)  # and were cut


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_round_trip_any_string(gpt2, text):
    assert gpt2.decode(gpt2.encode(text)) == text
    assert gpt2.decode_bytes(gpt2.encode(text)) == text.encode("utf-8")


@pytest.mark.parametrize("make", [
    lambda: "a" * 100_000,
    lambda: "".join(random.Random(0).choice("abcdefghijklmnopqrstuvwxyz") for _ in range(100_000)),
    lambda: "".join(random.Random(1).choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(100_000)),
    lambda: "7" * 50_000 + " " * 50_000 + "=" * 50_000,
    lambda: "\u00e9\u4e2d" * 30_000,
], ids=["a*100000", "random-lowercase-100KB", "random-letters-100KB", "digits-spaces-equals", "non-ascii-run"])
def test_long_pieces_equal_tiktoken(gpt2, reference, make):
    text = make()
    assert gpt2.encode(text) == reference.encode(text)


# ---------------------------------------------------------------- priority replay and the two merge paths
def _byte_vocab():
    return {i: bytes([i]) for i in range(256)}


def test_priority_replay_counter_example():
    tok = Tokenizer({**_byte_vocab(), 256: b"bc", 257: b"ab"}, [(b"b", b"c"), (b"a", b"b")])
    assert [tok.vocab[i] for i in tok.encode("abc")] == [b"a", b"bc"]      # greedy would give [ab, c]
    assert [tok.vocab[i] for i in tok.encode("abab")] == [b"ab", b"ab"]
    xx = Tokenizer({**_byte_vocab(), 256: b"xx"}, [(b"x", b"x")])
    assert [xx.vocab[i] for i in xx.encode("xxx")] == [b"xx", b"x"]         # no overlap, leftmost first


def _tables(tok):
    return tok._ranks, tok.merged, tok._shift


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=2, max_size=200))
def test_scan_and_heap_agree_on_gpt2(gpt2, text):
    ids = [gpt2.byte_ids[b] for b in text.encode("utf-8")]
    assert _merge_scan(list(ids), *_tables(gpt2)) == _merge_heap(list(ids), *_tables(gpt2))


@st.composite
def merge_lists(draw):
    "Random merge lists over a 3-letter alphabet; order is arbitrary, so later parts may precede their merge."
    tokens = [b"a", b"b", b"c"]
    for _ in range(draw(st.integers(0, 6))):
        tokens.append(draw(st.sampled_from(tokens)) + draw(st.sampled_from(tokens)))
    pairs = [(x, y) for x in tokens for y in tokens if x + y in tokens]
    merges = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=12)) if pairs else []
    return tokens, merges


def _merge_list_tokenizer(tm) -> Tokenizer:
    "A tokenizer of the bytes, the tokens and the merges `merge_lists` drew."
    tokens, merges = tm
    vocab = _byte_vocab()
    for t in tokens:
        if len(t) > 1 and t not in vocab.values(): vocab[len(vocab)] = t
    return Tokenizer(vocab, merges)


@settings(max_examples=400, deadline=None)
@given(merge_lists(), st.text(alphabet="abc", min_size=2, max_size=120))
def test_scan_and_heap_agree_on_any_merge_list(tm, word):
    tok = _merge_list_tokenizer(tm)
    ids = [tok.byte_ids[b] for b in word.encode()]
    assert _merge_scan(list(ids), *_tables(tok)) == _merge_heap(list(ids), *_tables(tok))
    # and the public encode (cache, then scan or heap by length) agrees with both
    assert tok.encode(word) == _merge_scan(list(ids), *_tables(tok))


def _replay(word: bytes, merges) -> list[bytes]:
    "What training does to a pre-token: every merge in learned order, one left-to-right pass each."
    symbols = [bytes([b]) for b in word]
    for a, b in merges:
        if a + b in word: symbols = merge_pair(symbols, (a, b), a + b)
    return symbols


def test_scan_heap_threshold_is_crossed_in_gpt2_sample(gpt2, reference):
    "Pre-tokens just below and above the scan/heap threshold both match tiktoken."
    n = fast._SCAN_MAX
    for length in (n - 1, n, n + 1, 2 * n):
        text = "".join(random.Random(length).choice("etaoinshrdlu") for _ in range(length))
        assert gpt2.encode(text) == reference.encode(text)


# ---------------------------------------------------------------- a model we trained
@pytest.fixture(scope="module")
def trained():
    from bpe_nb.incremental import train_incremental
    text = (CS336 / "corpus.en").read_bytes().decode("utf-8")
    model = train_incremental(count_pretokens(text, [EOT]), 700, [EOT], progress=False)
    return model, text


def test_trained_model_round_trip_and_specials(trained):
    model, text = trained
    tok = Tokenizer.from_model(model)
    assert tok.special_tokens == model.special_tokens and tok.vocab == model.vocab
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    eot_id = model.special_tokens[EOT]
    assert tok.encode(f"hello{EOT}world") == tok.encode("hello") + [eot_id] + tok.encode("world")
    assert ids.count(eot_id) == text.count(EOT)


def test_trained_model_encodes_every_pretoken_as_training_implies(trained):
    model, text = trained
    tok = Tokenizer.from_model(model)
    id_of = {b: i for i, b in model.vocab.items()}
    implied = {}
    for piece in count_pretokens(text, [EOT]):  # every distinct pre-token of the training corpus
        implied[piece] = [id_of[s] for s in _replay(piece, model.merges)]
        assert list(tok._encode_piece(piece.decode("utf-8"))) == implied[piece], piece
    expected = []  # and in context: the whole corpus is the concatenation of what training implies
    for part in split_special(text, [EOT]):
        if part == EOT: expected.append(model.special_tokens[EOT])
        else: expected.extend(i for p in pretokenize(part) for i in implied[p])
    assert tok.encode(text) == expected


def test_trained_model_with_ids_smaller_tie_break_and_pickle(trained):
    from bpe_nb.incremental import train_incremental
    _, text = trained
    model = train_incremental(count_pretokens(text[:20_000], [EOT]), 400, [EOT], tie_break="ids-smaller", progress=False)
    tok = Tokenizer.from_model(model)
    clone = pickle.loads(pickle.dumps(tok))
    assert clone.encode(text[:5000]) == tok.encode(text[:5000])
    assert clone.vocab == tok.vocab and clone.merges == tok.merges and clone.special_tokens == tok.special_tokens
    assert clone.info == tok.info == model.info and tok.info["tie_break"] == "ids-smaller"


def test_from_model_takes_the_recorded_pattern(trained):
    from bpe_nb.naive import BPEModel
    model, text = trained
    tok = Tokenizer.from_model(BPEModel(model.vocab, model.merges, model.special_tokens, {"pattern": CL100K_PATTERN}))
    assert tok.pattern == CL100K_PATTERN
    assert Tokenizer.from_model(model).pattern == GPT2_PATTERN
    assert Tokenizer.from_model(model, pattern=CL100K_PATTERN).pattern == CL100K_PATTERN
    assert tok.decode(tok.encode(text[:3000])) == text[:3000]


# ---------------------------------------------------------------- special tokens
def test_special_tokens_longest_first_and_ids(gpt2, gpt2_two, gpt2_files):
    assert gpt2.special_tokens == {EOT: 50256}
    assert gpt2_two.special_tokens == {EOT: 50256, EOT * 2: 50257}
    assert gpt2_two.encode(EOT * 3) == [50257, 50256]
    assert gpt2.encode(EOT * 3) == [50256] * 3
    assert gpt2_two.decode([50257]) == EOT * 2
    as_dict = Tokenizer(*gpt2_files, special_tokens={EOT: 50256, "<pad>": 60000})
    assert as_dict.encode("<pad>x" + EOT) == [60000, gpt2.encode("x")[0], 50256]
    assert max(as_dict.vocab) == 60000


def test_unregistered_special_is_plain_text(gpt2_files, gpt2):
    plain = Tokenizer(*gpt2_files)
    assert 50256 not in plain.encode(EOT)
    assert plain.decode(plain.encode(EOT)) == EOT
    assert plain.encode("hello world") == gpt2.encode("hello world")


@pytest.mark.parametrize("specials, message", [
    ("<|endoftext|>", "list of str or a dict"),
    (["<a>", "<a>"], "given more than once"),
    ([""], "non-empty strings"),
    ({"<a>": 5}, "vocab\\[5\\] is b'\\\\x05'"),
    ({"<a>": 300, "<b>": 300}, "share id 300"),
    ({"<a>": -1}, "non-negative int"),
    (["\ud800"], "not valid UTF-8"),
])
def test_bad_special_tokens(specials, message):
    with pytest.raises((ValueError, TypeError), match=message):
        Tokenizer(_byte_vocab(), [], specials)


@pytest.mark.parametrize("vocab, merges, message", [
    ({0: b"a"}, [], "lacks 255 single byte"),
    ({**{i: bytes([i]) for i in range(256)}, -1: b"ab"}, [], "non-negative ints"),
    ({**{i: bytes([i]) for i in range(256)}, 256: "ab"}, [], "must be non-empty bytes"),
    ({i: bytes([i]) for i in range(256)}, [(b"a", b"b")], "merged token b'ab' is not in the vocab"),
    ({i: bytes([i]) for i in range(256)}, [(b"a", b"zz")], "b'zz' is not in the vocab"),
    ({i: bytes([i]) for i in range(256)}, [(b"a",)], "must be a pair of non-empty bytes"),
    ({i: bytes([i]) for i in range(256)}, [("a", "b")], "must be a pair of non-empty bytes"),
    ({**{i: bytes([i]) for i in range(256)}, 256: b"ab"}, [(b"a", b"b"), (b"a", b"b")], "repeats merges\\[0\\]"),
])
def test_bad_vocab_or_merges(vocab, merges, message):
    with pytest.raises(ValueError, match=message):
        Tokenizer(vocab, merges)


def test_bad_pattern_and_types():
    with pytest.raises(ValueError, match="not a valid regex"):
        Tokenizer(_byte_vocab(), [], pattern="(")
    with pytest.raises(TypeError):
        Tokenizer([b"a"], [])
    with pytest.raises(TypeError, match="expects a str"):
        Tokenizer(_byte_vocab(), []).encode(b"bytes")


SURROGATE_WORDS = ["\ud83d", "\ude00", "\ud83d\ude00", "\udfff", "\ud800", "\ud835\udc00", "\ud835", "\udc00",
                   "\U0001d400", " ", "  ", "a", "b", "\n", "'s", "<|endo", "ftext|>", EOT, "\u4e2d"]
surrogate_text = st.lists(st.sampled_from(SURROGATE_WORDS), max_size=30).map("".join)


def test_surrogates_are_repaired_as_tiktoken_does(gpt2, reference):
    "A lone surrogate becomes U+FFFD, a pair written as two code points its character: tiktoken's UTF-16 round trip."
    for text in ["ok \ud800 no", "a\udfffb", "x\ud83d", "\ud83d\ude00", "\ude00\ud83d", "\ud835\udc00x \ud835"]:
        expected = reference.encode(text, allowed_special="all")
        assert gpt2.encode(text) == expected, text
        assert gpt2.encode_ordinary(text) == reference.encode_ordinary(text)
        assert gpt2.encode_batch([text, "plain"]) == [expected, reference.encode("plain")]
        assert list(gpt2.encode_iterable([text])) == expected
        assert [i for e in gpt2.explain(text) for i in e.ids] == expected
    assert gpt2.encode("\ud83d\ude00") == gpt2.encode("\U0001f600")  # the pair is the astral character
    assert gpt2.encode("a\udfffb") == gpt2.encode("a\ufffdb")  # a lone one is U+FFFD


@settings(max_examples=300, deadline=None)
@given(surrogate_text, st.lists(st.integers(0, 60), max_size=10), st.integers(1, 20))
def test_surrogates_equal_tiktoken_in_every_entry_point(gpt2, reference, text, cuts, block):
    "encode, encode_ordinary, encode_batch and encode_iterable (any chunking: a pair may be split between items)."
    expected = reference.encode(text, allowed_special="all")
    assert gpt2.encode(text) == expected
    assert gpt2.encode_ordinary(text) == reference.encode_ordinary(text)
    assert gpt2.encode_batch([text, text[::-1]]) == [expected, reference.encode(text[::-1], allowed_special="all")]
    saved = fast._STREAM_BLOCK
    fast._STREAM_BLOCK = block
    try:
        assert list(gpt2.encode_iterable(_split(text, cuts))) == expected
        assert list(gpt2.encode_iterable(_split(text, cuts), disallowed_special=())) == reference.encode_ordinary(text)
    finally: fast._STREAM_BLOCK = saved


# ---------------------------------------------------------------- decoding
def test_decode_unknown_ids_and_bad_types(gpt2):
    with pytest.raises(ValueError, match="unknown token id 50257"):
        gpt2.decode([15496, 50257])
    with pytest.raises(ValueError, match="unknown token id -1"):
        gpt2.decode_bytes([-1])
    with pytest.raises(TypeError, match="ids must be ints"):
        gpt2.decode([1.0])
    with pytest.raises(TypeError, match="ids must be ints"):
        gpt2.decode([True])
    with pytest.raises(TypeError, match="ids must be integers"):
        gpt2.decode(np.array([1.0]))
    assert gpt2.decode([]) == ""
    ids = gpt2.encode("numpy ids work")
    assert gpt2.decode(np.array(ids, dtype=np.uint16)) == "numpy ids work"
    assert gpt2.decode(iter(ids)) == "numpy ids work"


def test_decode_replaces_invalid_utf8(gpt2):
    first = {b: i for i, b in gpt2.vocab.items()}[b"\xe2"]
    assert gpt2.decode([first]) == "\ufffd"
    assert gpt2.decode_bytes([first]) == b"\xe2"


# ---------------------------------------------------------------- the cache
def test_cache_is_bounded_and_does_not_change_results(gpt2_files):
    text = BUNDLED.read_text(encoding="utf-8")[:100_000]
    small = Tokenizer(*gpt2_files, special_tokens=[EOT], cache_size=100)
    none = Tokenizer(*gpt2_files, special_tokens=[EOT], cache_size=0)
    big = Tokenizer(*gpt2_files, special_tokens=[EOT])
    expected = big.encode(text)
    assert small.encode(text) == expected == none.encode(text)
    assert len(small._cache) <= 100 and len(none._cache) == 0
    assert small.encode(text) == expected  # a second pass, with a cache that has been trimmed
    with pytest.raises(ValueError, match="cache_size"):
        Tokenizer(*gpt2_files, cache_size=-1)


# ---------------------------------------------------------------- encode_iterable
STREAM_FRAGMENTS = FRAGMENTS + ["<s>", "<s><s>", "aa", "ab", "bcd", "a", "b", "c", "d", " a", EOT * 2, "<|endo", "ftext|>",
                                 "'r", "'v", "'l", "e", "l", " \n", "\n ", "\r", "123", "!\n"]
stream_text = st.lists(st.one_of(st.sampled_from(STREAM_FRAGMENTS), st.text(max_size=6)), max_size=30).map("".join)


@pytest.fixture(scope="module")
def stream_tokenizers(gpt2_files, gpt2, gpt2_two):
    vocab, merges = gpt2_files
    overlapping = Tokenizer(vocab, merges, special_tokens=["<s>", "<s><s>", "aa", "ab", "bcd"])
    cl100k = Tokenizer(vocab, merges, special_tokens=[EOT], pattern=CL100K_PATTERN)
    single = Tokenizer(vocab, merges, special_tokens=["<s>"])
    o200k = Tokenizer(vocab, merges, special_tokens=[EOT], pattern=O200K_PATTERN)
    o200k_plain = Tokenizer(vocab, merges, pattern=O200K_PATTERN)
    r50k = Tokenizer(vocab, merges, pattern=R50K_PATTERN)
    return [gpt2, gpt2_two, Tokenizer(vocab, merges), overlapping, cl100k, single, o200k, o200k_plain, r50k]


def _split(text: str, cuts: list[int]) -> list[str]:
    cuts = sorted({min(c, len(text)) for c in cuts})
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


@settings(max_examples=800, deadline=None)
@given(stream_text, st.lists(st.integers(0, 200), max_size=12), st.integers(1, 40), st.integers(0, 8))
def test_encode_iterable_equals_encode_whatever_the_chunking(stream_tokenizers, text, cuts, block, which):
    tok = stream_tokenizers[which]
    saved = fast._STREAM_BLOCK
    fast._STREAM_BLOCK = block  # small blocks: the held-back logic runs at many seams
    try: got = list(tok.encode_iterable(_split(text, cuts)))
    finally: fast._STREAM_BLOCK = saved
    assert got == tok.encode(text)


TRICKY = ["we're here", "x'rex 've'll", "a!\n\n  \n b", "x  \n  \n\n y\r\n\r\n", "12345 6789!!\n", "$hello   world  ",
          "don't<|endoftext|>'s", "tab\t\t\tend  \u3000x", "\u00e9t\u00e9 'S'LL", "<s><s>aab bcd<s>",
          "HTTPServer's ok", "I'LL x'd", "\u00c9COLE's\n\n\tz", "caf\u00e9\u0301's //\n\n/x", "we\u2019re 12345"]


@pytest.mark.parametrize("which", range(9))
def test_encode_iterable_every_split_of_tricky_texts(stream_tokenizers, which):
    tok = stream_tokenizers[which]
    saved = fast._STREAM_BLOCK
    fast._STREAM_BLOCK = 1
    try:
        for text in TRICKY:
            whole = tok.encode(text)
            for i in range(len(text) + 1):
                for j in range(i, min(len(text), i + 4) + 1):
                    assert list(tok.encode_iterable([text[:i], text[i:j], text[j:]])) == whole, (text, i, j)
    finally: fast._STREAM_BLOCK = saved


def test_encode_iterable_with_a_custom_pattern_cuts_only_at_specials(gpt2_files):
    tok = Tokenizer(*gpt2_files, special_tokens=[EOT], pattern=r"\S+|\s+")
    text = "some words " * 50 + EOT + "more words " * 50
    saved = fast._STREAM_BLOCK
    fast._STREAM_BLOCK = 5
    try: assert list(tok.encode_iterable(text[i:i + 7] for i in range(0, len(text), 7))) == tok.encode(text)
    finally: fast._STREAM_BLOCK = saved
    ids, cut = fast._encode_head(tok, "some words " * 5)
    assert (ids, cut) == ([], 0)  # no special token yet: nothing is final


def test_encode_iterable_on_a_file_and_a_str(gpt2, tmp_path):
    text = BUNDLED.read_bytes().decode("utf-8")[:300_000]
    (tmp_path / "t.txt").write_text(text, encoding="utf-8", newline="")
    with open(tmp_path / "t.txt", encoding="utf-8", newline="") as f:
        assert list(gpt2.encode_iterable(f)) == gpt2.encode(text)
    assert list(gpt2.encode_iterable(text[:1000])) == gpt2.encode(text[:1000])
    with pytest.raises(TypeError, match="iterable of str"):
        list(gpt2.encode_iterable([b"bytes"]))


def test_encode_iterable_is_lazy(gpt2):
    def endless():
        while True: yield "Once upon a time there was a cat. "
    first = list(islice(gpt2.encode_iterable(endless()), 10_000))
    assert first == gpt2.encode("Once upon a time there was a cat. " * 2000)[:10_000]


def test_encode_iterable_memory_does_not_grow_with_the_input(gpt2):
    "Traced Python allocations stay bounded while 6 MB stream through (the ids are consumed, not kept)."
    lines = BUNDLED.read_text(encoding="utf-8").splitlines(keepends=True)
    def stream(repeats):
        for _ in range(repeats): yield from lines
    for _ in gpt2.encode_iterable(stream(1)): pass  # warm the cache
    tracemalloc.start()
    try:
        n = sum(1 for _ in gpt2.encode_iterable(stream(6)))
        _, peak = tracemalloc.get_traced_memory()
    finally: tracemalloc.stop()
    assert n > 1_000_000
    assert peak < 8 * 2**20, f"peak traced memory {peak / 2**20:.1f} MiB while streaming 6 MB"


def test_encode_iterable_is_linear_on_a_run_without_safe_spaces(monkeypatch):
    "4M spaces in 8 KiB items: each character is searched for a safe space a bounded number of times, not once per block."
    tok, n = Tokenizer(_byte_vocab(), []), 4 * 2**20
    searched, heads = [], []
    def counting_search(text, end=None):
        searched.append(len(text) if end is None else end)
        return last_safe_space(text, end)
    def counting_head(tok, text, specials=None):
        heads.append(len(text))
        return encode_head(tok, text, specials)
    last_safe_space, encode_head = fast.last_safe_space, fast._encode_head
    monkeypatch.setattr(fast, "last_safe_space", counting_search)
    monkeypatch.setattr(fast, "_encode_head", counting_head)
    ids = list(tok.encode_iterable(" " * 8192 for _ in range(n // 8192)))
    assert ids == [32] * n
    assert len(heads) >= 5  # the stream did work in steps (a block is 64 K characters)
    assert sum(heads) <= 3 * n and sum(searched) <= 3 * n, (sum(heads) / n, sum(searched) / n)


def test_the_backward_safe_space_search_agrees_with_str_isspace():
    "`last_safe_space` searches with a regex class: over all of Unicode it is exactly `not str.isspace()`."
    from bpe_nb.chunking import last_safe_space
    for c in map(chr, range(0x110000)):
        assert (last_safe_space(c + " ") == 1) == (not c.isspace()), hex(ord(c))
    assert last_safe_space("a  b  ", end=4) == 1 and last_safe_space("a  b  ", end=5) == 4 and last_safe_space("x" + " " * 100_000) == 1


# ---------------------------------------------------------------- encode_file
@pytest.fixture
def docs(tmp_path):
    text = BUNDLED.read_bytes().decode("utf-8")[:200_000]
    path = tmp_path / "docs.txt"
    path.write_bytes(text.encode("utf-8"))
    return path, text


@pytest.mark.parametrize("workers", [1, 2])
def test_encode_file_equals_encode(gpt2, docs, workers, monkeypatch):
    monkeypatch.setattr(fast, "_FILE_MIN_RANGE", 20_000)  # many chunks
    path, text = docs
    out = path.with_suffix(".bin")
    arr = gpt2.encode_file(path, out, workers=workers, progress=False)
    assert isinstance(arr, np.memmap) and arr.dtype == np.uint16
    assert arr.tolist() == gpt2.encode(text)
    assert np.fromfile(out, dtype=np.uint16).tolist() == arr.tolist()
    assert not out.with_name(out.name + ".partial").exists()


def test_encode_file_identical_for_any_worker_count(gpt2, docs, monkeypatch):
    monkeypatch.setattr(fast, "_FILE_MIN_RANGE", 30_000)
    path, _ = docs
    outs = [gpt2.encode_file(path, path.with_name(f"w{w}.bin"), workers=w, progress=False) for w in (1, 2, 3)]
    data = [path.with_name(f"w{w}.bin").read_bytes() for w in (1, 2, 3)]
    assert data[0] == data[1] == data[2] and len(outs[0]) > 0


def test_encode_file_dtype_choice(gpt2_files, docs, gpt2):
    path, text = docs
    assert gpt2.encode_file(path, path.with_suffix(".a"), progress=False).dtype == np.uint16
    assert gpt2.encode_file(path, path.with_suffix(".b"), dtype="uint32", progress=False).dtype == np.uint32
    assert gpt2.encode_file(path, path.with_suffix(".c"), dtype=np.int64, progress=False).tolist() == gpt2.encode(text)
    big = Tokenizer(*gpt2_files, special_tokens={EOT: 50256, "<big>": 70_000})
    arr = big.encode_file(path, path.with_suffix(".d"), workers=1, progress=False)
    assert arr.dtype == np.uint32 and arr.tolist() == gpt2.encode(text)
    with pytest.raises(ValueError, match="cannot hold token id 70000"):
        big.encode_file(path, path.with_suffix(".e"), dtype=np.uint16, progress=False)
    with pytest.raises(TypeError, match="integer dtype"):
        gpt2.encode_file(path, path.with_suffix(".f"), dtype=np.float32, progress=False)


def test_encode_file_npy(gpt2, docs, monkeypatch):
    monkeypatch.setattr(fast, "_FILE_MIN_RANGE", 50_000)
    path, text = docs
    arr = gpt2.encode_file(path, path.with_suffix(".npy"), workers=2, progress=False)
    assert np.load(path.with_suffix(".npy")).tolist() == arr.tolist() == gpt2.encode(text)


def test_encode_file_edge_cases(gpt2, tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    assert gpt2.encode_file(tmp_path / "empty.txt", tmp_path / "e.bin", progress=False).tolist() == []
    (tmp_path / "only.txt").write_bytes((EOT * 5).encode())
    assert gpt2.encode_file(tmp_path / "only.txt", tmp_path / "o.bin", progress=False).tolist() == [50256] * 5
    (tmp_path / "crlf.txt").write_bytes(b"line one\r\nline two\r\n")  # bytes are kept exactly
    assert gpt2.encode_file(tmp_path / "crlf.txt", tmp_path / "c.bin", progress=False).tolist() == gpt2.encode("line one\r\nline two\r\n")
    (tmp_path / "bad.txt").write_bytes(b"ok " + b"\xff" + b" no")
    with pytest.raises(ValueError, match="invalid UTF-8 at byte offset 3"):
        gpt2.encode_file(tmp_path / "bad.txt", tmp_path / "b.bin", progress=False)
    assert not (tmp_path / "b.bin").exists() and not (tmp_path / "b.bin.partial").exists()
    assert gpt2.encode_file(tmp_path / "bad.txt", tmp_path / "r.bin", errors="replace", progress=False).tolist() == \
        gpt2.encode("ok \ufffd no")
    with pytest.raises(ValueError, match="errors must be 'strict' or 'replace', got 'ignore'"):
        gpt2.encode_file(tmp_path / "bad.txt", tmp_path / "r.bin", errors="ignore")
    with pytest.raises(FileNotFoundError, match="no such file"):
        gpt2.encode_file(tmp_path / "missing.txt", tmp_path / "m.bin")
    with pytest.raises(ValueError, match="workers must be a positive int"):
        gpt2.encode_file(tmp_path / "only.txt", tmp_path / "o.bin", workers=0)
    with pytest.raises(ValueError, match="is the input file"):
        gpt2.encode_file(tmp_path / "only.txt", tmp_path / "only.txt")


class _RangesSpy:
    "Wraps `file_ranges` to record the ranges `encode_file` planned."
    def __init__(self): self.calls = []
    def __call__(self, *args, **kwargs):
        r = file_ranges(*args, **kwargs); self.calls.append(r); return r


@pytest.mark.parametrize("workers", [1, 2])
def test_encode_file_without_special_tokens_is_still_cut_and_parallel(gpt2_files, gpt2, docs, workers, monkeypatch):
    "No <|endoftext|> in the file: before, one range for everything; now the ranges start at safe spaces."
    monkeypatch.setattr(fast, "_FILE_MIN_RANGE", 10_000)
    spy = _RangesSpy(); monkeypatch.setattr(fast, "file_ranges", spy)
    path, text = docs
    text = text.replace(EOT, "\n"); path.write_text(text, encoding="utf-8", newline="")
    for tok in (gpt2, Tokenizer(*gpt2_files)):  # <|endoftext|> registered but absent, and no special token at all
        assert tok.encode_file(path, path.with_suffix(".p"), workers=workers, progress=False).tolist() == tok.encode(text)
        ranges = spy.calls[-1]
        assert len(ranges) == (1 if workers == 1 else 8) and ranges[-1][1] == path.stat().st_size
        assert all(text.encode().startswith(b" ", a) for a, _ in ranges[1:])


def test_encode_file_memory_does_not_grow_with_the_file(gpt2, tmp_path, monkeypatch):
    "One worker, no special token in the file: traced memory stays near a block, not the file (it was ~17x the file)."
    monkeypatch.setattr(fast, "_FILE_BLOCK", 1 << 16)
    text = BUNDLED.read_text(encoding="utf-8").replace(EOT, "\n") * 2
    path = tmp_path / "plain.txt"; path.write_text(text, encoding="utf-8")
    gpt2.encode_file(path, tmp_path / "warm.bin", workers=1, progress=False)  # warm the cache first
    tracemalloc.start()
    try:
        arr = gpt2.encode_file(path, tmp_path / "ids.bin", workers=1, progress=False)
        _, peak = tracemalloc.get_traced_memory()
    finally: tracemalloc.stop()
    assert len(arr) > 400_000
    assert peak < 4 * 2**20, f"peak traced memory {peak / 2**20:.1f} MiB while encoding {len(text.encode()) / 2**20:.1f} MiB"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["aa", "a", "b", "ab", "bcd", "<s>", "<s><s>", "x y", " ", "\u00e9", "  z", "\n"]),
                max_size=60).map("".join),
       st.integers(1, 12), st.integers(1, 9), st.sampled_from([0, 1, 3, 4, 5]))
def test_file_ranges_and_blocks_encode_exactly(stream_tokenizers, tmp_path_factory, text, workers, block_size, which):
    "Encoding the blocks of the planned ranges one by one gives the ids of the whole file, whatever the specials."
    tok = stream_tokenizers[which]  # 3: <s>, <s><s>, aa, ab, bcd (overlapping); 4: cl100k; 5: <s> only
    path = tmp_path_factory.mktemp("cuts") / "t.txt"
    path.write_bytes(text.encode())
    ranges = file_ranges(path, workers, tuple(tok.special_tokens), tok.pattern, min_chunk_size=1)
    blocks = [x.text for a, b in ranges for x in read_blocks(path, a, b, tuple(tok.special_tokens), tok.pattern,
                                                              block_size=block_size)]
    assert "".join(blocks) == text
    assert [i for block in blocks for i in tok.encode(block)] == tok.encode(text)


def test_encode_file_with_several_specials(gpt2_two, docs, monkeypatch):
    monkeypatch.setattr(fast, "_FILE_MIN_RANGE", 20_000)
    path, text = docs
    text2 = text.replace(EOT, EOT * 2, 10)  # some doubled markers: the longer special must win
    path.write_text(text2, encoding="utf-8", newline="")
    for workers in (1, 2):
        arr = gpt2_two.encode_file(path, path.with_suffix(f".{workers}"), workers=workers, progress=False)
        assert arr.tolist() == gpt2_two.encode(text2)
    assert 50257 in arr.tolist()


# ---------------------------------------------------------------- special tokens never take an ordinary token's id
def test_a_list_special_that_is_a_merged_token_gets_a_new_id(gpt2_files, gpt2):
    vocab, merges = gpt2_files
    tok = Tokenizer(vocab, merges, [EOT, "hello", "a"])
    assert tok.special_tokens == {EOT: 50256, "hello": 50257, "a": 50258}  # 31373 is the merged token, 64 the byte
    assert gpt2.encode("hello") == [31373] and tok.encode("so hello") == gpt2.encode("so ") + [50257]
    assert tok.decode([50257, 31373, 50258]) == "hellohelloa"
    assert Tokenizer(vocab, merges, ["hello", EOT]).special_tokens == {"hello": 50257, EOT: 50256}


@pytest.mark.parametrize("specials, message", [
    ({"hello": 31373}, "has id 31373, which is the token b'hello' made by merges["),
    ({"!": 0}, "has id 0, which is the single byte b'!'"),
])
def test_a_dict_special_with_an_ordinary_tokens_id_is_refused(gpt2_files, specials, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        Tokenizer(*gpt2_files, special_tokens=specials)


def test_specials_from_a_generator_of_merges(gpt2_files):
    vocab, merges = gpt2_files
    tok = Tokenizer(vocab, iter(merges), ["hello"])  # merges are read twice: an iterator must work too
    assert tok.special_tokens == {"hello": 50257} and len(tok.merges) == 50000


# ---------------------------------------------------------------- a pattern must cover the text
NO_HEBREW = r"[^\u05d0-\u05ea]+"  # passes the pattern check's test text, skips Hebrew letters


def test_a_pattern_that_skips_characters_is_refused(gpt2_files):
    for pattern, message in [(r"\w+", "does not cover every text"), (r"x*", "can match the empty string"),
                             (r"(\w+)|\W+", "capturing group")]:
        with pytest.raises(ValueError, match=re.escape(message)):
            Tokenizer(_byte_vocab(), [], pattern=pattern)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["ab", " ", "c d", "\u05e9", "\u05d0b", EOT, "<s>", "\n"]), max_size=20).map("".join),
       st.lists(st.integers(0, 60), max_size=6), st.integers(1, 8))
def test_encoding_with_a_pattern_that_skips_names_the_first_skipped_character(text, cuts, block):
    tok = Tokenizer(_byte_vocab(), [], [EOT, "<s>"], pattern=NO_HEBREW)
    first = next((i for i, c in enumerate(text) if "\u05d0" <= c <= "\u05ea"), -1)
    saved = fast._STREAM_BLOCK
    fast._STREAM_BLOCK = block
    try:
        for run in (lambda: tok.encode(text), lambda: list(tok.encode_iterable(_split(text, cuts)))):
            if first == -1: assert tok.decode(run()) == text; continue
            with pytest.raises(ValueError) as e: run()
            assert f"{text[first]!r} at index {first} is in no match" in str(e.value)
    finally: fast._STREAM_BLOCK = saved


def test_encode_batch_names_the_text_a_pattern_skips():
    tok = Tokenizer(_byte_vocab(), [], pattern=NO_HEBREW)
    with pytest.raises(ValueError, match="texts\\[2\\]: .*'\u05e9' at index 1 is in no match"):
        tok.encode_batch(["ab", "cd", "a\u05e9"], workers=1)
    texts = ["ab" * 5000] * 7 + ["a\u05e9"]  # large enough for the pool: the worker's error names the text too
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fast, "_BATCH_MIN_CHARS", 1000)
        with pytest.raises(ValueError, match="texts\\[7\\]: .*'\u05e9' at index 1 is in no match"):
            tok.encode_batch(texts, workers=2)


def test_one_source_for_proven_patterns_and_the_printable_form():
    import bpe_nb.pretokenize as pretok
    assert encoder.PROVEN_PATTERNS is pretok.PROVEN_PATTERNS and not hasattr(encoder, "_STREAM_PATTERNS")
    assert encoder.printable_to_bytes is pretok.printable_to_bytes
    assert not any(hasattr(encoder, n) for n in ("_FROM_PRINTABLE", "_printable_tokens", "_file_cuts"))


# ---------------------------------------------------------------- streaming with o200k and cl100k (issue 16.7)
O200K_WORDS = ["don't", "HTTPServer's", "I'LL", "we've", "'s", "'re", "\u2019re", "x'd", " caf\u00e9", "na\u00efve",
               "\u00c9COLE", "e\u0301", "\u65e5\u672c\u8a9e", "1234567", "3.14", " \n\n ", "\r\n", "\n", "  ", " ", "\t",
               "x", "A", "b", " !?", "//\n", "/", "\U0001f44d", EOT, "<|endo", "ftext|>"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(O200K_WORDS), st.text(max_size=4)), max_size=40).map("".join),
       st.lists(st.integers(0, 300), max_size=12), st.integers(1, 30), st.sampled_from([CL100K_PATTERN, O200K_PATTERN]),
       st.booleans())
def test_encode_iterable_with_cl100k_and_o200k_equals_encode(gpt2_files, text, cuts, block, pattern, specials):
    tok = _pattern_tokenizer(gpt2_files, pattern, specials)
    saved = fast._STREAM_BLOCK
    fast._STREAM_BLOCK = block
    try: got = list(tok.encode_iterable(_split(text, cuts)))
    finally: fast._STREAM_BLOCK = saved
    assert got == tok.encode(text)


_PATTERN_TOKENIZERS = {}
def _pattern_tokenizer(gpt2_files, pattern, specials):
    key = (pattern, specials)
    if key not in _PATTERN_TOKENIZERS:
        _PATTERN_TOKENIZERS[key] = Tokenizer(*gpt2_files, special_tokens=[EOT] if specials else None, pattern=pattern)
    return _PATTERN_TOKENIZERS[key]


@pytest.mark.parametrize("pattern", [CL100K_PATTERN, O200K_PATTERN])
def test_encode_iterable_with_cl100k_and_o200k_streams_in_bounded_memory(gpt2_files, pattern):
    "No special token in the stream: the held-back rule alone keeps memory flat, and the ids are those of `encode`."
    tok = Tokenizer(*gpt2_files, pattern=pattern)
    lines = BUNDLED.read_text(encoding="utf-8").replace(EOT, "\n").splitlines(keepends=True)
    text = "".join(lines)
    assert list(tok.encode_iterable(lines)) == tok.encode(text)
    def stream(repeats):
        for _ in range(repeats): yield from lines
    tracemalloc.start()
    try:
        n = sum(1 for _ in tok.encode_iterable(stream(4)))
        _, peak = tracemalloc.get_traced_memory()
    finally: tracemalloc.stop()
    assert n > 800_000
    assert peak < 8 * 2**20, f"peak traced memory {peak / 2**20:.1f} MiB while streaming 4 MB"


# ---------------------------------------------------------------- streaming cuts at chapter 03's safe spaces (16.7)
def test_encode_iterable_o200k_case_rule_across_a_block_seam():
    "o200k reads a whole run of letters before it decides: `' 中HELLO'` is two pre-tokens, `' 中HELLOworld'` one."
    zh = "中".encode()
    merges = [(zh[:1], zh[1:2]), (zh[:2], zh[2:3]), (zh, b"H")]
    vocab = {i: bytes([i]) for i in range(256)}
    for k, (a, b) in enumerate(merges): vocab[256 + k] = a + b
    tok = Tokenizer(vocab, merges, {}, O200K_PATTERN)
    head = "x" * (fast._STREAM_BLOCK - 7) + " 中HELLO"
    assert list(tok.encode_iterable([head, "world and more"])) == tok.encode(head + "world and more")
    assert tok.encode(" 中HELLOworld")[:2] == [32, 258] and tok.encode(" 中HELLO")[:2] == [32, 257]


# Characters that make the seams subtle: letters of every case after CJK, contractions, combining marks,
# whitespace of all kinds (spaces after whitespace are no safe cut), digits and punctuation.
SEAM_WORDS = [" 中HELLO", "world", "中", "日本", "HELLO", "World", "WORLD", "x", "A", "\u01c5", "\u02b0", "it'l", "l", "ll",
              "'", "'LL", "'s", "\u2019re", "don't", "e\u0301", "\u0301", "\u00c9COLE", "na\u00efve", " ", " ", "  ", "\n",
              "\r\n", "\t", "\u00a0", "\u3000", " \n ", "123", "4567", "!?", "/", "\U0001f44d"]
SEAM_PATTERNS = [GPT2_PATTERN, R50K_PATTERN, CL100K_PATTERN, O200K_PATTERN]


@pytest.fixture(scope="module")
def pair_tokenizers():
    """Per pattern, tokenizers (with and without `<|endoftext|>`) with a merge for every ordered pair of the bytes
    of `SEAM_WORDS`: wherever two pre-tokenizations differ, the ids almost surely differ too."""
    alphabet = sorted({b for w in SEAM_WORDS + [EOT] for b in w.encode()})
    pairs = [(bytes([a]), bytes([b])) for a in alphabet for b in alphabet]
    random.Random(7).shuffle(pairs)
    vocab = {i: bytes([i]) for i in range(256)}
    merges = []
    for a, b in pairs:
        if a + b not in merges: vocab[256 + len(merges)] = a + b; merges.append((a, b))
    return {p: (Tokenizer(vocab, merges, pattern=p), Tokenizer(vocab, merges, [EOT], pattern=p)) for p in SEAM_PATTERNS}


def _seam_text(rng, n, specials):
    words = SEAM_WORDS + ([EOT, "<|endo", "ftext|>"] if specials else [])
    return "".join(rng.choice(words) for _ in range(rng.randrange(1, n)))


@pytest.mark.parametrize("pattern", SEAM_PATTERNS, ids=["gpt2", "r50k", "cl100k", "o200k"])
def test_encode_iterable_random_splits_equal_encode_for_every_known_pattern(pair_tokenizers, pattern, monkeypatch):
    rng = random.Random(SEAM_PATTERNS.index(pattern))
    for trial in range(2000):
        specials = trial % 2 == 1
        tok = pair_tokenizers[pattern][specials]
        text = _seam_text(rng, rng.choice([10, 30, 80]), specials)
        cuts = sorted(rng.sample(range(len(text) + 1), rng.randrange(0, min(10, len(text) + 1))))
        monkeypatch.setattr(fast, "_STREAM_BLOCK", rng.randrange(1, 40))
        assert list(tok.encode_iterable(_split(text, cuts))) == tok.encode(text), (text, cuts, fast._STREAM_BLOCK)


@pytest.mark.parametrize("pattern", SEAM_PATTERNS, ids=["gpt2", "r50k", "cl100k", "o200k"])
def test_encode_iterable_long_letter_runs_after_cjk(pair_tokenizers, pattern, monkeypatch):
    "A run of letters far longer than a block, split anywhere: the case rule's look-ahead is never cut short."
    tok = pair_tokenizers[pattern][0]
    monkeypatch.setattr(fast, "_STREAM_BLOCK", 8)
    for run in ("HELLO" * 12, "HELLO" * 12 + "world", "e\u0301" * 30 + "X", "\u0301" * 30 + "x"):
        for before in ("say 中", " 中", "中", "it'l"):
            text = before + run + " and more"
            whole = tok.encode(text)
            for i in range(0, len(text) + 1, 3):
                assert list(tok.encode_iterable([text[:i], text[i:]])) == whole, (text, i)
            assert list(tok.encode_iterable(iter(text))) == whole  # one character at a time


@pytest.mark.parametrize("pattern", SEAM_PATTERNS, ids=["gpt2", "r50k", "cl100k", "o200k"])
def test_encode_head_cuts_at_the_last_safe_space_and_nowhere_else(pair_tokenizers, pattern):
    "One rule: `_encode_head` cuts where chapter 03's `last_safe_space` says, and the pre-tokens before it are final."
    from bpe_nb.chunking import last_safe_space
    tok = pair_tokenizers[pattern][0]
    rng = random.Random(11)
    for trial in range(300):
        text, more = _seam_text(rng, 25, False), _seam_text(rng, 8, False)
        ids, cut = fast._encode_head(tok, text)
        assert cut == max(last_safe_space(text), 0)
        assert ids == tok.encode(text[:cut])
        assert pretokenize(text[:cut], pattern) + pretokenize(text[cut:] + more, pattern) == pretokenize(text + more, pattern)
    assert fast._encode_head(tok, "中文没有空格" * 50) == ([], 0)  # no safe space: held back whole
    assert list(tok.encode_iterable(["it'l", "l be fine"])) == tok.encode("it'll be fine")


# ---------------------------------------------------------------- tiktoken's special-token rules (issue 16.4)
FIM = "<|fim|>"


@pytest.fixture(scope="module")
def fim(gpt2_files):
    return Tokenizer(*gpt2_files, special_tokens={EOT: 50256, FIM: 50257})


@pytest.fixture(scope="module")
def fim_reference(reference):
    return tiktoken.Encoding(name="fim-local", pat_str=GPT2_PATTERN, mergeable_ranks=reference._mergeable_ranks,
                             special_tokens={EOT: 50256, FIM: 50257})  # no overlapping specials: tiktoken's
    # choice between overlapping ones depends on the order of a Rust HashMap


RULES = [dict(), dict(allowed_special="all"), dict(disallowed_special=()), dict(allowed_special=set()),
         dict(disallowed_special="all"), dict(allowed_special={FIM}), dict(allowed_special={FIM}, disallowed_special=()),
         dict(allowed_special={EOT}, disallowed_special={FIM}), dict(allowed_special="all", disallowed_special=()),
         dict(allowed_special=frozenset(), disallowed_special=[EOT]), dict(allowed_special={EOT, "<|nope|>"})]
special_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS + [FIM, "<|fim", "|>", FIM * 2, EOT + FIM]),
                                  st.text(assigned, max_size=5)), max_size=25).map("".join)


def _outcome(f):
    try: return f()
    except ValueError: return ValueError


@settings(max_examples=300, deadline=None)
@given(special_text, st.integers(0, len(RULES) - 1))
def test_special_token_rules_equal_tiktoken(fim, fim_reference, text, which):
    """Every combination of allowed/disallowed: the same ids as tiktoken, or a ValueError where tiktoken raises.
    (Only the call with neither argument differs: our default honours every registered special token.)"""
    kw = RULES[which]
    if not kw:
        assert fim.encode(text) == fim_reference.encode(text, allowed_special="all")
        return
    assert _outcome(lambda: fim.encode(text, **kw)) == _outcome(lambda: fim_reference.encode(text, **kw))
    assert _outcome(lambda: [e for x in fim.explain(text, **kw) for e in x.ids]) == \
        _outcome(lambda: fim_reference.encode(text, **kw))


def test_special_token_rules_by_hand(gpt2, reference):
    text = f"a{EOT}b"
    assert gpt2.encode(text) == [64, 50256, 65]                                     # our default: special
    assert gpt2.encode(text, allowed_special="all") == [64, 50256, 65]
    as_text = reference.encode_ordinary(text)
    assert 50256 not in as_text
    assert gpt2.encode(text, disallowed_special=()) == as_text == gpt2.encode_ordinary(text)
    for kw in (dict(allowed_special=set()), dict(disallowed_special="all"), dict(disallowed_special={EOT})):
        with pytest.raises(ValueError, match=r"disallowed special token '<\|endoftext\|>' at index 1"):
            gpt2.encode(text, **kw)
    with pytest.raises(ValueError):
        reference.encode(text)                                                      # tiktoken's default raises
    assert gpt2.encode("plain", allowed_special=set()) == reference.encode("plain")
    with pytest.raises(TypeError, match="allowed_special must be 'all' or a set of str"):
        gpt2.encode(text, allowed_special="<|endoftext|>")
    with pytest.raises(TypeError, match="disallowed_special must hold non-empty str"):
        gpt2.encode(text, disallowed_special=[1])
    with pytest.raises(TypeError, match="encode_ordinary expects a str"):
        gpt2.encode_ordinary(b"x")


@settings(max_examples=200, deadline=None)
@given(special_text)
def test_encode_ordinary_equals_tiktoken(fim, fim_reference, text):
    assert fim.encode_ordinary(text) == fim_reference.encode_ordinary(text)


@pytest.mark.parametrize("kw", [dict(), dict(allowed_special="all"), dict(disallowed_special=()),
                                dict(allowed_special={FIM}, disallowed_special=())])
@pytest.mark.parametrize("parallel", [False, True])
def test_encode_batch_equals_tiktoken(fim, fim_reference, monkeypatch, kw, parallel):
    docs = BUNDLED.read_text(encoding="utf-8")[:200_000].split(EOT)
    docs = [d + (FIM if i % 3 == 0 else "") + (EOT if i % 5 == 0 else "") for i, d in enumerate(docs)] + ["", FIM]
    if parallel:
        monkeypatch.setattr(fast, "_BATCH_MIN_CHARS", 1000)
        monkeypatch.setattr(fast, "_BATCH_MIN_WORKERS", 2)
        real_pool, used = fast._pool, []
        monkeypatch.setattr(fast, "_pool", lambda *a: used.append(a[1]) or real_pool(*a))
    got = fim.encode_batch(docs, workers=2, **kw)
    if parallel: assert used == [2]
    expected = fim_reference.encode_batch(docs, **(kw or dict(allowed_special="all")))
    assert got == expected
    assert fim.encode_batch(iter(docs), num_threads=2, **kw) == expected
    assert fim.decode_batch(got) == fim_reference.decode_batch(expected) == docs


def test_encode_batch_errors(fim):
    with pytest.raises(ValueError, match="texts\\[1\\]: the text contains the disallowed special token '<\\|fim\\|>' at index 1"):
        fim.encode_batch(["ok", "x<|fim|>"], allowed_special={EOT})
    with pytest.raises(TypeError, match="encode_batch expects str items"):
        fim.encode_batch(["ok", None])
    with pytest.raises(ValueError, match="workers must be a positive int"):
        fim.encode_batch(["ok", "no"], workers=0)
    assert fim.encode_batch([]) == [] and fim.decode_batch([]) == []
    first = {b: i for i, b in fim.vocab.items()}[b"\xe2"]
    assert fim.decode_batch([[first]]) == ["\ufffd"]
    with pytest.raises(UnicodeDecodeError):
        fim.decode_batch([[first]], errors="strict")


# ---------------------------------------------------------------- token_to_id / id_to_token
def test_token_to_id_and_id_to_token_equal_tiktoken(gpt2, reference):
    rng = random.Random(0)
    for i in rng.sample(range(50256), 2000) + [0, 220, 256, 50255]:
        token = reference.decode_single_token_bytes(i)
        assert gpt2.id_to_token(i) == token
        assert gpt2.token_to_id(token) == reference.encode_single_token(token) == i
        try: text = token.decode("utf-8")
        except UnicodeDecodeError: continue
        assert gpt2.token_to_id(text) == i
    assert gpt2.token_to_id(EOT) == reference.encode_single_token(EOT) == 50256
    assert gpt2.id_to_token(50256) == EOT.encode()
    assert gpt2.id_to_token(np.uint16(262)) == b" the"


def test_token_lookups_raise_naming_what_is_missing(gpt2):
    for bad in (" tokenization", b" tokenization", "\ud800"):
        for err in (KeyError, ValueError, UnknownTokenError):
            with pytest.raises(err, match="tokenization|not valid UTF-8"):
                gpt2.token_to_id(bad)
    for err in (KeyError, ValueError):
        with pytest.raises(err, match="unknown token id 50257"):
            gpt2.id_to_token(50257)
    with pytest.raises(TypeError): gpt2.id_to_token("1")
    with pytest.raises(TypeError): gpt2.id_to_token(True)
    with pytest.raises(TypeError): gpt2.token_to_id(5)
    assert str(UnknownTokenError("x y")) == "x y"


def test_token_to_id_special_versus_ordinary(gpt2_files):
    "A str names a special token first; bytes are an ordinary token first."
    hello = Tokenizer(*gpt2_files, special_tokens=[EOT, "hello"])
    assert hello.token_to_id("hello") == 50257 and hello.token_to_id(b"hello") == 31373
    only_special = Tokenizer(_byte_vocab(), [], ["<s>"])
    assert only_special.token_to_id(b"<s>") == only_special.token_to_id("<s>") == 256


# ---------------------------------------------------------------- explain (issue 16.8)
def _scan_reference_steps(tok, data: bytes) -> list[tuple[int, int]]:
    "(rank, byte offset) of each merge, by the O(n^2) definition: lowest rank, leftmost."
    syms, starts, out = [tok.byte_ids[b] for b in data], list(range(len(data))), []
    while len(syms) > 1:
        rs = [tok._ranks.get(a << tok._shift | b) for a, b in zip(syms, syms[1:])]
        live = [r for r in rs if r is not None]
        if not live: break
        r = min(live); k = rs.index(r)
        out.append((r, starts[k]))
        syms[k:k + 2] = [tok.merged[r]]; del starts[k + 1]
    return out


@settings(max_examples=300, deadline=None)
@given(stress_text)
def test_explain_agrees_with_encode_and_the_definition(gpt2, text):
    ex = gpt2.explain(text)
    assert [i for e in ex for i in e.ids] == gpt2.encode(text)
    assert b"".join(e.piece for e in ex) == text.encode("utf-8")
    for e in ex:
        if e.special:
            assert e.steps == [] and len(e.ids) == 1; continue
        assert [(s.rank, s.position) for s in e.steps] == _scan_reference_steps(gpt2, e.piece)
        for s in e.steps:
            assert gpt2.merges[s.rank] == (s.left, s.right)
            assert gpt2.vocab[s.result_id] == s.left + s.right
            assert e.piece[s.position:s.position + len(s.left) + len(s.right)] == s.left + s.right
        steps = gpt2.merge_steps(e.piece)
        assert len(steps) == len(e.steps) + 1 and steps[-1] == [gpt2.vocab[i] for i in e.ids]


def test_explain_shapes_and_format(gpt2):
    ex = gpt2.explain(" lower" + EOT + "x")
    assert all(isinstance(e, PieceExplanation) for e in ex) and all(isinstance(s, MergeStep) for s in ex[0].steps)
    assert ex[1] == PieceExplanation(EOT.encode(), [], [50256], True)
    assert ex[2] == PieceExplanation(b"x", [], [87], False)
    assert ex[0].steps[0] == MergeStep(7, b"e", b"r", 263, 4)
    text = format_explanation(ex)
    assert text.splitlines()[0] == "'␣lower' -> [2793]"  # spaces shown as ␣
    assert "'<|endoftext|>' -> [50256]  (special token)" in text
    assert "#1 rank 7 -> id 263" in text and "'x' -> [87]" in text
    assert format_explanation([]) == ""
    assert "b'\\xe2'" in format_explanation(gpt2.explain("\u20ac"))  # bytes that are not UTF-8 on their own
    assert gpt2.explain("") == []
    with pytest.raises(ValueError, match="disallowed special token"):
        gpt2.explain(EOT, allowed_special=set())
    assert [e.piece for e in gpt2.explain(EOT, disallowed_special=())] == [b"<|", b"endoftext", b"|>"]
    assert [e.piece for e in gpt2.explain("a\ud800")] == [b"a", "\ufffd".encode()]  # repaired as in `encode`


def test_explain_long_piece_uses_the_heap(gpt2):
    "A 20,000-byte pre-token is explained with its merges in O(n log n), consistently with encode."
    ex = gpt2.explain("a" * 20_000)
    assert len(ex) == 1 and ex[0].ids == gpt2.encode("a" * 20_000)
    assert len(ex[0].steps) == 20_000 - len(ex[0].ids)


# ---------------------------------------------------------------- sparse ids (issue 16.3)
def _sparse_tokenizer(top=200018):
    vocab = {**_byte_vocab(), 100_000: b"ab", 150_000: b"abc", 7: b"\x07"}
    return Tokenizer(vocab, [(b"a", b"b"), (b"ab", b"c")], {"<|endoftext|>": 199999, "<|endofprompt|>": top})


def test_sparse_ids_encode_decode_explain_and_lookups(tmp_path):
    tok = _sparse_tokenizer()
    text = "abcab<|endofprompt|>ab c<|endoftext|>"
    ids = tok.encode(text)
    assert ids == [150_000, 100_000, 200018, 100_000, 32, 99, 199999]
    assert tok.decode(ids) == text and tok.vocab_size == 260
    assert [i for e in tok.explain(text) for i in e.ids] == ids
    assert tok.token_to_id(b"abc") == 150_000 and tok.id_to_token(200018) == b"<|endofprompt|>"
    with pytest.raises(ValueError, match="unknown token id 1000"): tok.decode([1000])
    again = pickle.loads(pickle.dumps(tok))
    assert again.encode(text) == ids
    (tmp_path / "t.txt").write_text(text * 100, encoding="utf-8")
    arr = tok.encode_file(tmp_path / "t.txt", tmp_path / "t.npy", workers=1, progress=False)
    assert arr.dtype == np.uint32 and arr.tolist() == ids * 100
    assert list(tok.encode_iterable([text[:7], text[7:]])) == ids


def test_sparse_ids_cost_nothing_per_id():
    "A special token at id 10**12: building and using the tokenizer allocates nothing per id up to it."
    tracemalloc.start()
    try:
        tok = _sparse_tokenizer(top=10**12)
        assert tok.encode("ab<|endofprompt|>") == [100_000, 10**12]
        assert tok.decode([10**12]) == "<|endofprompt|>"
        assert tok.token_to_id("<|endofprompt|>") == 10**12
        _, peak = tracemalloc.get_traced_memory()
    finally: tracemalloc.stop()
    assert peak < 4 * 2**20, f"{peak / 2**20:.1f} MiB"
    assert fast._resolve_dtype(tok, None) == np.uint64


# ---------------------------------------------------------------- encode_file's temporary file (issue 14.3)
def test_encode_file_does_not_follow_a_planted_link_and_cleans_up(gpt2, tmp_path):
    (tmp_path / "in.txt").write_text("hello world " * 100, encoding="utf-8")
    victim = tmp_path / "victim.txt"; victim.write_text("keep me")
    for name in ("out.npy.partial", "out.bin.partial"):
        (tmp_path / name).symlink_to(victim)
    for out in ("out.npy", "out.bin"):
        arr = gpt2.encode_file(tmp_path / "in.txt", tmp_path / out, workers=1, progress=False)
        assert arr.tolist() == gpt2.encode("hello world " * 100)
        assert not (tmp_path / out).is_symlink()
    assert victim.read_text() == "keep me"
    (tmp_path / "bad.txt").write_bytes(b"fine " * 10 + b"\xff")
    for workers in (1, 2):
        with pytest.raises(ValueError, match="invalid UTF-8"):
            gpt2.encode_file(tmp_path / "bad.txt", tmp_path / "fail.bin", workers=workers, progress=False)
    assert not (tmp_path / "fail.bin").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []


def test_encode_file_temporary_name_follows_the_shared_rule(gpt2, tmp_path, monkeypatch):
    "The temporary file is `.NAME.PID.RANDOM.tmp` beside the target (artifacts' TEMP_NAME), seen mid-write."
    from bpe_nb.artifacts import TEMP_NAME
    (tmp_path / "in.txt").write_text("hello world " * 100, encoding="utf-8")
    seen = []
    real = fast._encoded_chunks
    def spy(*a, **k):
        seen.extend(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp"))
        yield from real(*a, **k)
    monkeypatch.setattr(fast, "_encoded_chunks", spy)
    gpt2.encode_file(tmp_path / "in.txt", tmp_path / "ids.bin", workers=1, progress=False)
    assert len(seen) == 1 and TEMP_NAME.fullmatch(seen[0]) and seen[0].startswith(".ids.bin.")


# ---------------------------------------------------------------- real cl100k and o200k against tiktoken (16.4, 16.7)


REAL_WORDS = O200K_WORDS + ["<|endofprompt|>", "<|fim_prefix|>", "<|endoftext|>", "\u00a0", "\u3000x", "Ⅻ", "x\u0301\u0302"]
real_text = st.lists(st.one_of(st.sampled_from(REAL_WORDS), st.text(assigned, max_size=6)), max_size=30).map("".join)


@settings(max_examples=150, deadline=None)
@given(real_text, st.sampled_from(RULES[1:] + [dict(allowed_special={"<|endofprompt|>"})]))
def test_real_encodings_equal_tiktoken_under_every_rule(real_pair, text, kw):
    ours, reference = real_pair
    assert _outcome(lambda: ours.encode(text, **kw)) == _outcome(lambda: reference.encode(text, **kw))
    assert ours.encode_ordinary(text) == reference.encode_ordinary(text)
    assert ours.encode(text) == reference.encode(text, allowed_special="all")  # our default


@settings(max_examples=100, deadline=None)
@given(real_text, st.lists(st.integers(0, 200), max_size=10), st.integers(1, 30))
def test_real_encodings_stream_exactly(real_pair, text, cuts, block):
    ours, reference = real_pair
    saved = fast._STREAM_BLOCK
    fast._STREAM_BLOCK = block
    try:
        got = list(ours.encode_iterable(_split(text, cuts)))
        ordinary = list(ours.encode_iterable(_split(text, cuts), disallowed_special=()))
    finally: fast._STREAM_BLOCK = saved
    assert got == reference.encode(text, allowed_special="all")
    assert ordinary == reference.encode(text, disallowed_special=())


def test_real_encodings_repair_surrogates_as_tiktoken(real_pair):
    ours, reference = real_pair
    texts = ["a\udfffb", "x\ud83d", "\ud83d\ude00", "\ude00\ud83d", "say \ud83d\ude00 \udfff<|endoftext|>\ud835\udc00BC"]
    if ours.pattern == CL100K_PATTERN:  # the values the reviewer measured with tiktoken
        assert ours.encode("a\udfffb") == [64, 5809, 65] and ours.encode_ordinary("x\ud83d") == [87, 5809]
    for text in texts:
        assert ours.encode(text) == reference.encode(text, allowed_special="all")
        assert ours.encode_ordinary(text) == reference.encode_ordinary(text)
        assert ours.encode(text, disallowed_special=()) == reference.encode(text, disallowed_special=())
        assert ours.encode_batch([text], allowed_special="all") == reference.encode_batch([text], allowed_special="all")
        for cut in range(len(text) + 1):
            assert list(ours.encode_iterable([text[:cut], text[cut:]])) == reference.encode(text, allowed_special="all")


def test_real_encodings_sample_batches_and_lookups(real_pair):
    ours, reference = real_pair
    text = BUNDLED.read_text(encoding="utf-8")[:300_000]
    assert ours.encode(text) == reference.encode(text, allowed_special="all")
    docs = text.split(EOT)
    assert ours.encode_batch(docs, disallowed_special=()) == reference.encode_batch(docs, disallowed_special=())
    assert ours.decode_batch(reference.encode_batch(docs)) == docs
    for name, i in ours.special_tokens.items():
        assert ours.token_to_id(name) == reference.encode_single_token(name) == i
        assert ours.id_to_token(i) == reference.decode_single_token_bytes(i)
    for i in random.Random(1).sample(sorted(reference._mergeable_ranks.values()), 500):
        token = reference.decode_single_token_bytes(i)
        assert ours.id_to_token(i) == token and ours.token_to_id(token) == i
    assert max(ours.vocab) == reference.max_token_value
    assert ours.vocab_size == len(reference._mergeable_ranks) + len(reference._special_tokens)  # gaps are not ids
    assert fast._resolve_dtype(ours, None) == np.uint32


# ---------------------------------------------------------------- encode_iterable under tiktoken's rules
@settings(max_examples=300, deadline=None)
@given(special_text, st.lists(st.integers(0, 200), max_size=12), st.integers(1, 30), st.integers(0, len(RULES) - 1))
def test_encode_iterable_follows_the_rules_of_encode(fim, text, cuts, block, which):
    "Same ids as `encode` with the same rules, or the same ValueError (naming the same token at the same index)."
    kw = RULES[which]
    saved = fast._STREAM_BLOCK
    fast._STREAM_BLOCK = block
    try:
        try: got = list(fim.encode_iterable(_split(text, cuts), **kw))
        except ValueError as e: got = str(e)
    finally: fast._STREAM_BLOCK = saved
    try: expected = fim.encode(text, **kw)
    except ValueError as e: expected = str(e)
    assert got == expected


def test_encode_iterable_finds_a_disallowed_token_across_seams(fim, monkeypatch):
    monkeypatch.setattr(fast, "_STREAM_BLOCK", 3)
    text = "hello there " * 20 + EOT + " bye"
    at = text.index(EOT)
    for cut in range(at - 2, at + len(EOT) + 2):
        with pytest.raises(ValueError, match=rf"disallowed special token '<\|endoftext\|>' at index {at}:"):
            list(fim.encode_iterable([text[:cut], text[cut:]], allowed_special={FIM}))
    assert list(fim.encode_iterable([text[:at + 3], text[at + 3:]], disallowed_special=())) == fim.encode_ordinary(text)
    assert list(fim.encode_iterable(iter(text), allowed_special="all")) == fim.encode(text)


# ---------------------------------------------------------------- the bulk path (long pure-ASCII texts, GPT-2's pattern)
import threading

from bpe_nb.array_pretokenize import gpt2_starts
from bpe_nb.fast_encoding import _KeyTable, _Rows, _piece_keys
from bpe_nb.pretokenize import GPT2_ASCII, compile_pattern

GPT2_RX = compile_pattern(GPT2_PATTERN)
ASCII_BITS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "''", "'", " '", "\n'", "'l", "'v", "'r", " ", "  ",
              "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\x0b", "\x0c", "\x1c", "\x1f", "\x00", "\x7f", "a", "ab",
              " the", "Hello", "0", "42", "3.14", "!!", "?!", "...", "(", ")", "_", "-"]
ascii_text = st.lists(st.one_of(st.sampled_from(ASCII_BITS), st.text(st.characters(max_codepoint=127), max_size=6)),
                      max_size=30).map("".join)


def _bulk_pieces(texts: list[str]) -> list[str]:
    joined = "".join(texts)
    edge = np.zeros(len(joined) + 1, bool)
    edge[np.cumsum([0, *map(len, texts)])] = True
    s = gpt2_starts(np.frombuffer(joined.encode("ascii"), np.uint8), edge).tolist()
    return [joined[a:b] for a, b in zip(s, s[1:])]


@settings(max_examples=1500, deadline=None)
@given(st.lists(ascii_text, min_size=1, max_size=4))
def test_bulk_pre_tokens_equal_the_regex_text_by_text(texts):
    "`gpt2_starts` on texts laid out in one array: each text's pre-tokens as `regex` (and `re`) find them."
    expected = [p for t in texts for p in GPT2_RX.findall(t)]
    assert _bulk_pieces(texts) == expected == [p for t in texts for p in GPT2_ASCII.findall(t)]


def test_bulk_pre_tokens_on_the_shared_files():
    for path in sorted(SHARED.rglob("*.txt")) + [BUNDLED, CS336 / "corpus.en"]:
        texts = [t for t in path.read_bytes().decode("utf-8").split(EOT) if t.isascii()]
        assert _bulk_pieces(texts) == [p for t in texts for p in GPT2_RX.findall(t)], path.name


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 60), st.integers(1, 4)), min_size=1, max_size=300), st.integers(2, 8))
def test_key_table_equals_a_dict(keys, bits):
    "`intern` and `get` against a dict, repeats and growth included; new keys numbered in the order returned."
    table, model = _KeyTable(bits), {}
    for chunk in (keys[: len(keys) // 2], keys[len(keys) // 2:]):
        if not chunk: continue
        k1, k2 = (np.array(c, np.uint64) for c in zip(*chunk))
        rows, added = table.intern(k1, k2, len(model))
        for i in added.tolist(): model[chunk[i]] = len(model)
        assert rows.tolist() == [model[k] for k in chunk]
        assert table.get(k1, k2).tolist() == rows.tolist()
    assert table.get(np.array([99], np.uint64), np.array([1], np.uint64)).tolist() == [-1]
    assert table.n == len(model) and 2 * table.n <= 1 << table.bits


def test_piece_keys_are_exact():
    words = [w.encode() for w in ["a", "\x00", "\x00\x00", "ab", "abcdefgh", "abcdefghi", "abcdefghijklmno", "b"]]
    b = np.frombuffer(b"".join(words), np.uint8)
    lens = np.array([len(w) for w in words])
    k1, k2 = _piece_keys(b, np.cumsum(lens) - lens, lens)
    assert len(set(zip(k1.tolist(), k2.tolist()))) == len(words)  # "\x00" and "\x00\x00" differ by their length
    assert (k2 & 0xFF).tolist() == lens.tolist()


def _padded(words: list[str]) -> tuple[np.ndarray, np.ndarray]:
    "ASCII words as `_merge_many` takes them: their bytes in rows of 15, and their lengths."
    data = np.zeros((len(words), 15), np.uint8)
    for i, w in enumerate(words): data[i, :len(w)] = list(w.encode())
    return data, np.array(list(map(len, words)))


@settings(max_examples=200, deadline=None)
@given(merge_lists(), st.lists(st.text(alphabet="abc", min_size=1, max_size=15), min_size=1, max_size=40))
def test_merge_many_equals_the_scan_on_any_merge_list(tm, words):
    tok = _merge_list_tokenizer(tm)
    assert tok._merge_many(*_padded(words)) == [tok._encode_piece(w) for w in words]


def test_merge_many_equals_the_scan_on_gpt2(gpt2):
    text = BUNDLED.read_text(encoding="utf-8")
    words = sorted({p for p in GPT2_RX.findall(text) if p.isascii() and len(p) <= 15})
    assert gpt2._merge_many(*_padded(words)) == [gpt2._encode_piece(w) for w in words]


BULK_EVERYWHERE = {"_BULK_MIN": 1, "_ARRAY_MIN": 1, "_BULK_BLOCK": 64, "_MANY_MIN": 2}  # every call in bulk, small blocks, misses merged together


@pytest.fixture
def bulk_everywhere(monkeypatch):
    for name, value in BULK_EVERYWHERE.items(): monkeypatch.setattr(fast, name, value)


@settings(max_examples=800, deadline=None)
@given(stress_text)
def test_bulk_path_equals_tiktoken_on_generated_strings(gpt2, reference, text):
    with pytest.MonkeyPatch.context() as mp:
        for name, value in BULK_EVERYWHERE.items(): mp.setattr(fast, name, value)
        ids = gpt2.encode(text)
        assert gpt2.encode_ordinary(text) == reference.encode_ordinary(text)
    assert ids == reference.encode(text, allowed_special="all")


@pytest.mark.parametrize("path,copies", [(BUNDLED, 1), (CS336 / "corpus.en", 1), (CS336 / "tinystories_sample.txt", 20)])
def test_bulk_path_on_real_text_equals_tiktoken_cold_and_warm(gpt2_files, reference, path, copies, monkeypatch):
    "Real text, mostly ASCII with some characters outside it, through the bulk path: tiktoken's ids, cold and warm."
    text = path.read_bytes().decode("utf-8") * copies
    tok = Tokenizer(*gpt2_files, special_tokens=[EOT])
    calls = []
    real = Tokenizer._encode_bulk
    monkeypatch.setattr(Tokenizer, "_encode_bulk", lambda self, items, out: calls.append(len(items)) or real(self, items, out))
    expected = reference.encode(text, allowed_special="all")
    assert tok.encode(text) == expected  # cold
    assert calls, "the bulk path was not taken"
    assert tok.encode(text) == expected  # warm: the state kept from the first call
    monkeypatch.setattr(fast, "_MANY_MIN", 10**9)  # misses one by one through the cache
    assert Tokenizer(*gpt2_files, special_tokens=[EOT]).encode(text) == expected


def test_bulk_path_is_taken_only_where_it_applies(gpt2_files, monkeypatch):
    calls = []
    real = Tokenizer._encode_bulk
    monkeypatch.setattr(Tokenizer, "_encode_bulk", lambda self, items, out: calls.append(1) or real(self, items, out))
    long_ascii = "It rained all day and we stayed in. " * 2000
    Tokenizer(*gpt2_files).encode(long_ascii[:1000])  # short
    Tokenizer(*gpt2_files, pattern=R50K_PATTERN).encode(long_ascii)  # a pattern without array rules
    Tokenizer(*gpt2_files).encode("café " * 3000)  # short: not ASCII, so `_ARRAY_MIN` decides
    assert calls == []
    Tokenizer(*gpt2_files).encode(long_ascii)
    assert calls == [1]
    Tokenizer(*gpt2_files, pattern=CL100K_PATTERN).encode("café " * 20_000)  # array rules: any text (04a)
    assert calls == [1, 1]
    Tokenizer(*gpt2_files).encode("café 中文 " * 20_000)  # GPT-2's pattern: any text too (chapter 00a)
    assert calls == [1, 1, 1]


def test_bulk_path_with_sparse_and_huge_ids(monkeypatch):
    "Ids with gaps take the bulk path and stay exact; so does a special token's id of 2**31; an ordinary one turns it off."
    monkeypatch.setattr(fast, "_BULK_MIN", 1); monkeypatch.setattr(fast, "_MANY_MIN", 1)
    text = "abcab<|endofprompt|>ab c<|endoftext|>" * 50
    expected = [150_000, 100_000, 200018, 100_000, 32, 99, 199999] * 50
    assert _sparse_tokenizer()._bulk_ok and _sparse_tokenizer().encode(text) == expected
    big_special = _sparse_tokenizer(top=2**31)
    assert big_special._bulk_ok  # special ids only go into int64 rows
    assert big_special.encode(text) == [2**31 if i == 200018 else i for i in expected]
    vocab = {**_byte_vocab(), 2**31: b"ab", 150_000: b"abc"}
    big_token = Tokenizer(vocab, [(b"a", b"b"), (b"ab", b"c")])
    assert not big_token._bulk_ok  # packed pairs of such ids do not fit 64 bits
    assert big_token.encode("abcab" * 10) == [150_000, 2**31] * 10


def test_bulk_path_repairs_surrogates_and_takes_special_rules(gpt2, reference, bulk_everywhere):
    text = ("It rained. " * 30) + "a\udfffb \ud83d\ude00" + (" We stayed in." * 30) + EOT + "x" * 40
    repaired = encoder.replace_surrogates(text)
    assert gpt2.encode(text) == reference.encode(repaired, allowed_special="all")
    assert (gpt2.encode(text, allowed_special=set(), disallowed_special=())
            == reference.encode(repaired, allowed_special=set(), disallowed_special=()))
    with pytest.raises(ValueError, match="disallowed"):
        gpt2.encode(text, disallowed_special="all")


def test_bulk_state_is_bounded_and_per_thread(gpt2_files):
    "The state is dropped at the end of a call when it holds more than `cache_size` pre-tokens; threads have their own."
    text = BUNDLED.read_text(encoding="utf-8")
    tok = Tokenizer(*gpt2_files, special_tokens=[EOT])
    expected = tok.encode(text)
    assert 1000 < tok._bulk_local.state.rows.n <= tok._cache_size  # kept for the next call
    small = Tokenizer(*gpt2_files, special_tokens=[EOT], cache_size=1000)
    assert small.encode(text) == expected and small._bulk_local.state is None  # it held more than 1000
    none = Tokenizer(*gpt2_files, special_tokens=[EOT], cache_size=0)
    assert none.encode(text) == expected and len(none._cache) == 0 and none._bulk_local.state is None
    shared, results = Tokenizer(*gpt2_files, special_tokens=[EOT]), {}
    parts = [text[:500_000], text[500_000:]]
    def work(k):
        for _ in range(3): results[k] = shared.encode(parts[k])
    threads = [threading.Thread(target=work, args=(k,)) for k in (0, 1)]
    for t in threads: t.start()
    for t in threads: t.join()
    assert results[0] == tok.encode(parts[0]) and results[1] == tok.encode(parts[1])


def test_bulk_path_in_streams_and_files(gpt2, tmp_path, monkeypatch):
    "encode_iterable and encode_file reach the bulk path with long blocks and agree with encode."
    text = BUNDLED.read_text(encoding="utf-8")
    expected = gpt2.encode(text)
    monkeypatch.setattr(fast, "_STREAM_BLOCK", 1 << 17)
    assert list(gpt2.encode_iterable(text[i:i + 5000] for i in range(0, len(text), 5000))) == expected
    path = tmp_path / "t.txt"; path.write_bytes(text.encode("utf-8"))
    assert gpt2.encode_file(path, tmp_path / "t.npy", workers=1, progress=False).tolist() == expected


def test_bulk_state_is_dropped_when_a_call_is_cut_short(gpt2_files, reference, monkeypatch):
    "An interrupt inside the bulk path (here while merging new pre-tokens) leaves no half-made state behind."
    text = BUNDLED.read_text(encoding="utf-8")
    tok = Tokenizer(*gpt2_files, special_tokens=[EOT])
    real = Tokenizer._merge_many
    def interrupted(self, data, lens): raise KeyboardInterrupt
    monkeypatch.setattr(Tokenizer, "_merge_many", interrupted)
    with pytest.raises(KeyboardInterrupt): tok.encode(text)
    monkeypatch.setattr(Tokenizer, "_merge_many", real)
    assert tok.encode(text) == reference.encode(text, allowed_special="all")


def test_a_flooded_table_falls_back_to_the_regex_path(gpt2_files, reference, monkeypatch):
    "Keys that all collide (multipliers of 0 here) end in `_Flooded` after `_MAX_ROUNDS` rounds, and the regex path."
    text = BUNDLED.read_text(encoding="utf-8")
    monkeypatch.setattr(fast, "_odd64", lambda: np.uint64(0))  # every key in slot 0, for the rank table too
    tok = Tokenizer(*gpt2_files, special_tokens=[EOT])
    fell_back = []
    real = Tokenizer._encode_ordinary
    monkeypatch.setattr(Tokenizer, "_encode_ordinary", lambda self, t, out: fell_back.append(len(t)) or real(self, t, out))
    assert tok.encode(text) == reference.encode(text, allowed_special="all")
    assert sum(fell_back) > len(text) // 2 and tok._bulk_local.state is None  # nothing flooded is kept


def test_keys_that_differ_only_in_their_top_byte_spread_over_the_slots():
    "The 256 one-byte tokens (keys that differ only in the top byte of `k1`) and 256 nine-byte ones that differ only in the top byte of `k2`: no slot gets more than a few of them under any of 3,000 random tables (with one fold and multiply, some multipliers put 30 in one slot, and a tokenizer's own tokens then flooded its table about once in 100,000 loads)."
    from bpe_nb.fast_encoding import _KeyTable, _piece_keys
    one = np.arange(256, dtype=np.uint8)
    k1, k2 = _piece_keys(one, np.arange(256), np.ones(256, np.int64))
    nine = np.frombuffer(b"".join(b"abcdefgh" + bytes([b]) for b in range(256)), np.uint8)
    n1, n2 = _piece_keys(nine, np.arange(256) * 9, np.full(256, 9))
    assert len(set(zip(n1.tolist(), n2.tolist()))) == 256 and len(set(n1.tolist())) == 1  # they differ in `k2` only
    worst = 0
    for _ in range(3000):
        t = _KeyTable(12)
        worst = max(worst, np.bincount(t._slots(k1, k2)).max(), np.bincount(t._slots(n1, n2)).max())
    assert worst <= 9, worst
    t = _KeyTable(12); t.mix = (np.uint64(10207572236860351097), np.uint64(663338229790153531), np.uint64(14369837365462628621), t.mix[3])
    assert np.bincount(t._slots(k1, k2)).max() <= 9  # the multipliers that flooded a table of random ranks with one fold (31 one-byte tokens in a slot)


def test_a_tokenizer_of_ranks_draws_its_table_again_when_its_own_tokens_flood_it(monkeypatch):
    "A table whose multipliers crowd the tokens' own keys is drawn again; keys that collide in every table are refused, not a hang."
    from bpe_nb.interop import RanksTokenizer
    from bpe_nb.pretokenize import CL100K_PATTERN
    ranks = {bytes([i]): i for i in range(256)} | {b"ab": 256, b"abc" * 6: 257}
    real, draws = fast._odd64, []
    monkeypatch.setattr(fast, "_odd64", lambda: draws.append(1) or (np.uint64(0) if len(draws) <= 4 else real()))  # the first table: all in slot 0
    tok = RanksTokenizer(ranks, {}, CL100K_PATTERN)
    assert len(draws) >= 8 and tok.encode("abcabcabcabcabcabc xab") == [257, 32, 120, 256]
    monkeypatch.setattr(fast, "_odd64", lambda: np.uint64(0))  # every table
    with pytest.raises(ValueError, match="collide"): RanksTokenizer(ranks, {}, CL100K_PATTERN)


def test_a_long_stretch_without_a_safe_cut_takes_the_regex_path(gpt2, reference, monkeypatch):
    "Minified text (no space after a non-space for megabytes) would make huge arrays: the regex path takes it."
    text = "a." * 600_000 + " the end " * 10_000
    calls = []
    real = Tokenizer._encode_bulk
    monkeypatch.setattr(Tokenizer, "_encode_bulk", lambda self, items, out: calls.append(sum(
        len(x) for x in items if type(x) is str)) or real(self, items, out))
    assert gpt2.encode(text) == reference.encode(text)
    assert calls and max(calls) <= fast._BULK_BLOCK + 10  # only " the end " * 10_000 went in bulk


# ---------------------------------------------------------------- issue 25: the readable encoder, its checker, the speed-ups
import subprocess
import sys

from bpe_nb.encoder import check_encoder, encode_pretoken, replay_steps


def _greedy_ids(data, byte_ids, ranks, merged):
    "The wrong encoder: merge the leftmost pair that has a rank, again and again."
    ids = [byte_ids[b] for b in data]
    i = 0
    while i < len(ids) - 1:
        r = ranks.get((ids[i], ids[i + 1]))
        if r is None: i += 1
        else: ids[i:i + 2] = [merged[r]]; i = 0
    return ids


def test_check_encoder_passes_the_library_and_catches_greedy(gpt2):
    assert check_encoder(encode_pretoken, gpt2, trials=50) > 1000
    with pytest.raises(AssertionError, match=r"worked example.*pre-token b'abc': expected \[97, 256\], got \[257, 99\]"):
        check_encoder(_greedy_ids)
    with pytest.raises(AssertionError, match="expected"):
        check_encoder(lambda data, byte_ids, ranks, merged: [byte_ids[b] for b in data])  # no merges at all


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=80), st.text(alphabet="aeinorst thle\n'", max_size=120).map(str.encode)))
def test_fast_loops_equal_the_readable_encoder(gpt2, data):
    "`_merge_scan` and `_merge_heap` (chapter 04a) give the ids of `encode_pretoken` (chapter 04), on GPT-2's tables."
    readable = encode_pretoken(data, gpt2.byte_ids, gpt2.ranks, gpt2.merged)
    ids = [gpt2.byte_ids[b] for b in data]
    assert _merge_scan(list(ids), gpt2._ranks, gpt2.merged, gpt2._shift) == readable
    assert _merge_heap(list(ids), gpt2._ranks, gpt2.merged, gpt2._shift) == readable
    assert gpt2._trace(data) == replay_steps(data, gpt2.byte_ids, gpt2.ranks, gpt2.merged)  # the heap's trace too


def test_the_encoder_module_is_plain_python():
    code = ("import sys, bpe_nb.encoder; print(sorted(m for m in ('numpy', 'bpe_nb.chunking', 'bpe_nb.artifacts', "
            "'bpe_nb.fast_encoding', 'bpe_nb.interop') if m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"
    src = Path(encoder.__file__).read_text(encoding="utf-8")
    assert not re.search(r"^\s*(import numpy|from \.?(bpe_nb\.)?(chunking|artifacts|fast_encoding|interop) import)", src, re.M)


def test_every_tokenizer_is_fast_without_an_extra_import():
    "With the package's speed-ups registered, `Tokenizer()` loads them: the methods of chapter 04a are there."
    code = ("from bpe_nb.encoder import Tokenizer; t = Tokenizer({i: bytes([i]) for i in range(256)}, []); "
            "print(all(hasattr(t, m) for m in ('encode_file', 'encode_iterable', 'encode_batch', 'decode_batch', '_cache')))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "True"


def test_show_colours_the_tokens(gpt2):
    text = "Hello world  €<|endoftext|>"
    view = gpt2.show(text)
    assert len(view) == len(gpt2.encode(text))
    assert 'class="bpe-tokens"' in view.html and 'title="id 15496' in view.html and "\x1b[" in view.ansi()
    assert len(gpt2.show(text, disallowed_special=())) == len(gpt2.encode_ordinary(text))


def test_show_merges_follows_merge_steps(gpt2):
    view = gpt2.show_merges(" lower")
    assert len(view.rows) == len(gpt2.merge_steps(" lower")) == 6
    assert str(view).splitlines()[-1].endswith("⟦␣lower⟧")
