#!/usr/bin/env python3
"""Each kernel's SASS size and local-memory traffic (register spills: LDL and
STL), in total and inside a given source region, for one object or beside a
baseline's; needs no GPU. A kernel change whose hot loop gains spills shows
here before any device time is spent on it.

Build with `-DCMAKE_CUDA_FLAGS=-lineinfo` (line tables only; the code is the
same), then, e.g. for the sampler's float32 instance:

  ninja -C build CMakeFiles/nexttok_objects.dir/cuda_instances/sample_kernels_NT_F32__true.cu.o
  python3 bench/sass_spills.py build/CMakeFiles/nexttok_objects.dir/cuda_instances/sample_kernels_NT_F32__true.cu.o \\
      --base /tmp/before.o --match sample_scan_kernel --inside sample_tiles.cuh

An instruction is inside the region when a file whose name contains
--inside (optionally `FILE:LINE`) is on its inline chain: `sample_tiles.cuh`
catches every scan's tile loop. cuobjdump and nvdisasm come from the CUDA
toolkit (on a machine without one: `pip install nvidia-cuda-cuobjdump
nvidia-cuda-nvdisasm` and put their `nvidia/cu13/bin` on PATH).
"""
import argparse
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from profile_source import cubins, disassemble, functions  # noqa: E402

SPILLS = ("LDL", "STL")


def kernels(binary, match, scratch):
    """{function name: [(opcode, inline chain), ...]} of the object's cubins."""
    found = {}
    for cubin in cubins(binary, scratch):
        # Names starting with $ are labels inside a kernel (its calls' targets).
        for index, _, name in functions(cubin)[1]:
            if not name.startswith("$") and re.search(match, name):
                found[name] = [(op, chain) for _, op, chain in disassemble(cubin, index)]
    return found


def inside(chain, region):
    if not region:
        return False
    name, _, line = region.partition(":")
    return any(name in f and (not line or int(line) == n) for f, n in chain)


def counts(code, region):
    """(instructions, spills, spills inside the region)."""
    spills = [chain for op, chain in code if op.split(".")[0] in SPILLS]
    return len(code), len(spills), sum(inside(chain, region) for chain in spills)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("object", help="an object, library or module holding the kernels")
    ap.add_argument("--base", help="the same object built from the baseline tree")
    ap.add_argument("--match", default=".", help="regex on the mangled kernel names")
    ap.add_argument("--inside", default="", help="source region whose spills are counted apart: FILE or FILE:LINE")
    args = ap.parse_args()
    builds = [("this", args.object)] + ([("base", args.base)] if args.base else [])
    tables = {}
    for label, binary in builds:
        with tempfile.TemporaryDirectory() as scratch:
            tables[label] = {k: counts(v, args.inside) for k, v in kernels(binary, args.match, scratch).items()}
    if not tables["this"]:
        raise SystemExit(f"sass_spills.py: no function of {args.object} matches {args.match!r}")
    cols = "instructions | spills | inside"
    head = f"| kernel | {cols} |" + (f" base {cols.replace(' | ', ' | base ')} |" if args.base else "")
    print(head + "\n|---|" + "---:|" * (3 * len(builds)))
    for name in sorted(set(tables["this"]) | set(tables.get("base", {}))):
        cells = []
        for label, _ in builds:
            c = tables[label].get(name)
            cells += [str(x) for x in c] if c else ["-"] * 3
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
