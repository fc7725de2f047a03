"Offsets, streams and counts (issue 27): exact against tiktoken's offsets, HF's DecodeStream and `len(encode())`."
import base64
import codecs
import gzip
import itertools
import json
from pathlib import Path

import pytest
import tiktoken
from hypothesis import given, settings, strategies as st

import bpe_nb.decoding  # registers the methods (the package does it for users)
from bpe_nb.decoding import DecodeStream, utf8_char_index
from bpe_nb.encoder import Tokenizer, UnknownTokenError, read_gpt2_files
from bpe_nb.pretokenize import GPT2_PATTERN, printable_to_bytes

from conftest import TEST_DATA, BUNDLED_SAMPLE, tiktoken_gpt2
CS336 = TEST_DATA / "cs336"
EOT, FIM = "<|endoftext|>", "<|fim_prefix|>"


@pytest.fixture(scope="module")
def gpt2():
    vocab, merges = read_gpt2_files(CS336 / "gpt2_vocab.json", CS336 / "gpt2_merges.txt")
    return Tokenizer(vocab, merges, special_tokens={EOT: 50256, FIM: 50257})


@pytest.fixture(scope="module")
def reference():
    "tiktoken's GPT-2 encoding built offline from the same vocab file, with a second special token."
    return tiktoken_gpt2({EOT: 50256, FIM: 50257}, "gpt2-local-2")




WORDS = ["Hello", " world", "你好", "中文文本", "👋", "👍🏽", "👨\u200d👩\u200d👧", "é", "e\u0301", "ü", " \u00a0", "日本語",
         "🇫🇷", "\U0001F9D1\u200d\U0001F4BB", "𝔘𝔫𝔦", "\t\n", "  ", "don't", "123", "Ⅻ", "\u3000x", EOT, FIM]
texts = st.lists(st.one_of(st.sampled_from(WORDS), st.text(max_size=6)), max_size=25).map("".join)


def char_spans(text: str, ids, vocab) -> list[tuple[int, int]]:
    "The spans by their definition, the slow way: the characters that hold each token's first and last byte."
    owner = [k for k, ch in enumerate(text) for _ in ch.encode("utf-8")]
    out, pos = [], 0
    for i in ids:
        n = len(vocab[i]); out.append((owner[pos], owner[pos + n - 1] + 1)); pos += n
    return out


def outcome(f):
    try: return f()
    except ValueError as e: return type(e)


# ---------------------------------------------------------------- utf8_char_index
@settings(max_examples=300)
@given(st.binary(max_size=40))
def test_char_index_of_any_bytes(data):
    text, owner = utf8_char_index(data)
    assert text == data.decode("utf-8", "replace") and len(owner) == len(data)
    assert owner == sorted(owner) and (not data or (owner[0] == 0 and owner[-1] == len(text) - 1))
    assert all(b - a in (0, 1) for a, b in zip(owner, owner[1:]))  # every character gets bytes, in order
    for k, ch in enumerate(text):  # a valid character's bytes are exactly its UTF-8
        got = bytes(b for b, o in zip(data, owner) if o == k)
        if ch != "\ufffd": assert got == ch.encode()
        else: assert got.decode("utf-8", "replace") in ("\ufffd", "\ufffd".encode().decode())


# ---------------------------------------------------------------- decode_with_offsets against tiktoken
@settings(max_examples=300)
@given(texts)
def test_decode_with_offsets_equals_tiktoken(gpt2, reference, text):
    ids = reference.encode(text, allowed_special="all")
    assert gpt2.decode_with_offsets(ids) == reference.decode_with_offsets(ids)


@settings(max_examples=300)
@given(texts, st.data())
def test_decode_with_offsets_on_slices(gpt2, reference, text, data):
    "A slice of ids can start or end inside a character: equal to tiktoken where it decodes, else offsets into `decode`."
    ids = reference.encode(text, allowed_special="all")
    a = data.draw(st.integers(0, len(ids))); b = data.draw(st.integers(a, len(ids)))
    part = ids[a:b]
    ours = gpt2.decode_with_offsets(part)
    try: expected = reference.decode_with_offsets(part)
    except UnicodeDecodeError: expected = None
    if expected is not None: assert ours == expected
    text_out, starts = ours
    assert text_out == gpt2.decode(part) and len(starts) == len(part)
    owner = utf8_char_index(gpt2.decode_bytes(part))[1]
    firsts = list(itertools.accumulate([0] + [len(gpt2.vocab[i]) for i in part[:-1]])) if part else []
    assert starts == [owner[p] for p in firsts]


