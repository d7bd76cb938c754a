//! Result webhooks: when a task submitted with a `callback_url` ends, the coordinator
//! POSTs its result there as JSON, signed, and retries with backoff until a 2xx or the
//! attempt limit.
//!
//! - **The body** is `{"event": "task.ended", "task": <the task as GET /v1/tasks/{id}
//!   answers it, result included>}`.
//! - **The signature**: `taskwire-signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of
//!   "<t>.<body>" keyed with the tenant's secret>` ([`sign`]). A receiver recomputes
//!   it, compares in constant time and refuses old `t`s. `taskwire-delivery` names the
//!   task (the same on every attempt: a receiver that already has it may answer 2xx),
//!   `taskwire-attempt` the attempt.
//! - **The secret** is the tenant's, from `--webhook-secrets-file` (TOML,
//!   `tenant = "secret"` lines); a submit with a callback for a tenant without one is
//!   refused.
//! - **Who may be called** ([`check_url`]): `https` URLs only, unless
//!   `--webhook-allow-http`; no loopback, private, link-local or otherwise
//!   non-public address, unless `--webhook-allow-private`, checked on the URL at submit
//!   and on every address the name resolves to at delivery (so a name cannot point
//!   inside later). Redirects are not followed.
//! - **Exactly one 2xx**: the store leases a due webhook to one coordinator at a time
//!   and records a 2xx before anything else ([`taskwire_store::webhooks`]); a delivered
//!   webhook is never taken again, by any coordinator, after any restart. A coordinator
//!   killed mid-delivery leaves the lease to expire (the request timeout plus a margin)
//!   and the delivery is made again with the same `taskwire-delivery`.
//!
//! Failure policy of the loop: a store error is logged and the loop tries again on its
//! next tick; a receiver's error is a failed attempt, recorded.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use taskwire_protocol::pb;
use taskwire_protocol::pb::task_service_server::TaskService;
use taskwire_store::webhooks::{DeliveryOutcome, DueWebhook};
use tokio_util::sync::CancellationToken;

use crate::api::TaskApi;
use crate::auth::Principal;
use crate::error::CoordinatorError;

/// How often the deliverer looks for due webhooks when no task ended meanwhile.
const TICK: Duration = Duration::from_millis(500);
/// How long the deliverer gathers the tasks it ended before it scans for due webhooks.
const COALESCE: Duration = Duration::from_millis(50);
/// Most deliveries one tick starts.
const BATCH: u32 = 32;
/// A lease outlives the request timeout by this much.
const LEASE_MARGIN: Duration = Duration::from_secs(5);
/// First and longest wait between attempts.
const FIRST_RETRY: Duration = Duration::from_secs(1);
const LONGEST_RETRY: Duration = Duration::from_secs(600);

/// What the operator allows: how webhooks are delivered.
#[derive(Debug, Clone)]
pub struct WebhookPolicy {
    pub allow_http: bool,
    pub allow_private: bool,
    pub max_attempts: u32,
    pub timeout: Duration,
}

/// Each tenant's signing secret.
#[derive(Clone, Default)]
pub struct Secrets(Arc<HashMap<String, String>>);

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secrets themselves.
        f.debug_struct("Secrets")
            .field("tenants", &self.0.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Secrets {
    /// Reads `tenant = "secret"` lines (TOML). An empty secret is refused.
    pub fn from_file(path: &Path) -> Result<Self, CoordinatorError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            CoordinatorError::Config(format!(
                "failed to read --webhook-secrets-file {}: {e}",
                path.display()
            ))
        })?;
        Self::parse(&text).map_err(|reason| {
            CoordinatorError::Config(format!(
                "invalid --webhook-secrets-file {}: {reason}",
                path.display()
            ))
        })
    }

    fn parse(text: &str) -> Result<Self, String> {
        let map: HashMap<String, String> = toml::from_str(text).map_err(|e| e.to_string())?;
        if let Some((tenant, _)) = map.iter().find(|(_, s)| s.trim().is_empty()) {
            return Err(format!("tenant `{tenant}` has an empty secret"));
        }
        Ok(Self(Arc::new(map)))
    }

    /// `tenant`'s secret.
    pub fn get(&self, tenant: &str) -> Option<&str> {
        self.0.get(tenant).map(String::as_str)
    }
}

