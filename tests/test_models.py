"The open models by name (issue 26 item 1): Llama 3, Llama 4 and Mistral's Tekken against the libraries they ship with."
import base64
import json
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bpe_nb
from bpe_nb import interop
import bpe_nb.fast_encoding as fe
from bpe_nb.artifacts import ArtifactError
from conftest import wide_text
from bpe_nb.pretokenize import LLAMA3_PATTERN, O200K_PATTERN, TEKKEN_PATTERN, KNOWN_PATTERNS, PROVEN_PATTERNS

llama_models = pytest.importorskip("llama_models")
mistral_common = pytest.importorskip("mistral_common")
from llama_models.llama3.tokenizer import Tokenizer as Meta3  # noqa: E402
from llama_models.llama4.tokenizer import Tokenizer as Meta4  # noqa: E402
from mistral_common.tokens.tokenizers.tekken import Tekkenizer  # noqa: E402

LLAMA = Path(llama_models.__file__).parent
TEKKEN = Path(mistral_common.__file__).parent / "data" / "tekken_240911.json"
FILES = {"llama3": LLAMA / "llama3" / "tokenizer.model", "llama4": LLAMA / "llama4" / "tokenizer.model", "tekken": TEKKEN}
SPECIAL_BITS = ["<|begin_of_text|>", "<|eot_id|>", "<|eot|>", "<|fim_prefix|>", "<|image|>", "<|reserved_special_token_7|>",
                "<s>", "</s>", "[INST]", "[/INST]", "<SPECIAL_42>", "<|endoftext|>", "<|", "|>"]
PIECES = [" ", "  ", "\n", "\n\n", "\r\n", "\t", "\u00a0", "\u3000", "a", "Hello", "WORLD", "HELLOworld", "'s", "'LL", "'ve",
          "1", "2024", "1234567", ".", ".:.:", "!?", "/", "é", "e\u0301", "中文", "日本語", "한국어", " температура",
          " nhiều", "٣٤", "½", "👍🏽", "👨‍👩‍👧", "ǅ", "ʰ"]


def _meta(name):
    return (Meta3 if name == "llama3" else Meta4)(FILES[name])


@pytest.fixture(scope="module", params=["llama3", "llama4", "tekken"])
def model(request):
    "`(name, ours, reference)` for one open model, both from the file its library ships."
    name = request.param
    ref = Tekkenizer.from_file(TEKKEN) if name == "tekken" else _meta(name)
    return name, interop.get_encoding(name, FILES[name]), ref


def _texts(sample_text):
    rng = random.Random(26)
    mixed = ["".join(rng.choice(PIECES + SPECIAL_BITS) for _ in range(rng.randrange(1, 120))) for _ in range(200)]
    return [sample_text[:150_000], Path(interop.__file__).read_text(encoding="utf-8"), "".join(mixed), ""] + mixed


@pytest.fixture(scope="module")
def sample_text(tinystories_sample):
    return tinystories_sample.read_text(encoding="utf-8")


def _ref_ids(name, ref, text, **kw):
    return ref.encode(text, False, False) if name == "tekken" else ref.encode(text, bos=False, eos=False, **kw)


def test_ids_equal_the_reference_on_ordinary_text(model, sample_text):
    name, tok, ref = model
    for text in _texts(sample_text):
        want = _ref_ids(name, ref, text)
        assert tok.encode_ordinary(text) == want, (name, text[:80])
        assert tok.encode(text, allowed_special=set(), disallowed_special=()) == want, (name, text[:80])
        assert tok.decode(want) == text


def test_special_tokens_allowed_and_disallowed_as_meta(model, sample_text):
    name, tok, ref = model
    if name == "tekken":  # Tekkenizer never reads special tokens from text; its ids are below the vocabulary
        assert tok.special_tokens == ref._special_tokens_reverse_vocab
        assert tok.encode("[INST]hi", allowed_special="all")[0] == ref.get_special_token("[INST]")
        with pytest.raises(ValueError, match=r"\[INST\]"): tok.encode("a [INST] b", disallowed_special="all")
        return
    assert tok.special_tokens == ref.special_tokens
    for text in _texts(sample_text)[2:]:
        assert tok.encode(text, allowed_special="all") == ref.encode(text, bos=False, eos=False, allowed_special="all")
        some = {"<|begin_of_text|>"} & set(tok.special_tokens)
        assert tok.encode(text, allowed_special=some, disallowed_special=()) == \
            ref.encode(text, bos=False, eos=False, allowed_special=some, disallowed_special=())
        for kw in ({"disallowed_special": "all"}, {"allowed_special": some, "disallowed_special": "all"}):
            try: want = ref.encode(text, bos=False, eos=False, **kw)
            except ValueError: want = ValueError
            try: got = tok.encode(text, **kw)
            except ValueError: got = ValueError
            assert got == want, (name, kw, text[:80])


