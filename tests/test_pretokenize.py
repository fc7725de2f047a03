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


# ---------------------------------------------------------------- patterns that do not cover the text
import regex  # noqa: E402
from hypothesis import settings  # noqa: E402

import bpe_nb.pretokenize as pretok  # noqa: E402
from bpe_nb.pretokenize import PROVEN_PATTERNS, check_pattern, unicode_to_bytes  # noqa: E402

NO_DIGITS = r"[^\d]+"  # covers everything but digits: the first digit must be named


def test_proven_patterns_are_builtin_ones():
    from bpe_nb.pretokenize import KNOWN_PATTERNS
    assert {GPT2_PATTERN, CL100K_PATTERN} <= PROVEN_PATTERNS <= set(KNOWN_PATTERNS.values())
    for p in PROVEN_PATTERNS: assert check_pattern(p) is pretok.compile_pattern(p)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(stressy_text, st.sampled_from(["1", "٣", "<|endoftext|>"])), max_size=12).map("".join))
def test_a_pattern_that_skips_characters_is_an_error_naming_the_first(text):
    eot = "<|endoftext|>"
    m = regex.search(r"\d", text)  # the first digit (no special token holds one): what the pattern skips
    first = m.start() if m else -1
    if first == -1:
        assert b"".join(pretokenize(text, NO_DIGITS)) == text.encode()
        assert count_pretokens(text, [eot], NO_DIGITS) == count_pretokens(text, [eot], r"[^\d]+|\d")
        return
    for call in (lambda: pretokenize(text, NO_DIGITS), lambda: count_pretokens(text, [eot], NO_DIGITS)):
        with pytest.raises(ValueError) as e: call()
        assert f"{text[first]!r} at index {first} is in no match" in str(e.value)
        assert "does not cover the text" in str(e.value)


def test_covering_patterns_of_your_own_work_and_empty_matches_are_never_pretokens():
    text = "hello, world! 12"
    assert b"".join(pretokenize(text, r"\w+|\s+|[^\w\s]+")) == text.encode()
    assert pretokenize("xx", r"x*") == [b"xx"] and count_pretokens("xx", (), r"x*") == {b"xx": 1}
    with pytest.raises(ValueError, match="capturing group"): pretokenize("ab", r"(a)|b")
    with pytest.raises(ValueError, match="capturing group"): count_pretokens("ab", (), r"(a)|b")


@pytest.mark.parametrize("pattern, message", [
    (r"\w+", "its matches skip ','"),
    (r"\S+| +", "does not cover every text"),
    (r"[^\x00]+", "skip '\\x00'"),
    (r"x*", "can match the empty string"),
    (r"\w*|\W", "can match the empty string"),
    (r"(\w+)|\W+", "capturing group"),
    (r"(?<", "is not a valid regex"),
])
def test_check_pattern_refuses_what_cannot_pretokenize(pattern, message):
    with pytest.raises(ValueError) as e: check_pattern(pattern)
    assert message in str(e.value) and repr(pattern) in str(e.value)


def test_check_pattern_accepts_covering_patterns_and_names_a_bad_type():
    for p in (r"\w+|\s+|[^\w\s]+", r"\S+|\s+", r"\p{L}+|\p{N}+|\s+|[^\s\p{L}\p{N}]+"):
        assert check_pattern(p).pattern == p
    with pytest.raises(TypeError, match="pattern must be a str, got list"): check_pattern(["a"])


# ---------------------------------------------------------------- the printable form: one fast implementation
def _slow_printable(b: bytes) -> str:
    return "".join(pretok.bytes_to_unicode()[x] for x in b)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80))
def test_fast_printable_equals_the_table(b):
    assert bytes_to_printable(b) == _slow_printable(b)
    assert printable_to_bytes(_slow_printable(b)) == b


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(sorted(unicode_to_bytes())), max_size=20),
       st.characters(blacklist_categories=("Cs",)).filter(lambda c: c not in unicode_to_bytes()),
       st.text(alphabet=st.sampled_from(sorted(unicode_to_bytes())), max_size=20))
