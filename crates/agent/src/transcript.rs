//! The session record: what was said and done, as messages made of parts (OpenCode's
//! `MessageV2`), serialisable so the worker can ship it to the coordinator and a
//! later run, on any worker, can resume from it.
//!
//! Richer than the model's message list: tool results sit in their call's part with
//! the state and title, user text can be marked `synthetic` (written by the system,
//! not a person), a slash command's delegation is a [`SubtaskPart`], and every model
//! step leaves its usage. [`Transcript::to_messages`] turns it back into what a
//! provider takes.
//!
//! A [`Part::Compaction`] (in a user message of its own) stands for every message
//! before it: the `compaction` agent's summary of them. The record keeps the old
//! messages, for people and audits, but the model is sent the last compaction's
//! summary and what follows it.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use taskwire_llm::{Message, ToolCall, Usage};

pub use taskwire_definitions::command::SubtaskPart;

use crate::session::ToolCallState;
use crate::tools::Todo;

/// Stands in for a subtask part when the conversation goes to the model: the
/// delegation itself is not something the model said (OpenCode sends the same).
pub const SUBTASK_USER_TEXT: &str = "The following tool was executed by the user";

/// How the model is shown a compaction's summary, in place of the messages it stands
/// for: the summary replaces `{summary}`.
const COMPACTION_USER_TEXT: &str = include_str!("prompt/compacted.txt");

/// One session's messages, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Transcript {
    pub session_id: String,
    #[serde(default)]
    pub messages: Vec<TranscriptMessage>,
}

/// Who a message is from. Tool results belong to their call's part in the assistant
/// message, and the system prompt is rebuilt from the agent spec on every run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageRole {
    User,
    Assistant,
}

/// One message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TranscriptMessage {
    pub role: MessageRole,
    /// For assistant messages, the agent that wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    pub parts: Vec<Part>,
}

/// A piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    Text {
        text: String,
        /// Written by the system, not by a person or the model (the summary request
        /// after a subtask).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        synthetic: bool,
    },
    /// A tool call and, once finished, its result: `output` when `completed`, `error`
    /// (without the `error: ` the model reads) when `error`.
    ToolCall {
        call_id: String,
        tool: String,
        /// The parsed arguments; the raw text as a string when it was not JSON.
        input: Value,
        state: ToolCallState,
        title: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The end of one model call.
    StepFinish { usage: Usage },
    /// The model's thinking before this turn (extended thinking), kept to send back
    /// with it; never shown as the answer.
    Reasoning { reasoning: taskwire_llm::Reasoning },
    /// A delegation to a subagent made by a slash command, not chosen by the model
    /// (seed 000).
    Subtask(SubtaskPart),
    /// The messages before this one, summarised by the `compaction` agent because the
    /// next request would have filled too much of the model's context window. Always
    /// alone in a synthetic user message; requests start from the last one.
    Compaction {
        summary: String,
        /// The estimated size, in tokens, of the request that would have been sent.
        tokens_before: u64,
        /// The summary call's usage.
        usage: Usage,
    },
}

impl Part {
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text {
            text: text.into(),
            synthetic: false,
        }
    }

    pub fn synthetic_text(text: impl Into<String>) -> Self {
        Self::Text {
            text: text.into(),
            synthetic: true,
        }
    }

    /// A finished tool call: `Ok(output)` or `Err(error text)`.
    pub fn tool_call(
        call_id: impl Into<String>,
        tool: impl Into<String>,
        input: Value,
        title: impl Into<String>,
        result: Result<String, String>,
    ) -> Self {
        let (state, output, error) = match result {
            Ok(output) => (ToolCallState::Completed, Some(output), None),
            Err(error) => (ToolCallState::Error, None, Some(error)),
        };
        Self::ToolCall {
            call_id: call_id.into(),
            tool: tool.into(),
            input,
            state,
            title: title.into(),
            output,
            error,
        }
    }

    /// A call the model just made, recorded before it runs: `pending`, no result.
    pub fn pending_call(call: &ToolCall) -> Self {
        let input = if call.arguments.trim().is_empty() {
            Value::Object(serde_json::Map::new())
        } else {
            serde_json::from_str(&call.arguments)
                .unwrap_or_else(|_| Value::String(call.arguments.clone()))
        };
        Self::ToolCall {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            input,
            state: ToolCallState::Pending,
            title: call.name.clone(),
            output: None,
            error: None,
        }
    }

    /// Whether this is a tool call that has no result (it never finished).
    pub fn is_unfinished_call(&self) -> bool {
        matches!(
            self,
            Self::ToolCall {
                output: None,
                error: None,
                ..
            }
        )
    }

    /// The call as the model made it, for a tool-call part.
    pub fn as_call(&self) -> Option<ToolCall> {
        let Self::ToolCall {
            call_id,
            tool,
            input,
            ..
        } = self
        else {
            return None;
        };
        let arguments = match input {
            Value::String(raw) => raw.clone(),
            other => other.to_string(),
        };
        Some(ToolCall {
            id: call_id.clone(),
            name: tool.clone(),
            arguments,
        })
    }
}

