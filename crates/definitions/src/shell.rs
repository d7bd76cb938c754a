//! Just enough shell syntax for permissions and slash commands: splitting a command
//! line into the simple commands it runs, and splitting arguments into words.
//!
//! This is not a shell parser. [`split_commands`] exists so that `bash` permission
//! rules see every command of `git status && rm -rf x` (and of `$(...)`
//! substitutions), not just the first; rules then match each part by prefix. It errs
//! towards more, smaller parts, which only ever makes a verdict stricter. Wrappers
//! (`xargs rm`, `env rm`, `find -exec rm`) are not unwrapped, so a `deny` rule on
//! bash is a guard-rail, not a sandbox: allow-lists with a `* ask` default are the
//! dependable shape (the built-in `plan` agent uses one).

/// Words that start a part without being the command itself (`do rm x` runs `rm`).
const RESERVED: [&str; 16] = [
    "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "case", "esac",
    "time", "!", "{", "}",
];

/// Splits `command` on the control operators `;`, newline, `&&`, `||`, `|`, `|&`,
/// `&`, and on subshell parentheses, outside quotes. Command substitutions (`$(...)`,
/// backticks, `<(...)`, `>(...)`) stay in their part and are also split into parts of
/// their own. Leading reserved words (`then`, `do`, ...) and variable assignments
/// (`A=1 cmd`) are dropped from each part; empty parts are left out.
pub fn split_commands(command: &str) -> Vec<String> {
    let mut parts = Vec::new();
    split_into(command, &mut parts);
    parts
}

fn split_into(command: &str, parts: &mut Vec<String>) {
    let chars: Vec<char> = command.chars().collect();
    let mut current = String::new();
    let mut i = 0;
    let flush = |current: &mut String, parts: &mut Vec<String>| {
        let part = strip_prefix_words(current.trim());
        if !part.is_empty() {
            parts.push(part.to_owned());
        }
        current.clear();
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                current.push(c);
                if let Some(&next) = chars.get(i + 1) {
                    current.push(next);
                }
                i += 2;
                continue;
            }
            '\'' => {
                let end = find_from(&chars, i + 1, '\'');
                current.extend(&chars[i..end]);
                i = end;
                continue;
            }
            '"' => {
                // Substitutions run inside double quotes too.
                let end = double_quote_end(&chars, i + 1, parts);
                current.extend(&chars[i..end]);
                i = end;
                continue;
            }
            '`' => {
                let end = find_from(&chars, i + 1, '`');
                split_into(&inner(&chars, i + 1, end, '`'), parts);
                current.extend(&chars[i..end]);
                i = end;
                continue;
            }
            '$' | '<' | '>' if chars.get(i + 1) == Some(&'(') => {
                let end = paren_end(&chars, i + 2);
                split_into(&inner(&chars, i + 2, end, ')'), parts);
                current.extend(&chars[i..end]);
                i = end;
                continue;
            }
            ';' | '\n' | '(' | ')' | '|' => flush(&mut current, parts),
            // `&` is a separator except in redirections: `2>&1`, `&>file`, `<&3`.
            '&' => {
                let redirect = matches!(i.checked_sub(1).map(|p| chars[p]), Some('>' | '<'))
                    || chars.get(i + 1) == Some(&'>');
                if redirect {
                    current.push(c);
                } else {
                    flush(&mut current, parts);
                }
            }
            _ => current.push(c),
        }
        i += 1;
    }
    flush(&mut current, parts);
}

/// The text of a substitution that starts at `from` and ends just before `end`,
/// without its closing character (absent when the input ended first).
fn inner(chars: &[char], from: usize, end: usize, close: char) -> String {
    let end = if end > from && chars.get(end - 1) == Some(&close) {
        end - 1
    } else {
        end
    };
    chars[from.min(end)..end].iter().collect()
}

/// The index just past the next unescaped `close` at or after `from` (or the end).
fn find_from(chars: &[char], from: usize, close: char) -> usize {
    let mut i = from;
    while i < chars.len() {
        if chars[i] == close {
            return i + 1;
        }
        // Backslash escapes the closing backtick but not the closing single quote.
        if chars[i] == '\\' && close == '`' {
            i += 1;
        }
        i += 1;
    }
    chars.len()
}

