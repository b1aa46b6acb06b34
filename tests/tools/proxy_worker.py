#!/usr/bin/env python3
"""A worker of tests/broker_proxy_collisions.rs: plain `requests` with one Session kept for the
whole run, so every finished task leaves its tunnel open in the Session's pool, as real workers
do. Each task fetches --requests times, holding for --hold-ms after each fetch.

With --proxy (the broker's proxy addresses), each task's proxy user name is
`class-anonymous-task-<worker>_<n>` and the password the broker's token; a broker that cannot be
reached (killed) is left for the next. With --direct (a JSON file: a list of exit proxy URLs),
each task takes one at random: the control, the same client without a broker.

Prints one JSON line: tasks ok, unavailable (the broker had nothing free), failed."""
import argparse
import json
import random
import time

import requests


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proxy", action="append", default=[], help="host:port of a broker")
    parser.add_argument("--direct", help="a JSON file: a list of exit proxy URLs")
    parser.add_argument("--token", default="")
    parser.add_argument("--worker", required=True)
    parser.add_argument("--tasks", type=int, default=1)
    parser.add_argument("--requests", type=int, default=1)
    parser.add_argument("--hold-ms", type=int, default=0)
    parser.add_argument("--wait-ms", type=int, default=20000)
    parser.add_argument("--ca")
    parser.add_argument("url")
    args = parser.parse_args()
    direct = None
    if args.direct:
        with open(args.direct) as f:
            direct = json.load(f)
    done = {"ok": 0, "unavailable": 0, "failed": 0}
    last_error = None
    brokers = list(args.proxy)
    session = requests.Session()
    for n in range(args.tasks):
        task = f"{args.worker}_{n}"
        outcome = "failed"
        for _ in range(max(1, len(brokers))):
            if direct is not None:
                proxy = random.choice(direct)
            else:
                user = f"class-anonymous-task-{task}-wait-{args.wait_ms}"
                proxy = f"http://{user}:{args.token}@{brokers[0]}"
            session.proxies = {"http": proxy, "https": proxy}
            try:
                for _ in range(args.requests):
                    answer = session.get(args.url, verify=args.ca or True, timeout=30)
                    answer.raise_for_status()
                    time.sleep(args.hold_ms / 1000)
                outcome = "ok"
                break
            except requests.exceptions.ProxyError as error:
                if "503" in str(error):
                    outcome = "unavailable"
                    break
                # The broker went away (killed): the next one.
                last_error = str(error)
                brokers.append(brokers.pop(0))
            except requests.RequestException as error:
                last_error = str(error)
                brokers.append(brokers.pop(0))
        done[outcome] += 1
    if last_error is not None:
        done["last_error"] = last_error[:300]
    print(json.dumps(done))


if __name__ == "__main__":
    main()
