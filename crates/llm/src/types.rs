//! Provider-neutral chat types.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    /// Text content; empty for an assistant turn that only calls tools.
    pub content: String,
    /// Tool calls made by an assistant turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For `Role::Tool`: the call this message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For an assistant turn: the model's thinking before it (Anthropic's extended
    /// thinking), sent back with the turn as the API requires while its tool calls
    /// are answered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasoning: Vec<Reasoning>,
}

/// A block of a model's thinking, as the provider returned it: sent back unchanged
/// (its signature proves it to the provider), never shown as the answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Reasoning {
    /// Thinking in words, with its signature.
    Thinking { text: String, signature: String },
    /// Thinking the provider encrypted (`redacted_thinking`).
    Redacted { data: String },
}

impl Message {
    pub fn system(content: impl Into<String>) -> Self {
        Self::plain(Role::System, content)
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self::plain(Role::User, content)
    }
    pub fn assistant(content: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        Self {
            role: Role::Assistant,
            content: content.into(),
            tool_calls,
            tool_call_id: None,
            reasoning: Vec::new(),
        }
    }
    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: Role::Tool,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.into()),
            reasoning: Vec::new(),
        }
    }
    fn plain(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            reasoning: Vec::new(),
        }
    }
}

/// A tool the model may call, described by a JSON Schema for its arguments.
///
/// Tools do not change while a process runs, so a definition is made once and shared:
/// cloning one copies no text, and the schema is held already encoded, so that a
/// request neither copies nor re-encodes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    pub name: Arc<str>,
    pub description: ToolDescription,
    /// JSON Schema (`{"type":"object","properties":{...}}`).
    pub parameters: ToolSchema,
}

/// A tool's description, held with its encoding as a JSON string, made once and shared
/// between clones: a request writes the encoded form as it is instead of escaping the
/// text again (descriptions run to kilobytes, and every model call sends them all).
#[derive(Clone)]
pub struct ToolDescription(Arc<Described>);

struct Described {
    text: Box<str>,
    json: Box<RawValue>,
}

impl ToolDescription {
    /// Encodes `text`.
    pub fn new(text: &str) -> Self {
        // A string always encodes.
        let json = serde_json::value::to_raw_value(text).expect("a string always encodes");
        Self(Arc::new(Described {
            text: text.into(),
            json,
        }))
    }

    /// The description as a JSON string, for request bodies.
    pub fn raw(&self) -> &RawValue {
        &self.0.json
    }

    /// Whether both are the same shared description (a clone of the other).
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::ops::Deref for ToolDescription {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0.text
    }
}

impl AsRef<str> for ToolDescription {
    fn as_ref(&self) -> &str {
        self
    }
}

impl PartialEq for ToolDescription {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for ToolDescription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

impl std::fmt::Display for ToolDescription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self)
    }
}

impl From<&str> for ToolDescription {
    fn from(text: &str) -> Self {
        Self::new(text)
    }
}

impl From<String> for ToolDescription {
    fn from(text: String) -> Self {
        Self::new(&text)
    }
}

impl From<Arc<str>> for ToolDescription {
    fn from(text: Arc<str>) -> Self {
        Self::new(&text)
    }
}

/// A tool's JSON Schema, encoded once as compact JSON text and shared between clones;
/// it is written into request bodies as it is.
#[derive(Clone)]
pub struct ToolSchema(Arc<RawValue>);

impl ToolSchema {
    /// Encodes `schema`.
    pub fn new(schema: &serde_json::Value) -> Self {
        // Encoding a `Value` cannot fail: its keys are strings and its numbers finite.
        let raw = serde_json::value::to_raw_value(schema).expect("a json value always encodes");
        Self(Arc::from(raw))
    }

    /// The schema as compact JSON text.
    pub fn json(&self) -> &str {
        self.0.get()
    }

    /// The schema as a raw JSON value, for request bodies.
    pub fn raw(&self) -> &RawValue {
        &self.0
    }

    /// Whether the schema is JSON `null` (a tool defined without one).
    pub fn is_null(&self) -> bool {
        self.json() == "null"
    }
}

impl From<serde_json::Value> for ToolSchema {
    fn from(schema: serde_json::Value) -> Self {
        Self::new(&schema)
    }
}

impl PartialEq for ToolSchema {
    fn eq(&self, other: &Self) -> bool {
        self.json() == other.json()
    }
}

impl std::fmt::Debug for ToolSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.json())
    }
}

