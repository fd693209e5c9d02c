"""Writes nexttok as a Hugging Face kernel directory, the layout that the
`kernels` package loads (get_local_kernel(path), or LOCAL_KERNELS=repo=path):

  <out>/build/<variant>/metadata.json     name, id, backend (and CUDA archs)
  <out>/build/<variant>/__init__.py ...   the nexttok package and its extension
  <out>/build/<variant>/nexttok/          the per-name directory older releases import

<variant> is torch<maj><min>-cxx11-cu<ver>-<cpu>-linux for the torch found here
(the extension does not link torch, but `kernels` only picks arch variants of
the running torch version), or torch-cuda / torch-cpu without torch.
Run by the CMake target nexttok_hf_kernel.
"""
import argparse
import hashlib
import json
import platform
import shutil
from pathlib import Path

COMPAT = '''"""Older `kernels` releases import build/<variant>/{name}/: load the variant
directory itself as package {id!r} and re-export it."""
import importlib.util
import os
import sys

_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_mod = sys.modules.get({id!r})
if _mod is None:
    _spec = importlib.util.spec_from_file_location(
        {id!r}, os.path.join(_root, "__init__.py"), submodule_search_locations=[_root])
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules[{id!r}] = _mod
    _spec.loader.exec_module(_mod)
globals().update({{k: getattr(_mod, k) for k in _mod.__all__}})
__all__ = list(_mod.__all__)
'''


def variant(cuda):
    try:
        import torch
    except ImportError:
        return "torch-cuda" if cuda else "torch-cpu"
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    abi = "cxx11" if torch.compiled_with_cxx11_abi() else "cxx98"
    if cuda and torch.version.cuda:
        backend = "cu" + "".join(torch.version.cuda.split(".")[:2])
    else:
        backend = "cpu"
    return f"torch{major}{minor}-{abi}-{backend}-{platform.machine()}-linux"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--package", required=True, help="python/nexttok")
    p.add_argument("--extension", required=True, help="the built _nexttok*.so")
    p.add_argument("--out", required=True)
    p.add_argument("--cuda", default="0", help="1/ON when the CUDA backend is built in")
    p.add_argument("--archs", default="", help="CUDA architectures, e.g. 80,89,90")
    p.add_argument("--version", default="0.2.0")
    p.add_argument("--variant", help="override the variant directory name")
    a = p.parse_args()
    cuda = a.cuda.upper() in ("1", "ON", "TRUE")
    ext = Path(a.extension)
    digest = hashlib.sha256(ext.read_bytes()).hexdigest()[:7]
    kid = f"_nexttok_{'cuda' if cuda else 'cpu'}_{digest}"
    dest = Path(a.out) / "build" / (a.variant or variant(cuda))
    shutil.rmtree(dest, ignore_errors=True)
    (dest / "nexttok").mkdir(parents=True)
    for f in Path(a.package).glob("*.py"):
        shutil.copy2(f, dest / f.name)
    shutil.copy2(ext, dest / ext.name)
    (dest / "nexttok" / "__init__.py").write_text(COMPAT.format(name="nexttok", id=kid))
    backend = {"type": "cuda" if cuda else "cpu"}
    archs = [f"{x[:-1]}.{x[-1]}" for x in a.archs.replace(";", ",").split(",") if x.isdigit()]
    if cuda and archs:
        backend["archs"] = archs
    meta = {"name": "nexttok", "id": kid, "version": int(a.version.split(".")[0]) or 1,
            "license": "see the nexttok repository", "python-depends": [], "backend": backend}
    (dest / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(dest)


if __name__ == "__main__":
    main()
