#!/usr/bin/python3
"""Plot the bench results: a roofline chart and a per-op ratio chart.

    scripts/plot-bench.py [CSV ...] [--out DIR] [--bandwidth TB/s] [--peak TFLOP/s]

Reads result rows (default docs/perf/h200-results.csv; tools/bench/compare.py
--csv writes the same columns, docs/perf/README.md describes them) and writes
DIR/roofline.png and DIR/ratio-vs-pytorch.png (default DIR docs/perf):

- roofline.png: arithmetic intensity (flops / bytes) against achieved
  TFLOP/s, log-log, one point per op and shape for TileOPs and one for each
  reference measured beside it (a grey line joins the two), under the
  measured ceilings (--bandwidth, --peak) and the datasheet's;
- ratio-vs-pytorch.png: the reference's time over ours per op and shape
  (above 1: TileOPs is faster), and where only a range over an op's
  workloads was recorded, that range.

Needs matplotlib (Debian: python3-matplotlib; scripts/deps.sh plot).
"""
import argparse
import csv
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The ceilings measured on the H200. Bandwidth: the device-to-device copy of
# 2 GiB (bytes read plus written), docs/perf.md "Memory-bound ops", 2026-12-01.
# Compute: cuBLAS bf16 8192^3, the best dense bf16 rate measured on the
# machine (the baselines of 2026-11-30; docs/perf.md "GEMM" has 690 back to
# back at the 700 W limit and 795 for one cold call).
MEASURED_TBPS = 4.24
MEASURED_TFLOPS = 730.0
# NVIDIA's H200 SXM datasheet: HBM3e bandwidth and dense bf16 tensor rate.
DATASHEET_TBPS = 4.8
DATASHEET_TFLOPS = 989.0

FAMILY_COLOURS = {"gemm": "tab:blue", "bmm": "tab:cyan", "attention_prefill": "tab:red"}
BASELINE_STYLE = {
    "cuBLASLt": ("s", "tab:green"),
    "cuDNN (torch SDPA)": ("D", "tab:purple"),
    "flash (torch SDPA)": ("^", "tab:brown"),
    "PyTorch eager": ("v", "tab:orange"),
    "torch.compile": ("P", "tab:olive"),
}


def num(v):
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def load(paths):
    rows = []
    for p in paths:
        with open(p, newline="") as f:
            for r in csv.DictReader(f):
                for k in ("flops", "bytes", "tileops_us", "baseline_us", "speedup_lo",
                          "speedup_hi"):
                    r[k] = num(r.get(k))
                rows.append(r)
    return rows


def family_colour(op):
    return FAMILY_COLOURS.get(op, "tab:gray")


def label(r):
    w = r.get("workload") or r["op"]
    dt = r.get("dtype") or ""
    if dt and not w.endswith(dt):
        w += " " + dt
    if (r.get("shape") or "").endswith("causal") and "causal" not in w:
        w += " causal"
    return w


