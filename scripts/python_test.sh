#!/usr/bin/env bash
# The Python package's tests (tests/python): pip builds nexttok from this tree
# into ${PY_SITE:-build-python/site} and pytest runs them against it. CPU backend
# only unless NEXTTOK_PY_CUDA=ON or AUTO (the library's CPU part builds in
# seconds; its CUDA kernels take minutes). torch/CUDA tests skip without them;
# a package that does not build or import fails the run. Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
site="${PY_SITE:-build-python/site}"
rm -rf "$site"
python3 -m pip install -q --no-build-isolation --no-deps --target "$site" \
  -Cbuild-dir=build-python/cmake -Ccmake.define.NEXTTOK_CUDA="${NEXTTOK_PY_CUDA:-OFF}" . >&2
PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" python3 -m pytest -q -p no:cacheprovider tests/python "$@"
