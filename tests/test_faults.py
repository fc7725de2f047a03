"""A lost worker costs nothing (issue 28): a worker process that dies has its tasks run again, once, in a fresh pool.

Workers are killed by the `KILL_WORKER` test hook of `bpe_nb.chunking` (at a chosen task, once or every time) and by
a SIGKILL sent from the test; every result is compared with an undisturbed run.
"""
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import numpy as np
import pytest

import bpe_nb.chunking as chunking
import bpe_nb.fast_encoding as fast
from bpe_nb.chunking import KILL_WORKER, CountProgress, WorkerLostError, count_file, count_pretokens_file, file_ranges
from bpe_nb.encoder import Tokenizer
from bpe_nb.training import train_bpe, train_from_iterator

EOT = "<|endoftext|>"
SMALL = 1 << 16  # ranges of 64 KiB: the 1 MB sample makes 8 ranges for 2 workers


@pytest.fixture(scope="module")
def sample(tinystories_sample):
    return tinystories_sample.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, sample):
    "The sample twice (about 2 MB): 8 ranges of at least 64 KiB for 2 workers."
    p = tmp_path_factory.mktemp("faults") / "corpus.txt"
    p.write_text(sample * 2, encoding="utf-8")
    return p


@pytest.fixture(scope="module")
def tok(tinystories_sample):
    model = train_bpe(tinystories_sample, 400, [EOT], workers=1, progress=False)
    return Tokenizer.from_model(model)


@pytest.fixture
def kill_once(tmp_path, monkeypatch):
    "Set the hook so that task `i`'s worker dies the first time only; return the marker file it leaves."
    def arm(i: int):
        monkeypatch.setenv(KILL_WORKER, f"{i}:{tmp_path}")
        return tmp_path / f"killed-{i}"
    return arm


@pytest.fixture
def renewals(monkeypatch):
    "Count the fresh pools made after a worker died."
    calls, real = [], chunking._renew
    def spy(*a, **k):
        calls.append(1); return real(*a, **k)
    monkeypatch.setattr(chunking, "_renew", spy)
    return calls


# ------------------------------------------------------------------ counting


def test_count_pretokens_file_survives_a_killed_worker_with_truthful_progress(corpus, kill_once, renewals):
    want = count_pretokens_file(corpus, [EOT], workers=2, min_chunk_size=SMALL)
    marker = kill_once(3)
    steps = []
    got = count_pretokens_file(corpus, [EOT], workers=2, min_chunk_size=SMALL, progress=steps.append)
    assert marker.exists() and renewals == [1]  # the worker died, and one fresh pool finished the run
    assert got == want and list(got) == list(want)  # same counts, same first-occurrence order
    size = corpus.stat().st_size
    ranges = file_ranges(corpus, 2, [EOT], min_chunk_size=SMALL)
    assert steps[-1] == CountProgress(size, size)  # every byte once: a lost range is not counted twice
    assert [s.done for s in steps] == [b for _, b in ranges]  # one step per range folded, in file order


def test_a_range_that_kills_its_worker_every_time_is_named(corpus, monkeypatch):
    ranges = file_ranges(corpus, 2, [EOT], min_chunk_size=SMALL)
    monkeypatch.setenv(KILL_WORKER, "2")
    with pytest.raises(WorkerLostError) as e:
        count_pretokens_file(corpus, [EOT], workers=2, min_chunk_size=SMALL)
    msg = str(e.value)
    a, b = ranges[2]
    assert f"died twice while counting bytes {a:,}-{b:,} of {corpus}" in msg  # that range, not one lost with it
    assert "signal 9" in msg and "out of memory" in msg and "fewer workers" in msg
    assert isinstance(e.value, RuntimeError)


def test_count_file_keeps_its_record_and_hash_across_a_retry(corpus, kill_once):
    want, rec = count_file(corpus, [EOT], 2, min_chunk_size=SMALL, sha256=True)
    kill_once(0)
    got, rec2 = count_file(corpus, [EOT], 2, min_chunk_size=SMALL, sha256=True)
    assert got == want and rec2["sha256"] == rec["sha256"] and rec2["special_tokens_found"] == rec["special_tokens_found"]


