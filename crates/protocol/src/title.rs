//! Session titles: one line of at most [`MAX_TITLE_CHARS`] characters, written by the
//! hidden `title` agent for a new root session (`taskwire_agent::title`, which cleans
//! the model's answer to this shape) and carried by its result. [`check_title`] is the
//! check at the wire boundary, so a stored title always holds.

use crate::ProtocolError;

/// The longest title, in characters.
pub const MAX_TITLE_CHARS: usize = 80;

/// `title` as it arrived on the wire: empty is none; otherwise one line of at most
/// [`MAX_TITLE_CHARS`] characters without control characters.
pub fn check_title(title: String) -> Result<Option<String>, ProtocolError> {
    if title.is_empty() {
        return Ok(None);
    }
    if title.chars().count() > MAX_TITLE_CHARS {
        return Err(ProtocolError::invalid(
            "title",
            format!("is longer than {MAX_TITLE_CHARS} characters"),
        ));
    }
    if title.chars().any(char::is_control) {
        return Err(ProtocolError::invalid(
            "title",
            "must be one line without control characters",
        ));
    }
    Ok(Some(title))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_check_refuses_long_or_multi_line_titles_naming_the_field() {
        assert_eq!(check_title(String::new()), Ok(None));
        assert_eq!(check_title("Fix it".into()), Ok(Some("Fix it".into())));
        for bad in ["x".repeat(81), "two\nlines".into()] {
            let err = check_title(bad).expect_err("refused");
            assert!(err.to_string().contains("title"), "{err}");
        }
    }
}
