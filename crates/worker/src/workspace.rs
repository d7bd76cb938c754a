//! The task's workspace as the worker uses it: reserved for an attempt, made when the
//! session first needs its files (from the repository the task names, or the
//! worker's base), started from the changes the task inherits and an earlier
//! attempt's changes, and on the way out the result's patch, the changes a child
//! starts from, and a child's changes brought back.
//!
//! Changes too large for a message travel through the patch bucket: a result's patch
//! above [`RESULT_PATCH_LIMIT`] and a child's starting changes above
//! [`CHILD_PATCH_LIMIT`] are put there and sent as a [`PatchRef`]; nothing above
//! [`MAX_PATCH_BYTES`] travels at all.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use taskwire_agent::system_prompt::WorkspaceFacts;
use taskwire_agent::workspace::WriteLog;
use taskwire_bus::PatchError;
use taskwire_protocol::{
    GitSource, INLINE_RESULT_PATCH_BYTES, INLINE_START_PATCH_BYTES, MAX_PATCH_BYTES, PatchRef,
    ResultErrorCode, TaskError, TaskRequest,
};
use taskwire_workspaces::{Origin, Source, TaskWorkspace, WorkspaceError, Writes};

use crate::saved::WorkspaceState;
use crate::session::StartError;
use crate::task::{Claim, Context};

/// Largest patch a result carries inline: with an inline transcript (at most 256 KiB)
/// the result stays under NATS's default 1 MB message limit. Larger ones go by reference.
pub const RESULT_PATCH_LIMIT: usize = INLINE_RESULT_PATCH_BYTES;

/// Largest set of changes a child's request carries inline; larger ones go by reference.
pub const CHILD_PATCH_LIMIT: usize = INLINE_START_PATCH_BYTES;

/// The attempt's workspace: its directory is reserved at once (the session's tools are
/// confined to it), its files are made the first time the session needs them (a
/// session that never calls a tool costs no copy), from the repository the task names
/// in its context refs (at the commit an earlier attempt used, when going on from its
/// checkpoint) or from the worker's base, then the changes the task starts from and
/// the earlier attempt's own are applied.
///
/// A task that cannot change files (no tool that writes is offered to it, after every
/// permission layer) and starts from nothing but the worker's base gets no copy at all:
/// its tools read the base directly ([`TaskFiles::reads_base`]).
pub struct TaskFiles<'a> {
    ctx: &'a Context,
    request: &'a TaskRequest,
    /// The changes the task starts from (read from the patch bucket when they came by
    /// reference).
    starting: String,
    git: Option<GitSource>,
    name: String,
    root: std::path::PathBuf,
    earlier: Option<WorkspaceState>,
    /// The task reads the base directly: `root` is the base, and nothing is made.
    reads_base: bool,
    /// What the session's tools write, so that recording the files looks only there.
    writes: Arc<Writes>,
    made: tokio::sync::OnceCell<TaskWorkspace>,
}

/// The session's tools tell the workspace's journal what they write.
#[derive(Debug)]
struct ToolWrites(Arc<Writes>);

impl WriteLog for ToolWrites {
    fn wrote(&self, path: &Path) {
        self.0.path(path);
    }
    fn wrote_anywhere(&self) {
        self.0.anywhere();
    }
}

impl<'a> TaskFiles<'a> {
    /// Checks the task's context refs, reads the changes it starts from when they came
    /// by reference, and names the attempt's directory (made when first needed). A task
    /// that only reads (`read_only`: it is offered no tool that changes files) and
    /// starts from the worker's base as it is reads the base itself.
    pub async fn reserve(
        ctx: &'a Context,
        request: &'a TaskRequest,
        claim: Claim,
        earlier: Option<WorkspaceState>,
        read_only: bool,
    ) -> Result<Self, StartError> {
        let git = GitSource::from_refs(&request.context_refs)
            .map_err(|e| StartError::Invalid(format!("invalid context refs: {e}")))?;
        let starting = match &request.workspace_patch_ref {
            Some(reference) => fetch(ctx, reference, "the changes the task starts from").await?,
            None => request.workspace_patch.clone(),
        };
        let name = format!("{}-{}", request.task_id, claim.attempt);
        let reads_base = read_only
            && git.is_none()
            && starting.is_empty()
            && earlier.as_ref().is_none_or(WorkspaceState::is_unchanged);
        let root = if reads_base {
            ctx.workspaces.base().to_owned()
        } else {
            ctx.workspaces.path_of(&name)
        };
        Ok(Self {
            ctx,
            request,
            starting,
            git,
            name,
            root,
            earlier,
            reads_base,
            writes: Arc::default(),
            made: tokio::sync::OnceCell::new(),
        })
    }

