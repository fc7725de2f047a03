"""Benchmark of parallel chunked pre-token counting (chapter 03) and of `train_bpe` against HF tokenizers.

Run:  python tests/bench_chunking.py            (about 2 minutes on 2 cores; needs psutil and tokenizers)
      python tests/bench_chunking.py --sizes 20 80 --repeats 1    (a quicker look)
      python tests/bench_chunking.py --memory 64 256   (the parent's memory against the final Counter, on real text;
                                                        add --trace for tracemalloc too: slow, forked workers trace as well;
                                                        a size beyond the machine's text is topped up with rot13
                                                        copies of its documents: `--memory 447` is the issue's size)

It builds 100 MB and 400 MB files by repeating the bundled 1 MB TinyStories sample in a temporary
directory (deleted afterwards) and, for each file and for 1 and 2 workers, counts its pre-tokens in a
fresh Python process, reporting MB/s and the peak RSS of the parent and of every worker process
(psutil sampling every 20 ms, plus `getrusage(RUSAGE_CHILDREN)`). Then it trains on the 1 MB sample at
vocab 10,000 with `train_bpe(workers=2)` and with HF tokenizers' BpeTrainer (RAYON_NUM_THREADS=2) on
the same documents, and projects the time to count the full TinyStories training file (2.23 GB), both
from the measured wall-clock rate and from the CPU time the counting used (MB per CPU-second, which other
load on the machine barely changes). The load average is printed before and after: on a shared machine
the wall-clock figures, and the 2-vs-1 speed-up above all, are only indicative.
"""
from __future__ import annotations
import argparse, hashlib, json, os, platform, resource, shutil, subprocess, sys, tempfile, threading, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "bpe_nb" / "data" / "tinystories_sample_1M.txt"
EOT = "<|endoftext|>"
FULL_TINYSTORIES = 2.23e9  # bytes of TinyStoriesV2-GPT4-train.txt


def _peak_sampler(stop: threading.Event, peaks: dict, interval: float = 0.02):
    "Record the peak RSS of this process ('parent') and of each child process (by pid) until `stop` is set."
    import psutil
    me = psutil.Process()
    while not stop.is_set():
        try:
            peaks["parent"] = max(peaks.get("parent", 0), me.memory_info().rss)
            for c in me.children(recursive=True):
                try: peaks[c.pid] = max(peaks.get(c.pid, 0), c.memory_info().rss)
                except psutil.Error: pass
        except psutil.Error: pass
        stop.wait(interval)


def one_count(path: str, workers: int) -> dict:
    "Count `path` with `workers` in this (fresh) process; return timing and memory figures."
    from bpe_nb.chunking import count_pretokens_file
    stop, peaks = threading.Event(), {}
    t = threading.Thread(target=_peak_sampler, args=(stop, peaks), daemon=True); t.start()
    cpu = lambda: sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                      for f in ("ru_utime", "ru_stime"))
    c0, t0 = cpu(), time.perf_counter()
    counts = count_pretokens_file(path, [EOT], workers=workers)
    secs = time.perf_counter() - t0
    stop.set(); t.join()
    cpu_secs = cpu() - c0  # this process and its (finished) workers; includes the memory sampler, a few percent
    size = os.path.getsize(path)
    workers_rss = sorted((v for k, v in peaks.items() if k != "parent"), reverse=True)
    return dict(workers=workers, seconds=secs, mb_s=size / secs / 1e6, cpu_seconds=cpu_secs, mb_cpu_s=size / cpu_secs / 1e6,
                distinct=len(counts),
                digest=hashlib.sha256(repr(list(counts.items())).encode()).hexdigest()[:16], total=sum(counts.values()),
                parent_rss=max(peaks.get("parent", 0), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024),
                workers_rss=workers_rss, children_maxrss=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)


def _deep_size(c) -> int:
    "Bytes a Counter of bytes holds: its table, its keys, and its counts beyond the interpreter's cached small ints."
    return sys.getsizeof(c) + sum(sys.getsizeof(k) + (sys.getsizeof(v) if v > 256 else 0) for k, v in c.items())


def _hwm() -> int | None:
    "The kernel's high-water mark of this process's resident memory, in bytes (Linux; None elsewhere)."
    try:
        with open("/proc/self/status") as f: return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmHWM"))
    except (OSError, StopIteration): return None


