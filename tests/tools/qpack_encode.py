# QPACK field sections made by ls-qpack (pylsqpack, installed with aioquic), an independent
# encoder: reads a JSON list of header lists on stdin, prints a JSON list of their encoded field
# sections in hex. The dynamic table is off (capacity 0), as the echo's SETTINGS leave it.
import json, sys

import pylsqpack

sections = []
for i, headers in enumerate(json.load(sys.stdin)):
    encoder = pylsqpack.Encoder()
    encoder.apply_settings(max_table_capacity=0, blocked_streams=0)
    _, section = encoder.encode(i * 4, [(n.encode(), v.encode()) for n, v in headers])
    sections.append(section.hex())
print(json.dumps(sections))
