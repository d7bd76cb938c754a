//! `webfetch`: fetch a web page as markdown, plain text or raw HTML.
//!
//! Only `http` and `https`; at most 5 MiB are downloaded (checked against the
//! declared length first, then while streaming) and a fetch gives up after its
//! timeout (30 s by default). The client needs a rustls crypto provider installed by
//! the binary; without one the tool reports an error instead of panicking.

mod text;

use std::sync::{LazyLock, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use reqwest::Url;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolOutput, parse_args, schema::parameters, str_arg};
use crate::error::{FetchError, ToolError};
use crate::workspace::Workspace;

/// Largest response body downloaded.
const MAX_RESPONSE_BYTES: usize = 5 * 1024 * 1024;
/// Largest text handed to the model; a page is rarely worth more context than this.
const MAX_OUTPUT_BYTES: usize = 256 * 1024;
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
const MAX_TIMEOUT_SECS: u64 = 120;
/// Elements whose content is never page text.
const SKIPPED_TAGS: [&str; 9] = [
    "script", "style", "noscript", "template", "iframe", "object", "embed", "meta", "link",
];

/// Fetches URLs. Holds one HTTP client (and its connection pool) for all sessions.
#[derive(Debug, Default)]
pub struct WebFetchTool {
    client: OnceLock<reqwest::Client>,
}

// In the order the model is offered them, the default first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Format {
    #[default]
    Markdown,
    Text,
    Html,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Args {
    /// The http or https URL to fetch
    url: String,
    /// How to return the content (default markdown)
    #[serde(default)]
    format: Format,
    /// Timeout in seconds (default 30)
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_TIMEOUT_SECS))]
    timeout: Option<u64>,
}

impl WebFetchTool {
    /// The shared client, built on first use: building needs the crypto provider,
    /// which the binary installs after the registry is made.
    fn client(&self) -> Result<reqwest::Client, FetchError> {
        if let Some(client) = self.client.get() {
            return Ok(client.clone());
        }
        let client = reqwest::Client::builder()
            .user_agent(concat!("taskwire-agent/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::limited(5))
            .build()
            .map_err(FetchError::Client)?;
        Ok(self.client.get_or_init(|| client).clone())
    }
}

#[async_trait]
impl Tool for WebFetchTool {
    fn name(&self) -> &'static str {
        "webfetch"
    }

    /// Works on no file: it fetches from the network.
    fn uses_files(&self) -> bool {
        false
    }

    fn description(&self) -> &str {
        "Fetches a URL (http or https) and returns its content. `format` is `markdown` \
         (default; HTML converted to markdown), `text` (HTML reduced to plain text) or \
         `html` (as served). Non-HTML text (plain text, JSON, XML) is returned as is; \
         binary content is refused. At most 5 MiB are downloaded and 256 KiB returned. \
         `timeout` is in seconds (default 30, at most 120)."
    }

    fn parameters(&self) -> Value {
        static PARAMETERS: LazyLock<Value> = LazyLock::new(parameters::<Args>);
        PARAMETERS.clone()
    }

    fn subject(&self, args: &Value, _workspace: &Workspace) -> String {
        str_arg(args, "url").unwrap_or_default().to_owned()
    }

    fn title(&self, args: &Value) -> String {
        format!("webfetch {}", str_arg(args, "url").unwrap_or("?"))
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(self.name(), args)?;
        let url = Url::parse(&args.url).map_err(|err| {
            ToolError::invalid_arguments(self.name(), format!("bad url {}: {err}", args.url))
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ToolError::invalid_arguments(
                self.name(),
                format!(
                    "only http and https urls can be fetched, not {}",
                    url.scheme()
                ),
            ));
        }
        let timeout = args.timeout.map_or(DEFAULT_TIMEOUT, |secs| {
            Duration::from_secs(secs.clamp(1, MAX_TIMEOUT_SECS))
        });
        let fetch_error = |reason: String| ToolError::Fetch {
            url: url.to_string(),
            reason,
        };
        let client = self.client().map_err(|e| fetch_error(e.to_string()))?;
        let fetched = tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
            fetched = tokio::time::timeout(timeout, fetch(&client, &url, args.format)) => fetched,
        };
        let (content_type, body) = match fetched {
            Err(_) => {
                return Err(fetch_error(format!(
                    "no complete response within {} s",
                    timeout.as_secs()
                )));
            }
            Ok(result) => result.map_err(fetch_error)?,
        };
        let (mut output, converted) =
            render(&content_type, &body, args.format).map_err(|e| fetch_error(e.to_string()))?;
        let total = output.len();
        if total > MAX_OUTPUT_BYTES {
            let mut cut = MAX_OUTPUT_BYTES;
            while !output.is_char_boundary(cut) {
                cut -= 1;
            }
            output.truncate(cut);
            output.push_str(&format!(
                "\n\n(output truncated at 256 KiB of {total} bytes)"
            ));
        }
        Ok(ToolOutput {
            title: format!("webfetch {url}"),
            output,
            metadata: json!({
                "url": url.to_string(),
                "content_type": content_type,
                "bytes": body.len(),
                "converted": converted,
            }),
        })
    }
}

