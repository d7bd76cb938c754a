//! Why the scripted model refuses a request: what a real API would answer 400 to.

use std::fmt;

/// What is wrong with a request, in the words of the scripted model's 400 answer.
#[derive(Debug, thiserror::Error)]
pub(super) enum InvalidRequest {
    /// A field is missing or of the wrong shape, or the request breaks one of the
    /// API's fixed rules; the text says which, as the API would.
    #[error("{0}")]
    Malformed(&'static str),
    #[error("unknown role {0:?}")]
    UnknownRole(String),
    /// A Messages API message of a role it has no place for (`system`, say).
    #[error("unknown role {0:?} (system goes in the top-level `system`)")]
    UnknownMessagesRole(String),
    #[error("unknown item type {0:?}")]
    UnknownItemType(String),
    /// A chat-completions field sent to the Responses API.
    #[error("unsupported parameter `{0}` (a chat-completions field)")]
    ChatCompletionsField(&'static str),
    #[error("function_call `{0}` must be a string")]
    FunctionCallField(&'static str),
    /// A content part of the wrong direction for its message's role.
    #[error("invalid part type {kind:?} in a {role} message; supported: {allowed:?}")]
    PartType {
        kind: String,
        role: String,
        allowed: &'static [&'static str],
    },
    /// A tool whose schema (under `field`) is not a JSON object.
    #[error("tool {name}: `{field}` must be a json schema object")]
    ToolSchema { name: String, field: &'static str },
    #[error("duplicate function call {0:?}")]
    DuplicateCall(String),
    #[error("function_call_output for {0:?} answers no earlier function_call")]
    OutputAnswersNoCall(String),
    #[error("no function_call_output found for function call {0:?}")]
    CallNotAnswered(String),
    #[error("tool_result for {0:?} answers no tool_use block of the previous message")]
    ResultAnswersNoUse(String),
    #[error("tool_use ids {0:?} were found without tool_result blocks immediately after")]
    UsesNotAnswered(Vec<String>),
    /// What is wrong at one place of the request (`messages[2]: ...`).
    #[error("{at}: {source}")]
    At {
        at: Place,
        #[source]
        source: Box<InvalidRequest>,
    },
}

impl InvalidRequest {
    /// Places an error at `at`, for `map_err`.
    pub(super) fn at(at: Place) -> impl FnOnce(Self) -> Self {
        move |source| Self::At {
            at,
            source: Box::new(source),
        }
    }
}

impl From<&'static str> for InvalidRequest {
    fn from(problem: &'static str) -> Self {
        Self::Malformed(problem)
    }
}

/// A place in a request, as its 400 answer names it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Place {
    /// The Messages API's top-level `system`.
    System,
    Message(usize),
    Tool(usize),
    /// An item of the Responses API's `input`.
    Input(usize),
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::System => f.write_str("system"),
            Self::Message(i) => write!(f, "messages[{i}]"),
            Self::Tool(i) => write!(f, "tools[{i}]"),
            Self::Input(i) => write!(f, "input[{i}]"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_at_a_place_names_the_place_first() {
        let error = InvalidRequest::at(Place::Message(2))(InvalidRequest::UnknownRole("x".into()));
        assert_eq!(error.to_string(), "messages[2]: unknown role \"x\"");
        let error = InvalidRequest::at(Place::System)("`content` must be a string".into());
        assert_eq!(error.to_string(), "system: `content` must be a string");
    }
}
