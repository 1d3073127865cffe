//! The one way this crate's configuration types grow without breaking their users: each is
//! `#[non_exhaustive]` (no struct literal outside the crate, so a new field is not a breaking
//! change), built from its `Default` and changed through `with_*` setters, or through its public
//! fields on a mutable value.
//!
//! ```
//! use hostcall::{ListenerConfig, WaitPolicy};
//! use std::time::Duration;
//! let wait = WaitPolicy::default().with_spin_polls(0).with_max_wait(Duration::from_millis(1));
//! let config = ListenerConfig::default().with_wait(wait);
//! assert_eq!((config.wait.spin_polls, config.wait.max_wait), (0, Duration::from_millis(1)));
//! let mut same = ListenerConfig::default();
//! same.wait.spin_polls = 0;
//! same.wait.max_wait = Duration::from_millis(1);
//! assert_eq!(format!("{same:?}"), format!("{config:?}"));
//! ```

/// `setters!(Type { with_a: a: A, ... })`: a consuming `with_a(self, value: A) -> Self` per field.
macro_rules! setters {
    ($type:ty { $($setter:ident: $field:ident: $field_type:ty),* $(,)? }) => {
        impl $type {
            $(
                #[doc = concat!(
                    "Sets [`", stringify!($field), "`](Self::", stringify!($field), ") (the type is ",
                    "`#[non_exhaustive]`: build it from its `Default` and these setters)."
                )]
                #[must_use]
                pub fn $setter(mut self, value: $field_type) -> Self {
                    self.$field = value;
                    self
                }
            )*
        }
    };
}
