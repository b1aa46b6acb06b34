#!/usr/bin/env python3
"""Server CPU by part: reads `perf script` output of a run recorded with DWARF call graphs
(bench/profile.sh groups …) and puts each sample in the first group its stack belongs to, so each
sample counts once. Prints each group's samples and share, and per group the leaf functions that
take most (with --leaves).

Usage: perf script -i perf.data | bench/perf_groups.py [--leaves N]
"""

import collections
import re
import sys

# (group, test on the sample's thread name and its frames joined by newlines), first match wins.
GROUPS = [
    ("store: SQLite's thread", lambda comm, stack: comm.startswith("sqlx-sqlite")),
    ("store: the writer (queueing, batching, binding)", lambda comm, stack: "exitvoice_echo::writer::" in stack),
    ("the connection's analysis", lambda comm, stack: "analysis::" in stack or "tls::fingerprints" in stack),
    ("the h3 ledger", lambda comm, stack: "ledger::Ledger" in stack),
    ("the echo handler", lambda comm, stack: "api::echo" in stack),
    ("TLS handshake", lambda comm, stack: "MidHandshake" in stack or "tokio_rustls::server::Accept" in stack),
    ("reading the ClientHello", lambda comm, stack: "read_client_hello" in stack),
    ("the tap (peek, prefix)", lambda comm, stack: "Tap<S>::peek" in stack or "TapBuffer" in stack),
    ("hyper (HTTP/2, HTTP/1, socket writes)", lambda comm, stack: "hyper::" in stack or "h2::" in stack),
    ("the connection task, outside the above", lambda comm, stack: "serve_tls" in stack or "baseline_echo::main::{{closure}}::{{closure}}" in stack),
    ("accept, epoll, idle workers", lambda comm, stack: "accept" in stack or "epoll" in stack or "park" in stack),
]

FRAME = re.compile(r"^\s+[0-9a-f]+ (.*?)(\+0x[0-9a-f]+)? \(")


def samples(lines):
    comm, frames = None, []
    for line in lines:
        if not line.strip():
            if comm is not None:
                yield comm, frames
            comm, frames = None, []
        elif not line[0].isspace():
            comm = line.split(" ")[0]
        else:
            match = FRAME.match(line)
            if match:
                frames.append(match.group(1))
    if comm is not None:
        yield comm, frames


def main():
    leaves = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[1] == "--leaves" else 0
    counts = collections.Counter()
    leaf = collections.defaultdict(collections.Counter)
    for comm, frames in samples(sys.stdin):
        stack = "\n".join(frames)
        group = next((name for name, test in GROUPS if test(comm, stack)), "other (tokio, timers)")
        counts[group] += 1
        leaf[group][frames[0] if frames else "?"] += 1
    total = sum(counts.values()) or 1
    for group, n in counts.most_common():
        print(f"{n:7} {100 * n / total:5.1f} %  {group}")
    print(f"{total:7} samples")
    for group, _ in counts.most_common():
        if leaves:
            print(f"-- {group}")
            for name, n in leaf[group].most_common(leaves):
                print(f"   {n:6}  {name[:120]}")


if __name__ == "__main__":
    main()