def test_vocabulary_layout_equals_the_reference(model):
    name, tok, ref = model
    if name == "tekken":
        assert tok.vocab_size == ref.n_words == 131072 and min(tok.vocab) == 0
        assert all(tok.vocab[i + 1000] == ref.id_to_byte_piece(i + 1000) for i in range(0, 130072, 997))
        assert tok.pattern == TEKKEN_PATTERN
    else:
        assert tok.vocab_size == ref.n_words and tok.pattern == (LLAMA3_PATTERN if name == "llama3" else O200K_PATTERN)
        assert all(tok.vocab[i] == ref.model.decode_single_token_bytes(i) for i in range(0, ref.n_words, 997))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(PIECES + SPECIAL_BITS), max_size=30).map("".join)
       | st.text(alphabet=st.characters(codec="utf-8"), max_size=60))
def test_random_text_equals_every_reference(text):
    for name, tok, ref in _ALL():
        assert tok.encode_ordinary(text) == _ref_ids(name, ref, text), (name, text)
        if name != "tekken":
            assert tok.encode(text, allowed_special="all") == ref.encode(text, bos=False, eos=False, allowed_special="all")


def _ALL(cache=[]):
    if not cache:
        cache += [(n, interop.get_encoding(n, FILES[n]), Tekkenizer.from_file(TEKKEN) if n == "tekken" else _meta(n))
                  for n in FILES]
    return cache


def test_patterns_are_known_proven_and_the_references(model):
    name, tok, ref = model
    assert KNOWN_PATTERNS[name] == tok.pattern and tok.pattern in PROVEN_PATTERNS
    want = json.loads(TEKKEN.read_text(encoding="utf-8"))["config"]["pattern"] if name == "tekken" else \
        (Meta3.pat_str if name == "llama3" else Meta4.O200K_PATTERN)
    assert tok.pattern == want


def test_exports_stay_exact(model, tmp_path, sample_text):
    "tiktoken export and HF tokenizer.json give the same ids, every model (Llama 3's ranks have no merge list: HF's `ignore_merges` and every split)."
    import tiktoken, tokenizers
    name, tok, ref = model
    texts = _texts(sample_text)[2:40] + [sample_text[:20_000]]
    interop.export_tiktoken(tok, tmp_path / "tt", name=name)
    enc = interop.tiktoken_encoding(tmp_path / "tt")
    assert [enc.encode_ordinary(t) for t in texts] == [tok.encode_ordinary(t) for t in texts]
    if name == "llama3":  # 676 tokens tiktoken never builds from two, 19 built from other parts inside longer ones
        with pytest.raises(ArtifactError, match="no merge list"): tok.merges
    path = interop.export_hf(tok, tmp_path / "tokenizer.json")
    assert json.loads(path.read_text(encoding="utf-8"))["model"]["ignore_merges"] == (name == "llama3")
    hf = tokenizers.Tokenizer.from_file(str(path))
    texts += [".:.:", "a .:.: b", " .:.:.", wide_text(random.Random(7), 3000)]  # a token reached only whole, and mixed scripts
    assert [hf.encode(t, add_special_tokens=False).ids for t in texts] == [tok.encode(t) for t in texts]
    back = interop.import_hf(path)  # and back: Llama 3's file (ignore_merges) as ranks, the others as merges
    if name == "llama3": assert type(back) is interop.RanksTokenizer
    assert [back.encode(t, allowed_special="all") for t in texts] == [tok.encode(t, allowed_special="all") for t in texts]


