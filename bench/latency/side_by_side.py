"""Helpers of bench/latency/side-by-side.sh (run with the test venv's Python: aiohttp, httpx, h2).

  relay TARGET_PORT DELAY_MS      a delaying TCP relay on 127.0.0.1: prints its port, then relays
                                  each chunk to 127.0.0.1:TARGET_PORT DELAY_MS ms after it
                                  arrived, each way, in order (a long wire of unbounded bandwidth)
  chromium [--busy-ms N] PROFILE ECHO_URL PINGLY_URL [PROXY]
                                  one headless Chromium (driven over the DevTools protocol):
                                  loads ECHO_URL (the echo's /api/all) and prints its JSON, then
                                  loads PINGLY_URL (none when "-"), runs pingly's own latency
                                  probe (the page's "Measure latency" button) and prints the
                                  page's result. --busy-ms: pingly's page runs script N ms at a
                                  time, back to back, and the echo is loaded in a second tab
                                  meanwhile
  httpx URL [PROXY]               GET URL with httpx over HTTP/2; prints the JSON answer
  record RESULTS.jsonl PATH DELAY CLIENT RAW
                                  appends RAW (a client's output) to RESULTS.jsonl as one record
                                  per client (CLIENT chromium: the echo's and pingly's)
  table RESULTS.jsonl             the markdown table of the script's results

Each of `chromium` and `httpx` prints one JSON object; failures are in its "error" field.
"""

import asyncio
import json
import os
import socket
import subprocess
import sys
import time

# --- relay -------------------------------------------------------------------------------------


async def _pipe(reader, writer, delay):
    """Copies reader to writer, each chunk written `delay` s after it was read."""
    queue = asyncio.Queue()

    async def read():
        while True:
            chunk = await reader.read(65536)
            queue.put_nowait((time.monotonic(), chunk))
            if not chunk:
                return

    async def write():
        while True:
            arrived, chunk = await queue.get()
            wait = arrived + delay - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if not chunk:
                if writer.can_write_eof():
                    writer.write_eof()
                return
            writer.write(chunk)
            await writer.drain()

    try:
        await asyncio.gather(read(), write())
    except (ConnectionError, OSError):
        writer.close()


async def _relay(target, delay_ms):
    delay = delay_ms / 1000

    async def serve(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            client_writer.close()
            return
        for writer in (client_writer, server_writer):
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.gather(
            _pipe(client_reader, server_writer, delay),
            _pipe(server_reader, client_writer, delay),
        )
        client_writer.close()
        server_writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


# --- chromium ----------------------------------------------------------------------------------

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # Both servers have self-signed certificates.
    "--ignore-certificate-errors",
    # Chromium sends nothing for a loopback host through a proxy unless told to.
    "--proxy-bypass-list=<-loopback>",
    "--remote-debugging-port=0",
]

# Runs pingly's probe as its button does, once the page shows its analysis (loading it resets a
# probe under way, as the button is not there before), and waits for the page's own result or
# error. A probe whose socket closed early stays "running" on the page: the deadline ends it.
PINGLY_PROBE = """
new Promise((resolve) => {
  const deadline = Date.now() + 30000;
  const start = () => {
    if (state.data) { runProxyProbe(); return poll(); }
    if (Date.now() > deadline) return resolve(JSON.stringify({error: "page analysis not loaded"}));
    setTimeout(start, 100);
  };
  const poll = () => {
    if (state.proxyAnalysis) return resolve(JSON.stringify({analysis: state.proxyAnalysis}));
    if (state.proxyError) return resolve(JSON.stringify({error: state.proxyError}));
    if (Date.now() > deadline) return resolve(JSON.stringify({error: "no result in 30 s"}));
    setTimeout(poll, 100);
  };
  start();
})
"""


# Keeps the page's main thread busy BUSY_MS at a time, back to back (a page running heavy script).
PINGLY_BUSY = """
new Promise((resolve) => {
  const wait = () => {
    if (!state.data) return setTimeout(wait, 100);
    setInterval(() => { const t = performance.now(); while (performance.now() - t < %d) {} }, 0);
    resolve(1);
  };
  wait();
})
"""