def _reset_hwm():
    "Start the high-water mark again from the current resident memory (Linux)."
    try:
        with open("/proc/self/clear_refs", "w") as f: f.write("5")
    except OSError: pass


def one_memory(path: str, workers: int, trace: bool) -> dict:
    "Count `path` with `workers` in this (fresh) process: the parent's peak (RSS, sampled and high-water mark; or tracemalloc) and the final Counter."
    import tracemalloc
    from bpe_nb.chunking import count_pretokens_file, file_ranges
    from bpe_nb.pretokenize import GPT2_PATTERN
    from bpe_nb import chunking
    stop, peaks, phases = threading.Event(), {}, {}
    result = chunking._Total.result
    def marked_result(total):  # the peak up to the end of the folding, then the peak from there to the end, apart
        phases["fold"] = _hwm(); _reset_hwm()
        out = result(total)
        phases["end"] = _hwm()
        return out
    chunking._Total.result = marked_result
    import psutil
    start_rss = psutil.Process().memory_info().rss
    _reset_hwm()
    t = threading.Thread(target=_peak_sampler, args=(stop, peaks), daemon=True); t.start()
    if trace: tracemalloc.start()
    t0 = time.perf_counter()
    counts = count_pretokens_file(path, [EOT], workers=workers)
    secs = time.perf_counter() - t0
    traced = tracemalloc.get_traced_memory()[1] if trace else None
    if trace: tracemalloc.stop()
    stop.set(); t.join()
    # the sampler needs the GIL, and a long C call (a dict's resize, a sort) holds it: the high-water marks see those peaks too
    marks = [m for m in (phases.get("fold"), phases.get("end")) if m is not None]
    return dict(workers=workers, seconds=secs, distinct=len(counts), final=_deep_size(counts), traced_peak=traced,
                rss_start=start_rss, rss_peak=max([peaks.get("parent", 0), *marks]), rss_peak_sampled=peaks.get("parent", 0),
                rss_peak_fold=phases.get("fold"), rss_peak_end=phases.get("end"),
                ranges=len(file_ranges(path, workers, [EOT], GPT2_PATTERN)))


def memory_main(sizes: list[int], trace: bool = False, repeats: int = 3):
    "The parent's peak while counting real text (the machine's own files, as tests/bench_scale.py builds them), `repeats` runs each."
    sys.path.insert(0, str(ROOT / "tests"))
    from bench_scale import _load, build_corpus
    mb = lambda b: f"{b / 2**20:7.1f} MiB"
    print("command:", "python tests/bench_chunking.py", *sys.argv[1:])
    print("machine:", _machine())
    print("load average at start:", _load())
    for var in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"):  # glibc's allocator settings, if fixed for the run
        if var in os.environ: print(f"environment: {var}={os.environ[var]}")
    tmp = Path(tempfile.mkdtemp(prefix="bench_chunking_mem_"))
    try:
        for size_mb in sizes:
            path = tmp / f"corpus_{size_mb}MB.txt"
            rec = build_corpus(size_mb, path, top_up=True)
            extra = (f" ({rec['machine_bytes'] / 1e6:.1f} MB) + rot13 copies of {rec['rot13_copies']:,} of their documents "
                     f"({(rec['bytes'] - rec['machine_bytes']) / 1e6:.1f} MB)" if rec.get("rot13_copies") else "")
            print(f"== {path.name}: {rec['bytes'] / 1e6:.1f} MB from {rec['files']:,} files{extra} (sha256 {rec['sha256'][:16]})")
            for w in (2,):
                for traced in [False] * repeats + ([True] if trace else []):
                    r = _child("--memory-one", str(path), str(w), "1" if traced else "0")
                    what = (f"tracemalloc peak {mb(r['traced_peak'])} = {r['traced_peak'] / r['final']:.2f}x the final Counter"
                            if traced else f"RSS peak {mb(r['rss_peak'])} (start {mb(r['rss_start'])}; growth "
                            f"{mb(r['rss_peak'] - r['rss_start'])} = {(r['rss_peak'] - r['rss_start']) / r['final']:.2f}x the final Counter; "
                            f"the whole peak is {r['rss_peak'] / r['final']:.2f}x it" +
                            (f"; peak while counting and folding {mb(r['rss_peak_fold'])}, after it {mb(r['rss_peak_end'])})"
                             if r.get("rss_peak_fold") else ")"))
                    print(f"  workers={w}, {r['ranges']} ranges: {r['distinct']:,} distinct pre-tokens, final Counter "
                          f"{mb(r['final'])}; parent {what}; {r['seconds']:.1f} s")
            path.unlink()
    finally:
        shutil.rmtree(tmp)
    print("load average at end:", _load())


