//! HTTP/1.x request head parsing (request line, header names in original case and order) and the HTTP/1 voice.
