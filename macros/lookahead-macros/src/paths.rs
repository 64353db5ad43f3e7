//! The paths by which the generated code names the items of our crates. Generated code is
//! compiled in the user's crate, so each path is absolute; an item that moves or is renamed
//! changes here only.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::quote;

/// The device runtime.
pub fn device() -> TokenStream {
    quote!(::lookahead_device)
}

/// The host runtime.
pub fn host() -> TokenStream {
    quote!(::lookahead)
}

/// The prefetch hints of `#[prefetch_next]` loops, and its helpers.
pub fn prefetch() -> TokenStream {
    let d = device();
    quote!(#d::prefetch)
}

/// The prefetch level `variant` (a variant of the device runtime's `prefetch::Level`).
pub fn level(variant: &str) -> TokenStream {
    let (p, v) = (
        prefetch(),
        proc_macro2::Ident::new(variant, Span::call_site()),
    );
    quote!(#p::Level::#v)
}

/// What `#[prefetch_next(queue = q)]` loops call: requests to the host and waits.
pub fn uvm_loops() -> TokenStream {
    let d = device();
    quote!(#d::uvm::loops)
}

/// The type of a `queue = q` loop's queue.
pub fn request_queue() -> TokenStream {
    let d = device();
    quote!(#d::uvm::RequestQueue)
}

/// The view of the cache over host memory, whose ranges `cache = c` loops prefetch.
pub fn host_cached() -> TokenStream {
    let d = device();
    quote!(#d::cache::HostCached)
}

/// The kernel parameter views, rebuilt from their address and length.
pub fn view() -> TokenStream {
    let d = device();
    quote!(#d::view)
}

/// The compile-time checks of parameter and field types (`device_copy::<T>()`...).
pub fn param_check() -> TokenStream {
    let d = device();
    quote!(#d::param::check)
}

/// The emulator's hooks, which instrumented kernel code calls on the host.
pub fn emu_hooks() -> TokenStream {
    let d = device();
    quote!(#d::__emu::hooks)
}

/// cudarc's traits that derived types implement on the host.
pub fn host_traits() -> TokenStream {
    let d = device();
    quote!(#d::__host)
}

/// The `Vec`, `String` and `Box` that explain why kernel code has none.
pub fn no_std_types() -> TokenStream {
    let d = device();
    quote!(#d::std_is_not_available_in_kernels)
}

/// The host runtime's error type.
pub fn error() -> TokenStream {
    let h = host();
    quote!(#h::Error)
}

/// The host runtime's launch module: configurations, argument traits, checks.
pub fn launch() -> TokenStream {
    let h = host();
    quote!(#h::launch)
}

/// The tuner that picks a `level = auto` kernel's entry.
pub fn autotune() -> TokenStream {
    let l = launch();
    quote!(#l::autotune)
}

/// The trait of a launcher's target memory.
pub fn memory_space() -> TokenStream {
    let l = launch();
    quote!(#l::TargetMemory)
}

/// A launcher's target memory: `<__On as LaunchOn>::Memory`, `__On` being the launcher's
/// `LaunchOn` type parameter.
pub fn memory() -> TokenStream {
    let l = launch();
    quote!(<__On as #l::LaunchOn>::Memory)
}

/// The launcher's memory space as its [`memory_space`] trait, for calling its functions.
pub fn space() -> TokenStream {
    let (m, s) = (memory(), memory_space());
    quote!(<#m as #s>)
}

/// `tokens` with every token at `span`: a path inside `quote_spanned!` output, so that a
/// diagnostic about it points where the rest of that output does.
pub fn at(span: Span, tokens: TokenStream) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut t| {
            if let TokenTree::Group(g) = &t {
                let mut inner = proc_macro2::Group::new(g.delimiter(), at(span, g.stream()));
                inner.set_span(span);
                t = TokenTree::Group(inner);
            } else {
                t.set_span(span);
            }
            t
        })
        .collect()
}
