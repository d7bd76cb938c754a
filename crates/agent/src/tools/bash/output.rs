//! The command output buffer: keeps the first and the last bytes, counts the rest.
//!
//! Head and tail, because a build log's cause is usually at the start (the command,
//! the first error) and its verdict at the end; the middle is what a model can most
//! afford to lose.

use std::collections::VecDeque;

/// Bytes kept from the start of the output.
pub(crate) const HEAD_BYTES: usize = 15 * 1024;
/// Bytes kept from the end of the output.
pub(crate) const TAIL_BYTES: usize = 15 * 1024;

/// Combined stdout and stderr, capped at `HEAD_BYTES + TAIL_BYTES`.
#[derive(Debug, Default)]
pub(crate) struct CappedOutput {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: usize,
}

impl CappedOutput {
    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len();
        let room = HEAD_BYTES - self.head.len();
        if room > 0 {
            let take = room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        self.tail.extend(bytes);
        if self.tail.len() > TAIL_BYTES {
            let excess = self.tail.len() - TAIL_BYTES;
            self.tail.drain(..excess);
        }
    }

    /// All bytes the command wrote.
    pub(crate) fn total(&self) -> usize {
        self.total
    }

    pub(crate) fn truncated(&self) -> bool {
        self.total > self.head.len() + self.tail.len()
    }

    /// The kept text, with a marker where bytes were left out; trailing newlines
    /// trimmed. Invalid UTF-8 (or a character cut at the marker) becomes U+FFFD.
    pub(crate) fn render(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        let (front, back) = self.tail.as_slices();
        let tail = [front, back].concat();
        if self.truncated() {
            let omitted = self.total - self.head.len() - self.tail.len();
            text.push_str(&format!("\n\n... ({omitted} bytes omitted) ...\n\n"));
        }
        text.push_str(&String::from_utf8_lossy(&tail));
        let trimmed = text.trim_end_matches(['\n', '\r']).len();
        text.truncate(trimmed);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_kept_whole() {
        let mut out = CappedOutput::default();
        out.push(b"hello ");
        out.push(b"world\n\n");
        assert_eq!(out.render(), "hello world");
        assert!(!out.truncated());
        assert_eq!(out.total(), 13);
    }

    #[test]
    fn long_output_keeps_head_and_tail() {
        let mut out = CappedOutput::default();
        out.push(&vec![b'a'; HEAD_BYTES]);
        for _ in 0..100 {
            out.push(&[b'm'; 1000]);
        }
        out.push(&vec![b'z'; TAIL_BYTES]);
        assert!(out.truncated());
        let text = out.render();
        assert!(text.starts_with(&"a".repeat(HEAD_BYTES)));
        assert!(text.ends_with(&"z".repeat(TAIL_BYTES)));
        assert!(
            text.contains("... (100000 bytes omitted) ..."),
            "marker present"
        );
        assert!(text.len() < HEAD_BYTES + TAIL_BYTES + 100);
    }

    #[test]
    fn output_just_over_the_head_is_not_marked() {
        let mut out = CappedOutput::default();
        out.push(&vec![b'a'; HEAD_BYTES + 10]);
        assert!(!out.truncated());
        assert_eq!(out.render().len(), HEAD_BYTES + 10);
    }
}
