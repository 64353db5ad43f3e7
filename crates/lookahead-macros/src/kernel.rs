//! `#[kernel]` and `#[device_fn]`.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, Ident, ItemFn, Lit, Meta, Path, ReturnType, Token};

use crate::params::{classify, Param};
use crate::prefetch::{rewrite_body, AutoMode};

struct Options {
    same_len: Vec<Vec<Ident>>,
    min_len: Vec<(Ident, Expr)>,
    ptx: Option<Path>,
}

fn parse_options(attr: TokenStream) -> syn::Result<Options> {
    let mut o = Options {
        same_len: Vec::new(),
        min_len: Vec::new(),
        ptx: None,
    };
    let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(attr)?;
    let known = "known #[kernel] options: `same_len(a, b, ...)`, `min_len(a = N)`, `ptx = path`";
    for meta in metas {
        let key = meta
            .path()
            .get_ident()
            .map(|i| i.to_string())
            .unwrap_or_default();
        match (key.as_str(), &meta) {
            ("same_len", Meta::List(l)) => {
                let ids =
                    Punctuated::<Ident, Token![,]>::parse_terminated.parse2(l.tokens.clone())?;
                if ids.len() < 2 {
                    return Err(syn::Error::new(
                        l.span(),
                        "`same_len` needs at least two slice parameters",
                    ));
                }
                o.same_len.push(ids.into_iter().collect());
            }
            ("min_len", Meta::List(l)) => {
                let pairs = Punctuated::<syn::MetaNameValue, Token![,]>::parse_terminated
                    .parse2(l.tokens.clone())?;
                for p in pairs {
                    let id = p.path.get_ident().cloned().ok_or_else(|| {
                        syn::Error::new(p.path.span(), "write `min_len(param = N)`")
                    })?;
                    o.min_len.push((id, p.value));
                }
            }
            ("ptx", Meta::NameValue(nv)) => match &nv.value {
                Expr::Path(p) => o.ptx = Some(p.path.clone()),
                other => {
                    return Err(syn::Error::new(
                        other.span(),
                        "`ptx` takes a path, e.g. `ptx = crate::PTX`",
                    ))
                }
            },
            _ => {
                return Err(syn::Error::new(
                    meta.span(),
                    format!(
                        "unknown or malformed #[kernel] option `{}`; {known}",
                        quote!(#meta).to_string().replace(' ', "")
                    ),
                ))
            }
        }
    }
    Ok(o)
}

/// Checks common to kernels and device functions; `kernel` adds the kernel-only ones.
fn check_signature(f: &ItemFn, kernel: bool) -> Vec<syn::Error> {
    let mut errs = Vec::new();
    let what = if kernel {
        "a #[kernel]"
    } else {
        "a #[device_fn]"
    };
    let sig = &f.sig;
    if let Some(a) = &sig.asyncness {
        errs.push(syn::Error::new(
            a.span(),
            format!("{what} cannot be `async`: GPU code has no executor; remove `async`"),
        ));
    }
    if kernel {
        if let Some(c) = &sig.constness {
            errs.push(syn::Error::new(c.span(), "a #[kernel] cannot be `const`"));
        }
        if let Some(abi) = &sig.abi {
            errs.push(syn::Error::new(
                abi.span(),
                "do not write an ABI on a #[kernel]: the macro adds `extern \"gpu-kernel\"` on the GPU target itself",
            ));
        }
        if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
            errs.push(syn::Error::new(
                sig.generics.span(),
                "a #[kernel] cannot be generic: a PTX entry needs one concrete instantiation; write one kernel per type (a `macro_rules!` can stamp them out), each calling a generic #[device_fn]",
            ));
        }
        if let ReturnType::Type(_, ty) = &sig.output {
            errs.push(syn::Error::new(
                ty.span(),
                "a #[kernel] cannot return a value: write results through a `&mut [T]` parameter",
            ));
        }
        if let Some(v) = &sig.variadic {
            errs.push(syn::Error::new(v.span(), "a #[kernel] cannot be variadic"));
        }
        for a in &f.attrs {
            if a.path().is_ident("no_mangle")
                || a.path().is_ident("export_name")
                || a.path().is_ident("unsafe")
            {
                errs.push(syn::Error::new(
                    a.span(),
                    "do not write #[no_mangle]/#[export_name] on a #[kernel]: the macro exports it under its own name",
                ));
            }
        }
    }
    errs
}

fn combine(errs: Vec<syn::Error>) -> Option<syn::Error> {
    let mut it = errs.into_iter();
    let mut first = it.next()?;
    for e in it {
        first.combine(e);
    }
    Some(first)
}

pub fn expand_kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    match kernel_impl(attr, item) {
        Ok(ts) => ts,
        Err(e) => e.to_compile_error(),
    }
}

