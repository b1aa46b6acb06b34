//! TLS ClientHello parsing (records or a bare handshake message), GREASE, JA3/JA3N, the JA4 family, and the TLS voice.
