//! Registry newtypes for TLS code points, with IANA-ordered named constants.
//!
//! Every value is legal on the wire, so conversion never fails and fingerprints see the raw
//! number; [`name`](CipherSuite::name) answers the registry name where we know it, and `GREASE`
//! for RFC 8701 values. Serialized as `{"value": <number>, "name": "<name>"}` (name omitted when
//! unknown).

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use super::grease::is_grease;

/// Defines a registry newtype with named constants, `name()` and a `{value, name}` serializer.
macro_rules! registry {
    ($(#[$meta:meta])* $name:ident($ty:ty) { $($konst:ident = $val:literal => $text:literal,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub $ty);

        impl $name {
            $(
                #[doc = concat!("`", $text, "`")]
                pub const $konst: Self = Self($val);
            )*

            /// The registry name, `GREASE` for RFC 8701 values, `None` when unknown.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($val => Some($text),)*
                    other => u16::try_from(other)
                        .ok()
                        .filter(|v| is_grease(*v))
                        .map(|_| "GREASE"),
                }
            }
        }

        impl From<$ty> for $name {
            fn from(value: $ty) -> Self {
                Self(value)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serialize_code(serializer, self.0.into(), self.name())
            }
        }
    };
}

/// Writes a code point as `{"value": n, "name": "…"}`, without `name` when unknown.
fn serialize_code<S: Serializer>(
    serializer: S,
    value: u32,
    name: Option<&'static str>,
) -> Result<S::Ok, S::Error> {
    let mut s = serializer.serialize_struct("Code", if name.is_some() { 2 } else { 1 })?;
    s.serialize_field("value", &value)?;
    if let Some(name) = name {
        s.serialize_field("name", name)?;
    }
    s.end()
}

registry! {
    /// A protocol version (legacy_version, supported_versions).
    ProtocolVersion(u16) {
        SSL_2_0 = 0x0002 => "SSLv2",
        SSL_3_0 = 0x0300 => "SSLv3",
        TLS_1_0 = 0x0301 => "TLSv1.0",
        TLS_1_1 = 0x0302 => "TLSv1.1",
        TLS_1_2 = 0x0303 => "TLSv1.2",
        TLS_1_3 = 0x0304 => "TLSv1.3",
        DTLS_1_3 = 0xfefc => "DTLSv1.3",
        DTLS_1_2 = 0xfefd => "DTLSv1.2",
        DTLS_1_0 = 0xfeff => "DTLSv1.0",
    }
}

