//! The image's defaults: `taskwire --print-config` run with the environment that
//! `deploy/Dockerfile`'s runtime stage sets (its `ENV` lines, read from the file, so the
//! test follows the Dockerfile) and nothing else. In the image the listeners are on all
//! interfaces, so that `docker run -p 50051:50051 -p 8080:8080 IMAGE coordinator ...`
//! is reachable; outside it they stay on loopback; and a file, a variable or a flag
//! still beats the image's defaults.

use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Output};

const DOCKERFILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/Dockerfile");

/// The `ENV` variables of the Dockerfile's last stage (the image), in order.
fn image_env() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(DOCKERFILE).expect("deploy/Dockerfile is readable");
    // Instructions, continuation lines joined and comments left out.
    let mut instructions = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if current.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(head) => current.push_str(head),
            None => {
                current.push_str(trimmed);
                instructions.push(std::mem::take(&mut current));
            }
        }
    }
    let last_stage = instructions
        .iter()
        .rposition(|i| keyword(i) == "FROM")
        .expect("the Dockerfile has a FROM");
    instructions[last_stage..]
        .iter()
        .filter(|i| keyword(i) == "ENV")
        .flat_map(|i| env_pairs(i[3..].trim()))
        .collect()
}

fn keyword(instruction: &str) -> String {
    let word = instruction.split_whitespace().next().unwrap_or_default();
    word.to_ascii_uppercase()
}

/// `KEY=VALUE ...` (values may be double-quoted) or the old form `KEY VALUE`. Anything
/// this does not read as Docker would (variable substitution) fails the test rather
/// than being guessed at.
fn env_pairs(args: &str) -> Vec<(String, String)> {
    assert!(!args.contains('$'), "ENV with a substitution: {args}");
    let first = args
        .split_whitespace()
        .next()
        .expect("ENV names a variable");
    if !first.contains('=') {
        let (key, value) = args.split_once(char::is_whitespace).expect("ENV KEY VALUE");
        return vec![(key.to_owned(), value.trim().to_owned())];
    }
    let mut pairs = Vec::new();
    let mut rest = args.trim();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=').expect("ENV KEY=VALUE");
        let (value, after) = match after.strip_prefix('"') {
            Some(quoted) => quoted.split_once('"').expect("a closing quote"),
            None => after.split_once(char::is_whitespace).unwrap_or((after, "")),
        };
        assert!(!value.contains('\\'), "ENV with an escape: {args}");
        pairs.push((key.to_owned(), value.to_owned()));
        rest = after.trim_start();
    }
    pairs
}

/// `taskwire ROLE --print-config ARGS`, with `env` as its whole environment.
fn print_config(role: &str, env: &[(String, String)], args: &[&str]) -> toml::Table {
    let out = run(Command::new(env!("CARGO_BIN_EXE_taskwire"))
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .args([role, "--print-config"])
        .args(args));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).expect("utf-8 stdout");
    let file: toml::Table = toml::from_str(&printed).expect("print-config is toml");
    file[role].as_table().expect("the role's table").clone()
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("taskwire runs")
}

/// The address `key` of a printed section; `None` when it is left out (no listener).
fn addr(section: &toml::Table, key: &str) -> Option<SocketAddr> {
    section.get(key).map(|value| {
        value
            .as_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{key} is an address: {value}"))
    })
}

fn with(mut env: Vec<(String, String)>, key: &str, value: &str) -> Vec<(String, String)> {
    env.retain(|(k, _)| k != key);
    env.push((key.to_owned(), value.to_owned()));
    env
}

fn config_file(text: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    file.write_all(text.as_bytes()).expect("write config");
    file
}

