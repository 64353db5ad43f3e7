//! From typed descriptions to code: the items each macro expands to, built from what
//! `parse` produced.

pub mod derive;
pub mod kernel;
mod launcher;
pub mod level;
mod no_std;
pub mod params;
pub mod pipeline;
pub mod prefetch;
pub mod shared;
