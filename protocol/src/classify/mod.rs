//! Classification over parsed layers: what the client spoke ([`sniff`]), the bucket A–D
//! ([`bucket`]) and the table of browser HTTP/2 profiles ([`browser_profile`]).

mod bucket;
mod profile;
mod sniff;

pub use bucket::{bucket, decide, BucketInput, BucketRule};
pub use profile::{browser_profile, BrowserProfile, HeadersPriority, PROFILES};
pub use sniff::sniff;
