//! Forked context (seed 004's `forkContext`): a `task` call with `fork: true` starts
//! its child from the parent's conversation so far instead of cold, so the child
//! continues the parent's thinking.
//!
//! The parent's session takes a [`Fork`] when a step calls `task` with `fork: true`:
//! its system prompt and tool definitions as it sends them, and its conversation up to
//! that step, normalised (the step's text kept, its calls, which have no results yet,
//! removed; the parent's usage left out, its spend is the parent's). The child's
//! session ([`crate::session::SessionParams::fork`]) sends that system prompt and those
//! tools, then that conversation, a separator message ([`separator`]) and its own
//! prompt: its first request begins with the parent's last request, byte for byte,
//! under the parent's prompt cache key, so the provider's cached prefix serves it. The
//! child runs only the tools its own agent and rules allow; a call to another of the
//! parent's tools is refused.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use taskwire_llm::{ToolDef, ToolSchema};
use taskwire_protocol::pb;

use crate::transcript::{Part, Transcript, TranscriptMessage};

/// A parent's conversation for a forked child.
#[derive(Debug, Clone, PartialEq)]
pub struct Fork {
    /// The parent's system prompt, as sent.
    pub system: String,
    /// The tools the parent was offered, as sent.
    pub tools: Vec<ToolDef>,
    /// The parent's conversation, normalised.
    pub transcript: Transcript,
    /// The parent's prompt cache key.
    pub cache_key: String,
}

#[derive(Serialize, Deserialize)]
struct WireTool<'a> {
    #[serde(borrow)]
    name: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    description: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    parameters: &'a RawValue,
}

impl Fork {
    /// The fork of a parent whose conversation is `record` and whose step in progress
    /// said `parts` (and called tools, left out).
    pub fn take(
        system: &str,
        tools: &[ToolDef],
        record: &Transcript,
        agent: &str,
        parts: &[Part],
        cache_key: String,
    ) -> Self {
        let mut transcript = record.clone();
        let said: Vec<Part> = parts
            .iter()
            .filter(|part| matches!(part, Part::Text { .. }))
            .cloned()
            .collect();
        if !said.is_empty() {
            transcript
                .messages
                .push(TranscriptMessage::assistant(agent.to_owned(), said));
        }
        for message in &mut transcript.messages {
            message.parts.retain(|part| !part.is_unfinished_call());
            for part in &mut message.parts {
                if let Part::StepFinish { usage } = part {
                    *usage = Default::default();
                }
            }
        }
        transcript.messages.retain(|m| !m.parts.is_empty());
        Self {
            system: system.to_owned(),
            tools: tools.to_vec(),
            transcript,
            cache_key,
        }
    }

    pub fn to_wire(&self) -> pb::ForkContext {
        let tools: Vec<WireTool<'_>> = self
            .tools
            .iter()
            .map(|t| WireTool {
                name: std::borrow::Cow::Borrowed(&t.name),
                description: std::borrow::Cow::Borrowed(&*t.description),
                parameters: t.parameters.raw(),
            })
            .collect();
        pb::ForkContext {
            system: self.system.clone(),
            tools_json: serde_json::to_string(&tools).unwrap_or_default(),
            transcript_json: serde_json::to_string(&self.transcript).unwrap_or_default(),
            cache_key: self.cache_key.clone(),
        }
    }

    /// The fork a request carries; `Err` names what could not be read.
    pub fn from_wire(wire: &pb::ForkContext) -> Result<Self, String> {
        let tools: Vec<WireTool<'_>> =
            serde_json::from_str(&wire.tools_json).map_err(|e| format!("fork.tools_json: {e}"))?;
        let tools = tools
            .into_iter()
            .map(|t| {
                let schema: serde_json::Value = serde_json::from_str(t.parameters.get())
                    .map_err(|e| format!("fork.tools_json: {e}"))?;
                Ok(ToolDef {
                    name: Arc::from(t.name.as_ref()),
                    description: t.description.as_ref().into(),
                    parameters: ToolSchema::new(&schema),
                })
            })
            .collect::<Result<_, String>>()?;
        let transcript = serde_json::from_str(&wire.transcript_json)
            .map_err(|e| format!("fork.transcript_json: {e}"))?;
        Ok(Self {
            system: wire.system.clone(),
            tools,
            transcript,
            cache_key: wire.cache_key.clone(),
        })
    }

