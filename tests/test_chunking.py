"Parallel chunked counting: every cut is safe, counts equal the whole-text count for any workers and executor."
import hashlib
import io
import random
import re
import sys
import time
import warnings
from collections import Counter
from concurrent.futures import Executor, Future, ThreadPoolExecutor

import pytest
import regex
from hypothesis import HealthCheck, given, settings, strategies as st

import bpe_nb.chunking as chunking
from bpe_nb.chunking import (CountProgress, MissingSpecialTokenWarning, Block, _Cutter, _Tally, _count_range,
                             count_pretokens_file, file_ranges, find_chunk_boundaries, read_blocks)
from bpe_nb.training import train_bpe
from bpe_nb.naive import EarlyStopWarning, MergeProgress
from bpe_nb.pretokenize import (CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN, PROVEN_PATTERNS, R50K_PATTERN,
                                count_pretokens, pretokenize)
from bpe_nb.pretokenize import LLAMA3_PATTERN, TEKKEN_PATTERN

EOT = "<|endoftext|>"
SPECIALS = [EOT, EOT + EOT, "<pad>"]
# Characters that make pre-tokenization (and cutting) subtle: whitespace of every kind, including the
# U+001C..U+001F separators that `re` calls whitespace and `regex` does not; contractions; digits; punctuation;
# multi-byte characters of 2, 3 and 4 bytes; pieces of special tokens.
PIECES = [" ", " ", "  ", "   ", "\n", "\n\n", "\r\n", "\t", "\x0b", "\x1c", "\x85", "\u00a0", "\u2028", "\u3000",
          "a", "Zz", "word", "'s", "'ll", "'", "12", "3", ".", "!?", "-", "é", "中", "👍", "<", "|>", "<|end",
          # o200k's case runs: upper-case runs, a title-case letter, letters of no case, a modifier letter, a combining
          # mark (both case classes hold the last three), contraction suffixes, and its [\r\n/]* tail
          "HELLO", "ǅ", "ʰ", "\u0301", "'T", "'Ll", "'r", "/", "\r"]
BUILTIN = [GPT2_PATTERN, R50K_PATTERN, CL100K_PATTERN, O200K_PATTERN]  # every pattern of PROVEN_PATTERNS
BUILTIN += [LLAMA3_PATTERN, TEKKEN_PATTERN]  # the open models' (Llama 4's is O200K_PATTERN)
text_st = st.lists(st.one_of(st.sampled_from(PIECES), st.sampled_from(SPECIALS)), max_size=40).map("".join)
# Tests that count files without their special token on purpose silence the warning that says so.
no_token_on_purpose = pytest.mark.filterwarnings("ignore::bpe_nb.chunking.MissingSpecialTokenWarning")


class InlineExecutor(Executor):
    "An Executor that runs each task at once in this process: tests the executor path cheaply."
    def __init__(self): self.calls = 0
    def submit(self, fn, /, *args, **kwargs):
        self.calls += 1
        fut = Future()
        try: fut.set_result(fn(*args, **kwargs))
        except BaseException as e: fut.set_exception(e)
        return fut


@pytest.fixture(scope="module")
def sample_text(tinystories_sample):
    return tinystories_sample.read_text(encoding="utf-8")


# --- find_chunk_boundaries -------------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([b"ab", b"xyz", b"\xe4\xb8\xad", b" ", EOT.encode()]), max_size=60).map(b"".join),
       st.integers(1, 12), st.integers(1, 20))
def test_boundaries_snap_to_the_first_token_after_each_guess(data, n, window):
    tok = EOT.encode()
    bounds = find_chunk_boundaries(io.BytesIO(data), n, tok, window=window)
    assert bounds == sorted(set(bounds)) and bounds[0] == 0 and bounds[-1] == len(data)
    firsts = set()
    for i in range(1, n):
        j = data.find(tok, i * len(data) // n)
        firsts.add(len(data) if j == -1 else j)
    assert set(bounds) - {0, len(data)} == firsts - {0, len(data)}  # exactly the snapped guesses, deduplicated
    for b in bounds[1:-1]: assert data.startswith(tok, b)


def test_boundaries_find_a_token_straddling_two_windows():
    data = b"x" * 30 + EOT.encode() + b"y" * 37
    for w in range(1, 40): assert find_chunk_boundaries(io.BytesIO(data), 4, EOT.encode(), window=w) == [0, 30, 80]


def test_boundaries_never_cut_inside_a_self_overlapping_token():
    # "--" occurs at 2 and at 3 in "a!---?"; the split takes the one at 2, so 3 is inside a token.
    assert find_chunk_boundaries(io.BytesIO(b"a!---?"), 2, b"--") == [0, 6]
    assert find_chunk_boundaries(io.BytesIO(b"a!---?--b"), 3, b"--") == [0, 6, 9]
    assert find_chunk_boundaries(io.BytesIO(b"xaaaaay"), 2, b"aa") == [0, 7]  # 3 is inside the split's "aa" at 1..3
    # Conservative: 3 starts the split's second "aa", but the occurrence at 2 straddles it, so no cut there.
    assert find_chunk_boundaries(io.BytesIO(b"xaaaay"), 2, b"aa") == [0, 6]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["-", "--", "a", "aba", "b", " ", "!", "é"]), max_size=30).map("".join),
       st.sampled_from(["--", "aba", "aa", "<|endoftext|>"]), st.integers(1, 8), st.integers(1, 6))
def test_boundary_chunks_count_like_the_whole_text(text, token, n, window):
    data = text.encode()
    bounds = find_chunk_boundaries(io.BytesIO(data), n, token.encode(), window=window)
    assert bounds[0] == 0 and bounds[-1] == len(data) and bounds == sorted(set(bounds))
    chunks = [data[a:b].decode() for a, b in zip(bounds, bounds[1:])]
    assert sum((count_pretokens(c, [token]) for c in chunks), Counter()) == count_pretokens(text, [token])
    for b in bounds[1:-1]: assert data.startswith(token.encode(), b)


