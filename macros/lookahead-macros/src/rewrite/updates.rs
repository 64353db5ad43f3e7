//! Read-modify-writes of kernel memory, instrumented for the emulator's race check: in a
//! `#[kernel]` or `#[device_fn]` body, a statement `x[i] op= v` (or `x[i] = .. x[i] ..`),
//! where `x` is a parameter or a field of one, reports the element's address to
//! `lookahead_emu::hooks::global_update` before the update, on the host only. Two threads of
//! a block updating one element between the same two barriers is a race the GPU would lose
//! updates to (`y[0] += 1.0` from every thread).

use std::collections::HashSet;

use syn::visit_mut::VisitMut;
use syn::{BinOp, Block, Expr, Ident, Stmt};

use crate::ident::mixed;
use crate::parse::shown;
use crate::paths;

/// Instruments the updates in `block` of places rooted at one of `params`.
pub fn instrument(block: &mut Block, params: &[Ident]) {
    let params = params.iter().map(|p| p.to_string()).collect();
    Updates { params }.visit_block_mut(block);
}

struct Updates {
    params: HashSet<String>,
}

impl VisitMut for Updates {
    fn visit_block_mut(&mut self, block: &mut Block) {
        let stmts = std::mem::take(&mut block.stmts);
        for mut stmt in stmts {
            syn::visit_mut::visit_stmt_mut(self, &mut stmt);
            match self.rewrite(&stmt) {
                Some(checked) => block.stmts.extend(checked),
                None => block.stmts.push(stmt),
            }
        }
    }
    // Items nested in the body are not the kernel's code.
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

impl Updates {
    /// `Some` (the host's checked update, then the GPU's original) for an update statement.
    fn rewrite(&self, stmt: &Stmt) -> Option<Vec<Stmt>> {
        let Stmt::Expr(expr, Some(_)) = stmt else {
            return None;
        };
        let (place, op, value) = match expr {
            Expr::Binary(b) => (&*b.left, compound(&b.op)?, &*b.right),
            Expr::Assign(a) if mentions(&a.right, &a.left) => (&*a.left, "=", &*a.right),
            _ => return None,
        };
        let Expr::Index(ix) = place else {
            return None;
        };
        if !self.rooted_in_params(&ix.expr) {
            return None;
        }
        let (base, index) = (&ix.expr, &ix.index);
        let (shown, hooks) = (shown(place), paths::emu_hooks());
        let (v, i) = (mixed("__lk_value"), mixed("__lk_index"));
        // The update itself, with the user's tokens (so type errors point at the user's
        // operator), on the bound value and index.
        let update = with_value_and_index(expr, &v, &i);
        // The value first, then the place, as Rust evaluates an assignment.
        // `let` statements: a `#[cfg]` on an expression statement is not stable Rust.
        let checked: Stmt = syn::parse_quote! {
            #[cfg(not(target_arch = "nvptx64"))]
            let () = {
                let #v = #value;
                let #i = #index;
                #hooks::global_update(
                    ::core::ptr::addr_of!(#base[#i]) as usize,
                    #shown,
                    #op,
                );
                #update;
            };
        };
        let original: Stmt = syn::parse_quote! {
            #[cfg(target_arch = "nvptx64")]
            let () = { #stmt };
        };
        Some(vec![checked, original])
    }

    /// `x`, `x.field`, `x.a.b` with `x` a parameter.
    fn rooted_in_params(&self, e: &Expr) -> bool {
        match e {
            Expr::Path(p) => p
                .path
                .get_ident()
                .is_some_and(|id| self.params.contains(&id.to_string())),
            Expr::Field(f) => self.rooted_in_params(&f.base),
            Expr::Paren(p) => self.rooted_in_params(&p.expr),
            _ => false,
        }
    }
}

/// The operator of a compound assignment (`+=`...), or `None` for other binary operators.
fn compound(op: &BinOp) -> Option<&'static str> {
    Some(match op {
        BinOp::AddAssign(_) => "+=",
        BinOp::SubAssign(_) => "-=",
        BinOp::MulAssign(_) => "*=",
        BinOp::DivAssign(_) => "/=",
        BinOp::RemAssign(_) => "%=",
        BinOp::BitXorAssign(_) => "^=",
        BinOp::BitAndAssign(_) => "&=",
        BinOp::BitOrAssign(_) => "|=",
        BinOp::ShlAssign(_) => "<<=",
        BinOp::ShrAssign(_) => ">>=",
        _ => return None,
    })
}

/// Whether `place` (as tokens) occurs in `value`: `y[i] = y[i] + v` reads what it writes.
fn mentions(value: &Expr, place: &Expr) -> bool {
    shown(value).contains(&shown(place))
}

/// `expr` (`x[index] op value`) as `x[i] op v`, every other token the user's.
fn with_value_and_index(expr: &Expr, v: &Ident, i: &Ident) -> Expr {
    let mut e = expr.clone();
    let (left, right) = match &mut e {
        Expr::Binary(b) => (&mut *b.left, &mut *b.right),
        Expr::Assign(a) => (&mut *a.left, &mut *a.right),
        _ => unreachable!("only updates are rewritten"),
    };
    if let Expr::Index(ix) = left {
        *ix.index = syn::parse_quote!(#i);
    }
    *right = syn::parse_quote!(#v);
    e
}
