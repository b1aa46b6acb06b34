//! Bytes of a client's HTTP/3 streams → what the echo reads from them: frames, the control
//! stream's SETTINGS, a request's QPACK field section, and the HTTP/3 voice of both. The first
//! byte picks where the input is cut into a control stream and a request stream.
#![no_main]

use exitvoice_protocol::h3;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let (control, request) = rest.split_at((usize::from(split) * 4).min(rest.len()));
    let settings = match h3::read_frame(control, 64 * 1024) {
        Ok(Some(frame)) => h3::decode_settings(&control[frame.payload_start..frame.end()]).ok(),
        _ => h3::decode_settings(control).ok(),
    };
    let fields = match h3::read_frame(request, 64 * 1024) {
        Ok(Some(frame)) => h3::decode_field_section(&request[frame.payload_start..frame.end()]),
        _ => h3::decode_field_section(request),
    };
    if let (Some(settings), Ok(fields)) = (settings, fields) {
        let voice = h3::H3Voice::new(&settings, &fields);
        assert!(voice.voice_id.0.starts_with("h3v1_"));
    }
});