def test_llama3_hf_export_where_two_splits_make_one_token(tmp_path):
    "HF breaks a tie between pairs by the merge list, tiktoken by position: where `x+y == y+z` (`ab|a|ba`), `[x][y][z]`"
    " could merge either way. A search, not a proof: every such triple of Llama 3's ranks, in a few contexts, gives Meta's"
    " ids through the export (the state may never arise: listing each token's splits in the reverse order passes too)."
    import tokenizers
    tok, meta = interop.get_encoding("llama3", FILES["llama3"]), _meta("llama3")
    ranks = tok.mergeable_ranks()
    triples = [(T[:i], T[i:], T[len(T) - i:]) for T in ranks for i in range(1, len(T))
               if T[:i] in ranks and T[i:] in ranks and T[len(T) - i:] in ranks and T.startswith(T[i:])]
    assert len(triples) > 5000
    texts = set()
    for x, y, z in triples:
        for s in (x + y + z, b" " + x + y + z, x + y + z + b"a", x + x + y + z):
            try: texts.add(s.decode("utf-8"))
            except UnicodeDecodeError: pass
    assert len(texts) > 5000
    hf = tokenizers.Tokenizer.from_file(str(interop.export_hf(tok, tmp_path / "tokenizer.json")))
    texts = sorted(texts)
    got = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    assert got == [meta.encode(t, bos=False, eos=False) for t in texts]


def test_encode_file_with_workers_equals_the_reference(model, tmp_path, sample_text):
    "The patterns are proven, so files are cut at safe spaces and split across workers; a worker gets the ranks."
    name, tok, ref = model
    text = sample_text[:300_000].replace("<|endoftext|>", "\n") + " 中文 HELLOworld 2024"
    p = tmp_path / "in.txt"; p.write_text(text, encoding="utf-8")
    ids = tok.encode_file(p, tmp_path / "ids.npy", workers=2, progress=False)
    assert ids.tolist() == _ref_ids(name, ref, text)


@pytest.mark.parametrize("name", ["llama3", "llama4"])
def test_files_and_streams_are_cut_where_meta_cuts_their_text(name, sample_text, tmp_path, monkeypatch):
    "A 1-3 MB file or stream: Meta cuts every 400,000 characters from the start of the whole text, so `encode_file` (any workers, any ranges) and `encode_iterable` do too."
    tok, ref = interop.get_encoding(name, FILES[name]), _meta(name)
    wide = wide_text(random.Random(5), 3000)
    body = sample_text.replace("<|endoftext|>", "<|eot_id|>")
    text = body + wide + "x" * 30_000 + " " * 26_000 + "<|begin_of_text|>yz " + body[:600_000] + wide
    assert 1_600_000 < len(text) < 2_000_000 and len(text.encode()) < 3_000_000
    want = ref.encode(text, bos=False, eos=False, allowed_special="all")
    assert want != ref.model.encode(text, allowed_special="all")  # the cuts change the ids
    p = tmp_path / "in.txt"; p.write_text(text, encoding="utf-8")
    data = p.read_bytes()
    for workers, min_range in ((1, fe._FILE_MIN_RANGE), (2, fe._FILE_MIN_RANGE), (2, 150_000)):
        monkeypatch.setattr(fe, "_FILE_MIN_RANGE", min_range)  # 150,000: many ranges, moved to Meta's cuts
        starts = [a for a, _ in tok._file_ranges(str(p), workers, min_range, "strict")]
        assert all(len(data[:a].decode()) % 400_000 == 0 for a in starts) and len(starts) == (5 if min_range < 10**6 else 1)  # every cut a start, or one range
        assert tok.encode_file(p, tmp_path / "ids.npy", workers=workers, progress=False).tolist() == want, (workers, min_range)
    lines = text.splitlines(keepends=True)
    assert list(tok.encode_iterable(lines)) == want
    ordinary = ref.encode(text, bos=False, eos=False, allowed_special=set(), disallowed_special=())
    assert list(tok.encode_iterable(lines, allowed_special=set(), disallowed_special=())) == ordinary
    clean = text.replace("<|eot_id|>", "\n")  # the one special token left is in the third slice: its index in the stream
    with pytest.raises(ValueError, match=f"at index {clean.index('<|begin_of_text|>')}"):
        list(tok.encode_iterable(clean.splitlines(keepends=True), disallowed_special="all"))


