"""Counting pre-tokens at array speed (issue 26 item 4): bpe_nb's regex path against its array path, and whole training
against nanochat's rustbpe, side by side on one corpus, each run in a fresh process.

Run from the repository root:
    python tests/bench_count.py [--mb 256] [--rounds 2] [--workers 2] [--corpus PATH | --mixed]

The corpus is built deterministically from the machine's own text (the .py/.h/.txt/.md/.rst files under
/usr/lib/python3*, /usr/include, /usr/share and the running venv's lib, sorted by path, each followed by <|endoftext|>,
repeated until --mb MiB; as tests/bench_train.py --scale) in a temporary directory, unless --corpus is given.
With --mixed it is built from English with CJK instead (tests/bench_encode.py's mixed text, about a seventh of its
bytes CJK, its paragraphs shuffled with a fixed seed for each copy): few distinct pre-tokens, but every block holds
characters outside ASCII.
Each round runs, in fresh processes and in this order:
  count-array  `count_file(path, [EOT], workers)` with GPT-2's pattern (the array path of chapter 00a);
  count-regex  the same with the array path switched off (`chunking.ARRAY_PATTERNS = frozenset()`);
  bpe_nb       `train_bpe(path, 10000, workers=workers, progress=False)` (array counting + the merge loop);
  rustbpe      `Tokenizer().train_from_iterator(docs, 9999, pattern=GPT2_PATTERN)`, RAYON_NUM_THREADS=workers,
               the documents read 4 MiB at a time (as tests/bench_train_peers.py of the benchmark chapter).
Reported per run: wall seconds, CPU seconds (process and its children), peak RSS (VmHWM of the process, and the
largest child's), load average. The counts of both paths must be identical (same pre-tokens, counts and order),
and bpe_nb's merges must be the same whichever path counted (checked by their SHA-256). Numbers on a shared machine
are noisy: compare within a round, and the CPU seconds. Not collected by pytest.
"""
from __future__ import annotations

import argparse, glob, hashlib, json, os, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EOT = "<|endoftext|>"

CHILD = r'''
import hashlib, json, os, pickle, resource, sys, time
def cpu():
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime
tool, path, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
from bpe_nb.pretokenize import GPT2_PATTERN
EOT = "<|endoftext|>"
def documents():
    tail = ""
    with open(path, encoding="utf-8", newline="") as f:
        while block := f.read(4 << 20):
            docs = (tail + block).split(EOT); tail = docs.pop()
            yield from (d for d in docs if d)
    if tail: yield tail
out = {}
t0, c0 = time.perf_counter(), cpu()
if tool.startswith("count"):
    from bpe_nb import chunking
    if tool == "count-regex": chunking.ARRAY_PATTERNS = frozenset()
    counts, _ = chunking.count_file(path, [EOT], workers, pattern=GPT2_PATTERN)
    digest = hashlib.sha256(pickle.dumps(list(counts.items()))).hexdigest()
    out.update(distinct=len(counts))
elif tool == "bpe_nb":
    from bpe_nb.training import train_bpe
    model = train_bpe(path, 10000, workers=workers, progress=False)
    digest = hashlib.sha256(b"\0".join(a + b"\1" + b for a, b in model.merges)).hexdigest()
    out.update(merges=len(model.merges))
else:
    import rustbpe
    tok = rustbpe.Tokenizer(); tok.train_from_iterator(documents(), 9999, pattern=GPT2_PATTERN)
    ranks = sorted(((bytes(t), r) for t, r in tok.get_mergeable_ranks()), key=lambda x: x[1])
    digest = hashlib.sha256(b"\0".join(t for t, _ in ranks[256:])).hexdigest()
    out.update(merges=len(ranks) - 256)
secs, cpus = time.perf_counter() - t0, cpu() - c0
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
out.update(tool=tool, seconds=round(secs, 2), cpu_s=round(cpus, 2), peak_mb=hwm // 1024,
           child_peak_mb=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, digest=digest[:16],
           load=round(os.getloadavg()[0], 2))
print(json.dumps(out))
'''


