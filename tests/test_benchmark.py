"Unit tests of the benchmark harness (07): data resolution, prefixes, digests, the fresh-process runner, results files."
import csv
import json
import os
import subprocess
import sys
import warnings

import pytest
from hypothesis import given, settings, strategies as st

from bpe_nb import benchmark as bm
from bpe_nb.benchmark import (CSV_FIELDS, TINYSTORIES_ENV, SampleFallbackWarning, bundled_sample, corpus_prefix,
                              load_results, main, merges_digest, per_merge_seconds, run_experiment,
                              save_results, tinystories_path)
from bpe_nb.encoder import read_gpt2_merges

EOT = "<|endoftext|>"
VALID = "TinyStoriesV2-GPT4-valid.txt"


# --- data resolution --------------------------------------------------------------------------------
def test_explicit_dir_must_hold_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=VALID):
        tinystories_path("valid", tmp_path)
    (tmp_path / VALID).write_text("x" + EOT)
    assert tinystories_path("valid", tmp_path) == tmp_path / VALID


def test_env_var_then_bundled_sample(tmp_path, monkeypatch):
    (tmp_path / VALID).write_text("x" + EOT)
    monkeypatch.setenv(TINYSTORIES_ENV, str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # no fallback note when the file is there
        assert tinystories_path("valid") == tmp_path / VALID
    with pytest.warns(SampleFallbackWarning, match="holds no TinyStoriesV2-GPT4-train.txt"):
        assert tinystories_path("train") == bundled_sample()
    monkeypatch.delenv(TINYSTORIES_ENV)
    with pytest.warns(SampleFallbackWarning, match="is not set"):
        assert tinystories_path("valid") == bundled_sample()
    assert bundled_sample().is_file()


def test_bad_split_is_named():
    with pytest.raises(ValueError, match="'validation'"):
        tinystories_path("validation")


# --- the transfer logic, without any network: file:// and a refused local port -----------------------
def test_fetch_writes_atomically(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(1_500_000))
    out = bm._fetch(src.as_uri(), tmp_path / "dl" / "copy.bin")
    assert out.read_bytes() == src.read_bytes()
    assert [p.name for p in out.parent.iterdir()] == ["copy.bin"]
    mask = os.umask(0); os.umask(mask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~mask


def test_fetch_offline_is_a_clear_error(tmp_path):
    with pytest.raises(ConnectionError, match="cannot download http://127.0.0.1:9/"):
        bm._fetch("http://127.0.0.1:9/x.txt", tmp_path / "x.txt", timeout=2)
    assert list(tmp_path.iterdir()) == []


# --- prefixes ----------------------------------------------------------------------------------------
docs = st.lists(st.text(alphabet="ab é\n", min_size=1, max_size=40), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(docs, st.integers(1, 1500))
def test_prefix_is_the_longest_whole_story_prefix(tmp_path_factory, stories, nbytes):
    d = tmp_path_factory.mktemp("p")
    data = "".join(s + EOT + "\n" for s in stories).encode()
    src = d / "c.txt"
    src.write_bytes(data)
    try:
        out = corpus_prefix(src, nbytes, d)
    except ValueError as e:                             # only when no separator fits
        assert "no complete" in str(e)
        assert data.find(EOT.encode()) + len(EOT) > nbytes
        return
    got = out.read_bytes()
    if len(data) <= nbytes:
        assert out == src
        return
    assert data.startswith(got) and len(got) <= nbytes
    assert got.endswith(EOT.encode()) or got.endswith((EOT + "\n").encode())
    got.decode("utf-8")                                 # cut at a character boundary
    nxt = data.find(EOT.encode(), len(got))             # the next separator does not fit
    assert nxt == -1 or nxt + len(EOT) > nbytes


# --- digests and curves ------------------------------------------------------------------------------
pairs = st.lists(st.tuples(st.binary(min_size=1, max_size=4), st.binary(min_size=1, max_size=4)), max_size=20)


@settings(max_examples=100, deadline=None)
@given(pairs, pairs)
def test_digest_equal_iff_lists_equal(a, b):
    assert (merges_digest(a) == merges_digest(b)) == (a == b)


def test_curve_sampling_covers_every_merge():
    stamps = [0.001 * k for k in range(1, 5001)]
    curve = bm._curve(stamps, 0.0, 100)
    ks = [k for k, _ in curve]
    assert ks[0] == 0 and ks[1] == 1 and ks[-1] == 5000 and ks == sorted(set(ks))
    assert len(curve) <= 102
    ks2, secs = per_merge_seconds(curve)
    assert ks2 == ks[1:]
    assert all(s == pytest.approx(0.001, rel=1e-3) for s in secs[1:])
    assert bm._curve([], 0.0, 100) == [[0, 0.0]]


# --- the fresh-process runner --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    return corpus_prefix(bundled_sample(), 24_000, tmp_path_factory.mktemp("c"))


def test_naive_and_incremental_agree_in_fresh_processes(small_corpus, tmp_path):
    rn = run_experiment("naive", small_corpus, 350, merges_out=tmp_path / "n.txt")
    ri = run_experiment("incremental", small_corpus, 350, merges_out=tmp_path / "i.txt")
    assert rn["digest"] == ri["digest"]
    mn, mi = read_gpt2_merges(tmp_path / "n.txt"), read_gpt2_merges(tmp_path / "i.txt")
    assert (tmp_path / "i.txt").read_text(encoding="utf-8").startswith("#version: 0.2\n")   # a GPT-2 merges.txt
    assert mn == mi and merges_digest(mi) == ri["digest"] and len(mi) == ri["merges"] == 350 - 257
    for r in (rn, ri):
        assert r["vocab_size"] == 350 and not r["stopped_early"] and r["corpus_bytes"] == small_corpus.stat().st_size
        assert r["curve"][-1][0] == r["merges"] and r["total_s"] >= r["merge_s"] > 0
        assert r["peak_rss_kib"] >= r["baseline_rss_kib"] > 0 and r["process_s"] > r["total_s"]


def test_hf_reference_runs_and_reports_its_merges(small_corpus, tmp_path):
    pytest.importorskip("tokenizers")
    rh = run_experiment("hf", small_corpus, 350, merges_out=tmp_path / "h.txt")
    mh = read_gpt2_merges(tmp_path / "h.txt")
    assert rh["vocab_size"] == 350 and len(mh) == rh["merges"] == 93 and merges_digest(mh) == rh["digest"]
    assert rh["merge_s"] is None and rh["total_s"] > 0


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="VmHWM needs Linux /proc")
def test_peak_rss_is_the_childs_own(small_corpus):
    # ru_maxrss of a child inherits the parent's high-water mark across fork+exec; VmHWM does not.
    ballast = bytearray(300 * 2**20)
    for i in range(0, len(ballast), 4096): ballast[i] = 1
    r = run_experiment("incremental", small_corpus, 300)
    del ballast
    assert r["ru_maxrss_kib"] > 300 * 1024 > 3 * r["peak_rss_kib"]
    assert r["peak_rss_kib"] >= r["baseline_rss_kib"] > 0


def test_early_stop_is_reported(tmp_path):
    corpus = tmp_path / "tiny.txt"
    corpus.write_text(("ab\nab\n" + EOT) * 3)
    r = run_experiment("incremental", corpus, 400)
    assert r["stopped_early"] and r["merges"] == 1 and r["vocab_size"] == 258


def test_runner_rejects_bad_arguments(small_corpus, tmp_path):
    with pytest.raises(ValueError, match="'fast'"): run_experiment("fast", small_corpus, 300)
    with pytest.raises(FileNotFoundError, match="nope.txt"): run_experiment("naive", tmp_path / "nope.txt", 300)
    with pytest.raises(ValueError, match="vocab_size=256"): run_experiment("naive", small_corpus, 256)
    with pytest.raises(TypeError, match="workers must be an int"): run_experiment("naive", small_corpus, 300, workers=1.5)
    with pytest.raises(ValueError, match="workers must be >= 1"): run_experiment("naive", small_corpus, 300, workers=0)
    with pytest.raises(TypeError, match="vocab_size must be an int"): run_experiment("naive", small_corpus, "300")
    with pytest.raises(TypeError, match="curve_points must be an int"): run_experiment("naive", small_corpus, 300, curve_points=None)
    with pytest.raises(TypeError, match="special_tokens"): run_experiment("naive", small_corpus, 300, special_tokens=EOT)
    with pytest.raises(ValueError, match="given more than once"):
        run_experiment("naive", small_corpus, 300, special_tokens=[EOT, EOT])
    with pytest.raises(ValueError, match="non-empty strings"): run_experiment("naive", small_corpus, 300, special_tokens=[""])


def test_child_does_not_import_the_writers(small_corpus, tmp_path):
    # The child's start-up is part of what it measures (process_s): writing the merges must not pull in
    # bpe_nb.artifacts / bpe_nb.encoder (the trainer itself needs numpy since chapter 02's array loop).
    code = ("import sys, bpe_nb.benchmark as b; "
            f"b.main(['--trainer', 'incremental', '--corpus', {str(small_corpus)!r}, '--vocab-size', '300', "
            f"'--merges-out', {str(tmp_path / 'm.txt')!r}]); "
            "print('writers imported:', any(m in sys.modules for m in ('bpe_nb.artifacts', 'bpe_nb.encoder')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "writers imported: False" in out
    assert len(read_gpt2_merges(tmp_path / "m.txt")) == 300 - 257


def test_child_failure_is_reported(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok \xff\xfe not utf-8" + EOT.encode())
    with pytest.raises(RuntimeError, match="benchmark run failed"):
        run_experiment("naive", bad, 300)


def test_main_prints_one_marked_json_line(small_corpus, capsys):
    assert main(["--trainer", "incremental", "--corpus", str(small_corpus), "--vocab-size", "300"]) == 0
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith(bm._MARK)]
    assert len(lines) == 1
    r = json.loads(lines[0][len(bm._MARK):])
    assert r["merges"] == 300 - 257 and r["workers"] == 1


# --- results files ------------------------------------------------------------------------------------
def test_results_round_trip(tmp_path):
    runs = [dict(experiment="a", trainer="naive", corpus="c.txt", corpus_bytes=10, merges=3, digest="x", curve=[[0, 0.0]]),
            dict(experiment="a+b", trainer="incremental", corpus="c.txt", corpus_bytes=10, merges=3, digest="x")]
    res = dict(meta=dict(date="2026-01-01", cpu="test"), runs=runs)
    j, c = save_results(res, tmp_path / "r")
    assert load_results(tmp_path / "r") == res
    rows = list(csv.DictReader(c.open()))
    assert tuple(rows[0]) == CSV_FIELDS and [r["experiment"] for r in rows] == ["a", "a+b"]
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["results.csv", "results.json"]
    mask = os.umask(0); os.umask(mask)
    assert all((p.stat().st_mode & 0o777) == (0o666 & ~mask) for p in (j, c))   # not mkstemp's 0600
    with pytest.raises(FileNotFoundError, match="BPE_NB_BENCH=full"): load_results(tmp_path)
    with pytest.raises(ValueError, match="'meta' and 'runs'"): save_results({"meta": {}}, tmp_path)


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps_rollup"), reason="PSS needs Linux /proc")
def test_peak_pss_counts_the_workers_once(tmp_path):
    # Two counting workers: their RSS counts the pages they share with the parent in full, PSS once in all.
    corpus = tmp_path / "four.txt"
    corpus.write_text(bundled_sample().read_text(encoding="utf-8") * 4, encoding="utf-8")  # 4 MB: several ranges, a pool
    r = run_experiment("incremental", corpus, 300, workers=2)
    assert r["peak_rss_children_kib"] > 0  # the workers ran
    assert 0 < r["peak_pss_kib"] < r["peak_rss_kib"] + 2 * r["peak_rss_children_kib"]
