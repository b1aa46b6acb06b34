#!/usr/bin/env python3
"""A Scrapy crawl through the broker's proxy, for tests/broker_proxy_collisions.rs. Scrapy's
downloader pools CONNECT tunnels keyed on the proxy and its Proxy-Authorization, so each task's
tunnel stays open in the pool after the crawl has moved on to the next task: the connection
pooling that would hold an exit beside its next holder if the broker did not close it.

Each of --tasks tasks fetches the URL --requests times, one request at a time, with the proxy
user name `class-anonymous-task-<crawl>_<n>`; the proxies given are used in turn, task by task.
Prints one JSON line: responses ok and requests failed."""
import argparse
import json

import scrapy
from scrapy.crawler import CrawlerProcess


class Tasks(scrapy.Spider):
    name = "tasks"

    def __init__(self, args, done, **kwargs):
        super().__init__(**kwargs)
        self.args = args
        self.done = done

    def proxy(self, n):
        address = self.args.proxy[n % len(self.args.proxy)]
        user = f"class-anonymous-task-{self.args.crawl}_{n}-wait-{self.args.wait_ms}"
        return f"http://{user}:{self.args.token}@{address}"

    async def start(self):
        for n in range(self.args.tasks):
            for i in range(self.args.requests):
                yield scrapy.Request(
                    f"{self.args.url}?task={n}&request={i}",
                    meta={"proxy": self.proxy(n)},
                    dont_filter=True,
                    callback=self.parsed,
                    errback=self.failed,
                )

    def parsed(self, response):
        self.done["ok" if response.status == 200 else "failed"] += 1

    def failed(self, failure):
        self.done["failed"] += 1
        self.done["last_error"] = repr(failure.value)[:300]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proxy", action="append", required=True, help="host:port of a broker")
    parser.add_argument("--token", required=True)
    parser.add_argument("--crawl", required=True)
    parser.add_argument("--tasks", type=int, default=1)
    parser.add_argument("--requests", type=int, default=1)
    parser.add_argument("--wait-ms", type=int, default=20000)
    parser.add_argument("url")
    args = parser.parse_args()
    done = {"ok": 0, "failed": 0}
    process = CrawlerProcess(
        settings={
            "LOG_LEVEL": "ERROR",
            "CONCURRENT_REQUESTS": 1,
            "RETRY_ENABLED": False,
            "ROBOTSTXT_OBEY": False,
            "TELNETCONSOLE_ENABLED": False,
            "DOWNLOAD_TIMEOUT": 30,
        }
    )
    process.crawl(Tasks, args=args, done=done)
    process.start()
    print(json.dumps(done))


if __name__ == "__main__":
    main()