fn kernel_impl(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let mut f: ItemFn = syn::parse2(item)
        .map_err(|e| syn::Error::new(e.span(), format!("#[kernel] goes on a function: {e}")))?;
    let opts = parse_options(attr);
    let mut errs = check_signature(&f, true);
    let opts = match opts {
        Ok(o) => Some(o),
        Err(e) => {
            errs.push(e);
            None
        }
    };
    let mut params: Vec<Param> = Vec::new();
    for arg in &f.sig.inputs {
        match classify(arg) {
            Ok(p) => params.push(p),
            Err(e) => errs.push(e),
        }
    }
    if let Some(o) = &opts {
        let slice = |id: &Ident| params.iter().any(|p| p.name == *id && p.is_slice());
        for group in &o.same_len {
            for id in group {
                if !slice(id) {
                    errs.push(syn::Error::new(
                        id.span(),
                        format!("`same_len`: `{id}` is not a slice parameter of this kernel"),
                    ));
                }
            }
        }
        for (id, _) in &o.min_len {
            if !slice(id) {
                errs.push(syn::Error::new(
                    id.span(),
                    format!("`min_len`: `{id}` is not a slice parameter of this kernel"),
                ));
            }
        }
    }
    // The body as written, for the plain entry of a kernel with `level = auto` loops.
    let mut plain_block = f.block.clone();
    let (loop_errs, auto) = rewrite_body(&mut f.block, AutoMode::Hinted);
    errs.extend(loop_errs);
    if let Some(e) = combine(errs) {
        return Err(e);
    }
    if auto {
        // Same loops, same errors (already reported by the hinted pass): none are left here.
        let _ = rewrite_body(&mut plain_block, AutoMode::Plain);
    }
    let opts = opts.unwrap_or(Options {
        same_len: vec![],
        min_len: vec![],
        ptx: None,
    });

    let name = &f.sig.ident;
    let name_str = name.to_string();
    let vis = &f.vis;
    let body_fn = format_ident!("__lookahead_kernel_body_{}", name);
    let hinted_body_fn = format_ident!("__lookahead_kernel_body_{}__hinted", name);
    let hinted_name = format_ident!("{}__hinted", name);
    let hinted_str = hinted_name.to_string();
    let docs: Vec<_> = f
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .collect();
    let other_attrs: Vec<_> = f
        .attrs
        .iter()
        .filter(|a| !a.path().is_ident("doc"))
        .collect();
    let unsafety = &f.sig.unsafety;
    let inputs = &f.sig.inputs;
    let lowered: Vec<_> = params.iter().map(Param::lowered).collect();
    let rebuilt: Vec<_> = params.iter().map(Param::rebuild).collect();

    // Host launcher pieces.
    let host_params: Vec<_> = params.iter().map(Param::host_param).collect();
    let host_lens: Vec<_> = params.iter().map(Param::host_len).collect();
    let pushes: Vec<_> = params.iter().map(Param::push).collect();
    let arg_names: Vec<_> = params.iter().map(|p| &p.name).collect();
    let mut next = 0;
    let reads: Vec<_> = params.iter().map(|p| p.read_params(&mut next)).collect();
    let same_len_checks: Vec<_> = opts
        .same_len
        .iter()
        .map(|g| {
            let names = g.iter().map(|i| i.to_string());
            let lens = g.iter().map(|i| format_ident!("{}__len", i));
            quote!(::lookahead::launch::check_same_len(NAME, &[#((#names, #lens)),*])?;)
        })
        .collect();
    let min_len_checks: Vec<_> = opts
        .min_len
        .iter()
        .map(|(i, n)| {
            let s = i.to_string();
            let l = format_ident!("{}__len", i);
            quote_spanned!(n.span()=> ::lookahead::launch::check_min_len(NAME, #s, #l, #n)?;)
        })
        .collect();
    let ptx = match &opts.ptx {
        Some(p) => quote!(#p),
        None => quote!(crate::PTX),
    };
    let launch_doc = format!(
        "Launches the `{name_str}` kernel on `on` with `cfg`: checks the configuration and the \
         declared length rules, then launches. On a GPU (a `Gpu`, a stream or a `Launcher`, \
         with GPU allocations) the launch is asynchronous on `on`'s stream; on the CPU \
         emulator (`lookahead::emu::Emulator`, with host memory: `Vec<T>`, `[T]`) it runs \
         to completion before returning."
    );
    let mod_doc = format!("Host side of the `{name_str}` kernel: [`launch`] and its PTX name.");
    let au = quote!(::lookahead::launch::autotune);
    let memory = quote!(<__On as ::lookahead::launch::LaunchOn>::Memory);
    let space = quote!(<#memory as ::lookahead::launch::MemorySpace>);

    // The checks and the launch itself, shared by `launch` and `launch_variant`.
    let launch_body = |plan: TokenStream, run: TokenStream| {
        quote! {
            let cfg: ::lookahead::launch::LaunchConfig = cfg.into();
            cfg.check(NAME)?;
            #(#host_lens)*
            #(#same_len_checks)*
            #(#min_len_checks)*
            let __lk_plan: #au::Plan = #plan;
            let __lk_variant = __lk_plan.variant;
            let __lk_entry_name: &'static str = __lk_variant.entry(NAME, HINTED_NAME);
            let prepared = ::lookahead::launch::LaunchOn::prepare(on, #ptx, __lk_entry_name)?;
            let mut args = #space::args(&prepared);
            #(#pushes)*
            // The kernel body for the CPU emulator: rebuilds the parameters from the
            // argument bytes, as the PTX entry does from the GPU's parameter buffer.
            let entry = |params: &::lookahead::launch::Params| {
                #(#reads)*
                #run
            };
            #space::launch(args, __lk_entry_name, cfg, &entry, &__lk_plan)
        }
    };

    // The plain body and its entry, the same with or without `level = auto` loops (with
    // them, the body without their hints; the hinted twin is added below).
    let plain_source = if auto { &plain_block } else { &f.block };
    let plain_body = quote! {
        #(#docs)*
        #[allow(dead_code, clippy::all, unused_mut, unused_variables)]
        #[inline(always)]
        #(#other_attrs)*
        #unsafety fn #body_fn(#inputs) #plain_source
    };
    let plain_entry = quote! {
        #[cfg(target_arch = "nvptx64")]
        #(#docs)*
        #[no_mangle]
        #[allow(clippy::missing_safety_doc, non_snake_case)]
        pub unsafe extern "gpu-kernel" fn #name(#(#lowered),*) {
            #[allow(unused_unsafe)]
            unsafe { #body_fn(#(#rebuilt),*) }
        }
    };
    let (bodies, entries, host_items) = if auto {
        let hinted_block = &f.block;
        let run = quote! {
            #[allow(unused_unsafe)]
            match __lk_variant {
                #au::Variant::Plain => unsafe { super::#body_fn(#(#rebuilt),*) },
                #au::Variant::Hinted => unsafe { super::#hinted_body_fn(#(#rebuilt),*) },
            }
        };
        let body = launch_body(quote!(#au::plan(on, #ptx, NAME, __lk_requested)), run);
        let auto_doc = format!(
            "Launches `{name_str}` choosing its entry by measurement (its `#[prefetch_next(level \
             = auto)]` loops): on each GPU the first launches alternate the plain entry \
             `{name_str}` and the hinted entry `{hinted_str}`, timed with CUDA events on the \
             launch stream; once both have enough timings every launch uses the faster one \
             (see `lookahead::launch::autotune` and [`auto_choice`]). Every launch runs on the \
             given arguments exactly once. On the CPU emulator it runs the hinted body. \
             Otherwise as [`launch_variant`]."
        );
        let variant_doc = format!(
            "Launches the given variant of `{name_str}`: [`Variant::Plain`] (entry \
             `{name_str}`, no prefetch in its `level = auto` loops) or [`Variant::Hinted`] \
             (entry `{hinted_str}`, prefetch at `l2`), with no measurement. Checks the \
             configuration and the declared length rules, then launches: asynchronously on \
             `on`'s stream on a GPU, to completion on the CPU emulator."
        );
        (
            quote! {
                #plain_body

                #[doc(hidden)]
                #[allow(dead_code, clippy::all, unused_mut, unused_variables, non_snake_case)]
                #[inline(always)]
                #(#other_attrs)*
                #unsafety fn #hinted_body_fn(#inputs) #hinted_block
            },
            quote! {
                #plain_entry

                /// The hinted entry of a kernel with `#[prefetch_next(level = auto)]` loops.
                #[cfg(target_arch = "nvptx64")]
                #[no_mangle]
                #[allow(clippy::missing_safety_doc, non_snake_case)]
                pub unsafe extern "gpu-kernel" fn #hinted_name(#(#lowered),*) {
                    #[allow(unused_unsafe)]
                    unsafe { #hinted_body_fn(#(#rebuilt),*) }
                }
            },
            quote! {
                /// The PTX name of the hinted entry (`level = auto` loops prefetch at `l2`).
                pub const HINTED_NAME: &str = #hinted_str;

                pub use #au::Variant;

                #[doc = #auto_doc]
                #[allow(clippy::too_many_arguments, non_snake_case)]
                pub fn launch<__On: ::lookahead::launch::LaunchOn + ?Sized>(
                    on: &__On,
                    cfg: impl ::core::convert::Into<::lookahead::launch::LaunchConfig>,
                    #(#host_params),*
                ) -> ::core::result::Result<(), ::lookahead::Error> {
                    __launch(on, ::core::option::Option::None, cfg, #(#arg_names),*)
                }

                #[doc = #variant_doc]
                #[allow(clippy::too_many_arguments, non_snake_case)]
                pub fn launch_variant<__On: ::lookahead::launch::LaunchOn + ?Sized>(
                    variant: Variant,
                    on: &__On,
                    cfg: impl ::core::convert::Into<::lookahead::launch::LaunchConfig>,
                    #(#host_params),*
                ) -> ::core::result::Result<(), ::lookahead::Error> {
                    __launch(on, ::core::option::Option::Some(variant), cfg, #(#arg_names),*)
                }

                /// The entry [`launch`] uses on `on` from now on: `None` while the first
                /// launches are still being measured (or before any), then the faster one
                /// (`Some(Variant::Hinted)` on the CPU emulator, which always runs the hinted
                /// body). Reads the timings that have completed; never waits.
                pub fn auto_choice<__On: ::lookahead::launch::LaunchOn + ?Sized>(
                    on: &__On,
                ) -> ::core::option::Option<Variant> {
                    #au::choice(on, #ptx, NAME)
                }

                #[allow(clippy::too_many_arguments, non_snake_case)]
                fn __launch<__On: ::lookahead::launch::LaunchOn + ?Sized>(
                    on: &__On,
                    __lk_requested: ::core::option::Option<Variant>,
                    cfg: impl ::core::convert::Into<::lookahead::launch::LaunchConfig>,
                    #(#host_params),*
                ) -> ::core::result::Result<(), ::lookahead::Error> {
                    #body
                }
            },
        )
    } else {
        let run = quote! {
            let _ = __lk_variant;
            #[allow(unused_unsafe)]
            unsafe { super::#body_fn(#(#rebuilt),*) }
        };
        let body = launch_body(quote!(#au::Plan::fixed(#au::Variant::Plain)), run);
        (
            plain_body,
            plain_entry,
            quote! {
                // A kernel without `level = auto` loops has one entry.
                const HINTED_NAME: &str = NAME;

                #[doc = #launch_doc]
                #[allow(clippy::too_many_arguments, non_snake_case)]
                pub fn launch<__On: ::lookahead::launch::LaunchOn + ?Sized>(
                    on: &__On,
                    cfg: impl ::core::convert::Into<::lookahead::launch::LaunchConfig>,
                    #(#host_params),*
                ) -> ::core::result::Result<(), ::lookahead::Error> {
                    #body
                }
            },
        )
    };

    // rustc reports a second definition as "the name `...` is defined multiple times", with
    // both spans: the marker's name is the message. A kernel with `level = auto` loops also
    // exports `NAME__hinted`.
    let exported: Vec<&Ident> = if auto {
        vec![name, &hinted_name]
    } else {
        vec![name]
    };
    let markers = exported.iter().map(|n| {
        let marker = format_ident!("kernel_name_{}_is_exported_by_two_kernels__rename_one", n);
        let msg = format!(
            "two #[kernel]s export the name `{n}` in this crate: PTX entry names must be unique, rename one"
        );
        quote! {
            // A second kernel exporting the same name defines this macro twice in the crate root.
            #[doc(hidden)]
            #[allow(non_snake_case)]
            #[macro_export]
            macro_rules! #marker {
                () => { ::core::compile_error!(#msg) };
            }
        }
    });
    let _ = Span::call_site();

    Ok(quote! {
        #bodies

        #entries

        #(#markers)*

        #[cfg(not(target_arch = "nvptx64"))]
        #[doc = #mod_doc]
        #vis mod #name {
            #[allow(unused_imports)]
            use super::*;

            /// The kernel's name in the PTX (its `.entry`).
            pub const NAME: &str = #name_str;

            #host_items
        }
    })
}

pub fn expand_device_fn(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        return syn::Error::new(attr.span(), "#[device_fn] takes no options").to_compile_error();
    }
    let mut f: ItemFn = match syn::parse2(item) {
        Ok(f) => f,
        Err(e) => {
            return syn::Error::new(e.span(), format!("#[device_fn] goes on a function: {e}"))
                .to_compile_error()
        }
    };
    let mut errs = check_signature(&f, false);
    errs.extend(rewrite_body(&mut f.block, AutoMode::Forbidden).0);
    if let Some(e) = combine(errs) {
        return e.to_compile_error();
    }
    quote!(#[inline(always)] #f)
}

#[allow(dead_code)]
fn lit_usize(e: &Expr) -> Option<usize> {
    match e {
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) => i.base10_parse().ok(),
        _ => None,
    }
}
