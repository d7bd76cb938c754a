//! Tools served over the Model Context Protocol.
//!
//! - [`config`]: `mcp.json` (OpenCode's shape), layered like `agents/`; the
//!   coordinator resolves the servers and ships them with each agent spec
//!   (`taskwire_definitions::mcp`, re-exported).
//! - [`server`]: one server as a worker runs it (stdio child in the sandbox, or
//!   Streamable HTTP), through the official SDK.
//! - [`tool`]: each listed tool as a [`Tool`](crate::tools::Tool) named `SERVER_TOOL`.
//!
//! A worker holds one [`McpPool`]. A session gets its servers from it
//! ([`McpPool::for_session`]): a remote server is shared by the sessions whose
//! definitions are identical (one connection per worker); a local one is the
//! session's own, since it runs in the session's workspace, and stops with the
//! session. Servers start lazily: a definition's tools are listed once per worker
//! (by the first session that needs them, starting its server) and shared
//! ([`ToolList`]) until a server says they changed; a session whose list is known starts
//! its server at its first call ([`session_tools`]).

pub use taskwire_definitions::mcp as config;
pub mod server;
pub mod tool;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub use config::{McpServerDef, McpServers, McpTransport, load_mcp, parse_mcp};
pub use server::{EnvLookup, McpServer, ToolList};
pub use tool::{McpTool, tool_name};

use crate::tools::CommandSandbox;
use crate::workspace::Workspace;
use taskwire_definitions::agent::AgentSpec;
use taskwire_definitions::permission::Permissions;

/// A worker's MCP servers.
pub struct McpPool {
    sandbox: CommandSandbox,
    env: EnvLookup,
    remote: Mutex<HashMap<McpServerDef, Arc<McpServer>>>,
    /// Each definition's tool list, shared by its servers on this worker.
    lists: Mutex<HashMap<McpServerDef, Arc<ToolList>>>,
}

impl std::fmt::Debug for McpPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpPool").finish_non_exhaustive()
    }
}

impl McpPool {
    /// Local servers confined by `sandbox`; `{env:VAR}` read from the worker's
    /// environment.
    pub fn new(sandbox: CommandSandbox) -> Self {
        Self {
            sandbox,
            env: Arc::new(|name: &str| std::env::var(name).ok()),
            remote: Mutex::default(),
            lists: Mutex::default(),
        }
    }

    /// The servers of a session whose agent spec ships `defs`, less those `agent`'s
    /// allow-list or `permissions` switch off entirely (`"NAME_*": false`, a deny of
    /// `NAME_*`): those are never started.
    pub fn for_session(
        &self,
        defs: &[McpServerDef],
        agent: &AgentSpec,
        permissions: Permissions<'_>,
    ) -> Vec<Arc<McpServer>> {
        defs.iter()
            .filter(|def| may_offer(def, agent, permissions))
            .map(|def| {
                let new = || {
                    let listed = self
                        .lists
                        .lock()
                        .expect("mcp pool lock")
                        .entry(def.clone())
                        .or_default()
                        .clone();
                    Arc::new(McpServer::new(
                        def.clone(),
                        self.sandbox.clone(),
                        self.env.clone(),
                        listed,
                    ))
                };
                if def.is_local() {
                    return new();
                }
                self.remote
                    .lock()
                    .expect("mcp pool lock")
                    .entry(def.clone())
                    .or_insert_with(new)
                    .clone()
            })
            .collect()
    }
}

/// Whether some tool of `def` could be offered to `agent` under `permissions`: a name
/// no real tool has stands for "any tool of the server", so that only a rule naming
/// the whole server (`NAME_*`, `*`) switches it off.
pub fn may_offer(def: &McpServerDef, agent: &AgentSpec, permissions: Permissions<'_>) -> bool {
    let any = format!("{}_\u{1}", def.name);
    agent.lists_tool(&any) && !permissions.is_disabled(&any)
}

/// Whether any of `defs` may be offered and runs locally (so the session may change
/// files through it).
pub fn may_change_files(
    defs: &[McpServerDef],
    agent: &AgentSpec,
    permissions: Permissions<'_>,
) -> bool {
    defs.iter()
        .any(|def| def.is_local() && may_offer(def, agent, permissions))
}

/// The tools of `servers`, listed now (starting each server that is not running), and
/// for each server that could not list them, its name and why.
pub async fn session_tools(
    servers: &[Arc<McpServer>],
    workspace: &Workspace,
    permissions: Permissions<'_>,
) -> (Vec<McpTool>, Vec<(String, String)>) {
    let listed =
        futures::future::join_all(servers.iter().map(|s| s.tools(workspace, permissions))).await;
    let mut tools = Vec::new();
    let mut failed = Vec::new();
    for (server, listed) in servers.iter().zip(listed) {
        match listed {
            Ok(listed) => tools.extend(listed.iter().map(|t| McpTool::new(server.clone(), t))),
            Err(reason) => {
                tracing::warn!(mcp.server = %server.def().name, %reason, "mcp server unavailable");
                failed.push((server.def().name.clone(), reason));
            }
        }
    }
    (tools, failed)
}