/// The `taskwire-signature` header's value for `body` sent at `t` (unix seconds).
pub fn sign(secret: &str, t: i64, body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// Whether a submit's `callback_url` may be called: why not, if not.
pub fn check_url(raw: &str, policy: &WebhookPolicy) -> Result<url::Url, String> {
    let url = url::Url::parse(raw).map_err(|e| format!("`{raw}` is not a URL: {e}"))?;
    match url.scheme() {
        "https" => {}
        "http" if policy.allow_http => {}
        "http" => {
            return Err(
                "must be an https URL (the coordinator does not allow http webhooks)".to_owned(),
            );
        }
        other => return Err(format!("must be an https URL, not {other}:")),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not carry credentials".to_owned());
    }
    let host = match url.host() {
        None => return Err("names no host".to_owned()),
        Some(url::Host::Domain(d)) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            if !policy.allow_private && (d == "localhost" || d.ends_with(".localhost")) {
                return Err(format!(
                    "names {d}, a loopback host (the coordinator does not allow private addresses)"
                ));
            }
            return Ok(url);
        }
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip),
    };
    if !policy.allow_private && !is_public(host) {
        return Err(format!(
            "names {host}, not a public address (the coordinator does not allow private addresses)"
        ));
    }
    Ok(url)
}

/// Whether `ip` is a public unicast address: not loopback, private, link-local,
/// shared (CGNAT), documentation, benchmarking, multicast, broadcast or unspecified.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 198 && (18..20).contains(&b))
                || a >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00 // unique local
                || (first & 0xffc0) == 0xfe80 // link-local
                || first == 0x2001 && v6.segments()[1] == 0x0db8) // documentation
        }
    }
}

/// Resolves names for webhook requests, keeping only the addresses the policy allows.
struct PublicResolver {
    allow_private: bool,
}