def one_train(which: str, repeats: int) -> dict:
    "Train on the sample at vocab 10,000: `ours` (train_bpe, 2 workers), `ours-pool` (2 worker processes forced), or `hf`."
    best, info = float("inf"), {}
    for _ in range(repeats):
        if which == "hf":
            from tokenizers import Tokenizer, models, pre_tokenizers, trainers
            t0 = time.perf_counter()
            docs = SAMPLE.read_text(encoding="utf-8").split(EOT)
            tok = Tokenizer(models.BPE())
            tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
            tr = trainers.BpeTrainer(vocab_size=10_000, special_tokens=[EOT], show_progress=False,
                                     initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
            tok.train_from_iterator(docs, tr)
            secs, info = time.perf_counter() - t0, dict(vocab=tok.get_vocab_size())
        else:
            import warnings
            from bpe_nb.chunking import count_pretokens_file
            from bpe_nb.training import train_bpe
            extra = dict(min_chunk_size=1 << 18) if which == "ours-pool" else {}
            t0 = time.perf_counter()
            count_pretokens_file(SAMPLE, [EOT], workers=2, **extra)
            count_secs = time.perf_counter() - t0
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the sample runs out of pairs before 10,000: EarlyStopWarning
                m = train_bpe(SAMPLE, 10_000, workers=2, progress=False, **extra)
            secs = time.perf_counter() - t0
            info = dict(vocab=len(m.vocab), count_seconds=count_secs)
        best = min(best, secs)
    return dict(which=which, seconds=best, **info)


def _spin(n: int = 4_000_000) -> int:
    s = 0
    for i in range(n): s += i
    return s


def _parallel_capacity() -> float:
    "How much faster 2 processes run 2 fixed pure-Python tasks than 1 process runs them: ~2 on 2 idle cores."
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(2) as ex:
        list(ex.map(_spin, [10, 10]))  # start the processes before timing
        t0 = time.perf_counter(); _spin(); _spin(); t1 = time.perf_counter()
        list(ex.map(_spin, [4_000_000] * 2)); t2 = time.perf_counter()
    return (t1 - t0) / (t2 - t1)


def _child(*args: str, env: dict | None = None) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], check=True, capture_output=True, text=True,
                         env={**os.environ, **(env or {})})
    return json.loads(out.stdout.strip().splitlines()[-1])


def _machine() -> str:
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor()) \
        if Path("/proc/cpuinfo").exists() else platform.processor()
    return f"{platform.node()} | {cpu} | {os.cpu_count()} CPUs | Python {platform.python_version()} | {platform.platform()}"


