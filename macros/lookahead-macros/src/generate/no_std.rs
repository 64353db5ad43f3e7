//! Kernel code is `no_std` on the GPU: on the host (and so in the emulator) the standard
//! library's printing and allocating macros and types are shadowed by ones that fail to
//! compile with the reason.

use proc_macro2::{Ident, Span, TokenStream};
use quote::quote;
use syn::Block;

use crate::paths;

/// The messages of the standard library's macros in kernel code.
const NO_STD_MACROS: &[(&str, &str)] = &[
    ("println", "a GPU thread has no standard output"),
    ("print", "a GPU thread has no standard output"),
    ("eprintln", "a GPU thread has no standard error"),
    ("eprint", "a GPU thread has no standard error"),
    ("dbg", "a GPU thread has no standard error"),
    (
        "format",
        "it allocates a `String`, and GPU threads do not allocate",
    ),
    (
        "vec",
        "it allocates a `Vec`, and GPU threads do not allocate",
    ),
];

/// `block` with the standard library's printing and allocating macros and its `Vec`,
/// `String` and `Box` shadowed by ones that explain why kernel code cannot use them.
pub fn without_std(block: &Block) -> TokenStream {
    let macros = NO_STD_MACROS.iter().map(|(name, why)| {
        let id = Ident::new(name, Span::call_site());
        let msg = format!(
            "`{name}!` is not available in kernel code: {why} (kernel code is `no_std`). \
             To look at values, write them to an output slice, or run the kernel on \
             `lookahead::emu::Emulator` and check them on the host"
        );
        quote! {
            #[allow(unused_macros)]
            macro_rules! #id { ($($t:tt)*) => { ::core::compile_error!(#msg) }; }
        }
    });
    let (stmts, types) = (&block.stmts, paths::no_std_types());
    quote! {{
        #(#macros)*
        #[allow(unused_imports)]
        use #types::{Box, String, Vec};
        #(#stmts)*
    }}
}
