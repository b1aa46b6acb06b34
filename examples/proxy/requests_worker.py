#!/usr/bin/env python3
"""A worker in plain `requests` behind exitvoice's broker proxy: a proxy URL is all it needs.

    EXITVOICE_PROXY=127.0.0.1:8491 EXITVOICE_BROKER_TOKEN=... \\
        python3 examples/proxy/requests_worker.py [--tasks N] URL [URL...]

Each task gets a Session whose proxy URL names the task (`class-identity-task-<task>`; another
class with EXITVOICE_CLASS=anonymous or stateless), so every request of the task leaves from one
exit. The worker makes no lease API call: the broker leases an exit at the task's first
connection, keeps it while the task's tunnels are open, and ends it --task-idle after the last
one closes.

What the broker cannot see inside TLS (the origin's 403 or 429) is the worker's to report: with
EXITVOICE_BROKER (the broker's API, e.g. http://127.0.0.1:8490) set, such an answer is reported as
the task's outcome (`POST /v1/tasks/{task}/outcome`), which ends the task's lease and keeps that
exit off the origin for a while; the task stops there. Without it, nothing is reported.

Prints one JSON line per fetch (task, url, status, bytes) and per report (task, reported, broker).
`requests` honours REQUESTS_CA_BUNDLE for a private CA."""
import argparse
import json
import os
import sys
from urllib.parse import quote

import requests

# Origin answers that say "this exit is refused here": reported as the task's outcome.
BLOCKED = {403, 429}


def proxy_url(task, token, proxy):
    """The proxy URL of one task: the user name is the lease request, the password the token."""
    lease_class = os.environ.get("EXITVOICE_CLASS", "identity")
    return f"http://class-{lease_class}-task-{task}:{quote(token, safe='')}@{proxy}"


def report(broker, token, task, outcome):
    """Ends the task's lease with `outcome`: the broker's answer code (404: no lease held)."""
    answer = requests.post(
        f"{broker.rstrip('/')}/v1/tasks/{task}/outcome",
        json={"outcome": outcome},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    return answer.status_code


def run_task(task, urls, proxy, token, broker):
    # One Session per task: its pooled tunnels all carry this task's name, so they all ride the
    # task's one lease. Closing it at the task's end closes them.
    url_of_task = proxy_url(task, token, proxy)
    # Given with each request: an HTTPS_PROXY in the environment would override Session.proxies.
    proxies = {"http": url_of_task, "https": url_of_task}
    with requests.Session() as session:
        for url in urls:
            answer = session.get(url, proxies=proxies, timeout=30)
            print(json.dumps({"task": task, "url": url, "status": answer.status_code,
                              "bytes": len(answer.content)}), flush=True)
            if answer.status_code in BLOCKED:
                if broker:
                    code = report(broker, token, task, str(answer.status_code))
                    print(json.dumps({"task": task, "reported": str(answer.status_code),
                                      "broker": code}), flush=True)
                return


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1, help="tasks to run, one after another")
    parser.add_argument("--worker", default=f"w{os.getpid()}", help="prefix of the task names")
    parser.add_argument("urls", nargs="+", metavar="URL", help="what each task fetches, in order")
    args = parser.parse_args()
    proxy = os.environ.get("EXITVOICE_PROXY")
    token = os.environ.get("EXITVOICE_BROKER_TOKEN")
    if not proxy or not token:
        sys.exit("set EXITVOICE_PROXY (host:port of the broker proxy) and EXITVOICE_BROKER_TOKEN")
    broker = os.environ.get("EXITVOICE_BROKER")
    for n in range(args.tasks):
        # A task name keeps to letters, digits and `_`: a `-` would split the user name.
        run_task(f"{args.worker}_{n}", args.urls, proxy, token, broker)


if __name__ == "__main__":
    main()
