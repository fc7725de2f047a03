"Trainers: naive and incremental agree (differential), match the CS336 reference, and honour the contract."
import json
import random
import warnings
from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st

from bpe_nb import fast_merge, incremental  # importing fast_merge registers the fast loop with train_incremental
from bpe_nb.incremental import train_incremental, train_incremental_simple
from bpe_nb.naive import BPEModel, EarlyStopWarning, MergeProgress, merge_pair, train_naive
from bpe_nb.pretokenize import count_pretokens, printable_to_bytes

TRAINERS = [train_naive, train_incremental_simple, train_incremental]
from bpe_nb.naive import TIE_BREAKS
EOT = "<|endoftext|>"
SPECIALS = [EOT, "<pad>", EOT + EOT]


def train_quiet(trainer, *args, **kwargs) -> BPEModel:
    "Train with progress off and early-stop warnings silenced."
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EarlyStopWarning)
        return trainer(*args, progress=False, **kwargs)


def check_layout(m: BPEModel, specials=()):
    "The id layout every trained model must have."
    assert len(m.vocab) == 256 + len(m.merges) + len(m.special_tokens)
    assert all(m.vocab[i] == bytes([i]) for i in range(256))
    for k, (a, b) in enumerate(m.merges): assert m.vocab[256 + k] == a + b
    learned = [m.vocab[i] for i in range(256 + len(m.merges))]
    assert len(set(learned)) == len(learned), "two learned tokens have the same bytes"
    assert list(m.special_tokens) == list(specials)
    for j, s in enumerate(specials):
        assert m.special_tokens[s] == 256 + len(m.merges) + j and m.vocab[m.special_tokens[s]] == s.encode()


# ---- generated corpora -------------------------------------------------------------------------
unicode_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=120)
words = st.sampled_from(["the", " the", "cat", "aa", "ab", "abab", "low", "lower", "é", "€", "中文", "👍🏽",
                         "don't", "123", "!!", "\n", "  ", "\t"])
repetitive = st.tuples(st.lists(words, min_size=1, max_size=6), st.integers(1, 25)).map(
    lambda t: " ".join(t[0] * t[1]))
runs = st.lists(st.tuples(st.sampled_from(["a", "x", " ", "é", "\n", "ab"]), st.integers(1, 40)),
                min_size=1, max_size=4).map(lambda rs: " ".join(c * k for c, k in rs))
plain = st.one_of(unicode_text, repetitive, runs)
with_specials = st.lists(st.one_of(plain, st.sampled_from(SPECIALS)), min_size=1, max_size=5).map("".join)


@st.composite
def corpora(draw):
    "A `(counts, vocab_size, special_tokens)` triple: text corpora of four kinds, or a raw count table."
    specials = draw(st.sampled_from([(), (EOT,), (EOT, "<pad>"), (EOT + EOT, EOT)]))
    kind = draw(st.sampled_from(["unicode", "repetitive", "runs", "specials", "raw"]))
    if kind == "raw":  # arbitrary (even non-UTF-8) pre-tokens with arbitrary counts
        counts = draw(st.dictionaries(st.binary(min_size=0, max_size=8).map(lambda b: bytes(x % 6 + 97 if x < 200 else x for x in b)),
                                      st.integers(0, 50), max_size=12))
    else:
        text = draw({"unicode": unicode_text, "repetitive": repetitive, "runs": runs, "specials": with_specials}[kind])
        counts = count_pretokens(text, specials)
    size = draw(st.integers(256 + len(specials), 256 + len(specials) + 90))
    return counts, size, specials


def fast_with(small: int, *args, **kwargs) -> BPEModel:
    "`train_incremental` with merges listed at `small` positions or fewer done in Python (0: all in arrays)."
    saved = fast_merge._SMALL_MERGE
    fast_merge._SMALL_MERGE = small
    try: return train_quiet(train_incremental, *args, **kwargs)
    finally: fast_merge._SMALL_MERGE = saved


