"""Training side by side: bpe_nb against rustbpe, bpeasy and HF tokenizers, each in a fresh process (issue 26).

Run from the repository root:
    python tests/bench_train_peers.py --save                       (64 and 256 MB, vocab 10k, 2 workers, 3 rounds)
    python tests/bench_train_peers.py --sizes 8 --repeats 1        (a small development run; --save marks it provisional)

The corpora are built by `build_corpus` of tests/bench_scale.py (the machine's own .py/.h/.txt/.md/.rst files in
sorted path order, joined by <|endoftext|>, its SHA-256 recorded), in a temporary directory deleted afterwards.

Every run is a fresh Python process on the same file, with the same pre-tokenizer (GPT-2's pattern) and the same
documents (the file cut at <|endoftext|>, which no tool learns from), 2 workers or threads (RAYON_NUM_THREADS=2 for
the Rust tools), vocabulary 10,000 counted as bpe_nb counts it: 256 bytes + 9,743 merges + the special token.
- bpe_nb:  `train_bpe(path, 10000, workers=2, progress=False)` (it reads the file itself);
- rustbpe: `Tokenizer().train_from_iterator(docs, 9999, pattern=GPT2_PATTERN)` (nanochat's trainer; 256 + merges);
- bpeasy:  `train_bpe(docs, GPT2_PATTERN, max_token_length, 9999)`, max_token_length larger than any document;
- HF:      `BpeTrainer(vocab_size=10000, special_tokens=[EOT], initial_alphabet=ByteLevel.alphabet())` with the
           ByteLevel pre-tokenizer (GPT-2's regex, no prefix space), `train_from_iterator(docs)`.
`docs` comes two ways (`--feeds`), each peer runs with both: "stream", a generator reading the file in 4 MiB blocks
and yielding its documents (the peer never holds the whole text: its leanest use), and "list", the whole file read
and split into one list of documents first (what a short script does; faster for rustbpe, which then refills its
buffers without waiting for Python). Both read with newline="" (no newline translation), as bpe_nb reads. Ratios to
rustbpe are to its best: its faster feed for time, its leaner feed for memory.
Timed inside the child: from opening the file to the trained vocabulary in memory (imports excluded; the
interpreter's start is in `process_s`). Memory, sampled by this process
every 0.05 s: the sum of RSS (and PSS, a shared page counted once) over the child and its descendants (bpe_nb's
counting workers); the headline `peak_mb` is the larger of that RSS peak and the child's own VmHWM (exact for the
one-process tools, an upper bound for bpe_nb, whose forked workers share pages with their parent).

Agreement: after the timed runs, one more child counts the file once with bpe_nb and learns merges with each tie rule
(`bytes-greater`, bpe_nb's default, which the timed run used; `ids-smaller`, the rule of rustbpe and bpeasy; `hf`).
For each peer: the length of the common prefix of the merge lists (as the new tokens in rank order: rustbpe and
bpeasy return ranks, not pairs) and how many of the 10,000 tokens both vocabularies hold, against bpe_nb's default
and against the peer's own rule. Rounds are interleaved (each round runs every tool once, the order rotated); the
best time of each tool and its largest memory are kept, every run is in the JSON file.

`--save` writes nbs/benchmark_results/train_peers.json and .csv (command, date, machine, load averages, versions),
which chapter 07 reads. Not collected by pytest (the file name does not start with test_).
"""
from __future__ import annotations

import argparse, datetime, json, os, pickle, platform, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
EOT = "<|endoftext|>"
TOOLS = ("bpe_nb", "rustbpe", "bpeasy", "hf")
FEEDS = ("stream", "list")  # how the peers get the documents (bpe_nb reads the file itself: "file")
TIE_RULE = {"rustbpe": "ids-smaller", "bpeasy": "ids-smaller", "hf": "hf"}  # the rule each peer breaks ties by
DISTS = {"bpe_nb": "bpe_nb", "rustbpe": "rustbpe", "bpeasy": "bpeasy", "hf": "tokenizers"}
OUT = ROOT / "nbs" / "benchmark_results"
BLOCK = 4 << 20


