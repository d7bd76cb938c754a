//! One MCP server as a session uses it: started at the first `tools/list` or call
//! it needs, its tool list cached per definition on the worker ([`ToolList`]) until a
//! server says it changed, each request bounded by the
//! server's timeout, and restarted for the next call after it crashed or hung.
//!
//! A local server is a child process in its own process group under the `bash`
//! tool's sandbox: the task's workspace writable, its program's tree readable, no
//! environment of the worker's but what its definition sets, the network opened
//! only by the session's `network` rules and its `hosts`. A remote one is a Streamable
//! HTTP client. The protocol (version negotiation, initialisation, requests,
//! cancellation) is the official SDK's (`rmcp`).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio_util::sync::CancellationToken;

use super::config::{McpServerDef, McpTransport, resolve_env};
use crate::tools::{CommandSandbox, Extra, Prepared, prepare_with};
use crate::workspace::Workspace;
use taskwire_definitions::permission::Permissions;

/// Reads a variable of the worker's environment (`{env:VAR}`).
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// A tool a server lists.
#[derive(Debug, Clone)]
pub struct ListedTool {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
}

/// A declared server and its connection, if started.
pub struct McpServer {
    def: McpServerDef,
    sandbox: CommandSandbox,
    env: EnvLookup,
    connection: tokio::sync::Mutex<Option<Arc<Connection>>>,
    /// Its tool list, shared by the servers of the same definition on this worker.
    listed: Arc<ToolList>,
}

/// A definition's tool list as last listed, shared by the worker's servers of that
/// definition, so that a session whose server it lists already does not start one
/// until it calls a tool.
#[derive(Debug, Default)]
pub struct ToolList {
    tools: std::sync::Mutex<Option<Arc<[ListedTool]>>>,
    /// Set by a server's `notifications/tools/list_changed`.
    stale: AtomicBool,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.def.name)
            .finish_non_exhaustive()
    }
}

/// A running connection: the SDK's client and, for a local server, its process.
struct Connection {
    client: RunningService<RoleClient, Handler>,
    /// See [`Handler`]'s.
    listed_here: Arc<AtomicBool>,
    _process: Option<Process>,
}

/// Hears the server's notifications.
struct Handler {
    listed: Arc<ToolList>,
    name: String,
    /// Set once this connection has listed the tools: a change said before (some
    /// servers say one as they start) changes nothing it listed.
    listed_here: Arc<AtomicBool>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if self.listed_here.load(Ordering::Acquire) {
            tracing::debug!(mcp.server = %self.name, "mcp tool list changed");
            self.listed.stale.store(true, Ordering::Release);
        }
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            Default::default(),
            Implementation::new("taskwire", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// A local server's process: its whole group killed, and its sandbox released, on
/// drop.
struct Process {
    child: tokio::process::Child,
    prepared: Option<Prepared>,
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(pid) = self
            .child
            .id()
            .and_then(|p| rustix::process::Pid::from_raw(p as i32))
        {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        let _ = self.child.start_kill();
        if let Some(prepared) = self.prepared.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(prepared.release());
        }
    }
}

impl McpServer {
    pub fn new(
        def: McpServerDef,
        sandbox: CommandSandbox,
        env: EnvLookup,
        listed: Arc<ToolList>,
    ) -> Self {
        Self {
            def,
            sandbox,
            env,
            connection: tokio::sync::Mutex::new(None),
            listed,
        }
    }

    pub fn def(&self) -> &McpServerDef {
        &self.def
    }

    /// Its tools: the list shared by its definition unless a server said it changed
    /// (then listed now, starting this server).
    pub async fn tools(
        &self,
        workspace: &Workspace,
        permissions: Permissions<'_>,
    ) -> Result<Arc<[ListedTool]>, String> {
        if !self.listed.stale.load(Ordering::Acquire)
            && let Some(tools) = self.listed.tools.lock().expect("tools lock").clone()
        {
            return Ok(tools);
        }
        let connection = self.connect(workspace, permissions).await?;
        self.listed.stale.store(false, Ordering::Release);
        let listed = tokio::time::timeout(
            self.def.timeout(),
            connection.client.peer().list_all_tools(),
        )
        .await;
        let tools = match listed {
            Ok(Ok(tools)) => tools,
            Ok(Err(e)) => {
                let gone = is_gone(&e);
                return Err(self
                    .failed(&connection, format!("tools/list failed: {e}"), gone)
                    .await);
            }
            Err(_) => {
                return Err(self
                    .failed(&connection, self.timed_out("tools/list"), true)
                    .await);
            }
        };
        let tools: Arc<[ListedTool]> = tools
            .into_iter()
            .map(|t| ListedTool {
                name: t.name.into_owned(),
                description: t.description.map(|d| d.into_owned()).unwrap_or_default(),
                input_schema: serde_json::Value::Object((*t.input_schema).clone()),
            })
            .collect();
        *self.listed.tools.lock().expect("tools lock") = Some(tools.clone());
        connection.listed_here.store(true, Ordering::Release);
        Ok(tools)
    }

