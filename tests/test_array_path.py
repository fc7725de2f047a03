"""The array path: chapter 00a's pre-tokenizer (`array_bounds`) and chapter 04a's bulk encoder, against the regex path and tiktoken.

The regex path is the reference: for every pattern in `ARRAY_RULES`, the pre-tokens the array rules find
must be the ones `regex` finds, on any text (hypothesis), and the ids of cl100k and o200k through the
array path must be tiktoken's on prose, Python source, mixed English/CJK and random unicode.
"""
import random
import sys

import numpy as np
import pytest
import regex
from hypothesis import given, settings, strategies as st

import bpe_nb.array_pretokenize as ap
from conftest import wide_text
import bpe_nb.fast_encoding as fe
from bpe_nb.encoder import Tokenizer
from bpe_nb.array_pretokenize import ARRAY_RULES, CL100K_RULES, LLAMA3_RULES, O200K_RULES, TEKKEN_RULES
from bpe_nb.pretokenize import CL100K_PATTERN, LLAMA3_PATTERN, O200K_PATTERN, TEKKEN_PATTERN, compile_pattern

LLAMA3, TEKKEN = LLAMA3_PATTERN, TEKKEN_PATTERN  # chapter 00
PATTERNS = [(CL100K_PATTERN, CL100K_RULES), (O200K_PATTERN, O200K_RULES), (LLAMA3, LLAMA3_RULES), (TEKKEN, TEKKEN_RULES)]

# characters of every class the rules tell apart, the ones the rules single out, and some of every script
SPECIAL = list("aAbZsStTdDmMlLvVrReE'  \t\n\r/!.,;-_0123456789") + [
    "é", "É", "ß", "ǅ", "ʰ", "中", "文", "の", "한", "\u0301", "\u0903", "\u00a0", "\u3000", "\x85", "\u2028", "²", "½",
    "Ⅻ", "ſ", "\x1c", "\x1f", "\x0b", "\x0c", "—", "“", "🙂", "\U0001d400", "\u0660", "\ufeff"]
chars = st.one_of(st.sampled_from(SPECIAL), st.characters(blacklist_categories=("Cs",)))
texts = st.lists(st.text(chars, min_size=1, max_size=40), min_size=1, max_size=4)


def array_pieces(rules, pattern, parts):
    joined = "".join(parts)
    edge = np.zeros(len(joined) + 1, bool)
    edge[np.cumsum([0, *map(len, parts)])] = True
    s = ap.array_bounds(joined, edge, rules, compile_pattern(pattern).findall)[0].tolist()
    return [joined[a:b] for a, b in zip(s, s[1:])]


def test_the_patterns_are_registered():
    for pattern, rules in PATTERNS: assert ARRAY_RULES[pattern] == rules
    import json, pathlib
    try: import mistral_common
    except ImportError: return
    path = pathlib.Path(mistral_common.__file__).parent / "data" / "tekken_240911.json"
    if path.exists(): assert json.loads(path.read_text())["config"]["pattern"] == TEKKEN


@pytest.mark.parametrize("pattern,rules", PATTERNS, ids=["cl100k", "o200k", "llama3", "tekken"])
@settings(max_examples=400)
@given(parts=texts)
def test_array_bounds_equal_regex(pattern, rules, parts):
    rx = compile_pattern(pattern)
    assert array_pieces(rules, pattern, parts) == [p for t in parts for p in rx.findall(t)]


def check_random_parts(pattern, rules, alphabet, seed, longest, most):
    "3,000 draws of 1 to `most` texts of 1 to `longest` characters of `alphabet`: the array rules find `regex`'s pre-tokens."
    rng, rx = random.Random(seed), compile_pattern(pattern)
    for _ in range(3000):
        parts = ["".join(rng.choices(alphabet, k=rng.randint(1, longest))) for _ in range(rng.randint(1, most))]
        assert array_pieces(rules, pattern, parts) == [p for t in parts for p in rx.findall(t)], parts


@pytest.mark.parametrize("pattern,rules", PATTERNS, ids=["cl100k", "o200k", "llama3", "tekken"])
def test_array_bounds_dense_random(pattern, rules):
    "Short texts over the singled-out characters only: every rule's corner cases, thousands of times."
    check_random_parts(pattern, rules, SPECIAL, seed=7, longest=10, most=3)


CHAINS = list("aAsSdDmMtTlLvVe" + "ErR" + "'" * 4) + ["ſ", "é", "中", " ", "\u0301"]  # contractions in every case, chained


@pytest.mark.parametrize("pattern,rules", PATTERNS, ids=["cl100k", "o200k", "llama3", "tekken"])
def test_chains_of_contractions_equal_regex(pattern, rules):
    "Contractions one right after another (`a'S'S'Se`): in o200k's rules every other one of a chain is a suffix."
    check_random_parts(pattern, rules, CHAINS, seed=11, longest=24, most=2)
    rx = compile_pattern(pattern)
    for t in ["a'S'S'Se", "x's's's'sy", "é'LL'VE'REx", "a'T'M'De'D"]: assert array_pieces(rules, pattern, [t]) == rx.findall(t)