def build_corpus(path: Path, mb: int) -> str:
    "The machine's own text, repeated up to `mb` MiB, at `path`; its SHA-256."
    roots = sorted({*glob.glob("/usr/lib/python3*"), "/usr/include", "/usr/share", os.path.join(sys.prefix, "lib")})
    files = sorted({p for r in roots for ext in ("*.py", "*.h", "*.txt", "*.md", "*.rst")
                    for p in Path(r).rglob(ext) if p.is_file()})
    target, n, h = mb << 20, 0, hashlib.sha256()
    with path.open("wb") as f:
        while n < target:
            for p in files:
                try: t = p.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError): continue
                data = (t.replace(EOT, "") + EOT).encode("utf-8")
                f.write(data); h.update(data); n += len(data)
                if n >= target: break
    return h.hexdigest()


def build_mixed_corpus(path: Path, mb: int) -> str:
    "English with CJK (the mixed text of tests/bench_encode.py), its paragraphs shuffled afresh (seeded) for each copy, up to `mb` MiB at `path`; its SHA-256."
    sys.path.insert(0, str(ROOT / "tests"))
    import random
    from bench_encode import encoding_text
    paras, rng = encoding_text("mixed").split("\n"), random.Random(0)
    target, n, h = mb << 20, 0, hashlib.sha256()
    with path.open("wb") as f:
        while n < target:
            rng.shuffle(paras)
            data = ("\n".join(paras).replace(EOT, "") + EOT).encode("utf-8")
            f.write(data); h.update(data); n += len(data)
    return h.hexdigest()


def run(tool: str, path: Path, workers: int) -> dict:
    env = dict(os.environ, RAYON_NUM_THREADS=str(workers),
               PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    # cwd=ROOT: `python -c` puts the working directory first on sys.path, so run from another checkout it would
    # measure that checkout's bpe_nb; from ROOT it is this one's
    r = subprocess.run([sys.executable, "-c", CHILD, tool, str(path), str(workers)], capture_output=True, text=True, env=env,
                       cwd=ROOT)
    if r.returncode: raise RuntimeError(f"{tool} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--corpus", type=Path, default=None, help="use this file instead of building one")
    ap.add_argument("--mixed", action="store_true", help="build the corpus from English/CJK text (a seventh of its bytes CJK) instead")
    ap.add_argument("--tools", nargs="+", default=["count-array", "count-regex", "bpe_nb", "rustbpe"])
    a = ap.parse_args()
    print(f"command: python {' '.join(sys.argv)}\ncpus: {os.cpu_count()}, load: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as d:
        path = a.corpus or Path(d) / "corpus.txt"
        if a.corpus is None:
            kind, build = ("English/CJK", build_mixed_corpus) if a.mixed else ("the machine's own text", build_corpus)
            print(f"corpus: {a.mb} MiB of {kind}, sha256 {build(path, a.mb)[:16]}")
        else: print(f"corpus: {path} ({path.stat().st_size / 2**20:.0f} MiB)")
        rows = []
        for k in range(a.rounds):
            for tool in a.tools:
                r = run(tool, path, a.workers); rows.append(r)
                print(json.dumps(dict(round=k, **r)), flush=True)
        best = {t: min((r for r in rows if r["tool"] == t), key=lambda r: r["seconds"]) for t in a.tools}
        counts = {r["digest"] for r in rows if r["tool"].startswith("count")}
        merges = {r["digest"] for r in rows if r["tool"] == "bpe_nb"}
        if counts: print(f"counts identical (array == regex, every run): {len(counts) == 1}")
        if merges: print(f"bpe_nb merges the same every run: {len(merges) == 1}")
        for t, r in best.items(): print(f"best {t:12} {r['seconds']:7.2f} s wall  {r['cpu_s']:7.2f} s CPU  peak {r['peak_mb']} MB (+ largest child {r['child_peak_mb']} MB)")
        if "count-array" in best and "count-regex" in best:
            print(f"counting: array path {best['count-regex']['seconds'] / best['count-array']['seconds']:.2f}x faster than regex (wall)")
        if "bpe_nb" in best and "rustbpe" in best:
            b, r = best["bpe_nb"], best["rustbpe"]
            print(f"train: bpe_nb / rustbpe = {b['seconds'] / r['seconds']:.2f} (wall, target <= 0.5), {b['cpu_s'] / r['cpu_s']:.2f} (CPU); "
                  f"memory {b['peak_mb'] + b['child_peak_mb']} MB vs {r['peak_mb']} MB")


if __name__ == "__main__":
    main()
