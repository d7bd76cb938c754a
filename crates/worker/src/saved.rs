//! A session as the worker saves it: the transcript, and beside it the state of the
//! task's workspace, so that a later attempt of the same task (on any worker) goes on
//! from a checkpoint with the files as they were then.
//!
//! The workspace state is a key of its own next to the transcript's (`workspace`); the
//! coordinator stores the JSON as it is, and a transcript saved without it reads as
//! a workspace with no changes. Changes too large for the save request are put in the
//! patch bucket and saved as a reference (`patch_ref`), read back when the state is
//! restored.

use serde::{Deserialize, Serialize};
use taskwire_agent::transcript::Transcript;
use taskwire_bus::{PatchError, Patches};
use taskwire_protocol::{INLINE_START_PATCH_BYTES, PatchRef, TaskId};

/// The workspace of an attempt, as far as a later attempt needs it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceState {
    /// The commit of the repository the task named in its context refs, as resolved
    /// by the attempt (a branch may have moved since): the later attempt checks out
    /// the same one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The attempt's own changes so far (its result patch at that point).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub patch: String,
    /// The same changes, as saved when too large to save inline (then `patch` is
    /// empty). [`WorkspaceState::restored`] reads them back into `patch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_ref: Option<PatchRef>,
}

impl WorkspaceState {
    /// Whether the attempt changed nothing of its own (whatever commit it was on).
    pub fn is_unchanged(&self) -> bool {
        self.patch.is_empty() && self.patch_ref.is_none()
    }

    /// The state as it is saved: changes larger than 256 KiB are put in the patch
    /// bucket (by `task`) and referenced.
    pub async fn for_saving(&self, patches: &Patches, task: TaskId) -> Result<Self, PatchError> {
        if self.patch.len() <= INLINE_START_PATCH_BYTES {
            return Ok(self.clone());
        }
        let reference = patches
            .put("checkpoint", &task.to_string(), &self.patch)
            .await?;
        Ok(Self {
            commit: self.commit.clone(),
            patch: String::new(),
            patch_ref: Some(reference),
        })
    }

    /// The state as saved, with changes saved by reference read back.
    pub async fn restored(self, patches: &Patches) -> Result<Self, PatchError> {
        match &self.patch_ref {
            None => Ok(self),
            Some(reference) => Ok(Self {
                patch: patches.get(reference).await?,
                patch_ref: None,
                commit: self.commit,
            }),
        }
    }
}

/// A transcript to save, with the workspace state.
#[derive(Debug, Serialize)]
pub struct SavedRef<'a> {
    #[serde(flatten)]
    pub transcript: &'a Transcript,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<&'a WorkspaceState>,
}

/// A saved transcript, with the workspace state when one was saved.
#[derive(Debug, Deserialize)]
pub struct Saved {
    #[serde(flatten)]
    pub transcript: Transcript,
    #[serde(default)]
    pub workspace: Option<WorkspaceState>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workspace_state_rides_beside_the_transcript_and_may_be_missing() {
        let mut transcript = Transcript::new("ses_1");
        transcript
            .messages
            .push(taskwire_agent::transcript::TranscriptMessage::user("hi"));
        let state = WorkspaceState {
            commit: Some("c0ffee".into()),
            patch: "diff --git a/x b/x\n".into(),
            patch_ref: None,
        };
        let json = serde_json::to_string(&SavedRef {
            transcript: &transcript,
            workspace: Some(&state),
        })
        .expect("serializes");
        let back: Saved = serde_json::from_str(&json).expect("reads back");
        assert_eq!(back.transcript, transcript);
        assert_eq!(back.workspace, Some(state));

        let plain = serde_json::to_string(&transcript).expect("serializes");
        let back: Saved = serde_json::from_str(&plain).expect("an older transcript reads");
        assert_eq!(back.transcript, transcript);
        assert_eq!(back.workspace, None);

        let by_reference = WorkspaceState {
            commit: None,
            patch: String::new(),
            patch_ref: Some(PatchRef {
                name: "checkpoint/t/1".into(),
                sha256: "a".repeat(64),
                size: 300_000,
            }),
        };
        let json = serde_json::to_string(&SavedRef {
            transcript: &transcript,
            workspace: Some(&by_reference),
        })
        .expect("serializes");
        assert!(!json.contains("\"patch\""), "{json}");
        let back: Saved = serde_json::from_str(&json).expect("reads back");
        assert_eq!(back.workspace, Some(by_reference));
    }
}
