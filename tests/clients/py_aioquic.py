# HTTP/3 with aioquic: GETs each path on one QUIC connection, then prints one JSON object with
# the answers and what aioquic itself sent, read from its own objects: its SETTINGS (dict order
# is the order aioquic encodes them in), the header list it sent, and its transport parameters
# (the extension bytes its TLS context carried, walked with aioquic's own varint reader).
# Usage: python py_aioquic.py <ip> <port> <server-name> <ca.pem> <path>...
import asyncio, json, sys

import aioquic
from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.buffer import Buffer
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.packet import pull_quic_transport_parameters
from aioquic.tls import ExtensionType


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.pending = {}
        self.sent_headers = None

    async def get(self, authority, path):
        stream_id = self._quic.get_next_available_stream_id()
        headers = [
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":authority", authority.encode()),
            (b":path", path.encode()),
            (b"user-agent", ("aioquic/" + aioquic.__version__).encode()),
            (b"accept", b"application/json"),
        ]
        if self.sent_headers is None:
            self.sent_headers = headers
        self.h3.send_headers(stream_id, headers, end_stream=True)
        done = asyncio.get_running_loop().create_future()
        self.pending[stream_id] = {"done": done, "status": None, "body": bytearray()}
        self.transmit()
        return await asyncio.wait_for(done, 10)

    def quic_event_received(self, event):
        for e in self.h3.handle_event(event):
            slot = self.pending.get(getattr(e, "stream_id", None))
            if slot is None:
                continue
            if isinstance(e, HeadersReceived):
                slot["status"] = int(dict(e.headers)[b":status"])
            elif isinstance(e, DataReceived):
                slot["body"] += e.data
            if getattr(e, "stream_ended", False) and not slot["done"].done():
                slot["done"].set_result(slot)


def transport_parameters(quic):
    raw = dict(quic.tls.handshake_extensions)[ExtensionType.QUIC_TRANSPORT_PARAMETERS]
    buf, ids = Buffer(data=raw), []
    while not buf.eof():
        ids.append(buf.pull_uint_var())
        buf.pull_bytes(buf.pull_uint_var())
    parsed = pull_quic_transport_parameters(Buffer(data=raw))
    values = {k: v for k, v in vars(parsed).items() if isinstance(v, int) and not isinstance(v, bool)}
    return {"ids_in_order": ids, "integers": values}


async def main():
    ip, port, name, ca, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
    # A short idle timeout: a server that never answers fails the run in seconds.
    config = QuicConfiguration(
        is_client=True, alpn_protocols=H3_ALPN, server_name=name, idle_timeout=5.0
    )
    config.load_verify_locations(ca)
    answers = []
    async with connect(ip, port, configuration=config, create_protocol=Client) as client:
        for path in paths:
            slot = await client.get(f"{name}:{port}", path)
            body = bytes(slot["body"])
            try:
                body = json.loads(body)
            except ValueError:
                body = body.decode(errors="replace")
            answers.append({"path": path, "status": slot["status"], "body": body})
        out = {
            "aioquic": aioquic.__version__,
            "answers": answers,
            "h3_settings": [[k, v] for k, v in client.h3.sent_settings.items()],
            "headers_sent": [k.decode() for k, _ in client.sent_headers],
            "transport_parameters": transport_parameters(client._quic),
        }
    print(json.dumps(out))


asyncio.run(main())
