//! A labels document written an exit at a time, for pools read from the store a page at a time
//! (`audit --labels-out`, `exitvoice labels`): the document [`LabelsDoc`] serializes to, one
//! exit per line, never held whole.

use std::io::{self, Write};

use crate::label::{ExitLabel, LabelsDoc};

/// Writes a labels document's JSON: [`begin`](Self::begin) with the document without its
/// exits, [`exit`](Self::exit) for each, then [`end`](Self::end).
#[derive(Debug)]
pub struct LabelsJsonWriter<W> {
    out: W,
    exits: u64,
}

impl<W: Write> LabelsJsonWriter<W> {
    /// Writes everything of `header` but its exits, which must be empty.
    ///
    /// # Errors
    /// Writing fails, or `header` holds exits.
    pub fn begin(mut out: W, header: &LabelsDoc) -> io::Result<Self> {
        let json = serde_json::to_string(header)?;
        // `exits` is the document's last field, so its JSON ends `"exits":[]}`.
        let open = json
            .strip_suffix("[]}")
            .filter(|_| header.exits.is_empty())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a labels header must hold no exit",
                )
            })?;
        out.write_all(open.as_bytes())?;
        out.write_all(b"[")?;
        Ok(Self { out, exits: 0 })
    }

    /// Writes the next exit's label.
    ///
    /// # Errors
    /// Writing fails.
    pub fn exit(&mut self, label: &ExitLabel) -> io::Result<()> {
        self.out
            .write_all(if self.exits == 0 { b"\n" } else { b",\n" })?;
        serde_json::to_writer(&mut self.out, label)?;
        self.exits += 1;
        Ok(())
    }

    /// Closes the document; hands the writer back.
    ///
    /// # Errors
    /// Writing fails.
    pub fn end(mut self) -> io::Result<W> {
        self.out.write_all(b"\n]}\n")?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(exits: &[&str]) -> LabelsDoc {
        let mut doc: LabelsDoc = serde_json::from_value(serde_json::json!({
            "schema_version": 5, "generated_at": "t", "persona": "p", "baseline": null,
            "exits": exits.iter().map(|name| serde_json::json!({
                "name": name, "url": "u", "tags": {}, "egress_ips": ["10.0.0.1"],
                "state": "stable", "changed_at": null, "bucket": "A",
                "flags": {"tls_preserved": true, "h2_preserved": true, "tls_intercepted": false},
                "voices": [], "route": "identity", "route_reason": "r", "samples": 1,
                "errors": {}, "latency": {"p50_ms": 3, "p95_ms": 4}, "last_probe_at": null,
                "history": [],
            })).collect::<Vec<_>>(),
        }))
        .expect("a labels document");
        doc.pool = Some(crate::label::Pool {
            exits: u32::try_from(exits.len()).unwrap(),
            ..crate::label::Pool::default()
        });
        doc
    }

    fn streamed(whole: &LabelsDoc) -> Vec<u8> {
        let header = LabelsDoc {
            exits: Vec::new(),
            ..whole.clone()
        };
        let mut json = LabelsJsonWriter::begin(Vec::new(), &header).unwrap();
        for label in &whole.exits {
            json.exit(label).unwrap();
        }
        json.end().unwrap()
    }

    #[test]
    fn the_streamed_document_is_the_whole_one() {
        for exits in [&[][..], &["a"], &["a", "b", "c"]] {
            let whole = doc(exits);
            let back: serde_json::Value = serde_json::from_slice(&streamed(&whole)).unwrap();
            assert_eq!(back, serde_json::to_value(&whole).unwrap(), "{exits:?}");
        }
    }

    #[test]
    fn a_header_with_exits_is_refused() {
        let error = LabelsJsonWriter::begin(Vec::new(), &doc(&["a"])).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
    }
}
