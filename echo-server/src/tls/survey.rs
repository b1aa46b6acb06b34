//! One pass over a parsed ClientHello collecting what every fingerprint needs: the non-GREASE
//! cipher suites and extension types (wire order and sorted), the extensions' sort keys, and the
//! extensions whose lists JA3 and JA4 read. JA3, JA4, the voice and the order id then read these
//! lists instead of each filtering the hello again.

use super::client_hello::ClientHello;
use super::enums::ExtensionType;
use super::extension::Extension;
use super::grease::is_grease;

/// Everything the fingerprints read from one hello, gathered in one pass.
pub(crate) struct Survey<'h> {
    /// Non-GREASE cipher suites, wire order.
    pub(crate) ciphers: Vec<u16>,
    /// The same, sorted.
    pub(crate) sorted_ciphers: Vec<u16>,
    /// Non-GREASE extension types, wire order (duplicates kept).
    pub(crate) types: Vec<u16>,
    /// The same, sorted.
    pub(crate) sorted_types: Vec<u16>,
    /// `type << 16 | wire index` of every non-GREASE extension, sorted.
    pub(crate) keys: Vec<u32>,
    /// Number of GREASE extensions.
    pub(crate) grease_extensions: usize,
    /// Whether quic_transport_parameters is present.
    pub(crate) quic: bool,
    /// Whether server_name is present.
    pub(crate) server_name: bool,
    /// The first supported_groups extension (the first extension of a type is the one that
    /// counts, as in `ClientHello::extension`, malformed or not).
    pub(crate) supported_groups: Option<Extension<'h>>,
    /// The first ec_point_formats extension.
    pub(crate) ec_point_formats: Option<Extension<'h>>,
    /// The first signature_algorithms extension.
    pub(crate) signature_algorithms: Option<Extension<'h>>,
    /// The first supported_versions extension.
    pub(crate) supported_versions: Option<Extension<'h>>,
    /// The first ALPN extension.
    pub(crate) alpn: Option<Extension<'h>>,
}

impl<'h> Survey<'h> {
    /// Surveys `hello`.
    pub(crate) fn new(hello: &'h ClientHello<'_>) -> Self {
        // Everything is gathered in locals and moved into the survey at the end: built in place
        // (the survey is returned through memory), every push was a load-add-store of a length
        // in memory, a chain of store-to-load waits.
        let ciphers: Vec<u16> = hello
            .cipher_suites()
            .values()
            .filter(|v| !is_grease(*v))
            .collect();
        let mut sorted_ciphers = ciphers.clone();
        sorted_ciphers.sort_unstable();

        let mut types = Vec::new();
        let mut keys = Vec::new();
        let mut grease_extensions = 0;
        let (mut quic, mut server_name) = (false, false);
        let (mut supported_groups, mut ec_point_formats, mut signature_algorithms) =
            (None, None, None);
        let (mut supported_versions, mut alpn) = (None, None);
        for (ext, index) in hello.extensions().zip(0u32..) {
            let kind = ext.kind.0;
            if is_grease(kind) {
                grease_extensions += 1;
                continue;
            }
            keys.push(u32::from(kind) << 16 | (index & 0xffff));
            types.push(kind);
            let slot = match ExtensionType(kind) {
                ExtensionType::SERVER_NAME => {
                    server_name = true;
                    continue;
                }
                ExtensionType::QUIC_TRANSPORT_PARAMETERS => {
                    quic = true;
                    continue;
                }
                ExtensionType::SUPPORTED_GROUPS => &mut supported_groups,
                ExtensionType::EC_POINT_FORMATS => &mut ec_point_formats,
                ExtensionType::SIGNATURE_ALGORITHMS => &mut signature_algorithms,
                ExtensionType::SUPPORTED_VERSIONS => &mut supported_versions,
                ExtensionType::APPLICATION_LAYER_PROTOCOL_NEGOTIATION => &mut alpn,
                _ => continue,
            };
            slot.get_or_insert(ext);
        }
        keys.sort_unstable();
        // The high half is the type.
        let sorted_types = keys.iter().map(|key| (key >> 16) as u16).collect();
        Survey {
            ciphers,
            sorted_ciphers,
            types,
            sorted_types,
            keys,
            grease_extensions,
            quic,
            server_name,
            supported_groups,
            ec_point_formats,
            signature_algorithms,
            supported_versions,
            alpn,
        }
    }
}
