//! The identifiers the generated code makes up for itself: bindings, lowered parameters and
//! the like. Each has the mixed-site span, so it neither clashes with a name the user wrote
//! nor is seen by the user's code.

use proc_macro2::{Ident, Span};
use quote::format_ident;

/// A name of the generated code's own.
pub fn mixed(name: &str) -> Ident {
    Ident::new(name, Span::mixed_site())
}

/// `base` followed by `suffix` (`x` and `__len` give `x__len`; a raw `r#x` gives `x__len`),
/// as a name of the generated code's own.
pub fn suffixed(base: &Ident, suffix: &str) -> Ident {
    format_ident!("{}{}", base, suffix, span = Span::mixed_site())
}

/// The argument list a launcher builds.
pub fn args() -> Ident {
    mixed("__lk_args")
}

/// The runtime distance every entry of a `level = auto` kernel takes last.
pub fn distance() -> Ident {
    mixed("__lk_distance")
}
