# Client first flights made by aioquic and never sent: prints one line per connection, the hex
# of each datagram of its first flight joined by ','. Each connection has its own random DCID.
# Usage: python py_quic_initial.py <server-name> <connections>
import sys, time

from aioquic.h3.connection import H3_ALPN
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection

name, count = sys.argv[1], int(sys.argv[2])
for _ in range(count):
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name=name)
    quic = QuicConnection(configuration=config)
    now = time.time()
    quic.connect(("127.0.0.1", 443), now=now)
    print(",".join(data.hex() for data, _ in quic.datagrams_to_send(now=now)))
