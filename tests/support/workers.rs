//! Worker processes of the broker tests: each prints one JSON line, its summary, last.

use std::process::Child;
use std::time::{Duration, Instant};

/// Waits for every child (all of them within `limit`) and reads the JSON line each printed
/// last; panics on a worker that failed or said something else.
pub fn summaries(children: Vec<Child>, limit: Duration) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + limit;
    children
        .into_iter()
        .map(|child| {
            assert!(Instant::now() < deadline, "the workers took too long");
            let output = child.wait_with_output().expect("worker output");
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert!(
                output.status.success(),
                "worker failed: {stdout}\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
            let last = stdout.lines().last().unwrap_or_default();
            serde_json::from_str(last).unwrap_or_else(|_| panic!("worker said {stdout}"))
        })
        .collect()
}
