//! Compaction: when a session's next request would fill too much of its model's
//! context window, the hidden `compaction` agent summarises the conversation so far
//! and the session goes on from the summary (OpenCode's session compaction).
//!
//! **The estimate.** The next request's size is the input tokens the model reported
//! for the previous request plus a quarter of a token per byte added since (the
//! answer, tool results, a new prompt); with no report yet (a run's first step, or
//! right after a compaction) it is a quarter token per byte of the whole request.
//! Four bytes a token is the usual rule of thumb for English and code; no tokenizer
//! crate is used because the models behind one worker tokenize differently (and
//! Anthropic's tokenizer is not public), while the reported usage corrects the
//! estimate at every step, so its error is bounded by what one step adds.
//!
//! **The summary call.** The conversation is sent as one user message of text (tool
//! calls and results written out, each result cut to [`MAX_RESULT_CHARS`]) after the
//! `compaction` agent's prompt, with no tools: any provider takes it, whatever tool
//! formats the conversation used. Messages not yet answered (a new prompt) are kept
//! verbatim after the summary.

use std::fmt::Write as _;

use taskwire_llm::{ChatRequest, Message, Provider, Role, ToolDef, Usage};

use crate::transcript::{MessageRole, Transcript, TranscriptMessage};
use taskwire_definitions::agent::AgentSpec;

/// The share of the context window a request may fill before the session is
/// compacted, when the configuration does not say.
pub const DEFAULT_COMPACTION_THRESHOLD: f64 = 0.8;

/// A tool result longer than this is cut in the text the summary is written from: the
/// summary needs what a tool found, not every line it printed.
pub const MAX_RESULT_CHARS: usize = 4_000;

/// Sent after the conversation, asking for the summary.
const SUMMARY_REQUEST: &str = "Summarise the conversation above as your instructions say, so \
     that the work can continue from your summary alone.";

/// When a session compacts.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionPolicy {
    /// The model's context window, in tokens.
    pub context_window: u64,
    /// The most tokens the model writes in one answer, when known: room for it is
    /// kept free.
    pub max_output_tokens: Option<u64>,
    /// The share of the window (above 0, at most 1) a request may fill.
    pub threshold: f64,
    /// The model that writes the summaries, when not the session's (a small model).
    pub model: Option<String>,
    /// The `compaction` agent that writes them: the built-in, or a definitions
    /// directory's override of it (its prompt, sampling and `model`).
    pub agent: AgentSpec,
}

impl CompactionPolicy {
    /// The most tokens the next request may hold before the session is compacted:
    /// `threshold` of the window, and never so much that the longest answer would
    /// not fit.
    pub fn limit(&self) -> u64 {
        // Windows are far below 2^52 tokens, so the float is exact enough.
        #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
        #[allow(clippy::cast_sign_loss)]
        let share = (self.context_window as f64 * self.threshold.clamp(0.0, 1.0)) as u64;
        let room = self
            .max_output_tokens
            .map_or(u64::MAX, |out| self.context_window.saturating_sub(out));
        share.min(room).max(1)
    }
}

/// Estimates the size of the next request (see the module docs).
#[derive(Debug, Default)]
pub(super) struct Estimator {
    /// The input tokens reported for the last request, and that request's bytes.
    last: Option<(u64, usize)>,
}

impl Estimator {
    /// Remembers the usage reported for a request of `bytes`.
    pub(super) fn reported(&mut self, usage: Usage, bytes: usize) {
        self.last = (usage.input_tokens > 0).then_some((usage.input_tokens, bytes));
    }

    /// Forgets the last report (the conversation was replaced).
    pub(super) fn reset(&mut self) {
        self.last = None;
    }

    /// The estimated tokens of a request of `bytes`.
    pub(super) fn estimate(&self, bytes: usize) -> u64 {
        match self.last {
            Some((tokens, then)) => tokens + tokens_of(bytes.saturating_sub(then)),
            None => tokens_of(bytes),
        }
    }
}

/// A quarter token per byte, rounded up.
pub(super) fn tokens_of(bytes: usize) -> u64 {
    u64::try_from(bytes.div_ceil(4)).unwrap_or(u64::MAX)
}

/// The bytes a request sends: message texts, tool calls, and `tools_bytes` for the
/// tools offered ([`tools_bytes`], measured once: they do not change in a session).
pub(super) fn request_bytes(messages: &[Message], tools_bytes: usize) -> usize {
    let messages: usize = messages
        .iter()
        .map(|m| {
            m.content.len()
                + m.tool_calls
                    .iter()
                    .map(|c| c.id.len() + c.name.len() + c.arguments.len())
                    .sum::<usize>()
        })
        .sum();
    messages + tools_bytes
}

/// The bytes the definitions of `tools` add to a request: names, descriptions and
/// schemas, read from the schemas' encoded text.
pub(super) fn tools_bytes(tools: &[ToolDef]) -> usize {
    tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.parameters.json().len())
        .sum()
}