registry! {
    /// A TLS extension type (IANA "TLS ExtensionType Values", plus the ALPS and NPN code points browsers send).
    ExtensionType(u16) {
        SERVER_NAME = 0x0000 => "server_name",
        MAX_FRAGMENT_LENGTH = 0x0001 => "max_fragment_length",
        CLIENT_CERTIFICATE_URL = 0x0002 => "client_certificate_url",
        TRUSTED_CA_KEYS = 0x0003 => "trusted_ca_keys",
        TRUNCATED_HMAC = 0x0004 => "truncated_hmac",
        STATUS_REQUEST = 0x0005 => "status_request",
        USER_MAPPING = 0x0006 => "user_mapping",
        CLIENT_AUTHZ = 0x0007 => "client_authz",
        SERVER_AUTHZ = 0x0008 => "server_authz",
        CERT_TYPE = 0x0009 => "cert_type",
        SUPPORTED_GROUPS = 0x000a => "supported_groups",
        EC_POINT_FORMATS = 0x000b => "ec_point_formats",
        SRP = 0x000c => "srp",
        SIGNATURE_ALGORITHMS = 0x000d => "signature_algorithms",
        USE_SRTP = 0x000e => "use_srtp",
        HEARTBEAT = 0x000f => "heartbeat",
        APPLICATION_LAYER_PROTOCOL_NEGOTIATION = 0x0010 => "application_layer_protocol_negotiation",
        STATUS_REQUEST_V2 = 0x0011 => "status_request_v2",
        SIGNED_CERTIFICATE_TIMESTAMP = 0x0012 => "signed_certificate_timestamp",
        CLIENT_CERTIFICATE_TYPE = 0x0013 => "client_certificate_type",
        SERVER_CERTIFICATE_TYPE = 0x0014 => "server_certificate_type",
        PADDING = 0x0015 => "padding",
        ENCRYPT_THEN_MAC = 0x0016 => "encrypt_then_mac",
        EXTENDED_MASTER_SECRET = 0x0017 => "extended_master_secret",
        TOKEN_BINDING = 0x0018 => "token_binding",
        CACHED_INFO = 0x0019 => "cached_info",
        TLS_LTS = 0x001a => "tls_lts",
        COMPRESS_CERTIFICATE = 0x001b => "compress_certificate",
        RECORD_SIZE_LIMIT = 0x001c => "record_size_limit",
        PWD_PROTECT = 0x001d => "pwd_protect",
        PWD_CLEAR = 0x001e => "pwd_clear",
        PASSWORD_SALT = 0x001f => "password_salt",
        TICKET_PINNING = 0x0020 => "ticket_pinning",
        TLS_CERT_WITH_EXTERN_PSK = 0x0021 => "tls_cert_with_extern_psk",
        DELEGATED_CREDENTIAL = 0x0022 => "delegated_credential",
        SESSION_TICKET = 0x0023 => "session_ticket",
        TLMSP = 0x0024 => "TLMSP",
        TLMSP_PROXYING = 0x0025 => "TLMSP_proxying",
        TLMSP_DELEGATE = 0x0026 => "TLMSP_delegate",
        SUPPORTED_EKT_CIPHERS = 0x0027 => "supported_ekt_ciphers",
        PRE_SHARED_KEY = 0x0029 => "pre_shared_key",
        EARLY_DATA = 0x002a => "early_data",
        SUPPORTED_VERSIONS = 0x002b => "supported_versions",
        COOKIE = 0x002c => "cookie",
        PSK_KEY_EXCHANGE_MODES = 0x002d => "psk_key_exchange_modes",
        CERTIFICATE_AUTHORITIES = 0x002f => "certificate_authorities",
        OID_FILTERS = 0x0030 => "oid_filters",
        POST_HANDSHAKE_AUTH = 0x0031 => "post_handshake_auth",
        SIGNATURE_ALGORITHMS_CERT = 0x0032 => "signature_algorithms_cert",
        KEY_SHARE = 0x0033 => "key_share",
        TRANSPARENCY_INFO = 0x0034 => "transparency_info",
        CONNECTION_ID_DEPRECATED = 0x0035 => "connection_id_deprecated",
        CONNECTION_ID = 0x0036 => "connection_id",
        EXTERNAL_ID_HASH = 0x0037 => "external_id_hash",
        EXTERNAL_SESSION_ID = 0x0038 => "external_session_id",
        QUIC_TRANSPORT_PARAMETERS = 0x0039 => "quic_transport_parameters",
        TICKET_REQUEST = 0x003a => "ticket_request",
        DNSSEC_CHAIN = 0x003b => "dnssec_chain",
        SEQUENCE_NUMBER_ENCRYPTION_ALGORITHMS = 0x003c => "sequence_number_encryption_algorithms",
        RRC = 0x003d => "rrc",
        NEXT_PROTOCOL_NEGOTIATION = 0x3374 => "next_protocol_negotiation",
        APPLICATION_SETTINGS = 0x4469 => "application_settings",
        APPLICATION_SETTINGS_NEW = 0x44cd => "application_settings_new",
        ECH_OUTER_EXTENSIONS = 0xfd00 => "ech_outer_extensions",
        ENCRYPTED_CLIENT_HELLO = 0xfe0d => "encrypted_client_hello",
        RENEGOTIATION_INFO = 0xff01 => "renegotiation_info",
    }
}

