"Shared pytest fixtures: where the test data lives, and hypothesis profiles."
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
