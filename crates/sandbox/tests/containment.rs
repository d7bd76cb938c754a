//! Escape attempts of a prompt-injected command, each run as real bash under the real
//! sandbox, and the ordinary work that must keep running.

mod support;

use std::fs;
use std::net::TcpListener;
use std::process::{Command, Stdio};

use support::{Options, run, sandbox};
use taskwire_sandbox::Limits;

fn workspace() -> tempfile::TempDir {
    tempfile::tempdir().expect("workspace")
}

fn unique(name: &str) -> String {
    format!("{name}-{}-{}", std::process::id(), rand_suffix())
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

/// A process standing in for the worker: it holds a secret in its environment.
struct SecretHolder {
    child: std::process::Child,
    secret: String,
}

impl SecretHolder {
    fn start() -> Self {
        let secret = unique("sk-model-api-key");
        let child = Command::new("sleep")
            .arg("60")
            .env("MODEL_API_KEY", &secret)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn the secret holder");
        Self { child, secret }
    }
}

impl Drop for SecretHolder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn reading_another_processes_environ_fails_and_leaks_nothing() {
    let Some(sandbox) = sandbox() else { return };
    let holder = SecretHolder::start();
    let environ = format!("/proc/{}/environ", holder.child.id());
    // Outside the sandbox the secret is there to steal (once the holder has
    // exec'd): the attempt below is real.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let bare = fs::read(&environ).expect("readable without the sandbox");
        if String::from_utf8_lossy(&bare).contains(&holder.secret) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the secret never showed"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }

    let ws = workspace();
    let script = format!(
        "cat {environ}; echo \"exit=$?\"; tr '\\0' '\\n' < {environ}; \
         cat /proc/{test}/environ; cat /proc/self/environ; ls /proc; \
         grep -a MODEL_API_KEY -r /proc/{pid}/ 2>&1 | head -3",
        test = std::process::id(),
        pid = holder.child.id(),
    );
    let run = run(&sandbox, ws.path(), &script, Options::default());
    assert!(!run.output.contains(&holder.secret), "{}", run.output);
    assert!(run.output.contains("Permission denied"), "{}", run.output);
    assert!(run.output.contains("exit=1"), "{}", run.output);
}

#[test]
fn writes_outside_the_workspace_fail_and_leave_no_file() {
    let Some(sandbox) = sandbox() else { return };
    let ws = workspace();
    let outside = tempfile::tempdir().expect("outside dir");
    let in_tmp = outside.path().join("escaped");
    let in_home = std::path::PathBuf::from("/root").join(unique(".taskwire-escape"));
    let script = format!(
        "echo x > {tmp}; echo \"tmp=$?\"; echo x > {home}; echo \"home=$?\"; \
         touch /etc/taskwire-escape; ln -s /etc/passwd {tmp}.link; cp /etc/hostname {tmp}.copy",
        tmp = in_tmp.display(),
        home = in_home.display(),
    );
    let run = run(&sandbox, ws.path(), &script, Options::default());
    let leaked = [
        in_tmp.clone(),
        in_home.clone(),
        "/etc/taskwire-escape".into(),
        in_tmp.with_extension("link"),
        in_tmp.with_extension("copy"),
    ];
    for path in &leaked {
        let exists = path.symlink_metadata().is_ok();
        let _ = fs::remove_file(path);
        assert!(!exists, "{} was written: {}", path.display(), run.output);
    }
    assert!(
        run.output.contains("tmp=1") && run.output.contains("home=1"),
        "{}",
        run.output
    );
    assert!(run.output.contains("Permission denied"), "{}", run.output);
}

#[test]
fn writes_inside_the_workspace_and_the_private_tmp_succeed() {
    let Some(sandbox) = sandbox() else { return };
    let ws = workspace();
    let script = "set -e; echo one > a.txt; mkdir -p d/e; echo two > \"$TMPDIR/t\"; \
                  mv \"$TMPDIR/t\" d/e/t; f=$(mktemp); echo three > \"$f\"; cat \"$f\"; \
                  ln -s a.txt link; rm a.txt; case \"$TMPDIR\" in \"$PWD\"*) echo inside;; esac";
    let run = run(&sandbox, ws.path(), script, Options::default());
    assert!(run.ok(), "{}", run.output);
    assert_eq!(run.output.trim(), "three");
    assert_eq!(
        fs::read_to_string(ws.path().join("d/e/t")).expect("moved file"),
        "two\n"
    );
    assert!(!ws.path().join("a.txt").exists());
}

#[test]
fn reading_another_directory_outside_the_workspace_fails() {
    let Some(sandbox) = sandbox() else { return };
    let ws = workspace();
    let other = tempfile::tempdir().expect("another task's workspace");
    let secret = unique("other-task-secret");
    fs::write(other.path().join("notes.txt"), &secret).expect("write");
    let script = format!(
        "cat {dir}/notes.txt; ls {dir}; ls /root; cat /root/.bashrc; ls /home; \
         cat /etc/shadow; find /tmp -maxdepth 1 | head -3",
        dir = other.path().display()
    );
    let run = run(&sandbox, ws.path(), &script, Options::default());
    assert!(!run.output.contains(&secret), "{}", run.output);
    assert!(
        !run.output.lines().any(|line| line.trim() == "notes.txt"),
        "{}",
        run.output
    );
    assert!(!run.output.contains("root:"), "{}", run.output);
    assert!(
        run.output.matches("Permission denied").count() >= 4,
        "{}",
        run.output
    );
}

#[test]
fn credentials_in_readable_system_trees_stay_hidden() {
    let Some(_) = sandbox() else { return };
    // Stands in for a NATS credentials file the worker was given under /etc, a tree
    // commands may read; creating it needs root.
    let creds = std::path::PathBuf::from("/etc").join(unique("taskwire-test.creds"));
    let secret = unique("nats-seed");
    if fs::write(&creds, &secret).is_err() {
        eprintln!("skipped: /etc is not writable, so no credentials file can be placed there");
        return;
    }
    struct Remove<'a>(&'a std::path::Path);
    impl Drop for Remove<'_> {
        fn drop(&mut self) {
            let _ = fs::remove_file(self.0);
        }
    }
    let _remove = Remove(&creds);
    let hiding =
        taskwire_sandbox::Sandbox::new(taskwire_sandbox::probe(), std::slice::from_ref(&creds))
            .expect("sandbox hiding the credentials");
    let ws = workspace();
    let script = format!(
        "cat {}; cat /etc/hostname >/dev/null && echo etc-readable",
        creds.display()
    );
    let run = run(&hiding, ws.path(), &script, Options::default());
    assert!(!run.output.contains(&secret), "{}", run.output);
    assert!(run.output.contains("Permission denied"), "{}", run.output);
    assert!(run.output.contains("etc-readable"), "{}", run.output);
}