def test_one_snapping_loop_serves_find_chunk_boundaries_and_the_planner(monkeypatch, tmp_path):
    assert not hasattr(chunking, "_snap_to_token")  # the second copy of the guess-and-snap loop is gone
    calls = []
    real = chunking._snap_bounds
    monkeypatch.setattr(chunking, "_snap_bounds", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    p = tmp_path / "t.txt"; p.write_bytes((b"story " * 50 + EOT.encode()) * 40)
    find_chunk_boundaries(p, 3, EOT.encode())
    file_ranges(p, 2, [EOT], min_chunk_size=1000)
    assert calls == [3, 8]


def test_boundaries_of_a_path_and_bad_arguments(tmp_path):
    p = tmp_path / "f.txt"; p.write_bytes(b"a" * 120 + EOT.encode() + b"b" * 100)
    assert find_chunk_boundaries(p, 2, EOT.encode()) == [0, 120, 233]
    with pytest.raises(ValueError, match="desired_num_chunks must be >= 1, got 0"): find_chunk_boundaries(p, 0, b"x")
    with pytest.raises(TypeError, match="must be bytes"): find_chunk_boundaries(p, 2, EOT)
    with pytest.raises(ValueError, match="must not be empty"): find_chunk_boundaries(p, 2, b"")
    with pytest.raises(FileNotFoundError, match="nope.txt"): find_chunk_boundaries(tmp_path / "nope.txt", 2, b"x")


# --- the cut rule ------------------------------------------------------------------------------------------------
def test_re_whitespace_is_a_superset_of_regex_whitespace():
    # `_split_safe` finds unsafe spaces with stdlib `re`; that is conservative only if re's \s covers regex's \s.
    everything = "".join(chr(i) for i in range(sys.maxunicode + 1) if not 0xD800 <= i <= 0xDFFF)
    rx_ws, re_ws = set(regex.findall(r"\s", everything)), set(re.findall(r"\s", everything))
    assert " " in rx_ws and "\u3000" in rx_ws and rx_ws <= re_ws


@settings(max_examples=300, deadline=None)
@given(text_st, st.sampled_from([*BUILTIN, r"\w+|\s+|[^\w\s]+"]))
def test_every_allowed_cut_keeps_the_counts(text, pattern):
    data, whole = text.encode(), count_pretokens(text, SPECIALS, pattern)
    cutter = _Cutter(SPECIALS, pattern)
    p = cutter.first(data, 1, len(data))
    while p != -1:
        left, right = data[:p].decode(), data[p:].decode()  # a cut never splits a UTF-8 character
        assert count_pretokens(left, SPECIALS, pattern) + count_pretokens(right, SPECIALS, pattern) == whole, p
        assert cutter.last(data, p + 1) == p  # `last` finds the same cuts from the other side
        p = cutter.first(data, p + 1, len(data))


def test_the_space_rule_is_needed_and_unknown_patterns_only_cut_at_specials():
    assert count_pretokens("a ") + count_pretokens("  b") != count_pretokens("a   b")  # inside a run: unsafe
    data = b"word   next" + EOT.encode() + b"tail"
    assert _Cutter([EOT], GPT2_PATTERN).first(data, 1, len(data)) == 4
    assert _Cutter([EOT], r"\w+").first(data, 1, len(data)) == 11
    assert _Cutter([], r"\w+").first(data, 1, len(data)) == -1
    assert _Cutter(["<|a|>", "<|a|><|a|>"], GPT2_PATTERN).last(b"x<|a|><|a|>", 11) == 1  # not inside the doubled token


def test_every_builtin_pattern_is_proven():
    assert PROVEN_PATTERNS == set(BUILTIN)


@settings(max_examples=400, deadline=None)
@given(text_st, st.sampled_from(BUILTIN))
def test_a_space_after_a_non_space_splits_the_pre_tokens_exactly(text, pattern):
    # The lemma of chapter 03 on strings, for every such space (not only the ASCII ones the byte-level cutter uses):
    # the pre-tokens of L + R are those of L followed by those of R, in order.
    rx = chunking.compile_pattern(pattern)
    whole = rx.findall(text)
    for p in range(1, len(text)):
        if text[p] == " " and not regex.match(r"\s", text[p - 1]):
            assert rx.findall(text[:p]) + rx.findall(text[p:]) == whole, (text, p)


def test_o200k_looks_ahead_through_letters_but_a_space_stops_it():
    # `中` (a letter of no case) lets o200k's upper-case run take "中HELLO" and then give it back: the pre-tokens of
    # "中HELLO" change with what follows, so a cut between two pre-tokens is not safe; a cut before the space is.
    assert pretokenize("中HELLO", O200K_PATTERN) == ["中".encode(), b"HELLO"]
    assert pretokenize("中HELLOworld", O200K_PATTERN) == ["中HELLOworld".encode()]
    assert pretokenize("it'l", O200K_PATTERN) + pretokenize("l", O200K_PATTERN) != pretokenize("it'll", O200K_PATTERN)
    data = "中HELLO world".encode()
    assert _Cutter([], O200K_PATTERN).first(data, 1, len(data)) == data.index(b" ")


@no_token_on_purpose
@pytest.mark.parametrize("pattern", BUILTIN)
def test_a_file_without_special_tokens_is_cut_and_counted_exactly_under_every_builtin_pattern(tmp_path, sample_text, pattern):
    text = sample_text[:200_000].replace(EOT, "\n") + " 中HELLO world it'll HELLOworld e\u0301 ǅx"
    p = tmp_path / "plain.txt"; p.write_text(text, encoding="utf-8")
    ranges = file_ranges(p, 3, [EOT], pattern, min_chunk_size=1 << 12)
    assert len(ranges) >= 12
    ex = InlineExecutor()
    assert count_pretokens_file(p, [EOT], workers=3, executor=ex, pattern=pattern, min_chunk_size=1 << 12,
                                block_size=999) == count_pretokens(text, [], pattern)
    assert ex.calls == len(ranges)


@settings(max_examples=300, deadline=None)
@given(st.lists(text_st, min_size=1, max_size=4), st.sampled_from([*BUILTIN, r"\S+|\s+"]),
       st.integers(1, 8))
def test_tally_equals_count_pretokens(texts, pattern, max_parts):
    # Pieces are independent documents here (joined by a special token), as the workers' pieces are.
    tally = _Tally(SPECIALS, pattern, max_parts=max_parts)
    for t in texts: tally.add(t + EOT)
    whole = EOT.join(texts) + EOT
    assert tally.result() == count_pretokens(whole, SPECIALS, pattern)
    assert tally.specials == sum(len(chunking.special_pattern(tuple(SPECIALS)).findall(t + EOT)) for t in texts)


# --- count_pretokens_file ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("workers", [1, 2, 3, 7])
def test_file_counts_equal_single_process_counts_on_the_sample(workers, tinystories_sample, sample_text):
    expected = count_pretokens(sample_text, [EOT])
    got = count_pretokens_file(tinystories_sample, [EOT], workers=workers, min_chunk_size=1 << 14, block_size=1 << 16)
    assert got == expected
    assert list(got) == list(expected)  # the same order: first occurrence in the file


class ScramblingExecutor(ThreadPoolExecutor):
    "A thread pool whose tasks each wait a random moment first, so they finish out of order (seeded)."
    def __init__(self, seed: int, workers: int = 4):
        super().__init__(workers); self.rng = random.Random(seed)
    def submit(self, fn, /, *args, **kwargs):
        delay = self.rng.random() * 0.004
        def late(): time.sleep(delay); return fn(*args, **kwargs)
        return super().submit(late)


@pytest.mark.parametrize("seed", range(3))
def test_file_counts_keep_first_occurrence_order_when_ranges_finish_out_of_order(seed, tinystories_sample, sample_text):
    expected = count_pretokens(sample_text, [EOT])
    with ScramblingExecutor(seed) as ex:
        got = count_pretokens_file(tinystories_sample, [EOT], workers=4, executor=ex, min_chunk_size=1 << 14,
                                   block_size=1 << 16)
    assert got == expected and list(got) == list(expected)


@no_token_on_purpose
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text_st, st.integers(1, 40), st.integers(1, 7), st.integers(1, 9),
       st.sampled_from([[EOT], SPECIALS, []]), st.sampled_from([*BUILTIN, r"\w+|\s+|[^\w\s]+"]))
