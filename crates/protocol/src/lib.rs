//! taskwire's wire contract and domain types.
//!
//! - [`pb`]: code generated from `proto/taskwire/v1` (prost messages; the tonic client
//!   and server with the `grpc` feature).
//!   It stays at the edges: the API and bus layers convert it with `TryFrom`.
//! - [`ids`]: newtype identifiers ([`TaskId`], [`TraceId`], [`WorkerId`], ...).
//! - [`status`]: [`TaskStatus`] and the pure task state machine.
//! - [`cost`]: [`Usage`] with its cost in pico-dollars, [`cost::TaskUsage`] (a task's
//!   own and subtree usage: the one definition every view shows), and [`Budget`], a
//!   subtree's spending limits.
//! - [`task`]: the domain task request and result, and their proto conversions.
//! - [`spec_digest`]: [`AgentSpecBundle`] and [`AgentSpecDigest`], how a dispatched
//!   request names its agent spec and subagents.
//! - [`title`]: session titles, cleaned from a model's answer and checked on the wire.
//! - [`patch`]: [`PatchRef`], a patch too large for a message, kept in the patch
//!   bucket, and [`MAX_PATCH_BYTES`], the largest patch carried at all.
//! - [`context`]: context refs workers act on ([`GitSource`]: the repository a task
//!   works in).
//! - `agent_spec` (feature `agent`): the resolved agent definition to and from the wire.
//! - [`code`]: [`ErrorCode`], the one code of a failed request, mapped once to gRPC and
//!   once to the wire.
//! - [`error`]: [`ProtocolError`], returned by every conversion from the wire.

pub mod agent_spec;
pub mod code;
pub mod context;
pub mod cost;
pub mod error;
pub mod ids;
pub mod lifecycle;
pub mod patch;
pub mod priority;
pub mod result_code;
pub mod spec_digest;
pub mod status;
pub mod task;
pub mod time;
pub mod title;
pub mod value;

pub use code::ErrorCode;
pub use context::GitSource;
pub use cost::Budget;
pub use error::{GitRefError, PatchRefError, ProtocolError};
pub use ids::{ClaimEpoch, SessionId, TaskId, TraceId, WorkerId};
pub use lifecycle::{Effect, TaskEvent};
pub use patch::{INLINE_RESULT_PATCH_BYTES, INLINE_START_PATCH_BYTES, MAX_PATCH_BYTES, PatchRef};
pub use priority::Priority;
pub use result_code::ResultErrorCode;
pub use spec_digest::{AgentSpecBundle, AgentSpecDigest};
pub use status::TaskStatus;
pub use task::{
    Attachment, ContextRef, Provenance, Subtask, TaskError, TaskRequest, TaskResult,
    ToolCallSummary, Usage, child_key,
};

/// Generated protobuf and gRPC code for `taskwire.v1`.
#[allow(clippy::all, missing_docs)]
pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/taskwire.v1.rs"));

    /// Encoded file descriptor set, served by gRPC reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/taskwire_descriptor.bin"));
}
