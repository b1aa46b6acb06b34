//! exitvoice auditor.
#![forbid(unsafe_code)]
