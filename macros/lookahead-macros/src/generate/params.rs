//! Kernel parameters in the generated code: lowered on the GPU, rebuilt in the entry, taken,
//! bound and pushed by the host launcher, read back by the emulator.

use proc_macro2::{Ident, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use crate::ident::{args, suffixed};
use crate::parse::params::{Kind, Param, ViewKind};
use crate::paths;

impl Param {
    fn ptr_ident(&self) -> Ident {
        suffixed(&self.name, "__ptr")
    }

    pub fn len_ident(&self) -> Ident {
        suffixed(&self.name, "__len")
    }

    /// A compile-time check of the parameter's type (with its span): slice elements are
    /// `DeviceCopy`, by-value types `KernelParam`.
    pub fn type_check(&self) -> TokenStream {
        let check = paths::param_check();
        match (&self.kind, self.elem()) {
            (_, Some((elem, _))) => {
                quote_spanned!(elem.span()=> const _: () = #check::device_copy::<#elem>();)
            }
            (Kind::Value, _) => {
                let ty = &self.ty;
                quote_spanned!(ty.span()=> const _: () = #check::kernel_param::<#ty>();)
            }
            _ => quote!(),
        }
    }

    /// Parameters of the PTX entry.
    pub fn lowered(&self) -> TokenStream {
        let (name, ty) = (&self.name, &self.ty);
        let (p, l) = (self.ptr_ident(), self.len_ident());
        match self.elem() {
            Some((elem, true)) => quote!(#p: *mut #elem, #l: usize),
            Some((elem, false)) => quote!(#p: *const #elem, #l: usize),
            None => quote!(#name: #ty),
        }
    }

    /// The expression rebuilding the typed value inside the entry.
    pub fn rebuild(&self) -> TokenStream {
        let name = &self.name;
        let (p, l) = (self.ptr_ident(), self.len_ident());
        let v = paths::view();
        match &self.kind {
            Kind::Scalar | Kind::Value => quote!(#name),
            Kind::Slice { mutable: false, .. } => quote!(#v::slice_from_raw(#p, #l)),
            Kind::Slice { mutable: true, .. } => quote!(#v::slice_from_raw_mut(#p, #l)),
            Kind::View {
                name: view, elem, ..
            } => quote!(#v::#view::<#elem>::from_raw_parts(#p, #l)),
        }
    }

    /// The host launcher's parameter (`__On` is the launcher's `LaunchOn` type parameter).
    pub fn host_param(&self) -> TokenStream {
        let (name, ty) = (&self.name, &self.ty);
        let span = ty.span();
        let (l, mem) = (paths::launch(), paths::memory());
        let marker = |kind: &ViewKind| match kind {
            ViewKind::Device => quote!(+ #l::DeviceMemory),
            ViewKind::Managed => quote!(+ #l::ManagedMemory),
        };
        let (elem, mutable, extra) = match &self.kind {
            Kind::Scalar => return quote!(#name: #ty),
            Kind::Value => return quote_spanned!(span=> #name: impl #l::KernelValue<#ty, #mem>),
            Kind::Slice { mutable, elem } => (elem, *mutable, quote!()),
            Kind::View {
                mutable, mem, elem, ..
            } => (elem, *mutable, marker(mem)),
        };
        if mutable {
            quote_spanned! {span=>
                #name: &mut (impl #l::KernelSliceMut<#elem, #mem> #extra + ?Sized)
            }
        } else {
            quote_spanned!(span=> #name: &(impl #l::KernelSlice<#elem, #mem> #extra + ?Sized))
        }
    }

    /// `let NAME__len = <length>;` for slices, before the length rules are checked.
    pub fn host_len(&self) -> TokenStream {
        let name = &self.name;
        let l = self.len_ident();
        let (m, mem) = (paths::launch(), paths::memory());
        match self.elem() {
            Some((elem, true)) => {
                quote!(let #l: usize = #m::KernelSliceMut::<#elem, #mem>::kernel_len(&*#name);)
            }
            Some((elem, false)) => {
                quote!(let #l: usize = #m::KernelSlice::<#elem, #mem>::kernel_len(&*#name);)
            }
            None => quote!(),
        }
    }

    /// Statements binding this argument and appending its lowered parameters to the list.
    pub fn push(&self) -> TokenStream {
        let (name, ty) = (&self.name, &self.ty);
        let (p, l) = (self.ptr_ident(), self.len_ident());
        let (m, mem, space, args) = (paths::launch(), paths::memory(), paths::space(), args());
        match (&self.kind, self.elem()) {
            // SAFETY (every push): scalars, addresses and lengths have no padding, and a
            // by-value type is checked to be a `KernelParam` (`type_check`).
            (Kind::Scalar, _) => quote!(unsafe { #space::push(&mut #args, &#name) };),
            (Kind::Value, _) => quote! {
                let #p: #ty = #m::KernelValue::<#ty, #mem>::bind(#name, &mut #args);
                unsafe { #space::push(&mut #args, &#p) };
            },
            (_, Some((elem, false))) => quote! {
                let #p: u64 = #m::KernelSlice::<#elem, #mem>::bind(#name, &mut #args);
                unsafe { #space::push(&mut #args, &#p) };
                unsafe { #space::push(&mut #args, &#l) };
            },
            (_, Some((elem, true))) => quote! {
                let #p: u64 =
                    #m::KernelSliceMut::<#elem, #mem>::bind_mut(&mut *#name, &mut #args);
                unsafe { #space::push(&mut #args, &#p) };
                unsafe { #space::push(&mut #args, &#l) };
            },
            _ => unreachable!("slices and views have an element type"),
        }
    }

    /// For the emulator's entry: `let <lowered>: <type> = params.get(i);` for each lowered
    /// parameter, numbering from `*next`.
    pub fn read_params(&self, params: &Ident, next: &mut usize) -> TokenStream {
        let (name, ty) = (&self.name, &self.ty);
        let (p, l) = (self.ptr_ident(), self.len_ident());
        let i = *next;
        match self.elem() {
            None => {
                *next += 1;
                // SAFETY: the launcher pushed parameter `i` from a `#ty`.
                quote!(let #name: #ty = unsafe { #params.get::<#ty>(#i) };)
            }
            Some((elem, mutable)) => {
                *next += 2;
                let j = i + 1;
                let ptr_ty = if mutable {
                    quote!(*mut #elem)
                } else {
                    quote!(*const #elem)
                };
                // SAFETY: the launcher pushed an address and a length here.
                quote! {
                    let #p: #ptr_ty = unsafe { #params.get::<u64>(#i) } as usize as #ptr_ty;
                    let #l: usize = unsafe { #params.get::<usize>(#j) };
                }
            }
        }
    }
}
