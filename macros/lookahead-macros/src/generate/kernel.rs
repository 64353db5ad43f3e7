//! The items of a `#[kernel]`: its bodies (one per entry), its PTX entries, the markers that
//! report misuse, and (in `launcher`) its host module; and a `#[device_fn]`.

use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote};
use syn::ext::IdentExt;
use syn::{Attribute, Block};

use crate::ident::distance;
use crate::level::Level;
use crate::parse::kernel::{DeviceFn, Kernel, LaunchBounds};
use crate::parse::params::Param;
use crate::parse::pipeline::Copy;
use crate::rewrite::{self, Entry};

/// The candidate an entry of an auto-tuned kernel compiles: a prefetch level of its
/// `level = auto` loops, or a pipeline of its `stages = auto` / `copy = auto` loops.
#[derive(Clone, Copy)]
pub enum Tag {
    Level(Level),
    Pipe(Copy, usize),
}

impl Tag {
    fn entry(self) -> Entry {
        match self {
            Tag::Level(l) => Entry::At(l),
            Tag::Pipe(c, s) => Entry::Piped(c, s),
        }
    }
    /// The suffix of its entry's name: `l2`, `cp_async_s3`, ...
    pub fn suffix(self) -> String {
        match self {
            Tag::Level(l) => l.name().to_string(),
            Tag::Pipe(c, s) => format!("{}_s{s}", c.name()),
        }
    }
}

/// A kernel and its bodies, one per entry: what its items are generated from.
pub struct KernelGen<'a> {
    pub k: &'a Kernel,
    /// The plain entry's body: every `#[prefetch_next]` loop rewritten, except the
    /// `level = auto` ones, which do not prefetch there, and the `stages = auto` ones, which
    /// copy with loads and stores.
    pub plain: Block,
    /// For an auto-tuned kernel: one body per candidate.
    pub hinted: Vec<(Tag, Block)>,
}

/// The items of the kernel `k`.
pub fn kernel(k: &Kernel) -> TokenStream {
    let body = |entry: Entry| {
        let mut block = k.f.block.as_ref().clone();
        // The errors were reported when the kernel was parsed: none are left.
        let _ = rewrite::loops(&mut block, entry, true);
        let names: Vec<Ident> = k.params.iter().map(|p| p.name.clone()).collect();
        rewrite::updates::instrument(&mut block, &names);
        block
    };
    let g = KernelGen {
        k,
        plain: body(Entry::Plain),
        hinted: (k.levels.iter().map(|l| Tag::Level(*l)))
            .chain(k.pipelines.iter().map(|(c, s)| Tag::Pipe(*c, *s)))
            .map(|tag| (tag, body(tag.entry())))
            .collect(),
    };
    g.expand()
}

