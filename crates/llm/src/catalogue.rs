//! The model catalogue: what the configuration knows about each model, by the name
//! agents and requests use for it (`gpt-4o-mini`, `anthropic/claude-sonnet-4`).
//!
//! Per model: its context window (compaction keeps a session's requests inside it),
//! the most it writes in one answer, and its prices per million input, output and
//! cached input tokens (what cost accounting is built on). A model the catalogue does
//! not name gets [`DEFAULT_CONTEXT_WINDOW`] and no price.
//!
//! Entries are checked when they are read (deserialised or built with
//! [`ModelCatalogue::new`]): a zero window, a negative or non-finite price and an
//! unknown key are refused with a message naming the key, so a bad catalogue stops a
//! process at start rather than mis-sizing its sessions later.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The context window, in tokens, of a model the catalogue does not name: what
/// current hosted models offer at least, so compaction stays out of the way unless a
/// model is configured smaller.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;

/// One model's entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    /// Tokens the model takes in one request, prompt and answer together.
    pub context_window: u64,
    /// The most tokens it writes in one answer, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// US dollars per million input tokens.
    pub input_usd_per_mtok: f64,
    /// US dollars per million output tokens.
    pub output_usd_per_mtok: f64,
    /// US dollars per million input tokens read from the provider's cache, when the
    /// provider prices them apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_usd_per_mtok: Option<f64>,
    /// US dollars per million input tokens written to the provider's cache, when the
    /// provider prices them apart (Anthropic: 1.25 times the input price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_usd_per_mtok: Option<f64>,
    /// Requests a minute the whole fleet may send to this model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_minute: Option<u32>,
    /// Input plus output tokens a minute the whole fleet may spend on this model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_minute: Option<u64>,
    /// Calls of this model running at once across the fleet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_requests: Option<u32>,
    /// The API the model is called through on an OpenAI-compatible endpoint: `chat`
    /// (chat completions, the default) or `responses` (`/v1/responses`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<ModelApi>,
}

/// The OpenAI API a model is called through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelApi {
    /// `/v1/chat/completions`.
    Chat,
    /// `/v1/responses`.
    Responses,
}

/// A model's prices, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prices {
    pub input_usd_per_mtok: f64,
    pub output_usd_per_mtok: f64,
    pub cached_input_usd_per_mtok: Option<f64>,
    pub cache_write_usd_per_mtok: Option<f64>,
}

/// What a session needs to know about the size of its model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelLimits {
    pub context_window: u64,
    pub max_output_tokens: Option<u64>,
}

/// A catalogue entry that cannot be used, naming its key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid model catalogue entry models.{key}: {problem}")]
pub struct CatalogueError {
    /// `"<model>".<field>`, e.g. `"gpt-4o".context_window`.
    pub key: String,
    pub problem: String,
}

/// Models by name. Names match exactly (case-sensitive), as requests and agents give
/// them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(
    try_from = "BTreeMap<String, ModelEntry>",
    into = "BTreeMap<String, ModelEntry>"
)]
pub struct ModelCatalogue {
    models: BTreeMap<String, ModelEntry>,
}

impl ModelCatalogue {
    /// A catalogue of `models`, each entry checked.
    pub fn new(models: BTreeMap<String, ModelEntry>) -> Result<Self, CatalogueError> {
        for (name, entry) in &models {
            let err = |field: &str, problem: &str| CatalogueError {
                key: format!("{name:?}.{field}"),
                problem: problem.to_owned(),
            };
            if name.trim().is_empty() {
                return Err(err("", "a model name must not be blank"));
            }
            if entry.context_window == 0 {
                return Err(err("context_window", "must be more than zero"));
            }
            for (field, zero) in [
                ("requests_per_minute", entry.requests_per_minute == Some(0)),
                ("tokens_per_minute", entry.tokens_per_minute == Some(0)),
                (
                    "max_concurrent_requests",
                    entry.max_concurrent_requests == Some(0),
                ),
            ] {
                if zero {
                    return Err(err(
                        field,
                        "must be more than zero (leave it out for no limit)",
                    ));
                }
            }
            if entry.max_output_tokens == Some(0) {
                return Err(err("max_output_tokens", "must be more than zero"));
            }
            if entry
                .max_output_tokens
                .is_some_and(|max| max >= entry.context_window)
            {
                return Err(err(
                    "max_output_tokens",
                    "must be less than the context window",
                ));
            }
            let prices = [
                ("input_usd_per_mtok", Some(entry.input_usd_per_mtok)),
                ("output_usd_per_mtok", Some(entry.output_usd_per_mtok)),
                ("cached_input_usd_per_mtok", entry.cached_input_usd_per_mtok),
                ("cache_write_usd_per_mtok", entry.cache_write_usd_per_mtok),
            ];
            for (field, price) in prices {
                if let Some(price) = price
                    && !(price.is_finite() && price >= 0.0)
                {
                    return Err(err(field, "must be a number of dollars, zero or more"));
                }
            }
        }
        Ok(Self { models })
    }

