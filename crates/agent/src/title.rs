//! The hidden `title` agent: a short title for a new root session, from its first
//! message, so listings say what each session is about.
//!
//! The worker calls [`write_title`] beside the session's first step, not before it,
//! and a failure only means no title. The answer is cleaned to one line of at most
//! [`MAX_TITLE_CHARS`] characters, the shape `taskwire_protocol::title` checks on the
//! wire.

use taskwire_llm::{ChatRequest, LlmError, Message, Provider, Usage};

use taskwire_definitions::agent::AgentSpec;

/// The longest title, in characters (the wire check allows no more).
pub const MAX_TITLE_CHARS: usize = 80;

/// How much of the first message the title is written from: its beginning says what
/// the session is about; attachments after it need not be sent.
pub const MAX_SOURCE_CHARS: usize = 2_000;

/// The most tokens the title call may answer with: a title is a few words.
const MAX_TITLE_TOKENS: u32 = 100;

/// A title for a session whose first message is `first_message`, written by `agent`
/// (the built-in `title`, or a definitions directory's override of it), and the call's
/// usage. `Ok((None, usage))` when the model's answer holds no usable title.
/// `priority` is the task's (see `ChatRequest::priority`); `on_delta` hears what the
/// call streams (a wait for a rate-limit slot included).
pub async fn write_title(
    provider: &dyn Provider,
    agent: &AgentSpec,
    model: &str,
    first_message: &str,
    priority: u8,
    on_delta: &mut (dyn FnMut(taskwire_llm::StreamDelta) + Send),
) -> Result<(Option<String>, Usage), LlmError> {
    let source: String = first_message.chars().take(MAX_SOURCE_CHARS).collect();
    let request = ChatRequest {
        model: model.to_owned(),
        messages: vec![
            Message::system(agent.prompt.clone()),
            Message::user(format!(
                "Write the title for the conversation that starts with this message:\n\n<message>\n{source}\n</message>"
            )),
        ],
        tools: Vec::new(),
        temperature: agent.temperature,
        top_p: agent.top_p,
        max_tokens: Some(MAX_TITLE_TOKENS),
        cache_key: None,
        reasoning_effort: None,
        priority,
        thinking_budget: None,
    };
    let response = provider.chat(&request, on_delta).await?;
    Ok((clean_title(&response.text), response.usage))
}

/// A model's answer as a title: its first non-blank line, without quotes, markdown
/// heading marks or a `Title:` label, whitespace collapsed, cut to
/// [`MAX_TITLE_CHARS`] on a word boundary where there is one. `None` when nothing
/// is left.
pub fn clean_title(answer: &str) -> Option<String> {
    let line = answer
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())?;
    let line = line.trim_start_matches('#').trim();
    let line = line
        .strip_prefix("Title:")
        .or_else(|| line.strip_prefix("title:"))
        .unwrap_or(line);
    let line = line.trim().trim_matches(['"', '\'', '`', '*']).trim();
    let words: Vec<&str> = line
        .split_whitespace()
        .map(|word| word.trim_matches(|c: char| c.is_control()))
        .filter(|word| !word.is_empty())
        .collect();
    let mut title = words.join(" ");
    if title.chars().count() > MAX_TITLE_CHARS {
        let cut: String = title.chars().take(MAX_TITLE_CHARS).collect();
        title = match cut.rfind(' ') {
            Some(space) if space > MAX_TITLE_CHARS / 2 => cut[..space].to_owned(),
            _ => cut,
        };
    }
    let title = title.trim_end_matches(['.', ' ']).to_owned();
    (!title.is_empty()).then_some(title)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_models_answer_becomes_one_short_clean_line() {
        assert_eq!(
            clean_title("\n  \"Fix flaky retry test\"  \nbecause...").as_deref(),
            Some("Fix flaky retry test")
        );
        assert_eq!(
            clean_title("# Title: Parser   error\ton line 3.").as_deref(),
            Some("Parser error on line 3")
        );
        assert_eq!(clean_title("  \n \"\" "), None);
        let long = "word ".repeat(40);
        let title = clean_title(&long).expect("a title");
        assert!(title.chars().count() <= MAX_TITLE_CHARS, "{title}");
        assert!(title.ends_with("word"), "cut on a word boundary: {title}");
        let unbroken = "é".repeat(200);
        assert_eq!(
            clean_title(&unbroken).map(|t| t.chars().count()),
            Some(MAX_TITLE_CHARS)
        );
    }
}