    /// The child's session to start with: the parent's conversation, then the
    /// separator, under the child's own session id.
    pub fn child_history(
        &self,
        session_id: &str,
        agent: &str,
        prompt: &str,
        tools: &[&str],
    ) -> Transcript {
        let mut transcript = Transcript::new(session_id);
        transcript.messages = self.transcript.messages.clone();
        transcript
            .messages
            .push(TranscriptMessage::synthetic_user(separator(
                agent, prompt, tools,
            )));
        transcript
    }
}

/// The message between the parent's conversation and a forked child's prompt: whose
/// the conversation is, who the child is now and what it may use.
pub fn separator(agent: &str, prompt: &str, tools: &[&str]) -> String {
    let mut text = format!(
        "The conversation above is that of the agent that started you, up to its call of \
         the task tool; it is your context, not yours to continue. You are now the `{agent}` \
         subagent, running as a task of your own: do the task in the next message, and \
         answer with what the agent that started you needs."
    );
    if !prompt.trim().is_empty() {
        text.push_str("\n\nYour instructions as `");
        text.push_str(agent);
        text.push_str("`:\n");
        text.push_str(prompt.trim());
    }
    text.push_str("\n\nThe tools you may use: ");
    if tools.is_empty() {
        text.push_str("none");
    } else {
        text.push_str(&tools.join(", "));
    }
    text.push_str(". A call to any other tool is refused.");
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use taskwire_llm::{ToolCall, Usage};

    use super::*;

    fn tool(name: &str) -> ToolDef {
        ToolDef {
            name: Arc::from(name),
            description: "does it".into(),
            parameters: ToolSchema::new(
                &json!({"type": "object", "properties": {"b": {}, "a": {}}}),
            ),
        }
    }

    #[test]
    fn a_fork_keeps_the_steps_text_drops_its_pending_calls_and_the_parents_spend() {
        let mut record = Transcript::new("ses-parent");
        record.messages.push(TranscriptMessage::user("refactor"));
        record.messages.push(TranscriptMessage::assistant(
            "build".to_owned(),
            vec![
                Part::text("reading"),
                Part::tool_call(
                    "r1",
                    "read",
                    json!({"filePath": "a"}),
                    "a",
                    Ok("1\tx".to_owned()),
                ),
                Part::StepFinish {
                    usage: Usage::tokens(100, 10),
                },
            ],
        ));
        let call = ToolCall {
            id: "t1".into(),
            name: "task".into(),
            arguments: json!({"fork": true}).to_string(),
        };
        let step = [Part::text("delegating"), Part::pending_call(&call)];
        let fork = Fork::take(
            "sys",
            &[tool("read")],
            &record,
            "build",
            &step,
            "ses-parent".into(),
        );

        assert_eq!(fork.transcript.messages.len(), 3);
        let last = &fork.transcript.messages[2];
        assert_eq!(
            last.parts,
            vec![Part::text("delegating")],
            "the step's text, not its call"
        );
        assert_eq!(
            fork.transcript.usage(),
            Usage::default(),
            "the parent's spend stays its own"
        );
        assert_eq!(
            fork.transcript.messages[1].parts.len(),
            3,
            "finished calls and their results stay"
        );

        let back = Fork::from_wire(&fork.to_wire()).expect("reads back");
        assert_eq!(back, fork);
        assert_eq!(
            back.tools[0].parameters.json(),
            fork.tools[0].parameters.json(),
            "the schema is sent as the parent sent it"
        );

        let child = fork.child_history("ses-child", "explore", "You search.", &["read", "grep"]);
        assert_eq!(child.session_id, "ses-child");
        let separator = child.messages.last().expect("separator").text();
        assert!(
            separator.contains("You are now the `explore` subagent"),
            "{separator}"
        );
        assert!(
            separator.contains("Your instructions as `explore`:\nYou search."),
            "{separator}"
        );
        assert!(
            separator.ends_with(
                "The tools you may use: read, grep. A call to any other tool is refused."
            ),
            "{separator}"
        );
    }

    #[test]
    fn an_unreadable_fork_names_its_field() {
        let mut wire =
            Fork::take("s", &[], &Transcript::new("p"), "build", &[], "k".into()).to_wire();
        wire.tools_json = "{".into();
        assert!(
            Fork::from_wire(&wire)
                .expect_err("refused")
                .starts_with("fork.tools_json")
        );
        let mut wire =
            Fork::take("s", &[], &Transcript::new("p"), "build", &[], "k".into()).to_wire();
        wire.transcript_json = "[]".into();
        assert!(
            Fork::from_wire(&wire)
                .expect_err("refused")
                .starts_with("fork.transcript_json")
        );
    }
}