    /// The entry for `model`, if the catalogue names it.
    pub fn get(&self, model: &str) -> Option<&ModelEntry> {
        self.models.get(model)
    }

    /// The window and answer size of `model`; the default window for a model the
    /// catalogue does not name.
    pub fn limits(&self, model: &str) -> ModelLimits {
        self.get(model).map_or(
            ModelLimits {
                context_window: DEFAULT_CONTEXT_WINDOW,
                max_output_tokens: None,
            },
            |entry| ModelLimits {
                context_window: entry.context_window,
                max_output_tokens: entry.max_output_tokens,
            },
        )
    }

    /// The prices of `model`; none for a model the catalogue does not name.
    pub fn prices(&self, model: &str) -> Option<Prices> {
        self.get(model).map(|entry| Prices {
            input_usd_per_mtok: entry.input_usd_per_mtok,
            output_usd_per_mtok: entry.output_usd_per_mtok,
            cached_input_usd_per_mtok: entry.cached_input_usd_per_mtok,
            cache_write_usd_per_mtok: entry.cache_write_usd_per_mtok,
        })
    }

    /// Whether a session on `current` may hand work to `model` (a `task` call's
    /// `model`): the same model, or one whose input and output prices are both known
    /// and no higher than `current`'s. A child never costs more per token than its
    /// parent chose to; a model without a price cannot be checked, so it is refused.
    /// The error says why, for the model that asked.
    pub fn within_price_of(&self, model: &str, current: &str) -> Result<(), String> {
        if model == current {
            return Ok(());
        }
        let Some(asked) = self.prices(model) else {
            return Err(format!(
                "model `{model}` has no price in this worker's model catalogue, so it cannot \
                 be checked against yours (`{current}`); leave `model` out to use the \
                 subagent's own model, or name one the catalogue prices"
            ));
        };
        let Some(own) = self.prices(current) else {
            return Err(format!(
                "your model `{current}` has no price in this worker's model catalogue, so a \
                 subagent may run only on it (or on its own model: leave `model` out)"
            ));
        };
        if asked.input_usd_per_mtok > own.input_usd_per_mtok
            || asked.output_usd_per_mtok > own.output_usd_per_mtok
        {
            return Err(format!(
                "model `{model}` costs more than yours (`{current}`): ${} and ${} per million \
                 input and output tokens against ${} and ${}; a subagent may use your model \
                 or a cheaper one",
                asked.input_usd_per_mtok,
                asked.output_usd_per_mtok,
                own.input_usd_per_mtok,
                own.output_usd_per_mtok
            ));
        }
        Ok(())
    }

    /// The rate limits of `model`; none for a model the catalogue does not name.
    pub fn rate_limits(&self, model: &str) -> crate::limits::RateLimits {
        self.get(model)
            .map(|entry| crate::limits::RateLimits {
                requests_per_minute: entry.requests_per_minute,
                tokens_per_minute: entry.tokens_per_minute,
                max_concurrent_requests: entry.max_concurrent_requests,
            })
            .unwrap_or_default()
    }

    /// The models to call through the Responses API.
    pub fn responses_models(&self) -> impl Iterator<Item = &str> {
        self.models
            .iter()
            .filter(|(_, entry)| entry.api == Some(ModelApi::Responses))
            .map(|(name, _)| name.as_str())
    }

    /// This catalogue over `lower`: its entries added, replacing same-named ones.
    pub fn merged_over(mut self, lower: Self) -> Self {
        let mut models = lower.models;
        models.append(&mut self.models);
        Self { models }
    }

    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }

    /// Models in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &ModelEntry)> {
        self.models
            .iter()
            .map(|(name, entry)| (name.as_str(), entry))
    }
}

impl TryFrom<BTreeMap<String, ModelEntry>> for ModelCatalogue {
    type Error = CatalogueError;

    fn try_from(models: BTreeMap<String, ModelEntry>) -> Result<Self, Self::Error> {
        Self::new(models)
    }
}