    /// Calls `tool` with `arguments`, within the server's timeout; cancelled (the
    /// server told so) when `cancel` fires.
    pub async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
        workspace: &Workspace,
        permissions: Permissions<'_>,
        cancel: &CancellationToken,
    ) -> Result<CallToolResult, String> {
        let connection = self.connect(workspace, permissions).await?;
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        // Dropping the request (timeout, cancellation) sends `notifications/cancelled`.
        let call = tokio::time::timeout(
            self.def.timeout(),
            connection.client.peer().call_tool(params),
        );
        tokio::select! {
            done = call => match done {
                Ok(Ok(result)) => Ok(result),
                Ok(Err(e)) => {
                    let gone = is_gone(&e);
                    Err(self.failed(&connection, format!("tools/call failed: {e}"), gone).await)
                }
                Err(_) => Err(self.failed(&connection, self.timed_out("the call"), true).await),
            },
            _ = cancel.cancelled() => Err("cancelled with the session".into()),
        }
    }

    fn timed_out(&self, what: &str) -> String {
        format!(
            "{what} timed out after {} (the server's `timeout`)",
            humanize(self.def.timeout())
        )
    }

    /// After a failed request: a connection that is closed (the server crashed) or
    /// that hung (`gone`) is dropped, so the next call starts the server again. `reason`,
    /// completed for the model.
    async fn failed(&self, connection: &Arc<Connection>, reason: String, gone: bool) -> String {
        if gone || connection.client.is_transport_closed() {
            let mut slot = self.connection.lock().await;
            if slot.as_ref().is_some_and(|c| Arc::ptr_eq(c, connection)) {
                *slot = None;
            }
            tracing::warn!(mcp.server = %self.def.name, %reason, "mcp server dropped, restarted at the next call");
            format!(
                "MCP server {}: {reason}; the server is restarted for the next call",
                self.def.name
            )
        } else {
            format!("MCP server {}: {reason}", self.def.name)
        }
    }

    /// The live connection, started (again) when there is none or it closed.
    async fn connect(
        &self,
        workspace: &Workspace,
        permissions: Permissions<'_>,
    ) -> Result<Arc<Connection>, String> {
        let mut slot = self.connection.lock().await;
        if let Some(connection) = slot.as_ref() {
            if !connection.client.is_transport_closed() {
                return Ok(connection.clone());
            }
            tracing::warn!(mcp.server = %self.def.name, "mcp server gone, starting it again");
        }
        *slot = None;
        let started = tokio::time::timeout(self.def.timeout(), self.start(workspace, permissions))
            .await
            .map_err(|_| {
                format!(
                    "MCP server {} did not start within {} (its `timeout`)",
                    self.def.name,
                    humanize(self.def.timeout())
                )
            })?
            .map_err(|e| format!("MCP server {} failed to start: {e}", self.def.name))?;
        let connection = Arc::new(started);
        *slot = Some(connection.clone());
        Ok(connection)
    }

    async fn start(
        &self,
        workspace: &Workspace,
        permissions: Permissions<'_>,
    ) -> Result<Connection, String> {
        let listed_here = Arc::new(AtomicBool::new(false));
        let handler = Handler {
            listed: self.listed.clone(),
            name: self.def.name.clone(),
            listed_here: listed_here.clone(),
        };
        let resolve = |text: &str| {
            resolve_env(text, &*self.env)
                .map_err(|var| format!("environment variable {var} is not set on the worker"))
        };
        match &self.def.transport {
            McpTransport::Local { command } => {
                let command = command
                    .iter()
                    .map(|a| resolve(a))
                    .collect::<Result<Vec<_>, _>>()?;
                let environment = self
                    .def
                    .environment
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), resolve(v)?)))
                    .collect::<Result<Vec<_>, String>>()?;
                let (process, stdout, stdin) = self
                    .spawn(&command, &environment, workspace, permissions)
                    .await?;
                let client = handler
                    .serve((stdout, stdin))
                    .await
                    .map_err(|e| format!("initialisation failed: {e}"))?;
                tracing::info!(mcp.server = %self.def.name, protocol = ?client.peer_info().map(|i| i.protocol_version.clone()), "mcp server started");
                Ok(Connection {
                    client,
                    listed_here,
                    _process: Some(process),
                })
            }
            McpTransport::Remote { url, headers } => {
                use rmcp::transport::StreamableHttpClientTransport;
                use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
                let url = resolve(url)?;
                let mut map = std::collections::HashMap::new();
                for (name, value) in headers {
                    let value = resolve(value)?;
                    let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                        .map_err(|e| format!("header {name}: {e}"))?;
                    let value = reqwest::header::HeaderValue::from_str(&value)
                        .map_err(|e| format!("header {name}: {e}"))?;
                    map.insert(name, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(map);
                let transport =
                    StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
                let client = handler
                    .serve(transport)
                    .await
                    .map_err(|e| format!("initialisation failed: {e}"))?;
                tracing::info!(mcp.server = %self.def.name, "mcp server connected");
                Ok(Connection {
                    client,
                    listed_here,
                    _process: None,
                })
            }
        }
    }

    async fn spawn(
        &self,
        command: &[String],
        environment: &[(String, String)],
        workspace: &Workspace,
        permissions: Permissions<'_>,
    ) -> Result<
        (
            Process,
            tokio::process::ChildStdout,
            tokio::process::ChildStdin,
        ),
        String,
    > {
        let sandboxed = !matches!(self.sandbox, CommandSandbox::Unsandboxed);
        let path = if sandboxed {
            crate::tools::DEFAULT_PATH.to_owned()
        } else {
            std::env::var("PATH").unwrap_or_else(|_| crate::tools::DEFAULT_PATH.to_owned())
        };
        let (program, args) = command.split_first().ok_or("no command")?;
        let mut std_command = std::process::Command::new(program);
        std_command
            .args(args)
            .current_dir(workspace.root())
            .env_clear()
            .env("PATH", &path)
            .env(
                "LANG",
                std::env::var("LANG").unwrap_or_else(|_| "C.UTF-8".into()),
            )
            .env("HOME", workspace.root())
            .envs(environment.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let extra = Extra {
            read: program_trees(program, args, &path),
            hosts: self.def.hosts.clone(),
        };
        let prepared = prepare_with(
            &self.sandbox,
            workspace,
            permissions,
            &mut std_command,
            extra,
        )
        .await
        .map_err(|e| format!("refused: {e}"))?;
        std_command.envs(prepared.env.iter().map(|(name, value)| (name, value)));
        let mut child = match tokio::process::Command::from(std_command)
            .kill_on_drop(true)
            .spawn()
        {
            Ok(child) => child,
            Err(e) => {
                prepared.release().await;
                return Err(format!("{program}: {e}"));
            }
        };
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        if let Some(stderr) = child.stderr.take() {
            tokio::spawn(log_stderr(self.def.name.clone(), stderr));
        }
        Ok((
            Process {
                child,
                prepared: Some(prepared),
            },
            stdout,
            stdin,
        ))
    }
}

