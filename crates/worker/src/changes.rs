//! What a task changed in its workspace, on its way out: the result's patch, within
//! what a result message can carry.

use taskwire_protocol::TaskError;
use taskwire_workspaces::TaskWorkspace;

/// Largest patch a result carries: with an inline transcript (at most 256 KiB) the
/// result stays under NATS's default 1 MB message limit.
pub const RESULT_PATCH_LIMIT: usize = 512 * 1024;

/// Error code of a result whose patch could not be made or is too large to carry;
/// its workspace is kept on the worker so that nothing is lost.
pub const PATCH_NOT_CARRIED: &str = "patch_not_carried";

/// The patch for the result of the attempt that ran in `workspace`, or the error to
/// report instead (the caller then keeps the workspace).
pub async fn result_patch(workspace: &TaskWorkspace) -> Result<String, TaskError> {
    let kept = || format!("the workspace is kept at {}", workspace.root().display());
    let patch = workspace.patch().await.map_err(|e| TaskError {
        code: PATCH_NOT_CARRIED.into(),
        message: format!("failed to make the task's patch: {e}; {}", kept()),
        retryable: false,
    })?;
    if patch.len() > RESULT_PATCH_LIMIT {
        return Err(TaskError {
            code: PATCH_NOT_CARRIED.into(),
            message: format!(
                "the task's patch is {} bytes, more than the {} a result carries; {}",
                patch.len(),
                RESULT_PATCH_LIMIT,
                kept()
            ),
            retryable: false,
        });
    }
    Ok(patch)
}