class _Cdp:
    """A DevTools protocol session on one page target."""

    def __init__(self, ws):
        self.ws = ws
        self.next_id = 0

    async def call(self, method, **params):
        self.next_id += 1
        await self.ws.send_json({"id": self.next_id, "method": method, "params": params})
        while True:
            message = await self.ws.receive_json()
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    async def evaluate(self, expression):
        result = await self.call(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(json.dumps(result["exceptionDetails"])[:500])
        return result["result"].get("value")

    async def load(self, url):
        await self.call("Page.navigate", url=url)
        for _ in range(300):
            if await self.evaluate("document.readyState") == "complete":
                return
            await asyncio.sleep(0.1)
        raise RuntimeError(f"{url}: not loaded in 30 s")


async def _echo(cdp, url):
    """Loads the echo's /api/all in `cdp`'s page: its JSON (Chromium shows it as a <pre>)."""
    try:
        await cdp.load(url)
        return json.loads(await cdp.evaluate("document.body ? document.body.innerText : ''"))
    except (RuntimeError, ValueError) as error:
        return {"error": str(error)[:500]}


async def _pingly(cdp, url, busy_ms, then=None):
    """Loads pingly's page in `cdp`'s page and runs its probe: the page's result. With
    `busy_ms`, the page's script keeps its main thread busy that long at a time, back to back,
    from when it shows its analysis; `then` (a coroutine) runs before the probe starts."""
    try:
        await cdp.load(url)
        if busy_ms:
            await cdp.evaluate(PINGLY_BUSY % busy_ms)
        if then is not None:
            await then
        return json.loads(await cdp.evaluate(PINGLY_PROBE))
    except (RuntimeError, ValueError) as error:
        return {"error": str(error)[:500]}


async def _chromium(profile, echo_url, pingly_url, proxy, busy_ms):
    import aiohttp

    os.makedirs(profile, exist_ok=True)
    flags = CHROMIUM_FLAGS + [f"--user-data-dir={profile}"]
    flags.append(f"--proxy-server={proxy}" if proxy else "--no-proxy-server")
    if busy_ms:
        # The busy page is behind the echo's tab: its timers must not be throttled for that.
        flags += [
            "--disable-background-timer-throttling",
            "--disable-renderer-backgrounding",
            "--disable-backgrounding-occluded-windows",
        ]
    log = open(os.path.join(profile, "chromium.log"), "wb")
    browser = subprocess.Popen(
        ["/usr/bin/chromium", *flags, "about:blank"], stdout=log, stderr=log
    )
    out = {"echo": None, "pingly": {"error": "not run"}}
    try:
        port_file = os.path.join(profile, "DevToolsActivePort")
        for _ in range(300):
            if os.path.exists(port_file) and open(port_file).read().count("\n") >= 1:
                break
            await asyncio.sleep(0.1)
        port = open(port_file).read().split("\n")[0].strip()
        devtools = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as session:

            async def page_socket(target_id=None):
                async with session.get(f"{devtools}/json/list") as answer:
                    targets = await answer.json(content_type=None)
                page = next(
                    t
                    for t in targets
                    if t.get("type") == "page" and target_id in (None, t.get("id"))
                )
                return session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)

            async with await page_socket() as ws:
                cdp = _Cdp(ws)
                if not busy_ms:
                    out["echo"] = await _echo(cdp, echo_url)
                    if pingly_url != "-":
                        out["pingly"] = await _pingly(cdp, pingly_url, 0)
                else:
                    # The echo in a second tab while pingly's page is busy: the same browser
                    # under the same load answers both.
                    created = await cdp.call(
                        "Target.createTarget", url="about:blank", background=True
                    )

                    async def echo_in_second_tab():
                        async with await page_socket(created["targetId"]) as second:
                            out["echo"] = await _echo(_Cdp(second), echo_url)

                    if pingly_url != "-":
                        out["pingly"] = await _pingly(
                            cdp, pingly_url, busy_ms, echo_in_second_tab()
                        )
                    else:
                        await echo_in_second_tab()
    finally:
        browser.terminate()
        try:
            browser.wait(10)
        except subprocess.TimeoutExpired:
            browser.kill()
            browser.wait()
        log.close()
    print(json.dumps(out))


# --- httpx -------------------------------------------------------------------------------------


def _httpx(url, proxy):
    import httpx

    try:
        with httpx.Client(http2=True, verify=False, proxy=proxy or None, timeout=20) as client:
            answer = client.get(url)
            print(json.dumps(answer.json()))
    except Exception as error:  # noqa: BLE001 - every failure is the cell's text
        print(json.dumps({"error": f"{type(error).__name__}: {error}"[:500]}))


