-- The IP and TCP headers of each connection's SYN, as the kernel kept them (TCP_SAVED_SYN): the
-- TCP layer is derived again on read from these bytes, as the TLS layer is from `hello`. NULL
-- when there was none to read (the row's facts then say why, in `tcp_absent`) and on rows
-- stored before.
ALTER TABLE connections ADD COLUMN syn BLOB;