impl TranscriptMessage {
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: MessageRole::User,
            agent: None,
            parts: vec![Part::text(text)],
        }
    }

    /// A user message written by the system, e.g. the request to summarise a subtask.
    pub fn synthetic_user(text: impl Into<String>) -> Self {
        Self {
            role: MessageRole::User,
            agent: None,
            parts: vec![Part::synthetic_text(text)],
        }
    }

    pub fn assistant(agent: impl Into<String>, parts: Vec<Part>) -> Self {
        Self {
            role: MessageRole::Assistant,
            agent: Some(agent.into()),
            parts,
        }
    }

    /// A user message holding a compaction's summary.
    pub fn compaction(summary: impl Into<String>, tokens_before: u64, usage: Usage) -> Self {
        Self {
            role: MessageRole::User,
            agent: None,
            parts: vec![Part::Compaction {
                summary: summary.into(),
                tokens_before,
                usage,
            }],
        }
    }

    /// Whether this message is a compaction's summary.
    pub fn is_compaction(&self) -> bool {
        self.parts
            .iter()
            .any(|part| matches!(part, Part::Compaction { .. }))
    }

    /// This message as a provider takes it: a user message, or an assistant message
    /// followed by one tool result per call (see [`Transcript::to_messages`]).
    pub fn to_messages(&self) -> Vec<Message> {
        let mut messages = Vec::with_capacity(1 + self.parts.len());
        self.push_messages(&mut messages);
        messages
    }

    fn push_messages(&self, messages: &mut Vec<Message>) {
        match self.role {
            MessageRole::User => {
                let texts: Vec<String> = self
                    .parts
                    .iter()
                    .filter_map(|part| match part {
                        Part::Text { text, .. } => Some(text.clone()),
                        Part::Subtask(_) => Some(SUBTASK_USER_TEXT.to_owned()),
                        Part::Compaction { summary, .. } => {
                            Some(COMPACTION_USER_TEXT.replace("{summary}", summary.trim()))
                        }
                        Part::ToolCall { .. }
                        | Part::StepFinish { .. }
                        | Part::Reasoning { .. } => None,
                    })
                    .collect();
                messages.push(Message::user(texts.join("\n\n")));
            }
            MessageRole::Assistant => {
                let mut calls = Vec::new();
                let mut results = Vec::new();
                for part in &self.parts {
                    if let Part::ToolCall {
                        call_id,
                        output,
                        error,
                        ..
                    } = part
                        && let Some(call) = part.as_call()
                    {
                        calls.push(call);
                        let content = match (output, error) {
                            (Some(output), _) => output.clone(),
                            (None, Some(error)) => format!("error: {error}"),
                            (None, None) => "error: tool call did not finish".to_owned(),
                        };
                        results.push(Message::tool_result(call_id, content));
                    }
                }
                let reasoning = self
                    .parts
                    .iter()
                    .filter_map(|part| match part {
                        Part::Reasoning { reasoning } => Some(reasoning.clone()),
                        _ => None,
                    })
                    .collect();
                messages.push(Message {
                    reasoning,
                    ..Message::assistant(self.text(), calls)
                });
                messages.extend(results);
            }
        }
    }

    /// The text parts, joined by blank lines.
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self
            .parts
            .iter()
            .filter_map(|part| match part {
                Part::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        texts.join("\n\n")
    }
}