# ------------------------------------------------------------------ the child: one tool, one run
def documents(path: str):
    "The documents of the corpus (cut at <|endoftext|>, empty ones skipped), read 4 MiB at a time."
    tail = ""
    with open(path, encoding="utf-8", newline="") as f:
        while block := f.read(BLOCK):
            docs = (tail + block).split(EOT)
            tail = docs.pop()
            yield from (d for d in docs if d)
    if tail: yield tail


def documents_list(path: str) -> list[str]:
    "The documents of the corpus as one list: the whole text read, then split (what a small script would do)."
    with open(path, encoding="utf-8", newline="") as f: text = f.read()
    return [d for d in text.split(EOT) if d]


def _hwm_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"): return int(line.split()[1])
    return 0


def child(tool: str, feed: str, corpus: str, vocab: int, workers: int, out: str) -> dict:
    "Train with `tool` (documents fed as `feed`); pickle its merge tokens (and pairs where it has them) to `out`; return the measurements."
    import resource
    from bpe_nb.pretokenize import GPT2_PATTERN
    pairs, info = None, {}
    if tool != "bpe_nb" and feed not in FEEDS: raise ValueError(f"unknown feed {feed!r}")
    feed_docs = lambda: documents(corpus) if feed == "stream" else iter(documents_list(corpus))
    if tool == "bpe_nb":
        from bpe_nb.training import train_bpe
        t0 = time.perf_counter()
        model = train_bpe(corpus, vocab, workers=workers, progress=False)
        secs = time.perf_counter() - t0
        pairs = model.merges
        tokens = [a + b for a, b in pairs]
        info = dict(distinct_pretokens=model.info.get("distinct_pretokens"), pretokens=model.info.get("pretokens"))
    elif tool == "rustbpe":
        import rustbpe
        t0 = time.perf_counter()
        tok = rustbpe.Tokenizer()
        tok.train_from_iterator(feed_docs(), vocab - 1, pattern=GPT2_PATTERN)  # 256 + merges: no special token
        secs = time.perf_counter() - t0
        tokens = [t for t, r in sorted(((bytes(t), r) for t, r in tok.get_mergeable_ranks()), key=lambda x: x[1])][256:]
    elif tool == "bpeasy":
        import bpeasy
        longest = os.path.getsize(corpus)  # no limit on token length in practice, as bpe_nb has none
        t0 = time.perf_counter()
        ranks = bpeasy.train_bpe(feed_docs(), GPT2_PATTERN, longest, vocab - 1)
        secs = time.perf_counter() - t0
        tokens = [t for t, r in sorted(ranks.items(), key=lambda x: x[1])][256:]
    elif tool == "hf":
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers
        from bpe_nb.pretokenize import printable_to_bytes
        t0 = time.perf_counter()
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=[EOT], show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tok.train_from_iterator(feed_docs(), trainer)
        secs = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as d:  # tokenizers' own writer and reader of its merges
            _, hf_pairs = models.BPE.read_file(*tok.model.save(d))
        pairs = [(printable_to_bytes(a), printable_to_bytes(b)) for a, b in hf_pairs]
        tokens = [a + b for a, b in pairs]
    else: raise ValueError(f"unknown tool {tool!r}")
    with open(out, "wb") as f: pickle.dump(dict(tokens=tokens, pairs=pairs), f)
    return dict(tool=tool, feed=feed, seconds=round(secs, 4), merges=len(tokens), hwm_kib=_hwm_kib(),
                workers_max_rss_kib=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, **info)


def agree_child(corpus: str, vocab: int, workers: int, out: str) -> dict:
    "Count once with bpe_nb, learn merges with every tie rule; pickle {rule: merges} to `out`."
    import warnings
    from bpe_nb.chunking import count_pretokens_file
    from bpe_nb.incremental import train_incremental
    from bpe_nb.naive import TIE_BREAKS, EarlyStopWarning
    t0 = time.perf_counter()
    counts = count_pretokens_file(corpus, [EOT], workers=workers)
    res, secs = {}, dict(count_s=round(time.perf_counter() - t0, 3), distinct_pretokens=len(counts))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EarlyStopWarning)
        for rule in TIE_BREAKS:
            t0 = time.perf_counter()
            res[rule] = train_incremental(counts, vocab, [EOT], tie_break=rule, progress=False).merges
            secs[f"merge_s_{rule}"] = round(time.perf_counter() - t0, 3)
    with open(out, "wb") as f: pickle.dump(res, f)
    return dict(merges={k: len(v) for k, v in res.items()}, **secs)


