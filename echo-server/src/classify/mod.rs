//! Classification over parsed layers: ALPN offered / negotiated / spoken, bucket A–D, browser HTTP/2 profiles.
