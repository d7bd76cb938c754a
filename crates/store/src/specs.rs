//! The `agent_specs` table: each distinct resolved agent spec, stored once by the
//! SHA-256 of its encoding. Submit writes a batch's specs in the statement that inserts
//! its tasks ([`Store::insert_tasks`]); the task rows and their dispatched requests
//! name the spec by its digest, and workers fetch it through a coordinator.

use prost::Message as _;
use taskwire_protocol::{AgentSpecDigest, pb};

use crate::{Store, StoreError};

impl Store {
    /// The stored spec named by `digest`, if any.
    pub async fn agent_spec(
        &self,
        digest: AgentSpecDigest,
    ) -> Result<Option<pb::AgentSpec>, StoreError> {
        let spec: Option<Vec<u8>> =
            sqlx::query_scalar("SELECT spec FROM agent_specs WHERE digest = $1")
                .bind(digest.as_bytes().as_slice())
                .fetch_optional(&self.pool)
                .await
                .map_err(|e| StoreError::from_sqlx("read an agent spec", e))?;
        spec.map(|bytes| {
            pb::AgentSpec::decode(bytes.as_slice()).map_err(|e| StoreError::CorruptSpec {
                digest: digest.to_string(),
                reason: e.to_string(),
            })
        })
        .transpose()
    }
}