def left_to_regex(rules, text):
    "The positions the array rules leave to the regex (`_hard`) in one text."
    cp = ap._code_points(text); edge = np.zeros(len(text) + 1, bool); edge[[0, -1]] = True
    return ap._array_starts(cp, ap.char_classes(cp), edge, rules)[1].tolist()


SLASHES = list("/\n\r.;*'xXaB1 \t") + ["//", "\n//", ".\n", "\r\n/", " /", "'s", "'S", "中", "é", "ǅ"]  # `[\r\n/]*`


@pytest.mark.parametrize("pattern,rules", PATTERNS, ids=["cl100k", "o200k", "llama3", "tekken"])
def test_slashes_after_newlines_equal_regex_without_it(pattern, rules):
    "Punctuation, newlines and slashes (`;\\n//x`, `.\\n/*a`): o200k's `[\\r\\n/]*` by the array rules alone, no stretch left to the regex."
    check_random_parts(pattern, rules, SLASHES, seed=13, longest=14, most=3)
    text = ";\n//x.\n/*a\n\n//'s"
    assert left_to_regex(rules, text) == []  # nothing for `_by_regex`
    assert array_pieces(rules, pattern, [text]) == compile_pattern(pattern).findall(text)
    if rules.slash: assert array_pieces(rules, pattern, [text])[:3] == [";\n//", "x", ".\n/"]


MARKS = list("\u0301\u0903\u093e\u094dकनaAxX'sS.;/ \t\n1") + ["न्", "x's\u0301", "\u0301\u0301", "é", "中", "ǅ", "'S"]


@pytest.mark.parametrize("pattern,rules", PATTERNS, ids=["cl100k", "o200k", "llama3", "tekken"])
def test_marks_equal_regex_and_those_after_letters_are_the_arrays(pattern, rules):
    "Marks after letters, after marks, after punctuation, digits, suffixes and at a text's start: only those not after a letter go to the regex."
    check_random_parts(pattern, rules, MARKS, seed=17, longest=14, most=3)
    text = "नमस्ते दुनिया x\u0301y Éa\u0301B"  # every mark right after a letter
    assert left_to_regex(rules, text) == []
    assert array_pieces(rules, pattern, [text]) == compile_pattern(pattern).findall(text)
    for t in [".\u0301a", "1\u0301", "x's\u0301a"]:  # after punctuation, a digit: the regex decides; after a suffix, the arrays
        assert len(left_to_regex(rules, t)) == (rules.cased and "'" not in t), t
        assert array_pieces(rules, pattern, [t]) == compile_pattern(pattern).findall(t)


def test_contraction_letters_match_regex():
    "The letters `(?i)` folds onto s d m t (one-letter contractions) and onto l v r e, over every code point."
    every = "".join(chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF)
    one = {m.group() for m in regex.finditer(r"(?i:[sdmt])", every)}
    assert one == {chr(c) for c in np.flatnonzero(ap._C1)}
    assert {m.group() for m in regex.finditer(r"(?i:[lver])", every)} == set("lverLVER")  # ASCII only, as coded


def test_classes_match_regex():
    "The class table agrees with `regex` on every assigned or unassigned code point of the BMP and plane 1."
    cps = np.array([c for c in range(0x20000) if not 0xD800 <= c <= 0xDFFF], np.uint32)
    f = ap.char_classes(cps)
    s = "".join(map(chr, cps.tolist()))
    for cls, rx in [(ap.LL, r"\p{Ll}"), (ap.DIGIT, r"\p{N}"), (ap.MARK, r"\p{M}")]:
        assert set(np.flatnonzero(f == cls).tolist()) == {m.start() for m in regex.finditer(rx, s)}
    assert set(np.flatnonzero(f >= ap.SPACE).tolist()) == {m.start() for m in regex.finditer(r"\s", s)}


@pytest.fixture
def bulk_always(monkeypatch):
    "Every text takes the bulk (array) path, however short."
    monkeypatch.setattr(fe, "_BULK_MIN", 0); monkeypatch.setattr(fe, "_ARRAY_MIN", 0)


def mixed_text(rng: random.Random, n: int) -> str:
    "English, CJK, accents, digits, code-ish punctuation and contractions, in random order."
    words = ["The", " quick", " brown", " fox", " can't", " WON'T", " they'll", " 2024", " 1234567", ",", ".", "\n",
             "\n\n", "  ", " 中文文本", "没有空格", "。", "日本語のテキスト", "、", " 한국어", " naïve", " café", " Ünïcödé",
             " e\u0301", " x/y", "\n//", " //", "\t", " (x)", " {'a': 1}", " HTTPServer", " CamelCase", " \u00a0",
             " 🙂", " ½", " ſ", "'s", " 'll", "—", " “q”"]
    return "".join(rng.choice(words) for _ in range(n))


