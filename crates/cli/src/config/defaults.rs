//! The bottom layer: the library configs' defaults, with the listen addresses moved off
//! loopback where the process runs in a container.
//!
//! `TASKWIRE_DEFAULT_LISTEN_IP` (the image sets `0.0.0.0`) is not a setting but a
//! default: it names the IP that listeners bind to when no file, variable or flag gives
//! their address, so a `listen` in a user's `--config` file still beats it, as it beats
//! every default. Set, it moves the coordinator's gRPC (`IP:50051`) and HTTP (`IP:8080`)
//! listeners and gives the worker the HTTP listener it otherwise lacks (`IP:8080`), so
//! that a container's published ports, probes and scrapes reach them. Unset or empty, the
//! defaults are the library's: loopback, and no worker listener.

use std::net::{IpAddr, SocketAddr};

use anyhow::Context;
use taskwire_coordinator::CoordinatorConfig;
use taskwire_worker::WorkerConfig;

/// The variable [`Defaults::from_env`] reads.
pub const DEFAULT_LISTEN_IP_ENV: &str = "TASKWIRE_DEFAULT_LISTEN_IP";

/// The worker's HTTP port when [`DEFAULT_LISTEN_IP_ENV`] turns its listener on: the
/// coordinator's, so that one probe port serves both roles of the image.
pub const WORKER_HTTP_PORT: u16 = 8080;

/// What the settings of a coordinator or a worker are layered on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Defaults {
    /// The IP of the default listen addresses; `None`: the library's (loopback).
    pub listen_ip: Option<IpAddr>,
}

impl Defaults {
    /// The library's defaults, as outside a container.
    pub const LIBRARY: Self = Self { listen_ip: None };

    /// The defaults `env` asks for ([`DEFAULT_LISTEN_IP_ENV`]); an empty value counts as
    /// unset, so `-e TASKWIRE_DEFAULT_LISTEN_IP=` restores loopback in the image.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        let listen_ip = match env(DEFAULT_LISTEN_IP_ENV) {
            Some(value) if !value.trim().is_empty() => {
                Some(value.trim().parse::<IpAddr>().with_context(|| {
                    format!(
                        "invalid {DEFAULT_LISTEN_IP_ENV} {value:?}: expected an IP address such as 0.0.0.0 or ::"
                    )
                })?)
            }
            _ => None,
        };
        Ok(Self { listen_ip })
    }

    /// The coordinator's defaults: the library's, its listeners on `listen_ip` when set
    /// (the ports stay).
    pub fn coordinator(self) -> CoordinatorConfig {
        let mut config = CoordinatorConfig::default();
        if let Some(ip) = self.listen_ip {
            config.listen.set_ip(ip);
            config.http_listen.set_ip(ip);
        }
        config
    }

    /// The worker's defaults: the library's, with an HTTP listener on `listen_ip` when set.
    pub fn worker(self) -> WorkerConfig {
        WorkerConfig {
            http_listen: self
                .listen_ip
                .map(|ip| SocketAddr::new(ip, WORKER_HTTP_PORT)),
            ..WorkerConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn from(value: Option<&str>) -> anyhow::Result<Defaults> {
        Defaults::from_env(|name| {
            assert_eq!(name, DEFAULT_LISTEN_IP_ENV);
            value.map(str::to_owned)
        })
    }

    #[test]
    fn unset_or_empty_keeps_the_librarys_loopback_defaults() {
        for value in [None, Some(""), Some(" ")] {
            let defaults = from(value).expect("valid");
            assert_eq!(defaults, Defaults::LIBRARY, "{value:?}");
            let coordinator = defaults.coordinator();
            assert_eq!(
                coordinator.listen,
                SocketAddr::from(([127, 0, 0, 1], 50051))
            );
            assert_eq!(
                coordinator.http_listen,
                SocketAddr::from(([127, 0, 0, 1], 8080))
            );
            assert_eq!(defaults.worker().http_listen, None);
        }
    }

    #[test]
    fn an_ip_moves_every_default_listener_and_turns_the_workers_on() {
        let defaults = from(Some("0.0.0.0")).expect("valid");
        assert_eq!(defaults.listen_ip, Some(IpAddr::V4(Ipv4Addr::UNSPECIFIED)));
        let coordinator = defaults.coordinator();
        assert_eq!(coordinator.listen, SocketAddr::from(([0, 0, 0, 0], 50051)));
        assert_eq!(
            coordinator.http_listen,
            SocketAddr::from(([0, 0, 0, 0], 8080))
        );
        assert_eq!(
            defaults.worker().http_listen,
            Some(SocketAddr::from(([0, 0, 0, 0], 8080)))
        );
        let v6 = from(Some("::")).expect("valid").coordinator();
        assert_eq!(v6.listen.to_string(), "[::]:50051");
    }

    #[test]
    fn a_value_that_is_not_an_ip_is_an_error_naming_the_variable() {
        for value in ["0.0.0.0:8080", "localhost", "all"] {
            let err = from(Some(value)).expect_err("not an ip");
            let message = format!("{err:#}");
            assert!(
                message.contains(DEFAULT_LISTEN_IP_ENV) && message.contains(value),
                "{message}"
            );
        }
    }
}