def roofline(rows, out, tbps, tflops):
    # The ceilings are bf16 (f16) tensor rates: f32 products run elsewhere.
    pts = [r for r in rows if r["flops"] and r["bytes"] and r["tileops_us"]
           and r.get("dtype") in ("bf16", "f16")]
    fig, ax = plt.subplots(figsize=(10, 7))
    xs = [r["flops"] / r["bytes"] for r in pts] or [1.0]
    lo, hi = min(xs) / 3, max(xs) * 3
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    for bw, peak, style, name in ((tbps, tflops, "-", "measured"),
                                  (DATASHEET_TBPS, DATASHEET_TFLOPS, ":", "datasheet")):
        ax.plot(grid, [min(x * bw, peak) for x in grid], style, color="black", lw=1.2,
                label="%s ceiling: %.2f TB/s, %.0f TFLOP/s bf16" % (name, bw, peak))
    seen = set()
    done = set()
    for r in pts:
        x = r["flops"] / r["bytes"]
        y = r["flops"] / r["tileops_us"] * 1e-6
        k = (r["op"], r.get("workload"), r.get("shape"), r.get("dtype"))
        if k not in done:
            fam = r["op"] if r["op"] in FAMILY_COLOURS else "other ops"
            ax.scatter([x], [y], s=36, color=family_colour(r["op"]), zorder=3,
                       label=None if fam in seen else "TileOPs: " + fam)
            seen.add(fam)
            done.add(k)
        if r["baseline_us"]:
            yb = r["flops"] / r["baseline_us"] * 1e-6
            m, c = BASELINE_STYLE.get(r["baseline"], ("x", "tab:gray"))
            ax.plot([x, x], [y, yb], color="0.7", lw=0.8, zorder=1)
            ax.scatter([x * 1.06], [yb], s=30, marker=m, facecolors="none", edgecolors=c,
                       zorder=2, label=None if r["baseline"] in seen else r["baseline"])
            seen.add(r["baseline"])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ys = [r["flops"] / r["tileops_us"] * 1e-6 for r in pts] or [1.0]
    ax.set_ylim(min(ys) / 3, DATASHEET_TFLOPS * 2)
    ax.set_xlabel("arithmetic intensity (FLOP / byte, roofline bytes of the manifest)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title("H200 roofline: TileOPs and the reference beside it (bf16 and f16)")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "roofline.png"), dpi=110)
    plt.close(fig)


def ratio(rows, out):
    bars = [r for r in rows if r["tileops_us"] and r["baseline_us"]]
    ranges = [r for r in rows if r["speedup_lo"] and r["speedup_hi"] and not r["baseline_us"]]
    panels = [p for p in (bars, ranges) if p]
    if not panels:
        print("plot-bench.py: no rows with both times or a speed-up range", file=sys.stderr)
        return
    n = max(len(bars), len({r["op"] for r in ranges}))
    fig, axes = plt.subplots(1, len(panels), figsize=(8 * len(panels), 1.5 + 0.19 * n),
                             squeeze=False)
    axes = axes[0]
    i = 0
    if bars:
        ax = axes[i]
        i += 1
        ys = list(range(len(bars)))[::-1]
        vals = [r["baseline_us"] / r["tileops_us"] for r in bars]
        cols = [BASELINE_STYLE.get(r["baseline"], ("x", "tab:gray"))[1] for r in bars]
        ax.barh(ys, vals, color=cols, height=0.7)
        ax.set_yticks(ys)
        ax.set_yticklabels(["%s vs %s" % (label(r), r["baseline"]) for r in bars], fontsize=7)
        for y, v in zip(ys, vals):
            ax.text(v, y, " %.2f" % v, va="center", fontsize=6)
        ax.axvline(1.0, color="black", lw=1)
        ax.set_xlim(0, max(vals) * 1.12)
        ax.set_ylim(-0.6, len(bars) - 0.4)
        ax.set_xlabel("reference time / TileOPs time (above 1: TileOPs faster)")
        ax.set_title("Per op and shape")
        handles = [plt.Rectangle((0, 0), 1, 1, color=BASELINE_STYLE[b][1])
                   for b in BASELINE_STYLE if any(r["baseline"] == b for r in bars)]
        ax.legend(handles, [b for b in BASELINE_STYLE if any(r["baseline"] == b for r in bars)],
                  loc="upper right", fontsize=8)
    if ranges:
        ax = axes[i]
        ops = []
        for r in ranges:
            if r["op"] not in ops:
                ops.append(r["op"])
        names = sorted({r["baseline"] for r in ranges})
        step = 0.8 / len(names)
        for j, b in enumerate(names):
            mine = {r["op"]: r for r in ranges if r["baseline"] == b}
            ys, lefts, widths = [], [], []
            for k, op in enumerate(ops):
                if op in mine:
                    ys.append(len(ops) - 1 - k + 0.4 - step * (j + 0.5))
                    lefts.append(mine[op]["speedup_lo"])
                    # A range of one value still shows as a sliver.
                    widths.append(max(mine[op]["speedup_hi"] - mine[op]["speedup_lo"],
                                      mine[op]["speedup_lo"] * 0.02))
            ax.barh(ys, widths, left=lefts, height=step * 0.9,
                    color=BASELINE_STYLE.get(b, ("x", "tab:gray"))[1], label="vs " + b)
        ax.set_yticks(range(len(ops))[::-1])
        ax.set_yticklabels(ops, fontsize=7)
        ax.set_xscale("log")
        ax.set_xlim(min(r["speedup_lo"] for r in ranges) * 0.9,
                    max(r["speedup_hi"] for r in ranges) * 1.2)
        ticks = [t for t in (1, 1.5, 2, 3, 5, 10, 20, 50) if ax.get_xlim()[0] <= t
                 <= ax.get_xlim()[1]]
        ax.set_xticks(ticks)
        ax.set_xticklabels(["%g" % t for t in ticks])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.axvline(1.0, color="black", lw=1)
        ax.set_ylim(-0.6, len(ops) - 0.4)
        ax.set_xlabel("reference time / TileOPs time, range over the op's workloads (log)")
        ax.set_title("Memory-bound ops at prefill size (32 MiB or more moved)")
        ax.grid(True, axis="x", which="both", alpha=0.25)
        ax.legend(loc="upper center", fontsize=8)
    dates = sorted({r.get("date") for r in rows if r.get("date")})
    fig.suptitle("TileOPs against the reference on the H200 (%s)" % ", ".join(dates))
    fig.tight_layout()
    fig.savefig(os.path.join(out, "ratio-vs-pytorch.png"), dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", nargs="*",
                    default=[os.path.join(ROOT, "docs", "perf", "h200-results.csv")])
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "perf"))
    ap.add_argument("--bandwidth", type=float, default=MEASURED_TBPS,
                    help="the measured bandwidth ceiling, TB/s (default %(default)s)")
    ap.add_argument("--peak", type=float, default=MEASURED_TFLOPS,
                    help="the measured bf16 ceiling, TFLOP/s (default %(default)s)")
    a = ap.parse_args()
    rows = load(a.csv)
    os.makedirs(a.out, exist_ok=True)
    roofline(rows, a.out, a.bandwidth, a.peak)
    ratio(rows, a.out)
    print("plot-bench.py: %d rows -> %s/roofline.png, %s/ratio-vs-pytorch.png" % (
        len(rows), a.out, a.out))


if __name__ == "__main__":
    main()
