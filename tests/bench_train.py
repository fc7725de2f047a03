"""Benchmark the trainers: naive vs incremental on the 1 MB TinyStories sample, corpus.en vs HF tokenizers, and the
simple vs the fast merge loop of chapter 02 on a large count table.

Run from the repository root:  python tests/bench_train.py [--sizes 2000 10000] [--repeats 5]
                               python tests/bench_train.py --scale [COUNTS.pkl] [--scale-sizes 10000] [--scale-tie-breaks ...]

1. TinyStories sample: pre-token counts are built once, then each trainer learns merges from them at
   each vocab size (the "merge loop": `train_*` from counts to model, progress off). Prints both
   times, the ratio, and checks that the merges are identical.
2. CS336 corpus.en at vocab 500 with <|endoftext|>: ours = `count_pretokens` + `train_incremental`
   in-process, vs HF tokenizers' BpeTrainer on the same text (`train_from_iterator`), best of N runs.
3. --scale: `train_incremental_simple` (the loop as explained) against `train_incremental` (the fast loop) on a
   count table of ~500k distinct pre-tokens, from counts to model, checking that the models are identical.
   The table is built once (deterministically: the machine's own .py/.h/.txt/.md/.rst files under
   /usr/lib/python3*, /usr/include, /usr/share and the venv's site-packages, sorted by path, joined by
   <|endoftext|>, counted with `count_pretokens_file`) and cached as a pickle (default /tmp/bpe_nb_scale_counts.pkl).
Figures are wall-clock seconds on this machine; re-run on a quiet machine before quoting them.
"""
import argparse, os, platform, sys, time, warnings
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bpe_nb.incremental import train_incremental, train_incremental_simple  # noqa: E402
from bpe_nb.naive import EarlyStopWarning, train_naive  # noqa: E402
from bpe_nb.pretokenize import GPT2_PATTERN, count_pretokens, bytes_to_printable  # noqa: E402

EOT = "<|endoftext|>"
SAMPLE = ROOT / "bpe_nb" / "data" / "tinystories_sample_1M.txt"
CORPUS_EN = ROOT / "tests" / "data" / "cs336" / "corpus.en"


def machine() -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",)
    return (f"machine: {platform.platform()} | {platform.processor() or platform.machine()} | "
            f"{os.cpu_count()} CPUs | load {', '.join(f'{x:.2f}' for x in load)}\n"
            f"python:  {sys.version.split()[0]} ({platform.python_implementation()})\n"
            f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")


def timed(f, *args, **kwargs):
    t = time.perf_counter(); out = f(*args, **kwargs); return time.perf_counter() - t, out


def timed_cpu(f, *args, **kwargs):
    "(wall seconds, CPU seconds of this process, result): on a shared machine the CPU time is the steadier figure."
    t, c = time.perf_counter(), time.process_time()
    out = f(*args, **kwargs)
    return time.perf_counter() - t, time.process_time() - c, out


def tinystories(sizes):
    text = SAMPLE.read_text(encoding="utf-8")
    t_count, counts = timed(count_pretokens, text, [EOT])
    print(f"\n## TinyStories sample: {len(text.encode()):,} bytes, {len(counts):,} distinct pre-tokens "
          f"(count_pretokens {t_count:.2f} s, not included below)")
    print(f"{'vocab':>7} {'merges':>7} {'naive s':>9} {'incremental s':>14} {'ratio':>7}  notes")
    for size in sizes:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EarlyStopWarning)
            t_fast, fast = timed(train_incremental, counts, size, [EOT], progress=False)
            t_slow, slow = timed(train_naive, counts, size, [EOT], progress=False)
        assert fast == slow, "the trainers disagree!"
        note = (f"stopped early at {fast.vocab_size:,} entries (every pre-token is one token)"
                if fast.info["stopped_early"] else "")
        print(f"{size:>7,} {len(fast.merges):>7,} {t_slow:>9.2f} {t_fast:>14.3f} {t_slow / t_fast:>6.0f}×  "
              f"identical merges; {note}")