registry! {
    /// A key-exchange group (IANA "TLS Supported Groups"; also in key_share).
    NamedGroup(u16) {
        SECT163K1 = 0x0001 => "sect163k1",
        SECT163R1 = 0x0002 => "sect163r1",
        SECT163R2 = 0x0003 => "sect163r2",
        SECT193R1 = 0x0004 => "sect193r1",
        SECT193R2 = 0x0005 => "sect193r2",
        SECT233K1 = 0x0006 => "sect233k1",
        SECT233R1 = 0x0007 => "sect233r1",
        SECT239K1 = 0x0008 => "sect239k1",
        SECT283K1 = 0x0009 => "sect283k1",
        SECT283R1 = 0x000a => "sect283r1",
        SECT409K1 = 0x000b => "sect409k1",
        SECT409R1 = 0x000c => "sect409r1",
        SECT571K1 = 0x000d => "sect571k1",
        SECT571R1 = 0x000e => "sect571r1",
        SECP160K1 = 0x000f => "secp160k1",
        SECP160R1 = 0x0010 => "secp160r1",
        SECP160R2 = 0x0011 => "secp160r2",
        SECP192K1 = 0x0012 => "secp192k1",
        SECP192R1 = 0x0013 => "secp192r1",
        SECP224K1 = 0x0014 => "secp224k1",
        SECP224R1 = 0x0015 => "secp224r1",
        SECP256K1 = 0x0016 => "secp256k1",
        SECP256R1 = 0x0017 => "secp256r1",
        SECP384R1 = 0x0018 => "secp384r1",
        SECP521R1 = 0x0019 => "secp521r1",
        BRAINPOOLP256R1 = 0x001a => "brainpoolP256r1",
        BRAINPOOLP384R1 = 0x001b => "brainpoolP384r1",
        BRAINPOOLP512R1 = 0x001c => "brainpoolP512r1",
        X25519 = 0x001d => "x25519",
        X448 = 0x001e => "x448",
        BRAINPOOLP256R1TLS13 = 0x001f => "brainpoolP256r1tls13",
        BRAINPOOLP384R1TLS13 = 0x0020 => "brainpoolP384r1tls13",
        BRAINPOOLP512R1TLS13 = 0x0021 => "brainpoolP512r1tls13",
        FFDHE2048 = 0x0100 => "ffdhe2048",
        FFDHE3072 = 0x0101 => "ffdhe3072",
        FFDHE4096 = 0x0102 => "ffdhe4096",
        FFDHE6144 = 0x0103 => "ffdhe6144",
        FFDHE8192 = 0x0104 => "ffdhe8192",
        MLKEM512 = 0x0200 => "MLKEM512",
        MLKEM768 = 0x0201 => "MLKEM768",
        MLKEM1024 = 0x0202 => "MLKEM1024",
        SECP256R1MLKEM768 = 0x11eb => "SecP256r1MLKEM768",
        X25519MLKEM768 = 0x11ec => "X25519MLKEM768",
        SECP384R1MLKEM1024 = 0x11ed => "SecP384r1MLKEM1024",
        X25519KYBER768DRAFT00 = 0x6399 => "X25519Kyber768Draft00",
        ARBITRARY_EXPLICIT_PRIME_CURVES = 0xff01 => "arbitrary_explicit_prime_curves",
        ARBITRARY_EXPLICIT_CHAR2_CURVES = 0xff02 => "arbitrary_explicit_char2_curves",
    }
}