impl From<ModelCatalogue> for BTreeMap<String, ModelEntry> {
    fn from(catalogue: ModelCatalogue) -> Self {
        catalogue.models
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<ModelCatalogue, serde_json::Error> {
        serde_json::from_str(json)
    }

    #[test]
    fn a_named_model_has_its_window_and_prices_and_others_the_default() {
        let catalogue = parse(
            r#"{"gpt-4o-mini": {"context_window": 128000, "max_output_tokens": 16384,
                "input_usd_per_mtok": 0.15, "output_usd_per_mtok": 0.6,
                "cached_input_usd_per_mtok": 0.075},
               "anthropic/claude-sonnet-4": {"context_window": 200000,
                "input_usd_per_mtok": 3, "output_usd_per_mtok": 15}}"#,
        )
        .expect("valid");
        assert_eq!(
            catalogue.limits("gpt-4o-mini"),
            ModelLimits {
                context_window: 128_000,
                max_output_tokens: Some(16_384)
            }
        );
        let prices = catalogue.prices("gpt-4o-mini").expect("priced");
        assert_eq!(prices.cached_input_usd_per_mtok, Some(0.075));
        assert_eq!(
            catalogue.limits("anthropic/claude-sonnet-4").context_window,
            200_000
        );
        assert_eq!(
            catalogue.limits("unknown").context_window,
            DEFAULT_CONTEXT_WINDOW
        );
        assert_eq!(catalogue.prices("unknown"), None);
        assert_eq!(catalogue.prices("GPT-4O-MINI"), None, "names match exactly");
    }

    #[test]
    fn a_subagent_model_may_cost_no_more_than_the_parents() {
        let catalogue = parse(
            r#"{"big": {"context_window": 200000, "input_usd_per_mtok": 3, "output_usd_per_mtok": 15},
               "small": {"context_window": 128000, "input_usd_per_mtok": 0.15, "output_usd_per_mtok": 0.6},
               "lopsided": {"context_window": 128000, "input_usd_per_mtok": 1, "output_usd_per_mtok": 20}}"#,
        )
        .expect("valid");
        assert_eq!(catalogue.within_price_of("small", "big"), Ok(()));
        assert_eq!(catalogue.within_price_of("big", "big"), Ok(()));
        assert_eq!(catalogue.within_price_of("unpriced", "unpriced"), Ok(()));
        let dearer = catalogue
            .within_price_of("big", "small")
            .expect_err("dearer");
        assert!(
            dearer.contains("costs more than yours (`small`)"),
            "{dearer}"
        );
        let output = catalogue
            .within_price_of("lopsided", "big")
            .expect_err("its output costs more");
        assert!(output.contains("$20"), "{output}");
        let unknown = catalogue
            .within_price_of("mystery", "big")
            .expect_err("no price");
        assert!(unknown.contains("`mystery` has no price"), "{unknown}");
        let own_unknown = catalogue
            .within_price_of("small", "mystery")
            .expect_err("the parent's own has no price");
        assert!(
            own_unknown.contains("your model `mystery`"),
            "{own_unknown}"
        );
    }

    #[test]
    fn zero_windows_negative_prices_and_unknown_keys_are_refused_naming_the_key() {
        let cases = [
            (
                r#"{"m": {"context_window": 0, "input_usd_per_mtok": 1, "output_usd_per_mtok": 1}}"#,
                r#"models."m".context_window"#,
            ),
            (
                r#"{"m": {"context_window": 10, "input_usd_per_mtok": -1, "output_usd_per_mtok": 1}}"#,
                r#"models."m".input_usd_per_mtok"#,
            ),
            (
                r#"{"m": {"context_window": 10, "input_usd_per_mtok": 1, "output_usd_per_mtok": 1,
                    "cached_input_usd_per_mtok": -0.5}}"#,
                r#"models."m".cached_input_usd_per_mtok"#,
            ),
            (
                r#"{"m": {"context_window": 10, "max_output_tokens": 10,
                    "input_usd_per_mtok": 1, "output_usd_per_mtok": 1}}"#,
                r#"models."m".max_output_tokens"#,
            ),
            (
                r#"{"m": {"context_window": 10, "input_usd_per_mtok": 1, "output_usd_per_mtok": 1,
                    "context_windw": 5}}"#,
                "context_windw",
            ),
            (
                r#"{"m": {"context_window": 10, "output_usd_per_mtok": 1}}"#,
                "input_usd_per_mtok",
            ),
        ];
        for (json, key) in cases {
            let err = parse(json).expect_err(json).to_string();
            assert!(err.contains(key), "{key} not named in: {err}");
        }
    }

    #[test]
    fn a_higher_layer_replaces_same_named_models_and_keeps_the_others() {
        let lower = parse(
            r#"{"a": {"context_window": 1000, "input_usd_per_mtok": 1, "output_usd_per_mtok": 1},
               "b": {"context_window": 2000, "input_usd_per_mtok": 1, "output_usd_per_mtok": 1}}"#,
        )
        .expect("valid");
        let upper = parse(
            r#"{"b": {"context_window": 3000, "input_usd_per_mtok": 1, "output_usd_per_mtok": 1}}"#,
        )
        .expect("valid");
        let merged = upper.merged_over(lower);
        assert_eq!(merged.limits("a").context_window, 1000);
        assert_eq!(merged.limits("b").context_window, 3000);
    }
}