def test_decode_with_offsets_real_encodings(real_pair):
    ours, ref = real_pair
    text = BUNDLED_SAMPLE.read_text(encoding="utf-8")[:30_000] + "".join(WORDS) * 20
    ids = ref.encode(text, allowed_special="all")
    assert ours.decode_with_offsets(ids) == ref.decode_with_offsets(ids)
    got_ids, spans = ours.encode_with_offsets(text, allowed_special="all")
    assert got_ids == ids and [a for a, _ in spans] == ref.decode_with_offsets(ids)[1]
    assert spans == char_spans(text, ids, ours.vocab)


@settings(max_examples=100)
@given(texts)
def test_real_encodings_offsets_on_generated_text(real_pair, text):
    ours, ref = real_pair
    ids = ref.encode(text, allowed_special="all")
    assert ours.decode_with_offsets(ids) == ref.decode_with_offsets(ids)
    assert ours.encode_with_offsets(text, allowed_special="all") == (ids, char_spans(text, ids, ours.vocab))


def test_decode_with_offsets_inputs_and_errors(gpt2, reference):
    np = pytest.importorskip("numpy")
    ids = reference.encode("héllo 👋 你好")
    expected = reference.decode_with_offsets(ids)
    assert gpt2.decode_with_offsets(np.array(ids)) == expected
    assert gpt2.decode_with_offsets(iter(ids)) == expected and gpt2.decode_with_offsets(tuple(ids)) == expected
    assert gpt2.decode_with_offsets([]) == ("", [])
    with pytest.raises(UnknownTokenError, match="123456"): gpt2.decode_with_offsets([1, 123456])
    with pytest.raises(TypeError): gpt2.decode_with_offsets(np.array([1.0]))
    with pytest.raises(TypeError): gpt2.decode_with_offsets([True])


# ---------------------------------------------------------------- encode_with_offsets
RULES = [dict(), dict(allowed_special="all"), dict(allowed_special={EOT}), dict(disallowed_special=()),
         dict(allowed_special=set()), dict(allowed_special={FIM}, disallowed_special={EOT})]


@settings(max_examples=300)
@given(texts, st.sampled_from(RULES))
def test_encode_with_offsets(gpt2, reference, text, kw):
    got = outcome(lambda: gpt2.encode_with_offsets(text, **kw))
    expected = outcome(lambda: gpt2.encode(text, **kw))
    if not isinstance(got, tuple): assert got == expected; return
    ids, spans = got
    assert ids == expected and len(spans) == len(ids)
    if kw: assert ids == reference.encode(text, **kw)  # tiktoken's rules (ours by default honour every special)
    assert [a for a, _ in spans] == reference.decode_with_offsets(ids)[1]  # start: decode_with_offsets
    assert spans == char_spans(text, ids, gpt2.vocab)
    for (a, b), i in zip(spans, ids): assert gpt2.vocab[i] in text[a:b].encode()


@settings(max_examples=300)
@given(texts.map(lambda t: t.replace(FIM, "")))
def test_spans_equal_hf_offsets(gpt2, hf_gpt2, text):
    "HF tokenizers' `offsets` of a byte-level BPE (no post-processor) are the same character spans."
    e = hf_gpt2.encode(text)
    ids, spans = gpt2.encode_with_offsets(text)
    assert e.ids == ids and e.offsets == spans


def test_spans_equal_hf_offsets_on_real_text(gpt2, hf_gpt2):
    text = BUNDLED_SAMPLE.read_text(encoding="utf-8")[:100_000] + "".join(WORDS[:-1]) * 10
    e = hf_gpt2.encode(text)
    assert (e.ids, e.offsets) == gpt2.encode_with_offsets(text)


def test_tokens_in_one_character_share_its_span(gpt2):
    ids, spans = gpt2.encode_with_offsets("a👋")
    assert len(ids) == 3 and spans == [(0, 1), (1, 2), (1, 2)]
    ids, spans = gpt2.encode_with_offsets("<|endoftext|>你")
    assert ids[0] == 50256 and spans[0] == (0, 13) and all(s == (13, 14) for s in spans[1:])