#[test]
fn tcp_connections_to_local_services_fail() {
    let Some(sandbox) = sandbox() else { return };
    let nats = TcpListener::bind("127.0.0.1:0").expect("stand-in for nats");
    nats.set_nonblocking(true).expect("nonblocking");
    let port = nats.local_addr().expect("addr").port();
    let ws = workspace();
    let script = format!(
        "exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected; \
         python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}))'; \
         curl -sS --max-time 2 http://127.0.0.1:{port}/; echo curl=$?"
    );
    let run = run(&sandbox, ws.path(), &script, Options::default());
    assert!(!run.output.contains("connected"), "{}", run.output);
    assert!(run.output.contains("PermissionError"), "{}", run.output);
    assert!(!run.output.contains("curl=0"), "{}", run.output);
    assert!(
        nats.accept().is_err(),
        "the listener received a connection: {}",
        run.output
    );
}

#[test]
fn unix_netlink_and_udp_sockets_cannot_be_created() {
    let Some(sandbox) = sandbox() else { return };
    let ws = workspace();
    let script = r#"python3 - <<'EOF'
import socket
for family, kind, name in [
    (socket.AF_UNIX, socket.SOCK_STREAM, "unix"),
    (socket.AF_NETLINK, socket.SOCK_RAW, "netlink"),
    (socket.AF_INET, socket.SOCK_DGRAM, "udp"),
    (socket.AF_PACKET, socket.SOCK_RAW, "packet"),
]:
    try:
        socket.socket(family, kind)
        print(name, "created")
    except PermissionError:
        print(name, "denied")
a, b = socket.socketpair()
a.send(b"pair ok")
print(b.recv(16).decode())
EOF"#;
    let run = run(&sandbox, ws.path(), script, Options::default());
    for name in ["unix", "netlink", "udp", "packet"] {
        assert!(
            run.output.contains(&format!("{name} denied")),
            "{}",
            run.output
        );
    }
    assert!(run.output.contains("pair ok"), "{}", run.output);
}