def assert_same_training(counts, size, specials, tie_break, min_frequency=0, max_token_length=None):
    limits = dict(tie_break=tie_break, min_frequency=min_frequency, max_token_length=max_token_length)
    slow = train_quiet(train_naive, counts, size, specials, **limits)
    simple = train_quiet(train_incremental_simple, counts, size, specials, **limits)
    assert simple == slow and simple.info["stopped_early"] == slow.info["stopped_early"]
    assert simple.info["stop_reason"] == slow.info["stop_reason"]
    for small in (0, 2, 10**9):  # every merge in arrays; split by size; every merge in Python
        fast = fast_with(small, counts, size, specials, **limits)
        assert fast.info["stop_reason"] == slow.info["stop_reason"]
        assert fast.merges == slow.merges
        assert fast.vocab == slow.vocab
        assert fast.special_tokens == slow.special_tokens
        assert fast.info["stopped_early"] == slow.info["stopped_early"]
        check_layout(fast, specials)


@settings(max_examples=150, deadline=None)
@given(corpora())
def test_differential_bytes_greater(case):
    assert_same_training(*case, "bytes-greater")


@settings(max_examples=150, deadline=None)
@given(corpora())
def test_differential_ids_smaller(case):
    assert_same_training(*case, "ids-smaller")


@settings(max_examples=150, deadline=None)
@given(corpora())
def test_differential_hf(case):
    assert_same_training(*case, "hf")


LIMITS = st.tuples(st.sampled_from([0, 0, 1, 2, 3, 5, 20]), st.sampled_from([None, None, 0, 1, 2, 3, 4, 5, 8]))


@settings(max_examples=200, deadline=None)
@given(corpora(), st.sampled_from(TIE_BREAKS), LIMITS)
def test_differential_min_frequency_max_token_length(case, tie_break, limits):
    "HF's two options: the naive, simple and fast loops learn the same merges, under every tie rule."
    assert_same_training(*case, tie_break, *limits)


def hf_style_reference(counts, size, tie_break, min_frequency, max_token_length):
    "The options as HF's trainer applies them, written independently: pair counts kept by change lists, a new pair "
    "registered only when its merged length is below the limit, counts of unregistered pairs ignored."
    from bpe_nb.naive import TrainingRun
    run = TrainingRun(counts, size, (), tie_break, progress=False)  # for the tie key only: no limits here
    words = [(list(w), n) for w, n in run.pretokens]
    live = Counter()
    for w, n in words:
        for p in zip(w, w[1:]): live[p] += n
    registered = set(live)
    limit = max_token_length if max_token_length is not None else float("inf")
    while len(run.merges) < run.planned:
        cands = [(p, c) for p, c in live.items() if p in registered and c > 0]
        if not cands: break
        best, top = min(cands, key=lambda pc: run.key(*pc))
        if top < min_frequency: break
        new = run.add_merge(best, top)
        for k, (w, n) in enumerate(words):
            i, out = 0, []
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    if out: live[(out[-1], w[i])] -= n
                    if i + 2 < len(w): live[(w[i + 1], w[i + 2])] -= n
                    live[best] -= n
                    if out and len(run.vocab[out[-1]]) + len(run.vocab[new]) < limit:
                        live[(out[-1], new)] += n; registered.add((out[-1], new))
                    if i + 2 < len(w) and len(run.vocab[new]) + len(run.vocab[w[i + 2]]) < limit:
                        live[(new, w[i + 2])] += n; registered.add((new, w[i + 2]))
                    out.append(new); i += 2
                else: out.append(w[i]); i += 1
            words[k] = (out, n)
    return [(run.vocab[a], run.vocab[b]) for a, b in run.merges]


@settings(max_examples=150, deadline=None)
@given(corpora(), st.sampled_from(TIE_BREAKS), LIMITS)
def test_limits_match_an_independent_hf_style_loop(case, tie_break, limits):
    counts, size, _ = case
    want = hf_style_reference(counts, size, tie_break, *limits)
    for trainer in TRAINERS:
        assert train_quiet(trainer, counts, size, tie_break=tie_break, min_frequency=limits[0],
                           max_token_length=limits[1]).merges == want, trainer.__name__


