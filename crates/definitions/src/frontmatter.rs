//! Markdown files with a YAML frontmatter block, as agent and command definitions are
//! written: `---`, YAML keys, `---`, then the body (a system prompt or a template).
//!
//! Keys come back in file order with their raw YAML values, and the typed getters
//! name the key in their errors, so a loader can say
//! ``key `mode`: expected one of primary, subagent, all`` instead of a serde path.

use std::path::Path;

use serde_norway::Value;

use crate::error::LoadError;

/// A parsed definition file.
#[derive(Debug)]
pub(crate) struct Document {
    /// Top-level keys in file order.
    pub fields: Vec<(String, Value)>,
    /// The text after the frontmatter, trimmed.
    pub body: String,
}

/// A bad value: the key (dotted path) and what was wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldError {
    pub key: String,
    pub message: String,
}

impl FieldError {
    pub(crate) fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            message: message.into(),
        }
    }

    pub(crate) fn into_load_error(self, file: &str) -> LoadError {
        LoadError {
            file: file.to_owned(),
            key: Some(self.key),
            message: self.message,
        }
    }
}

/// Splits and parses `text`. A file without a leading `---` line is all body.
pub(crate) fn parse(text: &str) -> Result<Document, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or("");
    if first.trim_end() != "---" {
        return Ok(Document {
            fields: Vec::new(),
            body: text.trim().to_owned(),
        });
    }
    let mut yaml = String::new();
    let mut closed = false;
    for line in lines.by_ref() {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        yaml.push_str(line);
    }
    if !closed {
        return Err("the frontmatter has no closing `---` line".into());
    }
    let body: String = lines.collect();
    let value: Value = serde_norway::from_str(&yaml)
        .map_err(|err| format!("the frontmatter is not valid yaml: {err}"))?;
    let fields = match value {
        Value::Null => Vec::new(),
        Value::Mapping(mapping) => mapping
            .into_iter()
            .map(|(key, value)| match key {
                Value::String(key) => Ok((key, value)),
                other => Err(format!(
                    "frontmatter keys must be strings, found {}",
                    describe(&other)
                )),
            })
            .collect::<Result<_, _>>()?,
        other => {
            return Err(format!(
                "the frontmatter must be a mapping of keys to values, found {}",
                describe(&other)
            ));
        }
    };
    Ok(Document {
        fields,
        body: body.trim().to_owned(),
    })
}

/// The `.md` files directly in `dir`, sorted by name. A missing directory has none.
pub(crate) fn markdown_files(dir: &Path) -> Result<Vec<std::path::PathBuf>, std::io::Error> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err),
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_some_and(|ext| ext == "md") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// One definition file read from disk.
pub(crate) struct SourceFile {
    /// As named in errors (see [`label`]).
    pub file: String,
    /// The file name without `.md`: the default name of what it defines.
    pub stem: String,
    pub text: String,
}

/// Reads every `.md` file in `dir` (see [`markdown_files`]). A directory or file that
/// cannot be read is a [`LoadError`]; the other files are still returned. `kind`
/// names the files in errors ("agent", "command").
pub(crate) fn read_sources(dir: &Path, kind: &str) -> (Vec<SourceFile>, Vec<LoadError>) {
    let paths = match markdown_files(dir) {
        Ok(paths) => paths,
        Err(err) => {
            let error = LoadError {
                file: dir.display().to_string(),
                key: None,
                message: format!("failed to list {kind} files: {err}"),
            };
            return (Vec::new(), vec![error]);
        }
    };
    let (mut sources, mut errors) = (Vec::new(), Vec::new());
    for path in paths {
        let file = label(&path);
        let stem = path
            .file_stem()
            .map(|stem| stem.to_string_lossy().into_owned())
            .unwrap_or_default();
        match std::fs::read_to_string(&path) {
            Ok(text) => sources.push(SourceFile { file, stem, text }),
            Err(err) => {
                tracing::warn!(file = %file, error = %err, "skipping unreadable {kind} file");
                errors.push(LoadError {
                    file,
                    key: None,
                    message: format!("failed to read the file: {err}"),
                });
            }
        }
    }
    (sources, errors)
}

/// How a file is named in errors: its directory's name and its own, e.g.
/// `agents/review.md`.
pub(crate) fn label(path: &Path) -> String {
    let file = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    match path.parent().and_then(Path::file_name) {
        Some(dir) => format!("{}/{file}", dir.to_string_lossy()),
        None => file,
    }
}

