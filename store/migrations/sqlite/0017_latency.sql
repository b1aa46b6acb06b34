-- Each connection's round trips as the echo measured them (TCP_INFO, the TLS flight, HTTP/2
-- PINGs) and the verdict of their gap: the `latency` object of its echo, as JSON. NULL when the
-- handshake did not complete and on rows stored before.
ALTER TABLE connections ADD COLUMN latency TEXT;