#[test]
fn the_dockerfiles_env_lines_are_read_as_docker_reads_them() {
    assert_eq!(
        env_pairs(r#"A=1 B="two words" C=3"#),
        [("A", "1"), ("B", "two words"), ("C", "3")].map(|(k, v)| (k.to_owned(), v.to_owned()))
    );
    assert_eq!(
        env_pairs("OLD value with spaces"),
        [("OLD".to_owned(), "value with spaces".to_owned())]
    );
    let env = image_env();
    assert!(
        env.iter().any(|(k, _)| k == "HOME"),
        "the runtime stage's ENV lines are found: {env:?}"
    );
    assert!(
        !env.iter()
            .any(|(k, _)| k == "TASKWIRE_LISTEN" || k == "TASKWIRE_HTTP_LISTEN"),
        "the image sets defaults, not settings that would beat a config file: {env:?}"
    );
}

#[test]
fn in_the_image_every_listener_defaults_to_all_interfaces() {
    let env = image_env();
    let coordinator = print_config("coordinator", &env, &[]);
    let worker = print_config("worker", &env, &[]);
    for (role, section, key, port) in [
        ("coordinator", &coordinator, "listen", 50051),
        ("coordinator", &coordinator, "http_listen", 8080),
        ("worker", &worker, "http_listen", 8080),
    ] {
        let addr = addr(section, key).unwrap_or_else(|| panic!("{role} has no {key}"));
        assert!(
            addr.ip().is_unspecified() && addr.port() == port,
            "{role} {key} = {addr} in the image ({env:?})"
        );
    }
}

#[test]
fn outside_the_image_listeners_default_to_loopback_and_the_worker_has_none() {
    let coordinator = print_config("coordinator", &[], &[]);
    assert_eq!(
        addr(&coordinator, "listen"),
        Some(SocketAddr::from(([127, 0, 0, 1], 50051)))
    );
    assert_eq!(
        addr(&coordinator, "http_listen"),
        Some(SocketAddr::from(([127, 0, 0, 1], 8080)))
    );
    assert_eq!(addr(&print_config("worker", &[], &[]), "http_listen"), None);

    // An empty value, as `docker run -e TASKWIRE_DEFAULT_LISTEN_IP=` sets it, is unset.
    let emptied = with(image_env(), "TASKWIRE_DEFAULT_LISTEN_IP", "");
    let coordinator = print_config("coordinator", &emptied, &[]);
    assert_eq!(
        addr(&coordinator, "listen"),
        Some(SocketAddr::from(([127, 0, 0, 1], 50051)))
    );
    assert_eq!(
        addr(&print_config("worker", &emptied, &[]), "http_listen"),
        None
    );
}

#[test]
fn a_file_env_or_flag_beats_the_images_listen_defaults() {
    let env = image_env();
    let file = config_file(
        "[coordinator]\nlisten = \"127.0.0.1:6000\"\n\n[worker]\nhttp_listen = \"127.0.0.1:9000\"\n",
    );
    let path = file.path().to_str().expect("utf-8 path");

    let coordinator = print_config("coordinator", &env, &["--config", path]);
    assert_eq!(
        addr(&coordinator, "listen"),
        Some(SocketAddr::from(([127, 0, 0, 1], 6000))),
        "the file beats the image's default"
    );
    assert_eq!(
        addr(&coordinator, "http_listen"),
        Some(SocketAddr::from(([0, 0, 0, 0], 8080))),
        "what the file leaves out keeps the image's default"
    );
    let worker = print_config("worker", &with(env.clone(), "TASKWIRE_CONFIG", path), &[]);
    assert_eq!(
        addr(&worker, "http_listen"),
        Some(SocketAddr::from(([127, 0, 0, 1], 9000)))
    );

    let from_env = with(env.clone(), "TASKWIRE_HTTP_LISTEN", "127.0.0.1:7001");
    let coordinator = print_config("coordinator", &from_env, &["--listen", "127.0.0.1:7000"]);
    assert_eq!(
        addr(&coordinator, "listen"),
        Some(SocketAddr::from(([127, 0, 0, 1], 7000))),
        "a flag"
    );
    assert_eq!(
        addr(&coordinator, "http_listen"),
        Some(SocketAddr::from(([127, 0, 0, 1], 7001))),
        "a variable"
    );
    let worker = print_config("worker", &env, &["--http-listen", "127.0.0.1:7002"]);
    assert_eq!(
        addr(&worker, "http_listen"),
        Some(SocketAddr::from(([127, 0, 0, 1], 7002)))
    );
}

#[test]
fn a_default_listen_ip_that_is_not_an_ip_is_an_error_naming_it() {
    for role in ["coordinator", "worker"] {
        let out = run(Command::new(env!("CARGO_BIN_EXE_taskwire"))
            .env_clear()
            .env("TASKWIRE_DEFAULT_LISTEN_IP", "0.0.0.0:8080")
            .args([role, "--print-config"]));
        assert_eq!(out.status.code(), Some(1), "{role}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("TASKWIRE_DEFAULT_LISTEN_IP") && stderr.contains("0.0.0.0:8080"),
            "{role}: {stderr}"
        );
    }
}
