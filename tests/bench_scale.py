"""Training and encoding at scale: bpe_nb against HF tokenizers (training) and tiktoken / HF (encoding).

Run:  python tests/bench_scale.py                       (the full grid: 64 and 256 MB, vocab 10k and 32k,
                                                          workers 1, 2 and all cores; ~30-60 min on 2 cores)
      python tests/bench_scale.py --sizes 64 --vocabs 10000 --workers 2   (the issue's headline check)
      python tests/bench_scale.py --encode-only --encode-mb 32
      python tests/bench_scale.py --sizes 8 16 --vocabs 2000 10000 --workers 1 2 --encode-mb 4 --provisional
                                                         (a small development run, marked provisional in its meta)

The corpus is built deterministically from text already on the machine: every `.py .h .txt .md .rst`
file under the Python installation this script runs on (`sys.base_prefix`), /usr/include,
/usr/share and /usr/lib/python3*, in sorted path order, skipping files over 1 MB, files that are not
UTF-8 and files that contain `<|endoftext|>`; the files are joined by `<|endoftext|>` until the size is
reached. The same machine image gives the same bytes (its SHA-256 is recorded); another image gives a
similar mix of code and prose. `build_corpus(..., top_up=True)` (tests/bench_chunking.py --memory uses it)
adds rot13 copies of those documents when the machine has less text than asked: new words, in nearly
the same shapes (contractions aside: rot13 turns `'t` into `'g`, which the pattern splits differently).

Every training run is a fresh Python process (`bpe_nb.benchmark.run_experiment`, the harness of
chapter 07): wall time; counting ("pretokenize") and merging split for bpe_nb; peak RSS of the
process that trains (VmHWM) and, for bpe_nb, of its counting workers (RUSAGE_CHILDREN); peak PSS of the
process and its workers together (sampled every 0.2 s; a page they share counts once). HF tokenizers
trains `BpeTrainer` with the ByteLevel pre-tokenizer (same regex), the same special token and all 256
bytes as its initial alphabet, with RAYON_NUM_THREADS = workers.

Encoding uses GPT-2's vocabulary (tests/data/cs336), each kind run 3 times round robin, the best kept
(`--encode-repeats`): bpe_nb's `Tokenizer.encode` on one thread and
`encode_file` with 1..N workers, against tiktoken's `encode_ordinary` / `encode_ordinary_batch(num_threads=N)`
and HF's `encode_batch` (RAYON_NUM_THREADS=N) on the same documents; ids are checked identical to tiktoken's.

Results go to nbs/benchmark_results/scale/results.json (with machine info and load averages), which
chapter 07 reads for its plots. On a shared machine, wall-clock ratios are only indicative: the load
average before and after each run is recorded beside it.
"""
from __future__ import annotations

import argparse, hashlib, json, os, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
EOT = "<|endoftext|>"
EXTS = (".py", ".h", ".txt", ".md", ".rst")
RESULTS = ROOT / "nbs" / "benchmark_results" / "scale" / "results.json"
CS336 = ROOT / "tests" / "data" / "cs336"


def corpus_roots() -> list[Path]:
    "Where the corpus's text comes from, in this order."
    roots = [Path(sys.base_prefix), Path("/usr/include"), Path("/usr/share"), *sorted(Path("/usr/lib").glob("python3*"))]
    return [r for r in roots if r.is_dir()]


_ROT13 = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
                         b"NOPQRSTUVWXYZABCDEFGHIJKLMnopqrstuvwxyzabcdefghijklm")


def build_corpus(size_mb: int,  # the corpus size, in 10**6 bytes (it stops at the first file past it)
                 dest: Path,  # where to write it
                 top_up: bool = False  # if the machine has too little text, add rot13 copies of its documents
                ) -> dict:
    "Write the corpus (text files of the machine joined by <|endoftext|>) to `dest`; return its record."
    target, sep, seen = size_mb * 10**6, EOT.encode(), set()
    h, n_files, written = hashlib.sha256(), 0, 0
    with open(dest, "wb") as out:
        for root in corpus_roots():
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames.sort()
                if "/work" in dirpath or "site-packages/bpe_nb" in dirpath: continue
                for name in sorted(filenames):
                    if not name.endswith(EXTS): continue
                    p = Path(dirpath) / name
                    try:
                        if p.is_symlink() or not p.is_file() or p.stat().st_size > 1 << 20: continue
                        real = p.resolve()
                        if real in seen: continue
                        seen.add(real)
                        data = p.read_bytes()
                        data.decode("utf-8")
                    except (OSError, UnicodeDecodeError): continue
                    if not data.strip() or sep in data: continue
                    if written: out.write(sep); h.update(sep); written += len(sep)
                    out.write(data); h.update(data); written += len(data); n_files += 1
                    if written >= target: return dict(bytes=written, files=n_files, sha256=h.hexdigest())
    if top_up and written:
        return _top_up(dest, target, h, written, n_files)
    raise RuntimeError(f"only {written / 1e6:.1f} MB of text found under {corpus_roots()}: ask for less"
                       + ("" if top_up else " (or build it with top_up=True)"))