#[test]
fn a_fork_bomb_is_stopped_by_the_process_limit() {
    let Some(sandbox) = sandbox() else { return };
    let ws = workspace();
    let script = r#"python3 - <<'EOF'
import os, time
made = 0
for _ in range(200):
    try:
        pid = os.fork()
    except OSError as e:
        print("fork failed:", e.strerror)
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    made += 1
print("forked", made)
EOF"#;
    let limits = Limits {
        processes: 16,
        ..Limits::default()
    };
    let run = run(
        &sandbox,
        ws.path(),
        script,
        Options {
            limits,
            ..Options::default()
        },
    );
    let forked: u32 = run
        .output
        .lines()
        .find_map(|l| l.strip_prefix("forked "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count: {}", run.output));
    assert!(forked < 16, "forked {forked}: {}", run.output);
    assert!(run.output.contains("fork failed"), "{}", run.output);
}

#[test]
fn a_memory_hog_is_stopped_by_the_memory_limit() {
    let Some(sandbox) = sandbox() else { return };
    let ws = workspace();
    let limits = Limits {
        memory_bytes: 256 << 20,
        ..Limits::default()
    };
    let script = "python3 -c 'b = bytearray(2 * 1024**3); print(\"allocated\")'; echo exit=$?";
    let run = run(
        &sandbox,
        ws.path(),
        script,
        Options {
            limits,
            ..Options::default()
        },
    );
    assert!(run.output.contains("MemoryError"), "{}", run.output);
    assert!(!run.output.contains("allocated"), "{}", run.output);
    assert!(run.output.contains("exit=1"), "{}", run.output);
}

#[test]
fn a_cpu_spinner_is_stopped_by_the_cpu_limit() {
    let Some(sandbox) = sandbox() else { return };
    let ws = workspace();
    let limits = Limits {
        cpu_seconds: 1,
        ..Limits::default()
    };
    let run = run(
        &sandbox,
        ws.path(),
        "while :; do :; done",
        Options {
            limits,
            ..Options::default()
        },
    );
    assert_eq!(
        support::signal(&run),
        Some(libc::SIGXCPU),
        "{:?}: {}",
        run.status,
        run.output
    );
}

#[test]
fn ptrace_and_signals_to_processes_outside_fail() {
    let Some(sandbox) = sandbox() else { return };
    let holder = SecretHolder::start();
    let ws = workspace();
    let script = format!(
        r#"python3 - <<'EOF'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for name, pid in [("parent", os.getppid()), ("outside", {outside})]:
    rc = libc.ptrace(16, pid, 0, 0)  # PTRACE_ATTACH
    print(name, "ptrace", rc, os.strerror(ctypes.get_errno()))
try:
    os.kill({outside}, 19)  # SIGSTOP
    print("signal sent")
except PermissionError:
    print("signal denied")
EOF"#,
        outside = holder.child.id()
    );
    let run = run(&sandbox, ws.path(), &script, Options::default());
    assert!(
        run.output
            .contains("parent ptrace -1 Operation not permitted"),
        "{}",
        run.output
    );
    assert!(
        run.output
            .contains("outside ptrace -1 Operation not permitted"),
        "{}",
        run.output
    );
    if sandbox.support().landlock_abi >= 6 {
        assert!(run.output.contains("signal denied"), "{}", run.output);
    } else {
        assert!(
            std::env::var_os("CI").is_none(),
            "signal scoping needs landlock abi 6; this kernel has {}",
            sandbox.support().landlock_abi
        );
        eprintln!("signals not checked: landlock abi 6 is missing");
    }
}

#[test]
fn namespaces_mounts_and_new_sessions_are_refused() {
    let Some(sandbox) = sandbox() else { return };
    let ws = workspace();
    let script = "unshare -r true; echo unshare=$?; setsid true; echo setsid=$?; \
                  touch f; chown 12345 f; echo chown=$?; mkdir m; mount -t tmpfs none m; echo mount=$?";
    let run = run(&sandbox, ws.path(), script, Options::default());
    for step in ["unshare", "setsid", "chown", "mount"] {
        assert!(
            !run.output.contains(&format!("{step}=0")),
            "{step} succeeded: {}",
            run.output
        );
        assert!(run.output.contains(&format!("{step}=")), "{}", run.output);
    }
}

#[test]
fn ordinary_work_still_runs() {
    let Some(sandbox) = sandbox() else { return };
    let ws = workspace();
    let script = r#"set -e
git init -q . && git -c user.email=a@b -c user.name=t commit -q --allow-empty -m init
echo 'fn main() {}' > main.rs
git status --short
ls
grep -n main main.rs
python3 -c 'print(1)'
printf 'b\na\nb\n' | sort | uniq -c | wc -l
echo hidden > /dev/null
echo to-stderr >&2
cat <(echo substituted)
cat <<EOF > here.txt
heredoc
EOF
cat here.txt
sed -i 's/heredoc/edited/' here.txt && cat here.txt
echo "$(date +%Y | wc -c)"
head -c 8 /dev/urandom | wc -c
"#;
    let run = run(&sandbox, ws.path(), script, Options::default());
    assert!(run.ok(), "{}", run.output);
    for expected in [
        "?? main.rs",
        "main.rs",
        "1:fn main() {}",
        "substituted",
        "to-stderr",
        "edited",
    ] {
        assert!(run.output.contains(expected), "{expected}: {}", run.output);
    }
    let lines: Vec<&str> = run.output.lines().collect();
    assert!(lines.contains(&"1"), "{}", run.output);
    assert!(lines.contains(&"2"), "{}", run.output);
    assert!(lines.contains(&"5"), "{}", run.output);
    assert!(lines.contains(&"8"), "{}", run.output);
}