/// The device function `d`: its loops rewritten, inlined.
pub fn device_fn(d: &DeviceFn) -> TokenStream {
    let f = &d.f;
    let mut block = f.block.as_ref().clone();
    let _ = rewrite::loops(&mut block, Entry::Plain, false);
    let names: Vec<Ident> = (f.sig.inputs.iter())
        .filter_map(|a| match a {
            syn::FnArg::Typed(t) => match &*t.pat {
                syn::Pat::Ident(p) => Some(p.ident.clone()),
                _ => None,
            },
            syn::FnArg::Receiver(_) => None,
        })
        .collect();
    rewrite::updates::instrument(&mut block, &names);
    let (attrs, vis, sig) = (&f.attrs, &f.vis, &f.sig);
    let block = super::no_std::without_std(&block);
    quote!(#[inline(always)] #(#attrs)* #vis #sig #block)
}

pub fn docs(attrs: &[Attribute]) -> Vec<&Attribute> {
    attrs.iter().filter(|a| a.path().is_ident("doc")).collect()
}

fn other_attrs(attrs: &[Attribute]) -> Vec<&Attribute> {
    attrs.iter().filter(|a| !a.path().is_ident("doc")).collect()
}

impl KernelGen<'_> {
    pub fn name(&self) -> &Ident {
        &self.k.f.sig.ident
    }
    /// The name without `r#`: the PTX entry's name, and what the host looks up.
    pub fn export(&self) -> String {
        self.name().unraw().to_string()
    }
    /// The name of the entry of candidate `tag`.
    pub fn tag_export(&self, tag: Tag) -> String {
        format!("{}__{}", self.export(), tag.suffix())
    }
    pub fn auto(&self) -> bool {
        !self.hinted.is_empty()
    }
    /// The body as a plain function. rustc may name it in an error about the kernel (a
    /// constant that fails to evaluate in it), so the name reads as what it is.
    pub fn body_fn(&self) -> Ident {
        format_ident!("kernel_body_of_{}", self.export())
    }
    pub fn tag_body_fn(&self, tag: Tag) -> Ident {
        format_ident!("kernel_body_of_{}", self.tag_export(tag))
    }
    /// Every entry's name: `NAME`, then one per candidate level.
    pub fn exports(&self) -> Vec<String> {
        let levels = self.hinted.iter().map(|(t, _)| self.tag_export(*t));
        std::iter::once(self.export()).chain(levels).collect()
    }
    /// The trailing parameter of every body and entry of a `level = auto` kernel: the
    /// distance of its `distance = auto` loops (`None` for any other kernel).
    fn distance_input(&self) -> Option<TokenStream> {
        let d = distance();
        self.auto().then(|| quote!(#d: u32))
    }
    /// The trait whose unmet bound reports a call of the kernel as a function. rustc names it
    /// in a help line, so its name says what to do.
    fn not_callable_trait(&self) -> Ident {
        let k = self.export();
        format_ident!("kernel_{k}_is_launched_with_{k}_launch_not_called")
    }
    /// The module that only resolves when the kernel is an item of a module.
    pub fn at_module_level(&self) -> Ident {
        format_ident!(
            "kernel_{}_must_be_an_item_of_a_module__move_it_out_of_the_function_body",
            self.export()
        )
    }

    fn expand(&self) -> TokenStream {
        let (bodies, entries, markers) = (self.bodies(), self.entries(), self.markers());
        let checks = self.k.params.iter().map(Param::type_check);
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
        let (name, vis, tr) = (self.name(), &self.k.f.vis, self.not_callable_trait());
        let export = self.export();
        let message = format!(
            "`{export}` is a #[kernel]: it is launched, not called; from the host write \
             `{export}::launch(on, cfg, ..)`"
        );
        let note =
            "a kernel cannot call a kernel: put the code both need in a #[device_fn] and call that";
        let gens: Vec<Ident> = (0..self.k.params.len())
            .map(|i| format_ident!("__A{}", i))
            .collect();
        quote! {
            #[doc(hidden)]
            #[allow(non_camel_case_types)]
            #[diagnostic::on_unimplemented(
                message = #message,
                label = "a kernel is not a function",
                note = #note
            )]
            #vis trait #tr {}

            // With no implementation at all rustc would add "consider adding one"; this one
            // (for a type with no values) is hidden from its suggestions.
            #[diagnostic::do_not_recommend]
            impl #tr for ::core::convert::Infallible {}

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
    /// the emulator runs it), once per entry.
    fn bodies(&self) -> TokenStream {
        let f = &self.k.f;
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
        let hinted = self.hinted.iter().map(|(tag, block)| {
            let (level_fn, block) = (self.tag_body_fn(*tag), super::no_std::without_std(block));
            quote! {
                #[doc(hidden)]
                #allow
                #[inline(always)]
                #(#attrs)*
                #unsafety fn #level_fn(#(#inputs),*) #block
            }
        });
        let plain = super::no_std::without_std(&self.plain);
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
        let plain = self.entry(&self.export(), &self.body_fn(), &docs(&self.k.f.attrs));
        let hinted = self.hinted.iter().map(|(tag, _)| {
            let doc: Attribute = syn::parse_quote!(
                /// A candidate entry of a kernel with auto-tuned `#[prefetch_next]` loops.
            );
            self.entry(&self.tag_export(*tag), &self.tag_body_fn(*tag), &[&doc])
        });
        quote!(#plain #(#hinted)*)
    }

    /// One entry, exported as `export` (its Rust name is the generated code's own).
    fn entry(&self, export: &str, body_fn: &Ident, docs: &[&Attribute]) -> TokenStream {
        let d = distance();
        let lowered = (self.k.params.iter())
            .map(Param::lowered)
            .chain(self.distance_input());
        let rebuilt = (self.k.params.iter())
            .map(Param::rebuild)
            .chain(self.auto().then(|| quote!(#d)));
        let bounds = self.bounds_static(export);
        let ident = format_ident!("__lookahead_entry_{}", export);
        quote! {
            #[cfg(target_arch = "nvptx64")]
            #(#docs)*
            #[export_name = #export]
            // Struct parameters are `#[repr(C)]` `DeviceCopy` types (checked by `param::check`),
            // passed as the `.param` byte arrays the host launcher writes; rustc's
            // `improper_gpu_kernel_arg` cannot know that (and older nightlies lack the lint).
            #[allow(clippy::missing_safety_doc, non_snake_case, unknown_lints, improper_gpu_kernel_arg)]
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
        }) = &self.k.opts.bounds
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

    /// rustc reports a second definition as "the name `...` is defined multiple times", with
    /// both spans: the marker's name is the message.
    fn markers(&self) -> TokenStream {
        let exported = self.exports();
        let here = self.at_module_level();
        // Everything the kernel's module takes from beside the kernel goes through this one
        // module, so a kernel inside a function body (whose module cannot see the body's
        // items) gets one error, naming the marker, and no other.
        let level = quote! {
            #[doc(hidden)]
            #[allow(non_snake_case, unused_imports, dead_code)]
            mod #here {
                pub(super) use super::*;
            }
        };
        let markers = exported.iter().map(|n| {
            let marker = format_ident!("kernel_name_{}_is_exported_by_two_kernels__rename_one", n);
            let msg = format!(
                "two #[kernel]s export the name `{n}` in this crate: PTX entry names must be \
                 unique, rename one"
            );
            quote! {
                // A second kernel exporting the same name defines this macro twice in the
                // crate root.
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
}
