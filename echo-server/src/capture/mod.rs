//! The only socket code: reading the raw ClientHello records under a deadline and a byte cap, replaying them into rustls, and tapping the decrypted client stream.
