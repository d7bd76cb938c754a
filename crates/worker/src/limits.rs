//! The models' rate budgets shared by the fleet: a [`BudgetStore`] over the
//! deployment's limits bucket (NATS key-value, [`taskwire_bus::limits`]).
//!
//! Each worker watches every key, so that reading a budget ([`BudgetStore::peek`]) is
//! a look at its own copy and a model nobody limits costs nothing per call. A change
//! is a compare-and-set from the revision last seen; on a conflict (another worker
//! wrote first) the key is read again and the change run on the new value.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use taskwire_bus::limits::{LimitsBucket, LimitsEntry};
use taskwire_bus::{Bus, BusError};
use taskwire_llm::limits::{Budget, BudgetError, BudgetStore};
use tokio::task::JoinHandle;

/// Compare-and-set tries of one change before it gives up.
const MAX_TRIES: usize = 32;

type Cache = Arc<Mutex<HashMap<String, (Budget, u64)>>>;

/// The fleet's budgets, as this worker sees them.
pub struct FleetBudgets {
    bucket: LimitsBucket,
    cache: Cache,
    watch: JoinHandle<()>,
}

impl std::fmt::Debug for FleetBudgets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetBudgets").finish_non_exhaustive()
    }
}

impl Drop for FleetBudgets {
    fn drop(&mut self) {
        self.watch.abort();
    }
}

impl FleetBudgets {
    /// Opens the bucket (a coordinator creates it) and starts watching its keys.
    pub async fn open(bus: &Bus) -> Result<Self, BusError> {
        let bucket = bus.limits_bucket().await?;
        let mut entries = bucket.watch().await?;
        let cache: Cache = Arc::default();
        let watched = cache.clone();
        let watch = tokio::spawn(async move {
            while let Some(entry) = entries.next().await {
                match entry {
                    Ok(entry) => remember(&watched, &entry),
                    Err(error) => tracing::warn!(%error, "limits bucket watch failed"),
                }
            }
            tracing::warn!("limits bucket watch ended; budgets are read at each change");
        });
        Ok(Self {
            bucket,
            cache,
            watch,
        })
    }

    fn cached(&self, model: &str) -> Option<(Budget, u64)> {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(model)
            .cloned()
    }

    /// Reads `model`'s key again (after a conflict).
    async fn refresh(&self, model: &str) -> Result<(), BusError> {
        let entry = self.bucket.get(model).await?;
        match entry {
            Some(entry) => remember(&self.cache, &entry),
            None => {
                self.cache
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(model);
            }
        }
        Ok(())
    }
}

/// Keeps `entry` in `cache` unless the cache holds a later revision.
fn remember(cache: &Cache, entry: &LimitsEntry) {
    let model = &entry.model;
    let mut cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
    if cache
        .get(model)
        .is_some_and(|(_, rev)| *rev >= entry.revision)
    {
        return;
    }
    if entry.deleted {
        cache.remove(model);
        return;
    }
    match serde_json::from_slice::<Budget>(&entry.value) {
        Ok(budget) => {
            cache.insert(model.clone(), (budget, entry.revision));
        }
        Err(error) => tracing::warn!(%model, %error, "unreadable budget in the limits bucket"),
    }
}

#[async_trait::async_trait]
impl BudgetStore for FleetBudgets {
    fn peek(&self, model: &str) -> Option<Budget> {
        self.cached(model).map(|(budget, _)| budget)
    }

    async fn modify(
        &self,
        model: &str,
        change: &mut (dyn for<'b> FnMut(&'b mut Budget) + Send),
    ) -> Result<(), BudgetError> {
        for _ in 0..MAX_TRIES {
            let (mut budget, revision) = self.cached(model).unwrap_or_default();
            change(&mut budget);
            let value = serde_json::to_vec(&budget).map_err(|source| BudgetError::Encode {
                model: model.to_owned(),
                source,
            })?;
            let written = if revision == 0 {
                self.bucket.create(model, value.into()).await
            } else {
                self.bucket.update(model, value.into(), revision).await
            };
            match written {
                Ok(revision) => {
                    let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
                    if cache.get(model).is_none_or(|(_, rev)| *rev < revision) {
                        cache.insert(model.to_owned(), (budget, revision));
                    }
                    return Ok(());
                }
                Err(conflict) => {
                    tracing::debug!(%model, %conflict, "budget changed by another worker, reading it again");
                    self.refresh(model)
                        .await
                        .map_err(|e| BudgetError::Store(Box::new(e)))?;
                }
            }
        }
        Err(BudgetError::Contended {
            model: model.to_owned(),
            tries: MAX_TRIES,
        })
    }
}