/// A server's standard error, to the worker's log at debug (the first 200 lines).
async fn log_stderr(name: String, stderr: tokio::process::ChildStderr) {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    let mut n = 0;
    while let Ok(Some(line)) = lines.next_line().await {
        if n < 200 {
            tracing::debug!(mcp.server = %name, line = %line.chars().take(500).collect::<String>(), "mcp server stderr");
        }
        n += 1;
    }
}

/// The trees a local server's program lives in, outside the system's: the program's
/// own (found on `path`) and each argument naming an existing file or directory,
/// taken up to the folder holding its `node_modules` (a package needs its
/// dependencies) or else its own folder.
fn program_trees(program: &str, args: &[String], path: &str) -> Vec<PathBuf> {
    let mut trees = Vec::new();
    let found = if program.contains('/') {
        Some(PathBuf::from(program))
    } else {
        path.split(':')
            .map(|dir| Path::new(dir).join(program))
            .find(|p| p.is_file())
    };
    let given = found.into_iter().flat_map(|p| {
        let absolute = if p.is_absolute() {
            Some(p.clone())
        } else {
            std::env::current_dir().ok().map(|d| d.join(&p))
        };
        absolute.into_iter().chain(std::fs::canonicalize(&p).ok())
    });
    let candidates = given.chain(
        args.iter()
            .map(PathBuf::from)
            .filter(|p| p.is_absolute() && p.exists()),
    );
    for candidate in candidates {
        let tree = candidate
            .ancestors()
            .find(|a| a.file_name().is_some_and(|n| n == "node_modules"))
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .or_else(|| {
                if candidate.is_dir() {
                    return Some(candidate.clone());
                }
                let parent = candidate.parent()?;
                // A program in `PREFIX/bin` (a venv, a language install) needs `PREFIX`.
                Some(if parent.file_name().is_some_and(|n| n == "bin") {
                    parent.parent().unwrap_or(parent).to_path_buf()
                } else {
                    parent.to_path_buf()
                })
            });
        if let Some(tree) = tree
            && tree != Path::new("/")
            && !trees.contains(&tree)
        {
            trees.push(tree);
        }
    }
    trees
}

/// Whether a request failed because the connection is gone (the server exited or
/// closed it), rather than with an answer.
fn is_gone(e: &rmcp::ServiceError) -> bool {
    matches!(
        e,
        rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_)
    )
}

fn humanize(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_package_argument_opens_the_folder_of_its_node_modules() {
        let dir = tempfile::tempdir().expect("test value");
        let entry = dir.path().join("node_modules/@scope/pkg/dist/index.js");
        std::fs::create_dir_all(entry.parent().expect("test value")).expect("test value");
        std::fs::write(&entry, "").expect("test value");
        let trees = program_trees(
            "sh",
            &[entry.display().to_string(), "stdio".into()],
            "/usr/bin:/bin",
        );
        let real = std::fs::canonicalize(dir.path()).expect("test value");
        assert!(trees.contains(&real), "{trees:?}");
        assert!(
            !trees
                .iter()
                .any(|t| t.starts_with(real.join("node_modules")))
        );
    }
}
