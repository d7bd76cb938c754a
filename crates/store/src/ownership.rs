//! Ownership: every id a caller names is looked up together with the tenant it must
//! belong to, in the same query, so another tenant's object reads exactly like a
//! missing one.
//!
//! `tenant: Option<&str>` is the tenant the object must belong to; `None` means any
//! tenant (an open API without tokens, or a lookup made by the coordinator itself).

use taskwire_protocol::{SessionId, TaskId, TraceId};

use crate::record::{TASK_COLUMNS, TaskRow};
use crate::{Store, StoreError, TaskRecord};

/// What a worker's session load found, checked against the task that asks.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionLoad {
    /// The saved transcript (JSON), and the task whose attempt saved it last.
    Found {
        transcript: serde_json::Value,
        saved_by: TaskId,
    },
    /// The task's own session has no saved transcript yet (a new session).
    New,
    /// The session is not the asking task's, or belongs to another tenant, or the task
    /// does not exist.
    NotFound,
}

impl Store {
    /// One task with its attempt history, if it exists and belongs to `tenant`.
    pub async fn get_task_for(
        &self,
        tenant: Option<&str>,
        task_id: TaskId,
    ) -> Result<Option<TaskRecord>, StoreError> {
        let row: Option<TaskRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE task_id = $1 AND ($2::text IS NULL OR tenant = $2)"
        )))
        .bind(task_id.as_uuid())
        .bind(tenant)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("read a task", e))?;
        self.with_attempts(task_id, row).await
    }

    /// One task with its attempt history, if it exists and belongs to the tenant of
    /// the task `asking` (a worker's request names the task it runs for).
    pub async fn get_task_beside(
        &self,
        asking: TaskId,
        task_id: TaskId,
    ) -> Result<Option<TaskRecord>, StoreError> {
        let row: Option<TaskRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE task_id = $1 \
             AND tenant = (SELECT tenant FROM tasks WHERE task_id = $2)"
        )))
        .bind(task_id.as_uuid())
        .bind(asking.as_uuid())
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("read a task", e))?;
        self.with_attempts(task_id, row).await
    }

    /// The record of `row`, if any, with its attempt history.
    async fn with_attempts(
        &self,
        task_id: TaskId,
        row: Option<TaskRow>,
    ) -> Result<Option<TaskRecord>, StoreError> {
        let Some(mut record) = row.map(TaskRecord::try_from).transpose()? else {
            return Ok(None);
        };
        record.attempts = self.attempts(task_id).await?;
        Ok(Some(record))
    }

    /// The request a task was submitted with, if it exists and belongs to `tenant`.
    pub async fn task_request_for(
        &self,
        tenant: Option<&str>,
        task_id: TaskId,
    ) -> Result<Option<taskwire_protocol::TaskRequest>, StoreError> {
        let row: Option<(Vec<u8>, Option<Vec<u8>>)> = sqlx::query_as(
            "SELECT t.request, s.bundle FROM tasks t \
             LEFT JOIN agent_specs s ON s.digest = t.agent_spec_digest \
             WHERE t.task_id = $1 AND ($2::text IS NULL OR t.tenant = $2)",
        )
        .bind(task_id.as_uuid())
        .bind(tenant)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("read a task's request", e))?;
        row.map(|(request, bundle)| {
            crate::tasks::decode_request(task_id, &request, bundle.as_deref())
        })
        .transpose()
    }

    /// Whether `session` exists (a task ran or runs in it, or its transcript is saved)
    /// and belongs to `tenant`.
    pub async fn session_exists_for(
        &self,
        tenant: Option<&str>,
        session: SessionId,
    ) -> Result<bool, StoreError> {
        sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM sessions WHERE session_id = $1 AND ($2::text IS NULL OR tenant = $2)) \
                 OR EXISTS (SELECT 1 FROM tasks WHERE session_id = $1 AND ($2::text IS NULL OR tenant = $2))",
        )
        .bind(session.as_uuid())
        .bind(tenant)
        .fetch_one(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("look up a session", e))
    }

    /// The session's current agent: the agent of its newest task, if the session has
    /// one and belongs to `tenant`.
    pub async fn session_agent_for(
        &self,
        tenant: Option<&str>,
        session: SessionId,
    ) -> Result<Option<String>, StoreError> {
        sqlx::query_scalar(
            "SELECT agent FROM tasks WHERE session_id = $1 AND ($2::text IS NULL OR tenant = $2) \
             ORDER BY created_at DESC LIMIT 1",
        )
        .bind(session.as_uuid())
        .bind(tenant)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("look up a session's agent", e))
    }

    /// Whether any task of `tenant` belongs to `trace`.
    pub async fn trace_exists_for(
        &self,
        tenant: Option<&str>,
        trace: TraceId,
    ) -> Result<bool, StoreError> {
        sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM tasks WHERE trace_id = $1 AND ($2::text IS NULL OR tenant = $2))",
        )
        .bind(trace.to_string())
        .bind(tenant)
        .fetch_one(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("look up a trace", e))
    }

    /// A session's transcript for the task that runs in it: only the task's own
    /// session, and only when its saved transcript is of the task's tenant.
    pub async fn load_session_for_task(
        &self,
        session: SessionId,
        task: TaskId,
    ) -> Result<SessionLoad, StoreError> {
        type Row = (
            Option<String>,
            String,
            Option<serde_json::Value>,
            Option<uuid::Uuid>,
        );
        let row: Option<Row> = sqlx::query_as(
            "SELECT s.tenant, t.tenant, s.transcript, s.task_id FROM tasks t \
             LEFT JOIN sessions s ON s.session_id = t.session_id \
             WHERE t.task_id = $2 AND t.session_id = $1",
        )
        .bind(session.as_uuid())
        .bind(task.as_uuid())
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("load a session", e))?;
        Ok(match row {
            None => SessionLoad::NotFound,
            Some((None, ..)) => SessionLoad::New,
            Some((Some(owner), tenant, ..)) if owner != tenant => SessionLoad::NotFound,
            Some((Some(_), _, Some(transcript), Some(saved_by))) => SessionLoad::Found {
                transcript,
                saved_by: TaskId::from_uuid(saved_by),
            },
            Some(_) => SessionLoad::New,
        })
    }
}