@pytest.mark.parametrize("trainer", TRAINERS, ids=lambda t: t.__name__)
def test_limits_on_tinystories(trainer, tinystories_sample):
    "min_frequency cuts the unlimited run where counts fall below it; max_token_length bounds every later token."
    counts = count_pretokens(tinystories_sample.read_text(encoding="utf-8")[:100_000], (EOT,))
    free = []  # the count of each merge of the unlimited run: never rising, so a cut is a prefix
    unlimited = train_incremental_simple(counts, 1500, [EOT], progress=lambda p: free.append(p.count))
    assert free == sorted(free, reverse=True) and free[-1] < 10
    for k in (2, 10, 100):
        n = sum(c >= k for c in free)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m = trainer(counts, 1500, [EOT], progress=False, min_frequency=k)
        assert m.merges == unlimited.merges[:n] and m.info["min_frequency"] == k
        assert m.info["stopped_early"] == (n < len(free)) == bool(caught)
        if n < len(free): assert f"below min_frequency={k}" in str(caught[0].message)
    for n in (2, 3, 5):
        m = train_quiet(trainer, counts, 1200, [EOT], max_token_length=n, tie_break="hf")
        assert all(len(a + b) < n or len(a) == len(b) == 1 for a, b in m.merges)
        assert m.info["max_token_length"] == n
        check_layout(m, [EOT])


@pytest.mark.parametrize("trainer", TRAINERS, ids=lambda t: t.__name__)
@pytest.mark.parametrize("options, error, message", [
    (dict(min_frequency=-1), ValueError, "min_frequency must be at least 0, got -1"),
    (dict(min_frequency=True), TypeError, "min_frequency must be an int, got True"),
    (dict(min_frequency=2.0), TypeError, "min_frequency must be an int"),
    (dict(min_frequency=None), TypeError, "min_frequency must be an int"),
    (dict(max_token_length=-3), ValueError, "max_token_length must be at least 0, got -3"),
    (dict(max_token_length=False), TypeError, "max_token_length must be an int or None, got False"),
    (dict(max_token_length="5"), TypeError, "max_token_length must be an int or None"),
])
def test_bad_limits(trainer, options, error, message):
    with pytest.raises(error, match=message): trainer({b"ab": 1}, 300, progress=False, **options)


def test_tie_breaks_are_the_three_rules():
    assert TIE_BREAKS == ("bytes-greater", "ids-smaller", "hf")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([b"a", b"b", b"ab", b"ba", b"aab"]), st.integers(1, 9)), max_size=40),
       st.sampled_from(TIE_BREAKS))
def test_differential_long_two_letter_runs(parts, tie_break):
    "Pre-tokens that repeat short two-letter patterns: long runs and overlapping pairs, where many pairs tie."
    counts = Counter()
    for w, n in parts: counts[w * n] += n
    assert_same_training(dict(counts), 256 + 60, (), tie_break)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(min_size=2, max_size=14).map(lambda b: bytes(97 + x % 3 for x in b)), min_size=1, max_size=6),
       st.lists(st.integers(0, 10**6), max_size=40))
def test_merges_in_any_order_never_repeat_bytes(words, choices):
    "Chapter 01's argument: whatever order merges come in (not only by count), no two tokens get the same bytes."
    words = [list(w) for w in words]
    vocab = [bytes([i]) for i in range(256)]
    for c in choices:
        pairs = sorted({p for w in words for p in zip(w, w[1:])})
        if not pairs: break
        a, b = pairs[c % len(pairs)]
        assert vocab[a] + vocab[b] not in vocab, (vocab[a], vocab[b])
        vocab.append(vocab[a] + vocab[b])
        words = [merge_pair(w, (a, b), len(vocab) - 1) for w in words]


# ---- the CS336 reference ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def corpus_en_counts(test_data):
    return count_pretokens((test_data / "cs336" / "corpus.en").read_text(encoding="utf-8"), [EOT])


@pytest.fixture(scope="module")
def reference(test_data):
    d = test_data / "cs336"
    merges = [tuple(printable_to_bytes(t) for t in line.split(" "))
              for line in (d / "train-bpe-reference-merges.txt").read_text(encoding="utf-8").splitlines() if line]
    vocab = json.loads((d / "train-bpe-reference-vocab.json").read_text(encoding="utf-8"))
    return merges, {printable_to_bytes(k) for k in vocab}


