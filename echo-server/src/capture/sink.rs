//! Where a finished connection record goes: the one way out of capture. The writer implements
//! [`RecordSink`], and the server hands it to `Shared` once; capture knows nothing of what is
//! behind it.

use std::sync::Arc;

use super::record::{Connection, Failed};

/// Takes each connection's record when the connection ends.
pub(crate) trait RecordSink: Send + Sync {
    /// Takes the record of a connection that ended, and why it failed if it did.
    fn closed(&self, conn: Arc<Connection>, failure: Option<Failed>);
}
