"""Per-kernel GPU times (torch.profiler) of nexttok.sample for a few W3 rows."""
import sys
import torch
import nexttok
from torch.profiler import profile, ProfilerActivity

sys.path.insert(0, "bench")
from _common import make_logits  # noqa: E402

gen = torch.Generator(device="cuda")
gen.manual_seed(7)
V = 128256
cases = [("k50+p0.9 scalar", (0.7, 50, 0.9, 0.0), False), ("k50+p0.9 per-row", (0.7, 50, 0.9, 0.0), True),
         ("top-p scalar", (0.7, 0, 0.9, 0.0), False), ("top-p per-row", (0.7, 0, 0.9, 0.0), True)]
mix = [(0.0, 0, 1.0, 0.0), (0.7, 0, 0.9, 0.0), (0.7, 50, 1.0, 0.0), (0.7, 50, 0.9, 0.0)]
for B, kind in ((256, "peaked"), (256, "flat"), (1, "peaked")):
    x = make_logits(B, V, kind, torch.float32, gen)
    seed = torch.randint(0, 2**62, (B,), device="cuda")
    off = torch.zeros(B, dtype=torch.int64, device="cuda")
    for name, (t, k, p, m), per_row in cases + [("mixed quarters", (None,) * 4, True)]:
        if t is None:
            rows = [mix[r % 4] for r in range(B)]
            args = tuple(torch.tensor([r[i] for r in rows], device="cuda",
                                      dtype=torch.int32 if i == 1 else torch.float32) for i in range(4))
        else:
          args = ((torch.full((B,), t, device="cuda"), torch.full((B,), k, dtype=torch.int32, device="cuda"),
                 torch.full((B,), p, device="cuda"), torch.full((B,), m, device="cuda")) if per_row
                  else (t, k, p, m))
        for _ in range(5):
            nexttok.sample(x, *args, seed=seed, offset=off)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                nexttok.sample(x, *args, seed=seed, offset=off)
            torch.cuda.synchronize()
        rows = []
        for e in prof.key_averages():
            if e.device_type.name == "CUDA" and e.count > 0:
                rows.append((e.key[:60], e.count // 20, e.device_time_total / 20))
        rows.sort(key=lambda r: -r[2])
        print(f"== B={B} {kind} {name}: " + "; ".join(f"{k} x{c} {us:.1f}us" for k, c, us in rows[:8]), flush=True)