@pytest.mark.parametrize("trainer", TRAINERS, ids=lambda t: t.__name__)
def test_cs336_reference(trainer, corpus_en_counts, reference):
    ref_merges, ref_vocab = reference
    m = trainer(corpus_en_counts, 500, [EOT], progress=False)
    assert len(ref_merges) == 243
    assert m.merges == ref_merges
    assert set(m.vocab.values()) == ref_vocab
    assert len(m.vocab) == 500 and m.special_tokens == {EOT: 499}
    check_layout(m, [EOT])


def pair_counts_after(counts, merges):
    "Replay `merges` (bytes) on the count table and return the pair counts that follow."
    words = [(list(bytes([x]) for x in w), n) for w, n in counts.items()]
    for a, b in merges: words = [(merge_pair(w, (a, b), a + b), n) for w, n in words]
    pc = Counter()
    for w, n in words:
        for p in zip(w, w[1:]): pc[p] += n
    return pc


@pytest.mark.parametrize("trainer", TRAINERS, ids=lambda t: t.__name__)
def test_ids_smaller_differs_as_predicted(trainer, corpus_en_counts, reference):
    ref_merges, _ = reference
    m = trainer(corpus_en_counts, 500, [EOT], tie_break="ids-smaller", progress=False)
    assert len(m.merges) == 243 and m.merges != ref_merges
    k = next(i for i, (x, y) in enumerate(zip(m.merges, ref_merges)) if x != y)
    # Up to the first difference the models agree; there, both picks are tied at the top count,
    # and each rule took the pair it prefers.
    pc = pair_counts_after(corpus_en_counts, m.merges[:k])
    top = max(pc.values())
    greater, smaller = ref_merges[k], m.merges[k]
    assert pc[greater] == pc[smaller] == top
    tied = [p for p, c in pc.items() if c == top]
    assert greater == max(tied)                                     # bytes-greater: greatest bytes
    ids = {b: i for i, b in sorted(m.vocab.items(), reverse=True)}  # model ids (first id of each bytes)
    assert smaller == min(tied, key=lambda p: (ids[p[0]], ids[p[1]]))  # ids-smaller: smallest ids


# ---- the contract ------------------------------------------------------------------------------
@given(st.text(alphabet="abx", max_size=30), st.sampled_from(["ab", "xx", "ba", "aa"]))
@settings(max_examples=200, deadline=None)
def test_merge_pair_is_one_left_to_right_pass(s, pair):
    "On one-character symbols, merging is exactly `str.replace` (non-overlapping, left to right)."
    out = merge_pair(list(s), tuple(pair), pair.upper())
    assert "".join(out) == s.replace(pair, pair.upper())
    assert len(out) == len(s) - s.count(pair)


def test_merge_pair_examples():
    assert merge_pair((b"x",) * 3, (b"x", b"x"), b"xx") == [b"xx", b"x"]
    assert merge_pair([1, 2, 1, 2], (1, 2), 9) == [9, 9]


@pytest.mark.parametrize("trainer", TRAINERS, ids=lambda t: t.__name__)
def test_worked_examples(trainer):
    q = dict(progress=False)
    assert trainer(count_pretokens("low lower"), 260, **q).merges == [(b"o", b"w"), (b"l", b"ow"), (b"low", b"e"), (b"lowe", b"r")]
    m = trainer(count_pretokens("ab ab ab"), 259, [EOT], **q)
    assert m.merges == [(b"a", b"b"), (b" ", b"ab")] and m.vocab[256] == b"ab" and m.vocab[257] == b" ab"
    assert m.special_tokens == {EOT: 258} and m.vocab[258] == EOT.encode()
    assert trainer({b"cab": 1}, 257, **q).merges == [(b"c", b"a")]
    assert trainer({b"cab": 1}, 257, tie_break="ids-smaller", **q).merges == [(b"a", b"b")]


