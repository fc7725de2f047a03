"""Counting pre-tokens with the array pre-tokenizer (chapter 00a's `array_counts`, chapter 03's `_Tally`) against the
regex: the same pre-tokens, the same counts and the same order (first occurrence, as `Counter(regex.findall(...))`)
as chapter 00's `count_pretokens`, for every pattern of `ARRAY_PATTERNS`, on random text of every script, on the
fixtures, and through `count_pretokens_file` with one and two workers."""
import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bpe_nb.array_pretokenize as ap
from bpe_nb import chunking
from bpe_nb.array_pretokenize import ARRAY_PATTERNS, array_counts
from bpe_nb.chunking import _Tally, count_documents, count_pretokens_file
from bpe_nb.pretokenize import (CL100K_PATTERN, GPT2_PATTERN, LLAMA3_PATTERN, O200K_PATTERN, TEKKEN_PATTERN,
                                count_pretokens)

EOT = "<|endoftext|>"
PATTERNS = [GPT2_PATTERN, CL100K_PATTERN, O200K_PATTERN, LLAMA3_PATTERN, TEKKEN_PATTERN]
IDS = ["gpt2", "cl100k", "o200k", "llama3", "tekken"]

# the characters the rules single out, and some of every script (marks, digits, letters without case, wide ones)
SPECIAL = list("aAbZsStTdDmMlLvVrReE'  \t\n\r/!.,;-_0123456789") + [
    "é", "É", "ß", "ǅ", "ʰ", "中", "文", "の", "한", "\u0301", "\u0903", "\u00a0", "\u3000", "\x85", "\u2028", "²", "½",
    "Ⅻ", "ſ", "\x1c", "\x1f", "\x0b", "\x0c", "—", "“", "’", "🙂", "\U0001d400", "\u0660", "\ufeff", "\r\n", "   ",
    "don't", "I'LL", " the", "x" * 17, " " * 20, "αβγ" * 6, EOT]
chars = st.one_of(st.sampled_from([c for c in SPECIAL if len(c) == 1]), st.characters(blacklist_categories=("Cs",)))
texts = st.lists(st.one_of(st.sampled_from(SPECIAL), st.text(chars, max_size=12)), max_size=40).map("".join)


def array_counter(text: str, pattern: str, specials=(EOT,)) -> Counter:
    "`array_counts` of `text` split at the special tokens, as a Counter (in its order)."
    parts = [text]
    for s in specials: parts = [p for t in parts for p in t.split(s)]
    joined = "".join(parts)
    edge = np.zeros(len(joined) + 1, bool)
    edge[np.cumsum([0, *map(len, parts)])] = True
    out = Counter()
    dict.update(out, zip(*array_counts(joined, edge, pattern)))
    return out


def same(got: Counter, want: Counter):
    "Equal as ordered lists of (pre-token, count): the order of first occurrence too."
    assert list(got.items()) == list(want.items())


def test_the_array_patterns():
    assert ARRAY_PATTERNS == set(PATTERNS)


@pytest.mark.parametrize("pattern", PATTERNS, ids=IDS)
@settings(max_examples=250)
@given(text=texts)
def test_array_counts_equal_count_pretokens(pattern, text):
    same(array_counter(text, pattern), count_pretokens(text, [EOT], pattern))


@pytest.mark.parametrize("pattern", PATTERNS, ids=IDS)
def test_array_counts_dense_random(pattern):
    "Many short texts over the singled-out characters only, cut into several blocks of one tally."
    rng = random.Random(11)
    for _ in range(300):
        text = "".join(rng.choices(SPECIAL, k=rng.randint(0, 30)))
        same(array_counter(text, pattern), count_pretokens(text, [EOT], pattern))
        tally = _Tally([EOT], pattern)  # one block per document: the order holds across blocks
        assert tally.array
        for block in text.split(EOT): tally.add(block + EOT)
        same(tally.result(), count_pretokens(text, [EOT], pattern))


def test_a_hash_collision_changes_nothing(monkeypatch, tinystories_sample):
    "Every name hashed to one value: `_distinct` sorts by the names themselves, the counts stay exact."
    text = tinystories_sample.read_text(encoding="utf-8")[:100_000]
    monkeypatch.setattr(ap, "_MIX", (np.uint64(0), np.uint64(0)))
    for pattern in (GPT2_PATTERN, O200K_PATTERN):
        same(array_counter(text, pattern), count_pretokens(text, [EOT], pattern))


