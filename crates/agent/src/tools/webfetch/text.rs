//! HTML to plain text for `webfetch` with `format: text`: the words a reader sees,
//! with line breaks where blocks end. Tolerant rather than exact: pages are often
//! broken HTML, and the model only needs the text.

use super::SKIPPED_TAGS;

/// Tags that end a line of text.
const BLOCK_TAGS: [&str; 32] = [
    "address",
    "article",
    "aside",
    "blockquote",
    "br",
    "dd",
    "div",
    "dl",
    "dt",
    "figcaption",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "li",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "table",
    "td",
    "th",
    "title",
    "tr",
];

/// The visible text of `html`: tags dropped, the content of scripts and styles left
/// out, entities decoded, runs of blank space collapsed.
pub(super) fn html_to_text(html: &str) -> String {
    let mut raw = String::with_capacity(html.len() / 2);
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        push_text(&mut raw, &rest[..open]);
        rest = &rest[open..];
        let starts_tag = rest[1..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '/' | '!' | '?'));
        if !starts_tag {
            raw.push('<');
            rest = &rest[1..];
            continue;
        }
        if let Some(comment) = rest.strip_prefix("<!--") {
            rest = comment.find("-->").map_or("", |end| &comment[end + 3..]);
            continue;
        }
        let Some(close) = rest.find('>') else {
            // An unclosed tag at the very end: keep it as text.
            push_text(&mut raw, rest);
            rest = "";
            break;
        };
        let tag = &rest[1..close];
        rest = &rest[close + 1..];
        let closing = tag.starts_with('/');
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        if !closing && !tag.ends_with('/') && SKIPPED_TAGS.contains(&name.as_str()) {
            rest = skip_element(rest, &name);
            continue;
        }
        if BLOCK_TAGS.contains(&name.as_str()) {
            raw.push('\n');
        }
    }
    push_text(&mut raw, rest);
    collapse(&raw)
}

/// Appends a text run: entities decoded, and newlines in the source made spaces,
/// since in HTML only elements break lines.
fn push_text(raw: &mut String, text: &str) {
    raw.push_str(&decode_entities(text).replace(['\n', '\r', '\t'], " "));
}

/// The text after the end tag of element `name` (case-insensitive), or nothing.
fn skip_element<'a>(html: &'a str, name: &str) -> &'a str {
    let end_tag = format!("</{name}");
    let lower = html.to_ascii_lowercase();
    match lower.find(&end_tag) {
        Some(at) => html[at..].find('>').map_or("", |gt| &html[at + gt + 1..]),
        None => "",
    }
}

/// Trims every line, collapses inner whitespace and drops blank lines.
fn collapse(raw: &str) -> String {
    raw.lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Decodes the common named entities and all numeric ones; leaves others as written.
fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let decoded = rest.find(';').filter(|&end| end <= 10).and_then(|end| {
            let entity = &rest[1..end];
            let ch = match entity {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                "nbsp" => Some(' '),
                _ => entity.strip_prefix('#').and_then(|number| {
                    let code = match number.strip_prefix(['x', 'X']) {
                        Some(hex) => u32::from_str_radix(hex, 16).ok(),
                        None => number.parse().ok(),
                    };
                    code.and_then(char::from_u32)
                }),
            };
            ch.map(|ch| (ch, end))
        });
        match decoded {
            Some((ch, end)) => {
                out.push(ch);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_keeps_words_and_block_breaks() {
        let html = "<html><head><title>T</title><style>p{color:red}</style></head>\
                    <body><h1>Hello</h1><p>one <b>two</b>\n   three</p>\
                    <script>var x = '<p>not text</p>';</script>\
                    <ul><li>a</li><li>b</li></ul><!-- hidden --></body></html>";
        assert_eq!(html_to_text(html), "T\nHello\none two three\na\nb");
    }

    #[test]
    fn entities_are_decoded_and_broken_markup_tolerated() {
        assert_eq!(
            html_to_text("<p>a &amp; b &lt;c&gt; &#65;&#x42; &copy; 1 < 2</p>"),
            "a & b <c> AB &copy; 1 < 2"
        );
        assert_eq!(html_to_text("<SCRIPT>x</SCRIPT>y"), "y");
        assert_eq!(html_to_text("<script>never closed"), "");
        assert_eq!(html_to_text("text <b"), "text <b");
    }
}
