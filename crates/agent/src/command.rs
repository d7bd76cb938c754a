//! Slash commands at run time: a command's subtask run as the session's first
//! delegation ([`subtask`]) and a template's !`cmd` run under the session's `bash`
//! rules ([`shell`]). What a command is, its file and its template are
//! `taskwire_definitions::command`'s, re-exported here.

pub mod shell;
pub mod subtask;

pub use taskwire_definitions::command::*;

pub use self::subtask::{SUBTASK_SUMMARY_PROMPT, SubtaskRun, run_subtask, subtask_messages};
