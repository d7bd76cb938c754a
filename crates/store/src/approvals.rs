//! Approvals: `ask` permissions of running tasks, and their answers.

use taskwire_protocol::{ClaimEpoch, TaskId, TaskStatus};

use crate::{Store, StoreError};

/// The answer to an approval, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalAnswer {
    Once,
    Always,
    Reject,
}

impl ApprovalAnswer {
    fn as_str(self) -> &'static str {
        match self {
            Self::Once => "once",
            Self::Always => "always",
            Self::Reject => "reject",
        }
    }
}

/// What answering an approval did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerOutcome {
    /// Recorded; the task is running again.
    Answered,
    /// The approval exists but is no longer pending (answered or timed out).
    NotPending,
    /// The task never asked for an approval with that id.
    Unknown,
}

impl Store {
    /// Records an approval asked by the attempt `(task, epoch)` and moves the task to
    /// `awaiting_approval`; returns `false` when that attempt is not current.
    pub async fn ask_approval(
        &self,
        task: TaskId,
        epoch: ClaimEpoch,
        request_id: &str,
        permission: &str,
        patterns: &[String],
        title: &str,
    ) -> Result<bool, StoreError> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(|e| StoreError::from_sqlx("begin an approval", e))?;
        if !crate::lifecycle::ask_approval(&mut tx, task, epoch).await? {
            return Ok(false);
        }
        sqlx::query(
            "INSERT INTO approvals (task_id, request_id, permission, patterns, title) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (task_id, request_id) DO NOTHING",
        )
        .bind(task.as_uuid())
        .bind(request_id)
        .bind(permission)
        .bind(patterns)
        .bind(title)
        .execute(&mut *tx)
        .await
        .map_err(|e| StoreError::from_sqlx("record an approval", e))?;
        tx.commit()
            .await
            .map_err(|e| StoreError::from_sqlx("commit an approval", e))?;
        Ok(true)
    }

    /// Answers a pending approval and moves the task back to `running` (when no other
    /// approval of it is pending).
    pub async fn answer_approval(
        &self,
        task: TaskId,
        request_id: &str,
        answer: ApprovalAnswer,
        message: Option<&str>,
    ) -> Result<AnswerOutcome, StoreError> {
        self.close_approval(task, request_id, answer.as_str(), message)
            .await
    }

    /// Closes a pending approval whose worker stopped waiting (timed out).
    pub async fn time_out_approval(
        &self,
        task: TaskId,
        request_id: &str,
    ) -> Result<AnswerOutcome, StoreError> {
        self.close_approval(task, request_id, "timed_out", None)
            .await
    }

    async fn close_approval(
        &self,
        task: TaskId,
        request_id: &str,
        status: &str,
        message: Option<&str>,
    ) -> Result<AnswerOutcome, StoreError> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(|e| StoreError::from_sqlx("begin an answer", e))?;
        let answered = sqlx::query(
            "UPDATE approvals SET status = $3, message = $4, answered_at = now() \
             WHERE task_id = $1 AND request_id = $2 AND status = 'pending'",
        )
        .bind(task.as_uuid())
        .bind(request_id)
        .bind(status)
        .bind(message)
        .execute(&mut *tx)
        .await
        .map_err(|e| StoreError::from_sqlx("answer an approval", e))?;
        if answered.rows_affected() != 1 {
            let exists: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM approvals WHERE task_id = $1 AND request_id = $2)",
            )
            .bind(task.as_uuid())
            .bind(request_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(|e| StoreError::from_sqlx("look up an approval", e))?;
            return Ok(if exists {
                AnswerOutcome::NotPending
            } else {
                AnswerOutcome::Unknown
            });
        }
        crate::lifecycle::approval_closed(&mut tx, task).await?;
        tx.commit()
            .await
            .map_err(|e| StoreError::from_sqlx("commit an answer", e))?;
        Ok(AnswerOutcome::Answered)
    }

    /// The answer to an approval, if it has been answered: `(once|always|reject, message)`.
    pub async fn approval_answer(
        &self,
        task: TaskId,
        request_id: &str,
    ) -> Result<Option<(ApprovalAnswer, Option<String>)>, StoreError> {
        let row: Option<(String, Option<String>)> = sqlx::query_as(
            "SELECT status, message FROM approvals WHERE task_id = $1 AND request_id = $2",
        )
        .bind(task.as_uuid())
        .bind(request_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("read an approval", e))?;
        Ok(row.and_then(|(status, message)| {
            let answer = match status.as_str() {
                "once" => ApprovalAnswer::Once,
                "always" => ApprovalAnswer::Always,
                "reject" => ApprovalAnswer::Reject,
                _ => return None, // pending or timed out
            };
            Some((answer, message))
        }))
    }

    /// The status of a task, if it exists (a cheap read for hot paths).
    pub async fn task_status(&self, task: TaskId) -> Result<Option<TaskStatus>, StoreError> {
        let s: Option<String> = sqlx::query_scalar("SELECT status FROM tasks WHERE task_id = $1")
            .bind(task.as_uuid())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| StoreError::from_sqlx("read a task's status", e))?;
        s.map(|s| {
            s.parse()
                .map_err(|e: taskwire_protocol::ProtocolError| StoreError::Corrupt {
                    task_id: task.to_string(),
                    column: "status",
                    reason: e.to_string(),
                })
        })
        .transpose()
    }
}
