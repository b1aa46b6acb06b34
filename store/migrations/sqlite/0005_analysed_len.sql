-- A connection's facts are stored without the parsers' detail (the decoded ClientHello, the
-- HTTP/2 frame log): that is derived again on read from the stored bytes, the ClientHello and
-- the first `analysed_len` bytes of the prefix (those the facts were read from). NULL on rows
-- stored before, whose facts still carry their detail.
ALTER TABLE connections ADD COLUMN analysed_len INTEGER;