impl reqwest::dns::Resolve for PublicResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|a| allow_private || is_public(a.ip()))
                .collect();
            if addrs.is_empty() {
                return Err(format!(
                    "{host} resolves to no public address (the coordinator does not allow private addresses)"
                )
                .into());
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Delivers due webhooks until `shutdown`.
pub struct Deliverer {
    api: TaskApi,
    secrets: Secrets,
    policy: WebhookPolicy,
    http: reqwest::Client,
    holder: String,
}

impl Deliverer {
    pub fn new(
        api: TaskApi,
        secrets: Secrets,
        policy: WebhookPolicy,
    ) -> Result<Self, CoordinatorError> {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let http = reqwest::Client::builder()
            .timeout(policy.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(PublicResolver {
                allow_private: policy.allow_private,
            }))
            .user_agent(concat!("taskwire/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| {
                CoordinatorError::Config(format!("failed to build the webhook client: {e}"))
            })?;
        Ok(Self {
            api,
            secrets,
            policy,
            http,
            holder: format!("coordinator-{}", uuid::Uuid::new_v4()),
        })
    }

    /// Delivers what is due each tick, and at once when this coordinator ended a task
    /// (it sent the task's finished notice), until `shutdown`. Every task ends in some
    /// coordinator, whose deliverer wakes for it: no coordinator reads the notices of
    /// all the others.
    pub async fn run(self, shutdown: CancellationToken) {
        let this = Arc::new(self);
        let bus = this.api.state().bus.clone();
        loop {
            let due = this
                .api
                .state()
                .store
                .take_due_webhooks(BATCH, this.policy.timeout + LEASE_MARGIN, &this.holder)
                .await;
            match due {
                Ok(due) => {
                    let full = due.len() == BATCH as usize;
                    let deliveries = due.into_iter().map(|d| {
                        let this = this.clone();
                        async move { this.deliver(d).await }
                    });
                    futures::future::join_all(deliveries).await;
                    if full {
                        continue;
                    }
                }
                Err(error) => tracing::warn!(%error, "webhooks: failed to read due deliveries"),
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(TICK) => {}
                () = bus.finished_here().notified() => {
                    // Tasks end in bursts under load: one scan for the tasks ended in
                    // a short window, not one per task.
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = tokio::time::sleep(COALESCE) => {}
                    }
                }
            }
        }
    }

    async fn deliver(&self, due: DueWebhook) {
        let started = Instant::now();
        let outcome = self.post(&due).await;
        let outcome = match outcome {
            Ok(code) if (200..300).contains(&code) => {
                DeliveryOutcome::Delivered { status_code: code }
            }
            Ok(code) => self.failed(&due, code, format!("the receiver answered HTTP {code}")),
            Err(error) => self.failed(&due, 0, error),
        };
        let took = started.elapsed();
        use crate::metrics::WebhookOutcome;
        self.api.state().metrics.webhook_delivery(match &outcome {
            DeliveryOutcome::Delivered { .. } => WebhookOutcome::Delivered,
            DeliveryOutcome::Failed {
                retry_in: Some(_), ..
            } => WebhookOutcome::Retrying,
            DeliveryOutcome::Failed { retry_in: None, .. } => WebhookOutcome::Failed,
        });
        match &outcome {
            DeliveryOutcome::Delivered { status_code } => {
                tracing::info!(task.id = %due.task_id, attempt = due.attempt, status = status_code, "webhook delivered")
            }
            DeliveryOutcome::Failed {
                error, retry_in, ..
            } => {
                tracing::warn!(task.id = %due.task_id, attempt = due.attempt, %error, retry_in = ?retry_in, "webhook delivery failed")
            }
        }
        match self
            .api
            .state()
            .store
            .record_webhook_delivery(due.task_id, due.attempt, took, &outcome)
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(task.id = %due.task_id, attempt = due.attempt, "webhook delivery recorded late: a later attempt holds it")
            }
            Err(error) => {
                tracing::warn!(task.id = %due.task_id, %error, "failed to record a webhook delivery; it is tried again when its lease ends")
            }
        }
    }

    fn failed(&self, due: &DueWebhook, status_code: u16, error: String) -> DeliveryOutcome {
        DeliveryOutcome::Failed {
            status_code,
            error,
            retry_in: (due.attempt < self.policy.max_attempts).then(|| retry_delay(due.attempt)),
        }
    }

    /// One POST: the receiver's status, or why none came back.
    async fn post(&self, due: &DueWebhook) -> Result<u16, String> {
        let url = check_url(&due.url, &self.policy)?;
        let secret = self
            .secrets
            .get(&due.tenant)
            .ok_or_else(|| format!("tenant `{}` has no webhook secret", due.tenant))?;
        let caller = Principal {
            tenant: Some(due.tenant.clone()),
            scopes: None,
        };
        let mut task = self
            .api
            .get(crate::rest::request(
                &caller,
                pb::GetRequest {
                    task_id: due.task_id.to_string(),
                },
            ))
            .await
            .map_err(|s| format!("failed to read the task: {}", s.message()))?
            .into_inner();
        task.webhook = None;
        let body = serde_json::to_vec(&serde_json::json!({
            "event": "task.ended",
            "task": crate::rest::model::Task::from(&task),
        }))
        .map_err(|e| format!("failed to encode the body: {e}"))?;
        let t = chrono::Utc::now().timestamp();
        let response = self
            .http
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("taskwire-signature", sign(secret, t, &body))
            .header("taskwire-delivery", due.task_id.to_string())
            .header("taskwire-attempt", due.attempt.to_string())
            .body(body)
            .send()
            .await
            .map_err(|e| error_chain(&e))?;
        Ok(response.status().as_u16())
    }
}

/// A stored webhook as `Get` answers it.
pub fn to_wire(w: taskwire_store::webhooks::Webhook) -> pb::Webhook {
    use taskwire_protocol::time::to_wire as time;
    use taskwire_store::webhooks::WebhookState as S;
    let state = match w.state {
        S::Waiting => pb::WebhookState::Waiting,
        S::Pending => pb::WebhookState::Pending,
        S::Delivered => pb::WebhookState::Delivered,
        S::Failed => pb::WebhookState::Failed,
    };
    pb::Webhook {
        url: w.url,
        state: state as i32,
        attempts: w.attempts,
        next_attempt_at: (w.state == S::Pending).then(|| time(w.next_attempt_at)),
        delivered_at: w.delivered_at.map(time),
        deliveries: w
            .deliveries
            .into_iter()
            .map(|d| pb::WebhookDelivery {
                attempt: d.attempt,
                started_at: Some(time(d.started_at)),
                status_code: u32::from(d.status_code),
                error: d.error,
                duration_ms: d.duration_ms,
            })
            .collect(),
    }
}