def test_a_missing_or_hostile_file_is_a_clear_error(tmp_path):
    with pytest.raises(ArtifactError, match="nope.model: no such file"): interop.get_encoding("llama3", tmp_path / "nope.model")
    with pytest.raises(ArtifactError, match="nope.json: no such file"): interop.get_encoding("tekken", tmp_path / "nope.json")
    with pytest.raises(TypeError, match="never downloads: Meta.s tokenizer.model"): interop.get_encoding("llama3")
    with pytest.raises(TypeError, match="tekken.json"): interop.get_encoding("tekken")
    doc = {"config": {"pattern": TEKKEN_PATTERN, "default_vocab_size": 300, "default_num_special_tokens": 20},
           "vocab": [{"rank": i, "token_bytes": base64.b64encode(bytes([i])).decode(), "token_str": None} for i in range(256)]
                    + [{"rank": 256, "token_bytes": base64.b64encode(b"ab").decode(), "token_str": "ab"}]}
    bad = tmp_path / "tekken.json"
    def refused(match, **change):
        d = json.loads(json.dumps(doc)); d["config"].update(change.pop("config", {})); d.update(change)
        bad.write_text(json.dumps(d), encoding="utf-8")
        with pytest.raises(ArtifactError, match=match): interop.get_encoding("tekken", bad)
    refused("default_vocab_size must be an int from 276 to 277")
    refused("special_tokens must be an array of at most 10 ", config={"default_num_special_tokens": 10, "default_vocab_size": 267})
    refused("not one of the known patterns", config={"pattern": r"(a+)+$", "default_vocab_size": 277})
    refused("default_num_special_tokens must be an int", config={"default_num_special_tokens": 10**6})
    refused("must have rank 3", config={"default_vocab_size": 277}, vocab=doc["vocab"][:3] + doc["vocab"][4:] + doc["vocab"][3:4])
    refused("not base64", config={"default_vocab_size": 277},
            vocab=doc["vocab"][:256] + [{"rank": 256, "token_bytes": "!!", "token_str": None}])
    refused("vocab entry 256 holds b'a'", config={"default_vocab_size": 277},
            vocab=doc["vocab"][:256] + [{"rank": 256, "token_bytes": base64.b64encode(b"a").decode(), "token_str": None}])
    refused("vocab entry 257 repeats the token b'ab' of entry 256", config={"default_vocab_size": 278},
            vocab=doc["vocab"] + [{"rank": 257, "token_bytes": base64.b64encode(b"ab").decode(), "token_str": None}])
    refused("special token 0", config={"default_vocab_size": 277}, special_tokens=[{"rank": 5, "token_str": "<s>"}])
    refused("special token 1", config={"default_vocab_size": 277},  # true == 1 in Python, not in JSON
            special_tokens=[{"rank": 0, "token_str": "<unk>"}, {"rank": True, "token_str": "<s>"}])
    refused("must have rank 1 ", config={"default_vocab_size": 277}, vocab=doc["vocab"][:1] + [{**doc["vocab"][1], "rank": True}] + doc["vocab"][2:])
    refused("vocab entry 256: token_bytes is empty", config={"default_vocab_size": 277},
            vocab=doc["vocab"][:256] + [{"rank": 256, "token_bytes": "", "token_str": None}])
    d = json.loads(json.dumps(doc)); d["config"]["default_vocab_size"] = 277
    bad.write_text(json.dumps(d), encoding="utf-8")
    tok = interop.get_encoding("tekken", bad)
    assert tok.vocab[276] == b"ab" and tok.special_tokens["<s>"] == 1 and tok.special_tokens["[TOOL_CONTENT]"] == 19
    assert tok.encode_ordinary("ab a") == [276, 20 + 32, 20 + 97]
    big = tmp_path / "big.json"
    with open(big, "wb") as f: f.truncate(interop.MAX_TEKKEN_BYTES + 1)
    with pytest.raises(ArtifactError, match="more than"): interop.get_encoding("tekken", big)
    short = tmp_path / "short.model"  # a llama ranks file whose special ids would land on tokens: too few ranks for Llama 3
    short.write_text("".join(f"{base64.b64encode(bytes([i])).decode()} {i + 1}\n" for i in range(256)), encoding="ascii")
    with pytest.raises(ArtifactError, match="holds 256 ranks, but llama3's file holds 128,000"):
        interop.get_encoding("llama3", short)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "bb", " ", "\n", "  ", "中", "\u3000", "\x1c", "xxxxxxx"]), max_size=60).map("".join),
       st.integers(1, 30), st.integers(1, 8))