def test_file_counts_equal_whole_text_counts(tmp_path, monkeypatch, text, block_size, workers, window, specials, pattern):
    # Tiny look-ahead windows and tiny blocks put specials and multi-byte characters across every kind of edge.
    monkeypatch.setattr(chunking, "_SNAP_WINDOW", window)
    p = tmp_path / "t.txt"; p.write_bytes(text.encode())
    ex = InlineExecutor()
    got = count_pretokens_file(p, specials, workers=workers, executor=ex, pattern=pattern,
                               block_size=block_size, min_chunk_size=1)
    want = count_pretokens(text, specials, pattern)
    assert got == want and list(got) == list(want)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(text_st, min_size=5, max_size=30).map("".join), st.integers(2, 3))
def test_file_counts_with_a_process_pool(tmp_path, text, workers):
    text = EOT + text + EOT + EOT  # specials at the start, at the end, doubled
    p = tmp_path / "t.txt"; p.write_bytes(text.encode())
    assert count_pretokens_file(p, [EOT], workers=workers, min_chunk_size=1, block_size=16) == count_pretokens(text, [EOT])


@no_token_on_purpose
def test_a_file_without_special_tokens_is_still_cut_and_counted_exactly(tmp_path, sample_text):
    text = sample_text.replace(EOT, "\n")
    p = tmp_path / "plain.txt"; p.write_text(text, encoding="utf-8")
    ranges = file_ranges(p, 3, [EOT], GPT2_PATTERN, min_chunk_size=1 << 14)
    assert len(ranges) >= 12
    assert count_pretokens_file(p, [EOT], workers=3, min_chunk_size=1 << 14, block_size=1000) == count_pretokens(text)
    # An unproven pattern cannot cut such a file: it falls back to one range, and the counts are still exact.
    assert len(file_ranges(p, 3, [EOT], r"\S+|\s+", min_chunk_size=1)) == 1
    assert count_pretokens_file(p, [EOT], workers=3, pattern=r"\S+|\s+", min_chunk_size=1) == count_pretokens(text, [], r"\S+|\s+")


def test_workers_read_their_range_in_blocks(tinystories_sample):
    sizes = []
    size = tinystories_sample.stat().st_size
    _count_range(str(tinystories_sample), 0, size, (EOT,), GPT2_PATTERN, "strict", 4096, sizes.append)
    assert sum(sizes) == size and len(sizes) > size // 8192 and max(sizes) <= 4096


def test_counting_hands_freed_heap_back_as_it_goes(monkeypatch, tinystories_sample, sample_text):
    "A file counted in-process and a document stream counted in-process both call `trim_heap` every `_TRIM_BYTES` of text (chapter 03, Freed memory goes back)."
    calls = []
    monkeypatch.setattr(chunking, "trim_heap", lambda: calls.append(1))
    monkeypatch.setattr(chunking, "_TRIM_BYTES", 1 << 16)
    monkeypatch.setattr(chunking, "_untrimmed", 0)
    size = tinystories_sample.stat().st_size
    counts, _ = chunking.count_file(tinystories_sample, (EOT,), workers=1, block_size=1 << 14)
    assert len(calls) == size >> 16 and counts == count_pretokens(sample_text, [EOT])
    calls.clear()
    docs = sample_text.split(EOT)
    streamed, _ = chunking.count_documents(docs, (EOT,), workers=1, chunk_size=1 << 17)
    assert len(calls) >= size >> 17 and streamed == counts  # (a chunk of 128 KiB: one trim covers it)


def test_a_stretch_without_safe_cuts_is_read_in_linear_time(tmp_path, monkeypatch):
    # Unspaced CJK lines and no special token: no safe cut for 300 kB. The buffer must grow geometrically
    # (a handful of reads, not size / block_size) and each look must search only the bytes not searched yet.
    stretch = ("从前有一只小狗，它叫马克斯。" * 20 + "\n").encode() * 350
    tail = b" and then the story went on." * 20_000
    data = stretch + tail
    p = tmp_path / "zh.txt"; p.write_bytes(data)
    looks = []
    real_last = _Cutter.last
    def last(self, buf, hi, lo=1):
        cut = real_last(self, buf, hi, lo) if lo != 1 else real_last(self, buf, hi)
        looks.append((max(0, hi - max(lo, 1)), cut))
        return cut
    monkeypatch.setattr(_Cutter, "last", last)
    block_size = 1000
    blocks = list(read_blocks(p, 0, len(data), [EOT], block_size=block_size))
    assert "".join(x.text for x in blocks) == data.decode()
    assert blocks[0].size >= len(stretch)  # the stretch cannot be cut
    searched = sum(n for n, _ in looks)
    assert searched <= 2 * len(data), (searched, len(data))  # was ~ len(stretch)**2 / (2 * block_size): 40x more
    misses = sum(cut <= 0 for _, cut in looks)
    assert misses <= 12, misses  # doubling: ~log2(len(stretch) / block_size) reads found no cut (was ~300)
    assert blocks[0].size <= 2 * len(stretch)  # the grown buffer is at most twice the stretch
    assert len(blocks) > 100 and max(x.size for x in blocks[1:]) <= block_size  # bounded again once cuts are back


def test_after_a_long_block_memory_returns_to_block_size(tmp_path):
    # A cut found late in a grown buffer leaves the rest for the next block; later blocks are bounded again.
    data = b"x" * 5000 + b" y" + b"z" * 3000 + b" w" * 4000
    p = tmp_path / "t.txt"; p.write_bytes(data)
    blocks = list(read_blocks(p, 0, len(data), [EOT], block_size=100))
    assert "".join(x.text for x in blocks) == data.decode()
    assert blocks[0].size == 5000  # up to the only cut, before " y"
    assert 3002 <= blocks[1].size <= 2 * 3002  # " y" + 3000 z: no cut until " w"; the buffer doubled past it
    assert max(x.size for x in blocks[2:]) <= 100


def test_a_file_that_shrinks_while_read_is_an_error(tmp_path):
    p = tmp_path / "short.txt"; p.write_bytes(b"hello world")
    with pytest.raises(ValueError, match="expected 100 bytes but the file ended at 11"):
        _count_range(str(p), 0, 100, (EOT,), GPT2_PATTERN, "strict", 4, None)


# --- bad input ---------------------------------------------------------------------------------------------------
def test_bad_arguments_name_the_bad_value(tmp_path, tinystories_sample):
    with pytest.raises(FileNotFoundError, match="missing.txt"): count_pretokens_file(tmp_path / "missing.txt")
    with pytest.raises(IsADirectoryError): count_pretokens_file(tmp_path)
    for w in (0, -1):
        with pytest.raises(ValueError, match=f"workers must be >= 1, got {w}"): count_pretokens_file(tinystories_sample, workers=w)
    with pytest.raises(TypeError, match="workers must be an int"): count_pretokens_file(tinystories_sample, workers="2")
    with pytest.raises(TypeError, match="workers must be an int"): count_pretokens_file(tinystories_sample, workers=True)
    with pytest.raises(TypeError, match="executor must be"): count_pretokens_file(tinystories_sample, executor=object())
    with pytest.raises(TypeError, match="sequence of strings"): count_pretokens_file(tinystories_sample, EOT)
    with pytest.raises(ValueError, match="non-empty"): count_pretokens_file(tinystories_sample, [""])
    with pytest.raises(ValueError, match="'ignore'"): count_pretokens_file(tinystories_sample, errors="ignore")
    with pytest.raises(ValueError, match="block_size must be >= 1, got 0"): count_pretokens_file(tinystories_sample, block_size=0)
    with pytest.raises(TypeError, match="progress must be"): count_pretokens_file(tinystories_sample, progress="yes")


