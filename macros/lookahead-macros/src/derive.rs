//! `#[derive(DeviceCopy)]` and `#[derive(KernelParams)]`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, Ident, Type};

use crate::params::{view_of, ViewKind};

/// The layout checks both derives share: a struct with `#[repr(C)]` (or `transparent`), no
/// generics; returns its field types.
fn checked_struct(input: &DeriveInput, derive: &str) -> syn::Result<Vec<Type>> {
    let name = &input.ident;
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new(
            name.span(),
            format!("#[derive({derive})] works on structs only: `{name}` is not a struct"),
        ));
    };
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new(
            input.generics.span(),
            format!("#[derive({derive})] structs cannot be generic: a kernel parameter needs one concrete layout; write one struct per element type"),
        ));
    }
    if !has_c_layout(input) {
        return Err(syn::Error::new(
            name.span(),
            format!("#[derive({derive})] needs `#[repr(C)]` on `{name}`: the host and the GPU compile the struct separately and must agree on where each field is; add `#[repr(C)]`"),
        ));
    }
    Ok(data.fields.iter().map(|f| f.ty.clone()).collect())
}

fn has_c_layout(input: &DeriveInput) -> bool {
    let mut c = false;
    for a in input.attrs.iter().filter(|a| a.path().is_ident("repr")) {
        let _ = a.parse_nested_meta(|m| {
            c |= m.path.is_ident("C") || m.path.is_ident("transparent");
            if m.input.peek(syn::token::Paren) {
                // `align(8)` and the like: skip the argument.
                let _args;
                syn::parenthesized!(_args in m.input);
            }
            Ok(())
        });
    }
    c
}