@pytest.mark.parametrize("mode", ["concat", "one by one", "tables"])
def test_ids_equal_tiktoken(real_pair, bulk_always, tinystories_sample, mode):
    "Cold and warm, with the new pre-tokens merged by `_merge_concat` (a fresh tokenizer of ranks), or without the token keys one by one or in rounds with the merge tables."
    shared, reference = real_pair
    ours = type(shared)(shared._rank_of, shared.special_tokens, shared.pattern)  # a fresh one: no tables yet
    assert ours._token_keys is not None
    tables = mode == "tables"
    if mode != "concat": ours._token_keys = None  # chapter 04a's `_merge_many` for short pre-tokens too
    ours._one_by_one = len(shared._rank_of) if tables else -10**12  # the tables from the first block on, or never
    assert ours._rules is not None and ours._bulk_ok
    import pathlib
    code = "".join(p.read_text(encoding="utf-8") for p in sorted(pathlib.Path(fe.__file__).parent.glob("*.py"))[:6])
    prose = tinystories_sample.read_text(encoding="utf-8")[:150_000]
    rng = random.Random(0)
    for text in (prose, code, mixed_text(rng, 20_000), "".join(rng.choice(SPECIAL) for _ in range(5000))):
        ours._cache.clear(); ours._bulk_local.state = None  # cold: the new pre-tokens are merged together
        assert ours.encode(text, disallowed_special=()) == reference.encode_ordinary(text)
        assert ours.encode(text, disallowed_special=()) == reference.encode_ordinary(text)  # warm
    assert ("_ranks" in ours.__dict__) == tables


@settings(max_examples=60)
@given(parts=st.lists(st.text(chars, max_size=60), min_size=1, max_size=5))
def test_random_unicode_equals_tiktoken(real_pair, parts):
    "Random unicode, with `<|endoftext|>` between the parts, through the array path: tiktoken's ids."
    ours, reference = real_pair
    text = "<|endoftext|>".join(parts)
    saved, fe._ARRAY_MIN = fe._ARRAY_MIN, 0  # (a function-scoped fixture does not mix with @given)
    try: got = ours.encode(text, allowed_special="all")
    finally: fe._ARRAY_MIN = saved
    assert got == reference.encode(text, allowed_special="all")


def test_encode_batch_short_texts(real_pair, bulk_always):
    ours, reference = real_pair
    rng = random.Random(1)
    docs = [mixed_text(rng, rng.randint(0, 30)) for _ in range(300)]
    assert ours.encode_batch(docs, workers=1) == reference.encode_ordinary_batch(docs)


def test_toy_vocab_llama3_and_tekken(bulk_always):
    "Llama 3's and Tekken's patterns through the bulk path give the regex path's ids (a toy vocab that merges across pre-tokens if it can)."
    byte_vocab = {i: bytes([i]) for i in range(256)}
    merges = [(b"'", b"s"), (b" ", b"t"), (b"1", b"2"), (b"12", b"3"), (b"\n", b"/"), (b" ", b"\xe4"), (b"a", b"'")]
    vocab = {**byte_vocab, **{256 + i: a + b for i, (a, b) in enumerate(merges)}}
    rng = random.Random(2)
    text = mixed_text(rng, 3000) + " 1234 a's t't"
    for pattern in (LLAMA3, TEKKEN):
        tok = Tokenizer(vocab, merges, pattern=pattern)
        assert tok._rules is not None
        expected = []
        tok._encode_ordinary(text, expected)  # the regex path
        assert tok.encode(text) == expected


def test_scripts_with_marks(real_pair, bulk_always):
    "Devanagari, Thai and vowelled Arabic are full of marks (left to the regex under o200k's rules): still tiktoken's ids."
    ours, reference = real_pair
    rng = random.Random(3)
    words = [" नमस्ते", " दुनिया", " हिन्दी", " ภาษาไทย", " สวัสดี", " مَرْحَبًا", " بِالْعَالَم", " e\u0301t\u00e9", " plain", " 123", ".", "\n"]
    text = "".join(rng.choice(words) for _ in range(20_000))
    ours._cache.clear(); ours._bulk_local.state = None
    assert ours.encode(text, disallowed_special=()) == reference.encode_ordinary(text)
    for pattern, rules in PATTERNS:
        parts = [text[:3000], text[3000:3100], text[3100:9000]]
        assert array_pieces(rules, pattern, parts) == [p for t in parts for p in compile_pattern(pattern).findall(t)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(min_size=2, max_size=6).map(lambda b: bytes(x % 4 + 97 for x in b)), min_size=1, max_size=80),
       st.lists(st.binary(min_size=1, max_size=15).map(lambda b: bytes(x % 4 + 97 for x in b)), min_size=1, max_size=200))
