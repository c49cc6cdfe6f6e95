#!/usr/bin/env python3
"""Compare tileops-bench with torch_baseline.py, workload by workload.

    python3 compare.py tileops.json torch.json [--md FILE] [--csv FILE]

Prints a markdown table: our median time and TB/s and % of the copy
ceiling, PyTorch eager's and torch.compile's times, and the speedups
(theirs / ours: above 1 means TileOPs is faster); for decode-size
workloads the back-to-back (CUDA graph) per-call times as well, ours next
to the empty kernel's. A last section lists the targets of docs/perf.md:
prefill workloads (32 MiB or more moved) under 90% of the copy ceiling or
slower than either PyTorch path, and decode ones over 1.5x the empty kernel.
"""
import argparse
import csv
import json

MIB = 1024.0 * 1024.0
# Decode-size workloads (one row, e.g. rms_norm of 1 x 4096) move less than this.
DECODE_BYTES = 1 * MIB
# PyTorch counts as faster only by more than this factor: two runs of the
# same kernel on the same workload back to back differed by 0.1 to 0.4%
# at 10 us and more on the H200 (tileops-bench --op abs and --op rms_norm
# twice in one session, 2026-11-30).
TIE = 1.01


def key(r):
    return (r["op"], r["label"], r["dtype"])


def fmt(v, f="%.2f"):
    return "-" if v is None else f % v


# The columns of docs/perf/h200-results.csv, which scripts/plot-bench.py reads.
CSV_COLUMNS = ["section", "op", "workload", "shape", "dtype", "flops", "bytes", "tileops_us",
               "baseline", "baseline_us", "speedup_lo", "speedup_hi", "commit", "date", "note"]


def write_csv(path, ours, tmap, commit, date):
    """One row per workload and PyTorch path, in plot-bench.py's columns."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS, lineterminator="\n")
        w.writeheader()
        for r in ours["results"]:
            if not r.get("ok") or r.get("median_us") is None:
                continue
            t = tmap.get(key(r), {})
            shape = ", ".join("x".join(str(d) for d in i.get("shape", []))
                              for i in r.get("inputs", []))
            for name, side in (("PyTorch eager", "eager"), ("torch.compile", "compile")):
                theirs = t.get(side, {}).get("median_us")
                w.writerow({"section": "compare.py", "op": r["op"], "workload": r["label"],
                            "shape": shape, "dtype": r["dtype"], "flops": "%.0f" % r["flops"],
                            "bytes": "%.0f" % r["bytes"], "tileops_us": r["median_us"],
                            "baseline": name, "baseline_us": "" if theirs is None else theirs,
                            "commit": commit, "date": date})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ours")
    ap.add_argument("theirs")
    ap.add_argument("--md", help="also write the table to this file")
    ap.add_argument("--csv", help="also write the times, bytes and flops as CSV for "
                    "scripts/plot-bench.py")
    ap.add_argument("--commit", default="", help="the commit of the binaries, for --csv")
    ap.add_argument("--date", default="", help="the date of the run, for --csv")
    a = ap.parse_args()
    ours = json.load(open(a.ours))
    theirs = json.load(open(a.theirs))
    tmap = {key(r): r for r in theirs["results"]}
    copy = ours["copy_tbps"]
    empty = ours["empty_graph_us"]
    empty_pdl = ours.get("empty_graph_pdl_us")
    lines = ["Copy ceiling %.3f TB/s; empty kernel back to back %.2f us (%s us launched with "
             "PDL); %s; torch %s." % (copy, empty, fmt(empty_pdl), ours["device"],
                                      theirs.get("torch", "?")), "",
        "| op | workload | dtype | ours us | TB/s | % copy | eager us | compile us | "
        "eager/ours | compile/ours | graph us ours | ours without PDL | graph us eager |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    misses = []
    for r in ours["results"]:
        t = tmap.get(key(r), {})
        e, c = t.get("eager", {}), t.get("compile", {})
        us = r.get("median_us")
        eu, cu = e.get("median_us"), c.get("median_us")
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["op"], r["label"], r["dtype"], fmt(us), fmt(r.get("tbps"), "%.3f"),
            fmt(r.get("pct_copy"), "%.1f"), fmt(eu),
            fmt(cu) if cu is not None else (c.get("error", "-")[:30]),
            fmt(eu / us if us and eu else None), fmt(cu / us if us and cu else None),
            fmt(r.get("graph_us")), fmt(r.get("graph_nopdl_us")), fmt(e.get("graph_us"))))
        if not r.get("ok"):
            misses.append("%s %s %s: error %s" % (key(r) + (r.get("error"),)))
            continue
        moved = r["bytes"]
        if moved >= 32 * MIB:
            why = []
            if r["pct_copy"] < 90.0:
                why.append("%.1f%% of copy" % r["pct_copy"])
            if eu and eu * TIE < us:
                why.append("eager faster (%.2f us)" % eu)
            if cu and cu * TIE < us:
                why.append("compile faster (%.2f us)" % cu)
            if why:
                misses.append("%s %s %s: %s" % (key(r) + ("; ".join(why),)))
        elif moved < DECODE_BYTES and r.get("graph_us") is not None and r["graph_us"] > 1.5 * empty:
            misses.append("%s %s %s: %.2f us back to back, over 1.5x the empty kernel" % (
                key(r) + (r["graph_us"],)))
    lines += ["", "Targets missed (%d):" % len(misses), ""] + ["- " + m for m in misses]
    text = "\n".join(lines)
    print(text)
    if a.md:
        with open(a.md, "w") as f:
            f.write(text + "\n")
    if a.csv:
        write_csv(a.csv, ours, tmap, a.commit, a.date)


if __name__ == "__main__":
    main()