def _top_up(dest: Path, target: int, h, written: int, n_files: int) -> dict:
    "Append rot13 copies of `dest`'s documents, in order, until it holds `target` bytes (new words, nearly the same shapes)."
    sep, copies, skipped, tail, machine = EOT.encode(), 0, 0, b"", written
    with open(dest, "rb") as src, open(dest, "ab") as out:
        todo = written  # read only what the machine gave: the copies are never copied again
        while todo:
            block = src.read(min(1 << 20, todo)); todo -= len(block)
            if not block: raise RuntimeError(f"{dest} is shorter than the {written:,} bytes just written to it")
            docs = (tail + block).split(sep)
            tail = docs.pop() if todo else b""
            for doc in docs:
                doc = doc.translate(_ROT13)
                if sep in doc: skipped += 1; continue  # rot13 made a separator: leave that document out
                out.write(sep); out.write(doc); h.update(sep); h.update(doc)
                written += len(sep) + len(doc); copies += 1
                if written >= target:
                    return dict(bytes=written, files=n_files, machine_bytes=machine, rot13_copies=copies,
                                rot13_skipped=skipped, sha256=h.hexdigest())
    raise RuntimeError(f"only {written / 1e6:.1f} MB with one rot13 copy of the machine's text: ask for less")


def _load() -> list[float]: return [round(x, 2) for x in os.getloadavg()]


def train_run(trainer: str, corpus: Path, vocab: int, workers: int) -> dict:
    "One training run in a fresh process (chapter 07's harness), with the load average around it."
    from bpe_nb.benchmark import run_experiment
    before = _load()
    r = run_experiment(trainer, corpus, vocab, workers=workers, special_tokens=(EOT,), curve_points=20)
    r.update(load_before=before, load_after=_load())
    return r


# ---------------------------------------------------------------- encoding (each measurement in a child)
def _gpt2():
    from bpe_nb.encoder import Tokenizer
    return Tokenizer.from_files(CS336 / "gpt2_vocab.json", CS336 / "gpt2_merges.txt", special_tokens=[EOT])


def _tiktoken_gpt2():
    import tiktoken
    from bpe_nb.pretokenize import GPT2_PATTERN
    tok = _gpt2()
    ranks = {tok.vocab[i]: i for i in tok.vocab if i != tok.special_tokens[EOT]}
    return tiktoken.Encoding("gpt2-offline", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens={EOT: tok.special_tokens[EOT]})


def encode_child(kind: str, path: str, workers: int) -> dict:
    "Encode the file `path` (documents joined by <|endoftext|>) one way; return seconds and a digest of the ids."
    import numpy as np
    with open(path, encoding="utf-8", newline="") as f: text = f.read()  # no newline translation: "\r\n" stays
    docs = text.split(EOT)
    eot = _gpt2().special_tokens[EOT]
    def joined(per_doc):  # the ids of the whole file: each document's ids, with <|endoftext|> between them
        out = []
        for k, ids in enumerate(per_doc):
            if k: out.append(eot)
            out.extend(ids)
        return out
    if kind == "bpe_nb-encode":  # one thread, the whole text in one call
        tok = _gpt2(); t0 = time.perf_counter(); ids = tok.encode(text); secs = time.perf_counter() - t0
    elif kind == "bpe_nb-encode_file":
        tok = _gpt2()
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            ids = np.array(tok.encode_file(path, Path(d) / "ids.npy", workers=workers, progress=False))
            secs = time.perf_counter() - t0
    elif kind == "tiktoken":
        enc = _tiktoken_gpt2(); t0 = time.perf_counter()
        if workers > 1: per_doc = enc.encode_ordinary_batch(docs, num_threads=workers)
        else: per_doc = [enc.encode_ordinary(text)]  # one thread, the whole text in one call (no specials in it)
        secs = time.perf_counter() - t0
        ids = joined(per_doc) if workers > 1 else enc.encode(text, allowed_special="all")
    elif kind == "hf":
        from tokenizers import Tokenizer as HFTokenizer
        from bpe_nb.interop import hf_document
        hf = HFTokenizer.from_str(json.dumps(hf_document(_gpt2()))); t0 = time.perf_counter()
        enc = hf.encode_batch(docs, add_special_tokens=False)
        secs = time.perf_counter() - t0
        ids = joined(e.ids for e in enc)
    else: raise ValueError(kind)
    return dict(kind=kind, workers=workers, seconds=secs, tokens=len(ids),
                digest=hashlib.sha256(np.asarray(ids, dtype=np.uint32).tobytes()).hexdigest()[:16])