def test_train_bpe_learns_the_same_merges_after_a_killed_worker(corpus, kill_once):
    want = train_bpe(corpus, 500, [EOT], workers=2, progress=False, min_chunk_size=SMALL)
    marker = kill_once(5)
    got = train_bpe(corpus, 500, [EOT], workers=2, progress=False, min_chunk_size=SMALL)
    assert marker.exists()
    assert got.merges == want.merges and got.vocab == want.vocab
    assert got.info["corpus_sha256"] == want.info["corpus_sha256"]


def test_train_from_iterator_survives_a_killed_worker_and_names_a_chunk_lost_twice(sample, kill_once, monkeypatch):
    docs = sample.split(EOT)
    want = train_from_iterator(iter(docs), 400, [EOT], workers=2, chunk_size=SMALL)
    marker = kill_once(4)
    steps = []
    got = train_from_iterator(iter(docs), 400, [EOT], workers=2, chunk_size=SMALL, progress=steps.append)
    assert marker.exists() and got.merges == want.merges
    counted = [s.done for s in steps if isinstance(s, CountProgress)]
    assert counted == sorted(set(counted)) and counted[-1] == len(sample.encode())
    monkeypatch.setenv(KILL_WORKER, "4")
    with pytest.raises(WorkerLostError, match=r"counting bytes [\d,]+-[\d,]+ of the joined documents"):
        train_from_iterator(iter(docs), 400, [EOT], workers=2, chunk_size=SMALL)


def test_an_executor_of_your_own_is_not_retried(corpus, monkeypatch):
    "Given an executor, we do not retry: a broken ProcessPoolExecutor of the caller's is raised as it is."
    monkeypatch.setenv(KILL_WORKER, "1")
    with ProcessPoolExecutor(2) as ex, pytest.raises(BrokenProcessPool):
        count_pretokens_file(corpus, [EOT], workers=2, executor=ex, min_chunk_size=SMALL)


# ------------------------------------------------------------------ encoding


class _Bar:
    "Records what a progress bar is told."
    made = []
    def __init__(self, total=None, **kw): self.total, self.n = total, 0; _Bar.made.append(self)
    def update(self, n): self.n += n
    def close(self): pass


def test_encode_file_writes_the_same_bytes_after_a_killed_worker(corpus, tok, tmp_path, kill_once, monkeypatch):
    monkeypatch.setattr(fast, "_FILE_MIN_RANGE", SMALL)
    tok.encode_file(corpus, tmp_path / "want.bin", workers=2, progress=False)
    monkeypatch.setattr(fast, "ProgressBar", _Bar); _Bar.made.clear()
    marker = kill_once(2)
    tok.encode_file(corpus, tmp_path / "got.bin", workers=2, progress=True)
    assert marker.exists()
    assert (tmp_path / "got.bin").read_bytes() == (tmp_path / "want.bin").read_bytes()
    bar, = _Bar.made
    assert bar.n == bar.total == corpus.stat().st_size  # each range counted once


def test_encode_file_fails_cleanly_when_a_range_kills_its_worker_twice(corpus, tok, tmp_path, monkeypatch):
    monkeypatch.setattr(fast, "_FILE_MIN_RANGE", SMALL)
    monkeypatch.setenv(KILL_WORKER, "1")
    out = tmp_path / "out" / "ids.npy"; out.parent.mkdir()
    with pytest.raises(WorkerLostError, match=r"encoding bytes [\d,]+-[\d,]+ of .*corpus\.txt"):
        tok.encode_file(corpus, out, workers=2, progress=False)
    assert list(out.parent.iterdir()) == []  # no output, no temporary file


def test_encode_batch_gives_the_same_ids_after_a_killed_worker(sample, tok, kill_once):
    texts = sample.split(EOT) * 3  # about 3 M characters: the pool path (3 workers, over 2 M characters)
    assert sum(map(len, texts)) >= fast._BATCH_MIN_CHARS
    want = tok.encode_batch(texts, workers=1)
    marker = kill_once(1)
    got = tok.encode_batch(texts, workers=3)
    assert marker.exists() and got == want


# ------------------------------------------------------------------ a SIGKILL from outside


def _kill_a_worker_when_it_appears(killed: list, stop: threading.Event):
    "Wait for a pool worker (a child process of this one), let it start, and SIGKILL it."
    while not stop.is_set():
        children = multiprocessing.active_children()
        if children:
            time.sleep(0.05)  # its first task has started
            os.kill(children[0].pid, signal.SIGKILL); killed.append(children[0].pid); return
        time.sleep(0.005)