/// Downloads `url`, returning its content type and at most [`MAX_RESPONSE_BYTES`].
async fn fetch(
    client: &reqwest::Client,
    url: &Url,
    format: Format,
) -> Result<(String, Vec<u8>), String> {
    let accept = match format {
        Format::Html => "text/html;q=1.0, application/xhtml+xml;q=0.9, */*;q=0.1",
        Format::Markdown => "text/markdown;q=1.0, text/html;q=0.9, text/plain;q=0.8, */*;q=0.1",
        Format::Text => "text/plain;q=1.0, text/html;q=0.9, */*;q=0.1",
    };
    let mut response = client
        .get(url.clone())
        .header(ACCEPT, accept)
        .send()
        .await
        .map_err(|err| describe(&err))?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("the server answered {status}"));
    }
    if response
        .content_length()
        .is_some_and(|length| length > MAX_RESPONSE_BYTES as u64)
    {
        return Err("the response is larger than 5 MiB".into());
    }
    let content_type = content_type(response.headers());
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|err| describe(&err))? {
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err("the response is larger than 5 MiB".into());
        }
        body.extend_from_slice(&chunk);
    }
    Ok((content_type, body))
}

/// The media type without parameters, lowercase; empty when not given.
fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .map(|media| media.trim().to_ascii_lowercase())
        .unwrap_or_default()
}

/// reqwest's own message, with its causes: "error sending request" alone says little.
fn describe(err: &reqwest::Error) -> String {
    let mut message = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    message
}

/// The text for the model, and whether HTML was converted.
fn render(content_type: &str, body: &[u8], format: Format) -> Result<(String, bool), FetchError> {
    let is_html = matches!(content_type, "text/html" | "application/xhtml+xml");
    let is_text = content_type.is_empty()
        || content_type.starts_with("text/")
        || content_type.ends_with("+xml")
        || content_type.ends_with("+json")
        || matches!(
            content_type,
            "application/json" | "application/xml" | "application/javascript"
        );
    if !is_text {
        return Err(FetchError::NotText {
            content_type: content_type.to_owned(),
        });
    }
    let body = String::from_utf8_lossy(body);
    if !is_html {
        return Ok((body.into_owned(), false));
    }
    match format {
        Format::Html => Ok((body.into_owned(), false)),
        Format::Text => Ok((text::html_to_text(&body), true)),
        Format::Markdown => {
            let converter = htmd::HtmlToMarkdown::builder()
                .skip_tags(SKIPPED_TAGS.to_vec())
                .build();
            converter
                .convert(&body)
                .map(|markdown| (markdown, true))
                .map_err(FetchError::Markdown)
        }
    }
}

#[cfg(test)]
mod tests;
