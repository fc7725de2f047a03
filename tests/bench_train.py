"""Benchmark the trainers: naive vs incremental on the 1 MB TinyStories sample, and corpus.en vs HF tokenizers.

Run from the repository root:  python tests/bench_train.py [--sizes 2000 10000] [--repeats 5]

1. TinyStories sample: pre-token counts are built once, then each trainer learns merges from them at
   each vocab size (the "merge loop": `train_*` from counts to model, progress off). Prints both
   times, the ratio, and checks that the merges are identical.
2. CS336 corpus.en at vocab 500 with <|endoftext|>: ours = `count_pretokens` + `train_incremental`
   in-process, vs HF tokenizers' BpeTrainer on the same text (`train_from_iterator`), best of N runs.
Figures are wall-clock seconds on this machine; re-run on a quiet machine before quoting them.
"""
import argparse, os, platform, sys, time, warnings
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bpe_nb.incremental import train_incremental  # noqa: E402
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
    return train_incremental(count_pretokens(text, [EOT]), 500, [EOT], progress=False)


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
          f"same position {same} (HF breaks ties by its own ids, so the lists part at the first tie they "
          f"resolve differently)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000], help="TinyStories vocab sizes")
    ap.add_argument("--repeats", type=int, default=5, help="runs of the corpus.en comparison")
    ap.add_argument("--skip-tinystories", action="store_true")
    ap.add_argument("--skip-hf", action="store_true")
    a = ap.parse_args()
    print(machine())
    if not a.skip_tinystories: tinystories(a.sizes)
    if not a.skip_hf: corpus_en(a.repeats)
