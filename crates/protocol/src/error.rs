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
