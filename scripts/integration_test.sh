#!/usr/bin/env bash
# The integration tests (tests/integration): nexttok.compat and nexttok.integrations
# against torch, transformers and xgrammar, and the CPU end-to-end decode of a tiny
# random Llama. They run in a virtual environment of their own,
# ${INTEGRATION_VENV:-build-python/integration-venv}, made from python3 with the
# pinned packages below from PyPI (torch's Linux wheel brings its CUDA libraries:
# about 5.6 GB and two minutes on a clean machine, seconds once installed), so the
# rest of the Python suite keeps its own environment. nexttok itself is the
# CPU-only build of scripts/python_test.sh in ${PY_SITE:-build-python/site}, built
# here when it is missing. The torch-dependent tests of tests/python (torch ops and
# their fakes, the vocabulary-parallel head over 2 and 4 gloo processes) run here
# too, in the same environment. Under CI=true a package that does not import
# fails the tests instead of skipping them. Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
site="${PY_SITE:-build-python/site}"
venv="${INTEGRATION_VENV:-build-python/integration-venv}"
pins=(torch==2.15.0 transformers==5.25.0 tokenizers==0.23.3 xgrammar==0.2.9
      numpy pytest hypothesis)

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check "${pins[@]}" >&2

if ! ls "$site"/nexttok/_nexttok*.so >/dev/null 2>&1; then
  python3 -m pip install -q --no-build-isolation --no-deps --target "$site" \
    -Cbuild-dir=build-python/cmake -Ccmake.define.NEXTTOK_CUDA="${NEXTTOK_PY_CUDA:-OFF}" . >&2
fi

if [ "${CI:-}" = "true" ]; then
  export NEXTTOK_TEST_REQUIRE="${NEXTTOK_TEST_REQUIRE:+$NEXTTOK_TEST_REQUIRE,}integration,torch"
fi
# Two runs: each test folder imports its own conftest module by name.
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests/integration "$@"
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests/python/test_torch.py \
  tests/python/test_lm_head_sample.py tests/python/test_sample_logprobs.py tests/python/test_verify.py "$@"