@pytest.mark.parametrize("workers", [1, 3])
def test_invalid_utf8_names_the_first_bad_offset(tmp_path, sample_text, workers):
    good = sample_text.encode()
    bad = good[:200_000] + b"\xff" + good[200_000:700_000] + b"\xe2\x82" + good[700_000:]
    p = tmp_path / "bad.txt"; p.write_bytes(bad)
    with pytest.raises(ValueError, match=r"invalid UTF-8 at byte offset 200000 \(byte 0xff"):
        count_pretokens_file(p, workers=workers, min_chunk_size=1 << 14)
    # only the second bad sequence: its offset is reported, from whichever range holds it
    p.write_bytes(good[:700_000] + b"\xe2\x82" + good[700_000:])
    with pytest.raises(ValueError, match="invalid UTF-8 at byte offset 700000 "):
        count_pretokens_file(p, workers=workers, min_chunk_size=1 << 14)
    p.write_bytes(bad)
    got = count_pretokens_file(p, workers=workers, errors="replace", min_chunk_size=1 << 14, block_size=5000)
    assert got == count_pretokens(bad.decode("utf-8", "replace"), [EOT])


def test_replace_with_a_special_token_containing_u_fffd_is_refused(tmp_path):
    # A U+FFFD made from an invalid byte is invisible to the byte-level cuts: counts would depend on the cutting.
    specials = [EOT, "\ufffd" + EOT]
    p = tmp_path / "f.txt"; p.write_bytes((b"story one." + b"\x80" + EOT.encode() + b"story two.") * 4)
    for kw in (dict(workers=1, block_size=8), dict(workers=1), dict(workers=3, executor=InlineExecutor(), min_chunk_size=1)):
        with pytest.raises(ValueError, match="errors='replace' cannot be used with a special token that contains U\\+FFFD"):
            count_pretokens_file(p, specials, errors="replace", **kw)
    with pytest.raises(ValueError, match="U\\+FFFD"): train_bpe(p, 300, specials, errors="replace", progress=False)
    with pytest.raises(ValueError, match="U\\+FFFD"): read_blocks(p, 0, 10, specials, errors="replace")
    # strict: a U+FFFD can only be its own three bytes, which the cuts see: exact for every block size and worker count
    text = ("story one.\ufffd" + EOT + "story two. \ufffd\ufffd" + EOT) * 4
    p.write_text(text, encoding="utf-8")
    for ps in (1, 8, 30, 1 << 20):
        for w in (1, 3):
            assert count_pretokens_file(p, specials, workers=w, executor=InlineExecutor(), block_size=ps,
                                        min_chunk_size=1) == count_pretokens(text, specials)
    # replace without such a token stays allowed
    p.write_bytes((b"story one." + b"\x80" + EOT.encode() + b"story two.") * 4)
    assert count_pretokens_file(p, [EOT], errors="replace", workers=1, block_size=8) == \
        count_pretokens(p.read_bytes().decode("utf-8", "replace"), [EOT])


def test_empty_file(tmp_path):
    p = tmp_path / "empty.txt"; p.write_bytes(b"")
    assert count_pretokens_file(p, workers=3) == Counter()
    with pytest.warns(EarlyStopWarning):
        m = train_bpe(p, 1000, workers=2, progress=False)
    assert m.merges == [] and len(m.vocab) == 257 and m.special_tokens == {EOT: 256}


def test_a_missing_special_token_is_noted_in_the_progress_output_and_warned(tmp_path, capsys):
    p = tmp_path / "plain.txt"; p.write_text("no separator in this text at all\n" * 50, encoding="utf-8")
    with pytest.warns(MissingSpecialTokenWarning, match=r"no special token \(<\|endoftext\|>\) occurs in .*plain.txt"):
        count_pretokens_file(p, [EOT], workers=1, progress=True)
    err = capsys.readouterr().err
    assert "no special token (<|endoftext|>) occurs in" in err and "plain.txt" in err
    # silent or callable progress: no bar to write on, but the warning still reaches the user
    for progress in (False, [].append):
        with pytest.warns(MissingSpecialTokenWarning, match="plain.txt"):
            count_pretokens_file(p, [EOT], workers=1, progress=progress)
        assert capsys.readouterr().err == ""
    with pytest.warns(MissingSpecialTokenWarning, match="plain.txt"):
        train_bpe(p, 260, workers=2, progress=False, min_chunk_size=100)
    with warnings.catch_warnings():  # no warning when a token occurs, when none is given, or for an empty file
        warnings.simplefilter("error")
        count_pretokens_file(p, [], workers=1)
        count_pretokens_file(p, ["\n"], workers=1)
        (tmp_path / "empty.txt").write_bytes(b"")
        count_pretokens_file(tmp_path / "empty.txt", [EOT], workers=1)
    assert issubclass(MissingSpecialTokenWarning, UserWarning)


# --- train_bpe ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def twice(tmp_path_factory, sample_text):
    p = tmp_path_factory.mktemp("corpus") / "twice.txt"
    p.write_bytes(sample_text.encode() * 2)
    return p


@pytest.fixture(scope="module")
def reference_model(twice):
    return train_bpe(twice, 2000, workers=1, progress=False)


def _fingerprint(m):
    "Everything a saved model holds, as bytes: equal fingerprints mean byte-identical models."
    return repr((list(m.vocab.items()), m.merges, list(m.special_tokens.items()))).encode()


@pytest.mark.parametrize("workers", [2, 3])
def test_train_bpe_is_identical_for_any_worker_count(twice, reference_model, workers, tmp_path):
    from bpe_nb.artifacts import save
    m = train_bpe(twice, 2000, workers=workers, progress=False, min_chunk_size=1 << 16)
    assert _fingerprint(m) == _fingerprint(reference_model)
    # byte-identical saved files (ranges fold in completion order; addition does not care)
    assert save(m, tmp_path / "w.json").read_bytes() == save(reference_model, tmp_path / "w1.json").read_bytes()
    assert len(m.merges) == 2000 - 257 and m.info["special_tokens_found"] == 2 * 1274


def test_train_bpe_naive_and_incremental_agree(tinystories_sample):
    a = train_bpe(tinystories_sample, 400, workers=1, trainer="naive", progress=False)
    b = train_bpe(tinystories_sample, 400, workers=2, trainer="incremental", progress=False, min_chunk_size=1 << 16)
    assert _fingerprint(a) == _fingerprint(b)


