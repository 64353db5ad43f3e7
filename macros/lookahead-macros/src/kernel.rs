//! `#[kernel]` and `#[device_fn]`.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Block, Expr, Ident, ItemFn, Meta, Path, ReturnType, Token};

use crate::params::{args_ident, classify, memory, Param};
use crate::prefetch::{distance_param, rewrite_body, AutoMode, AutoSummary, Level};

#[derive(Default)]
struct Options {
    same_len: Vec<Vec<Ident>>,
    min_len: Vec<(Ident, Expr)>,
    ptx: Option<Path>,
    bounds: Option<LaunchBounds>,
}

/// CUDA's `__launch_bounds__`: the most threads per block the kernel is launched with and,
/// optionally, the blocks per multiprocessor it must fit (which caps its registers). Each is
/// a `u32` literal or constant.
#[derive(Clone)]
struct LaunchBounds {
    threads: Expr,
    blocks_per_sm: Option<Expr>,
}

const KNOWN_OPTIONS: &str = "known #[kernel] options: `same_len(a, b, ...)`, `min_len(a = N)`, \
     `launch_bounds(threads = N, blocks_per_sm = M)`, `ptx = path`";

fn is_int_literal(e: &Expr) -> bool {
    matches!(
        e,
        Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(_),
            ..
        })
    )
}

/// `launch_bounds(threads = N)` or `launch_bounds(threads = N, blocks_per_sm = M)`.
fn parse_launch_bounds(l: &syn::MetaList) -> syn::Result<LaunchBounds> {
    let usage =
        "write `launch_bounds(threads = 256)` or `launch_bounds(threads = 256, blocks_per_sm = 2)`";
    let pairs =
        Punctuated::<syn::MetaNameValue, Token![,]>::parse_terminated.parse2(l.tokens.clone())?;
    let (mut threads, mut blocks) = (None, None);
    for p in pairs {
        let key = p.path.get_ident().map(|i| i.to_string());
        let (slot, most) = match key.as_deref() {
            Some("threads") => (&mut threads, 1024),
            Some("blocks_per_sm") => (&mut blocks, u32::MAX),
            _ => return Err(syn::Error::new(p.path.span(), usage)),
        };
        if let Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        }) = &p.value
        {
            match i.base10_parse::<u32>() {
                Ok(v) if v > 0 && v <= most => {}
                _ => {
                    return Err(syn::Error::new(
                        i.span(),
                        "a launch bound is a positive `u32`; `threads` is at most 1024",
                    ))
                }
            }
        }
        *slot = Some(p.value);
    }
    let threads = threads.ok_or_else(|| syn::Error::new(l.span(), usage))?;
    Ok(LaunchBounds {
        threads,
        blocks_per_sm: blocks,
    })
}

