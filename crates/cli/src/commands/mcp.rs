//! `taskwire mcp`: taskwire as an MCP server over stdio, for a local harness (Claude
//! Code, OpenCode, Codex): its tools submit tasks to the coordinator named by `--addr`
//! (with `--token`), read them, list agents, cancel and answer approvals (see
//! `taskwire_coordinator::mcp`). Logs go to standard error; standard output is the
//! protocol's.

use std::process::ExitCode;
use std::sync::Arc;

use async_trait::async_trait;
use axum::http::HeaderMap;
use clap::Args;
use rmcp::ServiceExt;
use taskwire_coordinator::mcp::{Events, Fleet, FleetServer};
use taskwire_protocol::pb;
use tonic::Status;

use crate::cli::ClientArgs;
use crate::commands::{Client, connect};

#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub client: ClientArgs,
}

pub async fn run(args: McpArgs) -> anyhow::Result<ExitCode> {
    let client = connect(&args.client).await?;
    let server = FleetServer::new(Arc::new(Grpc(client)));
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| anyhow::anyhow!("mcp initialisation failed: {e}"))?;
    running.waiting().await?;
    Ok(ExitCode::SUCCESS)
}

/// The coordinator's gRPC API, as the CLI's token.
struct Grpc(Client);

#[async_trait]
impl Fleet for Grpc {
    async fn submit(
        &self,
        _: Option<&HeaderMap>,
        r: pb::SubmitRequest,
    ) -> Result<pb::SubmitResponse, Status> {
        Ok(self.0.clone().submit(r).await?.into_inner())
    }
    async fn get(&self, _: Option<&HeaderMap>, task_id: String) -> Result<pb::Task, Status> {
        Ok(self
            .0
            .clone()
            .get(pb::GetRequest { task_id })
            .await?
            .into_inner())
    }
    async fn watch(&self, _: Option<&HeaderMap>, task_id: String) -> Result<Events, Status> {
        let events = self
            .0
            .clone()
            .watch(pb::WatchRequest { task_id })
            .await?
            .into_inner();
        Ok(Box::pin(events))
    }
    async fn list_agents(&self, _: Option<&HeaderMap>) -> Result<Vec<pb::AgentSpec>, Status> {
        Ok(self
            .0
            .clone()
            .list_agents(pb::ListAgentsRequest::default())
            .await?
            .into_inner()
            .agents)
    }
    async fn cancel(
        &self,
        _: Option<&HeaderMap>,
        r: pb::CancelRequest,
    ) -> Result<pb::CancelResponse, Status> {
        Ok(self.0.clone().cancel(r).await?.into_inner())
    }
    async fn approve(
        &self,
        _: Option<&HeaderMap>,
        r: pb::ApproveRequest,
    ) -> Result<pb::ApproveResponse, Status> {
        Ok(self.0.clone().approve(r).await?.into_inner())
    }
}