def test_merge_concat_equals_the_scan_on_random_ranks(extra, words):
    "`_merge_concat` (tiktoken's rule in rounds) against `_encode_bytes` (one by one), on random tokens over four letters: merges chain, tie and compete; tokens need not be reachable."
    from bpe_nb.interop import RanksTokenizer
    from bpe_nb.pretokenize import CL100K_PATTERN
    ranks = {bytes([i]): i for i in range(256)}
    for t in extra: ranks.setdefault(t, len(ranks))
    tok = RanksTokenizer(ranks, {}, CL100K_PATTERN)
    assert tok._token_keys is not None
    lens = np.array([len(w) for w in words])
    flat, at = np.frombuffer(b"".join(words), np.uint8), np.cumsum(lens) - lens
    rows = np.frombuffer(b"".join(words) + bytes(15), np.uint8)[at[:, None] + np.arange(int(lens.max()))]  # padded, as `_merge_many` takes them
    want = [tok._encode_bytes(w) for w in words]
    assert tok._merge_concat(flat, at, lens) == want
    assert tok._merge_concat(flat, at[::-1], lens[::-1]) == want[::-1]  # rows anywhere in the bytes, in any order
    assert tok._merge_many(rows, lens) == want


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=25).map(lambda b: bytes(x % 3 + 97 for x in b)), min_size=1, max_size=40),
       st.lists(st.binary(max_size=30).map(lambda b: bytes(x % 3 + 97 for x in b)), min_size=1, max_size=100),
       st.randoms(use_true_random=False))
def test_merge_concat_on_long_rows(tails, words, rnd):
    "Rows of up to 45 bytes and tokens of up to 40 that share their first 15 bytes (so their keys are shared): `_merge_concat` against `_encode_bytes`, the long spans it finds by key confirmed by their bytes."
    from bpe_nb.interop import RanksTokenizer
    from bpe_nb.pretokenize import CL100K_PATTERN
    head = b"abcabcabcabcabc"  # 15 bytes
    new = sorted({(head + t)[:k] for t in tails for k in range(2, len(head + t) + 1)})  # every prefix, so merges can build them
    rnd.shuffle(new)  # in any order: merges chain, tie and compete
    ranks = {bytes([i]): i for i in range(256)} | {t: 256 + k for k, t in enumerate(new)}
    tok = RanksTokenizer(ranks, {}, CL100K_PATTERN)
    assert len(tok._token_keys[4]) == sum(len(t) > 15 for t in new)  # the long tokens, by their bytes
    rows_in = [head + w if k % 2 else w or b"a" for k, w in enumerate(words)]
    lens = np.array([len(w) for w in rows_in])
    flat, at = np.frombuffer(b"".join(rows_in), np.uint8), np.cumsum(lens) - lens
    rows = np.frombuffer(b"".join(rows_in) + bytes(45), np.uint8)[at[:, None] + np.arange(int(lens.max()))]
    want = [tok._encode_bytes(w) for w in rows_in]
    assert tok._merge_concat(flat, at, lens) == want
    assert _seqs_of(tok._merge_concat(flat, at, lens, whole=False, flat=True)) == [tok._merge_bytes(w) for w in rows_in]
    if rows.shape[1] <= tok._concat_width: assert tok._merge_many(rows, lens) == want


def _seqs_of(flat):
    from bpe_nb.fast_encoding import _seqs
    return _seqs(*flat)


def test_bulk_state_of_ranks_holds_only_the_pre_tokens_met(real_pair, bulk_always):
    "A tokenizer of ranks keeps its tokens in `_token_keys`, shared and never written: a bulk state holds only the pre-tokens it met, and is dropped when they pass `cache_size`."
    from bpe_nb.pretokenize import compile_pattern
    shared, reference = real_pair
    ours = type(shared)(shared._rank_of, shared.special_tokens, shared.pattern, cache_size=64)
    arrays = lambda keys: [a for t in (keys, keys.table) for a in t.__dict__.values() if isinstance(a, np.ndarray)]  # the front's and the table's
    seed = [a.copy() for a in arrays(ours._token_keys[0])]
    text = "the cat sat on the mat. " * 50
    met = set(compile_pattern(ours.pattern).findall(text))
    assert ours.encode(text) == reference.encode_ordinary(text)
    state = ours._bulk_local.state
    assert state is not None and state.rows.n == len(met) < 64  # kept: few, all of them tokens found by key
    rng = random.Random(5)
    words = " ".join("".join(rng.choice("qxzjvkw") for _ in range(7)) for _ in range(400))  # not tokens
    assert ours.encode(words) == reference.encode_ordinary(words)
    assert ours._bulk_local.state is None  # dropped: 400 new pre-tokens
    assert ours.encode(text) == reference.encode_ordinary(text)
    assert ours._bulk_local.state.rows.n == len(met)
    after = arrays(ours._token_keys[0])
    assert len(after) == len(seed) == 6 and all(np.array_equal(a, b) for a, b in zip(seed, after))  # the tokens' keys: untouched


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 999), st.integers(0, 999)), min_size=1, max_size=60),
       st.lists(st.tuples(st.integers(0, 999), st.integers(0, 999)), max_size=8))