impl Transcript {
    /// An empty transcript for a new session.
    pub fn new(session_id: impl Into<String>) -> Self {
        Self {
            session_id: session_id.into(),
            messages: Vec::new(),
        }
    }

    /// The conversation as a provider takes it, without the system prompt: from the
    /// last compaction's summary on (or from the start), every assistant message
    /// followed by one tool result per call, in call order. A call recorded before it
    /// finished (a crash mid-turn) gets an error result, so the list is always
    /// well-formed.
    pub fn to_messages(&self) -> Vec<Message> {
        let live = self.since_last_compaction();
        let mut messages = Vec::with_capacity(live.len() * 2);
        for message in live {
            message.push_messages(&mut messages);
        }
        messages
    }

    /// The messages the model is sent: the last compaction and what follows it, or
    /// all of them when there was none.
    pub fn since_last_compaction(&self) -> &[TranscriptMessage] {
        let start = self
            .messages
            .iter()
            .rposition(TranscriptMessage::is_compaction)
            .unwrap_or(0);
        &self.messages[start..]
    }

    /// Removes and returns the last message if it is a step cut short while its tool
    /// calls ran: an assistant message with a call that has no result.
    pub fn take_interrupted_step(&mut self) -> Option<TranscriptMessage> {
        let last = self.messages.last()?;
        let interrupted =
            last.role == MessageRole::Assistant && last.parts.iter().any(Part::is_unfinished_call);
        if interrupted {
            self.messages.pop()
        } else {
            None
        }
    }

    /// Model steps recorded since the last user message: what the run that wrote them
    /// spent of its step budget. A compaction in between is not a user message: the
    /// run went on past it.
    pub fn steps_since_last_user_message(&self) -> u32 {
        let steps = self
            .messages
            .iter()
            .rev()
            .take_while(|message| message.role == MessageRole::Assistant || message.is_compaction())
            .flat_map(|message| &message.parts)
            .filter(|part| matches!(part, Part::StepFinish { .. }))
            .count();
        u32::try_from(steps).unwrap_or(u32::MAX)
    }