/// A tool call made by the model. `arguments` is the raw JSON text the model produced;
/// it is parsed by the tool, so a malformed one becomes a tool error the model sees.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// Token usage of one model call (or a sum of calls), and what it cost.
///
/// Providers report the tokens; the cost is set from the model catalogue
/// ([`crate::PricedProvider`]): whole pico-dollars (10⁻¹² USD) so sums stay exact,
/// and the tokens of calls without a price counted apart, never priced at zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The part of `input_tokens` the provider read from its prompt cache (priced at
    /// the catalogue's `cached_input_usd_per_mtok` when it has one).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
    /// The part of `input_tokens` the provider wrote to its prompt cache (Anthropic's
    /// `cache_creation_input_tokens`; priced at the catalogue's
    /// `cache_write_usd_per_mtok` when it has one).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_input_tokens: u64,
    /// What the priced calls cost, in pico-dollars.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cost_picousd: u64,
    /// Tokens of calls whose model has no price in the catalogue.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unpriced_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// What an OpenAI API reports: the input (prompt) tokens, the output tokens, and
    /// the part of the input read from the cache, never more than the input.
    pub fn with_cached(input_tokens: u64, output_tokens: u64, cached: u64) -> Self {
        Self {
            input_tokens,
            output_tokens,
            cached_input_tokens: cached.min(input_tokens),
            ..Self::default()
        }
    }

    /// Only the token counts (what a provider reports).
    pub fn tokens(input_tokens: u64, output_tokens: u64) -> Self {
        Self {
            input_tokens,
            output_tokens,
            ..Self::default()
        }
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, rhs: Self) {
        self.input_tokens = self.input_tokens.saturating_add(rhs.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(rhs.output_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(rhs.cached_input_tokens);
        self.cache_write_input_tokens = self
            .cache_write_input_tokens
            .saturating_add(rhs.cache_write_input_tokens);
        self.cost_picousd = self.cost_picousd.saturating_add(rhs.cost_picousd);
        self.unpriced_tokens = self.unpriced_tokens.saturating_add(rhs.unpriced_tokens);
    }
}

/// One chat turn to send.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<Message>,
    /// Empty means the model is offered no tools.
    pub tools: Vec<ToolDef>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub max_tokens: Option<u32>,
    /// Asks the provider to cache the request's prefix, which the next requests of
    /// the same key repeat: OpenAI's `prompt_cache_key`, Anthropic's `cache_control`
    /// breakpoints on the tools, the system prompt and the conversation so far. A
    /// session's id; `None` for one-off calls (titles).
    pub cache_key: Option<String>,
    /// How hard a reasoning model thinks (`minimal`, `low`, `medium`, `high`): OpenAI's
    /// `reasoning_effort`; other wire formats send nothing for it.
    pub reasoning_effort: Option<String>,
    /// The task's priority, 1 (highest) to 5 (lowest), 0 for the default: orders the
    /// calls waiting for a slot in a model's rate budget. Not sent to the provider.
    pub priority: u8,
    /// Tokens the model may think for before it answers (Anthropic's extended
    /// thinking, at least 1,024); `None`: no extended thinking.
    pub thinking_budget: Option<u32>,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    Stop,
    ToolCalls,
    Length,
    ContentFilter,
    Other(String),
}

/// The complete answer to one chat turn.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    pub finish_reason: FinishReason,
    /// The model's thinking before the answer, to send back with it.
    pub reasoning: Vec<Reasoning>,
}

/// A piece of a streamed answer, forwarded while the turn is still running.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamDelta {
    Text(String),
    /// The call waits `wait` for its slot in the model's rate budget before it is sent.
    RateLimited {
        model: String,
        wait: std::time::Duration,
    },
    /// What the provider's answer said about its limits (headers); read by a
    /// [`LimitedProvider`](crate::limits::LimitedProvider), ignored by others.
    RateHints(crate::limits::RateHints),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_is_written_into_a_body_as_its_value_would_be() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "limit": {"type": "number", "minimum": 0.5}},
            "required": ["path"],
        });
        let encoded = serde_json::to_string(&schema).expect("value encodes");
        let shared = ToolSchema::new(&schema);
        assert_eq!(shared.json(), encoded);
        assert_eq!(
            serde_json::to_string(shared.raw()).expect("raw value encodes"),
            encoded
        );
        assert!(ToolSchema::new(&serde_json::Value::Null).is_null());
    }

    #[test]
    fn a_description_is_written_as_its_json_string() {
        let text = "say \"hi\"\n\tthen \\ go \u{1}";
        let description = ToolDescription::from(text);
        assert_eq!(&*description, text);
        assert_eq!(
            description.raw().get(),
            serde_json::to_string(text).expect("a string encodes")
        );
    }

    #[test]
    fn a_cloned_definition_shares_its_text() {
        let tool = ToolDef {
            name: "grep".into(),
            description: "search files".into(),
            parameters: serde_json::json!({"type": "object"}).into(),
        };
        let copy = tool.clone();
        assert!(tool.description.ptr_eq(&copy.description));
        assert_eq!(
            serde_json::to_string(tool.description.raw()).expect("raw value encodes"),
            "\"search files\""
        );
        assert!(std::ptr::eq(tool.parameters.json(), copy.parameters.json()));
        assert_eq!(tool, copy);
    }
}