def test_merge_recovery_in_bulk_equals_the_walk(pairs, swaps):
    "Merges recovered with `_merge_concat` for short tokens equal the walk in rank order, and so do its errors (which token, which problem): tokens made by merging two earlier ones (up to 30 bytes), their ranks partly swapped, so that some are not two lower-ranked tokens and some are built from other parts inside longer ones."
    from bpe_nb.interop import RanksTokenizer, _merges_from_ranks
    from bpe_nb.pretokenize import CL100K_PATTERN
    toks = [b"a", b"b", b"c"]
    for i, j in pairs:
        t = toks[i % len(toks)] + toks[j % len(toks)]
        if len(t) <= 30 and t not in toks: toks.append(t)
    extra = toks[3:]
    for i, j in swaps:
        if extra: i, j = i % len(extra), j % len(extra); extra[i], extra[j] = extra[j], extra[i]
    ranks = {bytes([i]): i for i in range(256)}
    for t in extra: ranks[t] = len(ranks)
    tok = RanksTokenizer(ranks, {}, CL100K_PATTERN)
    def outcome(t):
        try: return _merges_from_ranks(ranks, ValueError, t)
        except ValueError as e: return str(e)
    assert outcome(tok) == outcome(None)



# the characters the rules single out made frequent, long runs of whitespace, and each width's own characters
SINGLED = list("aAsStTlLvVrReEdDmM'  \t\n\r/!.,0123456789") + ["    ", "\n\n", " \t\n "]
WIDTHS = {"ascii": st.characters(max_codepoint=0x7F),  # read as uint8
          "latin1": st.one_of(st.sampled_from(["é", "ß", "\x85", "\xa0", "ÿ", "²"]), st.characters(max_codepoint=0xFF)),  # uint8
          "bmp": st.one_of(st.sampled_from(["ſ", "中", "\u0301", "\u3000", "“", "ǅ"]),  # uint16
                           st.characters(max_codepoint=0xFFFF, blacklist_categories=("Cs",)))}


@pytest.mark.parametrize("width", list(WIDTHS))
@pytest.mark.parametrize("pattern", sorted(ap.ARRAY_PATTERNS), ids=lambda p: f"pattern{sorted(ap.ARRAY_PATTERNS).index(p)}")
@settings(max_examples=120)
@given(data=st.data())
def test_narrow_code_points_equal_uint32_and_regex(pattern, width, data):
    """A block whose characters fit in uint8 (ASCII, Latin-1) or uint16 (the BMP) is read at that width; the same
    texts in a block with one more text, "🙂", behind an edge are read as uint32. Both give the regex's pre-tokens."""
    piece = st.one_of(st.sampled_from(SINGLED), WIDTHS[width])
    parts = data.draw(st.lists(st.lists(piece, min_size=1, max_size=30).map("".join), min_size=1, max_size=4))
    rx, joined = compile_pattern(pattern), "".join(parts)
    def starts(block_parts):
        block = "".join(block_parts)
        edge = np.zeros(len(block) + 1, bool); edge[np.cumsum([0, *map(len, block_parts)])] = True
        return ap.pretoken_starts(block, edge, pattern)
    narrow, cp = starts(parts)
    wide, cp32 = starts([*parts, "🙂"])
    assert cp32.dtype == np.uint32 and (cp is None or cp.dtype.itemsize <= 2 and cp.tolist() == list(map(ord, joined)))
    assert narrow.tolist() == wide[:-1].tolist()  # the same starts; the uint32 block has one more text
    s = narrow.tolist()
    assert [joined[a:b] for a, b in zip(s, s[1:])] == [p for t in parts for p in rx.findall(t)]



def test_long_runs_of_wide_characters_equal_tiktoken(real_pair, bulk_always):
    "Long pre-tokens of CJK, kana, hangul, Thai, Devanagari: cut where no token crosses (`_cut_long`), their parts merged without the shortcut: tiktoken's ids, cold and warm."
    shared, reference = real_pair
    ours = type(shared)(shared._rank_of, shared.special_tokens, shared.pattern)
    for seed in range(3):
        text = wide_text(random.Random(seed), 3000)
        ours._cache.clear(); ours._bulk_local.state = None
        assert ours.encode_ordinary(text) == reference.encode_ordinary(text)
        assert ours.encode_ordinary(text) == reference.encode_ordinary(text)  # warm: the parts' rows are kept
        state = ours._bulk_local.state
        assert ((state.table.k2 & fe._CUT) != 0).any()  # some pre-tokens were cut
    docs = [wide_text(random.Random(9), rng_n) for rng_n in (1, 5, 40, 200)]
    assert ours.encode_batch(docs, workers=1) == reference.encode_ordinary_batch(docs)


