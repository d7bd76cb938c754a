//! The codes of the errors a result carries (`TaskError.code`): one per way an attempt
//! fails, named once. On the wire a code is a string, so a code this version does not
//! know (from a newer worker) still travels and shows; [`ResultErrorCode::parse`]
//! says `None` for it.

/// How an attempt failed, as its result's error says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResultErrorCode {
    /// The session ended with an error (the model, a tool, a checkpoint).
    SessionError,
    /// The session could not start (an invalid agent spec, a ref outside the workspace).
    SessionNotStarted,
    /// The tree spent its token or cost budget.
    BudgetExceeded,
    /// The answer does not satisfy the task's output schema, also after one correction.
    OutputSchemaMismatch,
    /// The result's patch could not be carried to the coordinator (too large, gone,
    /// corrupt); the workspace is kept.
    PatchNotCarried,
    /// A task above it ended, so it was cancelled.
    ParentEnded,
}

impl ResultErrorCode {
    pub const ALL: [ResultErrorCode; 6] = [
        Self::SessionError,
        Self::SessionNotStarted,
        Self::BudgetExceeded,
        Self::OutputSchemaMismatch,
        Self::PatchNotCarried,
        Self::ParentEnded,
    ];

    /// The code on the wire and in JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SessionError => "session_error",
            Self::SessionNotStarted => "session_not_started",
            Self::BudgetExceeded => "budget_exceeded",
            Self::OutputSchemaMismatch => "output_schema_mismatch",
            Self::PatchNotCarried => "patch_not_carried",
            Self::ParentEnded => "parent_ended",
        }
    }

    /// The code named `code`, if this version knows it.
    pub fn parse(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == code)
    }
}

impl std::fmt::Display for ResultErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_reads_back_and_an_unknown_one_is_none() {
        for code in ResultErrorCode::ALL {
            assert_eq!(ResultErrorCode::parse(code.as_str()), Some(code));
        }
        assert_eq!(ResultErrorCode::parse("from_a_newer_worker"), None);
    }
}
