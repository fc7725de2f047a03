"Shared pytest fixtures: where the shared data lives, and hypothesis profiles."
import os
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
# The same rule as the notebooks: $BPE_NB_SHARED_DATA if set, else ../shared/data beside the repository.
SHARED_DATA = Path(os.environ.get("BPE_NB_SHARED_DATA") or ROOT.parent / "shared" / "data")
BUNDLED_SAMPLE = ROOT / "bpe_nb" / "data" / "tinystories_sample_1M.txt"

# `ci` (the default) derandomizes so a CI run is reproducible; HYPOTHESIS_PROFILE=dev explores more.
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
settings.register_profile("dev", deadline=None, max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    "The shared data directory (`../shared/data` beside the repository root)."
    if not SHARED_DATA.is_dir(): pytest.fail(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def tinystories_sample() -> Path:
    "The 1 MB TinyStories sample bundled with the package."
    return BUNDLED_SAMPLE