/// `size_of::<Name>()` equals the sum of its fields' sizes: no padding bytes, whose values
/// are undefined and must not be copied.
fn no_padding(name: &Ident, fields: &[Type], derive: &str) -> TokenStream {
    let sizes = fields
        .iter()
        .map(|t| quote!(+ ::core::mem::size_of::<#t>()));
    let msg = format!(
        "#[derive({derive})]: `{name}` has padding bytes (between fields or at the end), which hold no defined value to copy to the GPU; add explicit fields for them (e.g. `_pad: u32`) or reorder the fields"
    );
    quote_spanned! {name.span()=>
        const _: () = ::core::assert!(
            ::core::mem::size_of::<#name>() == 0 #(#sizes)*,
            #msg
        );
    }
}

pub fn device_copy(input: TokenStream) -> TokenStream {
    let input: DeriveInput = match syn::parse2(input) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error(),
    };
    let fields = match checked_struct(&input, "DeviceCopy") {
        Ok(f) => f,
        Err(e) => return e.to_compile_error(),
    };
    let name = &input.ident;
    let field_checks = fields
        .iter()
        .map(|t| quote_spanned!(t.span()=> ::lookahead_device::param::check::device_copy::<#t>();));
    let padding = no_padding(name, &fields, "DeviceCopy");
    let copy_check =
        quote_spanned!(name.span()=> ::lookahead_device::param::check::copy::<#name>(););
    quote! {
        const _: () = {
            #(#field_checks)*
            #copy_check
        };
        #padding
        // SAFETY: `#[repr(C)]`, every field `DeviceCopy`, no padding (all checked above).
        unsafe impl ::lookahead_device::DeviceCopy for #name {}
        // SAFETY: as above.
        unsafe impl ::lookahead_device::KernelParam for #name {}
        // SAFETY: plain data with a fixed layout: cudarc may copy it byte for byte.
        #[cfg(not(target_arch = "nvptx64"))]
        unsafe impl ::lookahead_device::__host::DeviceRepr for #name {}
        // SAFETY: integers, floats and raw pointers are valid as zero bits, and so are arrays
        // and structs of them.
        #[cfg(not(target_arch = "nvptx64"))]
        unsafe impl ::lookahead_device::__host::ValidAsZeroBits for #name {}
    }
}

/// One field of a `#[derive(KernelParams)]` struct.
enum ParamField {
    /// A view: bound from an allocation at launch.
    View {
        mutable: bool,
        mem: ViewKind,
        view: Ident,
        elem: Type,
    },
    /// A `DeviceCopy` value, copied as it is.
    Value(Type),
}

pub fn kernel_params(input: TokenStream) -> TokenStream {
    let input: DeriveInput = match syn::parse2(input) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error(),
    };
    match kernel_params_impl(&input) {
        Ok(ts) => ts,
        Err(e) => e.to_compile_error(),
    }
}

fn kernel_params_impl(input: &DeriveInput) -> syn::Result<TokenStream> {
    let types = checked_struct(input, "KernelParams")?;
    let Data::Struct(data) = &input.data else {
        unreachable!("checked_struct accepts structs only")
    };
    let Fields::Named(named) = &data.fields else {
        return Err(syn::Error::new(
            input.ident.span(),
            "#[derive(KernelParams)] needs named fields (`struct Inputs { x: DeviceSlice<f32>, n: u32 }`): the launcher's argument struct has one field per name",
        ));
    };
    let mut fields = Vec::new();
    for f in &named.named {
        let kind = match view_of(&f.ty) {
            Some(Ok((mutable, mem, view, elem))) => ParamField::View {
                mutable,
                mem,
                view,
                elem,
            },
            Some(Err(e)) => return Err(e),
            None => ParamField::Value(f.ty.clone()),
        };
        let ident = f.ident.clone().expect("named field");
        fields.push((ident, kind));
    }
    let name = &input.ident;
    let checks = fields.iter().map(|(_, k)| match k {
        ParamField::View { elem, .. } | ParamField::Value(elem) => quote_spanned!(elem.span()=>
            ::lookahead_device::param::check::device_copy::<#elem>();),
    });
    let padding = no_padding(name, &types, "KernelParams");
    let host = host_args(input, &fields);
    Ok(quote! {
        const _: () = { #(#checks)* };
        #padding
        // SAFETY: `#[repr(C)]` views and `DeviceCopy` values with no padding (checked above);
        // values are built by the launcher from borrowed allocations, or by `unsafe` code.
        unsafe impl ::lookahead_device::KernelParam for #name {}
        #host
    })
}

/// The host side of a `#[derive(KernelParams)]` struct: `<Name>Args`, whose view fields
/// borrow allocations, and its binding into `<Name>` at launch.
fn host_args(input: &DeriveInput, fields: &[(Ident, ParamField)]) -> TokenStream {
    let name = &input.ident;
    let vis = &input.vis;
    let args_name = format_ident!("{}Args", name);
    let l = quote!(::lookahead::launch);
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
        ParamField::View { mutable, view, elem, .. } => {
            let (slice_trait, bind, ptr) = if *mutable {
                (quote!(#l::KernelSliceMut), quote!(bind_mut), quote!(*mut #elem))
            } else {
                (quote!(#l::KernelSlice), quote!(bind), quote!(*const #elem))
            };
            quote! {
                #id: {
                    let len = #slice_trait::<#elem, M>::kernel_len(&*self.#id);
                    let addr = #slice_trait::<#elem, M>::#bind(self.#id, args);
                    // SAFETY: `addr` holds `len` elements of an allocation borrowed for the
                    // launch and bound to it (`bind` orders it with the launch's stream).
                    unsafe { ::lookahead_device::view::#view::<#elem>::from_raw_parts(addr as #ptr, len) }
                },
            }
        }
        ParamField::Value(_) => quote!(#id: self.#id,),
    });
    quote! {
        #[cfg(not(target_arch = "nvptx64"))]
        #[doc = #doc]
        #vis struct #args_name<'a, M: #l::TargetMemory = #l::GpuMemory> {
            #(#decls,)*
        }

        #[cfg(not(target_arch = "nvptx64"))]
        impl<'a, M: #l::TargetMemory> #l::KernelValue<#name, M> for #args_name<'a, M> {
            fn bind<'b>(self, args: &mut <M as #l::TargetMemory>::Args<'b>) -> #name
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