/// The index just past the closing `"`, splitting substitutions found on the way.
fn double_quote_end(chars: &[char], from: usize, parts: &mut Vec<String>) -> usize {
    let mut i = from;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            '"' => return i + 1,
            '$' if chars.get(i + 1) == Some(&'(') => {
                let end = paren_end(chars, i + 2);
                split_into(&inner(chars, i + 2, end, ')'), parts);
                i = end;
                continue;
            }
            '`' => {
                let end = find_from(chars, i + 1, '`');
                split_into(&inner(chars, i + 1, end, '`'), parts);
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    chars.len()
}

/// The index just past the `)` that closes a `(` opened before `from`, skipping
/// quoted text and nested parentheses.
fn paren_end(chars: &[char], from: usize) -> usize {
    let mut depth = 1usize;
    let mut i = from;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            '\'' => {
                i = find_from(chars, i + 1, '\'');
                continue;
            }
            '"' => {
                i = double_quote_end(chars, i + 1, &mut Vec::new());
                continue;
            }
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    chars.len()
}

/// Drops leading reserved words and `NAME=value` assignments, which run nothing.
fn strip_prefix_words(mut part: &str) -> &str {
    loop {
        let word_end = word_end(part);
        let word = &part[..word_end];
        let is_assignment = word.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        });
        if word.is_empty() || !(RESERVED.contains(&word) || is_assignment) {
            return part;
        }
        part = part[word_end..].trim_start();
    }
}

/// The byte length of the first word of `text`: up to unquoted whitespace.
fn word_end(text: &str) -> usize {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (index, c) in text.char_indices() {
        match (quote, c) {
            _ if escaped => escaped = false,
            (Some('\''), '\'') | (Some('"'), '"') => quote = None,
            (Some('\''), _) => {}
            (_, '\\') => escaped = true,
            (None, '\'' | '"') => quote = Some(c),
            (None, c) if c.is_whitespace() => return index,
            _ => {}
        }
    }
    text.len()
}

/// Splits `text` into words like a shell would for arguments: whitespace separates,
/// single and double quotes group (and are removed), a backslash escapes the next
/// character outside single quotes. An unclosed quote runs to the end.
pub fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('\''), c) => word.push(c),
            (_, '\\') => {
                if let Some(next) = chars.next() {
                    word.push(next);
                }
                in_word = true;
            }
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(command: &str) -> Vec<String> {
        split_commands(command)
    }

    #[test]
    fn control_operators_split_commands() {
        assert_eq!(parts("git status --short"), ["git status --short"]);
        assert_eq!(
            parts("git status && rm -rf x || echo no; ls | wc -l & sleep 1"),
            [
                "git status",
                "rm -rf x",
                "echo no",
                "ls",
                "wc -l",
                "sleep 1"
            ]
        );
        assert_eq!(parts("a\nb |& c"), ["a", "b", "c"]);
        assert_eq!(parts("  ;; "), Vec::<String>::new());
    }

    #[test]
    fn quotes_and_redirections_do_not_split() {
        assert_eq!(parts("grep 'a && b; c' file"), ["grep 'a && b; c' file"]);
        assert_eq!(parts(r#"echo "x | y" \; z"#), [r#"echo "x | y" \; z"#]);
        assert_eq!(parts("make 2>&1 &>log"), ["make 2>&1 &>log"]);
    }

    #[test]
    fn substitutions_are_checked_as_commands_of_their_own() {
        assert_eq!(
            parts("echo $(rm -rf /) done"),
            ["rm -rf /", "echo $(rm -rf /) done"]
        );
        assert_eq!(parts("echo `curl x`"), ["curl x", "echo `curl x`"]);
        assert_eq!(parts(r#"echo "$(id)""#), ["id", r#"echo "$(id)""#]);
        assert_eq!(
            parts("diff <(ls a) <(ls b)"),
            ["ls a", "ls b", "diff <(ls a) <(ls b)"]
        );
        assert_eq!(
            parts("echo $(echo $(whoami))"),
            ["whoami", "echo $(whoami)", "echo $(echo $(whoami))"]
        );
    }

    #[test]
    fn reserved_words_subshells_and_assignments_are_dropped() {
        assert_eq!(parts("for f in *; do rm $f; done"), ["f in *", "rm $f"]);
        assert_eq!(parts("(cd x && rm y)"), ["cd x", "rm y"]);
        assert_eq!(parts("FOO=1 BAR='a b' rm x"), ["rm x"]);
        assert_eq!(parts("if true; then ls; fi"), ["true", "ls"]);
        // An assignment alone runs nothing (`x==1` sets x to "=1").
        assert!(parts("x==1").is_empty());
        assert_eq!(parts("test x = 1"), ["test x = 1"]);
    }

    #[test]
    fn unbalanced_input_never_panics() {
        for input in [
            "echo 'x", "echo \"x", "echo $(x", "echo `x", "\\", "$(", "a &", "é'ü",
        ] {
            let _ = parts(input);
            let _ = split_words(input);
        }
    }

    #[test]
    fn words_split_like_a_shell() {
        assert_eq!(split_words("a  b\tc"), ["a", "b", "c"]);
        assert_eq!(
            split_words(r#"src/app.ts "two words" 'single $x' a\ b"#),
            ["src/app.ts", "two words", "single $x", "a b"]
        );
        assert_eq!(split_words(r#""" x"#), ["", "x"]);
        assert_eq!(split_words("'open quote"), ["open quote"]);
        assert!(split_words("   ").is_empty());
    }
}
