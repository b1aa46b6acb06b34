#!/usr/bin/env python3
"""A worker of the exitvoice broker, in plain `requests`: lease an exit, fetch through it, and
release the lease with what happened (`ok`, the HTTP status, `timeout` or `error`), so the broker
can ban what the origin refused. Any broker instance serves any lease: when one is down, the
next is asked.

    EXITVOICE_BROKER_TOKEN=… worker.py --broker http://127.0.0.1:8490 --class identity \\
        --holder "$(hostname)-$$" https://example.org/
"""
import argparse
import json
import os
import random
import time

import requests


def broker(brokers, method, path, **kwargs):
    """One API call, to the first instance that answers."""
    token = os.environ.get("EXITVOICE_BROKER_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    # An https:// broker's certificate: its own when self-signed (`exitvoice broker --tls`).
    verify = os.environ.get("EXITVOICE_BROKER_CA", True)
    error = None
    for base in brokers:
        try:
            return requests.request(method, base + path, headers=headers, verify=verify,
                                    timeout=30, **kwargs)
        except requests.ConnectionError as e:
            error = e
    raise error


def work(proxy_url, args):
    """The work on the leased exit: its outcome as the broker takes it. Every socket through the
    exit is closed on return. (Keep no `Response` past its session: a live one keeps its tunnel
    open after `Session.close()`, and the exit would see two holders once the lease is gone.)"""
    with requests.Session() as session:
        session.proxies = {"http": proxy_url, "https": proxy_url}
        try:
            status = session.get(args.url, verify=args.ca or True, timeout=10).status_code
            time.sleep(args.hold_ms / 1000)  # the rest of the work, on the same tunnel
        except requests.Timeout:
            return "timeout"
        except requests.RequestException:
            return "error"
    return "ok" if status == 200 else str(status)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--broker", action="append", required=True, help="a broker instance's URL (repeat for more)")
    parser.add_argument("--class", dest="lease_class", default="identity", choices=["identity", "anonymous", "stateless"])
    parser.add_argument("--holder", required=True, help="this worker's name")
    parser.add_argument("--origin", help="the site it works on (bans are per exit and origin)")
    parser.add_argument("--cycles", type=int, default=1, help="leases to take, one after another")
    parser.add_argument("--seconds", type=float, default=0, help="take no new lease after this long (0: no limit)")
    parser.add_argument("--hold-ms", type=int, default=0, help="time spent working with the tunnel open")
    parser.add_argument("--wait-ms", type=int, default=10000, help="how long the broker may queue a lease request")
    parser.add_argument("--ca", help="CA bundle that signs the URL's certificate")
    parser.add_argument("url")
    args = parser.parse_args()

    done = {"ok": 0, "failed": 0, "unavailable": 0, "exits": [], "fences": []}
    stop = time.monotonic() + args.seconds if args.seconds else None
    for _ in range(args.cycles):
        if stop and time.monotonic() > stop:
            break
        answer = broker(args.broker, "POST", "/v1/leases", json={
            "class": args.lease_class, "holder": args.holder, "origin": args.origin,
            "wait_ms": args.wait_ms,
        })
        if answer.status_code == 503:
            done["unavailable"] += 1
            time.sleep(answer.json()["retry_after_ms"] / 1000 * random.random())
            continue
        answer.raise_for_status()
        lease = answer.json()
        started = time.monotonic()
        outcome = work(lease["proxy_url"], args)
        latency_ms = int((time.monotonic() - started) * 1000)
        # The tunnel is closed; give the exit a moment to see it before the next holder comes.
        time.sleep(0.05)
        broker(args.broker, "DELETE", f"/v1/leases/{lease['lease_id']}", params={
            "fence": lease["fence"], "outcome": outcome, "latency_ms": latency_ms,
        })
        done["ok" if outcome == "ok" else "failed"] += 1
        done["exits"].append(lease["exit"])
        done["fences"].append(lease["fence"])
    print(json.dumps(done))


if __name__ == "__main__":
    main()