/// Where the record splits: the messages to summarise end before the trailing user
/// messages no assistant answered yet. `None` when there is nothing to summarise (no
/// assistant turn since the last compaction), so a summary is never summarised again
/// straight away.
pub(super) fn split_point(record: &Transcript) -> Option<usize> {
    let end = record
        .messages
        .iter()
        .rposition(|m| m.role == MessageRole::Assistant)?
        + 1;
    let start = record.messages.len() - record.since_last_compaction().len();
    (start < end).then_some(end)
}

/// A successful summary.
pub(super) struct Summary {
    pub text: String,
    pub usage: Usage,
}

/// Asks the `compaction` agent for a summary of `record.messages[..end]` (from the
/// last compaction on).
pub(super) async fn summarise(
    provider: &dyn Provider,
    agent: &AgentSpec,
    model: &str,
    record: &Transcript,
    end: usize,
    priority: u8,
) -> Result<Summary, taskwire_llm::LlmError> {
    let older = Transcript {
        session_id: record.session_id.clone(),
        messages: record.messages[..end].to_vec(),
    };
    let request = ChatRequest {
        model: model.to_owned(),
        messages: vec![
            Message::system(agent.prompt.clone()),
            Message::user(format!(
                "{}\n\n{SUMMARY_REQUEST}",
                conversation_text(&older.to_messages())
            )),
        ],
        tools: Vec::new(),
        temperature: agent.temperature,
        top_p: agent.top_p,
        max_tokens: None,
        cache_key: None,
        reasoning_effort: None,
        priority,
        thinking_budget: None,
    };
    let response = provider.chat(&request, &mut |_| {}).await?;
    Ok(Summary {
        text: response.text,
        usage: response.usage,
    })
}

/// The conversation written out as text, results cut to [`MAX_RESULT_CHARS`].
fn conversation_text(messages: &[Message]) -> String {
    let mut text = String::from("<conversation>\n");
    for message in messages {
        let (role, content) = match message.role {
            Role::System => continue,
            Role::User => ("user", message.content.as_str()),
            Role::Assistant => ("assistant", message.content.as_str()),
            Role::Tool => ("tool result", message.content.as_str()),
        };
        let content = cut(content, MAX_RESULT_CHARS);
        let _ = writeln!(text, "[{role}]\n{content}");
        for call in &message.tool_calls {
            let _ = writeln!(text, "[tool call {}] {}", call.name, call.arguments);
        }
        text.push('\n');
    }
    text.push_str("</conversation>");
    text
}

/// `text` cut to at most `max` characters, saying how much was left out.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((at, _)) => format!(
            "{}\n[... {} more characters left out]",
            &text[..at],
            text[at..].chars().count()
        ),
    }
}

/// Records a summary of `record.messages[..end]`: the compaction message goes between
/// them and the trailing user messages, so the record keeps its history and requests
/// start from the summary.
pub(super) fn record_compaction(
    record: &mut Transcript,
    end: usize,
    summary: Summary,
    tokens_before: u64,
) {
    record.messages.insert(
        end,
        TranscriptMessage::compaction(summary.text, tokens_before, summary.usage),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_the_threshold_share_with_room_for_the_longest_answer() {
        let policy = CompactionPolicy {
            context_window: 1000,
            max_output_tokens: None,
            threshold: 0.8,
            model: None,
            agent: taskwire_definitions::builtin::compaction(),
        };
        assert_eq!(policy.limit(), 800);
        let tight = CompactionPolicy {
            max_output_tokens: Some(300),
            ..policy
        };
        assert_eq!(tight.limit(), 700);
    }

    #[test]
    fn the_estimate_adds_a_quarter_token_per_byte_to_the_last_report() {
        let mut estimator = Estimator::default();
        assert_eq!(estimator.estimate(400), 100, "no report: bytes / 4");
        estimator.reported(Usage::tokens(250, 9), 400);
        assert_eq!(estimator.estimate(800), 350);
        estimator.reported(Usage::default(), 800);
        assert_eq!(estimator.estimate(800), 200, "a zero report is no report");
    }

    #[test]
    fn long_results_are_cut_on_a_character_boundary() {
        let long = "é".repeat(10);
        let cut = cut(&long, 4);
        assert!(cut.starts_with("éééé\n"), "{cut}");
        assert!(cut.contains("6 more characters"), "{cut}");
        assert_eq!(super::cut("short", 10), "short");
    }

    #[test]
    fn nothing_is_summarised_until_an_assistant_turn_follows_the_last_summary() {
        let mut record = Transcript::new("s");
        record.messages.push(TranscriptMessage::user("do it"));
        assert_eq!(split_point(&record), None);
        record.messages.push(TranscriptMessage::assistant(
            "build",
            vec![crate::transcript::Part::text("working")],
        ));
        record.messages.push(TranscriptMessage::user("and more"));
        assert_eq!(split_point(&record), Some(2), "the new prompt stays");
        record.messages.insert(
            2,
            TranscriptMessage::compaction("summary", 100, Usage::default()),
        );
        assert_eq!(split_point(&record), None);
    }
}