@pytest.mark.parametrize("trainer", TRAINERS, ids=lambda t: t.__name__)
def test_early_stop_is_recorded_and_announced(trainer):
    with pytest.warns(EarlyStopWarning, match="after 1 of 44 planned merges"):
        m = trainer(count_pretokens("ab\nab\nab\nab\nab"), 300, progress=False)
    assert m.merges == [(b"a", b"b")] and m.vocab_size == 257
    assert m.info["stopped_early"] and (m.info["merges_planned"], m.info["merges_learned"]) == (44, 1)
    assert m.info["vocab_size_requested"] == 300 and m.info["vocab_size"] == 257


@pytest.mark.parametrize("trainer", TRAINERS, ids=lambda t: t.__name__)
def test_sizes(trainer):
    with pytest.raises(ValueError, match="vocab_size=257 is smaller than 256 bytes \\+ 2"):
        trainer({b"ab": 1}, 257, [EOT, "<pad>"])
    with pytest.raises(ValueError, match="vocab_size=100"):
        trainer({b"ab": 1}, 100)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # zero merges planned is not an early stop
        m = trainer({b"ab": 5}, 258, [EOT, "<pad>"], progress=False)
    assert m.merges == [] and m.special_tokens == {EOT: 256, "<pad>": 257} and not m.info["stopped_early"]


@pytest.mark.parametrize("trainer", TRAINERS, ids=lambda t: t.__name__)
@pytest.mark.parametrize("args, error, message", [
    (({b"ab": 1}, 300, EOT), TypeError, "special_tokens must be a sequence"),
    (({b"ab": 1}, 300, ["<s>", "<s>"]), ValueError, "'<s>' is given more than once"),
    (({b"ab": 1}, 300, [""]), ValueError, "non-empty"),
    (({b"ab": 1}, "300"), TypeError, "vocab_size must be an int, got '300'"),
    (({"ab": 1}, 300), TypeError, "pre-tokens must be bytes, got 'ab'"),
    (({b"ab": -2}, 300), ValueError, "count of b'ab' is negative: -2"),
    (({b"ab": 1.0}, 300), TypeError, "count of b'ab' must be an int"),
    (([b"ab"], 300), TypeError, "counts must be a mapping"),
])
def test_bad_arguments(trainer, args, error, message):
    with pytest.raises(error, match=message): trainer(*args, progress=False)


@pytest.mark.parametrize("trainer", TRAINERS, ids=lambda t: t.__name__)
def test_bad_tie_break_and_progress(trainer):
    with pytest.raises(ValueError, match="'first-seen'"): trainer({b"ab": 1}, 300, tie_break="first-seen")
    with pytest.raises(TypeError, match="progress must be None, True, False or a callable, got 'yes'"):
        trainer({b"ab": 1}, 300, progress="yes")


@pytest.mark.parametrize("trainer", TRAINERS, ids=lambda t: t.__name__)
def test_progress(trainer, capsys):
    counts = count_pretokens("the cat sat on the mat with the hat " * 4)
    seen = []
    m = trainer(counts, 270, progress=seen.append)
    assert [s.done for s in seen] == list(range(1, 15)) and all(isinstance(s, MergeProgress) for s in seen)
    assert all(s.planned == 14 for s in seen)
    assert [s.pair for s in seen] == m.merges
    assert seen[0].count == max(s.count for s in seen)
    trainer(counts, 270, progress=False)
    assert capsys.readouterr().err == ""
    trainer(counts, 270)                          # the default: a tqdm bar on stderr
    err = capsys.readouterr().err
    assert "14/14" in err and trainer.__name__.split("_")[1] in err


@pytest.mark.parametrize("tie_break", TIE_BREAKS)
@pytest.mark.parametrize("trainer", TRAINERS, ids=lambda t: t.__name__)
def test_deterministic_whatever_the_table_order(trainer, tie_break, tinystories_sample):
    # counting returns pre-tokens in the order they first occur; a model must not depend on that order
    text = tinystories_sample.read_text(encoding="utf-8")[:100_000]
    counts = count_pretokens(text, [EOT])
    items = list(counts.items())
    random.Random(7).shuffle(items)
    a = trainer(counts, 400, [EOT], tie_break=tie_break, progress=False)
    b = trainer(dict(items), 400, [EOT], tie_break=tie_break, progress=False)
    c = trainer(dict(sorted(items)), 400, [EOT], tie_break=tie_break, progress=False)
    assert a == b == c and a.merges == b.merges == c.merges and a.vocab == b.vocab == c.vocab


