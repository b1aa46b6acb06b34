//! One pass over a parsed ClientHello collecting what every fingerprint needs: the non-GREASE
//! cipher suites and extension types (wire order and sorted), the extensions' sort keys, and the
//! bodies JA3 and JA4 look at. JA3, JA4, the voice and the order id then read these lists
//! instead of each filtering the hello again.

use super::client_hello::ClientHello;
use super::enums::ExtensionType;
use super::extension::ExtensionBody;
use super::grease::is_grease;

/// Values kept on the stack while they fit (ordinary hellos), on the heap beyond.
pub(crate) struct Small<T, const N: usize> {
    stack: [T; N],
    len: usize,
    heap: Vec<T>,
}

impl<T: Copy + Default, const N: usize> Small<T, N> {
    fn new() -> Self {
        Self {
            stack: [T::default(); N],
            len: 0,
            heap: Vec::new(),
        }
    }

    #[inline]
    fn push(&mut self, v: T) {
        if self.heap.is_empty() {
            if let Some(slot) = self.stack.get_mut(self.len) {
                *slot = v;
                self.len += 1;
                return;
            }
            self.heap.extend_from_slice(&self.stack);
        }
        self.heap.push(v);
    }

    /// Sorts the values in place.
    fn sort(&mut self)
    where
        T: Ord,
    {
        if self.heap.is_empty() {
            if let Some(values) = self.stack.get_mut(..self.len) {
                values.sort_unstable();
            }
        } else {
            self.heap.sort_unstable();
        }
    }

    /// Fills `self` with `values` sorted ascending.
    fn sort_from(&mut self, values: &[T])
    where
        T: Ord,
    {
        self.len = 0;
        self.heap.clear();
        match self.stack.get_mut(..values.len()) {
            Some(dst) => {
                dst.copy_from_slice(values);
                dst.sort_unstable();
                self.len = values.len();
            }
            None => {
                self.heap.extend_from_slice(values);
                self.heap.sort_unstable();
            }
        }
    }

    pub(crate) fn as_slice(&self) -> &[T] {
        if self.heap.is_empty() {
            self.stack.get(..self.len).unwrap_or_default()
        } else {
            &self.heap
        }
    }
}

/// Everything the fingerprints read from one hello, gathered in one pass.
pub(crate) struct Survey<'h, 'a> {
    /// Non-GREASE cipher suites, wire order.
    pub(crate) ciphers: Small<u16, 64>,
    /// The same, sorted.
    pub(crate) sorted_ciphers: Small<u16, 64>,
    /// Non-GREASE extension types, wire order (duplicates kept).
    pub(crate) types: Small<u16, 48>,
    /// The same, sorted.
    pub(crate) sorted_types: Small<u16, 48>,
    /// `type << 16 | wire index` of every extension (GREASE included), sorted.
    pub(crate) keys: Small<u32, 48>,
    /// Number of GREASE extensions.
    pub(crate) grease_extensions: usize,
    /// Whether any known extension failed to parse.
    pub(crate) malformed: bool,
    /// Whether quic_transport_parameters is present.
    pub(crate) quic: bool,
    /// Whether server_name is present.
    pub(crate) server_name: bool,
    /// The body of the first supported_groups extension (the first extension of a type is
    /// the one that counts, as in `ClientHello::extension`; malformed ones included).
    pub(crate) supported_groups: Option<&'h ExtensionBody<'a>>,
    /// The body of the first ec_point_formats extension.
    pub(crate) ec_point_formats: Option<&'h ExtensionBody<'a>>,
    /// The body of the first signature_algorithms extension.
    pub(crate) signature_algorithms: Option<&'h ExtensionBody<'a>>,
    /// The body of the first supported_versions extension.
    pub(crate) supported_versions: Option<&'h ExtensionBody<'a>>,
    /// The body of the first ALPN extension.
    pub(crate) alpn: Option<&'h ExtensionBody<'a>>,
}

impl<'h, 'a> Survey<'h, 'a> {
    /// Surveys `hello`.
    pub(crate) fn new(hello: &'h ClientHello<'a>) -> Self {
        // Everything is gathered in locals and moved into the survey at the end: built in place
        // (the survey is returned through memory), every push was a load-add-store of a length
        // in memory, a chain of store-to-load waits.
        let mut ciphers = Small::new();
        for v in hello.cipher_suites.values() {
            if !is_grease(v) {
                ciphers.push(v);
            }
        }
        let mut sorted_ciphers = Small::new();
        sorted_ciphers.sort_from(ciphers.as_slice());

        let mut types = Small::new();
        let mut keys = Small::new();
        let mut grease_extensions = 0;
        let (mut malformed, mut quic, mut server_name) = (false, false, false);
        let (mut supported_groups, mut ec_point_formats, mut signature_algorithms) =
            (None, None, None);
        let (mut supported_versions, mut alpn) = (None, None);
        for (ext, index) in hello.extensions().iter().zip(0u32..) {
            let kind = ext.kind.0;
            keys.push(u32::from(kind) << 16 | (index & 0xffff));
            if is_grease(kind) {
                grease_extensions += 1;
                continue;
            }
            types.push(kind);
            if matches!(ext.body, ExtensionBody::Malformed { .. }) {
                malformed = true;
            }
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
            slot.get_or_insert(&ext.body);
        }
        keys.sort();
        let mut sorted_types = Small::new();
        for key in keys.as_slice() {
            // The high half is the type.
            let kind = (key >> 16) as u16;
            if !is_grease(kind) {
                sorted_types.push(kind);
            }
        }
        Survey {
            ciphers,
            sorted_ciphers,
            types,
            sorted_types,
            keys,
            grease_extensions,
            malformed,
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
