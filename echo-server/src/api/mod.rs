//! The HTTP API: routes, the per-connection capture extractor, JSON echo, errors as responses.
