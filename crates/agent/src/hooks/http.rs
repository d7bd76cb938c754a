//! An HTTP hook: the event POSTed as JSON; a 2xx response's body is the answer.

use std::time::Duration;

use super::{MAX_OUTPUT_BYTES, Raw};
use crate::mcp::EnvLookup;

pub(super) async fn post(
    client: &reqwest::Client,
    url: &str,
    headers: &[(String, String)],
    env: &EnvLookup,
    body: String,
    timeout: Duration,
) -> Raw {
    let mut request = client
        .post(url)
        .timeout(timeout)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body);
    for (name, value) in headers {
        let value = match taskwire_definitions::mcp::resolve_env(value, &**env) {
            Ok(value) => value,
            Err(var) => {
                return Raw::Failed(format!(
                    "header `{name}` names the variable {var}, which the worker does not have"
                ));
            }
        };
        request = request.header(name.as_str(), value);
    }
    let response = match request.send().await {
        Ok(response) => response,
        Err(err) if err.is_timeout() => {
            return Raw::Failed(format!("timed out after {} s", timeout.as_secs()));
        }
        Err(err) => return Raw::Failed(format!("request failed: {err}")),
    };
    let status = response.status();
    let text = match response.bytes().await {
        Ok(bytes) => {
            String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_OUTPUT_BYTES)]).into_owned()
        }
        Err(err) => return Raw::Failed(format!("failed to read the response: {err}")),
    };
    if !status.is_success() {
        return Raw::Failed(format!("answered {status}"));
    }
    Raw::Exited {
        code: 0,
        stdout: text,
        stderr: String::new(),
    }
}
