"""The integration tests: nexttok against torch, transformers, xgrammar and the
engines' published interfaces. A package they need and cannot import skips its
tests with the reason, except where NEXTTOK_TEST_REQUIRE lists "integration"
(scripts/integration_test.sh sets it under CI=true): there a missing package
fails the run."""
import importlib
import os

import pytest

REQUIRE = {d.strip() for d in os.environ.get("NEXTTOK_TEST_REQUIRE", "").split(",") if d.strip()}


def need(module):
    """The imported module, else a skip (or a failure where integration is required)."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        if "integration" in REQUIRE:
            pytest.fail(f"NEXTTOK_TEST_REQUIRE=integration but {module} does not import: {e}")
        pytest.skip(f"{module} is not installed ({e})", allow_module_level=True)
