#!/usr/bin/env python3
"""A Scrapy spider behind exitvoice's broker proxy, one task per group of pages.

    EXITVOICE_PROXY=127.0.0.1:8491 EXITVOICE_BROKER_TOKEN=... \\
        python3 examples/proxy/scrapy_spider.py [--tasks N] URL [URL...]

Self-contained: no Scrapy project, just `pip install scrapy`. Page i goes to task i mod N, set
per request in `meta["proxy"]`, whose user name is the lease request (`class-identity-task-…`;
another class with EXITVOICE_CLASS=anonymous or stateless) and password the broker token.
Scrapy's HttpProxyMiddleware turns them into the Proxy-Authorization of the CONNECT, and its
downloader pools tunnels per proxy credentials: each task's pages ride the task's one lease, so
they leave from one exit.

Writes one JSON line per page to stdout (task, url, status, bytes), through Scrapy's feed export.
Scrapy does not verify the origin's certificate by default."""
import argparse
import os
import sys
from urllib.parse import quote

import scrapy
from scrapy.crawler import CrawlerProcess


class Pages(scrapy.Spider):
    name = "pages"

    def __init__(self, urls, tasks, proxy, token, **kwargs):
        super().__init__(**kwargs)
        self.urls = urls
        self.tasks = tasks
        self.proxy = proxy
        self.token = quote(token, safe="")
        self.lease_class = os.environ.get("EXITVOICE_CLASS", "identity")

    def proxy_url(self, task):
        return f"http://class-{self.lease_class}-task-{task}:{self.token}@{self.proxy}"

    async def start(self):
        for i, url in enumerate(self.urls):
            # A task name keeps to letters, digits and `_`: a `-` would split the user name.
            task = f"scrapy_{i % self.tasks}"
            yield scrapy.Request(url, meta={"proxy": self.proxy_url(task), "task": task})

    def parse(self, response):
        yield {"task": response.meta["task"], "url": response.url, "status": response.status,
               "bytes": len(response.body)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1, help="tasks the pages are spread over")
    parser.add_argument("urls", nargs="+", metavar="URL")
    args = parser.parse_args()
    proxy = os.environ.get("EXITVOICE_PROXY")
    token = os.environ.get("EXITVOICE_BROKER_TOKEN")
    if not proxy or not token:
        sys.exit("set EXITVOICE_PROXY (host:port of the broker proxy) and EXITVOICE_BROKER_TOKEN")
    process = CrawlerProcess(settings={
        "FEEDS": {"stdout:": {"format": "jsonlines"}},
        "LOG_LEVEL": "WARNING",
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "DOWNLOAD_TIMEOUT": 30,
    })
    process.crawl(Pages, urls=args.urls, tasks=max(1, args.tasks), proxy=proxy, token=token)
    process.start()


if __name__ == "__main__":
    main()