def main(sizes: list[int], repeats: int):
    mb = lambda b: f"{b / 2**20:6.1f} MiB"
    print("command:", "python tests/bench_chunking.py", *sys.argv[1:])
    print("machine:", _machine())
    print(f"load average at start: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}; "
          f"2-process capacity of a pure-Python task now: {_parallel_capacity():.2f}x (2.0 on two idle cores)\n")
    sample = SAMPLE.read_bytes()
    tmp = Path(tempfile.mkdtemp(prefix="bench_chunking_"))
    results = {}
    try:
        for size_mb in sizes:
            copies = -(-size_mb * 10**6 // len(sample))
            path = tmp / f"tinystories_x{copies}.txt"
            with open(path, "wb") as f:
                for _ in range(copies): f.write(sample)
            print(f"== {path.name}: {path.stat().st_size / 1e6:.1f} MB ({copies} copies of the sample)")
            for w in (1, 2):
                r = _child("--count", str(path), str(w))
                results[(size_mb, w)] = r
                print(f"  workers={w}: {r['seconds']:6.2f} s  {r['mb_s']:6.2f} MB/s  ({r['mb_cpu_s']:5.2f} MB per CPU-second)  "
                      f"parent peak RSS {mb(r['parent_rss'])}  "
                      f"worker peak RSS {', '.join(mb(x) for x in r['workers_rss']) or '-'}  "
                      f"(RUSAGE_CHILDREN max {mb(r['children_maxrss'])})")
            one, two = results[(size_mb, 1)], results[(size_mb, 2)]
            assert (one["digest"], one["total"]) == (two["digest"], two["total"]), "1 and 2 workers disagree"
            print(f"  speed-up 2 vs 1 worker: {two['mb_s'] / one['mb_s']:.2f}x wall-clock (target >= 1.7x); CPU per MB with 2 "
                  f"workers vs 1: {one['mb_cpu_s'] / two['mb_cpu_s']:.2f}x, i.e. up to {2 * two['mb_cpu_s'] / one['mb_cpu_s']:.2f}x "
                  f"on two idle cores; counts identical: {one['distinct']:,} distinct, {one['total']:,} pre-tokens")
            path.unlink()
    finally:
        shutil.rmtree(tmp)

    peak = lambda r: max([r["parent_rss"], *r["workers_rss"]])
    print("\n== memory: peak RSS of every process (target < 150 MiB, and 400 MB within 10% of 100 MB)")
    for w in (1, 2):
        peaks = [peak(results[(s, w)]) for s in sizes]
        print(f"  workers={w}: " + ", ".join(f"{s} MB: {mb(p)}" for s, p in zip(sizes, peaks))
              + (f"  (ratio {peaks[-1] / peaks[0]:.3f})" if len(peaks) > 1 else ""))

    print("\n== train_bpe on the 1 MB sample, vocab 10,000, vs HF tokenizers BpeTrainer (2 threads); best of", repeats)
    ours = _child("--train", "ours", str(repeats))
    pool = _child("--train", "ours-pool", str(repeats))
    hf = _child("--train", "hf", str(repeats), env={"RAYON_NUM_THREADS": "2"})
    print(f"  train_bpe(workers=2)                    {ours['seconds']:6.2f} s  (counting alone {ours['count_seconds']:.2f} s, in-process: "
          f"the file is below 2 x min_chunk_size; vocab {ours['vocab']:,})")
    print(f"  train_bpe(workers=2, min_chunk_size=256K) {pool['seconds']:6.2f} s  (2 worker processes forced; "
          f"counting alone {pool['count_seconds']:.2f} s)")
    print(f"  HF BpeTrainer, RAYON_NUM_THREADS=2      {hf['seconds']:6.2f} s  (vocab {hf['vocab']:,})")
    print(f"  ratio train_bpe / HF: {ours['seconds'] / hf['seconds']:.2f} (forced pool: {pool['seconds'] / hf['seconds']:.2f}); target <= 2")

    big = max(sizes)
    rate, per_cpu = results[(big, 2)]["mb_s"], results[(big, 2)]["mb_cpu_s"]
    full = FULL_TINYSTORIES / 1e6
    print(f"\n== projection for the full TinyStories training file ({full:,.0f} MB), from the {big} MB run with 2 workers:")
    print(f"  measured wall-clock rate: {full:,.0f} MB / {rate:.2f} MB/s = {full / rate:.0f} s = {full / rate / 60:.1f} min (target < 3 min)")
    print(f"  two idle cores at the measured CPU rate: {full:,.0f} MB / (2 x {per_cpu:.2f} MB per CPU-second) = "
          f"{full / (2 * per_cpu):.0f} s = {full / (2 * per_cpu) / 60:.1f} min "
          "(what a quiet 2-core machine gives; the wall-clock figure also pays for other load)")
    print(f"\nload average at end: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}; "
          f"2-process capacity now: {_parallel_capacity():.2f}x")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--count":
        print(json.dumps(one_count(sys.argv[2], int(sys.argv[3]))))
    elif len(sys.argv) > 1 and sys.argv[1] == "--memory-one":
        print(json.dumps(one_memory(sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1")))
    elif len(sys.argv) > 1 and sys.argv[1] == "--memory":
        memory_main([int(x) for x in sys.argv[2:] if x != "--trace"] or [64], "--trace" in sys.argv)
    elif len(sys.argv) > 1 and sys.argv[1] == "--train":
        print(json.dumps(one_train(sys.argv[2], int(sys.argv[3]))))
    else:
        ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
        ap.add_argument("--sizes", type=int, nargs="+", default=[100, 400], help="file sizes in MB (default 100 400)")
        ap.add_argument("--repeats", type=int, default=3, help="training runs per contender; the best is kept")
        a = ap.parse_args()
        main(a.sizes, a.repeats)
