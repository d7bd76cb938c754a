//! The `agent_specs` table: each distinct agent spec bundle (a resolved agent spec
//! with the subagents its `task` tool may start), stored once by the SHA-256 of its
//! encoding. Submit writes a batch's bundles in the statement that inserts its tasks
//! ([`Store::insert_tasks`]); the task rows and their dispatched requests name the
//! bundle by its digest, and workers fetch it through a coordinator.

use taskwire_protocol::{AgentSpecBundle, AgentSpecDigest};

use crate::{Store, StoreError};

impl Store {
    /// The stored bundle named by `digest`, if any.
    pub async fn agent_spec(
        &self,
        digest: AgentSpecDigest,
    ) -> Result<Option<AgentSpecBundle>, StoreError> {
        let bundle: Option<Vec<u8>> =
            sqlx::query_scalar("SELECT bundle FROM agent_specs WHERE digest = $1")
                .bind(digest.as_bytes().as_slice())
                .fetch_optional(&self.pool)
                .await
                .map_err(|e| StoreError::from_sqlx("read an agent spec", e))?;
        bundle
            .map(|bytes| {
                AgentSpecBundle::decode(&bytes).map_err(|e| StoreError::CorruptSpec {
                    digest: digest.to_string(),
                    reason: e.to_string(),
                })
            })
            .transpose()
    }
}
