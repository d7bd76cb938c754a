//! `mcp.json`: MCP servers declared in OpenCode's shape, so that a user can copy theirs.
//!
//! ```json
//! {"mcp": {
//!   "everything": {"type": "local", "command": ["npx", "-y", "@modelcontextprotocol/server-everything"],
//!                  "environment": {"K": "{env:VAR}"}, "enabled": true, "timeout": 5000},
//!   "github": {"type": "remote", "url": "https://example.com/mcp",
//!              "headers": {"Authorization": "Bearer {env:TOKEN}"}}
//! }}
//! ```
//!
//! Each definitions directory may hold one; a later directory's server replaces an
//! earlier one of the same name, and `"enabled": false` removes it. `{env:VAR}` is kept
//! as written: the worker reads the variable when it starts the server
//! ([`resolve_env`]). Beyond OpenCode's keys, `"hosts": ["api.example.com"]` names the
//! hosts a local server may reach (its network is otherwise the session's `network`
//! rules).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::error::LoadError;

/// A server's calls time out after this when its definition gives no `timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// One declared MCP server.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct McpServerDef {
    /// Its name: the prefix of its tools' names (`NAME_TOOL`).
    pub name: String,
    pub transport: McpTransport,
    /// Variables set for a local server, values possibly holding `{env:VAR}`; sorted.
    pub environment: Vec<(String, String)>,
    /// The timeout of each request (initialisation, `tools/list`, `tools/call`).
    pub timeout: Option<Duration>,
    /// Hosts a local server may reach besides what the session's `network` rules open
    /// (wildcards allowed).
    pub hosts: Vec<String>,
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum McpTransport {
    /// A child process speaking over stdin/stdout: the program and its arguments.
    Local { command: Vec<String> },
    /// A Streamable HTTP endpoint, with headers sent on every request (sorted).
    Remote {
        url: String,
        headers: Vec<(String, String)>,
    },
}

impl McpServerDef {
    /// The request timeout: the definition's, else [`DEFAULT_TIMEOUT`].
    pub fn timeout(&self) -> Duration {
        self.timeout.unwrap_or(DEFAULT_TIMEOUT)
    }

    /// Whether it runs as a local process (which may change the session's files).
    pub fn is_local(&self) -> bool {
        matches!(self.transport, McpTransport::Local { .. })
    }
}

/// The servers of every layer, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpServers(BTreeMap<String, McpServerDef>);

impl McpServers {
    pub fn new() -> Self {
        Self::default()
    }

    /// The servers, by name.
    pub fn list(&self) -> impl Iterator<Item = &McpServerDef> {
        self.0.values()
    }

    pub fn get(&self, name: &str) -> Option<&McpServerDef> {
        self.0.get(name)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    mcp: BTreeMap<String, Entry>,
    #[serde(rename = "$schema", default)]
    _schema: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    command: Vec<String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    environment: BTreeMap<String, String>,
    #[serde(default = "yes")]
    enabled: bool,
    timeout: Option<u64>,
    #[serde(default)]
    hosts: Vec<String>,
    /// OpenCode's OAuth settings for remote servers: not supported, refused clearly.
    oauth: Option<serde_json::Value>,
}

fn yes() -> bool {
    true
}

/// Reads `dir/mcp.json` over `base`: its servers replace those of the same name, and
/// one with `"enabled": false` removes it. A missing file changes nothing; a file that
/// is not JSON of this shape is one error and changes nothing; a bad server is one error
/// and the others still load.
pub fn load_mcp(dir: &Path, base: McpServers) -> (McpServers, Vec<LoadError>) {
    let path = dir.join("mcp.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (base, Vec::new()),
        Err(e) => {
            let error = LoadError {
                file: path.display().to_string(),
                key: None,
                message: format!("failed to read: {e}"),
            };
            return (base, vec![error]);
        }
    };
    parse_mcp(&path.display().to_string(), &text, base)
}

/// [`load_mcp`] of the text of `file`.
pub fn parse_mcp(file: &str, text: &str, base: McpServers) -> (McpServers, Vec<LoadError>) {
    let mut servers = base;
    let parsed: File = match serde_json::from_str(text) {
        Ok(parsed) => parsed,
        Err(e) => {
            let error = LoadError {
                file: file.to_owned(),
                key: None,
                message: format!("not an mcp.json ({{\"mcp\": {{NAME: {{...}}}}}}): {e}"),
            };
            return (servers, vec![error]);
        }
    };
    let mut errors = Vec::new();
    for (name, entry) in parsed.mcp {
        if !entry.enabled {
            servers.0.remove(&name);
            continue;
        }
        match definition(&name, entry) {
            Ok(def) => {
                servers.0.insert(name, def);
            }
            Err(message) => errors.push(LoadError {
                file: file.to_owned(),
                key: Some(format!("mcp.{name}")),
                message,
            }),
        }
    }
    (servers, errors)
}

fn definition(name: &str, entry: Entry) -> Result<McpServerDef, String> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!(
            "server name {name:?} must be letters, digits, `_` or `-` (it prefixes its tools' names)"
        ));
    }
    if entry.oauth.is_some() {
        return Err("`oauth` is not supported: give the token in `headers`".into());
    }
    let transport = match entry.kind.as_deref() {
        Some("local") => {
            if entry.url.is_some() || !entry.headers.is_empty() {
                return Err("a local server takes `command`, not `url` or `headers`".into());
            }
            if entry.command.first().is_none_or(|p| p.trim().is_empty()) {
                return Err("a local server needs `command`: [program, args...]".into());
            }
            McpTransport::Local {
                command: entry.command,
            }
        }
        Some("remote") => {
            if !entry.command.is_empty() || !entry.environment.is_empty() {
                return Err(
                    "a remote server takes `url` and `headers`, not `command` or `environment`"
                        .into(),
                );
            }
            let url = entry.url.ok_or("a remote server needs `url`")?;
            if !url.contains("{env:") {
                let parsed = url::Url::parse(&url).map_err(|e| format!("`url`: {e}"))?;
                if !matches!(parsed.scheme(), "http" | "https") {
                    return Err(format!(
                        "`url` must be http or https, not {}",
                        parsed.scheme()
                    ));
                }
            }
            McpTransport::Remote {
                url,
                headers: entry.headers.into_iter().collect(),
            }
        }
        Some(other) => return Err(format!("`type` must be `local` or `remote`, not {other:?}")),
        None => return Err("`type` is required: `local` or `remote`".into()),
    };
    if entry.timeout == Some(0) {
        return Err("`timeout` is in milliseconds and must be above 0".into());
    }
    Ok(McpServerDef {
        name: name.to_owned(),
        transport,
        environment: entry.environment.into_iter().collect(),
        timeout: entry.timeout.map(Duration::from_millis),
        hosts: entry.hosts,
    })
}