def test_train_bpe_progress(tinystories_sample, capsys):
    seen = []
    train_bpe(tinystories_sample, 300, workers=1, progress=seen.append)
    kinds = [type(x) for x in seen]
    assert kinds[0] is CountProgress and kinds[-1] is MergeProgress and CountProgress in kinds
    size = tinystories_sample.stat().st_size
    assert seen[kinds.index(MergeProgress) - 1] == CountProgress(size, size)
    assert seen[-1].done == 300 - 257
    train_bpe(tinystories_sample, 300, workers=1, progress=False)
    assert capsys.readouterr().err == ""
    train_bpe(tinystories_sample, 300, workers=1, progress=True)
    err = capsys.readouterr().err
    assert "counting pre-tokens" in err and "43/43" in err


def test_train_bpe_checks_its_arguments_before_counting(tmp_path, tinystories_sample):
    with pytest.raises(ValueError, match="vocab_size=100"): train_bpe(tinystories_sample, 100)
    with pytest.raises(ValueError, match="'fast'"): train_bpe(tinystories_sample, 1000, trainer="fast")
    with pytest.raises(ValueError, match="'random'"): train_bpe(tinystories_sample, 1000, tie_break="random")
    with pytest.raises(FileNotFoundError, match="nope.txt"): train_bpe(tmp_path / "nope.txt", 1000)
    with pytest.raises(ValueError, match="workers must be >= 1, got 0"): train_bpe(tinystories_sample, 1000, workers=0)


# --- Dask --------------------------------------------------------------------------------------------------------
def test_dask_executor_gives_the_same_counts_and_model(twice, reference_model, sample_text):
    from dask.distributed import Client, LocalCluster
    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster, \
         Client(cluster) as client:
        ex = client.get_executor()
        counts = count_pretokens_file(twice, [EOT], workers=2, executor=ex, min_chunk_size=1 << 16)
        m = train_bpe(twice, 2000, workers=2, executor=ex, progress=False, min_chunk_size=1 << 16)
    want = count_pretokens(sample_text * 2, [EOT])
    assert counts == want and list(counts) == list(want)
    assert _fingerprint(m) == _fingerprint(reference_model)


# --- the shared helpers: file_ranges and read_blocks (the encoder cuts files with them too) ----------------------
def test_the_proven_patterns_constant_is_the_one_of_pretokenize():
    assert chunking.PROVEN_PATTERNS is PROVEN_PATTERNS
    assert not hasattr(chunking, "_SPACE_SAFE_PATTERNS")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text_st, st.integers(1, 30), st.integers(1, 6), st.sampled_from([[EOT], SPECIALS, []]),
       st.sampled_from([*BUILTIN, r"\S+|\s+"]))
def test_file_ranges_and_read_blocks_cut_only_where_nothing_changes(tmp_path, text, block_size, workers, specials, pattern):
    p = tmp_path / "t.txt"; p.write_bytes(text.encode())
    ranges = file_ranges(p, workers, specials, pattern, min_chunk_size=1)
    data = text.encode()
    bounds = [0] + [b for _, b in ranges]
    assert ranges == list(zip(bounds, bounds[1:])) and bounds[-1] == len(data) and all(a < b for a, b in ranges)
    h = hashlib.sha256()
    blocks = [x for a, b in ranges for x in read_blocks(p, a, b, specials, pattern, block_size=block_size, hasher=h)]
    assert all(isinstance(x, Block) for x in blocks)
    assert "".join(x.text for x in blocks) == text and h.hexdigest() == hashlib.sha256(data).hexdigest()
    assert [x.offset for x in blocks] == [0, *(x.offset + x.size for x in blocks)][:len(blocks)]
    assert all(x.size == len(x.text.encode()) > 0 for x in blocks)
    # not only the counts: the sequence of special tokens and pre-tokens of the blocks is that of the whole text
    sp, rx = chunking.special_pattern(tuple(specials)), chunking.compile_pattern(pattern)
    def sequence(t):
        segs = sp.split(t) if sp is not None else [t]
        return [x for k, seg in enumerate(segs) for x in ([seg] if k % 2 else rx.findall(seg))]
    assert [t for x in blocks for t in sequence(x.text)] == sequence(text)


def test_read_blocks_bad_arguments(tmp_path):
    p = tmp_path / "t.txt"; p.write_bytes(b"ok \xff no")
    with pytest.raises(ValueError, match="errors must be one of"): list(read_blocks(p, 0, 7, [EOT], errors="ignore"))
    with pytest.raises(ValueError, match="invalid UTF-8 at byte offset 3"): list(read_blocks(p, 0, 7, [EOT]))
    assert "".join(x.text for x in read_blocks(p, 0, 7, [EOT], errors="replace")) == "ok \ufffd no"
    with pytest.raises(ValueError, match="workers must be >= 1"): file_ranges(p, 0, [EOT])
    with pytest.raises(FileNotFoundError, match="nope.txt"): file_ranges(tmp_path / "nope.txt", 2, [EOT])


# --- a pattern that does not cover the text -----------------------------------------------------------------------
NO_HEBREW = r"[^\u05d0-\u05ea]+"  # passes check_pattern's test text, but skips Hebrew letters


def test_a_pattern_that_skips_characters_is_refused_before_counting(tmp_path):
    p = tmp_path / "t.txt"; p.write_text("hello, world", encoding="utf-8")
    with pytest.raises(ValueError, match="does not cover every text"): count_pretokens_file(p, pattern=r"\w+")
    with pytest.raises(ValueError, match="does not cover every text"): train_bpe(p, 300, pattern=r"\w+", progress=False)
    with pytest.raises(TypeError, match="pattern must be a str"): count_pretokens_file(p, pattern=None)


@pytest.mark.parametrize("workers", [1, 3])
def test_a_pattern_that_skips_a_character_of_the_file_names_its_byte_offset(tmp_path, workers):
    text = ("hello world, " * 2000) + "x\u05e9y" + " tail" * 10
    p = tmp_path / "t.txt"; p.write_text(text, encoding="utf-8")
    at = len(("hello world, " * 2000 + "x").encode())
    with pytest.raises(ValueError) as e:
        count_pretokens_file(p, [], workers=workers, executor=InlineExecutor(), pattern=NO_HEBREW,
                             min_chunk_size=1000, block_size=500)
    assert f"'ש' at byte offset {at} of {p}" in str(e.value)
    ok = text.replace("\u05e9", "")
    p.write_text(ok, encoding="utf-8")
    assert count_pretokens_file(p, [], workers=workers, executor=InlineExecutor(), pattern=NO_HEBREW,
                                min_chunk_size=1000) == count_pretokens(ok, [], NO_HEBREW)


# --- train_bpe records the corpus's SHA-256 ---------------------------------------------------------------------
@pytest.mark.parametrize("workers, executor", [(1, None), (2, None), (2, "inline")])
def test_train_bpe_records_the_corpus_hash(twice, workers, executor):
    m = train_bpe(twice, 300, workers=workers, executor=InlineExecutor() if executor else None, progress=False,
                  min_chunk_size=1 << 16)
    assert m.info["corpus_sha256"] == hashlib.sha256(twice.read_bytes()).hexdigest()
    assert m.info["corpus_bytes"] == twice.stat().st_size and m.info["corpus"] == str(twice.resolve())