# --- table -------------------------------------------------------------------------------------


def _counted(labels, gaps_ms):
    """"likely ×3, 20.7–21.0 ms": each label with its count, and the range of the gaps."""
    counts = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    if not counts:
        return "–"
    text = ", ".join(f"{label} ×{n}" for label, n in counts.items())
    if gaps_ms:
        low, high = f"{min(gaps_ms):.1f}", f"{max(gaps_ms):.1f}"
        text += f"; {low} ms" if low == high else f"; {low}–{high} ms"
    return text


def _failure(run):
    return run.get("error", "no answer") if isinstance(run, dict) else "no answer"


def _echo_cell(runs):
    """The echo's verdicts of the runs, and the range of their gaps."""
    labels, gaps = [], []
    for run in runs:
        latency = run.get("latency") if isinstance(run, dict) else None
        if not latency:
            labels.append("error")
            sys.stderr.write(f"echo run failed: {_failure(run)}\n")
            continue
        labels.append(latency.get("verdict", "?"))
        if latency.get("gap_us") is not None:
            gaps.append(latency["gap_us"] / 1000)
    return _counted(labels, gaps)


def _pingly_cell(runs):
    """pingly's classification (confidence) of the runs, and the range of its gaps."""
    labels, gaps = [], []
    for run in runs:
        analysis = run.get("analysis") if isinstance(run, dict) else None
        if not analysis:
            error = _failure(run)
            labels.append("not run" if error == "not run" else f"error ({error})")
            continue
        labels.append(f"{analysis['classification']} ({analysis['confidence']})")
        if analysis["measurements"].get("rtt_gap_ms") is not None:
            gaps.append(analysis["measurements"]["rtt_gap_ms"])
    return _counted(labels, gaps)


def _record(results, path, delay, client, raw):
    try:
        with open(raw) as text:
            result = json.load(text)
    except (OSError, ValueError) as error:
        result = {"error": f"{raw}: {error}"[:500]}
    delay = None if delay == "-" else int(delay)
    if client == "chromium":
        pairs = [("chromium", result.get("echo")), ("pingly", result.get("pingly"))]
    else:
        pairs = [(client, result)]
    with open(results, "a") as out:
        for name, value in pairs:
            record = {"path": path, "delay_ms": delay, "client": name, "result": value}
            out.write(json.dumps(record) + "\n")


def _table(path):
    rows = {}
    order = []
    with open(path) as lines:
        for line in lines:
            record = json.loads(line)
            key = (record["path"], record["delay_ms"])
            if key not in rows:
                rows[key] = {"pingly": [], "chromium": [], "curl": [], "python": []}
                order.append(key)
            rows[key][record["client"]].append(record["result"])
    print(
        "| path | D (ms each way) | pingly (Chromium) | exitvoice: Chromium | exitvoice: curl"
        " | exitvoice: Python (httpx) |"
    )
    print("|---|---|---|---|---|---|")
    for key in order:
        row = rows[key]
        path, delay = key
        print(
            f"| {path} | {'–' if delay is None else delay} | {_pingly_cell(row['pingly'])} "
            f"| {_echo_cell(row['chromium'])} | {_echo_cell(row['curl'])} "
            f"| {_echo_cell(row['python'])} |"
        )


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    verb, args = argv[1], argv[2:]
    if verb == "relay" and len(args) == 2:
        asyncio.run(_relay(int(args[0]), int(args[1])))
    elif verb == "chromium" and len(args) >= 2 and args[0] == "--busy-ms":
        main([argv[0], "chromium-busy", *args[1:]])
    elif verb == "chromium" and len(args) in (3, 4):
        asyncio.run(_chromium(*args[:3], args[3] if len(args) == 4 else None, 0))
    elif verb == "chromium-busy" and len(args) in (4, 5):
        busy = int(args[0])
        asyncio.run(_chromium(*args[1:4], args[4] if len(args) == 5 else None, busy))
    elif verb == "httpx" and len(args) in (1, 2):
        _httpx(args[0], args[1] if len(args) == 2 else None)
    elif verb == "record" and len(args) == 5:
        _record(*args)
    elif verb == "table" and len(args) == 1:
        _table(args[0])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