/// `text` with each `{env:VAR}` replaced by `lookup(VAR)`; `Err(VAR)` for the first
/// variable `lookup` has not.
pub fn resolve_env(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{env:") {
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        let var = &rest[start + 5..start + len];
        out.push_str(&rest[..start]);
        out.push_str(&lookup(var).ok_or_else(|| var.to_owned())?);
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPENCODE: &str = r#"{
      "$schema": "https://opencode.ai/config.json",
      "mcp": {
        "everything": {"type": "local", "command": ["npx", "-y", "@modelcontextprotocol/server-everything"],
                       "environment": {"K": "{env:VAR}"}, "enabled": true, "timeout": 5000},
        "github": {"type": "remote", "url": "https://example.com/mcp",
                   "headers": {"Authorization": "Bearer {env:TOKEN}"}},
        "off": {"type": "local", "command": ["x"], "enabled": false}
      }
    }"#;

    #[test]
    fn an_opencode_mcp_block_loads_as_written() {
        let (servers, errors) = parse_mcp("mcp.json", OPENCODE, McpServers::new());
        assert!(errors.is_empty(), "{errors:?}");
        let names: Vec<_> = servers.list().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["everything", "github"]);
        let everything = servers.get("everything").expect("test value");
        assert_eq!(everything.timeout(), Duration::from_millis(5000));
        assert_eq!(everything.environment, [("K".into(), "{env:VAR}".into())]);
        assert!(everything.is_local());
        let github = servers.get("github").expect("test value");
        assert_eq!(github.timeout(), DEFAULT_TIMEOUT);
        assert_eq!(
            github.transport,
            McpTransport::Remote {
                url: "https://example.com/mcp".into(),
                headers: vec![("Authorization".into(), "Bearer {env:TOKEN}".into())],
            }
        );
    }

    #[test]
    fn a_later_layer_replaces_or_disables_a_server_and_a_bad_one_is_reported_alone() {
        let (base, _) = parse_mcp("user/mcp.json", OPENCODE, McpServers::new());
        let project = r#"{"mcp": {
            "github": {"enabled": false},
            "everything": {"type": "local", "command": ["node", "server.js"]},
            "bad name": {"type": "local", "command": ["x"]},
            "nourl": {"type": "remote"},
            "ftp": {"type": "remote", "url": "ftp://example.com"}
        }}"#;
        let (servers, errors) = parse_mcp("project/mcp.json", project, base);
        let names: Vec<_> = servers.list().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["everything"]);
        assert_eq!(
            servers.get("everything").expect("test value").transport,
            McpTransport::Local {
                command: vec!["node".into(), "server.js".into()]
            }
        );
        let keys: Vec<_> = errors
            .iter()
            .map(|e| e.key.clone().expect("test value"))
            .collect();
        assert_eq!(keys, ["mcp.bad name", "mcp.ftp", "mcp.nourl"]);
        assert!(errors[1].message.contains("http or https"), "{errors:?}");
    }

    #[test]
    fn a_file_of_another_shape_is_one_error_and_changes_nothing() {
        let (base, _) = parse_mcp("a", OPENCODE, McpServers::new());
        let (servers, errors) = parse_mcp("b", r#"{"servers": {}}"#, base.clone());
        assert_eq!(servers, base);
        assert_eq!(errors.len(), 1);
        assert!(errors[0].message.contains("not an mcp.json"), "{errors:?}");
    }

    #[test]
    fn env_references_resolve_and_a_missing_variable_is_named() {
        let lookup = |v: &str| (v == "TOKEN").then(|| "s3cret".to_owned());
        assert_eq!(
            resolve_env("Bearer {env:TOKEN}!", &lookup).expect("test value"),
            "Bearer s3cret!"
        );
        assert_eq!(
            resolve_env("plain {env", &lookup).expect("test value"),
            "plain {env"
        );
        assert_eq!(
            resolve_env("{env:TOKEN}/{env:NOPE}", &lookup).expect_err("a missing variable"),
            "NOPE"
        );
    }
}