def encode_run(kind: str, path: Path, workers: int) -> dict:
    env = dict(os.environ, RAYON_NUM_THREADS=str(workers), PYTHONPATH=str(ROOT))
    before = _load()
    out = subprocess.run([sys.executable, __file__, "--encode-child", kind, str(path), str(workers)],
                         capture_output=True, text=True, env=env, timeout=3600)
    if out.returncode: raise RuntimeError(f"{kind} failed:\n{out.stderr[-2000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]), mb=path.stat().st_size / 1e6,
                load_before=before, load_after=_load())


def main(a) -> dict:
    from bpe_nb.benchmark import machine_info
    cores = os.cpu_count() or 1
    workers = sorted(set(a.workers or [1, 2, cores]))
    from importlib import metadata
    versions = {}
    for dist in ("tiktoken", "matplotlib"):
        try: versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError: versions[dist] = None
    res = dict(meta=dict(machine_info(), **versions, command="python tests/bench_scale.py " + " ".join(sys.argv[1:]),
                         corpus_roots=[str(r) for r in corpus_roots()], provisional=a.provisional,
                         grid=dict(sizes_mb=a.sizes if not a.encode_only else [], vocabs=a.vocabs, workers=workers,
                                   encode_mb=a.encode_mb)),
               corpora={}, train=[], encode=[])
    tmp = Path(tempfile.mkdtemp(prefix="bpe_nb_scale_"))
    say = lambda *x: print(*x, flush=True)
    try:
        if not a.encode_only:
            for mb in a.sizes:
                corpus = tmp / f"corpus_{mb}MB.txt"
                rec = build_corpus(mb, corpus); res["corpora"][f"{mb}MB"] = rec
                say(f"== corpus {mb} MB: {rec['files']:,} files, sha256 {rec['sha256'][:16]}")
                for vocab in a.vocabs:
                    for w in workers:
                        pair = {}
                        for trainer in ("incremental", "hf"):
                            r = train_run(trainer, corpus, vocab, w); r.update(corpus_mb=mb); pair[trainer] = r
                            res["train"].append(r)
                            split = (f" (count {r['pretokenize_s']:.1f} s + merge {r['merge_s']:.1f} s)"
                                     if r.get("merge_s") is not None else "")
                            say(f"  {trainer:11} vocab {vocab:6,} workers {w}: {r['total_s']:7.1f} s{split}, "
                                f"peak RSS {r['peak_rss_kib'] / 1024:7.0f} MiB, workers {r['peak_rss_children_kib'] / 1024:5.0f} MiB, "
                                f"PSS {r.get('peak_pss_kib', 0) / 1024:6.0f} MiB, "
                                f"load {r['load_before'][0]}->{r['load_after'][0]}")
                        o, h = pair["incremental"], pair["hf"]
                        say(f"  -> bpe_nb / HF time {o['total_s'] / h['total_s']:.2f}, memory (PSS) {o.get('peak_pss_kib', 0) / max(h.get('peak_pss_kib', 0), 1):.2f}; "
                            f"merge share {o['merge_s'] / o['total_s']:.0%}; same merges as HF: {o['digest'] == h['digest']}")
                corpus.unlink()
        if a.encode_mb:
            corpus = tmp / f"encode_{a.encode_mb}MB.txt"
            rec = build_corpus(a.encode_mb, corpus); res["corpora"][f"encode_{a.encode_mb}MB"] = rec
            say(f"== encoding {a.encode_mb} MB with GPT-2's vocabulary")
            runs = [("bpe_nb-encode", 1), ("tiktoken", 1), ("hf", 1)]
            runs += [(k, w) for w in workers for k in ("bpe_nb-encode_file", "tiktoken", "hf") if w > 1]
            runs += [("bpe_nb-encode_file", 1)]
            best, res["meta"]["encode_repeats"] = {}, a.encode_repeats
            for rep in range(a.encode_repeats):  # round robin: a slow spell of the machine hits every kind alike
                for kind, w in runs:
                    r = encode_run(kind, corpus, w)
                    say(f"  {kind:19} workers {w}: {r['seconds']:6.2f} s  {r['mb'] / r['seconds']:6.2f} MB/s  "
                        f"{r['tokens']:,} tokens  digest {r['digest']}  (run {rep + 1} of {a.encode_repeats})")
                    b = best.setdefault((kind, w), dict(r, seconds_all=[]))
                    b["seconds_all"].append(r["seconds"])
                    if r["digest"] != b["digest"]: b["digest"] = "differs between runs"
                    if r["seconds"] < b["seconds"]: b.update({k: v for k, v in r.items() if k != "digest"})
            res["encode"] = list(best.values())  # each kind: its best run (seconds, loads, ...); `seconds_all`: every run
            say("  best of each: " + ", ".join(f"{k} {w}: {b['mb'] / b['seconds']:.2f} MB/s" for (k, w), b in best.items()))
            digests = {r["digest"] for r in res["encode"]}
            say(f"  ids identical (bpe_nb, tiktoken and HF, every run): {len(digests) == 1}")
            res["meta"]["encode_ids_identical"] = len(digests) == 1
    finally:
        for p in tmp.iterdir(): p.unlink()
        tmp.rmdir()
    res["meta"]["load_avg_end"] = _load()
    return res


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--encode-child":
        print(json.dumps(encode_child(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
        sys.exit(0)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[64, 256], help="training corpus sizes in MB")
    ap.add_argument("--vocabs", type=int, nargs="+", default=[10_000, 32_000])
    ap.add_argument("--workers", type=int, nargs="+", default=None, help="default: 1, 2 and all cores")
    ap.add_argument("--encode-mb", type=int, default=32, help="size of the encoding corpus (0: skip encoding)")
    ap.add_argument("--encode-only", action="store_true")
    ap.add_argument("--encode-repeats", type=int, default=3, help="runs of each encoding kind, at least 1 (the best is kept)")
    ap.add_argument("--out", type=Path, default=RESULTS, help="where to write the results JSON")
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--merge", action="store_true",
                    help="keep the runs of the existing results file that this run does not repeat")
    ap.add_argument("--provisional", action="store_true",
                    help="mark the results provisional (a small or noisy run, not the committed measurement)")
    a = ap.parse_args()
    if a.encode_repeats < 1: ap.error("--encode-repeats must be at least 1")
    res = main(a)
    if a.merge and a.out.is_file():  # re-measured runs replace their namesakes in the existing file
        old = json.loads(a.out.read_text(encoding="utf-8"))
        key = lambda r: (r["trainer"], r["corpus_mb"], r["vocab_size_requested"], r["workers"])
        fresh = {key(r) for r in res["train"]}
        res["train"] = [r for r in old.get("train", []) if key(r) not in fresh] + res["train"]
        if not res["encode"]: res["encode"] = old.get("encode", [])
        res["corpora"] = {**old.get("corpora", {}), **res["corpora"]}
        om = old.get("meta", {})
        res["meta"] = {**om, **res["meta"], "grid": om.get("grid", res["meta"]["grid"]),
                       "commands": om.get("commands", [om.get("command")]) + [res["meta"]["command"]]}
        res["meta"]["encode_ids_identical"] = len({r["digest"] for r in res["encode"]}) == 1
    if not a.no_save:
        from bpe_nb.artifacts import atomic_write
        a.out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(a.out, (json.dumps(res, indent=1) + "\n").encode())
        print("wrote", a.out.relative_to(ROOT) if a.out.is_relative_to(ROOT) else a.out)
