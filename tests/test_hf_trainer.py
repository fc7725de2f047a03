"""`tie_break="hf"` learns exactly the merges of HF tokenizers' `BpeTrainer` (ByteLevel pre-tokenizer with
the GPT-2 regex, no prefix space, all 256 bytes as initial alphabet, same vocab_size and special tokens)."""
import json
import random
import warnings
from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import pre_tokenizers, trainers  # noqa: E402

from bpe_nb.incremental import train_incremental  # noqa: E402
from bpe_nb.naive import HF_BYTE_ORDER, EarlyStopWarning, train_naive  # noqa: E402
from bpe_nb.pretokenize import count_pretokens, printable_to_bytes, split_special  # noqa: E402

EOT = "<|endoftext|>"


def hf_merges(docs, vocab_size, specials, **options):
    "Train HF's BpeTrainer on the documents; its merges as pairs of bytes, and its vocabulary size."
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(specials), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), **options)
    tok.train_from_iterator(list(docs), trainer)
    model = json.loads(tok.to_str())["model"]
    pairs = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    return [(printable_to_bytes(a), printable_to_bytes(b)) for a, b in pairs], tok.get_vocab_size()


def ours(trainer, docs, vocab_size, specials, **options):
    "Train one of our trainers with tie_break='hf' on the same documents."
    counts = Counter()
    for d in docs: counts.update(count_pretokens(d))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EarlyStopWarning)
        return trainer(counts, vocab_size, specials, tie_break="hf", progress=False, **options)


def docs_of(text, specials):
    "The documents of a text: the pieces between special tokens (what both sides train on)."
    return [d for d in split_special(text, tuple(specials)) if d not in specials] if specials else [text]


def assert_like_hf(docs, vocab_size, specials, trainers_=(train_incremental,), **options):
    expected, hf_size = hf_merges(docs, vocab_size, specials, **options)
    for trainer in trainers_:
        m = ours(trainer, docs, vocab_size, specials, **options)
        assert m.merges == expected, (trainer.__name__, next((k for k, (p, q) in enumerate(zip(m.merges, expected)) if p != q), None))
        assert m.vocab_size == hf_size


def test_hf_byte_order_is_hf_alphabet_order():
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    assert [HF_BYTE_ORDER[printable_to_bytes(c)[0]] for c in alphabet] == list(range(256))


def test_worked_example_x_bang_y():
    "One pre-token, three tied pairs: HF merges (!, y) where the two other rules do not."
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.train_from_iterator([" x!y"], trainers.BpeTrainer(vocab_size=257, show_progress=False,
                                                          initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    first = json.loads(tok.to_str())["model"]["merges"][0]
    assert (first.split(" ") if isinstance(first, str) else first) == ["!", "y"]
    for trainer in (train_naive, train_incremental):
        assert trainer({b" x!y": 1}, 257, tie_break="hf", progress=False).merges == [(b"!", b"y")]
        assert trainer({b" x!y": 1}, 257, tie_break="ids-smaller", progress=False).merges == [(b" ", b"x")]


@pytest.fixture(scope="module")
def tinystories_docs(tinystories_sample):
    return docs_of(tinystories_sample.read_text(encoding="utf-8"), [EOT])


@pytest.mark.parametrize("vocab_size", [257, 300, 1000, 3000, 10_000])
def test_tinystories(tinystories_docs, vocab_size):
    "The bundled sample at several sizes (10,000 runs out of pairs: both stop at the same place)."
    assert_like_hf(tinystories_docs, vocab_size, [EOT])


def test_tinystories_naive(tinystories_docs):
    assert_like_hf(tinystories_docs, 400, [EOT], trainers_=(train_naive, train_incremental))


def test_tinystories_two_specials(tinystories_docs):
    "More special tokens shift all of HF's ids by the same amount: the merges do not change."
    assert_like_hf(tinystories_docs, 800, [EOT, "<pad>", "<s>"])


# ---- generated corpora ---------------------------------------------------------------------------
CHARS = "abcxyz ABZ019 \n\t.,!?'-éüßΩλ中文日本€😀👍🏽\u00a0\u2028\u00ad\x00\x7f"
SPECIALS = [(), (EOT,), (EOT, "<pad>")]
text = st.text(alphabet=st.sampled_from(CHARS), max_size=200)
word_soup = st.lists(st.sampled_from(["the", " the", "cat", " cat", "aa", "ab", " ab", "ba", "é", " €", "中文", "👍🏽",
                                      "don't", "123", "!!", "\n", "  ", "\t", "x!y", " x"]),
                     max_size=60).map("".join)


@st.composite
def corpora(draw):
    specials = draw(st.sampled_from(SPECIALS))
    parts = draw(st.lists(st.one_of(text, word_soup, st.sampled_from(list(specials) or [""])), min_size=1, max_size=6))
    size = draw(st.integers(256 + len(specials), 256 + len(specials) + 120))
    return docs_of("".join(parts), specials), size, list(specials)


@settings(max_examples=120, deadline=None)
@given(corpora())
def test_random_corpora(case):
    docs, size, specials = case
    assert_like_hf(docs, size, specials, trainers_=(train_naive, train_incremental))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from("ab!~ \n\x01é"), min_size=1, max_size=6), min_size=1, max_size=30),
       st.integers(256, 330))
def test_many_ties(words, size):
    "Each document a short word over a few symbols, counted once: almost every step is a tie."
    assert_like_hf(words, size, [], trainers_=(train_naive, train_incremental))


def test_all_pairs_tied_once():
    "Every pair of a shuffled alphabet occurs exactly once: the whole merge order is the tie rule."
    rng = random.Random(7)
    chars = list("!~ab\n \x7fé中0")
    docs = ["".join(rng.sample(chars, 2)) for _ in range(200)]
    assert_like_hf(docs, 256 + 60, [], trainers_=(train_naive, train_incremental))


# ---- HF's min_frequency and max_token_length ------------------------------------------------------
@pytest.mark.parametrize("options", [dict(max_token_length=n) for n in (0, 1, 2, 3, 5, 8)]
                         + [dict(min_frequency=n) for n in (2, 10, 100)]
                         + [dict(min_frequency=10, max_token_length=5), dict(min_frequency=2, max_token_length=3)],
                         ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_tinystories_options(tinystories_docs, options):
    "HF BpeTrainer's two options on the bundled sample: the same merges, and the same early stop."
    assert_like_hf(tinystories_docs, 3000, [EOT], **options)


@pytest.mark.parametrize("options", [dict(max_token_length=4), dict(min_frequency=5, max_token_length=6)])
def test_tinystories_options_naive(tinystories_docs, options):
    assert_like_hf(tinystories_docs[:300], 600, [EOT], trainers_=(train_naive, train_incremental), **options)


@settings(max_examples=80, deadline=None)
@given(corpora(), st.sampled_from([0, 1, 2, 3, 5]), st.sampled_from([None, 1, 2, 3, 4, 6]))
def test_random_corpora_options(case, min_frequency, max_token_length):
    docs, size, specials = case
    assert_like_hf(docs, size, specials, trainers_=(train_naive, train_incremental),
                   min_frequency=min_frequency, max_token_length=max_token_length)
