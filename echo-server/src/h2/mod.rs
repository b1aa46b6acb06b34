//! HTTP/2 client prefix parsing: preface, frame log, HPACK (decoded fields and their representations), Akamai fingerprint, and the HTTP/2 voice.
