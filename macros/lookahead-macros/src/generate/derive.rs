//! `#[derive(DeviceCopy)]` and `#[derive(KernelParams)]`: the layout checks, the unsafe
//! trait impls they justify, and a `KernelParams` struct's host arguments.

use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::Type;

use crate::parse::derive::{DeviceCopyStruct, KernelParamsStruct, ParamField};
use crate::parse::params::ViewKind;
use crate::paths;

/// `size_of::<Name>()` equals the sum of its fields' sizes: no padding bytes, whose values
/// are undefined and must not be copied.
fn no_padding(name: &Ident, fields: &[Type], derive: &str) -> TokenStream {
    let sizes = fields
        .iter()
        .map(|t| quote!(+ ::core::mem::size_of::<#t>()));
    let msg = format!(
        "#[derive({derive})]: `{name}` has padding bytes (between fields or at the end), which \
         hold no defined value to copy to the GPU; add explicit fields for them (e.g. `_pad: \
         u32`) or reorder the fields"
    );
    quote_spanned! {name.span()=>
        const _: () = ::core::assert!(
            ::core::mem::size_of::<#name>() == 0 #(#sizes)*,
            #msg
        );
    }
}

/// A check that `t` is `DeviceCopy`, which a failure reports at `t`.
fn device_copy_check(t: &Type) -> TokenStream {
    let check = paths::at(t.span(), paths::param_check());
    quote_spanned!(t.span()=> #check::device_copy::<#t>();)
}

pub fn device_copy(s: &DeviceCopyStruct) -> TokenStream {
    let (name, fields) = (&s.input.ident, &s.fields);
    let field_checks = fields.iter().map(device_copy_check);
    let padding = no_padding(name, fields, "DeviceCopy");
    let check = paths::at(name.span(), paths::param_check());
    let copy_check = quote_spanned!(name.span()=> #check::copy::<#name>(););
    let (d, host) = (paths::device(), paths::host_traits());
    quote! {
        const _: () = {
            #(#field_checks)*
            #copy_check
        };
        #padding
        // SAFETY: `#[repr(C)]`, every field `DeviceCopy`, no padding (all checked above).
        unsafe impl #d::DeviceCopy for #name {}
        // SAFETY: as above.
        unsafe impl #d::KernelParam for #name {}
        // SAFETY: plain data with a fixed layout: cudarc may copy it byte for byte.
        #[cfg(not(target_arch = "nvptx64"))]
        unsafe impl #host::DeviceRepr for #name {}
        // SAFETY: integers, floats and raw pointers are valid as zero bits, and so are arrays
        // and structs of them.
        #[cfg(not(target_arch = "nvptx64"))]
        unsafe impl #host::ValidAsZeroBits for #name {}
    }
}

pub fn kernel_params(s: &KernelParamsStruct) -> TokenStream {
    let name = &s.input.ident;
    let checks = s.fields.iter().map(|(_, k)| match k {
        ParamField::View { elem, .. } | ParamField::Value(elem) => device_copy_check(elem),
    });
    let padding = no_padding(name, &s.types, "KernelParams");
    let host = host_args(s);
    let d = paths::device();
    quote! {
        const _: () = { #(#checks)* };
        #padding
        // SAFETY: `#[repr(C)]` views and `DeviceCopy` values with no padding (checked above);
        // values are built by the launcher from borrowed allocations, or by `unsafe` code.
        unsafe impl #d::KernelParam for #name {}
        #host
    }
}

/// The host side of a `#[derive(KernelParams)]` struct: `<Name>Args`, whose view fields
/// borrow allocations, and its binding into `<Name>` at launch.
fn host_args(s: &KernelParamsStruct) -> TokenStream {
    let (name, vis, fields) = (&s.input.ident, &s.input.vis, &s.fields);
    let args_name = format_ident!("{}Args", name);
    let (l, space, view) = (paths::launch(), paths::memory_space(), paths::view());
    let doc = format!(
        "The host's arguments for a [`{name}`] kernel parameter: every view field borrows a \
         GPU allocation (for an emulator launch, host memory) for the launch, which passes its \
         address and length; the other fields are copied as they are."
    );
    let decls = fields.iter().map(|(id, k)| match k {
        ParamField::View {
            mutable, mem, elem, ..
        } => {
            let tr = arg_trait(*mutable, *mem);
            if *mutable {
                quote!(pub #id: &'a mut (dyn #l::#tr<#elem, M> + 'a))
            } else {
                quote!(pub #id: &'a (dyn #l::#tr<#elem, M> + 'a))
            }
        }
        ParamField::Value(t) => quote!(pub #id: #t),
    });
    let binds = fields.iter().map(|(id, k)| match k {
        ParamField::View {
            mutable,
            view: v,
            elem,
            ..
        } => {
            let (slice_trait, bind, ptr) = if *mutable {
                (
                    quote!(#l::KernelSliceMut),
                    quote!(bind_mut),
                    quote!(*mut #elem),
                )
            } else {
                (quote!(#l::KernelSlice), quote!(bind), quote!(*const #elem))
            };
            quote! {
                #id: {
                    let len = #slice_trait::<#elem, M>::kernel_len(&*self.#id);
                    let addr = #slice_trait::<#elem, M>::#bind(self.#id, args);
                    // SAFETY: `addr` holds `len` elements of an allocation borrowed for the
                    // launch and bound to it (`bind` orders it with the launch's stream).
                    unsafe { #view::#v::<#elem>::from_raw_parts(addr as #ptr, len) }
                },
            }
        }
        ParamField::Value(_) => quote!(#id: self.#id,),
    });
    quote! {
        #[cfg(not(target_arch = "nvptx64"))]
        #[doc = #doc]
        #vis struct #args_name<'a, M: #space = #l::GpuMemory> {
            #(#decls,)*
        }

        #[cfg(not(target_arch = "nvptx64"))]
        impl<'a, M: #space> #l::KernelValue<#name, M> for #args_name<'a, M> {
            fn bind<'b>(self, args: &mut <M as #space>::Args<'b>) -> #name
            where
                Self: 'b,
            {
                #name { #(#binds)* }
            }
        }
    }
}

/// The trait a view field's argument implements: memory kind and mutability together.
fn arg_trait(mutable: bool, mem: ViewKind) -> Ident {
    let n = match (mem, mutable) {
        (ViewKind::Device, false) => "DeviceSliceArg",
        (ViewKind::Device, true) => "DeviceSliceArgMut",
        (ViewKind::Managed, false) => "ManagedSliceArg",
        (ViewKind::Managed, true) => "ManagedSliceArgMut",
    };
    Ident::new(n, proc_macro2::Span::call_site())
}
