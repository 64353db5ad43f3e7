//! The pipelined loop: a pipeline of `stages` stages in shared memory, the first
//! `stages - 1` iterations' targets issued before the loop, and in each iteration the wait
//! for its stage, the refill with iteration `i + stages - 1`'s targets, the body's names
//! bound to the staged copies, and the body.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::Expr;

use crate::ident::mixed;
use crate::parse::pipeline::{Copy, PipelinedLoop};
use crate::paths;

/// The loop `l` as a pipeline copying with `copy` through `stages` stages (its options', or
/// an entry's for `stages = auto` / `copy = auto`): its prologue, then the loop with each
/// iteration's wait, refill and staged names.
pub fn pipelined_loop(l: &PipelinedLoop, copy: Copy, stages: usize) -> Expr {
    let (f, o, attr_span) = (&l.f, &l.options, l.attr_span);
    let (var, start, end, step, inclusive) = (&l.var, &l.start, &l.end, &l.step, l.inclusive);
    let d = paths::device();
    let pl = quote!(#d::pipeline);
    let (elem, len) = (&o.elem, &o.len);
    let kind = format_ident!("{}", copy.kind());
    let n = o.targets.len();
    let stage_len = quote!({ #n * (#len) });
    let (pipe, fill, k, i, c, st) = (
        mixed("__lk_pipe"),
        mixed("__lk_fill"),
        mixed("__lk_k"),
        mixed("__lk_i"),
        mixed("__lk_c"),
        mixed("__lk_stage"),
    );
    let (start_id, end_id, step_id, count) = (
        mixed("__lk_start"),
        mixed("__lk_end"),
        mixed("__lk_step"),
        mixed("__lk_count"),
    );
    let range_expr = if inclusive {
        quote!(#start_id..=#end_id)
    } else {
        quote!(#start_id..#end_id)
    };
    let (step_value, iter_expr) = match step {
        Some(s) => (
            quote!(#s),
            quote!(::core::iter::Iterator::step_by(#range_expr, #step_id)),
        ),
        None => (quote!(1), range_expr.clone()),
    };
    let fills = o.targets.iter().enumerate().map(|(t, target)| {
        let src = &target.source;
        quote_spanned!(src.span()=> #pl::stage_in(#c, #t * (#len), #len, &(#src));)
    });
    let binds = o.targets.iter().enumerate().map(|(t, target)| {
        let (name, src) = (&target.name, &target.source);
        quote_spanned!(src.span()=> let #name: &[#elem] = #pl::staged(#st.data(), #t * (#len), #len, &(#src));)
    });
    let pipeline = quote_spanned! {attr_span=>
        #pl::Pipeline::<#elem, #stage_len, #stages, #pl::#kind>::new(
            #d::shared_array!([#elem; #n * (#len)]; #stages),
            #d::shared_array!(u64; #stages),
        )
    };
    let (label, pat, body, attrs) = (&f.label, &f.pat, &f.body, &f.attrs);
    let prologue = prologue(&pipe, &fill, &k, &count, stages);
    let copier = quote!(#pl::Copier<'_, #elem, #stage_len, #pl::#kind>);
    syn::parse_quote_spanned! {f.span()=> {
        let #start_id = #start;
        let #end_id = #end;
        let #step_id: usize = #step_value;
        let #count: usize = #pl::range_count(#start_id as usize, #end_id as usize, #step_id, #inclusive);
        let mut #pipe = #pipeline;
        // What iteration number `k` reads, copied into the stage being issued.
        let #fill = |#k: usize, #c: &mut #copier| {
            let #var = #d::prefetch::index_like((#start_id as usize) + #k * #step_id, &#start_id);
            #(#fills)*
        };
        #prologue
        #(#attrs)*
        #label for (#i, #pat) in ::core::iter::Iterator::enumerate(#iter_expr) {
            let #st = #pipe.wait();
            if #i + #stages - 1 < #count {
                #st.refill(|#c| #fill(#i + #stages - 1, #c));
            }
            #(#binds)*
            #body
        }
    }}
}

/// Issues the first `stages - 1` iterations (as many as there are).
fn prologue(
    pipe: &syn::Ident,
    fill: &syn::Ident,
    k: &syn::Ident,
    count: &syn::Ident,
    stages: usize,
) -> TokenStream {
    quote! {
        let mut #k: usize = 0;
        while #k + 1 < #stages && #k < #count {
            #pipe.issue(|c| #fill(#k, c));
            #k += 1;
        }
    }
}