def test_train_bpe_on_an_empty_file_records_the_empty_hash(tmp_path):
    p = tmp_path / "empty.txt"; p.write_bytes(b"")
    with pytest.warns(EarlyStopWarning): m = train_bpe(p, 300, workers=2, progress=False)
    assert m.info["corpus_sha256"] == hashlib.sha256(b"").hexdigest() and m.info["corpus_bytes"] == 0


def test_the_background_hash_reports_a_file_that_shrank(tmp_path):
    p = tmp_path / "t.txt"; p.write_bytes(b"x" * 100)
    with pytest.raises(ValueError, match="expected 1000 bytes but the file ended at 100"):
        chunking._BackgroundSHA256(str(p), 1000).result()
    assert chunking._BackgroundSHA256(str(p), 100).result() == hashlib.sha256(b"x" * 100).hexdigest()


# --- folding counts as ranges complete: memory follows the distinct pre-tokens ---------------------------------
def _deep_size(c: Counter) -> int:
    "Bytes a Counter of bytes holds: its table, its keys, and its counts beyond the interpreter's cached small ints."
    return sys.getsizeof(c) + sum(sys.getsizeof(k) + (sys.getsizeof(v) if v > 256 else 0) for k, v in c.items())


@pytest.fixture(scope="module")
def same_words_file(tmp_path_factory):
    "8 documents, each the same 30,000 distinct words shuffled: every range holds about all the file's pre-tokens."
    import random
    rng = random.Random(0)
    words = sorted({"".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randrange(4, 12)))
                    for _ in range(30_000)})
    docs = []
    for _ in range(8):
        rng.shuffle(words); docs.append(" ".join(words))
    p = tmp_path_factory.mktemp("mem") / "same_words.txt"
    p.write_text(EOT.join(docs) + EOT, encoding="utf-8")
    return p


@pytest.mark.parametrize("workers", [2, 3])
def test_the_parents_peak_stays_within_five_times_the_final_counter(same_words_file, workers):
    import tracemalloc
    ranges = file_ranges(same_words_file, workers, [EOT], GPT2_PATTERN, min_chunk_size=1 << 14)
    assert len(ranges) >= 8  # keeping every range's counter would need about 8 times the final one
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        counts = count_pretokens_file(same_words_file, [EOT], workers=workers, min_chunk_size=1 << 14)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    final = _deep_size(counts)
    assert len(counts) > 29_000
    # the total, up to 2 x workers packed ranges waiting to be folded, and the range the parent counts itself (it is one of
    # the workers: `_HelpingPool`), its text's arrays traced too (3.5-4.0x seen; 1.9-2.2x before the parent counted);
    # keeping every range's counter: about 8x more
    assert peak <= 5 * final, (peak, final, peak / final)


class CountingExecutor(InlineExecutor):
    "Runs each task when the parent waits for it (not at submit), recording the most tasks ever in flight."
    def __init__(self):
        super().__init__(); self.queued, self.most = [], 0
    def submit(self, fn, /, *args, **kwargs):
        self.calls += 1
        fut = Future(); self.queued.append((fut, fn, args))
        self.most = max(self.most, sum(not f.done() for f, _, _ in self.queued))
        fut.add_done_callback(lambda f: None)
        return fut
    def run_one(self):
        for f, fn, args in self.queued:
            if not f.done():
                try: f.set_result(fn(*args))
                except BaseException as e: f.set_exception(e)
                return


def _run_when_waited_on(monkeypatch, ex: CountingExecutor):
    "Make `_fold_completed`'s wait run one of `ex`'s queued tasks first."
    real_wait = chunking.wait
    def wait(fs, timeout=None, return_when=None):
        ex.run_one(); return real_wait(fs, timeout=timeout, return_when=return_when)
    monkeypatch.setattr(chunking, "wait", wait)


def test_fold_completed_keeps_a_bounded_window_and_raises_the_first_failure(monkeypatch):
    ex = CountingExecutor()
    _run_when_waited_on(monkeypatch, ex)
    seen = {}
    chunking._fold_completed(ex, ((pow, k, 2) for k in range(20)), seen.__setitem__, window=3)
    assert seen == {k: k * k for k in range(20)} and ex.most == 3 and ex.calls == 20
    def boom(k):
        if k in (5, 9): raise ValueError(f"task {k}")
        return k
    seen, ex2 = {}, InlineExecutor()
    with pytest.raises(ValueError, match="task 5"):
        chunking._fold_completed(ex2, ((boom, k) for k in range(20)), seen.__setitem__, window=4)
    assert set(seen) == {0, 1, 2, 3, 4} and ex2.calls < 20  # nothing is submitted after a failure


class NewestFirstExecutor(CountingExecutor):
    "Runs the newest queued task first, so results come back in reverse; records the most tasks submitted but not folded."
    def __init__(self):
        super().__init__(); self.folded, self.most_unfolded = 0, 0
    def submit(self, fn, /, *args, **kwargs):
        fut = super().submit(fn, *args, **kwargs)
        self.most_unfolded = max(self.most_unfolded, self.calls - self.folded)
        return fut
    def run_one(self):
        for f, fn, args in reversed(self.queued):
            if not f.done():
                f.set_result(fn(*args)); return


def test_fold_completed_folds_in_task_order_within_the_window_when_results_come_back_reversed(monkeypatch):
    ex = NewestFirstExecutor()
    _run_when_waited_on(monkeypatch, ex)
    order = []
    def fold(i, r): order.append((i, r)); ex.folded += 1
    chunking._fold_completed(ex, ((pow, k, 2) for k in range(20)), fold, window=4)
    assert order == [(k, k * k) for k in range(20)]  # in task order, although each batch came back newest first
    assert ex.most_unfolded == 4 and ex.calls == 20  # running or waiting to be folded: never more than the window


def test_fold_completed_refuses_to_lose_a_task_cancelled_by_someone_else():
    class DropsTask2(InlineExecutor):
        def submit(self, fn, /, *args, **kwargs):
            if args == (2, 2):
                self.calls += 1
                fut = Future(); fut.cancel(); fut.set_running_or_notify_cancel(); return fut
            return super().submit(fn, *args, **kwargs)
    seen = {}
    with pytest.raises(chunking.CancelledError, match="task 2 was cancelled"):
        chunking._fold_completed(DropsTask2(), ((pow, k, 2) for k in range(10)), seen.__setitem__, window=4)
    assert set(seen) == {0, 1}


def test_pack_round_trips():
    c = Counter({b"": 0, b" the": 3, "中".encode(): 2**40, bytes(range(256)): 1})
    assert dict(chunking._unpack(chunking._pack(c))) == c


