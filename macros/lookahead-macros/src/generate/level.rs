//! The device runtime's `prefetch::Level`, one variant per row of the table of levels.

use proc_macro2::{Ident, Span, TokenStream};
use quote::quote;

use crate::level::LEVELS;
use crate::parse::level::LevelEnum;

pub fn level_enum(e: &LevelEnum) -> TokenStream {
    let LevelEnum { attrs, vis, ident } = e;
    let variants: Vec<Ident> = (LEVELS.iter())
        .map(|l| Ident::new(l.variant, Span::call_site()))
        .collect();
    let docs = LEVELS.iter().map(|l| format!("`{}`{}.", l.ptx, l.note));
    let names = LEVELS.iter().map(|l| l.name);
    let ptx = LEVELS.iter().map(|l| l.ptx);
    let codes = LEVELS.iter().map(|l| l.code);
    let count = LEVELS.len();
    quote! {
        #(#attrs)*
        #vis enum #ident {
            #(
                #[doc = #docs]
                #variants,
            )*
        }

        impl #ident {
            /// Every level, in the order a `level = auto` kernel lists its entries and the
            /// tuner its candidates.
            pub const ALL: [#ident; #count] = [#(#ident::#variants),*];

            /// Its name in `#[prefetch_next(level = ..)]`, and the suffix of its entry
            /// (`NAME__l2`).
            pub const fn name(self) -> &'static str {
                match self {
                    #(#ident::#variants => #names,)*
                }
            }

            /// The instruction it issues.
            pub const fn ptx(self) -> &'static str {
                match self {
                    #(#ident::#variants => #ptx,)*
                }
            }

            /// The number by which kernels that take a level as a value (a const generic, a
            /// field of a parameter) compare it; 0 is no prefetch. Fixed once given: kernels
            /// and their CUDA C++ twins are compiled with these numbers.
            pub const fn code(self) -> u8 {
                match self {
                    #(#ident::#variants => #codes,)*
                }
            }

            /// The level whose [`name`](Self::name) is `name`.
            pub fn parse(name: &str) -> ::core::option::Option<#ident> {
                Self::ALL.into_iter().find(|l| l.name() == name)
            }
        }
    }
}