def test_a_character_outside_the_table_is_named(before, bad, after):
    s = before + bad + after
    with pytest.raises(ValueError) as e: printable_to_bytes(s)
    assert str(e.value) == f"{bad!r} is not a GPT-2 printable byte (in {s!r})"


def test_printable_form_rejects_non_strings_and_maps_every_byte():
    with pytest.raises(TypeError, match="expected a str"): printable_to_bytes(b"abc")
    assert printable_to_bytes(bytes_to_printable(bytes(range(256)))) == bytes(range(256))
    for c in " \n\t\x7f\xad\uffff":  # not in the table, whether below 256 or not
        with pytest.raises(ValueError, match="not a GPT-2 printable byte"): printable_to_bytes("Ġ" + c)


# ---------------------------------------------------------------- the patterns of the real encodings
from bpe_nb.pretokenize import KNOWN_PATTERNS, O200K_PATTERN, R50K_PATTERN  # noqa: E402

# Whitespace, apostrophes and case changes are where the spellings of a pattern could disagree.
tricky = st.text(alphabet=" \t\n\r\u00a0\u3000'’aZé\u0301ǅ1٣½!/$中👍", max_size=40)


@settings(max_examples=300, deadline=None)
@given(utf8_text | tricky, st.sampled_from(sorted(KNOWN_PATTERNS)))
def test_every_known_pattern_covers_arbitrary_text(text, name):
    pattern = KNOWN_PATTERNS[name]
    found = pretok.compile_pattern(pattern).findall(text)   # the raw matches, before any check
    assert "".join(found) == text and all(found)
    assert b"".join(pretokenize(text, pattern)) == text.encode()
    assert sum(count_pretokens(text, (), pattern).values()) == len(found)
    assert check_pattern(pattern).pattern == pattern


@settings(max_examples=500, deadline=None)
@given(utf8_text | tricky)
def test_r50k_spelling_gives_exactly_the_gpt2_pretokens(text):
    assert pretokenize(text, R50K_PATTERN) == pretokenize(text, GPT2_PATTERN)


def test_known_patterns_are_tiktokens(monkeypatch):
    import tiktoken_ext.openai_public as openai_public   # tiktoken is a dev requirement: no skip
    # The encoding constructors download their ranks first; only their pattern is compared here.
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda *a, **k: {})
    monkeypatch.setattr(openai_public, "data_gym_to_mergeable_bpe_ranks", lambda *a, **k: {})
    assert KNOWN_PATTERNS["gpt2"] == GPT2_PATTERN and KNOWN_PATTERNS["cl100k_base"] == CL100K_PATTERN
    assert KNOWN_PATTERNS["o200k_base"] == O200K_PATTERN
    for name in ("r50k_base", "p50k_base", "cl100k_base", "o200k_base"):
        assert KNOWN_PATTERNS[name] == getattr(openai_public, name)()["pat_str"], name
    assert openai_public.gpt2()["pat_str"] == R50K_PATTERN   # tiktoken spells GPT-2's pattern as r50k's


# ---- the token view -----------------------------------------------------------------------------
from html.parser import HTMLParser

from bpe_nb.pretokenize import TokenView, show_tokens, visible


class _Spans(HTMLParser):
    "Collect the token spans of a view: their attributes and text (`<br>` as a newline)."
    def __init__(self):
        super().__init__(); self.spans, self.depth, self.tags = [], 0, []
    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "span": self.spans.append({**dict(attrs), "text": ""})
        if tag == "script": raise AssertionError("a token view must be static HTML")
    def handle_data(self, data):
        if self.spans and "span" in self.tags: self.spans[-1]["text"] += data
    def handle_endtag(self, tag):
        while self.tags and self.tags.pop() != tag: pass


