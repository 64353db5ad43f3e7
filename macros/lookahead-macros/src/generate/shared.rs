//! `shared_array!`: a module-level `.shared` declaration with a unique name, and the handle
//! to it.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use std::sync::atomic::{AtomicUsize, Ordering};
use syn::spanned::Spanned;

use crate::parse::shared::SharedArray;
use crate::paths;

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// The most static shared memory a block may declare (`ptxas` refuses more): 48 KiB.
const MAX_STATIC_SHARED: usize = 48 * 1024;

pub fn shared_array(input: &SharedArray) -> TokenStream {
    let SharedArray { ty, len } = input;
    let krate = std::env::var("CARGO_CRATE_NAME").unwrap_or_else(|_| "crate".into());
    let krate: String = krate
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let sym = format!("__lookahead_shared_{krate}_{n}");
    let modname = quote::format_ident!("__lookahead_shared_decl_{n}");
    let decl = format!(".shared .align {{align}} .b8 {sym}[{{size}}];");
    let too_big = format!(
        "shared_array!: a block's static shared memory is at most {MAX_STATIC_SHARED} bytes \
         (48 KiB), and this array is larger; use a smaller tile or fewer elements"
    );
    let check = quote_spanned! {len.span()=>
        const _: () = ::core::assert!(
            ::core::mem::size_of::<[#ty; #len]>() <= #MAX_STATIC_SHARED,
            #too_big
        );
    };
    // rustc names this function in its error about the element type, so the name says
    // what is required.
    let copy_check = quote_spanned! {ty.span()=>
        const _: () = {
            fn shared_array_elements_must_be_copy<T: ::core::marker::Copy>() {}
            let _ = shared_array_elements_must_be_copy::<#ty>;
        };
    };
    let d = paths::device();
    quote! {{
        #check
        #copy_check
        // `global_asm!` is an item: give it a module, so it is not in statement position.
        #[cfg(target_arch = "nvptx64")]
        #[allow(non_snake_case)]
        mod #modname {
            #[allow(unused_imports)]
            use super::*;
            ::core::arch::global_asm!(
                #decl,
                align = const if ::core::mem::align_of::<#ty>() > 16 {
                    ::core::mem::align_of::<#ty>()
                } else {
                    16
                },
                size = const if ::core::mem::size_of::<[#ty; #len]>() == 0 {
                    1
                } else {
                    ::core::mem::size_of::<[#ty; #len]>()
                },
            );
        }
        // SAFETY: the symbol is a `.shared` array of `N` elements of `T`, aligned for `T`.
        unsafe {
            #d::SharedArray::<#ty, { #len }>::from_generic_ptr(
                #d::__shared_generic_ptr!(
                    #sym,
                    ::core::concat!(::core::file!(), ":", ::core::line!(), ":", ::core::column!()),
                    #ty,
                    { #len }
                ) as *mut #ty,
            )
        }
    }}
}