CJK6 = "中文字本日語😀𠀋éก\u0301"  # six CJK characters, two of four bytes, one of two, Thai, a combining mark


def random_bpe_ranks(rng: random.Random, n_merges: int, swaps: int, pool: str = CJK6) -> dict:
    "Ranks as BPE would learn them on random text over the characters of `pool` (six CJK characters...), with merges picked at random positions (so tokens start and end inside characters too), then `swaps` ranks exchanged (so some tokens are out of reach)."
    seq = [bytes([b]) for b in "".join(rng.choice(pool) for _ in range(300)).encode()]
    ranks = {bytes([i]): i for i in range(256)}
    for _ in range(n_merges):
        i = rng.randrange(len(seq) - 1)
        a, b = seq[i], seq[i + 1]
        ranks.setdefault(a + b, len(ranks))
        out, j = [], 0
        while j < len(seq):
            if j + 1 < len(seq) and seq[j] == a and seq[j + 1] == b: out.append(a + b); j += 2
            else: out.append(seq[j]); j += 1
        seq = out
        if len(seq) < 2: break
    extra = [t for t in ranks if len(t) > 1]
    for _ in range(swaps if len(extra) > 1 else 0):
        x, y = rng.sample(extra, 2); ranks[x], ranks[y] = ranks[y], ranks[x]
    return ranks


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.integers(5, 300), st.integers(0, 60))
def test_cuts_on_random_ranks_with_partial_characters_equal_tiktoken(seed, n_merges, swaps):
    "Random BPE ranks over a few characters of one to four bytes, mostly CJK (tokens that start or end inside a character, several characters, some out of reach): the cut array path gives tiktoken's ids on long runs of them."
    tiktoken = pytest.importorskip("tiktoken")
    from bpe_nb.interop import RanksTokenizer
    rng = random.Random(seed)
    ranks = random_bpe_ranks(rng, n_merges, swaps)
    text = " ".join("".join(rng.choice(CJK6) for _ in range(rng.randint(1, 40))) for _ in range(30))
    reference = tiktoken.Encoding("random-cjk", pat_str=O200K_PATTERN, mergeable_ranks=ranks, special_tokens={})
    saved = fe._ARRAY_MIN, fe._CONCAT_MIN
    fe._ARRAY_MIN = 0  # (a function-scoped fixture does not mix with @given)
    try:
        for fe._CONCAT_MIN in (0, saved[1]):  # the new pre-tokens merged together by `_merge_concat`, then (fewer than the default) one by one
            ours = RanksTokenizer(ranks, {}, O200K_PATTERN)  # cold each time
            assert ours.encode_ordinary(text) == reference.encode_ordinary(text)
            assert ours.encode_ordinary(text) == reference.encode_ordinary(text)
    finally: fe._ARRAY_MIN, fe._CONCAT_MIN = saved


POOLS = [CJK6, "中文字éжшab ", "日本語ёжик", "éàüжшщ中a", "中文字本日語 ab"]  # characters of two and three bytes, with ASCII


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32), st.integers(5, 300), st.sampled_from([0, 1, 5, 30]), st.sampled_from(POOLS))
def test_characters_started_as_their_token_merge_as_the_plain_rounds(seed, n_merges, swaps, pool):
    "Chapter 04a's `_premerge` (characters of two or three bytes start as their token where `_char_rule` allows): `_merge_concat` gives the ids of its plain rounds and of `_encode_bytes`, on random ranks whose tokens start, end and reach across characters."
    from bpe_nb.interop import RanksTokenizer
    rng = random.Random(seed)
    tok = RanksTokenizer(random_bpe_ranks(rng, n_merges, swaps, pool), {}, O200K_PATTERN)
    words = ["".join(rng.choice(pool) for _ in range(rng.randint(1, 6))).encode() for _ in range(120)]
    lens = np.array([len(w) for w in words])
    b, at = np.frombuffer(b"".join(words), np.uint8), np.cumsum(lens) - lens
    chars = tok._chars
    assert chars is not None
    for whole in (True, False):
        tok._chars = chars; got = tok._merge_concat(b, at, lens, whole=whole)
        tok._chars = None; assert got == tok._merge_concat(b, at, lens, whole=whole), (seed, whole)
        assert got == [(tok._encode_bytes if whole else tok._merge_bytes)(w) for w in words], (seed, whole)
    tok._chars = chars


