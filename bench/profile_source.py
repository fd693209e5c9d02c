#!/usr/bin/env python3
"""Where one kernel's time goes, by source line: the warp-stall samples of an
Nsight Compute report summed over every source line an instruction was
inlined from, so a line that calls a function is charged with all of it (the
scan's tile loop, its list output, the cluster merge), with the executed
instruction count and the leading stall reasons of each line.

Build with `-DCMAKE_CUDA_FLAGS=-lineinfo` (line tables only; the code is the
same), then on the GPU machine:

  ncu -k regex:sample_scan_kernel --launch-skip 2 --launch-count 1 --warp-sampling-interval 0 \\
      --section WarpStateStats --section SourceCounters -o /tmp/scan \\
      python3 bench/profile_kernels.py --once --match '^W3 k50.* B=1 '
  python3 bench/profile_source.py /tmp/scan.ncu-rep build/python/nexttok/_nexttok*.so

The binary is the module or library holding the kernel (its sm_90a cubin is
found by the kernel's mangled name); nvdisasm and cuobjdump come from the CUDA
toolkit beside ncu.
"""
import argparse
import collections
import csv
import glob
import io
import os
import re
import shutil
import subprocess
import tempfile


def tool(name):
    path = shutil.which(name) or os.path.join("/usr/local/cuda/bin", name)
    if not os.path.exists(path):
        raise SystemExit(f"profile_source.py: {name} not found (the CUDA toolkit's bin on PATH)")
    return path


def run(*cmd, cwd=None):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=cwd).stdout


def report_source(report):
    """(kernel name as ncu prints it, SASS rows as dicts) of the first kernel of
    an .ncu-rep, or of the CSV `ncu --page source --csv --print-source sass` wrote."""
    if report.endswith(".csv"):
        text = open(report, errors="replace").read()
    else:
        text = run(tool("ncu"), "-i", report, "--page", "source", "--csv", "--print-source", "sass")
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith('"Kernel Name"'))
    name = next(csv.reader([lines[head]]))[1]
    end = next((i for i in range(head + 2, len(lines)) if lines[i].startswith('"Kernel Name"')), len(lines))
    return name, list(csv.DictReader(io.StringIO("\n".join(lines[head + 1:end]))))


def mnemonic(sass):
    """The opcode of one SASS instruction's text, without its predicate."""
    words = re.sub(r"^\s*@!?U?P\w+\s+", "", sass.split(";")[0]).split()
    return words[0] if words else ""


def disassemble(cubin, index):
    """[(offset, opcode, [(file, line), ...] innermost first)] of function `index`."""
    out, chain, pending = [], [], []
    for line in run(tool("nvdisasm"), "-gi", "-c", "-fun", str(index), cubin).splitlines():
        at = re.match(r'\s*//## File "([^"]+)", line (\d+)', line)
        if at:
            pending.append((os.path.basename(at.group(1)), int(at.group(2))))
            continue
        ins = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s*(.*)", line)
        if ins:
            if pending:
                chain, pending = pending, []
            out.append((int(ins.group(1), 16), mnemonic(ins.group(2)), chain))
    return out


def is_function(kind):
    """Whether a symbol table row's type column is a function's: cuobjdump
    prints it as a word (FUNC) or, in CUDA 13.0's tables, as the ELF info
    byte (type in its low four bits, STT_FUNC = 2)."""
    if re.fullmatch(r"0x[0-9a-f]+|\d+", kind):
        return int(kind, 0) & 0xF == 2
    return kind == "FUNC"


SYMBOL = re.compile(r"^\s*(0x[0-9a-f]+|\d+)\s+\S+\s+(0x[0-9a-f]+|\d+)\s+(\S+)\s.*\s(\S+)$", re.M)


def cubins(binary, scratch):
    """The cubins of a cubin, object, library or module (extracted into scratch)."""
    if binary.endswith(".cubin"):
        return [binary]
    run(tool("cuobjdump"), "-xelf", "all", os.path.abspath(binary), cwd=scratch)
    return sorted(glob.glob(os.path.join(scratch, "*.cubin")))


def functions(cubin):
    """A cubin's symbol table (its text) and its functions as (index, bytes, name)."""
    elf = run(tool("cuobjdump"), "-elf", cubin)
    table = elf[elf.find(".section .symtab"):] if ".section .symtab" in elf else ""
    return table, [(int(m.group(1), 0), int(m.group(2), 0), m.group(4))
                   for m in SYMBOL.finditer(table) if is_function(m.group(3))]


