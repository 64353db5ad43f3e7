//! `shared_array!`: a static with a unique name that the builder moves into `.shared`, and
//! the handle to it.

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
    // The builder moves statics exported under this prefix into the `.shared` state space
    // at link time (`lookahead_builder::addrspace`), and their uses into `addrspacecast`s
    // LLVM sees through: accesses become `ld/st.shared` (`LDS`/`STS`), not generic ones.
    let sym = format!("__lookahead_addrspace_shared__{krate}_{n}");
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
        #[cfg(target_arch = "nvptx64")]
        let ptr = {
            #[unsafe(export_name = #sym)]
            static mut SHARED_ARRAY: #d::shared::SharedStorage<#ty, { #len }> =
                #d::shared::SharedStorage::UNINIT;
            (&raw mut SHARED_ARRAY) as *mut #ty
        };
        #[cfg(not(target_arch = "nvptx64"))]
        let ptr = #d::__shared_host_ptr!(
            #sym,
            ::core::concat!(::core::file!(), ":", ::core::line!(), ":", ::core::column!()),
            #ty,
            { #len }
        );
        // SAFETY: `ptr` is a block-wide array of `N` elements of `T`, aligned for `T`.
        unsafe { #d::SharedArray::<#ty, { #len }>::from_generic_ptr(ptr) }
    }}
}