@settings(max_examples=200)
@given(st.text(st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010) | st.sampled_from("a 👋"), max_size=12))
def test_encode_with_offsets_surrogates(gpt2, text):
    "A text UTF-8 cannot encode is repaired as `encode` does; spans are in characters of the text as given."
    from bpe_nb.encoder import replace_surrogates
    ids, spans = gpt2.encode_with_offsets(text)
    assert ids == gpt2.encode(text)
    fixed = replace_surrogates(text)
    fixed_spans = char_spans(fixed, ids, gpt2.vocab)
    where = [k for k in range(len(text)) if not ("\udc00" <= text[k] <= "\udfff" and k and "\ud800" <= text[k - 1] <= "\udbff"
                                                 and where_pair(text, k - 1))] + [len(text)]
    assert spans == [(where[a], where[b]) for a, b in fixed_spans]
    for (a, b), i in zip(spans, ids): assert gpt2.vocab[i] in replace_surrogates(text[a:b]).encode()


def where_pair(text, k):
    "Is `text[k:k + 2]` a surrogate pair that starts at k (and not the second half of an earlier pair)?"
    if k and "\ud800" <= text[k - 1] <= "\udbff" and "\udc00" <= text[k] <= "\udfff" and where_pair(text, k - 1): return False
    return "\ud800" <= text[k] <= "\udbff" and k + 1 < len(text) and "\udc00" <= text[k + 1] <= "\udfff"


def test_encode_with_offsets_bundled_sample(gpt2, reference):
    text = BUNDLED_SAMPLE.read_text(encoding="utf-8")[:200_000]
    ids, spans = gpt2.encode_with_offsets(text)
    assert ids == reference.encode(text, allowed_special="all")
    assert [a for a, _ in spans] == reference.decode_with_offsets(ids)[1] and spans == char_spans(text, ids, gpt2.vocab)


# ---------------------------------------------------------------- decode_stream
def run_stream(tok, ids):
    stream = tok.decode_stream()
    return [stream.step(i) for i in ids], stream.flush()


@settings(max_examples=500)
@given(st.lists(st.integers(0, 50257), max_size=20))
def test_stream_concatenates_to_decode_for_any_ids(gpt2, ids):
    steps, rest = run_stream(gpt2, ids)
    assert "".join(steps) + rest == gpt2.decode(ids)


@settings(max_examples=500)
@given(st.lists(st.integers(0, 255), max_size=24))
def test_stream_of_single_bytes_is_as_early_as_possible(gpt2, raw):
    "Byte by byte: after each step, the text out is all of what the bytes so far decide; what is held can still become UTF-8."
    ids = [gpt2.byte_ids[b] for b in raw]
    stream, out = gpt2.decode_stream(), ""
    for k, i in enumerate(ids):
        out += stream.step(i)
        held = stream.pending
        assert len(held) <= 3 and raw[:k + 1] == list(raw[:k + 1 - len(held)]) + list(held)
        assert out == bytes(raw[:k + 1 - len(held)]).decode("utf-8", "replace")
        if held: assert can_become_utf8(held) and "\ufffd" not in bytes(held).decode("utf-8", "ignore")
    assert out + stream.flush() == bytes(raw).decode("utf-8", "replace")


def can_become_utf8(held: bytes) -> bool:
    "Some continuation of `held` decodes strictly."
    for k in range(4):
        for b in range(0x80, 0xC0):
            try: (held + bytes([b]) + b"\x80" * k).decode(); return True
            except UnicodeDecodeError: pass
    return False


def test_every_held_prefix_can_still_become_utf8(gpt2):
    "Every lead byte with up to two continuation bytes: what the stream holds can still be completed."
    for lead in range(0xC0, 0x100):
        for n in range(3):
            for rest in itertools.product(range(0x80, 0xC0), repeat=n):
                stream = gpt2.decode_stream()
                out = "".join(stream.step(gpt2.byte_ids[b]) for b in (lead, *rest))
                if stream.pending: assert can_become_utf8(stream.pending), bytes([lead, *rest])
                assert out + stream.flush() == bytes([lead, *rest]).decode("utf-8", "replace")


@settings(max_examples=300)
@given(texts)
def test_stream_never_writes_a_split_character(gpt2, text):
    ids = gpt2.encode(text)
    steps, rest = run_stream(gpt2, ids)
    assert "".join(steps) == text and rest == ""
    data, out = b"", ""
    for i, s in zip(ids, steps):  # each step lets out every character whose last byte is in
        data += gpt2.vocab[i]; out += s
        held = data[len(out.encode()):]
        assert data.startswith(out.encode()) and len(held) <= 3
        if held: assert can_become_utf8(held) and held.decode("utf-8", "ignore") == ""  # only an unfinished character