    /// The workspace the session's tools are confined to: the files' directory, with
    /// the tools' writes told to the workspace's journal.
    pub fn for_tools(&self) -> taskwire_agent::Workspace {
        taskwire_agent::Workspace::planned(self.root.clone())
            .with_write_log(Arc::new(ToolWrites(self.writes.clone())))
    }

    /// The directory the session works in: the base itself when the task only reads
    /// it.
    pub fn root(&self) -> &std::path::Path {
        &self.root
    }

    /// Whether the task reads the worker's base directly, without a workspace of its
    /// own: its files need no making.
    pub fn reads_base(&self) -> bool {
        self.reads_base
    }

    /// The workspace with its files, made on the first call. A failed attempt to make
    /// it leaves the directory empty, and the next call tries again. A task that reads
    /// the base has none ([`WorkspaceError::ReadsBase`]).
    pub async fn get(&self) -> Result<&TaskWorkspace, WorkspaceError> {
        if self.reads_base {
            return Err(WorkspaceError::ReadsBase);
        }
        self.made.get_or_try_init(|| self.make()).await
    }

    /// What a child of this task starts from. Files never made changed nothing of the
    /// task's own, so a child of a task that started from the base with no earlier
    /// attempt's changes starts from what the task started from, and this task's files
    /// are not made for it. `Err` is for the model: the child is not started.
    pub async fn child_start(&self) -> Result<ChildStart, String> {
        let untouched = self.made.get().is_none()
            && self.git.is_none()
            && self
                .earlier
                .as_ref()
                .is_none_or(WorkspaceState::is_unchanged);
        if untouched {
            return Ok(match &self.request.workspace_patch_ref {
                Some(reference) => ChildStart {
                    source: None,
                    inline: String::new(),
                    by_reference: Some(reference.clone()),
                },
                None => ChildStart {
                    source: None,
                    inline: self.starting.clone(),
                    by_reference: None,
                },
            });
        }
        let workspace = self
            .get()
            .await
            .map_err(|e| format!("failed to prepare your workspace: {e}"))?;
        child_start(self.ctx, self.request.task_id, workspace).await
    }

    /// Brings a finished child's `patch` into the task's files (made for it when not
    /// yet); why not, for the model. Nothing to bring costs nothing.
    pub async fn bring_back(&self, patch: &str) -> Result<(), String> {
        if patch.is_empty() {
            return Ok(());
        }
        let workspace = self
            .get()
            .await
            .map_err(|e| format!("failed to prepare your workspace: {e}"))?;
        bring_back(workspace, patch).await
    }