/// A short description of a YAML value's kind, for "expected X, found Y".
pub(crate) fn describe(value: &Value) -> String {
    match value {
        Value::Null => "nothing".into(),
        Value::Bool(b) => format!("{b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("{s:?}"),
        Value::Sequence(_) => "a list".into(),
        Value::Mapping(_) => "a mapping".into(),
        Value::Tagged(_) => "a tagged value".into(),
    }
}

pub(crate) fn string(key: &str, value: &Value) -> Result<String, FieldError> {
    match value {
        Value::String(s) => Ok(s.clone()),
        other => Err(FieldError::new(
            key,
            format!("expected a string, found {}", describe(other)),
        )),
    }
}

pub(crate) fn boolean(key: &str, value: &Value) -> Result<bool, FieldError> {
    match value {
        Value::Bool(b) => Ok(*b),
        other => Err(FieldError::new(
            key,
            format!("expected true or false, found {}", describe(other)),
        )),
    }
}

/// A number within `range`.
pub(crate) fn number(
    key: &str,
    value: &Value,
    range: std::ops::RangeInclusive<f64>,
) -> Result<f32, FieldError> {
    let expected = || {
        format!(
            "expected a number from {} to {}, found {}",
            range.start(),
            range.end(),
            describe(value)
        )
    };
    match value.as_f64() {
        Some(n) if range.contains(&n) => Ok(n as f32),
        _ => Err(FieldError::new(key, expected())),
    }
}

/// A whole number of at least 1.
pub(crate) fn positive(key: &str, value: &Value) -> Result<u32, FieldError> {
    value
        .as_u64()
        .filter(|&n| n >= 1)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| {
            FieldError::new(
                key,
                format!(
                    "expected a whole number of at least 1, found {}",
                    describe(value)
                ),
            )
        })
}

/// A mapping with string keys, in file order.
pub(crate) fn mapping<'v>(
    key: &str,
    value: &'v Value,
) -> Result<Vec<(&'v str, &'v Value)>, FieldError> {
    let Value::Mapping(mapping) = value else {
        return Err(FieldError::new(
            key,
            format!("expected a mapping, found {}", describe(value)),
        ));
    };
    mapping
        .iter()
        .map(|(k, v)| match k {
            Value::String(k) => Ok((k.as_str(), v)),
            other => Err(FieldError::new(
                key,
                format!("keys must be strings, found {}", describe(other)),
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frontmatter_and_body_are_split() {
        let doc =
            parse("---\nname: review\nmode: subagent\n---\n\nYou review code.\n").expect("valid");
        let keys: Vec<_> = doc.fields.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["name", "mode"]);
        assert_eq!(doc.body, "You review code.");
    }

    #[test]
    fn files_without_frontmatter_are_all_body() {
        let doc = parse("Just a prompt.\n---\nnot yaml").expect("valid");
        assert!(doc.fields.is_empty());
        assert_eq!(doc.body, "Just a prompt.\n---\nnot yaml");
        let doc = parse("---\n---\nbody").expect("empty frontmatter");
        assert!(doc.fields.is_empty());
        assert_eq!(doc.body, "body");
    }

    #[test]
    fn broken_frontmatter_is_explained() {
        assert_eq!(
            parse("---\nname: x\n").expect_err("unclosed"),
            "the frontmatter has no closing `---` line"
        );
        let err = parse("---\nname: [x\n---\n").expect_err("bad yaml");
        assert!(
            err.starts_with("the frontmatter is not valid yaml"),
            "{err}"
        );
        let err = parse("---\n- a\n---\n").expect_err("a list");
        assert!(err.contains("must be a mapping"), "{err}");
    }

    #[test]
    fn getters_name_the_key() {
        let value: Value = serde_norway::from_str("yes please").expect("yaml");
        assert_eq!(
            boolean("hidden", &value),
            Err(FieldError::new(
                "hidden",
                "expected true or false, found \"yes please\""
            ))
        );
        let zero: Value = serde_norway::from_str("0").expect("yaml");
        assert!(positive("max_steps", &zero).is_err());
        let half: Value = serde_norway::from_str("0.5").expect("yaml");
        assert_eq!(number("top_p", &half, 0.0..=1.0), Ok(0.5));
        assert!(number("top_p", &half, 0.0..=0.1).is_err());
    }

    #[test]
    fn labels_name_the_directory_and_the_file() {
        assert_eq!(
            label(Path::new("/repo/.taskwire/agents/review.md")),
            "agents/review.md"
        );
    }
}