@pytest.mark.parametrize("tokens, row", [
    ([b"\xa9\xa9", "é".encode()], b"\xc3\xa9\xa9"),  # a continuation byte after the character: not its end
    ([b"\xe4\x83", "䃩".encode(), "é".encode()], b"\xe4\xc3\xa9"),  # a lead byte without its continuation bytes
    ([b"\xe0\x82", b"\xe0\x82\x80", "\u0080".encode()], b"a\xc2\x80b"),  # an overlong token shares U+0080's code point: not its token
])
def test_bytes_that_are_not_utf8_take_the_rounds(tokens, row):
    "`_premerge` starts only well-formed characters whole, and `_char_rule` keys no overlong form: rows and tokens that are not UTF-8 merge as the plain rounds merge them (from an independent review)."
    from bpe_nb.interop import RanksTokenizer
    tok = RanksTokenizer({bytes([i]): i for i in range(256)} | {t: 256 + k for k, t in enumerate(tokens)}, {}, O200K_PATTERN)
    b, at, lens = np.frombuffer(row, np.uint8), np.array([0]), np.array([len(row)])
    got = tok._merge_concat(b, at, lens, whole=False)
    saved, tok._chars = tok._chars, None
    try: assert got == tok._merge_concat(b, at, lens, whole=False) == [tok._merge_bytes(row)]
    finally: tok._chars = saved


@pytest.mark.parametrize("real_pair", ["o200k_base"], indirect=True)
def test_characters_start_as_their_token_on_real_ranks(real_pair):
    "On o200k's ranks most CJK characters of a text start as their token (`_premerge` does work), with the ids tiktoken gives."
    ours, theirs = real_pair
    text = "他们在公园里散步然后回家吃饭。東京都の天気は晴れ、明日は雨が降るでしょう。"
    words = [text[i:i + 4].encode() for i in range(len(text) - 3)]
    lens = np.array([len(w) for w in words])
    b, at = np.frombuffer(b"".join(words), np.uint8), np.cumsum(lens) - lens
    made, saved = [], ours._premerge
    ours._premerge = lambda *a: made.append(saved(*a)) or made[-1]
    try: got = ours._merge_concat(b, at, lens)
    finally: del ours._premerge
    assert sum(made) > len(words) * 2  # most of the four characters of each row start whole
    assert got == [tuple(theirs._encode_single_piece(w)) for w in words]  # (tiktoken: the shortcut, then its merges)


@pytest.mark.parametrize("run", ["中文字本日語", "中文字"])
def test_a_part_that_is_an_unreachable_token_is_merged(bulk_always, run):
    "A token no merging reaches (`run`, its pairs not tokens) is a part of a longer pre-token, cut where no token crosses: merged, not taken whole, as tiktoken does (a long part and a short one)."
    tiktoken = pytest.importorskip("tiktoken")
    from bpe_nb.interop import RanksTokenizer
    ranks = {bytes([i]): i for i in range(256)}
    ranks[run.encode()] = 256
    text = (run + "木") * 3 + " " + run + "木"  # pre-tokens `run` + 木, cut before 木: no token crosses there
    reference = tiktoken.Encoding("unreachable", pat_str=O200K_PATTERN, mergeable_ranks=ranks, special_tokens={})
    ours = RanksTokenizer(ranks, {}, O200K_PATTERN)
    assert ours.encode_ordinary(text) == reference.encode_ordinary(text)
    assert 256 not in reference.encode_ordinary(text)
    assert ours.encode_ordinary(run) == [256] == reference.encode_ordinary(run)  # whole, it is the token


def text_and_tokens(pool: str, pieces: list[bytes], rnd) -> tuple[str, set[bytes]]:
    "60 random characters of `pool`, and tokens cut out of its bytes (a random span each: any start, any end), plus arbitrary bytes."
    text = "".join(rnd.choice(pool) for _ in range(60))
    data = text.encode()
    tokens = {bytes(rnd.choice(pieces))}
    for p in pieces:
        a = p[0] % len(data); tokens.add(data[a:a + 1 + len(p)])
    return text, tokens


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=9), min_size=1, max_size=40), st.randoms(use_true_random=False))
def test_crossed_covers_every_token_that_spans_a_boundary(pieces, rnd):
    "`_crossed` against brute force: for random tokens cut out of text of 2-, 3- and 4-byte characters (starting or ending inside any character), every boundary of two characters of three or four bytes that some token spans is reported crossed."
    text, tokens = text_and_tokens("中文日本語乭字😀𠀋éßกनि", pieces, rnd)
    data = text.encode()
    keys = fe._cross_tables(fe._crossing_keys([t for t in tokens if max(t) >= 0xE0]))
    starts = [len(text[:i].encode()) for i in range(len(text) + 1)]
    for i in range(1, len(text)):
        c1, c2 = text[i - 1], text[i]
        if ord(c1) < 0x800 or ord(c2) < 0x800: continue
        b = starts[i]
        spanned = any(data[a:e] in tokens for a in range(max(0, b - 16), b) for e in range(b + 1, min(len(data), b + 16) + 1))
        if spanned: assert fe._crossed(np.array([ord(c1)]), np.array([ord(c2)]), keys)[0], (c1, c2)