registry! {
    /// A signature scheme (IANA "TLS SignatureScheme"; signature_algorithms, _cert, delegated_credentials).
    SignatureScheme(u16) {
        RSA_PKCS1_SHA1 = 0x0201 => "rsa_pkcs1_sha1",
        DSA_SHA1 = 0x0202 => "dsa_sha1",
        ECDSA_SHA1 = 0x0203 => "ecdsa_sha1",
        RSA_PKCS1_SHA224 = 0x0301 => "rsa_pkcs1_sha224",
        DSA_SHA224 = 0x0302 => "dsa_sha224",
        ECDSA_SHA224 = 0x0303 => "ecdsa_sha224",
        RSA_PKCS1_SHA256 = 0x0401 => "rsa_pkcs1_sha256",
        DSA_SHA256 = 0x0402 => "dsa_sha256",
        ECDSA_SECP256R1_SHA256 = 0x0403 => "ecdsa_secp256r1_sha256",
        RSA_PKCS1_SHA256_LEGACY = 0x0420 => "rsa_pkcs1_sha256_legacy",
        RSA_PKCS1_SHA384 = 0x0501 => "rsa_pkcs1_sha384",
        DSA_SHA384 = 0x0502 => "dsa_sha384",
        ECDSA_SECP384R1_SHA384 = 0x0503 => "ecdsa_secp384r1_sha384",
        RSA_PKCS1_SHA384_LEGACY = 0x0520 => "rsa_pkcs1_sha384_legacy",
        RSA_PKCS1_SHA512 = 0x0601 => "rsa_pkcs1_sha512",
        DSA_SHA512 = 0x0602 => "dsa_sha512",
        ECDSA_SECP521R1_SHA512 = 0x0603 => "ecdsa_secp521r1_sha512",
        RSA_PKCS1_SHA512_LEGACY = 0x0620 => "rsa_pkcs1_sha512_legacy",
        ECCSI_SHA256 = 0x0704 => "eccsi_sha256",
        ISO_IBS1 = 0x0705 => "iso_ibs1",
        ISO_IBS2 = 0x0706 => "iso_ibs2",
        ISO_CHINESE_IBS = 0x0707 => "iso_chinese_ibs",
        SM2SIG_SM3 = 0x0708 => "sm2sig_sm3",
        GOSTR34102012_256A = 0x0709 => "gostr34102012_256a",
        GOSTR34102012_256B = 0x070a => "gostr34102012_256b",
        GOSTR34102012_256C = 0x070b => "gostr34102012_256c",
        GOSTR34102012_256D = 0x070c => "gostr34102012_256d",
        GOSTR34102012_512A = 0x070d => "gostr34102012_512a",
        GOSTR34102012_512B = 0x070e => "gostr34102012_512b",
        GOSTR34102012_512C = 0x070f => "gostr34102012_512c",
        RSA_PSS_RSAE_SHA256 = 0x0804 => "rsa_pss_rsae_sha256",
        RSA_PSS_RSAE_SHA384 = 0x0805 => "rsa_pss_rsae_sha384",
        RSA_PSS_RSAE_SHA512 = 0x0806 => "rsa_pss_rsae_sha512",
        ED25519 = 0x0807 => "ed25519",
        ED448 = 0x0808 => "ed448",
        RSA_PSS_PSS_SHA256 = 0x0809 => "rsa_pss_pss_sha256",
        RSA_PSS_PSS_SHA384 = 0x080a => "rsa_pss_pss_sha384",
        RSA_PSS_PSS_SHA512 = 0x080b => "rsa_pss_pss_sha512",
        ECDSA_BRAINPOOLP256R1TLS13_SHA256 = 0x081a => "ecdsa_brainpoolP256r1tls13_sha256",
        ECDSA_BRAINPOOLP384R1TLS13_SHA384 = 0x081b => "ecdsa_brainpoolP384r1tls13_sha384",
        ECDSA_BRAINPOOLP512R1TLS13_SHA512 = 0x081c => "ecdsa_brainpoolP512r1tls13_sha512",
        MLDSA44 = 0x0904 => "mldsa44",
        MLDSA65 = 0x0905 => "mldsa65",
        MLDSA87 = 0x0906 => "mldsa87",
    }
}