def test_models_compare_without_info():
    a = train_naive({b"abc": 2}, 258, progress=False)
    b = train_incremental({b"abc": 2}, 258, progress=False)
    assert a.info["trainer"] != b.info["trainer"] and a == b


# ---- the fast loop (chapter 02a, the fast merge loop) ------------------------------------------------
@pytest.mark.parametrize("tie_break", TIE_BREAKS)
def test_fast_equals_simple_on_tinystories(tinystories_sample, tie_break):
    counts = count_pretokens(tinystories_sample.read_text(encoding="utf-8"), [EOT])
    simple = train_quiet(train_incremental_simple, counts, 10_000, [EOT], tie_break=tie_break)
    for small in (0, fast_merge._SMALL_MERGE, 10**9):
        fast = fast_with(small, counts, 10_000, [EOT], tie_break=tie_break)
        assert fast == simple and fast.info == simple.info


def test_fast_ids_past_the_surrogate_block():
    "More than 55,040 merges: token ids from 0xD800 on are stored as characters shifted past the surrogates."
    rng = random.Random(3)
    counts = Counter(bytes(rng.randrange(256) for _ in range(6)) for _ in range(14_000))
    simple = train_quiet(train_incremental_simple, counts, 80_000)
    assert len(simple.merges) > 0xD800 - 256 + 100
    for small in (0, fast_merge._SMALL_MERGE):
        assert fast_with(small, counts, 80_000) == simple


def test_fast_spans_past_16_bits(monkeypatch):
    "A pre-token of 2**15 positions or more: `sym` is 32-bit, for the spans inside tokens (a token of 65,536 bytes forms here), and the merges stay exact."
    import numpy as np
    counts = Counter({b"a" * 70_000: 1, b"ab" * 40: 3, b"ba": 5})
    simple = train_quiet(train_incremental_simple, counts, 256 + 40)
    assert any(len(t) == 65_536 for t in simple.vocab.values())  # a span of 65,535: past int16
    widths, real = [], fast_merge._index_ids
    monkeypatch.setattr(fast_merge, "_index_ids", lambda sym, *a: (widths.append(sym.dtype), real(sym, *a))[1])
    for small in (0, fast_merge._SMALL_MERGE, 10**9):
        assert fast_with(small, counts, 256 + 40) == simple
    assert widths == [np.dtype(np.int32)] * 3
    for n, width in ((32_767, np.int16), (32_768, np.int32)):  # the longest pre-token with 16-bit spans, and one more
        counts = Counter({b"a" * n: 1, b"ab" * 40: 3})
        simple = train_quiet(train_incremental_simple, counts, 256 + 40)
        assert max(map(len, simple.vocab.values())) == n  # the whole pre-token becomes one token: a span of n - 1
        assert fast_with(0, counts, 256 + 40) == simple and widths[-1] == np.dtype(width)


