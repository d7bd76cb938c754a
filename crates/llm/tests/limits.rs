//! A [`LimitedProvider`] in front of the OpenAI client, against a scripted model that
//! throttles as a provider does (10 requests a second, then `429` with `Retry-After:
//! 1`): with the rate configured nothing is throttled; without it, the rate is learned
//! and nothing is sent while a `Retry-After` runs. One process, its budget local; the
//! fleet-wide budget is tested on real workers in the e2e tests.

use std::collections::BTreeMap;
use std::sync::Arc;

use taskwire_llm::limits::{LimitSettings, LocalBudgets, NoEvents};
use taskwire_llm::{
    ChatRequest, LimitedProvider, Message, ModelCatalogue, ModelEntry, OpenAiClient, OpenAiConfig,
    Provider, StreamDelta,
};
use taskwire_test_support::{ScriptedModel, ScriptedReply};

fn catalogue(requests_per_minute: Option<u32>) -> ModelCatalogue {
    let entry = ModelEntry {
        context_window: 100_000,
        max_output_tokens: None,
        input_usd_per_mtok: 0.0,
        output_usd_per_mtok: 0.0,
        cached_input_usd_per_mtok: None,
        cache_write_usd_per_mtok: None,
        requests_per_minute,
        tokens_per_minute: None,
        max_concurrent_requests: None,
        api: None,
    };
    ModelCatalogue::new(BTreeMap::from([("m".to_owned(), entry)])).expect("valid")
}

fn limited(model: &ScriptedModel, catalogue: ModelCatalogue) -> LimitedProvider {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut config = OpenAiConfig::new(model.base_url());
    config.retry_throttled = false;
    let client = OpenAiClient::new(config).expect("client");
    LimitedProvider::new(
        Arc::new(client),
        catalogue,
        Arc::new(LocalBudgets::default()),
        Arc::new(NoEvents),
        LimitSettings::default(),
    )
}

/// `n` calls at once; how many waited (heard a `RateLimited`).
async fn burst(provider: &LimitedProvider, n: usize) -> usize {
    let calls = (0..n).map(|i| async move {
        let request = ChatRequest {
            model: "m".into(),
            messages: vec![Message::user(format!("call {i}"))],
            tools: vec![],
            temperature: None,
            top_p: None,
            max_tokens: None,
            cache_key: None,
            reasoning_effort: None,
            priority: 0,
            thinking_budget: None,
        };
        let mut waited = false;
        let mut on_delta = |d: StreamDelta| {
            if matches!(d, StreamDelta::RateLimited { .. }) {
                waited = true;
            }
        };
        provider
            .chat(&request, &mut on_delta)
            .await
            .expect("every call is answered");
        waited
    });
    futures::future::join_all(calls)
        .await
        .into_iter()
        .filter(|w| *w)
        .count()
}

#[tokio::test]
async fn a_configured_rate_spaces_the_calls_and_none_is_throttled() {
    let model = ScriptedModel::rate_limited(10, |_| ScriptedReply::text("ok")).await;
    let provider = limited(&model, catalogue(Some(540)));
    let waited = burst(&provider, 30).await;
    let report = model.rate_report();
    assert_eq!(report.throttled, 0, "{report:?}");
    assert_eq!(report.sent, 30);
    assert!(report.peak_per_second <= 10, "{report:?}");
    assert!(
        waited >= 25,
        "the calls after the first waited for their slots: {waited}"
    );
}

#[tokio::test]
async fn without_a_configured_rate_the_rate_is_learned_and_retry_after_is_kept() {
    let model = ScriptedModel::rate_limited(10, |_| ScriptedReply::text("ok")).await;
    let provider = limited(&model, catalogue(None));
    burst(&provider, 40).await;
    let report = model.rate_report();
    assert_eq!(report.accepted, 40, "{report:?}");
    assert_eq!(
        report.early, 0,
        "nothing is sent while a Retry-After runs: {report:?}"
    );
    // The first burst goes out before anything is known: 10 answered, 30 throttled.
    // After it, the calls are paced and few more are throttled.
    assert!(
        report.throttled <= 35,
        "after the first burst, the calls are paced: {report:?}"
    );
}

/// A fleet's budget store whose every write loses to another writer for a while, over
/// a budget already blocked by a provider's `Retry-After`.
struct Contended {
    inner: LocalBudgets,
    losses: std::sync::atomic::AtomicU32,
}

#[async_trait::async_trait]
impl taskwire_llm::limits::BudgetStore for Contended {
    fn peek(&self, model: &str) -> Option<taskwire_llm::limits::Budget> {
        self.inner.peek(model)
    }

    async fn modify(
        &self,
        model: &str,
        change: &mut (dyn for<'b> FnMut(&'b mut taskwire_llm::limits::Budget) + Send),
    ) -> Result<(), taskwire_llm::limits::BudgetError> {
        let left = self.losses.load(std::sync::atomic::Ordering::SeqCst);
        if left > 0 {
            self.losses
                .store(left - 1, std::sync::atomic::Ordering::SeqCst);
            return Err(taskwire_llm::limits::BudgetError::Contended {
                model: model.to_owned(),
                tries: 32,
            });
        }
        self.inner.modify(model, change).await
    }
}

/// A store that keeps losing its writes (another worker's sessions taking slots) is
/// waited out, not a reason to send: no call goes out while the provider's
/// `Retry-After` that the budget holds still runs.
#[tokio::test]
async fn a_contended_budget_store_is_waited_out_and_a_known_retry_after_is_kept() {
    use taskwire_llm::limits::BudgetStore as _;
    let model = ScriptedModel::start(|_| ScriptedReply::text("ok")).await;
    let store = Arc::new(Contended {
        inner: LocalBudgets::default(),
        losses: std::sync::atomic::AtomicU32::new(3),
    });
    let now_ms = u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis(),
    )
    .expect("fits");
    let blocked_until = now_ms + 600;
    store
        .inner
        .modify("m", &mut |b| b.blocked_until_ms = blocked_until)
        .await
        .expect("stored");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut config = OpenAiConfig::new(model.base_url());
    config.retry_throttled = false;
    let provider = LimitedProvider::new(
        Arc::new(OpenAiClient::new(config).expect("client")),
        // A configured rate: every round writes to the store.
        catalogue(Some(600)),
        store.clone(),
        Arc::new(NoEvents),
        LimitSettings::default(),
    );
    let request = ChatRequest {
        model: "m".into(),
        messages: vec![Message::user("hi")],
        ..ChatRequest::default()
    };
    provider
        .chat(&request, &mut |_: StreamDelta| {})
        .await
        .expect("answered");
    let sent_ms = u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis(),
    )
    .expect("fits");
    assert!(
        sent_ms >= blocked_until,
        "answered at {sent_ms}, before the Retry-After ended at {blocked_until}"
    );
    assert_eq!(
        store.losses.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "every lost write was tried again"
    );
    assert_eq!(model.request_count(), 1);
}