def _run_with_an_outside_kill(fn):
    killed, stop = [], threading.Event()
    t = threading.Thread(target=_kill_a_worker_when_it_appears, args=(killed, stop))
    t.start()
    try: return fn(), killed
    finally: stop.set(); t.join()


def test_train_bpe_and_encode_file_survive_an_outside_sigkill(tmp_path, sample, tok, renewals, monkeypatch):
    big = tmp_path / "big.txt"; big.write_text(sample * 6, encoding="utf-8")  # about 6 MB: 0.5 s or more of work
    want = train_bpe(big, 400, [EOT], workers=2, progress=False, min_chunk_size=SMALL)
    got, killed = _run_with_an_outside_kill(lambda: train_bpe(big, 400, [EOT], workers=2, progress=False,
                                                              min_chunk_size=SMALL))
    assert killed and renewals == [1] and got.merges == want.merges
    monkeypatch.setattr(fast, "_FILE_MIN_RANGE", SMALL)
    tok.encode_file(big, tmp_path / "want.bin", workers=2, progress=False)
    _, killed = _run_with_an_outside_kill(lambda: tok.encode_file(big, tmp_path / "got.bin", workers=2, progress=False))
    assert killed and renewals == [1, 1]
    assert (tmp_path / "got.bin").read_bytes() == (tmp_path / "want.bin").read_bytes()


# ------------------------------------------------------------------ the command line