fn parse_options(attr: TokenStream) -> syn::Result<Options> {
    let mut o = Options::default();
    let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(attr)?;
    for meta in metas {
        let key = meta.path().get_ident().map(|i| i.to_string());
        match (key.as_deref(), &meta) {
            (Some("same_len"), Meta::List(l)) => {
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
            (Some("min_len"), Meta::List(l)) => {
                let pairs = Punctuated::<syn::MetaNameValue, Token![,]>::parse_terminated
                    .parse2(l.tokens.clone())?;
                for p in pairs {
                    let id = p.path.get_ident().cloned().ok_or_else(|| {
                        syn::Error::new(p.path.span(), "write `min_len(param = N)`")
                    })?;
                    let negative = match &p.value {
                        Expr::Unary(u) => matches!(u.op, syn::UnOp::Neg(_)),
                        Expr::Lit(syn::ExprLit {
                            lit: syn::Lit::Int(i),
                            ..
                        }) => i.base10_digits().starts_with('-'),
                        _ => false,
                    };
                    if negative {
                        return Err(syn::Error::new(
                            p.value.span(),
                            format!("`min_len({id} = ..)` is a length, at least 0: write a `usize` such as `min_len({id} = 1)`"),
                        ));
                    }
                    o.min_len.push((id, p.value));
                }
            }
            (Some("launch_bounds"), Meta::List(l)) => o.bounds = Some(parse_launch_bounds(l)?),
            (Some("ptx"), Meta::NameValue(nv)) => match &nv.value {
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
                        "unknown or malformed #[kernel] option `{}`; {KNOWN_OPTIONS}",
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
        errs.extend(check_kernel_signature(f));
    }
    errs
}

fn check_kernel_signature(f: &ItemFn) -> Vec<syn::Error> {
    let mut errs = Vec::new();
    let sig = &f.sig;
    let mut refuse = |span: Span, msg: &str| errs.push(syn::Error::new(span, msg));
    if let Some(c) = &sig.constness {
        refuse(c.span(), "a #[kernel] cannot be `const`");
    }
    if let Some(abi) = &sig.abi {
        refuse(abi.span(), "do not write an ABI on a #[kernel]: the macro adds `extern \"gpu-kernel\"` on the GPU target itself");
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        refuse(sig.generics.span(), "a #[kernel] cannot be generic: a PTX entry needs one concrete instantiation; write one kernel per type (a `macro_rules!` can stamp them out), each calling a generic #[device_fn]");
    }
    if let ReturnType::Type(_, ty) = &sig.output {
        refuse(
            ty.span(),
            "a #[kernel] cannot return a value: write results through a `&mut [T]` parameter",
        );
    }
    if let Some(v) = &sig.variadic {
        refuse(v.span(), "a #[kernel] cannot be variadic");
    }
    for a in &f.attrs {
        let p = a.path();
        if p.is_ident("no_mangle") || p.is_ident("export_name") || p.is_ident("unsafe") {
            refuse(a.span(), "do not write #[no_mangle]/#[export_name] on a #[kernel]: the macro exports it under its own name");
        }
    }
    let name = sig.ident.unraw().to_string();
    if !name.is_ascii() {
        refuse(sig.ident.span(), &format!("a kernel's name is its PTX entry's name, which is ASCII only: rename `{name}` with ASCII letters, digits and `_`"));
    }
    errs
}

/// `#[kernel]` or `#[device_fn]` written again under the first one.
fn check_repeated(f: &ItemFn, what: &str) -> Option<syn::Error> {
    let again = f.attrs.iter().find_map(|a| {
        let last = a.path().segments.last()?.ident.to_string();
        matches!(last.as_str(), "kernel" | "device_fn").then_some((a, last))
    })?;
    let (attr, other) = again;
    let msg = if other == what {
        format!(
            "#[{what}] is written twice on `{}`: remove one",
            f.sig.ident
        )
    } else {
        format!("`{}` has both #[{what}] and #[{other}]: a #[kernel] is an entry the host launches, a #[device_fn] a helper kernels call; keep one", f.sig.ident)
    };
    Some(syn::Error::new(attr.span(), msg))
}

/// `same_len` and `min_len` name slice parameters of the kernel.
fn check_length_rules(o: &Options, params: &[Param]) -> Vec<syn::Error> {
    let slice = |id: &Ident| params.iter().any(|p| p.name == *id && p.is_slice());
    let named = o.same_len.iter().flatten().map(|id| (id, "same_len"));
    let named = named.chain(o.min_len.iter().map(|(id, _)| (id, "min_len")));
    named
        .filter(|(id, _)| !slice(id))
        .map(|(id, rule)| {
            syn::Error::new(
                id.span(),
                format!("`{rule}`: `{id}` is not a slice parameter of this kernel"),
            )
        })
        .collect()
}

fn combine(errs: Vec<syn::Error>) -> Option<syn::Error> {
    let mut it = errs.into_iter();
    let mut first = it.next()?;
    for e in it {
        first.combine(e);
    }
    Some(first)
}

/// A parsed and checked `#[kernel]`.
struct Kernel {
    /// The function; its body is the one with every `#[prefetch_next]` loop rewritten (for
    /// a kernel with `level = auto` loops, the plain entry's: those loops do not prefetch).
    f: ItemFn,
    /// For `level = auto`: one body per candidate level, its `level = auto` loops
    /// prefetching at that level.
    hinted: Vec<(Level, Block)>,
    /// For `level = auto`: the distances its `distance = auto` loops try (empty: none).
    distances: Vec<u64>,
    params: Vec<Param>,
    opts: Options,
}

pub fn expand_kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    match parse_kernel(attr, item) {
        Ok(k) => k.expand(),
        Err(e) => e.to_compile_error(),
    }
}

/// A `#[kernel]` inside an `impl` or `trait` block, which the attribute is not told (see
/// `crate::context`): the error, in place of the expansion's own errors about items those
/// blocks cannot hold. With a `self` receiver, its own error says more.
fn check_placement(f: &ItemFn) -> Option<syn::Error> {
    if f.sig.receiver().is_some() {
        return None;
    }
    let block = crate::context::enclosing_block(Span::call_site())?;
    let (name, a) = (
        f.sig.ident.unraw(),
        if block == "impl" { "an" } else { "a" },
    );
    Some(syn::Error::new(
        Span::call_site(),
        format!("a #[kernel] cannot stand in {a} `{block}` block: a kernel is a free function, launched through the module the macro writes beside it; move `fn {name}` out of the `{block}` to the module, and launch it as `{name}::launch(on, cfg, ..)`"),
    ))
}

fn parse_kernel(attr: TokenStream, item: TokenStream) -> syn::Result<Kernel> {
    let mut f: ItemFn = syn::parse2(item)
        .map_err(|e| syn::Error::new(e.span(), format!("#[kernel] goes on a function: {e}")))?;
    if let Some(e) = check_placement(&f) {
        return Err(e);
    }
    let mut errs = check_signature(&f, true);
    errs.extend(check_repeated(&f, "kernel"));
    let opts = parse_options(attr).unwrap_or_else(|e| {
        errs.push(e);
        Options::default()
    });
    let mut params = Vec::new();
    for arg in &f.sig.inputs {
        match classify(arg) {
            Ok(p) => params.push(p),
            Err(e) => errs.push(e),
        }
    }
    errs.extend(check_length_rules(&opts, &params));
    let written = f.block.clone();
    let (
        loop_errs,
        AutoSummary {
            found,
            levels,
            distances,
        },
    ) = rewrite_body(&mut f.block, AutoMode::Entry(None));
    errs.extend(loop_errs);
    if let Some(e) = combine(errs) {
        return Err(e);
    }
    let names: Vec<Ident> = params.iter().map(|p| p.name.clone()).collect();
    crate::updates::instrument(&mut f.block, &names);
    let levels = if found { levels } else { Vec::new() };
    let hinted = (levels.iter())
        .map(|level| {
            // The same loops, whose errors the first pass reported: none are left.
            let mut block = written.clone();
            let _ = rewrite_body(&mut block, AutoMode::Entry(Some(*level)));
            crate::updates::instrument(&mut block, &names);
            (*level, *block)
        })
        .collect();
    Ok(Kernel {
        f,
        hinted,
        distances,
        params,
        opts,
    })
}

fn docs(attrs: &[Attribute]) -> Vec<&Attribute> {
    attrs.iter().filter(|a| a.path().is_ident("doc")).collect()
}

fn other_attrs(attrs: &[Attribute]) -> Vec<&Attribute> {
    attrs.iter().filter(|a| !a.path().is_ident("doc")).collect()
}

impl Kernel {
    fn name(&self) -> &Ident {
        &self.f.sig.ident
    }
    /// The name without `r#`: the PTX entry's name, and what the host looks up.
    fn export(&self) -> String {
        self.name().unraw().to_string()
    }
    /// The entry's name at `level` (`level = auto`).
    fn level_export(&self, level: Level) -> String {
        format!("{}__{}", self.export(), level.name())
    }
    fn auto(&self) -> bool {
        !self.hinted.is_empty()
    }
    fn body_fn(&self) -> Ident {
        format_ident!("__lookahead_kernel_body_{}", self.export())
    }
    fn level_body_fn(&self, level: Level) -> Ident {
        format_ident!("__lookahead_kernel_body_{}", self.level_export(level))
    }
    /// Every entry's name: `NAME`, then one per candidate level.
    fn exports(&self) -> Vec<String> {
        let levels = self.hinted.iter().map(|(l, _)| self.level_export(*l));
        std::iter::once(self.export()).chain(levels).collect()
    }
    /// The trailing parameter of every body and entry of a `level = auto` kernel: the
    /// distance of its `distance = auto` loops (`None` for any other kernel).
    fn distance_input(&self) -> Option<TokenStream> {
        let d = distance_param();
        self.auto().then(|| quote!(#d: u32))
    }
    /// The trait whose unmet bound reports a call of the kernel as a function.
    fn not_callable_trait(&self) -> Ident {
        format_ident!(
            "__lookahead_kernel_{}_is_launched_not_called",
            self.export()
        )
    }
    /// The constant that only resolves when the kernel is an item of a module.
    fn at_module_level(&self) -> Ident {
        format_ident!(
            "kernel_{}_must_be_an_item_of_a_module__move_it_out_of_the_function_body",
            self.export()
        )
    }
    fn ptx(&self) -> TokenStream {
        match &self.opts.ptx {
            Some(p) => quote!(#p),
            None => quote!(crate::PTX),
        }
    }

    fn expand(&self) -> TokenStream {
        let (bodies, entries, markers) = (self.bodies(), self.entries(), self.markers());
        let checks = self.params.iter().map(Param::type_check);
        let (host, not_callable) = (self.host_module(), self.not_callable());
        quote! {
            #bodies
            #entries
            #markers
            #(#checks)*
            #not_callable
            #host
        }
    }

    /// In the value namespace, the kernel's name is a function that cannot be called: a call
    /// `k(..)` (from the host, or from another kernel) fails on an unmet bound whose message
    /// says how to launch it. The host launchers live in the module `k`, the PTX entry under
    /// an export name, so the name is free on both targets.
    fn not_callable(&self) -> TokenStream {
        let (name, vis, tr) = (self.name(), &self.f.vis, self.not_callable_trait());
        let export = self.export();
        let message = format!(
            "`{export}` is a #[kernel]: it is launched, not called; from the host write \
             `{export}::launch(on, cfg, ..)`"
        );
        let note =
            "a kernel cannot call a kernel: put the code both need in a #[device_fn] and call that";
        let gens: Vec<Ident> = (0..self.params.len())
            .map(|i| format_ident!("__A{}", i))
            .collect();
        quote! {
            #[doc(hidden)]
            #[allow(non_camel_case_types)]
            #[diagnostic::on_unimplemented(message = #message, label = "a kernel is not a function", note = #note)]
            #vis trait #tr {}

            #[doc(hidden)]
            #[allow(non_snake_case, dead_code, clippy::all)]
            #vis fn #name<#(#gens),*>(#(_: #gens),*)
            where
                (#(#gens,)*): #tr,
            {
                ::core::panic!("a #[kernel] cannot be called")
            }
        }
    }

    /// The body as a plain function (both targets compile it: the host type-checks it and
    /// the emulator runs it), twice for `level = auto`.
    fn bodies(&self) -> TokenStream {
        let f = &self.f;
        let (docs, attrs) = (docs(&f.attrs), other_attrs(&f.attrs));
        let unsafety = &f.sig.unsafety;
        let inputs = f
            .sig
            .inputs
            .iter()
            .map(|a| quote!(#a))
            .chain(self.distance_input());
        let inputs: Vec<TokenStream> = inputs.collect();
        let body_fn = self.body_fn();
        let allow =
            quote!(#[allow(dead_code, clippy::all, unused_mut, unused_variables, non_snake_case)]);
        let hinted = self.hinted.iter().map(|(level, block)| {
            let (level_fn, block) = (self.level_body_fn(*level), without_std(block));
            quote! {
                #[doc(hidden)]
                #allow
                #[inline(always)]
                #(#attrs)*
                #unsafety fn #level_fn(#(#inputs),*) #block
            }
        });
        let plain = without_std(&f.block);
        quote! {
            #(#docs)*
            #allow
            #[inline(always)]
            #(#attrs)*
            #unsafety fn #body_fn(#(#inputs),*) #plain
            #(#hinted)*
        }
    }

    /// The PTX entries: `NAME`, and `NAME__<level>` per candidate level for `level = auto`.
    fn entries(&self) -> TokenStream {
        let plain = self.entry(&self.export(), &self.body_fn(), &docs(&self.f.attrs));
        let hinted = self.hinted.iter().map(|(level, _)| {
            let doc: Attribute = syn::parse_quote!(
                /// A candidate entry of a kernel with `#[prefetch_next(level = auto)]` loops.
            );
            self.entry(
                &self.level_export(*level),
                &self.level_body_fn(*level),
                &[&doc],
            )
        });
        quote!(#plain #(#hinted)*)
    }

    /// One entry, exported as `export` (its Rust name is the generated code's own).
    fn entry(&self, export: &str, body_fn: &Ident, docs: &[&Attribute]) -> TokenStream {
        let d = distance_param();
        let lowered = self
            .params
            .iter()
            .map(Param::lowered)
            .chain(self.distance_input());
        let rebuilt = self
            .params
            .iter()
            .map(Param::rebuild)
            .chain(self.auto().then(|| quote!(#d)));
        let bounds = self.bounds_static(export);
        let ident = format_ident!("__lookahead_entry_{}", export);
        quote! {
            #[cfg(target_arch = "nvptx64")]
            #(#docs)*
            #[export_name = #export]
            #[allow(clippy::missing_safety_doc, non_snake_case)]
            pub unsafe extern "gpu-kernel" fn #ident(#(#lowered),*) {
                #[allow(unused_unsafe)]
                unsafe { #body_fn(#(#rebuilt),*) }
            }
            #bounds
        }
    }

    /// The launch bounds travel to the builder as an exported static next to the entry
    /// (rustc cannot put `.maxntid` on a function); the builder turns it into the entry's
    /// `.maxntid` / `.minnctapersm` directives and removes it from the PTX.
    fn bounds_static(&self, entry: &str) -> TokenStream {
        let Some(LaunchBounds {
            threads,
            blocks_per_sm,
        }) = &self.opts.bounds
        else {
            return quote!();
        };
        let blocks = blocks_per_sm
            .clone()
            .unwrap_or_else(|| syn::parse_quote!(0));
        let name = format_ident!("__lookahead_launch_bounds__{}", entry);
        quote! {
            #[cfg(target_arch = "nvptx64")]
            #[doc(hidden)]
            #[no_mangle]
            #[used]
            #[allow(non_upper_case_globals)]
            pub static #name: [u32; 2] = [#threads, #blocks];
        }
    }

    /// The launcher's check of the block against the kernel's launch bounds, and a
    /// compile-time check of the bounds themselves (they may be constants).
    fn bounds_check(&self) -> TokenStream {
        let Some(b) = &self.opts.bounds else {
            return quote!();
        };
        let (cfg, threads) = (mixed("cfg"), &b.threads);
        // Literals were checked when parsed; constants are checked when compiled.
        let t = (!is_int_literal(threads)).then(|| {
            quote_spanned!(threads.span()=>
                #[allow(clippy::assertions_on_constants)]
                const _: () = ::core::assert!(
                    #threads >= 1 && #threads <= 1024,
                    "launch_bounds: `threads` is 1 to 1024"
                );
            )
        });
        let m = (b.blocks_per_sm.as_ref()).filter(|m| !is_int_literal(m)).map(|m| {
            quote_spanned!(m.span()=>
                #[allow(clippy::assertions_on_constants)]
                const _: () = ::core::assert!(#m >= 1, "launch_bounds: `blocks_per_sm` is at least 1");
            )
        });
        quote!(#t #m #cfg.check_launch_bounds(NAME, #threads)?;)
    }

    /// rustc reports a second definition as "the name `...` is defined multiple times", with
    /// both spans: the marker's name is the message.
    fn markers(&self) -> TokenStream {
        let exported = self.exports();
        let here = self.at_module_level();
        let level = quote! {
            #[doc(hidden)]
            #[allow(non_upper_case_globals, dead_code)]
            const #here: () = ();
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
        quote!(#level #(#markers)*)
    }

    /// The host module `NAME` with its launchers.
    fn host_module(&self) -> TokenStream {
        let (name, vis) = (self.name(), &self.f.vis);
        let name_str = self.export();
        let here = self.at_module_level();
        let mod_doc = format!("Host side of the `{name_str}` kernel: [`launch`] and its PTX name.");
        let items = if self.auto() {
            self.auto_launchers()
        } else {
            self.single_launcher()
        };
        quote! {
            #[cfg(not(target_arch = "nvptx64"))]
            #[doc = #mod_doc]
            #vis mod #name {
                // A kernel inside a function body: its module cannot see the body's items.
                const _: () = super::#here;

                #[allow(unused_imports)]
                use super::*;

                /// The kernel's name in the PTX (its `.entry`).
                pub const NAME: &str = #name_str;

                #items
            }
        }
    }

    /// `on`, `cfg` and the user's parameters: the launchers' common parameter list.
    fn launcher_params(&self) -> TokenStream {
        let (on, cfg) = (mixed("on"), mixed("cfg"));
        let host_params = self.params.iter().map(Param::host_param);
        quote! {
            #on: &__On,
            #cfg: impl ::core::convert::Into<::lookahead::launch::LaunchConfig>,
            #(#host_params),*
        }
    }

    /// What a public launcher's signature starts with, `unsafe` for an `unsafe fn` kernel.
    fn launcher_head(&self) -> TokenStream {
        match &self.f.sig.unsafety {
            Some(u) => quote!(pub #u fn),
            None => quote!(pub fn),
        }
    }

    fn safety_doc(&self) -> &'static str {
        if self.f.sig.unsafety.is_some() {
            "\n\n# Safety\nThe kernel is an `unsafe fn`: for every thread of the launch, the caller upholds what its documentation requires."
        } else {
            ""
        }
    }

    /// The checks and the launch itself, shared by every launcher of the kernel.
    fn launch_body(&self, plan: TokenStream, run: TokenStream) -> TokenStream {
        let (on, cfg, args, params) = (mixed("on"), mixed("cfg"), args_ident(), mixed("params"));
        let (plan_id, variant, entry_name, prepared, entry) = (
            mixed("plan"),
            mixed("variant"),
            mixed("entry_name"),
            mixed("prepared"),
            mixed("entry"),
        );
        let au = quote!(::lookahead::launch::autotune);
        let space = {
            let m = memory();
            quote!(<#m as ::lookahead::launch::TargetMemory>)
        };
        let lens = self.params.iter().map(Param::host_len);
        let rules = self.length_rules();
        let pushes = self.params.iter().map(Param::push);
        let mut next = 0;
        let reads: Vec<_> = (self.params.iter())
            .map(|p| p.read_params(&params, &mut next))
            .collect();
        let (ptx, bounds) = (self.ptx(), self.bounds_check());
        let (entry_of, push_distance) = if self.auto() {
            (
                quote!(#au::entry_for(NAME, ENTRIES, #variant)?),
                // SAFETY (of the push): a `u32` has no padding; every entry of the kernel
                // takes it last.
                quote!(unsafe { #space::push(&mut #args, &#variant.distance) };),
            )
        } else {
            (quote!(NAME), quote!())
        };
        quote! {
            let #cfg: ::lookahead::launch::LaunchConfig = #cfg.into();
            #cfg.check(NAME)?;
            #bounds
            #(#lens)*
            #rules
            let #plan_id: #au::Plan<'_> = #plan;
            let #variant = #plan_id.variant;
            let #entry_name: &'static str = #entry_of;
            let #prepared = ::lookahead::launch::LaunchOn::prepare(#on, #ptx, #entry_name)?;
            let mut #args = #space::args(&#prepared);
            #(#pushes)*
            #push_distance
            // The kernel body for the CPU emulator: rebuilds the parameters from the
            // argument bytes, as the PTX entry does from the GPU's parameter buffer.
            let #entry = |#params: &::lookahead::launch::Params| {
                #(#reads)*
                #run
            };
            #space::launch(#args, #entry_name, #cfg, &#entry, &#plan_id)
        }
    }

    /// The `same_len` / `min_len` checks, on the lengths the launcher read.
    fn length_rules(&self) -> TokenStream {
        let len_of = |id: &Ident| {
            let p = self.params.iter().find(|p| p.name == *id);
            p.map(Param::len_ident).expect("checked: a slice parameter")
        };
        let same = self.opts.same_len.iter().map(|g| {
            let names = g.iter().map(|i| i.to_string());
            let lens = g.iter().map(len_of);
            quote!(::lookahead::launch::check_same_len(NAME, &[#((#names, #lens)),*])?;)
        });
        let min = self.opts.min_len.iter().map(|(i, n)| {
            let (s, l) = (i.to_string(), len_of(i));
            quote_spanned!(n.span()=> ::lookahead::launch::check_min_len(NAME, #s, #l, #n)?;)
        });
        quote!(#(#same)* #(#min)*)
    }

    /// The call of the body for the emulator: `variant` picks the body of a `level = auto`
    /// kernel.
    fn run_body(&self) -> TokenStream {
        let rebuilt: Vec<_> = self.params.iter().map(Param::rebuild).collect();
        let (body_fn, variant) = (self.body_fn(), mixed("variant"));
        if !self.auto() {
            return quote! {
                let _ = #variant;
                #[allow(unused_unsafe)]
                unsafe { super::#body_fn(#(#rebuilt),*) }
            };
        }
        let arms = self.hinted.iter().map(|(level, _)| {
            let (hint, level_fn) = (level.hint(), self.level_body_fn(*level));
            quote!(#hint => unsafe { super::#level_fn(#(#rebuilt,)* #variant.distance) },)
        });
        quote! {
            #[allow(unused_unsafe)]
            match #variant.hint {
                #(#arms)*
                // The plain entry (`entry_for` refused any level the kernel lacks).
                _ => unsafe { super::#body_fn(#(#rebuilt,)* #variant.distance) },
            }
        }
    }

    fn single_launcher(&self) -> TokenStream {
        let au = quote!(::lookahead::launch::autotune);
        let body = self.launch_body(
            quote!(#au::Plan::fixed(#au::Variant::PLAIN)),
            self.run_body(),
        );
        let name_str = self.export();
        let doc = format!(
            "Launches the `{name_str}` kernel on `on` with `cfg`: checks the configuration and the \
             declared length rules, then launches. On a GPU (a `Gpu`, a stream or a `Launcher`, \
             with GPU allocations) the launch is asynchronous on `on`'s stream; on the CPU \
             emulator (`lookahead::emu::Emulator`, with host memory: `Vec<T>`, `[T]`) it runs \
             to completion before returning.{}",
            self.safety_doc()
        );
        let (head, params) = (self.launcher_head(), self.launcher_params());
        quote! {
            #[doc = #doc]
            #[allow(clippy::too_many_arguments, non_snake_case)]
            #head launch<__On: ::lookahead::launch::LaunchOn + ?Sized>(
                #params
            ) -> ::core::result::Result<(), ::lookahead::Error> {
                #body
            }
        }
    }

    fn auto_launchers(&self) -> TokenStream {
        let au = quote!(::lookahead::launch::autotune);
        let (on, cfg, requested) = (mixed("on"), mixed("cfg"), mixed("requested"));
        let ptx = self.ptx();
        let lens = (self.params.iter())
            .filter(|p| p.is_slice())
            .map(Param::len_ident);
        let elements = quote!(0usize #(.saturating_add(#lens))*);
        let body = self.launch_body(
            quote!(#au::plan(#on, #ptx, NAME, CANDIDATES, #requested, (&#cfg, #elements))),
            self.run_body(),
        );
        let (candidates, entries) = self.candidate_tables();
        let (auto_doc, variant_doc) = self.auto_docs();
        let (head, params) = (self.launcher_head(), self.launcher_params());
        let names: Vec<&Ident> = self.params.iter().map(|p| &p.name).collect();
        let variant = mixed("variant");
        let forward = |req: TokenStream| quote!(#[allow(unused_unsafe)] unsafe { __launch(#req, #on, #cfg, #(#names),*) });
        let (launch_auto, launch_fixed) = (
            forward(quote!(::core::option::Option::None)),
            forward(quote!(::core::option::Option::Some(#variant))),
        );
        quote! {
            pub use #au::{Hint, Variant};

            /// The candidates the tuner measures: the plain entry, then each level at each
            /// distance of the kernel's `level = auto` loops.
            pub const CANDIDATES: &[Variant] = &[#(#candidates),*];

            /// The PTX entry of each level.
            pub const ENTRIES: &[(Hint, &str)] = &[#(#entries),*];

            #[doc = #auto_doc]
            #[allow(clippy::too_many_arguments, non_snake_case)]
            #head launch<__On: ::lookahead::launch::LaunchOn + ?Sized>(
                #params
            ) -> ::core::result::Result<(), ::lookahead::Error> {
                #launch_auto
            }

            #[doc = #variant_doc]
            #[allow(clippy::too_many_arguments, non_snake_case)]
            #head launch_variant<__On: ::lookahead::launch::LaunchOn + ?Sized>(
                #variant: Variant,
                #params
            ) -> ::core::result::Result<(), ::lookahead::Error> {
                #launch_fixed
            }

            /// The candidate [`launch`] uses on `on` from now on: `None` while the first
            /// launches are still being measured (or before any), then the fastest (on the
            /// CPU emulator, the first hinted candidate). Reads the timings that have
            /// completed; never waits.
            pub fn auto_choice<__On: ::lookahead::launch::LaunchOn + ?Sized>(
                #on: &__On,
            ) -> ::core::option::Option<Variant> {
                #au::choice(#on, #ptx, NAME, CANDIDATES)
            }

            #[allow(clippy::too_many_arguments, non_snake_case)]
            fn __launch<__On: ::lookahead::launch::LaunchOn + ?Sized>(
                #requested: ::core::option::Option<Variant>,
                #params
            ) -> ::core::result::Result<(), ::lookahead::Error> {
                #body
            }
        }
    }

    /// `CANDIDATES` (plain, then every level at every distance) and `ENTRIES` (one per
    /// hint) of a `level = auto` kernel.
    fn candidate_tables(&self) -> (Vec<TokenStream>, Vec<TokenStream>) {
        let au = quote!(::lookahead::launch::autotune);
        let distances: Vec<u32> = match self.distances.as_slice() {
            [] => vec![0],
            ds => ds.iter().map(|d| *d as u32).collect(),
        };
        let mut candidates = vec![quote!(#au::Variant::PLAIN)];
        let mut entries = vec![{
            let n = self.export();
            quote!((#au::Hint::None, #n))
        }];
        for (level, _) in &self.hinted {
            let (hint, export) = (level.hint(), self.level_export(*level));
            candidates.extend(
                distances
                    .iter()
                    .map(|d| quote!(#au::Variant::new(#hint, #d))),
            );
            entries.push(quote!((#hint, #export)));
        }
        (candidates, entries)
    }

    /// The docs of `launch` and `launch_variant` of a `level = auto` kernel.
    fn auto_docs(&self) -> (String, String) {
        let name_str = self.export();
        let entries = self
            .exports()
            .iter()
            .map(|e| format!("`{e}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let auto_doc = format!(
            "Launches `{name_str}` choosing its prefetch level and distance by measurement (its              `#[prefetch_next(level = auto)]` loops): on each GPU the first launches take              turns over [`CANDIDATES`] (entries {entries}), each timed with CUDA events on the              launch stream from a cold L2; the clearly slower ones are dropped early, and once              the leader is clear every launch uses it (see `lookahead::launch::autotune` and              [`auto_choice`]). A decision is kept in the tuning cache file, so a later process              launches no tuning samples. Every launch runs on the given arguments exactly once.              On the CPU emulator the first launches run each candidate once, then the first              hinted one. Otherwise as [`launch_variant`].{}",
            self.safety_doc()
        );
        let variant_doc = format!(
            "Launches the given candidate of `{name_str}` ([`Variant::PLAIN`], or a level of              [`ENTRIES`] at any distance), with no measurement. A level the kernel was not              compiled at is an error. Checks the configuration and the declared length rules,              then launches: asynchronously on `on`'s stream on a GPU, to completion on the CPU              emulator.{}",
            self.safety_doc()
        );
        (auto_doc, variant_doc)
    }
}

/// A name of the generated code's own, invisible to (and unaffected by) the user's names.
fn mixed(name: &str) -> Ident {
    Ident::new(name, Span::mixed_site())
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
    errs.extend(check_repeated(&f, "device_fn"));
    errs.extend(rewrite_body(&mut f.block, AutoMode::Forbidden).0);
    if let Some(e) = combine(errs) {
        return e.to_compile_error();
    }
    let names: Vec<Ident> = (f.sig.inputs.iter())
        .filter_map(|a| match a {
            syn::FnArg::Typed(t) => match &*t.pat {
                syn::Pat::Ident(p) => Some(p.ident.clone()),
                _ => None,
            },
            syn::FnArg::Receiver(_) => None,
        })
        .collect();
    crate::updates::instrument(&mut f.block, &names);
    let (attrs, vis, sig) = (&f.attrs, &f.vis, &f.sig);
    let block = without_std(&f.block);
    quote!(#[inline(always)] #(#attrs)* #vis #sig #block)
}

/// The messages of the standard library's macros in kernel code, which is `no_std` on the
/// GPU: the same code must fail on the host (and so in the emulator) with a reason.
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
fn without_std(block: &Block) -> TokenStream {
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
    let stmts = &block.stmts;
    quote! {{
        #(#macros)*
        #[allow(unused_imports)]
        use ::lookahead_device::std_is_not_available_in_kernels::{Box, String, Vec};
        #(#stmts)*
    }}
}
