//! The command sandbox a worker uses, chosen once at start from what the kernel
//! offers and `unsafe_no_sandbox`, and said in one log line.

use std::net::IpAddr;

use taskwire_agent::CommandSandbox;

use crate::config::WorkerConfig;

/// Probes the kernel, logs what is missing or weaker, and builds the sandbox hiding
/// the worker's credentials and keeping its NATS servers unreachable. Also makes the
/// worker non-dumpable, so its memory and environment stay closed to processes of the
/// same user.
pub async fn command_sandbox(config: &WorkerConfig) -> CommandSandbox {
    if let Err(error) = taskwire_sandbox::protect_current_process() {
        tracing::warn!(%error, "worker stays dumpable");
    }
    let support = taskwire_sandbox::probe();
    let missing = support.missing().join(", ");
    match (missing.is_empty(), config.unsafe_no_sandbox) {
        (true, false) => tracing::info!(
            landlock.abi = support.landlock_abi,
            process_limit = ?support.process_limit,
            "commands run in the sandbox"
        ),
        (true, true) => {
            tracing::warn!("commands run without the sandbox: started with --unsafe-no-sandbox")
        }
        (false, false) => tracing::error!(
            %missing,
            "command sandbox unavailable, commands will be refused (--unsafe-no-sandbox runs them unconfined)"
        ),
        (false, true) => tracing::warn!(
            %missing,
            "command sandbox unavailable, commands run unconfined (--unsafe-no-sandbox)"
        ),
    }
    if !config.unsafe_no_sandbox {
        for weaker in support.degraded() {
            tracing::warn!(missing = %weaker, "command sandbox weaker on this machine");
        }
    }
    let mut hidden = config.hidden_paths.clone();
    hidden.extend(config.nats.credentials_file.clone());
    let denied = nats_addresses(&config.nats_url).await;
    CommandSandbox::new(support, config.unsafe_no_sandbox, &hidden, denied)
}

/// The addresses of the NATS servers in `url` (a comma-separated list), so that a
/// `network` rule for their names cannot open them.
async fn nats_addresses(url: &str) -> Vec<IpAddr> {
    let mut addresses = Vec::new();
    for server in url.split(',') {
        let Some(host_port) = host_port(server) else {
            continue;
        };
        if let Ok(resolved) = tokio::net::lookup_host(host_port.as_str()).await {
            addresses.extend(resolved.map(|a| a.ip()));
        }
    }
    addresses
}

/// `nats://user:pw@host:port/` → `host:port` (port 4222 when absent); a server
/// without a scheme is read as `nats://`.
fn host_port(server: &str) -> Option<String> {
    let server = server.trim();
    let url = if server.contains("://") {
        url::Url::parse(server)
    } else {
        url::Url::parse(&format!("nats://{server}"))
    }
    .ok()?;
    let host = match url.host()? {
        url::Host::Ipv6(ip) => format!("[{ip}]"),
        host => host.to_string(),
    };
    Some(format!("{host}:{}", url.port().unwrap_or(4222)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nats_urls_name_their_servers() {
        assert_eq!(
            host_port("nats://127.0.0.1:4222").as_deref(),
            Some("127.0.0.1:4222")
        );
        assert_eq!(
            host_port("nats://u:p@nats.internal").as_deref(),
            Some("nats.internal:4222")
        );
        assert_eq!(
            host_port(" tls://[::1]:4333/ ").as_deref(),
            Some("[::1]:4333")
        );
        assert_eq!(host_port("nats://").as_deref(), None);
    }
}