def crossed_by_search(c1, c2, keys):
    "`_crossed` by its definition, every key looked up by search: the reference for its tables."
    pairs, tails, heads = keys
    out = []
    for a, b in zip(c1.tolist(), c2.tolist()):
        u1, u2 = chr(a).encode(), chr(b).encode()
        hit = fe._member(pairs, np.array([a << 21 | b]))[0]
        for k in (1, 2, 3):
            if k < len(u1): hit |= fe._member(tails, np.array([k << 40 | int.from_bytes(u1[-k:], "big") << 8 | u2[0]]))[0]
            if k < len(u2): hit |= fe._member(heads, np.array([a << 26 | k << 24 | int.from_bytes(u2[:k], "big")]))[0]
        out.append(bool(hit))
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=9), min_size=1, max_size=40), st.randoms(use_true_random=False),
       st.sampled_from([None, 1, 2, 3]))
def test_crossed_equals_its_definition(pieces, rnd, bits):
    "`_crossed` (pairs by slot, a table per tail length, heads only after a character that ends one) against every key looked up by search, on boundaries of 3- and 4-byte characters: both ways, no boundary reported crossed that no key matches; with tiny slot tables too (most slots shared: the search behind them)."
    text, tokens = text_and_tokens("中文日本語乭字😀𠀋กนิ\uffff\u0800", pieces, rnd)
    keys = fe._crossing_keys([t for t in tokens if max(t) >= 0xE0])
    c1 = np.array([ord(c) for c in text[:-1]]); c2 = np.array([ord(c) for c in text[1:]])
    assert fe._crossed(c1, c2, fe._cross_tables(keys, bits)).tolist() == crossed_by_search(c1, c2, keys)


def test_a_special_token_inside_a_cut_run_and_the_cache(real_pair, bulk_always):
    "A special token between CJK runs that are cut; a cut pre-token is not cached (a clause is seldom met twice): the next call cuts it again, and its parts' ids come from the bulk state, or, for a part longer than a key, from the cache under its bytes."
    shared, reference = real_pair
    ours = type(shared)(shared._rank_of, shared.special_tokens, shared.pattern)
    run = "他们在公园里散步然后回家吃饭"
    text = (run + "<|endoftext|>" + run[::-1]) * 50
    assert ours.encode(text, allowed_special="all") == reference.encode(text, allowed_special="all")
    assert run not in ours._cache and ours._bulk_local.state.rows.n > 0  # cut, merged in parts: the parts are remembered
    assert ours.encode(text, allowed_special="all") == reference.encode(text, allowed_special="all")
    long_run = {"cl100k_base": "ご協力ありがとうございます", "o200k_base": "无法访问任何清单"}[reference.name]  # cut, with a part longer than a key
    text = ("他说：" + long_run + "。") * 3
    assert ours.encode(text) == reference.encode(text)
    parts = [k for k in ours._cache if type(k) is bytes]
    assert parts and all(len(k) > 15 and k.decode() not in ours._cache for k in parts)  # under its bytes, never its text
    ours._cache[parts[0]] = (-1,)  # a marker: the next call takes the long part from the cache
    assert -1 in ours.encode(text)


def test_unicode_tables_are_tiktokens():
    "Each code point is a letter (of each case), a mark, a digit or whitespace for `regex` exactly when it is for tiktoken's Rust regex."
    # Other Unicode tables class a newer character otherwise (Unicode 17 made U+0295 Lo; `regex` 2025.10 has them, tiktoken 0.14
    # does not) and give other ids: settings.ini pins `regex` to releases with tiktoken's tables; this says when that goes wrong.
    import tiktoken
    every = "".join(chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF)
    ranks = {bytes([i]): i for i in range(256)}
    for cls in [r"\p{L}", r"\p{Lu}", r"\p{Ll}", r"\p{Lt}", r"\p{Lm}", r"\p{Lo}", r"\p{M}", r"\p{N}", r"\s"]:
        enc = tiktoken.Encoding(name="classes", pat_str=cls, mergeable_ranks=ranks, special_tokens={})
        rust, ours = set(enc.decode_bytes(enc.encode_ordinary(every)).decode("utf-8")), set(regex.findall(cls, every))
        assert rust == ours, (cls, regex.__version__, [f"U+{ord(c):04X}" for c in sorted(rust ^ ours)[:8]])
