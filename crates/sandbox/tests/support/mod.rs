//! Runs real bash under the real sandbox.
// Shared by several test binaries, each of which uses only part of it.
#![allow(dead_code)]

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use taskwire_sandbox::{Limits, Network, PrivateTemp, ProcessLimit, Sandbox, SandboxPolicy};

pub const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// Far above what any test command needs; reaching it fails the test.
const DEADLINE: Duration = Duration::from_secs(60);

/// The sandbox, or `None` (the test is skipped) when the kernel lacks a mechanism.
/// Under CI a missing mechanism fails the test instead: a skipped containment test
/// must not pass silently.
pub fn sandbox() -> Option<Arc<Sandbox>> {
    static SANDBOX: OnceLock<Result<Arc<Sandbox>, String>> = OnceLock::new();
    let built = SANDBOX.get_or_init(|| {
        let support = taskwire_sandbox::probe();
        if support.process_limit == ProcessLimit::Unenforced {
            return Err("no process limit (root without a writable pids cgroup)".into());
        }
        Sandbox::new(support, &[])
            .map(Arc::new)
            .map_err(|e| e.to_string())
    });
    match built {
        Ok(sandbox) => Some(sandbox.clone()),
        Err(reason) if std::env::var_os("CI").is_some() => {
            panic!("the sandbox is required under CI: {reason}")
        }
        Err(reason) => {
            eprintln!("skipped: {reason}");
            None
        }
    }
}

/// One finished command: its exit status and its stdout and stderr together.
#[derive(Debug)]
pub struct Run {
    pub status: ExitStatus,
    pub output: String,
}

impl Run {
    pub fn ok(&self) -> bool {
        self.status.success()
    }
}

/// Options of one run.
pub struct Options {
    pub network: Network,
    pub limits: Limits,
    pub env: Vec<(String, String)>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            network: Network::Closed,
            limits: Limits::default(),
            env: Vec::new(),
        }
    }
}

/// Runs `script` with `bash -c` in `workspace`, confined, with a scrubbed environment
/// as the bash tool sets it. Whatever it leaves behind is killed.
pub fn run(sandbox: &Sandbox, workspace: &Path, script: &str, options: Options) -> Run {
    let temp = PrivateTemp::create().expect("private temp dir");
    let policy = SandboxPolicy {
        workspace: workspace.to_owned(),
        temp_dir: temp.path().to_owned(),
        read_only: Vec::new(),
        network: options.network,
        limits: options.limits,
    };
    let mut command = Command::new("bash");
    command
        .arg("-c")
        .arg(format!("exec 2>&1\n{script}"))
        .current_dir(workspace)
        .env_clear()
        .env("PATH", PATH)
        .env("HOME", workspace)
        .env("LANG", "C.UTF-8")
        .env("TMPDIR", temp.path())
        .envs(options.env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    let confinement = sandbox.confine(&mut command, &policy).expect("confine");
    let mut child = command.spawn().expect("spawn bash");
    let group = rustix::process::Pid::from_child(&child);
    let mut stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut output = Vec::new();
        let _ = stdout.read_to_end(&mut output);
        String::from_utf8_lossy(&output).into_owned()
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            panic!("command did not end within {DEADLINE:?}: {script}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // Background jobs die with the group, closing the pipe.
    let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    drop(confinement);
    let output = reader.join().expect("reader");
    Run { status, output }
}

/// The signal that ended a run, if one did.
pub fn signal(run: &Run) -> Option<i32> {
    run.status.signal()
}