def test_names_tell_every_short_piece_apart():
    "Pre-tokens of 1 to 15 bytes that differ only in one byte, or only in length (trailing zero bytes): distinct names."
    pieces = [bytes([a]) * k for a in (0, 1, 32, 255) for k in range(1, 16)] + [b"ab\x00", b"ab", b"a\x00b", b"\x00"]
    b = np.frombuffer(b"".join(pieces), np.uint8)
    lens = np.array(list(map(len, pieces)))
    k1, k2 = ap._short_keys(b, np.cumsum(lens) - lens, lens)
    assert len(set(zip(k1.tolist(), k2.tolist()))) == len(set(pieces))


@pytest.mark.parametrize("pattern", PATTERNS, ids=IDS)
def test_the_fixtures(pattern, test_data, tinystories_sample):
    "The shared fixtures and the bundled sample, in blocks as chapter 03 reads them: equal to the regex, in order."
    for path in [tinystories_sample, *sorted((test_data / "cs336").glob("*.txt")), test_data / "cs336" / "corpus.en"]:
        text = path.read_bytes().decode("utf-8")
        want = count_pretokens(text, [EOT], pattern)
        same(array_counter(text, pattern), want)
        tally, docs = _Tally([EOT], pattern), text.split(EOT)  # one block per document
        for k, d in enumerate(docs): tally.add(d + (EOT if k < len(docs) - 1 else ""))
        same(tally.result(), want)


@pytest.fixture(scope="module")
def mixed_file(tmp_path_factory, tinystories_sample):
    "A file of mixed scripts and specials, a little over 2 MiB: ranges and blocks for two workers."
    rng = random.Random(3)
    story = tinystories_sample.read_text(encoding="utf-8")[:600_000]
    extra = "".join(rng.choices(SPECIAL[:-1], k=60_000))
    text = story + EOT + extra + " Größe 12345 中文没有空格，日本語。\n\n" * 2_000 + EOT + story[::-1]
    path = tmp_path_factory.mktemp("count") / "mixed.txt"
    path.write_text(text, encoding="utf-8", newline="")
    return path, text


@pytest.mark.parametrize("pattern", PATTERNS, ids=IDS)
@pytest.mark.parametrize("workers", [1, 2])
def test_count_pretokens_file(pattern, workers, mixed_file, monkeypatch):
    "Through `count_pretokens_file` (small ranges and blocks): the array path equals the regex path and `count_pretokens`."
    path, text = mixed_file
    want = count_pretokens(text, [EOT], pattern)
    kw = dict(workers=workers, pattern=pattern, block_size=1 << 16, min_chunk_size=1 << 19)
    same(count_pretokens_file(path, [EOT], **kw), want)
    monkeypatch.setattr(chunking, "ARRAY_PATTERNS", frozenset())  # the regex path (in this process: workers=1)
    if workers == 1: same(count_pretokens_file(path, [EOT], **kw), want)


@pytest.mark.parametrize("pattern", [GPT2_PATTERN, O200K_PATTERN], ids=["gpt2", "o200k"])
def test_count_documents(pattern, mixed_file):
    "Documents streamed from an iterable, counted in chunks by the array path: equal to the whole text's counts."
    _, text = mixed_file
    docs = text.split(EOT)
    counts, record = count_documents(docs, [EOT], pattern=pattern, workers=1, chunk_size=1 << 16)
    same(counts, count_pretokens(text, [EOT], pattern))
    assert record["documents"] == len(docs)


def test_the_regex_path_stays_for_other_patterns():
    "A pattern the arrays do not know is counted by the regex (and checked for coverage), as before."
    pattern = r"\w+|\s+|[^\w\s]+"
    tally = _Tally([EOT], pattern)
    assert not tally.array and not _Tally([EOT], GPT2_PATTERN, array=False).array
    tally.add("ab  cd!!" + EOT + "ab")
    same(tally.result(), count_pretokens("ab  cd!!" + EOT + "ab", [EOT], pattern))
    with pytest.raises(ValueError, match="does not know the pattern"):
        ap.pretoken_starts("ab", np.array([True, False, True]), pattern)