_piece = st.binary(max_size=3) | st.binary(min_size=chunking._KEYED_MAX - 1, max_size=chunking._KEYED_MAX + 2)
@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(_piece, st.integers(1, 2**40), max_size=12), max_size=5), st.booleans())
def test_the_packed_total_sums_like_a_counter_in_first_occurrence_order(ranges, counter_first):
    "`_Total` over packed ranges (its `CountTable`) against `Counter.update`: the same counts, the same order; NUL bytes and lengths around `_KEYED_MAX` kept."
    total, want = chunking._Total(), Counter()
    for i, r in enumerate(ranges):
        c = Counter(r)
        total.add((c.copy() if counter_first and i == 0 else chunking._pack(c), i), 1)
        want.update(c)
    got = total.result()
    assert list(got.items()) == list(want.items())
    assert total.specials == sum(range(len(ranges))) and total.bytes == len(ranges)



@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(_piece, st.integers(1, 2**40), max_size=12), max_size=5), st.booleans(),
       st.sampled_from(["int16", "int32"]))
def test_a_table_lays_out_what_its_counter_holds(ranges, counter_first, dtype):
    "`CountTable.flatten` against the `Counter` of the same ranges: the pre-tokens of two bytes or more, in first-occurrence order, each between separators, with its count."
    import numpy as np
    total, want = chunking._Total(), Counter()
    for i, r in enumerate(ranges):
        c = Counter(r)
        total.add((c.copy() if counter_first and i == 0 else chunking._pack(c), 0), 1)
        want.update(c)
    table = total.result(packed=True)
    assert (len(table), table.total()) == (len(want), want.total())
    sym, seps, counts = table.flatten(np.dtype(dtype))
    assert sym.dtype == np.dtype(dtype) and len(sym) == seps[-1] + 1 and (sym[seps] == -1).all()
    inside = np.ones(len(sym), bool); inside[seps] = False
    assert (sym[inside] >= 0).all()
    got = [(sym[a + 1:b].astype(np.uint8).tobytes(), int(n)) for a, b, n in zip(seps.tolist(), seps[1:].tolist(), counts)]
    assert got == [(p, n) for p, n in want.items() if len(p) > 1]
    assert len(table) == 0  # emptied

# --- train_from_iterator ---------------------------------------------------------------------------------------
from bpe_nb.incremental import train_incremental  # noqa: E402
from bpe_nb.naive import TIE_BREAKS  # noqa: E402
from bpe_nb.training import train_from_iterator  # noqa: E402


@settings(max_examples=150, deadline=None)
@given(st.lists(text_st, max_size=8), st.sampled_from([[EOT], SPECIALS, ["<pad>", EOT], []]),
       st.sampled_from([*BUILTIN, r"\S+|\s+"]), st.integers(1, 40), st.integers(257, 300), st.sampled_from(TIE_BREAKS))
def test_train_from_iterator_learns_what_train_bpe_learns_on_the_joined_text(docs, specials, pattern, chunk_size,
                                                                            vocab_size, tie_break):
    vocab_size += len(specials)
    joined = (specials[0] if specials else "").join(docs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EarlyStopWarning)
        want = train_incremental(count_pretokens(joined, specials, pattern), vocab_size, specials, tie_break=tie_break,
                                 progress=False)
        ex = InlineExecutor()
        got = train_from_iterator(iter(docs), vocab_size, specials, pattern=pattern, tie_break=tie_break, workers=3,
                                  executor=ex, chunk_size=chunk_size)
        one = train_from_iterator(docs, vocab_size, specials, pattern=pattern, tie_break=tie_break, workers=1,
                                  chunk_size=chunk_size)
    assert _fingerprint(got) == _fingerprint(want) == _fingerprint(one)
    assert got.info["corpus_bytes"] == len(joined.encode()) and got.info["documents"] == len(docs)
    assert got.info["corpus_sha256"] == hashlib.sha256(joined.encode()).hexdigest()


def test_train_from_iterator_with_processes_equals_train_bpe_on_the_file(twice, reference_model, sample_text):
    docs = (sample_text * 2).split(EOT)
    assert EOT.join(docs) == sample_text * 2
    seen = []
    m = train_from_iterator((d for d in docs), 2000, workers=2, chunk_size=1 << 16, progress=seen.append)
    assert _fingerprint(m) == _fingerprint(reference_model)
    assert m.info["corpus_sha256"] == hashlib.sha256(twice.read_bytes()).hexdigest()
    counts = [p for p in seen if isinstance(p, CountProgress)]
    assert counts[-1] == CountProgress(twice.stat().st_size, None) and any(isinstance(p, MergeProgress) for p in seen)


def test_train_from_iterator_streams_its_documents(monkeypatch):
    # Never the whole text at once: the generator is consumed while the first chunks are being counted.
    consumed, counted = [], []
    def docs():
        for i in range(200):
            consumed.append(i); yield f"story number {i} is a short one."
    real = chunking._count_chunk
    def spy(data, *args):
        counted.append(len(consumed)); return real(data, *args)
    monkeypatch.setattr(chunking, "_count_chunk", spy)
    train_from_iterator(docs(), 300, workers=1, chunk_size=256)
    assert len(counted) > 20 and counted[0] < 20
    assert all(a <= b for a, b in zip(counted, counted[1:]))


def test_train_from_iterator_checks_before_reading():
    def never():
        raise AssertionError("read")
        yield
    for kwargs, exc, msg in [(dict(vocab_size=100), ValueError, "vocab_size=100"),
                             (dict(vocab_size=1000, trainer="fast"), ValueError, "'fast'"),
                             (dict(vocab_size=1000, tie_break="nope"), ValueError, "'nope'"),
                             (dict(vocab_size=1000, workers=0), ValueError, "workers must be >= 1"),
                             (dict(vocab_size=1000, chunk_size=0), ValueError, "chunk_size must be >= 1"),
                             (dict(vocab_size=1000, pattern=r"\w+"), ValueError, "does not cover"),
                             (dict(vocab_size=1000, special_tokens=EOT), TypeError, "sequence of strings")]:
        with pytest.raises(exc, match=re.escape(msg)): train_from_iterator(never(), **kwargs)
    with pytest.raises(TypeError, match="iterable of str documents"): train_from_iterator("a str", 1000)
    with pytest.raises(TypeError, match="document 2"): train_from_iterator(["a", "b", None], 1000, workers=1)


@pytest.mark.parametrize("tie_break", TIE_BREAKS)
def test_every_tie_rule_of_the_trainers_is_accepted(tinystories_sample, sample_text, tie_break):
    # validated against bpe_nb.naive.TIE_BREAKS itself, so a rule the trainers add is accepted here at once
    a = train_bpe(tinystories_sample, 300, workers=1, tie_break=tie_break, progress=False)
    b = train_from_iterator(sample_text.split(EOT), 300, workers=1, tie_break=tie_break)
    assert a.merges == b.merges and a.info["tie_break"] == tie_break


@settings(max_examples=400, deadline=None)
@given(text_st, text_st, st.sampled_from(BUILTIN))
def test_the_last_safe_space_of_a_str_leaves_final_pre_tokens_before_it(head, tail, pattern):
    # What a stream of str needs: the pre-tokens before the cut do not depend on any text that follows.
    p = chunking.last_safe_space(head)
    if p < 0: return
    assert head[p] == " " and not regex.match(r"\s", head[p - 1])
    before = pretokenize(head[:p], pattern)
    assert pretokenize(head + tail, pattern)[:len(before)] == before
    assert pretokenize(head[:p], pattern) + pretokenize(head[p:] + tail, pattern) == pretokenize(head + tail, pattern)


