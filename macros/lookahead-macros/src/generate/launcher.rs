//! The host module of a `#[kernel]`: `NAME::launch` and, for `level = auto`, the candidates,
//! `launch_variant` and `auto_choice`.

use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use super::kernel::KernelGen;
use crate::generate::kernel::Tag;
use crate::ident::{args, mixed};
use crate::level::Level;
use crate::parse::kernel::is_int_literal;
use crate::parse::params::Param;
use crate::paths;

/// `level` as the host names it: the device runtime's `prefetch::Level`.
fn level_tokens(level: Level) -> TokenStream {
    paths::level(level.info().variant)
}

/// The tuner's variant that launches the entry of `tag` (at distance 0).
fn entry_variant(tag: Tag) -> TokenStream {
    let au = paths::autotune();
    match tag {
        Tag::Level(l) => {
            let l = level_tokens(l);
            quote!(#au::Variant::new(#l, 0))
        }
        Tag::Pipe(c, s) => {
            let (kind, s) = (format_ident!("{}", c.kind()), s as u8);
            quote!(#au::Variant::pipelined(#au::CopyKind::#kind, #s))
        }
    }
}

impl KernelGen<'_> {
    /// The crate's PTX table: `ptx = path`, else `crate::PTX`, looked up so that a crate
    /// root without one gets `lookahead_device::kernel_crate_ptx`'s message, not "cannot find value".
    fn ptx(&self) -> TokenStream {
        if let Some(p) = &self.k.opts.ptx {
            return quote!(#p);
        }
        let d = paths::device();
        // The inner block's glob (the crate root's `PTX`) shadows the outer one's stand-in.
        quote! {{
            #[allow(unused_imports)]
            use #d::kernel_crate_ptx::*;
            {
                #[allow(unused_imports)]
                use crate::*;
                #d::kernel_crate_ptx::KernelCratePtx::table(&PTX)
            }
        }}
    }

    /// The host module `NAME` with its launchers.
    pub fn host_module(&self) -> TokenStream {
        let (name, vis) = (self.name(), &self.k.f.vis);
        let name_str = self.export();
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
        let (on, cfg, l) = (mixed("on"), mixed("cfg"), paths::launch());
        let host_params = self.k.params.iter().map(Param::host_param);
        quote! {
            #on: &__On,
            #cfg: impl #l::IntoLaunchConfig,
            #(#host_params),*
        }
    }

    /// What a public launcher's signature starts with, `unsafe` for an `unsafe fn` kernel.
    fn launcher_head(&self) -> TokenStream {
        match &self.k.f.sig.unsafety {
            Some(u) => quote!(pub #u fn),
            None => quote!(pub fn),
        }
    }

    fn safety_doc(&self) -> &'static str {
        if self.k.f.sig.unsafety.is_some() {
            "\n\n# Safety\nThe kernel is an `unsafe fn`: for every thread of the launch, the \
             caller upholds what its documentation requires."
        } else {
            ""
        }
    }

    /// The launcher's check of the block against the kernel's launch bounds, and a
    /// compile-time check of the bounds themselves (they may be constants).
    fn bounds_check(&self) -> TokenStream {
        let Some(b) = &self.k.opts.bounds else {
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
        let m = (b.blocks_per_sm.as_ref())
            .filter(|m| !is_int_literal(m))
            .map(|m| {
                quote_spanned!(m.span()=>
                    #[allow(clippy::assertions_on_constants)]
                    const _: () =
                        ::core::assert!(#m >= 1, "launch_bounds: `blocks_per_sm` is at least 1");
                )
            });
        quote!(#t #m #cfg.check_launch_bounds(NAME, #threads)?;)
    }

    /// The checks and the launch itself, shared by every launcher of the kernel.
    fn launch_body(&self, plan: TokenStream, run: TokenStream) -> TokenStream {
        let (on, cfg, args, params) = (mixed("on"), mixed("cfg"), args(), mixed("params"));
        let (plan_id, variant, entry_name, prepared, entry) = (
            mixed("plan"),
            mixed("variant"),
            mixed("entry_name"),
            mixed("prepared"),
            mixed("entry"),
        );
        let (l, au, space) = (paths::launch(), paths::autotune(), paths::space());
        let lens = self.k.params.iter().map(Param::host_len);
        let rules = self.length_rules();
        let pushes = self.k.params.iter().map(Param::push);
        let mut next = 0;
        let reads: Vec<_> = (self.k.params.iter())
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
            let #cfg: #l::LaunchConfig = #l::IntoLaunchConfig::into_launch_config(#cfg);
            #cfg.check(NAME)?;
            #bounds
            #(#lens)*
            #rules
            let #plan_id: #au::Plan<'_> = #plan;
            let #variant = #plan_id.variant;
            let #entry_name: &'static str = #entry_of;
            let #prepared = #l::LaunchOn::prepare(#on, #ptx, #entry_name)?;
            let mut #args = #space::args(&#prepared);
            #(#pushes)*
            #push_distance
            // The kernel body for the CPU emulator: rebuilds the parameters from the
            // argument bytes, as the PTX entry does from the GPU's parameter buffer.
            let #entry = |#params: &#l::Params| {
                #(#reads)*
                #run
            };
            #space::launch(#args, #entry_name, #cfg, &#entry, &#plan_id)
        }
    }

    /// The `same_len` / `min_len` checks, on the lengths the launcher read.
    fn length_rules(&self) -> TokenStream {
        let l = paths::launch();
        let len_of = |id: &Ident| {
            let p = self.k.params.iter().find(|p| p.name == *id);
            p.map(Param::len_ident).expect("checked: a slice parameter")
        };
        let same = self.k.opts.same_len.iter().map(|g| {
            let names = g.iter().map(|i| i.to_string());
            let lens = g.iter().map(len_of);
            quote!(#l::check_same_len(NAME, &[#((#names, #lens)),*])?;)
        });
        let min = self.k.opts.min_len.iter().map(|(i, n)| {
            let (s, len, l) = (i.to_string(), len_of(i), paths::at(n.span(), l.clone()));
            // A literal is a `usize` by inference; anything else goes through `MinLen`, whose
            // error names the rule when it is another type.
            let span = n.span();
            let n = if crate::parse::kernel::is_int_literal(n) {
                quote!(#n)
            } else {
                quote_spanned!(span=> #l::MinLen::min_len(#n))
            };
            quote_spanned!(span=> #l::check_min_len(NAME, #s, #len, #n)?;)
        });
        quote!(#(#same)* #(#min)*)
    }

    /// The call of the body for the emulator: `variant` picks the body of a `level = auto`
    /// kernel.
    fn run_body(&self) -> TokenStream {
        let rebuilt: Vec<_> = self.k.params.iter().map(Param::rebuild).collect();
        let (body_fn, variant) = (self.body_fn(), mixed("variant"));
        let here = self.at_module_level();
        if !self.auto() {
            return quote! {
                let _ = #variant;
                #[allow(unused_unsafe)]
                unsafe { super::#here::#body_fn(#(#rebuilt),*) }
            };
        }
        let arms = self.hinted.iter().map(|(tag, _)| {
            let (key, tag_fn) = (entry_variant(*tag), self.tag_body_fn(*tag));
            quote! {
                if #variant.same_entry(#key) {
                    unsafe { super::#here::#tag_fn(#(#rebuilt,)* #variant.distance) }
                } else
            }
        });
        quote! {
            #[allow(unused_unsafe)]
            #(#arms)*
            // The plain entry (`entry_for` refused any entry the kernel lacks).
            {
                unsafe { super::#here::#body_fn(#(#rebuilt,)* #variant.distance) }
            }
        }
    }

    fn single_launcher(&self) -> TokenStream {
        let au = paths::autotune();
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
        let (l, error) = (paths::launch(), paths::error());
        quote! {
            #[doc = #doc]
            #[allow(clippy::too_many_arguments, non_snake_case)]
            #head launch<__On: #l::LaunchOn + ?Sized>(
                #params
            ) -> ::core::result::Result<(), #error> {
                #body
            }
        }
    }

    fn auto_launchers(&self) -> TokenStream {
        let (l, au, error) = (paths::launch(), paths::autotune(), paths::error());
        let (on, cfg, requested) = (mixed("on"), mixed("cfg"), mixed("requested"));
        let ptx = self.ptx();
        let lens = (self.k.params.iter())
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
        let names: Vec<&Ident> = self.k.params.iter().map(|p| &p.name).collect();
        let variant = mixed("variant");
        let forward = |req: TokenStream| {
            let args = quote!(#req, #on, #cfg, #(#names),*);
            quote!(#[allow(unused_unsafe)] unsafe { __launch(#args) })
        };
        let (launch_auto, launch_fixed) = (
            forward(quote!(::core::option::Option::None)),
            forward(quote!(::core::option::Option::Some(#variant))),
        );
        quote! {
            pub use #au::{CopyKind, Level, Variant};

            /// The candidates the tuner measures: the plain entry, then each level at each
            /// distance of the kernel's `level = auto` loops (or each pipeline of its
            /// `stages = auto` loops).
            pub const CANDIDATES: &[Variant] = &[#(#candidates),*];

            /// The PTX entry of each candidate entry, keyed by a variant that launches it
            /// (distance 0).
            pub const ENTRIES: &[(Variant, &str)] = &[#(#entries),*];

            #[doc = #auto_doc]
            #[allow(clippy::too_many_arguments, non_snake_case)]
            #head launch<__On: #l::LaunchOn + ?Sized>(
                #params
            ) -> ::core::result::Result<(), #error> {
                #launch_auto
            }

            #[doc = #variant_doc]
            #[allow(clippy::too_many_arguments, non_snake_case)]
            #head launch_variant<__On: #l::LaunchOn + ?Sized>(
                #variant: Variant,
                #params
            ) -> ::core::result::Result<(), #error> {
                #launch_fixed
            }

            /// The candidate [`launch`] uses on `on` from now on: `None` while the first
            /// launches are still being measured (or before any), then the fastest (on the
            /// CPU emulator, the first hinted candidate). Reads the timings that have
            /// completed; never waits.
            pub fn auto_choice<__On: #l::LaunchOn + ?Sized>(
                #on: &__On,
            ) -> ::core::option::Option<Variant> {
                #au::choice(#on, #ptx, NAME, CANDIDATES)
            }

            #[allow(clippy::too_many_arguments, non_snake_case)]
            fn __launch<__On: #l::LaunchOn + ?Sized>(
                #requested: ::core::option::Option<Variant>,
                #params
            ) -> ::core::result::Result<(), #error> {
                #body
            }
        }
    }

    /// `CANDIDATES` (plain, then every level at every distance, or every pipeline) and
    /// `ENTRIES` (the plain one, then one per level or pipeline) of an auto-tuned kernel.
    fn candidate_tables(&self) -> (Vec<TokenStream>, Vec<TokenStream>) {
        let au = paths::autotune();
        let distances: Vec<u32> = match self.k.distances.as_slice() {
            [] => vec![0],
            ds => ds.iter().map(|d| *d as u32).collect(),
        };
        let mut candidates = vec![quote!(#au::Variant::PLAIN)];
        let mut entries = vec![{
            let n = self.export();
            quote!((#au::Variant::PLAIN, #n))
        }];
        for (tag, _) in &self.hinted {
            let (key, export) = (entry_variant(*tag), self.tag_export(*tag));
            match tag {
                Tag::Level(l) => {
                    let l = level_tokens(*l);
                    let at = distances.iter().map(|d| quote!(#au::Variant::new(#l, #d)));
                    candidates.extend(at);
                }
                Tag::Pipe(..) => candidates.push(key.clone()),
            }
            entries.push(quote!((#key, #export)));
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
            "Launches `{name_str}` choosing by measurement the prefetch level and distance of \
             its `#[prefetch_next(level = auto)]` loops, or the copy kind and stages of its \
             `stages = auto` / `copy = auto` pipelines: on each GPU the first launches take turns \
             over [`CANDIDATES`] (entries {entries}), each timed with CUDA events on the launch \
             stream from a cold L2; the clearly slower ones are dropped early, and once the \
             leader is clear every launch uses it (see `lookahead::launch::autotune` and \
             [`auto_choice`]). A decision is kept in the tuning cache file, so a later process \
             launches no tuning samples. Every launch runs on the given arguments exactly once. \
             On the CPU emulator the first launches run each candidate once, then the first \
             hinted one. Otherwise as [`launch_variant`].{}",
            self.safety_doc()
        );
        let variant_doc = format!(
            "Launches the given candidate of `{name_str}` ([`Variant::PLAIN`], or an entry of \
             [`ENTRIES`], a level at any distance), with no measurement. An entry the kernel \
             was not compiled with is an error. Checks the configuration and the declared length rules, \
             then launches: asynchronously on `on`'s stream on a GPU, to completion on the CPU \
             emulator.{}",
            self.safety_doc()
        );
        (auto_doc, variant_doc)
    }
}