@pytest.fixture(scope="module")
def hf_gpt2():
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers
    if not hasattr(decoders, "DecodeStream"): pytest.skip("this tokenizers has no DecodeStream")
    hf = tokenizers.Tokenizer(models.BPE.from_file(str(CS336 / "gpt2_vocab.json"), str(CS336 / "gpt2_merges.txt")))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    hf.add_special_tokens([EOT])
    return hf


@settings(max_examples=300)
@given(texts.map(lambda t: t.replace(FIM, "")))
def test_stream_against_hf_decode_stream(gpt2, hf_gpt2, text):
    "HF's DecodeStream on the same ids: the same text in the end, and ours never behind it (it waits at a U+FFFD)."
    from tokenizers.decoders import DecodeStream as HFStream
    ids = gpt2.encode(text)
    assert ids == hf_gpt2.encode(text).ids
    hf, ours = HFStream(skip_special_tokens=False), gpt2.decode_stream()
    hf_out = our_out = ""
    for i in ids:
        hf_out += hf.step(hf_gpt2, i) or ""
        s = ours.step(i); our_out += s
        assert our_out.startswith(hf_out)
    assert our_out + ours.flush() == text == hf_out


def test_stream_unknown_and_bad_ids(gpt2):
    stream = gpt2.decode_stream()
    first = gpt2.encode("👋")[0]
    assert stream.step(first) == ""
    with pytest.raises(UnknownTokenError, match="50258"): stream.step(50258)
    with pytest.raises(ValueError, match="-1"): stream.step(-1)
    with pytest.raises(TypeError): stream.step("a")
    with pytest.raises(TypeError): stream.step(True)
    assert stream.pending == gpt2.vocab[first]  # unchanged by the errors
    assert "".join(stream.step(i) for i in gpt2.encode("👋")[1:]) == "👋"
    assert stream.step(50256) == EOT and stream.flush() == ""
    assert isinstance(stream, DecodeStream) and "pending" in repr(stream)


def test_flush_ends_and_restarts(gpt2):
    stream = gpt2.decode_stream()
    half = gpt2.encode("👋")[:1]
    assert stream.step(half[0]) == "" and stream.flush() == "\ufffd" and stream.pending == b""
    assert stream.step(gpt2.encode("a")[0]) == "a"


# ---------------------------------------------------------------- count_tokens
@settings(max_examples=300)
@given(texts, st.sampled_from(RULES))
def test_count_tokens_equals_len_encode(gpt2, text, kw):
    expected = outcome(lambda: len(gpt2.encode(text, **kw)))
    assert outcome(lambda: gpt2.count_tokens(text, **kw)) == expected


@settings(max_examples=100)
@given(st.text(st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010) | st.sampled_from("a 👋"), max_size=12))
def test_count_tokens_surrogates(gpt2, text):
    assert gpt2.count_tokens(text) == len(gpt2.encode(text))


def test_count_tokens_long_texts(gpt2, real_pair):
    text = BUNDLED_SAMPLE.read_text(encoding="utf-8")
    for part in (text[:1000], text[:40_000], text[:300_000], text[:40_000] + "你好👋" * 100 + EOT):
        assert gpt2.count_tokens(part) == len(gpt2.encode(part))
    ours, ref = real_pair
    mixed = text[:50_000] + "".join(WORDS) * 50
    assert ours.count_tokens(mixed, allowed_special="all") == len(ref.encode(mixed, allowed_special="all"))
    assert ours.count_tokens(mixed[:5_000], disallowed_special=()) == len(ref.encode(mixed[:5_000], disallowed_special=()))


def test_count_tokens_errors(gpt2):
    with pytest.raises(TypeError, match="count_tokens expects a str"): gpt2.count_tokens(b"abc")
    with pytest.raises(ValueError, match="disallowed special token"): gpt2.count_tokens(EOT, allowed_special=set())


def test_count_tokens_with_an_unproven_pattern():
    "A pattern that skips characters: the same error as `encode`."
    vocab = {i: bytes([i]) for i in range(256)}
    tok = Tokenizer(vocab, [], pattern=r"\w+| ?[^\s\w]+|\s+(?!\S)|\s+")
    for text in ("ab cd", "x  y!", "你 好"):
        assert tok.count_tokens(text) == len(tok.encode(text))