def test_the_last_safe_space_holds_back_what_o200k_may_still_change():
    # " 中HELLO" + "world" is one o200k pre-token: cutting between " 中" and "HELLO" (both already pre-tokens of the
    # text so far) would change it; the last safe space keeps the whole word back.
    head = "x 中HELLO"
    assert pretokenize(head, O200K_PATTERN)[1:] == [" 中".encode(), b"HELLO"]
    assert pretokenize(head + "world", O200K_PATTERN)[1:] == [" 中HELLOworld".encode()]
    assert chunking.last_safe_space(head) == 1
    assert chunking.last_safe_space("it'l") == -1 and chunking.last_safe_space("so it'l") == 2


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(text_st, max_size=4), max_size=5), st.integers(1, 30))
def test_train_from_iterator_takes_batches_like_hf(batches, chunk_size):
    flat = [d for b in batches for d in b]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EarlyStopWarning)
        a = train_from_iterator(batches, 300, [EOT], workers=1, chunk_size=chunk_size)
        b = train_from_iterator(iter(flat), 300, [EOT], workers=3, executor=InlineExecutor(), chunk_size=chunk_size)
    assert _fingerprint(a) == _fingerprint(b) and a.info["documents"] == len(flat)
    with pytest.raises(TypeError, match="document 1"): train_from_iterator([["ok", 3]], 300, workers=1)


_FORKS: list | None = None  # while a list: the names of the threads alive at each fork of this process


def _note_fork():
    if _FORKS is not None:
        import threading
        _FORKS.append(sorted(t.name for t in threading.enumerate()))


if hasattr(__import__("os"), "register_at_fork"):
    __import__("os").register_at_fork(before=_note_fork)


def test_train_bpe_forks_its_workers_before_the_hashing_thread_starts(tinystories_sample, monkeypatch):
    "Forking while a thread runs is unsafe (Python 3.12 warns): the SHA-256 thread starts once the workers exist."
    import multiprocessing, time
    if multiprocessing.get_start_method() != "fork": pytest.skip("the workers are not forked here")
    run = chunking._BackgroundSHA256.run
    def slow_run(self): time.sleep(0.5); run(self)  # a 1 MB file hashes in a millisecond: make the thread last
    monkeypatch.setattr(chunking._BackgroundSHA256, "run", slow_run)
    global _FORKS
    _FORKS = []
    try:
        counts, record = chunking.count_file(tinystories_sample, [EOT], 2, None, GPT2_PATTERN, "strict", False,
                                              1 << 16, 1 << 14, sha256=True)
    finally: forks, _FORKS = _FORKS, None
    assert record["processes"] == 2 and record["ranges"] > 2
    assert len(forks) >= 1  # the worker process was forked from this process (this one is the other worker)...
    assert not any("bpe_nb-sha256" in names for names in forks)  # ... before the hashing thread existed
    assert record["sha256"] == hashlib.sha256(tinystories_sample.read_bytes()).hexdigest()


def test_every_fork_of_a_training_run_finds_one_thread(tinystories_sample, tmp_path):
    "train_bpe with progress bars, workers and the SHA-256 thread, then encode_file: no fork sees a second thread."
    import multiprocessing, subprocess, textwrap
    if multiprocessing.get_start_method() != "fork": pytest.skip("the workers are not forked here")
    big = tmp_path / "three_samples.txt"
    big.write_bytes(tinystories_sample.read_bytes() * 3)
    script = textwrap.dedent(f"""
        import os, threading, sys
        seen = []
        os.register_at_fork(before=lambda: seen.append(sorted(t.name for t in threading.enumerate())))
        from bpe_nb.training import train_bpe
        model = train_bpe({str(tinystories_sample)!r}, 400, ["<|endoftext|>"], workers=2, min_chunk_size=1 << 16)
        from bpe_nb.encoder import Tokenizer
        tok = Tokenizer.from_model(model)
        tok.encode_file({str(big)!r}, {str(tmp_path / "ids.npy")!r}, workers=2)  # over 2 MB: 2 ranges at least
        print(len(seen), sorted({{tuple(s) for s in seen}}))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    n, kinds = out.stdout.strip().split(" ", 1)
    assert int(n) >= 3  # 1 counting worker (the parent is the other), 2 encoding workers
    assert kinds == "[('MainThread',)]", kinds


# --- the old names of blocks: `piece` means a pre-token; a file is read in blocks -------------------------------------------

def test_piece_size_is_a_deprecated_alias_of_block_size(tmp_path):
    "`piece_size=` (and `read_pieces`, `Piece`) still work, warn DeprecationWarning, and give the block_size result."
    text = "".join(f"story {i} is here.<|endoftext|>" for i in range(300))
    p = tmp_path / "t.txt"; p.write_text(text)
    want = count_pretokens_file(p, [EOT], workers=1, block_size=64)
    with pytest.warns(DeprecationWarning, match="piece_size is deprecated: use block_size"):
        assert count_pretokens_file(p, [EOT], workers=1, piece_size=64) == want
    with pytest.warns(DeprecationWarning, match="piece_size is deprecated"):
        assert chunking.count_file(p, [EOT], workers=1, piece_size=64)[0] == want
    with pytest.warns(DeprecationWarning, match="piece_size is deprecated"):  # the alias is used: 0 is refused
        with pytest.raises(ValueError, match="block_size must be >= 1, got 0"): count_pretokens_file(p, piece_size=0)
    blocks = list(read_blocks(p, 0, len(text), [EOT], block_size=64))
    assert len(blocks) > 10 and all(isinstance(x, chunking.Piece) for x in blocks) and chunking.Piece is Block
    with pytest.warns(DeprecationWarning, match="read_pieces is deprecated"):
        assert list(chunking.read_pieces(p, 0, len(text), [EOT], piece_size=64)) == blocks
    with pytest.warns(DeprecationWarning, match="piece_size is deprecated"):
        old = train_bpe(p, 300, [EOT], workers=1, progress=False, piece_size=64)
    new = train_bpe(p, 300, [EOT], workers=1, progress=False, block_size=64)
    assert old.merges == new.merges and len(new.merges) == 300 - 257
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new name warns nothing
        count_pretokens_file(p, [EOT], workers=1, block_size=64)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from([*PIECES, "2024", "7", "'S", "'d", "\r\n/", "HELLOworld"]), max_size=40).map("".join),
       st.sampled_from([LLAMA3_PATTERN, TEKKEN_PATTERN]))
def test_the_open_models_patterns_split_exactly_at_a_space_after_a_non_space(text, pattern):
    # The lemma for Llama 3's and Tekken's patterns, on pieces rich in digits, contractions and case runs.
    rx = chunking.compile_pattern(pattern)
    whole = rx.findall(text)
    for p in range(1, len(text)):
        if text[p] == " " and not regex.match(r"\s", text[p - 1]):
            assert rx.findall(text[:p]) + rx.findall(text[p:]) == whole, (text, p)
