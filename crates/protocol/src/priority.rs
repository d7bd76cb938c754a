//! A task's priority: 1 (highest) to 5 (lowest), 3 when not given, as in Temporal's
//! task queues. A child runs at its parent's priority unless it asks for a lower one
//! (a larger number); it may not ask for a higher one.

use serde::{Deserialize, Serialize};

use crate::ProtocolError;

/// A task's priority, 1 (highest) to 5 (lowest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Priority(u8);

impl Priority {
    pub const HIGHEST: Self = Self(1);
    pub const DEFAULT: Self = Self(3);
    pub const LOWEST: Self = Self(5);

    /// `value` from the wire: 0 is "not given" (the default); 1 to 5 are themselves;
    /// anything else is an invalid `field`.
    pub fn from_wire(field: &'static str, value: u32) -> Result<Self, ProtocolError> {
        match value {
            0 => Ok(Self::DEFAULT),
            1..=5 => Ok(Self(u8::try_from(value).unwrap_or(3))),
            _ => Err(ProtocolError::invalid(
                field,
                format!(
                    "{value} is not a priority: 1 (highest) to 5 (lowest), 0 for the default 3"
                ),
            )),
        }
    }

    /// A child's priority: its parent's, or the lower one it asked for (`value` as on
    /// the wire, 0: not given). Asking for a higher one than the parent's is invalid.
    pub fn for_child(self, field: &'static str, value: u32) -> Result<Self, ProtocolError> {
        if value == 0 {
            return Ok(self);
        }
        let asked = Self::from_wire(field, value)?;
        if asked < self {
            return Err(ProtocolError::invalid(
                field,
                format!(
                    "{asked} is higher than the parent task's priority {self}; a child may only keep or lower it"
                ),
            ));
        }
        Ok(asked)
    }

    pub fn get(self) -> u8 {
        self.0
    }
}

impl Default for Priority {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl std::fmt::Display for Priority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl From<Priority> for u32 {
    fn from(p: Priority) -> Self {
        u32::from(p.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_is_the_default_and_out_of_range_is_refused_naming_the_field() {
        assert_eq!(
            Priority::from_wire("priority", 0).expect("default"),
            Priority::DEFAULT
        );
        assert_eq!(Priority::from_wire("priority", 1).expect("valid").get(), 1);
        assert_eq!(Priority::from_wire("priority", 5).expect("valid").get(), 5);
        let err = Priority::from_wire("priority", 6).expect_err("out of range");
        assert!(err.to_string().contains("priority"), "{err}");
    }

    #[test]
    fn a_child_keeps_or_lowers_its_parents_priority() {
        let parent = Priority::from_wire("p", 2).expect("valid");
        assert_eq!(parent.for_child("priority", 0).expect("inherits"), parent);
        assert_eq!(parent.for_child("priority", 4).expect("lower").get(), 4);
        let err = parent.for_child("priority", 1).expect_err("higher");
        assert!(err.to_string().contains("parent"), "{err}");
    }
}
