#!/usr/bin/env python3
# Summary of the per-instruction SASS profiles that device_check's ncu-sass
# stage appends to ncu.log as CSV (one block per kernel launch): stall
# reasons, execution-count classes (a loop body's instructions share a count)
# by instructions and by stall samples, the instruction mix of the largest
# class and the 25 hottest instructions.
# Usage: scripts/ncu_sass_summary.py ncu.log [block index, default all]
import collections
import csv
import sys


def blocks_of(path):
    blocks, cur = [], None
    for line in open(path):
        if not line.startswith('"'):
            continue
        if line.startswith('"Kernel Name"'):
            cur = [line]
            blocks.append(cur)
        elif cur is not None:
            cur.append(line)
    return blocks


def count(row, ix, name):
    return int(row[ix[name]] or 0)


def opcode(source):
    words = source.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else "?"


def summarize(block):
    print(block[0].strip()[:160])
    rows = list(csv.reader(block[1:]))
    if len(rows) < 2:
        print("  no instructions")
        return
    header, rows = rows[0], rows[1:]
    ix = {h: i for i, h in enumerate(header)}
    stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    stall_total = collections.Counter()
    executed_by_count = collections.Counter()  # execution count -> instructions executed
    instructions_at = collections.Counter()    # execution count -> distinct instructions
    samples_at = collections.Counter()         # execution count -> stall samples
    stalls_at = collections.defaultdict(collections.Counter)
    samples = executed = 0
    for r in rows:
        e = count(r, ix, "Instructions Executed")
        for h in stalls:
            stall_total[h] += count(r, ix, h)
            stalls_at[e][h[6:]] += count(r, ix, h)
        samples += count(r, ix, "# Samples")
        samples_at[e] += count(r, ix, "# Samples")
        executed += e
        executed_by_count[e] += e
        instructions_at[e] += 1
    print(f"samples {samples}, warp instructions executed {executed}")
    # Code that runs once or a few times per warp is fetched cold (a latency
    # chain at small batch): its size, in 16-byte instructions.
    ran = sum(1 for r in rows if count(r, ix, "Instructions Executed") > 0)
    print(f"code: {len(rows)} instructions ({len(rows) * 16 / 1024:.1f} KB), "
          f"{ran} executed ({ran * 16 / 1024:.1f} KB)")
    for h, v in stall_total.most_common(10):
        print(f"  {h:24s} {100 * v / max(1, samples):5.1f}%")
    print("execution-count classes (count x instructions = share of those executed):")
    for e, v in executed_by_count.most_common(8):
        print(f"  {e:9d} x {instructions_at[e]:4d} = {100 * v / max(1, executed):5.1f}%")
    # Where the warps' time goes: samples are taken per warp at a fixed
    # interval, so a class's share of them is its share of the warps' time
    # (run 66: the MMA loop held 45% of the instructions but 21% of the time).
    print("execution-count classes by stall samples (share of the warps' time, top stalls):")
    for e, v in samples_at.most_common(10):
        top = ", ".join(f"{n} {c}" for n, c in stalls_at[e].most_common(3))
        print(f"  {e:9d} x {instructions_at[e]:4d}: {100 * v / max(1, samples):5.1f}%  ({top})")
    hot = executed_by_count.most_common(1)[0][0]
    mix = collections.Counter(opcode(r[ix["Source"]].strip()) for r in rows if count(r, ix, "Instructions Executed") == hot)
    print(f"mix of the {instructions_at[hot]} instructions executed {hot} times: " +
          ", ".join(f"{o} {v}" for o, v in mix.most_common()))
    print("hottest instructions (samples, executions, top stalls):")
    for r in sorted(rows, key=lambda r: -count(r, ix, "# Samples"))[:25]:
        top = sorted(((count(r, ix, h), h[6:]) for h in stalls), reverse=True)[:3]
        print(f"  {count(r, ix, '# Samples'):6d} {count(r, ix, 'Instructions Executed'):9d}  "
              f"{r[ix['Source']].strip()[:58]:58s} " + " ".join(f"{n}:{v}" for v, n in top))


if __name__ == "__main__":
    all_blocks = blocks_of(sys.argv[1])
    chosen = [all_blocks[int(sys.argv[2])]] if len(sys.argv) > 2 else all_blocks
    for blk in chosen:
        summarize(blk)
        print()
