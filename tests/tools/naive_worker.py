#!/usr/bin/env python3
"""The control of tests/broker_collisions.rs: what a team does without a broker. Each cycle takes
a proxy URL at random from a JSON list (an exit, or a gateway session chosen from a few fixed
ids) and fetches through it with the tunnel held open for --hold-ms, as the broker's example
worker does."""
import argparse
import json
import random
import time

import requests


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proxies", required=True, help="a JSON file: a list of proxy URLs")
    parser.add_argument("--cycles", type=int, default=1)
    parser.add_argument("--hold-ms", type=int, default=0)
    parser.add_argument("--ca")
    parser.add_argument("url")
    args = parser.parse_args()
    with open(args.proxies) as f:
        proxies = json.load(f)
    done = {"ok": 0, "failed": 0}
    for _ in range(args.cycles):
        proxy = random.choice(proxies)
        with requests.Session() as session:
            session.proxies = {"http": proxy, "https": proxy}
            try:
                session.get(args.url, verify=args.ca or True, timeout=10)
                time.sleep(args.hold_ms / 1000)
                done["ok"] += 1
            except requests.RequestException:
                done["failed"] += 1
        time.sleep(0.05)
    print(json.dumps(done))


if __name__ == "__main__":
    main()
