"""Decode a client's HTTP/2 connection prefix with hyperframe + hpack (independent of exitvoice).

Reads the bytes on stdin (preface + frames), prints JSON: the Akamai HTTP/2 fingerprint string
`SETTINGS|WINDOW_UPDATE|PRIORITY|pseudo-header order` computed here, the HEADERS priority fields
and flags, and the decoded header list in wire order. Used by tests/audit_h2_writer.rs.
"""
import json
import sys

import hpack
from hyperframe.frame import Frame, HeadersFrame, SettingsFrame, WindowUpdateFrame, ContinuationFrame, PriorityFrame

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

data = sys.stdin.buffer.read()
assert data.startswith(PREFACE), "missing preface"
data = data[len(PREFACE):]
settings, window_update, priority_frames, headers, flags, prio = [], "00", [], None, [], None
block = b""
while data:
    frame, length = Frame.parse_frame_header(memoryview(data[:9]))
    frame.parse_body(memoryview(data[9:9 + length]))
    data = data[9 + length:]
    if isinstance(frame, SettingsFrame):
        # hyperframe keeps settings in a dict; read wire order from the payload instead.
        body = frame.serialize_body()
        settings = [f"{int.from_bytes(body[i:i+2], 'big')}:{int.from_bytes(body[i+2:i+6], 'big')}"
                    for i in range(0, len(body), 6)]
    elif isinstance(frame, WindowUpdateFrame) and frame.stream_id == 0:
        window_update = str(frame.window_increment)
    elif isinstance(frame, PriorityFrame):
        priority_frames.append(f"{frame.stream_id}:{int(frame.exclusive)}:{frame.depends_on}:{frame.stream_weight + 1}")
    elif isinstance(frame, HeadersFrame):
        flags = sorted(frame.flags)
        if "PRIORITY" in frame.flags:
            prio = {"exclusive": bool(frame.exclusive), "depends_on": frame.depends_on,
                    "weight": frame.stream_weight + 1}
        block += frame.data
        if "END_HEADERS" in frame.flags:
            headers = hpack.Decoder().decode(block, raw=False)
    elif isinstance(frame, ContinuationFrame):
        block += frame.data
        if "END_HEADERS" in frame.flags:
            headers = hpack.Decoder().decode(block, raw=False)
pseudo = ",".join(name[1] for name, _ in headers if name.startswith(":"))
akamai = "|".join([";".join(settings), window_update, ",".join(priority_frames) or "0", pseudo])
print(json.dumps({"akamai": akamai, "headers_flags": flags, "priority": prio,
                  "headers": [[n, v] for n, v in headers]}))