    /// The todo list as the last successful `todowrite` left it, to restore the
    /// session state on resume.
    pub fn todos(&self) -> Vec<Todo> {
        self.messages
            .iter()
            .rev()
            .flat_map(|message| message.parts.iter().rev())
            .find_map(|part| match part {
                Part::ToolCall {
                    tool,
                    input,
                    state: ToolCallState::Completed,
                    ..
                } if tool == "todowrite" => input
                    .get("todos")
                    .and_then(|todos| serde_json::from_value(todos.clone()).ok()),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// Usage of all recorded model calls, compactions included.
    pub fn usage(&self) -> Usage {
        let mut total = Usage::default();
        for part in self.messages.iter().flat_map(|message| &message.parts) {
            if let Part::StepFinish { usage } | Part::Compaction { usage, .. } = part {
                total += *usage;
            }
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use taskwire_llm::Role;

    fn sample() -> Transcript {
        let mut transcript = Transcript::new("ses_1");
        transcript.messages = vec![
            TranscriptMessage::user("find the bug"),
            TranscriptMessage::assistant(
                "build",
                vec![
                    Part::text("looking"),
                    Part::tool_call(
                        "c1",
                        "grep",
                        json!({"pattern": "bug"}),
                        "grep bug",
                        Ok("a.rs:1".into()),
                    ),
                    Part::tool_call(
                        "c2",
                        "read",
                        Value::String("{bad".into()),
                        "read",
                        Err("invalid".into()),
                    ),
                    Part::StepFinish {
                        usage: Usage::tokens(10, 2),
                    },
                ],
            ),
            TranscriptMessage {
                role: MessageRole::User,
                agent: None,
                parts: vec![Part::Subtask(SubtaskPart {
                    agent: "explore".into(),
                    description: "look around".into(),
                    prompt: "find tests".into(),
                    command: Some("/explore".into()),
                })],
            },
            TranscriptMessage::synthetic_user("summarise"),
        ];
        transcript
    }

    #[test]
    fn transcript_round_trips_through_json() {
        let transcript = sample();
        let json = serde_json::to_string(&transcript).expect("serializable");
        assert!(json.contains(r#""type":"subtask""#), "{json}");
        assert!(json.contains(r#""synthetic":true"#), "{json}");
        assert!(
            !json.contains(r#""synthetic":false"#),
            "false is omitted: {json}"
        );
        let back: Transcript = serde_json::from_str(&json).expect("round trip");
        assert_eq!(back, transcript);
    }

    #[test]
    fn messages_put_each_result_after_its_call() {
        let messages = sample().to_messages();
        let roles: Vec<_> = messages.iter().map(|m| m.role).collect();
        use Role::*;
        assert_eq!(roles, [User, Assistant, Tool, Tool, User, User]);
        assert_eq!(messages[1].content, "looking");
        assert_eq!(messages[1].tool_calls[0].arguments, r#"{"pattern":"bug"}"#);
        assert_eq!(
            messages[1].tool_calls[1].arguments, "{bad",
            "raw text is kept"
        );
        assert_eq!(messages[2].content, "a.rs:1");
        assert_eq!(messages[3].content, "error: invalid");
        assert_eq!(messages[4].content, SUBTASK_USER_TEXT);
        assert_eq!(messages[5].content, "summarise");
    }

    #[test]
    fn unfinished_calls_get_an_error_result() {
        let mut transcript = Transcript::new("s");
        transcript.messages.push(TranscriptMessage::assistant(
            "build",
            vec![Part::ToolCall {
                call_id: "c1".into(),
                tool: "bash".into(),
                input: json!({"command": "make"}),
                state: ToolCallState::Running,
                title: "make".into(),
                output: None,
                error: None,
            }],
        ));
        let messages = transcript.to_messages();
        assert_eq!(messages[1].content, "error: tool call did not finish");
    }

    #[test]
    fn todos_come_from_the_last_successful_todowrite() {
        let item =
            |id: &str| json!({"id": id, "content": "x", "status": "pending", "priority": "low"});
        let mut transcript = Transcript::new("s");
        transcript.messages.push(TranscriptMessage::assistant(
            "build",
            vec![
                Part::tool_call(
                    "c1",
                    "todowrite",
                    json!({"todos": [item("1")]}),
                    "t",
                    Ok(String::new()),
                ),
                Part::tool_call(
                    "c2",
                    "todowrite",
                    json!({"todos": [item("1"), item("2")]}),
                    "t",
                    Ok(String::new()),
                ),
                Part::tool_call(
                    "c3",
                    "todowrite",
                    json!({"todos": []}),
                    "t",
                    Err("refused".into()),
                ),
            ],
        ));
        let todos = transcript.todos();
        assert_eq!(todos.len(), 2);
        assert_eq!(todos[1].id, "2");
        assert!(Transcript::new("s").todos().is_empty());
    }

    #[test]
    fn requests_start_from_the_last_compaction_and_its_usage_counts() {
        let mut transcript = sample();
        let summary_usage = Usage::tokens(7, 3);
        transcript.messages.insert(
            2,
            TranscriptMessage::compaction("the bug is in a.rs", 900, summary_usage),
        );
        let json = serde_json::to_string(&transcript).expect("serializable");
        assert!(json.contains(r#""type":"compaction""#), "{json}");
        let back: Transcript = serde_json::from_str(&json).expect("round trip");
        assert_eq!(back, transcript);

        let messages = transcript.to_messages();
        assert_eq!(
            messages.len(),
            3,
            "summary, subtask, synthetic: {messages:?}"
        );
        assert!(messages[0].content.contains("the bug is in a.rs"));
        assert!(!messages.iter().any(|m| m.content.contains("looking")));
        let mut expected = sample().usage();
        expected += summary_usage;
        assert_eq!(transcript.usage(), expected);
    }

    #[test]
    fn usage_sums_the_steps() {
        assert_eq!(sample().usage(), Usage::tokens(10, 2));
    }
}
