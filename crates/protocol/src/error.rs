//! Errors raised while reading the wire format.

/// A message from the wire could not be turned into a domain value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// A required field is empty or absent.
    #[error("field `{0}` is required")]
    Missing(&'static str),
    /// A field holds a value outside its domain.
    #[error("field `{field}` is invalid: {reason}")]
    Invalid { field: &'static str, reason: String },
    /// An enum field is `*_UNSPECIFIED` or a number this version does not know.
    #[error("field `{0}` has an unspecified or unknown enum value")]
    UnknownEnum(&'static str),
    /// The bytes are not a protobuf message of the expected type.
    #[error("failed to decode {what}: {reason}")]
    Decode { what: &'static str, reason: String },
}

impl ProtocolError {
    pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Self::Invalid {
            field,
            reason: reason.into(),
        }
    }

    /// The name of the field at fault, when there is one.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            Self::Missing(f) | Self::UnknownEnum(f) => Some(f),
            Self::Invalid { field, .. } => Some(field),
            Self::Decode { .. } => None,
        }
    }
}

/// Why a [`crate::PatchRef`] cannot name a patch object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchRefError {
    /// The object name is empty or longer than 255 bytes.
    #[error("its name must be 1 to 255 bytes")]
    NameLength,
    /// The object name holds a control character.
    #[error("its name must not hold control characters")]
    NameControl,
    /// The digest is not 64 lowercase hex digits.
    #[error("its sha256 must be 64 lowercase hex digits")]
    Sha256,
    /// The patch is larger than [`crate::MAX_PATCH_BYTES`].
    #[error("its size {size} is more than the limit of {limit} bytes")]
    TooLarge { size: u64, limit: u64 },
}

/// Why the URL or the reference of a `git` context ref is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GitRefError {
    /// The repository URL is empty.
    #[error("the repository is required")]
    UrlMissing,
    /// The URL or the reference is longer than `limit` bytes.
    #[error("longer than {limit} bytes")]
    TooLong { limit: usize },
    /// The URL holds whitespace or control characters.
    #[error("contains spaces or control characters")]
    UrlCharacters,
    /// The URL could be read as a command-line option.
    #[error("starts with `-`")]
    UrlOption,
    /// The URL names a git transport helper.
    #[error("transport helpers (`<transport>::<address>`) are not allowed")]
    TransportHelper,
    /// The URL has a scheme git may fetch from but taskwire does not allow.
    #[error("use https, http, ssh, git or file URLs")]
    UrlScheme,
    /// The URL is none of the accepted forms.
    #[error("not a URL, an absolute path or `host:path`")]
    UrlForm,
    /// The reference holds a character no branch, tag or commit id has.
    #[error("a branch, tag or commit id has only letters, digits and . _ - / +")]
    ReferenceCharacters,
    /// The reference is not a well-formed git ref name.
    #[error("not a valid branch, tag or commit id")]
    ReferenceForm,
}
