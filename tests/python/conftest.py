"""Devices for the torch tests. torch missing: its tests skip, unless
NEXTTOK_TEST_REQUIRE names torch (scripts/integration_test.sh under CI), where
they fail. CUDA missing: the CUDA cases skip, unless NEXTTOK_TEST_REQUIRE names
cuda (GPU runners), where they fail. `import nexttok` is never skipped: a package that does not
build or import fails the run."""
import os

import pytest

REQUIRE = {d.strip() for d in os.environ.get("NEXTTOK_TEST_REQUIRE", "").split(",") if d.strip()}


def torch_devices():
    try:
        import torch
    except ImportError:
        if "torch" in REQUIRE:
            raise
        return []
    devices = ["cpu"]
    if "cuda" in REQUIRE or torch.cuda.is_available():
        devices.append("cuda")
    return devices


def import_torch():
    """torch, or a skip (a failure where NEXTTOK_TEST_REQUIRE names torch)."""
    if "torch" in REQUIRE:
        import torch
        return torch
    return pytest.importorskip("torch")


@pytest.fixture
def torch():
    return import_torch()


def require_device(device):
    import torch

    if device == "cuda":
        import nexttok

        ok = torch.cuda.is_available() and nexttok.cuda_compiled
        if not ok:
            if "cuda" in REQUIRE:
                pytest.fail("NEXTTOK_TEST_REQUIRE=cuda but torch CUDA or nexttok's CUDA "
                            f"backend is missing (cuda_compiled={nexttok.cuda_compiled})")
            pytest.skip("no CUDA device or nexttok built without CUDA")
