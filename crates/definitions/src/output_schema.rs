//! Structured answers: a task may give a JSON Schema (`output_schema`) that its final
//! answer must satisfy. The schema is shown to the model in the system prompt; the
//! answer is parsed as JSON (a ```json fenced block around it is tolerated) and
//! validated; an answer that does not satisfy it is sent back to the model once, with
//! the validation errors (the agent crate's `run_session_with_schema`), and a second
//! one fails the task with the result error `output_schema_mismatch`.
//!
//! The answer travels as a `google.protobuf.Struct`, so it must be a JSON object: a
//! schema whose top-level `type` rules objects out is refused when parsed.

use serde_json::Value;

/// Largest schema a task may carry.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// Most validation errors shown to the model or in the task's error.
const MAX_ERRORS: usize = 10;

/// A compiled JSON Schema for a task's answer.
#[derive(Debug)]
pub struct OutputSchema {
    schema: Value,
    validator: jsonschema::Validator,
}

impl OutputSchema {
    /// Parses and compiles `text`; the error says what is wrong with it (for an
    /// `INVALID_ARGUMENT` naming `output_schema`).
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.len() > MAX_SCHEMA_BYTES {
            return Err(format!(
                "is {} bytes, more than the limit of {MAX_SCHEMA_BYTES} bytes",
                text.len()
            ));
        }
        let schema: Value =
            serde_json::from_str(text).map_err(|e| format!("is not valid json: {e}"))?;
        if !schema.is_object() {
            return Err("must be a JSON Schema object, such as {\"type\": \"object\"}".into());
        }
        let allows_object = match schema.get("type") {
            None => true,
            Some(Value::String(t)) => t == "object",
            Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
            Some(_) => false,
        };
        if !allows_object {
            return Err(
                "must describe a JSON object (its `type` must be \"object\"): the answer is returned as output.structured, an object"
                    .into(),
            );
        }
        let validator = jsonschema::validator_for(&schema)
            .map_err(|e| format!("is not a valid JSON Schema: {e}"))?;
        Ok(Self { schema, validator })
    }

    /// What the system prompt tells the model about its answer.
    pub fn instructions(&self) -> String {
        let pretty =
            serde_json::to_string_pretty(&self.schema).unwrap_or_else(|_| self.schema.to_string());
        format!(
            "# Answer format\n\nYour final answer must be one JSON object that satisfies the \
             JSON Schema below, and nothing else: no prose before or after it (a ```json \
             fenced block around it is accepted). Use the tools as usual before you answer.\n\n\
             ```json\n{pretty}\n```"
        )
    }

    /// The answer as the JSON object it must be, or every reason it is not, one per
    /// line (at most ten).
    pub fn check(&self, answer: &str) -> Result<Value, String> {
        let value = extract_json(answer)?;
        if !value.is_object() {
            return Err("the answer must be a JSON object".into());
        }
        let errors: Vec<String> = self
            .validator
            .iter_errors(&value)
            .take(MAX_ERRORS)
            .map(|e| {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() { "/".to_owned() } else { at };
                format!("at {at}: {e}")
            })
            .collect();
        if errors.is_empty() {
            Ok(value)
        } else {
            Err(errors.join("\n"))
        }
    }
}

/// The JSON in `answer`: all of it, or the content of its first fenced block.
fn extract_json(answer: &str) -> Result<Value, String> {
    let trimmed = answer.trim();
    if trimmed.is_empty() {
        return Err("the answer is empty; a JSON object was expected".into());
    }
    let whole = serde_json::from_str::<Value>(trimmed);
    let Err(whole_error) = whole else {
        return whole.map_err(|e| e.to_string());
    };
    if let Some(fenced) = fenced_block(trimmed) {
        return serde_json::from_str(fenced.trim())
            .map_err(|e| format!("the fenced block is not valid json: {e}"));
    }
    Err(format!("the answer is not valid json: {whole_error}"))
}

/// The content of the first ``` block (its info string, such as `json`, dropped).
fn fenced_block(text: &str) -> Option<&str> {
    let start = text.find("```")?;
    let after = &text[start + 3..];
    let body_start = after.find('\n')? + 1;
    let body = &after[body_start..];
    let end = body.find("```")?;
    Some(&body[..end])
}

/// What the model is told when its answer does not satisfy the schema.
pub fn correction_prompt(errors: &str) -> String {
    format!(
        "Your answer does not satisfy the required JSON Schema:\n{errors}\n\nAnswer again \
         with only a JSON object that satisfies the schema."
    )
}

/// How the answer fared against the schema.
#[derive(Debug, Clone, PartialEq)]
pub enum Structured {
    /// The task has no schema, or the session did not complete (no answer to check).
    NotChecked,
    /// The answer satisfies the schema.
    Valid(Value),
    /// The answer did not satisfy it, also after one correction: the errors.
    Mismatch(String),
}

#[cfg(test)]
mod tests;
