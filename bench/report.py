#!/usr/bin/env python3
"""The markdown report of one scripts/bench.sh run: `bench/report.py OUTDIR` (standard library only).

Reads OUTDIR/meta.tsv, records.tsv (one line per round, test and target), drops/result.tsv,
drops/healthz.json and store/result.tsv, and prints the tables.
"""
import csv
import json
import statistics
import sys
from pathlib import Path

TESTS = {
    "a": ("(a) new TLS connection per request, h2", "conn"),
    "b": ("(b) h2 keep-alive, 10 connections × 10 streams", "req"),
    "c": ("(c) HTTP/1.1 keep-alive, 10 connections", "req"),
}
BASELINE = "baseline"


def read_pairs(path):
    """A two-column TSV file as a dict (empty if the file is missing)."""
    if not path.exists():
        return {}
    return dict(line.split("\t", 1) for line in path.read_text().splitlines() if "\t" in line)


def spread(values):
    """The median of a list and its text: `median (min–max)`, or the single value."""
    if not values:
        return 0, "–"
    mid = statistics.median(values)
    if len(values) == 1 or min(values) == max(values):
        return mid, f"{mid:,.1f}"
    return mid, f"{mid:,.1f} ({min(values):,.1f}–{max(values):,.1f})"


def server(target):
    """A side-by-side target as the tables name it: the server (`exitvoice`, or `compare` for the
    build given to --compare), then the path it was loaded on; or `floor-echo` and its part."""
    label, _, rest = target.partition("/")
    if label == "floor":
        return f"floor-echo `--upto {rest}`"
    return f"{label} `/{rest}`"


def ratio(value, base):
    return f"{value / base:.2f}×" if base else "–"


