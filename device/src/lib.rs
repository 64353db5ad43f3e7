//! # lookahead-device
//!
//! The device-side runtime for Lookahead kernels, compiled for `nvptx64-nvidia-cuda`:
//! thread and block indices, barriers and fences, atomics, warp shuffles and the prefetch
//! instructions, each a thin safe (or clearly `unsafe`) wrapper over one PTX instruction.
//! Kernel crates use it instead of writing `asm!` themselves.
//!
//! On the host the crate is empty; the kernels' host side only needs their PTX.
#![no_std]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(asm_experimental_arch, stdarch_nvptx)
)]

#[cfg(target_arch = "nvptx64")]
pub mod atomic;
#[cfg(target_arch = "nvptx64")]
pub mod index;
#[cfg(target_arch = "nvptx64")]
mod panic;
#[cfg(target_arch = "nvptx64")]
pub mod prefetch;
#[cfg(target_arch = "nvptx64")]
pub mod sync;
#[cfg(target_arch = "nvptx64")]
pub mod warp;
