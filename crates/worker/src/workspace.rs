//! The task's workspace as the worker uses it: made for an attempt (from the
//! repository the task names, or the worker's base), started from the changes the
//! task inherits and an earlier attempt's changes, and on the way out the result's
//! patch, the changes a child starts from, and a child's changes brought back.

use taskwire_protocol::{GitSource, TaskError, TaskRequest};
use taskwire_workspaces::{Origin, Source, TaskWorkspace, WorkspaceError};

use crate::cancel::StopHandle;
use crate::saved::WorkspaceState;
use crate::session::StartError;
use crate::task::{Claim, Context, supervise};

/// Largest patch a result carries: with an inline transcript (at most 256 KiB) the
/// result stays under NATS's default 1 MB message limit.
pub const RESULT_PATCH_LIMIT: usize = 512 * 1024;

/// Largest set of changes a child starts from (they travel inline in its request).
pub const CHILD_PATCH_LIMIT: usize = 256 * 1024;

/// Error code of a result whose patch could not be made or is too large to carry;
/// its workspace is kept on the worker so that nothing is lost.
pub const PATCH_NOT_CARRIED: &str = "patch_not_carried";

/// Makes the attempt's workspace from the repository the task names in its context
/// refs (at the commit an earlier attempt used, when going on from its checkpoint),
/// or from the worker's base; applies the changes the task starts from, then the
/// earlier attempt's own. A stop (cancel, deadline, shutdown) interrupts it.
pub async fn prepare(
    ctx: &Context,
    request: &TaskRequest,
    claim: Claim,
    earlier: Option<&WorkspaceState>,
    stop: &StopHandle,
) -> Result<TaskWorkspace, StartError> {
    let git = GitSource::from_refs(&request.context_refs)
        .map_err(|e| StartError::Invalid(format!("invalid context refs: {e}")))?;
    let pinned = earlier.and_then(|state| state.commit.as_deref());
    let source = match &git {
        Some(g) => Source::Git {
            url: &g.url,
            reference: pinned.or(g.reference.as_deref()),
        },
        None => Source::Base,
    };
    let name = format!("{}-{}", request.task_id, claim.attempt);
    let started = std::time::Instant::now();
    let stopped = stop.token();
    let make = async {
        let workspace = ctx
            .workspaces
            .prepare(&name, source, &request.workspace_patch)
            .await?;
        if let Some(state) = earlier {
            workspace
                .restore(
                    &state.patch,
                    "the changes of the attempt this one goes on from",
                )
                .await?;
        }
        Ok::<_, WorkspaceError>(workspace)
    };
    let prepare = async {
        tokio::select! {
            made = make => Some(made),
            () = stopped.cancelled() => None,
        }
    };
    match supervise(prepare, request.deadline, stop).await {
        None => Err(StartError::Stopped),
        Some(Err(e)) => Err(StartError::Workspace(e)),
        Some(Ok(workspace)) => {
            tracing::debug!(
                task.id = %request.task_id,
                workspace = %workspace.root().display(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "workspace ready"
            );
            Ok(workspace)
        }
    }
}

/// The state a later attempt of the task needs to go on with these files.
pub async fn state(workspace: &TaskWorkspace) -> Result<WorkspaceState, WorkspaceError> {
    Ok(WorkspaceState {
        commit: match workspace.origin() {
            Origin::Git { commit, .. } => Some(commit.clone()),
            Origin::Base { .. } | Origin::Copy => None,
        },
        patch: workspace.patch().await?,
    })
}

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
                "the task's patch is {} bytes, more than the {RESULT_PATCH_LIMIT} a result carries; {}",
                patch.len(),
                kept()
            ),
            retryable: false,
        });
    }
    Ok(patch)
}

/// What a child of the task in `workspace` starts from: the task's repository at its
/// commit (when it named one), and every change since that source. `Err` is for the
/// model: the child is not started.
pub async fn child_start(workspace: &TaskWorkspace) -> Result<(Option<GitSource>, String), String> {
    let changes = workspace
        .changes()
        .await
        .map_err(|e| format!("failed to read your workspace's changes for the subagent: {e}"))?;
    if changes.len() > CHILD_PATCH_LIMIT {
        return Err(format!(
            "your workspace's changes are {} bytes, more than the {CHILD_PATCH_LIMIT} bytes a subagent can start from; \
             commit to fewer or smaller changes before delegating",
            changes.len()
        ));
    }
    let source = match workspace.origin() {
        Origin::Git { url, commit } => Some(GitSource {
            url: url.clone(),
            reference: Some(commit.clone()),
        }),
        Origin::Base { .. } | Origin::Copy => None,
    };
    Ok((source, changes))
}

/// Brings a finished child's `patch` into `workspace`; why not, for the model.
pub async fn bring_back(workspace: &TaskWorkspace, patch: &str) -> Result<(), String> {
    match workspace.apply(patch).await {
        Ok(()) => Ok(()),
        Err(WorkspaceError::Conflict { report }) => Err(format!(
            "they conflict with changes in your workspace, which is unchanged; \
             resolve it yourself (the subagent's hunks are below) or ask the subagent again\n{report}"
        )),
        Err(e) => Err(e.to_string()),
    }
}