/// The wait before attempt `attempt + 1`: doubling from one second, at most ten
/// minutes, with up to a quarter more of jitter.
pub fn retry_delay(attempt: u32) -> Duration {
    let base = FIRST_RETRY
        .saturating_mul(
            1u32.checked_shl(attempt.saturating_sub(1))
                .unwrap_or(u32::MAX),
        )
        .min(LONGEST_RETRY);
    base + base.mul_f64(fastrand::f64() / 4.0)
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow_http: bool, allow_private: bool) -> WebhookPolicy {
        WebhookPolicy {
            allow_http,
            allow_private,
            max_attempts: 3,
            timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn only_https_to_public_hosts_unless_allowed() {
        let strict = policy(false, false);
        assert!(check_url("https://hooks.example.com/x", &strict).is_ok());
        for (url, why) in [
            ("http://hooks.example.com/x", "https"),
            ("ftp://hooks.example.com/x", "https"),
            ("https://127.0.0.1/x", "not a public address"),
            ("https://10.1.2.3/x", "not a public address"),
            ("https://169.254.169.254/latest", "not a public address"),
            ("https://[::1]/x", "not a public address"),
            ("https://[::ffff:192.168.0.1]/x", "not a public address"),
            ("https://localhost:8443/x", "loopback"),
            ("https://user:pw@hooks.example.com/x", "credentials"),
            ("not a url", "not a URL"),
        ] {
            let err = check_url(url, &strict).expect_err(url);
            assert!(err.contains(why), "{url}: {err}");
        }
        assert!(check_url("http://127.0.0.1:9/x", &policy(true, true)).is_ok());
        assert!(check_url("http://127.0.0.1:9/x", &policy(true, false)).is_err());
        assert!(check_url("https://127.0.0.1:9/x", &policy(false, true)).is_ok());
    }

    #[test]
    fn public_addresses_are_told_from_the_rest() {
        for ip in ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111"] {
            assert!(is_public(ip.parse().expect("ip")), "{ip}");
        }
        for ip in [
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "fd00::1",
            "fe80::1",
            "224.0.0.1",
        ] {
            assert!(!is_public(ip.parse().expect("ip")), "{ip}");
        }
    }

    #[test]
    fn the_signature_is_hmac_sha256_of_the_time_and_body() {
        // RFC 4231-style check against an independently computed value:
        // echo -n '1700000000.{"a":1}' | openssl dgst -sha256 -hmac secret
        let header = sign("secret", 1_700_000_000, br#"{"a":1}"#);
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(b"secret").expect("key");
        mac.update(br#"1700000000.{"a":1}"#);
        let expected = hex::encode(mac.finalize().into_bytes());
        assert_eq!(header, format!("t=1700000000,v1={expected}"));
        assert_ne!(sign("other", 1_700_000_000, br#"{"a":1}"#), header);
    }

    #[test]
    fn secrets_are_read_per_tenant_and_empty_ones_refused() {
        let s = Secrets::parse("acme = \"s1\"\ndefault = \"s2\"\n").expect("secrets");
        assert_eq!(s.get("acme"), Some("s1"));
        assert_eq!(s.get("globex"), None);
        assert!(Secrets::parse("acme = \"\"").is_err());
        assert!(!format!("{s:?}").contains("s1"), "secrets never print");
    }

    #[test]
    fn retries_wait_longer_each_time_up_to_ten_minutes() {
        assert!(
            retry_delay(1) >= Duration::from_secs(1)
                && retry_delay(1) <= Duration::from_millis(1250)
        );
        assert!(retry_delay(3) >= Duration::from_secs(4));
        assert!(retry_delay(40) <= LONGEST_RETRY + LONGEST_RETRY / 4);
    }
}
