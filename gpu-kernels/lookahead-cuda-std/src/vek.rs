//! The 2- and 3-component vectors [`crate::thread`] returns. `cuda_std` 0.2.2 uses the `vek`
//! crate's `Vec2<u32>` / `Vec3<u32>` (re-exported as `cuda_std::vek`); these have the same
//! names and fields (`x`, `y`, `z`) and what kernels use of them, not `vek`'s whole API.

/// Two components.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Vec2<T> {
    /// First component.
    pub x: T,
    /// Second component.
    pub y: T,
}

/// Three components.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Vec3<T> {
    /// First component.
    pub x: T,
    /// Second component.
    pub y: T,
    /// Third component.
    pub z: T,
}

impl<T> Vec2<T> {
    /// `(x, y)`.
    pub const fn new(x: T, y: T) -> Self {
        Vec2 { x, y }
    }
}

impl<T> Vec3<T> {
    /// `(x, y, z)`.
    pub const fn new(x: T, y: T, z: T) -> Self {
        Vec3 { x, y, z }
    }
}

impl<T: Copy + core::ops::Mul<Output = T>> Vec2<T> {
    /// `x * y`.
    pub fn product(self) -> T {
        self.x * self.y
    }
}

impl<T: Copy + core::ops::Mul<Output = T>> Vec3<T> {
    /// `x * y * z`.
    pub fn product(self) -> T {
        self.x * self.y * self.z
    }
}

impl<T: Copy + core::ops::Add<Output = T>> Vec3<T> {
    /// `x + y + z`.
    pub fn sum(self) -> T {
        self.x + self.y + self.z
    }
}

/// `glam`'s name for `Vec2<u32>` (Rust-CUDA's main branch).
pub type UVec2 = Vec2<u32>;
/// `glam`'s name for `Vec3<u32>` (Rust-CUDA's main branch).
pub type UVec3 = Vec3<u32>;