def test_meta_slices_are_metas(text, size, run):
    want = [p for i in range(0, len(text), size) for p in Meta3._split_whitespaces_or_nonwhitespaces(text[i:i + size], run)]
    got = interop._meta_slices(text, size, run)
    assert "".join(got) == text and [p for p in got if p] == [p for p in want if p]


def test_long_texts_are_cut_where_meta_cuts_them(sample_text):
    "Over 400,000 characters, and runs of over 25,000, Meta's Tokenizer encodes slice by slice: so do we (plain tiktoken differs)."
    tok, ref = interop.get_encoding("llama3", FILES["llama3"]), _meta("llama3")
    text = sample_text[:500_000] + "x" * 30_000 + " " * 26_000 + "<|eot_id|>yz" + sample_text[:1000]
    want = ref.encode(text, bos=False, eos=False)
    assert tok.encode_ordinary(text) == want != ref.model.encode_ordinary(text)
    assert tok.encode(text, allowed_special="all") == ref.encode(text, bos=False, eos=False, allowed_special="all")


def test_the_slices_of_a_text_go_to_the_bulk_path_together(sample_text):
    "Llama 4: a text of two slices in one bulk call, with a special token across the cut (Meta finds it in neither slice), a lone surrogate, and a disallowed token's index in the whole text."
    tok, ref = interop.get_encoding("llama4", FILES["llama4"]), _meta("llama4")
    wide = wide_text(random.Random(3), 200)
    body = (sample_text + wide) * (400_000 // len(sample_text + wide) + 1)
    text = body[:400_000 - 3] + "<|eot|>" + body[:5000]  # the special token straddles the cut at 400,000
    calls, orig = [], fe.Tokenizer._bulk_ids
    def spy(self, items, *a, **k): calls.append(len(items)); return orig(self, items, *a, **k)
    fe.Tokenizer._bulk_ids = spy
    try:
        for kw in ({}, {"allowed_special": "all"}):
            assert tok.encode(text, **kw) == ref.encode(text, bos=False, eos=False, **kw)
        assert tok.encode_ordinary(text) == ref.encode(text, bos=False, eos=False, allowed_special=set())
    finally: fe.Tokenizer._bulk_ids = orig
    assert all(n >= 3 for n in calls)  # each text's two slices (and the second's safe blocks) in one call
    odd = body[:400_010] + "\ud800" + body[:300]  # a lone surrogate: slice by slice, repaired as tiktoken does
    assert tok.encode_ordinary(odd) == ref.encode(odd, bos=False, eos=False, allowed_special=set())
    with pytest.raises(ValueError, match="at index 400010"):
        tok.encode("x" * 10 + body[:400_000] + "<|eot|>", disallowed_special="all")


def test_encode_batch_cuts_each_text_where_meta_cuts_it(sample_text):
    "A batch of long and short texts: each text's ids are Meta's `encode` of it (the long ones cut, the short ones whole)."
    tok, ref = interop.get_encoding("llama3", FILES["llama3"]), _meta("llama3")
    texts = [sample_text[:1000], sample_text[:450_000] + "x" * 30_000, "a" * 26_000 + " b", " " * 30_000 + "c", "", "short"]
    got = tok.encode_batch(texts, workers=1)
    assert got == [ref.encode(t, bos=False, eos=False) for t in texts]
    assert got[1] != ref.model.encode_ordinary(texts[1])  # plain tiktoken differs on the cut text
    with pytest.raises(ValueError, match=r"texts\[1\]"):
        tok.encode_batch(["ok", "x" * 30_000 + "<|eot_id|>"], disallowed_special="all")
    with pytest.raises(ValueError, match=r"texts\[0\].* at index 480000"):  # the first text at fault, cut or not, as a loop of `encode`
        tok.encode_batch(["hello world " * 40_000 + "<|eot_id|>", "<|eot_id|>"], disallowed_special="all")


def test_explain_agrees_with_encode_on_tokens_only_the_shortcut_gives():
    tok = interop.get_encoding("llama3", FILES["llama3"])
    text = " nhiều .:.: world"
    assert [i for pe in tok.explain(text) for i in pe.ids] == tok.encode(text) == _meta("llama3").encode(text, bos=False, eos=False)


def test_a_spawned_worker_gets_the_same_tokenizer(sample_text):
    "Under spawn or forkserver the pool pickles what `_worker_inputs` gives: a RanksTokenizer travels as its ranks."
    import pickle
    from bpe_nb import fast_encoding
    for name in ("llama3", "tekken"):
        tok = interop.get_encoding(name, FILES[name])
        sent = pickle.loads(pickle.dumps(fast_encoding._worker_inputs(tok)))
        fast_encoding._init_worker(sent)
        got = fast_encoding._WORKER_TOKENIZER
        assert type(got) is type(tok) and got._slices == tok._slices
        assert got.encode(sample_text[:20_000] + " nhiều") == tok.encode(sample_text[:20_000] + " nhiều")
    fast_encoding._WORKER_TOKENIZER = None


def test_the_array_rounds_with_the_merge_tables_equal_the_reference(model, sample_text):
    "Past its first new pre-tokens, a tokenizer of ranks merges in rounds with `_split_table`'s tables: the same ids, shortcut included."
    name, _, ref = model
    tok = interop.get_encoding(name, FILES[name])  # a fresh one: no tables yet
    rng = random.Random(5)  # and hundreds of long pre-tokens that no cut shortens: words of 16 to 40 letters
    long_words = " ".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(16, 40))) for _ in range(2000))
    texts = _texts(sample_text)[:3] + [long_words]
    assert all(tok.encode_ordinary(t) == _ref_ids(name, ref, t) for t in texts)
    assert "_ranks" not in tok.__dict__  # so far one by one
    fresh = interop.get_encoding(name, FILES[name])
    fresh._one_by_one = len(fresh._rank_of)  # as if it had merged that many: the tables from the first block on
    for text in texts:
        assert fresh.encode_ordinary(text) == _ref_ids(name, ref, text), (name, text[:80])
    assert "_ranks" in fresh.__dict__


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", " ", "\n", "xy", "  ", "\u00a0", "\x1c"]), max_size=40).map("".join),
       st.integers(1, 60), st.integers(1, 7))
