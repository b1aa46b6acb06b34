//! A proxy's answer to `CONNECT` → `dial::http_connect::connect` (head reader + status
//! parser). The first input byte sets how many bytes each read returns (0 = as many as asked);
//! the rest is what the proxy sends.
#![no_main]

use exitvoice_exits::dial::http_connect;
use exitvoice_fuzz::{poll_ready, ScriptedStream};
use libfuzzer_sys::fuzz_target;

const PASSWORD: &str = "fuzz-password-7f3a";

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, reply)) = data.split_first() else {
        return;
    };
    let chunk = if chunk == 0 {
        usize::MAX
    } else {
        usize::from(chunk)
    };
    let stream = ScriptedStream::new(reply, chunk);
    let future = http_connect::connect(stream, "echo.example", 443, Some(("fuzz-user", PASSWORD)));
    let result = poll_ready(future).expect("CONNECT over an always-ready stream did not finish");
    match result {
        Ok(stream) => {
            // Success only on a complete head, and not one byte of the tunnel consumed.
            let end = reply
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .expect("Ok without a blank line")
                + 4;
            assert_eq!(stream.unread(), &reply[end..]);
            assert!(stream
                .written
                .starts_with(b"CONNECT echo.example:443 HTTP/1.1\r\n"));
        }
        Err(err) => {
            let shown = format!("{err} {err:?}");
            assert!(!shown.contains(PASSWORD), "password in {shown}");
        }
    }
});