    async fn make(&self) -> Result<TaskWorkspace, WorkspaceError> {
        let pinned = self.earlier.as_ref().and_then(|e| e.commit.as_deref());
        let source = match &self.git {
            Some(g) => Source::Git {
                url: &g.url,
                reference: pinned.or(g.reference.as_deref()),
            },
            None => Source::Base,
        };
        let started = std::time::Instant::now();
        let workspace = self
            .ctx
            .workspaces
            .prepare_with(&self.name, source, &self.starting, self.writes.clone())
            .await?;
        if let Some(earlier) = &self.earlier {
            workspace
                .restore(
                    &earlier.patch,
                    "the changes of the attempt this one goes on from",
                )
                .await?;
        }
        tracing::debug!(
            task.id = %self.request.task_id,
            workspace = %workspace.root().display(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "workspace ready"
        );
        Ok(workspace)
    }

    /// What a later attempt needs to go on with these files: for files never made,
    /// the state this attempt started from.
    pub async fn state(&self) -> Result<WorkspaceState, WorkspaceError> {
        match self.made.get() {
            Some(workspace) => state(workspace).await,
            None => Ok(self.earlier.clone().unwrap_or_default()),
        }
    }

    /// The patch for the attempt's result, inline or (when larger than
    /// [`RESULT_PATCH_LIMIT`]) put in the patch bucket, or the error to report instead
    /// (the workspace is then kept). Files never made changed nothing of their own
    /// since the earlier attempt.
    pub async fn result_patch(&mut self) -> Result<(String, Option<PatchRef>), TaskError> {
        let (ctx, task) = (self.ctx, self.request.task_id);
        match self.made.get_mut() {
            Some(workspace) => {
                let patch = match result_patch(workspace).await {
                    Ok(patch) => hand_over(ctx, task, patch).await.map_err(|e| {
                        not_carried(
                            workspace,
                            format!("failed to hand over the task's patch: {e}"),
                        )
                    }),
                    Err(e) => Err(e),
                };
                if patch.is_err() {
                    workspace.keep();
                }
                patch
            }
            None => {
                let patch = self
                    .earlier
                    .as_ref()
                    .map(|e| e.patch.clone())
                    .unwrap_or_default();
                hand_over(ctx, task, patch).await.map_err(|e| TaskError {
                    code: ResultErrorCode::PatchNotCarried.as_str().into(),
                    message: format!("failed to hand over the task's patch: {e}"),
                    retryable: false,
                })
            }
        }
    }

    /// Removes the workspace (unless kept), after the attempt's result is recorded. A
    /// workspace never made has nothing to remove.
    pub async fn remove(self) {
        if let Some(workspace) = self.made.into_inner() {
            workspace.remove().await;
        }
    }
}

/// The state a later attempt of the task needs to go on with these files.
async fn state(workspace: &TaskWorkspace) -> Result<WorkspaceState, WorkspaceError> {
    Ok(WorkspaceState {
        commit: match workspace.origin() {
            Origin::Git { commit, .. } => Some(commit.clone()),
            Origin::Base { .. } | Origin::Copy => None,
        },
        patch: workspace.patch().await?,
        patch_ref: None,
    })
}

/// A result's `patch_not_carried` error: `why`, and where the workspace is kept.
fn not_carried(workspace: &TaskWorkspace, why: String) -> TaskError {
    TaskError {
        code: ResultErrorCode::PatchNotCarried.as_str().into(),
        message: format!(
            "{why}; the workspace is kept at {}",
            workspace.root().display()
        ),
        retryable: false,
    }
}

/// The patch for the result of the attempt that ran in `workspace`, or the error to
/// report instead (the caller then keeps the workspace).
async fn result_patch(workspace: &TaskWorkspace) -> Result<String, TaskError> {
    let patch = workspace
        .patch()
        .await
        .map_err(|e| not_carried(workspace, format!("failed to make the task's patch: {e}")))?;
    if patch.len() as u64 > MAX_PATCH_BYTES {
        return Err(not_carried(
            workspace,
            format!(
                "the task's patch is {} bytes, more than the {MAX_PATCH_BYTES} a result carries",
                patch.len()
            ),
        ));
    }
    Ok(patch)
}

/// `patch` as a result carries it: inline when small, else put in the patch bucket.
async fn hand_over(
    ctx: &Context,
    task: taskwire_protocol::TaskId,
    patch: String,
) -> Result<(String, Option<PatchRef>), PatchError> {
    if patch.len() <= RESULT_PATCH_LIMIT {
        return Ok((patch, None));
    }
    let reference = ctx.patches.put("result", &task.to_string(), &patch).await?;
    tracing::info!(task.id = %task, object = %reference.name, bytes = reference.size, "result patch handed over through the patch bucket");
    Ok((String::new(), Some(reference)))
}

/// Reads the patch `reference` names from the patch bucket, for `what`. A missing or
/// corrupt object means the task cannot start as asked (an error naming the reference);
/// a bucket out of reach is worth another try later.
pub async fn fetch(ctx: &Context, reference: &PatchRef, what: &str) -> Result<String, StartError> {
    ctx.patches.get(reference).await.map_err(|e| {
        let message = format!("failed to read {what}: {e}");
        if e.is_retryable() {
            StartError::Unavailable(message)
        } else {
            StartError::Invalid(message)
        }
    })
}

/// What a child of the task in `workspace` starts from.
pub struct ChildStart {
    /// The task's repository at its commit, when it named one.
    pub source: Option<GitSource>,
    /// Every change since that source, inline (empty when `by_reference` is set).
    pub inline: String,
    /// The same changes in the patch bucket, when too large to send inline.
    pub by_reference: Option<PatchRef>,
}

/// What a child of `task` (working in `workspace`) starts from. `Err` is for the
/// model: the child is not started.
async fn child_start(
    ctx: &Context,
    task: taskwire_protocol::TaskId,
    workspace: &TaskWorkspace,
) -> Result<ChildStart, String> {
    let changes = workspace
        .changes()
        .await
        .map_err(|e| format!("failed to read your workspace's changes for the subagent: {e}"))?;
    if let Some(reason) = too_large_to_delegate(changes.len()) {
        return Err(reason);
    }
    let (inline, by_reference) = if changes.len() > CHILD_PATCH_LIMIT {
        let reference = ctx
            .patches
            .put("start", &task.to_string(), &changes)
            .await
            .map_err(|e| format!("failed to hand your workspace's changes to the subagent: {e}"))?;
        (String::new(), Some(reference))
    } else {
        (changes, None)
    };
    let source = match workspace.origin() {
        Origin::Git { url, commit } => Some(GitSource {
            url: url.clone(),
            reference: Some(commit.clone()),
        }),
        Origin::Base { .. } | Origin::Copy => None,
    };
    Ok(ChildStart {
        source,
        inline,
        by_reference,
    })
}

/// Why changes of `bytes` cannot go to a child, if they cannot.
pub fn too_large_to_delegate(bytes: usize) -> Option<String> {
    (bytes as u64 > MAX_PATCH_BYTES).then(|| {
        format!(
            "your workspace's changes are {bytes} bytes, more than the {MAX_PATCH_BYTES} bytes a subagent can start from; \
             delegate with fewer or smaller changes"
        )
    })
}

/// Brings a finished child's `patch` into `workspace`; why not, for the model.
async fn bring_back(workspace: &TaskWorkspace, patch: &str) -> Result<(), String> {
    match workspace.apply(patch).await {
        Ok(()) => Ok(()),
        Err(WorkspaceError::Conflict { report }) => Err(format!(
            "they conflict with changes in your workspace, which is unchanged; \
             resolve it yourself (the subagent's hunks are below) or ask the subagent again\n{report}"
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// How long the base's [`WorkspaceFacts`] are reused before they are looked up again:
/// a file added to the base (an `AGENTS.md`) reaches the sessions that start after it.
const BASE_FACTS_FOR: Duration = Duration::from_secs(1);

/// The worker's base as a workspace made from it will be (a git repository or not, its
/// project instruction file), looked up at most once per [`BASE_FACTS_FOR`] instead of
/// with a few `stat`s by every session.
#[derive(Default)]
pub struct BaseFacts {
    seen: Mutex<Option<(Instant, WorkspaceFacts)>>,
}

impl BaseFacts {
    /// The facts of `base`, looked up again when the last look is older than
    /// [`BASE_FACTS_FOR`].
    pub fn of(&self, base: &Path) -> WorkspaceFacts {
        let now = Instant::now();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        match *seen {
            Some((at, facts)) if now.duration_since(at) < BASE_FACTS_FOR => facts,
            _ => {
                let facts = WorkspaceFacts::of(base);
                *seen = Some((now, facts));
                facts
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_go_to_a_child_up_to_the_cap_and_beyond_it_the_refusal_names_the_limit() {
        let cap = usize::try_from(MAX_PATCH_BYTES).expect("fits");
        assert_eq!(
            too_large_to_delegate(CHILD_PATCH_LIMIT + 1),
            None,
            "by reference"
        );
        assert_eq!(too_large_to_delegate(cap), None);
        let refusal = too_large_to_delegate(cap + 1).expect("refused");
        assert!(
            refusal.contains(&format!("{} bytes", cap + 1)) && refusal.contains("67108864"),
            "{refusal}"
        );
    }
}