def hf_train(text):
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    # GPT-2's regex as a Split, then ByteLevel only for the byte -> printable mapping (use_regex=False),
    # so HF pre-tokenizes exactly like bpe_nb.
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(GPT2_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=[EOT], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([text], trainer=trainer)
    return tok


def ours(text):
    return train_incremental(count_pretokens(text, [EOT]), 500, [EOT], tie_break="hf", progress=False)


def corpus_en(repeats):
    import json
    import tokenizers
    text = CORPUS_EN.read_text(encoding="utf-8")
    print(f"\n## corpus.en ({len(text.encode()):,} bytes) at vocab 500, pre-tokenize + merge, "
          f"best (median) of {repeats} in-process runs")
    t_ours = [timed(ours, text)[0] for _ in range(repeats)]
    t_hf = [timed(hf_train, text)[0] for _ in range(repeats)]
    m, hf = ours(text), hf_train(text)
    hf_merges = json.loads(hf.to_str())["model"]["merges"]
    hf_merges = [tuple(p.split(" ")) if isinstance(p, str) else tuple(p) for p in hf_merges]
    our_merges = [(bytes_to_printable(a), bytes_to_printable(b)) for a, b in m.merges]
    same = sum(1 for x, y in zip(our_merges, hf_merges) if x == y)
    print(f"bpe_nb incremental: {min(t_ours):.3f} s ({median(t_ours):.3f})")
    print(f"HF tokenizers {tokenizers.__version__} BpeTrainer (Split(GPT2_PATTERN) + ByteLevel(use_regex=False), "
          f"RAYON_NUM_THREADS={os.environ.get('RAYON_NUM_THREADS', 'default')}): {min(t_hf):.3f} s ({median(t_hf):.3f})")
    print(f"ratio ours / HF: {min(t_ours) / min(t_hf):.2f} (best), {median(t_ours) / median(t_hf):.2f} (median); "
          f"target <= 2")
    print(f"merges: ours {len(our_merges)}, HF {len(hf_merges)}, identical prefix "
          f"{next((i for i, (x, y) in enumerate(zip(our_merges, hf_merges)) if x != y), min(len(our_merges), len(hf_merges)))}, "
          f"same position {same} (ours with tie_break='hf': the lists must be identical)")


def scale_counts(path: Path):
    "The count table of the scale benchmark: loaded from `path`, or built from the machine's text and saved there."
    import pickle
    if path.exists(): return pickle.loads(path.read_bytes())
    import glob, tempfile
    from bpe_nb.chunking import count_pretokens_file
    roots = sorted({*glob.glob("/usr/lib/python3*"), "/usr/include", "/usr/share", *glob.glob(str(ROOT / ".venv/lib"))})
    files = sorted({p for r in roots for ext in ("*.py", "*.h", "*.txt", "*.md", "*.rst")
                    for p in Path(r).rglob(ext) if p.is_file()})
    with tempfile.TemporaryDirectory() as d:
        corpus = Path(d) / "corpus.txt"
        with corpus.open("w", encoding="utf-8") as f:
            for p in files:
                try: t = p.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError): continue
                f.write(t.replace(EOT, "")); f.write(EOT)
        print(f"corpus: {len(files):,} files, {corpus.stat().st_size / 1e6:.0f} MB")
        counts = count_pretokens_file(corpus, [EOT])
    path.write_bytes(pickle.dumps(counts))
    return counts


def scale(path: Path, sizes, tie_breaks, repeats):
    counts = scale_counts(path)
    print(f"\n## merge loop at scale: {len(counts):,} distinct pre-tokens, {sum(counts.values()):,} pre-tokens "
          f"(from counts to model; best of {repeats})")
    print(f"{'vocab':>7} {'tie_break':>13} {'simple s':>9} {'fast s':>8} {'ratio':>6} {'simple cpu':>11} "
          f"{'fast cpu':>9} {'ratio':>6}")
    for size in sizes:
        for tb in tie_breaks:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", EarlyStopWarning)
                runs_simple = [timed_cpu(train_incremental_simple, counts, size, [EOT], tie_break=tb, progress=False)
                               for _ in range(repeats)]
                runs_fast = [timed_cpu(train_incremental, counts, size, [EOT], tie_break=tb, progress=False)
                             for _ in range(repeats)]
            assert runs_fast[0][2] == runs_simple[0][2], "the loops disagree!"
            t_s, t_f = min(r[0] for r in runs_simple), min(r[0] for r in runs_fast)
            c_s, c_f = min(r[1] for r in runs_simple), min(r[1] for r in runs_fast)
            print(f"{size:>7,} {tb:>13} {t_s:>9.2f} {t_f:>8.2f} {t_s / t_f:>5.1f}× {c_s:>11.2f} {c_f:>9.2f} "
                  f"{c_s / c_f:>5.1f}×  identical merges")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000], help="TinyStories vocab sizes")
    ap.add_argument("--repeats", type=int, default=5, help="runs of the corpus.en comparison")
    ap.add_argument("--skip-tinystories", action="store_true")
    ap.add_argument("--skip-hf", action="store_true")
    ap.add_argument("--scale", nargs="?", const="/tmp/bpe_nb_scale_counts.pkl", default=None, metavar="COUNTS.pkl",
                    help="only the scale benchmark, with the count table cached at this path")
    ap.add_argument("--scale-sizes", type=int, nargs="+", default=[10000])
    ap.add_argument("--scale-tie-breaks", nargs="+", default=["bytes-greater"])
    ap.add_argument("--scale-repeats", type=int, default=1)
    a = ap.parse_args()
    print(machine())
    if a.scale:
        scale(Path(a.scale), a.scale_sizes, a.scale_tie_breaks, a.scale_repeats)
        sys.exit(0)
    if not a.skip_tinystories: tinystories(a.sizes)
    if not a.skip_hf: corpus_en(a.repeats)