def test_cli_says_a_worker_lost_twice_in_one_line_and_writes_nothing(corpus, tmp_path):
    out = tmp_path / "tok.json"
    env = {**os.environ, KILL_WORKER: "1"}
    big = tmp_path / "big.txt"; big.write_bytes(corpus.read_bytes() * 2)  # 4 MB: 4 ranges of the default 1 MB
    r = subprocess.run([sys.executable, "-m", "bpe_nb.cli", "train", str(big), "--workers", "2", "--vocab-size", "300",
                        "-q", "--out", str(out)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpe-nb: error: a worker process died twice while counting bytes")
    assert "signal 9" in lines[0] and "unexpected" not in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.txt"]  # no tokenizer, no temporary file


# ------------------------------------------------------------------ Dask: its own retries


def test_dask_reruns_a_killed_workers_task_with_the_same_counts(corpus, kill_once):
    distributed = pytest.importorskip("distributed")
    want = count_pretokens_file(corpus, [EOT], workers=1)
    marker = kill_once(2)  # set before the cluster starts: its worker processes inherit it
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster, \
         distributed.Client(cluster) as client:
        got = count_pretokens_file(corpus, [EOT], workers=2, executor=client.get_executor(), min_chunk_size=SMALL)
    assert marker.exists()  # a Dask worker died, and Dask ran its task again
    assert got == want and list(got) == list(want)


# ------------------------------------------------------------------ which task is blamed (scripted pools, no processes)


class _ScriptedPool(chunking.Executor):
    "A pool that finishes the tasks in `fast` at once and holds the others; when waited on, it breaks if it holds `kill`."
    def __init__(self, fast, kill, log):
        self.fast, self.kill, self.held = fast, kill, []
        log.append(self)
    def submit(self, fn, /, *args):
        fut = chunking.Future(); fut.set_running_or_notify_cancel()
        if args[0] in self.fast: fut.set_result(fn(*args))
        else: self.held.append((fut, fn, args))
        return fut
    def settle(self):
        broken = any(args[0] == self.kill for _, _, args in self.held)
        for fut, fn, args in self.held:
            if broken: fut.set_exception(BrokenProcessPool("a worker died"))
            else: fut.set_result(fn(*args))
        self.held = []
    def shutdown(self, wait=True, cancel_futures=False): self.settle()


def _scripted(monkeypatch, scripts):
    "Pools made in turn from `scripts` [(fast, kill), ...] (then: all fast), waits that settle them."
    log, it = [], iter(scripts)
    def make(): return _ScriptedPool(*next(it, (range(100), None)), log)
    real = chunking.wait
    def wait(fs, timeout=None, return_when=chunking.FIRST_COMPLETED):
        for p in log: p.settle()
        return real(fs, timeout=timeout, return_when=return_when)
    monkeypatch.setattr(chunking, "wait", wait)
    return make, log


def test_a_task_lost_twice_beside_a_new_killer_is_not_blamed(monkeypatch):
    "Task 2 is lost by pool 0 (its own death) and by pool 1, where task 4 (never lost before) kills the worker."
    make, log = _scripted(monkeypatch, [({0, 1}, 2), (set(), 4)])
    got = list(chunking.completed_in_order(make, ((abs, k) for k in range(8)), window=3))
    assert got == [(k, k) for k in range(8)]  # task 2 ran alone (fine), task 4 got its second run: no error
    assert len(log) >= 4  # pool 0, pool 1, task 2 alone, the fresh pool after them


def test_a_task_lost_twice_alone_is_blamed_without_a_third_run(monkeypatch):
    make, log = _scripted(monkeypatch, [({0, 1}, 2), ({3, 4}, 2)])
    with pytest.raises(WorkerLostError, match="died twice while running task 2"):
        list(chunking.completed_in_order(make, ((abs, k) for k in range(8)), window=3))
    assert len(log) == 2  # no pool was made to run it a third time


# ------------------------------------------------------------------ a worker killed while writing its result


def _die_writing_half_a_message():
    "In a pool worker: write the start of a result message to the pool's result pipe, then die (SIGKILL)."
    import gc, multiprocessing.queues, struct
    q = next(o for o in gc.get_objects() if isinstance(o, multiprocessing.queues.SimpleQueue))  # the results' pipe
    os.write(q._writer.fileno(), struct.pack("!i", 1 << 20) + b"half a message")  # a header promising 1 MiB, then little
    os.kill(os.getpid(), signal.SIGKILL)


def _die_while_writing_once(marker: str, i: int) -> int:
    "Square `i`; the first call of all, in a pool worker, writes the start of a result message to the pool's result pipe and dies."
    try: os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
    except FileExistsError: return i * i
    _die_writing_half_a_message()


def test_a_worker_killed_while_writing_its_result_does_not_hang(tmp_path, renewals):
    "CPython's pool waits forever for the rest of a message its dead worker was writing: the loop sees the dead worker, unsticks the pool (`_unstick`), renews it and gets every result."
    marker = str(tmp_path / "died")
    make = lambda: ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork"))
    out = {}
    t = threading.Thread(target=lambda: out.update(chunking.completed_in_order(make, [(_die_while_writing_once, marker, i) for i in range(6)], 4)),
                         daemon=True)
    t.start(); t.join(30)
    assert not t.is_alive(), "completed_in_order hung on a pool whose worker died mid-message"
    assert os.path.exists(marker) and out == {i: i * i for i in range(6)} and renewals == [1]


def _always_die_while_writing(i: int) -> int:
    "Square `i` (slowly, so that others are lost with it), except task 3, which writes half a result message and dies, every time."
    if i != 3: time.sleep(0.3); return i * i
    _die_writing_half_a_message()


def test_a_task_that_always_dies_mid_message_is_named_not_hung():
    "The task dies mid-message twice, beside others: the suspects run alone (`_alone`) without hanging, and the error names it."
    make = lambda: ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork"))
    caught = []
    def run():
        try: dict(chunking.completed_in_order(make, [(_always_die_while_writing, i) for i in range(8)], 4, describe=lambda i: f"task {i}"))
        except WorkerLostError as e: caught.append(str(e))
    t = threading.Thread(target=run, daemon=True)
    t.start(); t.join(60)
    assert not t.is_alive(), "hung on a pool whose worker died mid-message"
    assert len(caught) == 1 and "while task 3" in caught[0]


def _kill_my_process_once(marker: str, i: int) -> int:
    "Return `i`; the first call of all made in a worker process (never in the parent) kills that process (SIGKILL)."
    if multiprocessing.parent_process() is not None:
        try: os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
        except FileExistsError: return i
        os.kill(os.getpid(), signal.SIGKILL)
    return i


def test_a_pool_that_counts_in_the_parent_too_survives_a_lost_worker(tmp_path, monkeypatch):
    "`_own_pools`: the first pool runs tasks in the parent as well (`_HelpingPool`); its worker dies once; the lost tasks run again in a plain pool; every result comes, once, in order."
    monkeypatch.delenv(KILL_WORKER, raising=False)
    pools, made = chunking._own_pools(2), []
    def make():
        ex = pools(); made.append(type(ex)); return ex
    marker = tmp_path / "died"
    out = list(chunking.completed_in_order(make, [(_kill_my_process_once, str(marker), i) for i in range(10)], 4))
    assert marker.exists() and out == [(i, i) for i in range(10)]
    assert made[0] is chunking._HelpingPool and len(made) >= 2 and set(made[1:]) == {ProcessPoolExecutor}