def side_by_side(out, meta):
    path = out / "records.tsv"
    if not path.exists():
        return []
    clk = int(meta["clk_tck"])
    rows = {}
    with path.open() as f:
        for rec in csv.DictReader(f, delimiter="\t"):
            rows.setdefault((rec["test"], rec["target"]), []).append(rec)
    lines = [
        "| test | server | CPU µs per conn/req | × baseline | req/s | × baseline "
        "| peak RSS MiB | × baseline | DB bytes/req | failed | load avg |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for test, (title, unit) in TESTS.items():
        targets = [t for (x, t) in rows if x == test]
        if not targets:
            continue
        figures = {}
        for target in targets:
            recs = rows[(test, target)]
            cpu = [int(r["cpu_ticks"]) / clk * 1e6 / int(r["ok"]) for r in recs if int(r["ok"])]
            rate = [int(r["ok"]) / float(r["seconds"]) for r in recs if float(r["seconds"])]
            ok = sum(int(r["ok"]) for r in recs)
            hwm = max(int(r["hwm_kib"]) for r in recs) / 1024
            figures[target] = {
                "cpu": spread(cpu),
                "rate": spread(rate),
                "hwm": (hwm, f"{hwm:.1f}"),
                "db": sum(int(r["db_bytes"]) for r in recs) / ok if ok else 0,
                "failed": sum(int(r["failed"]) for r in recs),
                "load": spread([float(r["load1"]) for r in recs if r.get("load1")])[1],
            }
        base = figures.get(BASELINE)
        for target in targets:  # as measured: the baseline first
            fig = figures[target]
            if target == BASELINE:
                cells = [title, BASELINE]
            else:
                cells = ["", server(target)]
            for key, suffix in (("cpu", f" /{unit}"), ("rate", ""), ("hwm", "")):
                value, text = fig[key]
                cells.append(text + suffix)
                cells.append(ratio(value, base[key][0] if base else 0))
            cells.append("–" if target == BASELINE else f"{fig['db']:,.0f}")
            cells.append(f"{fig['failed']:,}")
            cells.append(fig["load"])
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def per_round(out, meta):
    """Each round's CPU ratio to the baseline's in the same round, per test and target: on a
    host whose CPU time drifts between rounds, their median is steadier than the medians' ratio."""
    path = out / "records.tsv"
    if not path.exists() or int(meta.get("rounds", 1)) < 2:
        return []
    cpu = {}
    with path.open() as f:
        for rec in csv.DictReader(f, delimiter="\t"):
            if int(rec["ok"]):
                cpu[(rec["round"], rec["test"], rec["target"])] = int(rec["cpu_ticks"]) / int(rec["ok"])
    lines = ["Each round's CPU ratio to the baseline's in that round (median first):", ""]
    for test, (title, _) in TESTS.items():
        targets = list(dict.fromkeys(t for (_, x, t) in cpu if x == test and t != BASELINE))
        for target in targets:
            ratios = [
                value / cpu[(r, test, BASELINE)]
                for (r, x, t), value in sorted(cpu.items(), key=lambda item: int(item[0][0]))
                if x == test and t == target and cpu.get((r, test, BASELINE))
            ]
            if ratios:
                each = ", ".join(f"{value:.2f}" for value in ratios)
                lines.append(
                    f"- {title[:3]} {server(target)}: "
                    f"**{statistics.median(ratios):.2f}×** ({each})"
                )
    return lines + [""]


def walk_drops(value, prefix=""):
    """Every numeric /healthz field whose name speaks of drops, as `path = value`."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from walk_drops(inner, f"{prefix}{key}.")
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and "drop" in prefix:
        yield f"`{prefix.rstrip('.')}` = {value:,}"


def drops(out, meta):
    res = read_pairs(out / "drops" / "result.tsv")
    if not res:
        return []
    answered, rows, size = int(res["answered"]), int(res["rows"]), int(res["db_bytes"])
    health_file = out / "drops" / "healthz.json"
    try:
        health = json.loads(health_file.read_text())
    except (OSError, ValueError):
        health = {}
    counted = "; ".join(walk_drops(health)) or "(no /healthz)"
    # What the server answered: h2load stops counting at the deadline with up to 40 requests in
    # flight, which the server still answers and stores. /healthz counts itself too.
    served = health.get("requests", answered)
    missing = max(served - rows, 0)
    secs = float(res["seconds"]) or 1
    return [
        f"Drops: exitvoice with default flags, one client at full keep-alive speed for "
        f"{meta['drops_seconds']} s (`h2load -D {meta['drops_seconds']} -c 4 -m 10 …/api/clean`):",
        "",
        "| answered (h2load) | req/s | answered (/healthz `requests`) | rows stored | not stored "
        "| /healthz drop counters | DB bytes (file + WAL) | DB bytes/req | peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {answered:,} | {answered / secs:,.0f} | {served:,} | {rows:,} (`{res['rows_table']}`) "
        f"| {missing:,} ({missing / served * 100 if served else 0:.1f} %) | {counted} "
        f"| {size:,} | {size / served if served else 0:,.0f} | {int(res['hwm_kib']) / 1024:.1f} |",
    ]


def store(out):
    res = read_pairs(out / "store" / "result.tsv")
    if not res:
        return []
    rows = int(res["request_rows"])
    return [
        "",
        f"Store: {rows:,} request rows ({int(res['connection_rows']):,} connections, 100 requests "
        f"each) through `Store::write_batch` in {int(res['batches']):,} batches of up to "
        f"{res['batch_size']} rows (`bench/store`):",
        "",
        "| request rows/s | seconds | DB bytes added (pages, WAL included) | DB bytes per request row |",
        "|---|---|---|---|",
        f"| {float(res['rows_per_s']):,.0f} | {res['seconds']} | {int(res['db_bytes']):,} "
        f"| {int(res['db_bytes']) / rows:,.0f} |",
    ]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = Path(sys.argv[1])
    meta = read_pairs(out / "meta.tsv")
    lines = [
        f"Measured {meta['date']} at {meta['commit']} ({meta['profile']} build): {meta['cpu']}, "
        f"{meta['nproc']} CPUs, kernel {meta['kernel']}, {meta['h2load']}; servers on CPU "
        f"{meta['server_cpu']}, h2load on CPU {meta['client_cpu']}; load average before "
        f"{meta['load_before']}, after {meta.get('load_after', '?')}.",
        "",
    ]
    table = side_by_side(out, meta)
    if table:
        lines += [
            f"Side by side, {meta['rounds']} round(s), one process per target, the load "
            f"alternating between them slice by slice: (a) {meta['batches']} × `h2load -n "
            f"{meta['batch_size']} -c {meta['batch_size']} -m 1` per target, (b) `h2load -D "
            f"{meta.get('slice_seconds', meta['seconds'])} -c 10 -m 10` and (c) `h2load --h1 -D "
            f"{meta.get('slice_seconds', meta['seconds'])} -c 10`, {meta['seconds']} s per target. CPU is "
            "the server's utime+stime per answered request (median of rounds, min–max), writer "
            f"included; DB bytes are the pages the test added to the database (rows in "
            f"`{meta.get('rows_table', '?')}`), per request."
            + (f" `compare` is {meta['compare']}." if "compare" in meta else "")
            + (
                " `floor-echo` (bench/floor) is the baseline plus the least of the issue's work "
                "with exitvoice's own analysis and store, up to the part named."
                if "floor" in meta
                else ""
            ),
            "",
            *table,
            "",
            *per_round(out, meta),
        ]
    lines += drops(out, meta)
    lines += store(out)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