# ------------------------------------------------------------------ the parent
def _tree_kib(pid: int) -> tuple[int, int]:
    "(sum of RSS, sum of PSS) in KiB of process `pid` and all its descendants."
    import psutil
    try: procs = [psutil.Process(pid)]; procs += procs[0].children(recursive=True)
    except psutil.Error: return 0, 0
    rss = pss = 0
    for p in procs:
        try:
            with open(f"/proc/{p.pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Rss:"): rss += int(line.split()[1])
                    elif line.startswith("Pss:"): pss += int(line.split()[1])
        except OSError: pass  # gone meanwhile
    return rss, pss


def _load() -> list[float]: return [round(x, 2) for x in os.getloadavg()]


def run_child(args: list[str], workers: int, timeout: float = 3600) -> dict:
    "Run this script as a child with `args`; sample its process tree's memory; return its JSON with the peaks."
    env = dict(os.environ, RAYON_NUM_THREADS=str(workers), TOKENIZERS_PARALLELISM="true",
               PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    before, t0 = _load(), time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    peak_rss = peak_pss = 0
    try:
        while proc.poll() is None:
            rss, pss = _tree_kib(proc.pid)
            peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
            if time.perf_counter() - t0 > timeout: proc.kill(); raise TimeoutError(f"{args} ran over {timeout} s")
            time.sleep(0.05)
    finally:
        out, err = proc.communicate()
    elapsed = time.perf_counter() - t0
    if proc.returncode: raise RuntimeError(f"child {args} failed (exit {proc.returncode}):\n{err[-3000:]}")
    res = json.loads(out.strip().splitlines()[-1])
    return dict(res, process_s=round(elapsed, 3), tree_rss_kib=peak_rss, tree_pss_kib=peak_pss,
                load_before=before, load_after=_load())


def common_prefix(a, b) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def vocab_of(tokens) -> set:
    "The whole vocabulary: 256 bytes, the merge tokens, the special token."
    return {bytes([i]) for i in range(256)} | set(tokens) | {EOT.encode()}


def agreement(ours: dict, tokens: list, pairs) -> dict:
    "bpe_nb's merges (per tie rule) against one peer's tokens (and pairs, if it has them)."
    out = {}
    for rule, merges in ours.items():
        mine = [a + b for a, b in merges]
        out[rule] = dict(prefix=common_prefix(mine, tokens), shared=len(vocab_of(mine) & vocab_of(tokens)),
                         identical=(merges == pairs) if pairs is not None else mine == tokens)
    return out


def variants(feeds) -> list[tuple[str, str]]:
    "(tool, feed) of every run of a round: bpe_nb reads the file; each peer once per feed."
    return [("bpe_nb", "file")] + [(t, f) for t in TOOLS[1:] for f in feeds]


def measure(size_mb: int, corpus: Path, tmp: Path, vocab: int, workers: int, repeats: int, feeds, say) -> list[dict]:
    "Every (tool, feed) `repeats` times on `corpus`, rounds interleaved; then the agreement; one row per (tool, feed)."
    todo = variants(feeds)
    runs = {v: [] for v in todo}
    learned = {}
    for k in range(repeats):
        order = todo[k % len(todo):] + todo[:k % len(todo)]  # rotated: no tool always runs first
        for tool, feed in order:
            out = tmp / f"{tool}.pkl"
            r = run_child(["--child", tool, feed, str(corpus), str(vocab), str(workers), str(out)], workers)
            r["peak_kib"] = max(r["tree_rss_kib"], r["hwm_kib"])
            got = pickle.loads(out.read_bytes()); out.unlink()
            if tool in learned and got["tokens"] != learned[tool]["tokens"]:
                raise AssertionError(f"{tool} learned different merges in two runs")
            learned[tool] = got
            runs[tool, feed].append(r)
            say(f"  {size_mb} MB round {k + 1}: {tool:8} {feed:6} {r['seconds']:7.2f} s  peak {r['peak_kib'] / 1024:6.0f} MB "
                f"(tree RSS {r['tree_rss_kib'] / 1024:.0f}, PSS {r['tree_pss_kib'] / 1024:.0f}, own HWM {r['hwm_kib'] / 1024:.0f}"
                f", workers {r['workers_max_rss_kib'] / 1024:.0f})  load {r['load_before'][0]}->{r['load_after'][0]}")
    out = tmp / "agree.pkl"
    split = run_child(["--agree", str(corpus), str(vocab), str(workers), str(out)], workers)
    ours = pickle.loads(out.read_bytes()); out.unlink()
    say(f"  {size_mb} MB bpe_nb's stages (the agreement run, one count, three merge loops): count {split['count_s']:.2f} s, "
        + ", ".join(f"merge ({k[8:]}) {v:.2f} s" for k, v in split.items() if k.startswith("merge_s_"))
        + f"; {split['distinct_pretokens']:,} distinct pre-tokens")
    assert ours["bytes-greater"] == learned["bpe_nb"]["pairs"], "train_bpe and count + train_incremental disagree"
    rows = []
    for tool, feed in todo:
        rs = runs[tool, feed]
        best = min(rs, key=lambda r: r["seconds"])
        row = dict(size_mb=size_mb, corpus_bytes=corpus.stat().st_size, tool=tool, feed=feed, version=_version(DISTS[tool]),
                   seconds=best["seconds"], peak_mb=round(max(r["peak_kib"] for r in rs) / 1024, 1),
                   pss_mb=round(max(r["tree_pss_kib"] for r in rs) / 1024, 1),
                   own_hwm_mb=round(max(r["hwm_kib"] for r in rs) / 1024, 1),
                   workers_max_rss_mb=round(max(r["workers_max_rss_kib"] for r in rs) / 1024, 1),
                   process_s=best["process_s"], merges=best["merges"],
                   load_before=best["load_before"][0], load_after=best["load_after"][0], runs=rs)
        if tool == "bpe_nb": row["stages"] = split  # untimed above: the agreement run's count and merge loops
        else:
            agr = agreement(ours, learned[tool]["tokens"], learned[tool]["pairs"])
            rule = TIE_RULE[tool]
            row.update(prefix_default=agr["bytes-greater"]["prefix"], shared_default=agr["bytes-greater"]["shared"],
                       tie_rule=rule, prefix_same_rule=agr[rule]["prefix"], shared_same_rule=agr[rule]["shared"],
                       identical_same_rule=agr[rule]["identical"], agreement=agr)
            if feed == feeds[0]:
                say(f"  {size_mb} MB {tool:8} vs bpe_nb: common prefix {agr['bytes-greater']['prefix']:,} merges, "
                    f"{agr['bytes-greater']['shared']:,} tokens shared (bpe_nb's default rule); with tie_break={rule!r}: "
                    f"prefix {agr[rule]['prefix']:,}, shared {agr[rule]['shared']:,}, identical {agr[rule]['identical']}")
        rows.append(row)
    # against rustbpe at its best: its fastest feed for time, its leanest feed for memory
    rust_s = min(r["seconds"] for r in rows if r["tool"] == "rustbpe")
    rust_mb = min(r["peak_mb"] for r in rows if r["tool"] == "rustbpe")
    for row in rows:
        row["time_vs_rustbpe"] = round(row["seconds"] / rust_s, 3)
        row["memory_vs_rustbpe"] = round(row["peak_mb"] / rust_mb, 3)
    return rows


def _version(dist: str) -> str | None:
    from importlib import metadata
    try: return metadata.version(dist)
    except metadata.PackageNotFoundError: return None


def machine_info() -> dict:
    "The machine as a record: CPU model, cores, platform, Python, library versions."
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"): cpu = line.split(":", 1)[1].strip(); break
    except OSError: pass
    try: ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError): ram = None
    return {"cpu": cpu, "cores": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)),
            "ram_gib": round(ram / 2**30, 1) if ram else None, "platform": platform.platform(),
            "python": platform.python_version(),
            "libraries": {d: _version(d) for d in ("bpe_nb", "regex", "numpy", "rustbpe", "bpeasy", "tokenizers")}}


