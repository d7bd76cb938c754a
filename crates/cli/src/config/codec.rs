//! How a setting reaches its place in a library config, and how `--print-config` shows
//! it: the `as CODEC` of a field declared with `settings!` ([`Same`] when left out).
//!
//! A setting is an `Option`, unset unless some layer gives it; its place is a field of
//! `CoordinatorConfig` or `WorkerConfig`, perhaps nested (`model.base_url`) and perhaps
//! itself optional. One codec serves both ways, so a field's mapping is written once.

use std::time::Duration;

use super::{REDACTED, redact_url_password};
use crate::duration::HumanDuration;

/// How a setting of type `S` goes into a slot of type `T` and is shown from it.
pub trait Codec<S, T> {
    /// Puts `value`, when set, in `slot`; unset, the slot keeps its value.
    fn put(slot: &mut T, value: Option<S>);
    /// What `--print-config` shows for `slot`; `None` leaves the key out.
    fn show(slot: &T) -> Option<S>;
}

/// The value as it is (a [`HumanDuration`] in a `Duration` slot too).
pub struct Same;

impl<T: Clone> Codec<T, T> for Same {
    fn put(slot: &mut T, value: Option<T>) {
        if let Some(value) = value {
            *slot = value;
        }
    }

    fn show(slot: &T) -> Option<T> {
        Some(slot.clone())
    }
}

impl<T: Clone> Codec<T, Option<T>> for Same {
    fn put(slot: &mut Option<T>, value: Option<T>) {
        if value.is_some() {
            *slot = value;
        }
    }

    fn show(slot: &Option<T>) -> Option<T> {
        slot.clone()
    }
}

impl Codec<HumanDuration, Duration> for Same {
    fn put(slot: &mut Duration, value: Option<HumanDuration>) {
        if let Some(HumanDuration(value)) = value {
            *slot = value;
        }
    }

    fn show(slot: &Duration) -> Option<HumanDuration> {
        Some(HumanDuration(*slot))
    }
}

/// A `no_*` switch: the slot holds the opposite (`no_stream` → `model.stream`).
pub struct Not;

impl Codec<bool, bool> for Not {
    fn put(slot: &mut bool, value: Option<bool>) {
        if let Some(no) = value {
            *slot = !no;
        }
    }

    fn show(slot: &bool) -> Option<bool> {
        Some(!*slot)
    }
}

/// A URL that may carry a password: shown with it redacted ([`redact_url_password`]).
pub struct Url;

impl Codec<String, String> for Url {
    fn put(slot: &mut String, value: Option<String>) {
        Same::put(slot, value);
    }

    fn show(slot: &String) -> Option<String> {
        Some(redact_url_password(slot))
    }
}

impl Codec<String, Option<String>> for Url {
    fn put(slot: &mut Option<String>, value: Option<String>) {
        Same::put(slot, value);
    }

    fn show(slot: &Option<String>) -> Option<String> {
        slot.as_deref().map(redact_url_password)
    }
}

/// A secret: never shown, only [`REDACTED`] in its place when it is set.
pub struct Secret;

impl Codec<String, Option<String>> for Secret {
    fn put(slot: &mut Option<String>, value: Option<String>) {
        Same::put(slot, value);
    }

    fn show(slot: &Option<String>) -> Option<String> {
        slot.as_ref().map(|_| REDACTED.to_owned())
    }
}