def test_meta_slices_sampled_equal_the_whole_scan(text, size, run):
    "`_meta_slices` skips the full scan where sampling finds no long run: the same slices as scanning every chunk."
    import re
    long = re.compile(rf"(?<!\S)\S{{{run + 1},}}|(?<!\s)\s{{{run + 1},}}")
    want = []
    for i in range(0, max(len(text), 1), size):
        chunk, start = text[i:i + size], 0
        for m in long.finditer(chunk):
            for cut in range(m.start() + run, m.end(), run): want.append(chunk[start:cut]); start = cut
        want.append(chunk[start:])
    assert interop._meta_slices(text, size, run) == want


def test_long_runs_of_wide_characters_equal_the_reference(model):
    "Long pre-tokens of CJK, kana, hangul, Thai and Devanagari (cut by chapter 04a where no token crosses): the reference's ids."
    name, tok, ref = model
    fresh = type(tok)(tok._rank_of, tok.special_tokens, tok.pattern, tok._offset, slices=tok._slices)  # cold: nothing cached
    for seed in range(2):
        text = wide_text(random.Random(seed), 2500)
        want = _ref_ids(name, ref, text)
        assert fresh.encode_ordinary(text) == want, name
        assert fresh.encode_ordinary(text) == want, name  # warm
        assert ((fresh._bulk_local.state.table.k2 & fe._CUT) != 0).any()  # long pre-tokens were cut


@pytest.mark.parametrize("name", ["llama3", "llama4", "tekken"])
def test_pair_slots_agree_with_search_on_real_keys(name):
    "The slot table of a real encoding's pair keys (`_cut_keys`) answers as the binary search does: on every key, on its neighbours, on random pairs of CJK characters."
    t = interop.get_encoding(name, FILES[name])._cut_keys()
    pairs = t.pairs
    assert len(pairs) > 4_000 and np.all(np.diff(pairs) > 0)  # distinct, sorted (Llama 3: 4,703; Tekken, Llama 4: tens of thousands)
    rng = np.random.default_rng(26)
    q = np.concatenate((pairs, pairs + 1, pairs - 1, rng.integers(0x3000, 0xA000, 20_000) << 21 | rng.integers(0x3000, 0xA000, 20_000)))
    assert fe._in_table(t.slots, pairs, q).tolist() == fe._member(pairs, q).tolist()
    assert np.count_nonzero(t.slots >= 0) > 0.85 * len(pairs)  # at most one key in eight slots: about 89% alone, as a good hash gives