def test_trim_heap_starts_no_process():
    "`trim_heap` finds glibc's call without `ctypes.util.find_library`, which runs `ldconfig` in a child process: a child of a large process that a benchmark's `RUSAGE_CHILDREN` would count at the parent's size."
    import subprocess, sys
    code = ("import resource, numpy as np\nfrom bpe_nb.fast_merge import trim_heap\nbig = np.ones(10**7)\n"
            "trim_heap(); trim_heap()\nprint(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "0"


def test_fast_restores_the_garbage_collector():
    import gc
    assert gc.isenabled()
    train_incremental({b"abcab": 3}, 259, progress=False)
    assert gc.isenabled()
    def boom(_): raise RuntimeError("stop")
    with pytest.raises(RuntimeError, match="stop"): train_incremental({b"abcab": 3}, 259, progress=boom)
    assert gc.isenabled()
    gc.disable()
    try:
        train_incremental({b"abcab": 3}, 259, progress=False)
        assert not gc.isenabled()       # left as it was found
    finally:
        gc.enable()


@pytest.mark.parametrize("small", [0, 2, 10**9])
def test_fast_loop_counts_stay_exact_after_every_merge(monkeypatch, small):
    "After every merge of the array loop, recount each pair by walking the arrays: the live counts, the pair ids, the spans in `sym`, the index."
    import numpy as np
    arrays, checked = {}, []
    real_index, real_flat, real_small = fast_merge._index_ids, fast_merge._merge_ids, fast_merge._merge_ids_small
    def index(sym, w, pairs, pid):
        arrays.update(sym=sym, w=w, pairs=pairs, pid=pid); return real_index(sym, w, pairs, pid)
    def check():
        sym, pid = (arrays[k].tolist() for k in ("sym", "pid"))
        nxt = lambda p: p + max(-sym[p + 1], 1)  # the linked list, read from the spans inside tokens (as -1 - span)
        prv = lambda p: p + min(sym[p - 1], -1)
        w = arrays["w"][np.arange(len(sym))].tolist()  # `_Weights`: each position's count, looked up
        t = arrays["pairs"]
        live, sites = Counter(), {}
        for p in range(len(sym)):
            if sym[p] < 0: assert pid[p] == -1; continue  # a separator, or inside a token
            q = nxt(p)
            assert all(s <= -2 for s in sym[p + 1:q]) and sym[q] >= -1  # merged positions inside; then a token or a separator
            if q > p + 1: assert sym[p + 1] == sym[q - 1] == p - q  # the span, q - 1 - p, at both ends inside
            if sym[q] >= 0:
                assert prv(q) == p
                k = pid[p]
                assert k >= 0 and (t.x[k], t.y[k]) == (sym[p], sym[q])
                live[k] += w[p]; sites.setdefault(k, set()).add(p)
            else: assert pid[p] == -1
        assert live == {k: int(t.count[k]) for k in range(t.n) if t.count[k]}
        for k, ps in sites.items(): assert ps <= set(np.asarray(t.sites(k)).tolist())
        assert t.listed == sum(map(len, t.batches))
        checked.append(len(sites))
    def merged(real):
        def merge(*args):
            ids = real(*args); check(); return ids
        return merge
    monkeypatch.setattr(fast_merge, "_index_ids", index)
    monkeypatch.setattr(fast_merge, "_merge_ids", merged(real_flat))
    monkeypatch.setattr(fast_merge, "_merge_ids_small", merged(real_small))
    monkeypatch.setattr(fast_merge, "_SMALL_MERGE", small)
    monkeypatch.setattr(fast_merge._Pairs.__init__, "__defaults__", (2,))  # the pair table grows during the loop
    monkeypatch.setattr(fast_merge, "_COMPACT_FLOOR", 0)  # compact whenever the batches grew by a quarter, every batch
    monkeypatch.setattr(fast_merge, "_COMPACT_LEAST", 0)
    real_compact, compactions = fast_merge._Pairs.compact, []
    monkeypatch.setattr(fast_merge._Pairs, "compact", lambda self, *a: (compactions.append(1), real_compact(self, *a))[1])
    rng = random.Random(small)
    motifs = [b"aaaa", b"abab", b"abba", b"aabaab", b"ab", b"ba", b"b", b"a", b"c", b"\xff\x00"]
    for _ in range(40):
        counts = Counter()
        for _ in range(rng.randrange(1, 30)):
            counts[b"".join(rng.choice(motifs) for _ in range(rng.randrange(1, 6)))] += rng.choice([1, 2, 37, 10**12])
        size, tb = rng.randrange(257, 300), rng.choice(TIE_BREAKS)
        limits = rng.choice([{}, dict(max_token_length=4), dict(min_frequency=3)])
        fast = train_quiet(train_incremental, dict(counts), size, tie_break=tb, **limits)
        assert fast.merges == train_quiet(train_incremental_simple, dict(counts), size, tie_break=tb, **limits).merges
    assert len(checked) > 400  # the check ran after every merge
    assert len(compactions) > 40  # and after compactions