registry! {
    /// A cipher suite (IANA "TLS Cipher Suites"; the SCSVs included).
    CipherSuite(u16) {
        TLS_NULL_WITH_NULL_NULL = 0x0000 => "TLS_NULL_WITH_NULL_NULL",
        TLS_RSA_WITH_NULL_MD5 = 0x0001 => "TLS_RSA_WITH_NULL_MD5",
        TLS_RSA_WITH_NULL_SHA = 0x0002 => "TLS_RSA_WITH_NULL_SHA",
        TLS_RSA_EXPORT_WITH_RC4_40_MD5 = 0x0003 => "TLS_RSA_EXPORT_WITH_RC4_40_MD5",
        TLS_RSA_WITH_RC4_128_MD5 = 0x0004 => "TLS_RSA_WITH_RC4_128_MD5",
        TLS_RSA_WITH_RC4_128_SHA = 0x0005 => "TLS_RSA_WITH_RC4_128_SHA",
        TLS_RSA_EXPORT_WITH_RC2_CBC_40_MD5 = 0x0006 => "TLS_RSA_EXPORT_WITH_RC2_CBC_40_MD5",
        TLS_RSA_EXPORT_WITH_DES40_CBC_SHA = 0x0008 => "TLS_RSA_EXPORT_WITH_DES40_CBC_SHA",
        TLS_RSA_WITH_DES_CBC_SHA = 0x0009 => "TLS_RSA_WITH_DES_CBC_SHA",
        TLS_RSA_WITH_3DES_EDE_CBC_SHA = 0x000a => "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
        TLS_DHE_DSS_EXPORT_WITH_DES40_CBC_SHA = 0x0011 => "TLS_DHE_DSS_EXPORT_WITH_DES40_CBC_SHA",
        TLS_DHE_DSS_WITH_DES_CBC_SHA = 0x0012 => "TLS_DHE_DSS_WITH_DES_CBC_SHA",
        TLS_DHE_DSS_WITH_3DES_EDE_CBC_SHA = 0x0013 => "TLS_DHE_DSS_WITH_3DES_EDE_CBC_SHA",
        TLS_DHE_RSA_EXPORT_WITH_DES40_CBC_SHA = 0x0014 => "TLS_DHE_RSA_EXPORT_WITH_DES40_CBC_SHA",
        TLS_DHE_RSA_WITH_DES_CBC_SHA = 0x0015 => "TLS_DHE_RSA_WITH_DES_CBC_SHA",
        TLS_DHE_RSA_WITH_3DES_EDE_CBC_SHA = 0x0016 => "TLS_DHE_RSA_WITH_3DES_EDE_CBC_SHA",
        TLS_RSA_WITH_AES_128_CBC_SHA = 0x002f => "TLS_RSA_WITH_AES_128_CBC_SHA",
        TLS_DHE_DSS_WITH_AES_128_CBC_SHA = 0x0032 => "TLS_DHE_DSS_WITH_AES_128_CBC_SHA",
        TLS_DHE_RSA_WITH_AES_128_CBC_SHA = 0x0033 => "TLS_DHE_RSA_WITH_AES_128_CBC_SHA",
        TLS_RSA_WITH_AES_256_CBC_SHA = 0x0035 => "TLS_RSA_WITH_AES_256_CBC_SHA",
        TLS_DHE_DSS_WITH_AES_256_CBC_SHA = 0x0038 => "TLS_DHE_DSS_WITH_AES_256_CBC_SHA",
        TLS_DHE_RSA_WITH_AES_256_CBC_SHA = 0x0039 => "TLS_DHE_RSA_WITH_AES_256_CBC_SHA",
        TLS_RSA_WITH_AES_128_CBC_SHA256 = 0x003c => "TLS_RSA_WITH_AES_128_CBC_SHA256",
        TLS_RSA_WITH_AES_256_CBC_SHA256 = 0x003d => "TLS_RSA_WITH_AES_256_CBC_SHA256",
        TLS_DHE_DSS_WITH_AES_128_CBC_SHA256 = 0x0040 => "TLS_DHE_DSS_WITH_AES_128_CBC_SHA256",
        TLS_RSA_WITH_CAMELLIA_128_CBC_SHA = 0x0041 => "TLS_RSA_WITH_CAMELLIA_128_CBC_SHA",
        TLS_DHE_RSA_WITH_CAMELLIA_128_CBC_SHA = 0x0045 => "TLS_DHE_RSA_WITH_CAMELLIA_128_CBC_SHA",
        TLS_DHE_RSA_WITH_AES_128_CBC_SHA256 = 0x0067 => "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256",
        TLS_DHE_DSS_WITH_AES_256_CBC_SHA256 = 0x006a => "TLS_DHE_DSS_WITH_AES_256_CBC_SHA256",
        TLS_DHE_RSA_WITH_AES_256_CBC_SHA256 = 0x006b => "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256",
        TLS_RSA_WITH_CAMELLIA_256_CBC_SHA = 0x0084 => "TLS_RSA_WITH_CAMELLIA_256_CBC_SHA",
        TLS_DHE_RSA_WITH_CAMELLIA_256_CBC_SHA = 0x0088 => "TLS_DHE_RSA_WITH_CAMELLIA_256_CBC_SHA",
        TLS_RSA_WITH_SEED_CBC_SHA = 0x0096 => "TLS_RSA_WITH_SEED_CBC_SHA",
        TLS_DHE_DSS_WITH_SEED_CBC_SHA = 0x0099 => "TLS_DHE_DSS_WITH_SEED_CBC_SHA",
        TLS_DHE_RSA_WITH_SEED_CBC_SHA = 0x009a => "TLS_DHE_RSA_WITH_SEED_CBC_SHA",
        TLS_RSA_WITH_AES_128_GCM_SHA256 = 0x009c => "TLS_RSA_WITH_AES_128_GCM_SHA256",
        TLS_RSA_WITH_AES_256_GCM_SHA384 = 0x009d => "TLS_RSA_WITH_AES_256_GCM_SHA384",
        TLS_DHE_RSA_WITH_AES_128_GCM_SHA256 = 0x009e => "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256",
        TLS_DHE_RSA_WITH_AES_256_GCM_SHA384 = 0x009f => "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384",
        TLS_DHE_DSS_WITH_AES_128_GCM_SHA256 = 0x00a2 => "TLS_DHE_DSS_WITH_AES_128_GCM_SHA256",
        TLS_DHE_DSS_WITH_AES_256_GCM_SHA384 = 0x00a3 => "TLS_DHE_DSS_WITH_AES_256_GCM_SHA384",
        TLS_EMPTY_RENEGOTIATION_INFO_SCSV = 0x00ff => "TLS_EMPTY_RENEGOTIATION_INFO_SCSV",
        TLS_AES_128_GCM_SHA256 = 0x1301 => "TLS_AES_128_GCM_SHA256",
        TLS_AES_256_GCM_SHA384 = 0x1302 => "TLS_AES_256_GCM_SHA384",
        TLS_CHACHA20_POLY1305_SHA256 = 0x1303 => "TLS_CHACHA20_POLY1305_SHA256",
        TLS_AES_128_CCM_SHA256 = 0x1304 => "TLS_AES_128_CCM_SHA256",
        TLS_AES_128_CCM_8_SHA256 = 0x1305 => "TLS_AES_128_CCM_8_SHA256",
        TLS_FALLBACK_SCSV = 0x5600 => "TLS_FALLBACK_SCSV",
        TLS_ECDH_ECDSA_WITH_RC4_128_SHA = 0xc002 => "TLS_ECDH_ECDSA_WITH_RC4_128_SHA",
        TLS_ECDH_ECDSA_WITH_3DES_EDE_CBC_SHA = 0xc003 => "TLS_ECDH_ECDSA_WITH_3DES_EDE_CBC_SHA",
        TLS_ECDH_ECDSA_WITH_AES_128_CBC_SHA = 0xc004 => "TLS_ECDH_ECDSA_WITH_AES_128_CBC_SHA",
        TLS_ECDH_ECDSA_WITH_AES_256_CBC_SHA = 0xc005 => "TLS_ECDH_ECDSA_WITH_AES_256_CBC_SHA",
        TLS_ECDHE_ECDSA_WITH_RC4_128_SHA = 0xc007 => "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
        TLS_ECDHE_ECDSA_WITH_3DES_EDE_CBC_SHA = 0xc008 => "TLS_ECDHE_ECDSA_WITH_3DES_EDE_CBC_SHA",
        TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA = 0xc009 => "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
        TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA = 0xc00a => "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
        TLS_ECDH_RSA_WITH_RC4_128_SHA = 0xc00c => "TLS_ECDH_RSA_WITH_RC4_128_SHA",
        TLS_ECDH_RSA_WITH_3DES_EDE_CBC_SHA = 0xc00d => "TLS_ECDH_RSA_WITH_3DES_EDE_CBC_SHA",
        TLS_ECDH_RSA_WITH_AES_128_CBC_SHA = 0xc00e => "TLS_ECDH_RSA_WITH_AES_128_CBC_SHA",
        TLS_ECDH_RSA_WITH_AES_256_CBC_SHA = 0xc00f => "TLS_ECDH_RSA_WITH_AES_256_CBC_SHA",
        TLS_ECDHE_RSA_WITH_RC4_128_SHA = 0xc011 => "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
        TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA = 0xc012 => "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
        TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA = 0xc013 => "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
        TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA = 0xc014 => "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
        TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256 = 0xc023 => "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
        TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384 = 0xc024 => "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384",
        TLS_ECDH_ECDSA_WITH_AES_128_CBC_SHA256 = 0xc025 => "TLS_ECDH_ECDSA_WITH_AES_128_CBC_SHA256",
        TLS_ECDH_ECDSA_WITH_AES_256_CBC_SHA384 = 0xc026 => "TLS_ECDH_ECDSA_WITH_AES_256_CBC_SHA384",
        TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256 = 0xc027 => "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
        TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384 = 0xc028 => "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384",
        TLS_ECDH_RSA_WITH_AES_128_CBC_SHA256 = 0xc029 => "TLS_ECDH_RSA_WITH_AES_128_CBC_SHA256",
        TLS_ECDH_RSA_WITH_AES_256_CBC_SHA384 = 0xc02a => "TLS_ECDH_RSA_WITH_AES_256_CBC_SHA384",
        TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 = 0xc02b => "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 = 0xc02c => "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        TLS_ECDH_ECDSA_WITH_AES_128_GCM_SHA256 = 0xc02d => "TLS_ECDH_ECDSA_WITH_AES_128_GCM_SHA256",
        TLS_ECDH_ECDSA_WITH_AES_256_GCM_SHA384 = 0xc02e => "TLS_ECDH_ECDSA_WITH_AES_256_GCM_SHA384",
        TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 = 0xc02f => "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 = 0xc030 => "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        TLS_ECDH_RSA_WITH_AES_128_GCM_SHA256 = 0xc031 => "TLS_ECDH_RSA_WITH_AES_128_GCM_SHA256",
        TLS_ECDH_RSA_WITH_AES_256_GCM_SHA384 = 0xc032 => "TLS_ECDH_RSA_WITH_AES_256_GCM_SHA384",
        TLS_RSA_WITH_AES_128_CCM = 0xc09c => "TLS_RSA_WITH_AES_128_CCM",
        TLS_RSA_WITH_AES_256_CCM = 0xc09d => "TLS_RSA_WITH_AES_256_CCM",
        TLS_DHE_RSA_WITH_AES_128_CCM = 0xc09e => "TLS_DHE_RSA_WITH_AES_128_CCM",
        TLS_DHE_RSA_WITH_AES_256_CCM = 0xc09f => "TLS_DHE_RSA_WITH_AES_256_CCM",
        TLS_RSA_WITH_AES_128_CCM_8 = 0xc0a0 => "TLS_RSA_WITH_AES_128_CCM_8",
        TLS_RSA_WITH_AES_256_CCM_8 = 0xc0a1 => "TLS_RSA_WITH_AES_256_CCM_8",
        TLS_DHE_RSA_WITH_AES_128_CCM_8 = 0xc0a2 => "TLS_DHE_RSA_WITH_AES_128_CCM_8",
        TLS_DHE_RSA_WITH_AES_256_CCM_8 = 0xc0a3 => "TLS_DHE_RSA_WITH_AES_256_CCM_8",
        TLS_ECDHE_ECDSA_WITH_AES_128_CCM = 0xc0ac => "TLS_ECDHE_ECDSA_WITH_AES_128_CCM",
        TLS_ECDHE_ECDSA_WITH_AES_256_CCM = 0xc0ad => "TLS_ECDHE_ECDSA_WITH_AES_256_CCM",
        TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8 = 0xc0ae => "TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8",
        TLS_ECDHE_ECDSA_WITH_AES_256_CCM_8 = 0xc0af => "TLS_ECDHE_ECDSA_WITH_AES_256_CCM_8",
        TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 = 0xcca8 => "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256 = 0xcca9 => "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256 = 0xccaa => "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        TLS_PSK_WITH_CHACHA20_POLY1305_SHA256 = 0xccab => "TLS_PSK_WITH_CHACHA20_POLY1305_SHA256",
        TLS_ECDHE_PSK_WITH_CHACHA20_POLY1305_SHA256 = 0xccac => "TLS_ECDHE_PSK_WITH_CHACHA20_POLY1305_SHA256",
        TLS_DHE_PSK_WITH_CHACHA20_POLY1305_SHA256 = 0xccad => "TLS_DHE_PSK_WITH_CHACHA20_POLY1305_SHA256",
        TLS_RSA_PSK_WITH_CHACHA20_POLY1305_SHA256 = 0xccae => "TLS_RSA_PSK_WITH_CHACHA20_POLY1305_SHA256",
    }
}

registry! {
    /// A certificate compression algorithm (RFC 8879 section 7.3).
    CertificateCompressionAlgorithm(u16) {
        ZLIB = 0x0001 => "zlib",
        BROTLI = 0x0002 => "brotli",
        ZSTD = 0x0003 => "zstd",
    }
}

registry! {
    /// An EC point format (RFC 8422 section 5.1.2).
    EcPointFormat(u8) {
        UNCOMPRESSED = 0x00 => "uncompressed",
        ANSIX962_COMPRESSED_PRIME = 0x01 => "ansiX962_compressed_prime",
        ANSIX962_COMPRESSED_CHAR2 = 0x02 => "ansiX962_compressed_char2",
    }
}

registry! {
    /// A PSK key exchange mode (RFC 8446 section 4.2.9).
    PskKeyExchangeMode(u8) {
        PSK_KE = 0x00 => "psk_ke",
        PSK_DHE_KE = 0x01 => "psk_dhe_ke",
    }
}

registry! {
    /// A legacy compression method (RFC 5246 section 7.4.1.2, RFC 3749).
    CompressionMethod(u8) {
        NULL = 0x00 => "null",
        DEFLATE = 0x01 => "DEFLATE",
        LZS = 0x40 => "LZS",
    }
}
