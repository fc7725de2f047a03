#!/usr/bin/env bash
# Every check of `make test` (and so of CI), in order; stops loudly at the first failure.
#   1. nbdev_export leaves bpe_nb/ unchanged  (the library is in sync with the notebooks)
#   2. nbdev_clean leaves nbs/ unchanged      (notebooks are committed clean)
#   3. nbdev_test passes                      (the notebooks are executable specs)
#   4. pytest passes                          (conformance, property and CLI tests in tests/)
#   5. the docs site builds and passes the browser test (tests/browser/; needs chromium: runs when
#      CI=true or /usr/bin/chromium exists, else is skipped with a loud line)
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '\n==> %s\n' "$*"; }
fail() { printf '\nFAILED: %s\n' "$*" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
notebooks() { find nbs -name '*.ipynb' -not -path '*/_proc/*' -not -path '*/.ipynb_checkpoints/*' | sort; }

step "1/5 bpe_nb/ is what nbdev_export makes of nbs/"
cp -r bpe_nb "$tmp/lib"
nbdev_export
if ! diff -r -q -x __pycache__ "$tmp/lib" bpe_nb; then
  diff -r -u -x __pycache__ "$tmp/lib" bpe_nb | head -60 || true
  fail "bpe_nb/ was out of date with the notebooks (now re-exported): edit the notebook, run nbdev_export, commit both"
fi

step "2/5 notebooks are clean (nbdev_clean changes nothing)"
mkdir -p "$tmp/nbs"
notebooks | while read -r f; do mkdir -p "$tmp/$(dirname "$f")"; cp "$f" "$tmp/$f"; done
nbdev_clean
dirty=$(notebooks | while read -r f; do cmp -s "$f" "$tmp/$f" || echo "$f"; done)
[ -z "$dirty" ] || fail "nbdev_clean changed: $dirty (now cleaned: commit them)"

step "3/5 nbdev_test: every notebook runs green"
nbdev_test

step "4/5 pytest"
python -m pytest tests -q -p no:cacheprovider --ignore=tests/browser

step "5/5 docs: build the site (make docs) and check it in headless Chromium"
if [ "${CI:-}" = "true" ] || [ -x /usr/bin/chromium ]; then
  python tools/build_docs.py
  python -m pytest tests/browser -q -p no:cacheprovider
else
  printf '\n!!!!! 5/5 SKIPPED: no chromium (/usr/bin/chromium): the docs site was not built or checked.\n' >&2
  printf '!!!!! Install it with: apt-get install chromium chromium-driver   (CI does, and always runs this step)\n' >&2
fi
