//! [`PricedProvider`]: puts the catalogue's price on each model call's usage.
//!
//! Providers report tokens only; what a call cost depends on the deployment's
//! catalogue, so the pricing wraps whatever provider serves the call. A model the
//! catalogue gives no price leaves its tokens in `unpriced_tokens`: its cost is
//! unknown, not zero. Input tokens the provider read from its cache (OpenAI's
//! `prompt_tokens_details.cached_tokens`, Anthropic's `cache_read_input_tokens`) are
//! priced at the cached price when the catalogue has one, else at the input price;
//! tokens written to the cache (Anthropic's `cache_creation_input_tokens`) at the
//! cache-write price, else at the input price.

use std::sync::Arc;

use crate::catalogue::{ModelCatalogue, Prices};
use crate::{ChatRequest, ChatResponse, LlmError, Provider, StreamDelta, Usage};

/// Pico-dollars per token at one US dollar per million tokens.
const PICO_USD_PER_TOKEN_AT_USD_PER_MTOK: f64 = 1e6;

/// `usage` with its cost at `prices`; `None` counts its tokens as unpriced.
pub fn price(usage: Usage, prices: Option<Prices>) -> Usage {
    let tokens = |n: u64, usd_per_mtok: f64| {
        // Token counts stay far below 2^53 and prices are checked finite and >= 0.
        #[allow(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss
        )]
        let pico = (n as f64 * usd_per_mtok * PICO_USD_PER_TOKEN_AT_USD_PER_MTOK).round() as u64;
        pico
    };
    match prices {
        Some(prices) => Usage {
            cost_picousd: {
                let cached = usage.cached_input_tokens.min(usage.input_tokens);
                let written = usage
                    .cache_write_input_tokens
                    .min(usage.input_tokens - cached);
                let cached_price = prices
                    .cached_input_usd_per_mtok
                    .unwrap_or(prices.input_usd_per_mtok);
                let written_price = prices
                    .cache_write_usd_per_mtok
                    .unwrap_or(prices.input_usd_per_mtok);
                tokens(
                    usage.input_tokens - cached - written,
                    prices.input_usd_per_mtok,
                )
                .saturating_add(tokens(cached, cached_price))
                .saturating_add(tokens(written, written_price))
                .saturating_add(tokens(usage.output_tokens, prices.output_usd_per_mtok))
            },
            unpriced_tokens: 0,
            ..usage
        },
        None => Usage {
            cost_picousd: 0,
            unpriced_tokens: usage.input_tokens.saturating_add(usage.output_tokens),
            ..usage
        },
    }
}

/// A provider whose answers carry their cost, from the catalogue entry of the
/// request's model.
pub struct PricedProvider {
    inner: Arc<dyn Provider>,
    catalogue: ModelCatalogue,
}

impl PricedProvider {
    pub fn new(inner: Arc<dyn Provider>, catalogue: ModelCatalogue) -> Self {
        Self { inner, catalogue }
    }
}

#[async_trait::async_trait]
impl Provider for PricedProvider {
    async fn chat(
        &self,
        request: &ChatRequest,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<ChatResponse, LlmError> {
        let mut response = self.inner.chat(request, on_delta).await?;
        response.usage = price(response.usage, self.catalogue.prices(&request.model));
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_priced_call_costs_its_tokens_at_the_catalogue_prices() {
        let prices = Prices {
            input_usd_per_mtok: 2.0,
            output_usd_per_mtok: 8.0,
            cached_input_usd_per_mtok: None,
            cache_write_usd_per_mtok: None,
        };
        let usage = price(Usage::tokens(1000, 500), Some(prices));
        // 1000 × $2/M + 500 × $8/M = $0.002 + $0.004.
        assert_eq!(usage.cost_picousd, 6_000_000_000);
        assert_eq!(usage.unpriced_tokens, 0);
        let cheap = Prices {
            input_usd_per_mtok: 0.15,
            output_usd_per_mtok: 0.6,
            cached_input_usd_per_mtok: None,
            cache_write_usd_per_mtok: None,
        };
        assert_eq!(
            price(Usage::tokens(1, 1), Some(cheap)).cost_picousd,
            750_000
        );
    }

    #[test]
    fn cached_input_tokens_cost_the_cached_price_when_there_is_one() {
        let mut prices = Prices {
            input_usd_per_mtok: 2.0,
            output_usd_per_mtok: 8.0,
            cached_input_usd_per_mtok: Some(0.5),
            cache_write_usd_per_mtok: Some(2.5),
        };
        let usage = Usage {
            cached_input_tokens: 600,
            ..Usage::tokens(1000, 0)
        };
        // 400 × $2/M + 600 × $0.5/M = $0.0008 + $0.0003.
        assert_eq!(price(usage, Some(prices)).cost_picousd, 1_100_000_000);
        // 200 of the 400 written to the cache: 200 × $2/M + 200 × $2.5/M + 600 × $0.5/M.
        let written = Usage {
            cache_write_input_tokens: 200,
            ..usage
        };
        assert_eq!(price(written, Some(prices)).cost_picousd, 1_200_000_000);
        prices.cached_input_usd_per_mtok = None;
        prices.cache_write_usd_per_mtok = None;
        assert_eq!(price(usage, Some(prices)).cost_picousd, 2_000_000_000);
    }

    #[test]
    fn an_unpriced_call_counts_its_tokens_apart_and_costs_nothing_made_up() {
        let usage = price(Usage::tokens(10, 5), None);
        assert_eq!(usage.cost_picousd, 0);
        assert_eq!(usage.unpriced_tokens, 15);
    }
}