def spans_of(view: TokenView) -> list[dict]:
    p = _Spans(); p.feed(view.html); p.close(); return p.spans


def test_view_html_structure():
    pieces = [b"Hello", b",", b" <b>&\"x\"", b"\n", b"\t!"]
    view = show_tokens(pieces, ids=[10, 11, 12, 13, 14], highlight=[2])
    assert view.html.startswith("<div") and 'class="bpe-tokens"' in view.html
    spans = spans_of(view)
    assert [s["title"].split(" · ")[0] for s in spans] == ["id 10", "id 11", "id 12", "id 13", "id 14"]
    assert [s["text"] for s in spans] == ["Hello", ",", '␣<b>&"x"', "↵", "→!"]   # escaped in the HTML, shown as text
    assert "&lt;b&gt;&amp;" in view.html and "<b>" not in view.html
    assert spans[0]["style"].split(";")[0] != spans[1]["style"].split(";")[0]     # alternating backgrounds
    assert spans[0]["style"].split(";")[0] == spans[2]["style"].split(";")[0]
    assert "highlight" in spans[2]["class"] and "highlight" not in spans[1]["class"]
    assert "↵<br>" in view.html and view._repr_html_() == view.html
    assert str(view) == repr(view) == 'Hello|,|⟦␣<b>&"x"⟧|↵\n|→!'


def test_view_partial_characters():
    euro = "€".encode()
    spans = spans_of(show_tokens([b"a", euro[:1], euro[1:], "中".encode()]))
    assert [("partial" in s["class"]) for s in spans] == [False, True, True, False]
    assert spans[1]["text"] == "e2" and spans[2]["text"] == "82 ac" and spans[3]["text"] == "中"
    assert "part of a UTF-8 character" in spans[1]["title"] and "dashed" in spans[1]["style"]
    bad = spans_of(show_tokens([b"\xff", b"ok"]))
    assert "invalid" in bad[0]["class"] and "not valid UTF-8" in bad[0]["title"]


def test_view_groups_legend_and_stacking():
    view = show_tokens([b"a", b"b"], groups=[3, 3], legend={3: "letters"})
    spans = spans_of(view)
    assert spans[0]["style"].split(";")[0] == spans[1]["style"].split(";")[0]
    assert "letters" in spans[0]["title"] and "letters" in view.html
    both = view + show_tokens([b"c"], legend="caption")
    assert len(both) == 3 and both.html.count('class="bpe-tokens"') == 2 and "caption" in both.html
    with pytest.raises(ValueError, match="2 ids for 1 tokens"): show_tokens([b"a"], ids=[1, 2])


def test_view_ansi():
    out = show_tokens([b"a b", b"\n", b"c"], highlight=[2]).ansi()
    assert out.count("\x1b[0m") >= 3 and "\x1b[1;4;" in out and "a␣b" in out and "↵" in out
    assert out.endswith("\n") and "<span" not in out


@given(st.lists(st.binary(min_size=1, max_size=4), max_size=12))
def test_view_shows_every_token(pieces):
    view = show_tokens(pieces)
    spans = spans_of(view)
    assert len(spans) == len(view) == len(pieces)
    if b"".join(pieces).decode("utf-8", "ignore") == b"".join(pieces).decode("utf-8", "replace"):  # valid UTF-8
        whole = [s["text"] for s, p in zip(spans, pieces) if "partial" not in s["class"]]
        assert whole == [visible(p) for p, s in zip(pieces, spans) if "partial" not in s["class"]]


def test_visible():
    assert visible(" a\n\tb\r\x00") == "␣a↵→b␍␀" and visible(b"\xff ") == "\\xff␣"


def test_cl100k_pattern_is_tiktokens_literal():
    "CL100K_PATTERN, built from its alternatives on chapter 00's page, is byte for byte the literal tiktoken defines."
    literal = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|"""
               r"""\s++$|\s*[\r\n]|\s+(?!\S)|\s""")
    assert CL100K_PATTERN == literal
