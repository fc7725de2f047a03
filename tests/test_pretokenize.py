"Property tests of the pre-tokenizer: nothing is lost, nothing is normalized, specials split exactly."
import pytest
from hypothesis import given, strategies as st

from bpe_nb.pretokenize import (CL100K_PATTERN, GPT2_PATTERN, count_pretokens, pretokenize,
                                split_special, printable_to_bytes, bytes_to_printable)

SPECIALS = ["<|endoftext|>", "<|endoftext|><|endoftext|>", "<pad>"]
# Text that stresses the regex: whitespace runs, CRLF, digits, apostrophes, emoji, CJK, marks.
pieces = st.sampled_from([" ", "  ", "\t", "\n", "\r\n", "\u00a0", "'s", "'ll", "don't", "123", "4",
                          "a", "ab", "Hello", "é", "e\u0301", "中文", "👍🏽", "!", "?!", "<|", "|>", "endoftext"])
stressy_text = st.lists(st.one_of(pieces, st.text(max_size=5)), max_size=30).map("".join)
utf8_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200) | stressy_text


@given(utf8_text, st.sampled_from([GPT2_PATTERN, CL100K_PATTERN]))
def test_pretokens_concatenate_to_the_input_bytes(text, pattern):
    toks = pretokenize(text, pattern)
    assert b"".join(toks) == text.encode("utf-8")
    assert all(toks)                                    # no empty pre-token


@given(st.lists(st.one_of(stressy_text, st.sampled_from(SPECIALS)), max_size=12).map("".join),
       st.lists(st.sampled_from(SPECIALS), unique=True, max_size=3))
def test_split_special_loses_nothing(text, specials):
    parts = list(split_special(text, specials))
    assert "".join(parts) == text
    assert all(parts)
    for p in parts:                                     # a text segment never still holds a special
        if p not in specials: assert not any(s in p for s in specials)


@given(st.lists(st.one_of(stressy_text, st.just("<|endoftext|>")), max_size=12).map("".join))
def test_count_pretokens_is_the_sum_over_documents(text):
    eot = "<|endoftext|>"
    expected = sum((count_pretokens(doc) for doc in text.split(eot)), start=count_pretokens(""))
    assert count_pretokens(text, [eot]) == expected
    assert sum(len(k) * v for k, v in count_pretokens(text, [eot]).items()) == len(text.replace(eot, "").encode())


def test_longest_special_wins():
    eot = "<|endoftext|>"
    assert list(split_special(eot * 3, [eot, eot * 2])) == [eot * 2, eot]


@given(st.text(max_size=20), st.sampled_from(["\ud800", "\udfff", "\udc80"]), st.text(max_size=20))
def test_lone_surrogates_are_a_clear_error(before, surrogate, after):
    text = before + surrogate + after
    with pytest.raises(ValueError, match="lone surrogate"):
        pretokenize(text)
    with pytest.raises(ValueError, match="lone surrogate"):
        count_pretokens(text)


@given(st.binary(max_size=64))
def test_printable_form_round_trips(b):
    assert printable_to_bytes(bytes_to_printable(b)) == b