def inline_chains(binary, name, rows, scratch):
    """{instruction offset: [(file, line), ...]} of the profiled kernel: the
    function of the binary's cubins whose name holds the kernel's, whose size
    is the profile's and whose opcodes are the profile's, one for one."""
    found = cubins(binary, scratch)
    plain = name.replace("(anonymous namespace)::", "")
    base = re.sub(r"<.*", "", plain.split("(")[0]).split("::")[-1].split()[-1]
    opcodes = [mnemonic(r["Source"]) for r in rows]
    misses = []  # why each function of that name is not the profiled one
    n_functions, symtab = 0, ""
    for cubin in found:
        table, listed = functions(cubin)
        symtab = symtab or table
        n_functions += len(listed)
        for index, size, fname in listed:
            if base not in fname:
                continue
            if size != 16 * len(rows):
                misses.append(f"{fname}: {size // 16} instructions")
                continue
            code = disassemble(cubin, index)
            ops = [op for _, op, _ in code]
            if ops == opcodes:
                if not any(chain for _, _, chain in code):
                    raise SystemExit("profile_source.py: the kernel has no line table (build with -lineinfo)")
                return {offset: chain for offset, _, chain in code}
            at = next((i for i, (a, b) in enumerate(zip(ops, opcodes)) if a != b),
                      min(len(ops), len(opcodes)))
            misses.append(f"{fname}: instruction {at} is {ops[at:at + 1]}, the profile's "
                          f"{opcodes[at:at + 1]}")
    # With no function found at all, the symbol table's first lines show why.
    detail = "".join(f"\n  {line}" for line in misses[:20]) or (
        f"\n  no function named {base} among {n_functions} functions of {len(found)} cubins"
        + "".join(f"\n    {line}" for line in symtab.splitlines()[:4] if n_functions == 0))
    raise SystemExit(f"profile_source.py: no function of {binary} is the profiled {name} "
                     f"({len(rows)} instructions):{detail}")


def number(s):
    try:
        return float(s.replace(",", ""))
    except (AttributeError, ValueError):
        return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report", help="an .ncu-rep with the SourceCounters section, or its source page as CSV")
    ap.add_argument("binary", help="the module, library or cubin that holds the kernel")
    ap.add_argument("--top", type=int, default=40, help="lines to print")
    ap.add_argument("--file", default="", help="only lines of files whose name contains this")
    ap.add_argument("--source", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"),
                    help="the sources the build compiled, for each line's text (default: this tree's src)")
    args = ap.parse_args()
    kernel, rows = report_source(args.report)
    with tempfile.TemporaryDirectory() as scratch:
        chains = inline_chains(args.binary, kernel, rows, scratch)
    base = int(rows[0]["Address"], 16)
    stall_columns = [c for c in rows[0] if c.startswith("stall_") and "Not Issued" not in c]
    samples, executed = collections.Counter(), collections.Counter()
    stalls = collections.defaultdict(collections.Counter)
    total = 0.0
    for row in rows:
        s = number(row["Warp Stall Sampling (All Samples)"])
        total += s
        for key in set(chains.get(int(row["Address"], 16) - base, [])):
            samples[key] += s
            executed[key] += number(row["Instructions Executed"])
            for c in stall_columns:
                stalls[key][c[len("stall_"):]] += number(row[c])
    print(f"{kernel}: {len(rows)} instructions, {int(total)} warp samples, "
          f"{int(sum(number(r['Instructions Executed']) for r in rows))} warp instructions executed")
    print("| samples % | line | warp instructions | leading stalls | source |\n|---:|---|---:|---|---|")
    texts = {}
    shown = 0
    for (name, line), s in samples.most_common():
        if args.file not in name:
            continue
        if name not in texts:
            found = glob.glob(os.path.join(args.source, "**", name), recursive=True)
            texts[name] = open(found[0]).read().splitlines() if found else []
        text = texts[name][line - 1].strip()[:70] if line <= len(texts[name]) else ""
        lead = ", ".join(f"{k} {100 * v / s:.0f}%" for k, v in stalls[(name, line)].most_common(2) if s)
        print(f"| {100 * s / max(total, 1):.1f} | {name}:{line} | {int(executed[(name, line)])} | {lead} "
              f"| `{text.replace('|', '/')}` |")
        shown += 1
        if shown == args.top:
            break


if __name__ == "__main__":
    main()