CSV_FIELDS = ("size_mb", "corpus_bytes", "tool", "feed", "version", "seconds", "time_vs_rustbpe", "peak_mb", "memory_vs_rustbpe",
              "pss_mb", "own_hwm_mb", "workers_max_rss_mb", "process_s", "merges", "prefix_default", "shared_default",
              "tie_rule", "prefix_same_rule", "shared_same_rule", "identical_same_rule", "load_before", "load_after")


def save(record: dict, stem: str = "train_peers") -> None:
    "Write the record as nbs/benchmark_results/STEM.json (everything) and STEM.csv (one row per size and tool)."
    import csv, io
    from bpe_nb.chunking import atomic_write
    OUT.mkdir(parents=True, exist_ok=True)
    atomic_write(OUT / f"{stem}.json", (json.dumps(record, indent=1) + "\n").encode())
    buf = io.StringIO()
    w = csv.DictWriter(buf, CSV_FIELDS, extrasaction="ignore", lineterminator="\n"); w.writeheader(); w.writerows(record["rows"])
    atomic_write(OUT / f"{stem}.csv", buf.getvalue().encode())
    print(f"wrote nbs/benchmark_results/{stem}.json and {stem}.csv")


def main(a) -> dict:
    from bench_scale import build_corpus, corpus_roots
    say = lambda *x: print(*x, flush=True)
    command = "python tests/bench_train_peers.py " + " ".join(sys.argv[1:])
    record = dict(command=command.strip(), date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  provisional=a.provisional or sorted(a.sizes) != [64, 256], vocab_size=a.vocab, workers=a.workers, feeds=list(a.feeds),
                  repeats=a.repeats, pattern="GPT-2", machine=dict(machine_info(), load_start=_load()),
                  corpus_roots=[str(r) for r in corpus_roots()], corpora={}, rows=[])
    say(f"command: {record['command']}\nmachine: {record['machine']}")
    with tempfile.TemporaryDirectory(prefix="bpe_nb_peers_") as d:
        tmp = Path(d)
        for mb in a.sizes:
            corpus = tmp / f"corpus_{mb}MB.txt"
            rec = build_corpus(mb, corpus); record["corpora"][f"{mb}MB"] = rec
            say(f"== corpus {mb} MB: {rec['bytes']:,} bytes, {rec['files']:,} files, sha256 {rec['sha256'][:16]}")
            record["rows"] += measure(mb, corpus, tmp, a.vocab, a.workers, a.repeats, tuple(a.feeds), say)
            corpus.unlink()
    record["machine"]["load_end"] = _load()
    say(f"{'MB':>4} {'tool':8} {'feed':6} {'seconds':>8} {'x rustbpe':>9} {'peak MB':>8} {'x rustbpe':>9}")
    for r in record["rows"]:
        say(f"{r['size_mb']:>4} {r['tool']:8} {r['feed']:6} {r['seconds']:8.2f} {r['time_vs_rustbpe']:9.2f} {r['peak_mb']:8.0f} "
            f"{r['memory_vs_rustbpe']:9.2f}")
    say(f"load average: start {record['machine']['load_start']}, end {record['machine']['load_end']}")
    return record


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), sys.argv[7])))
        sys.exit(0)
    if len(sys.argv) > 1 and sys.argv[1] == "--agree":
        print(json.dumps(agree_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])))
        sys.exit(0)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 256], help="corpus sizes in MB")
    ap.add_argument("--vocab", type=int, default=10_000, help="vocabulary size, as bpe_nb counts it (special token included)")
    ap.add_argument("--workers", type=int, default=2, help="bpe_nb's counting processes; the Rust tools' threads")
    ap.add_argument("--repeats", type=int, default=3, help="rounds (each tool once per round); the best time is kept")
    ap.add_argument("--feeds", nargs="+", choices=FEEDS, default=list(FEEDS),
                    help="how the peers get the documents: a generator over the file, or one list after reading it all")
    ap.add_argument("--save", action="store_true", help="write nbs/benchmark_results/train_peers.json and .csv")
    ap.add_argument("--provisional", action="store_true", help="mark the saved results provisional")
    a = ap.parse_args()
    if a.repeats < 1: ap.error("--repeats must be at least 1")
    sys.path.insert(0, str(ROOT / "tests"))
    rec = main(a)
    if a.save: save(rec)
