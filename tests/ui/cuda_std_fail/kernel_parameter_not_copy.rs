use cuda_std::prelude::*;

pub struct Table {
    pub rows: Vec<u32>,
}

#[kernel]
pub unsafe fn lookup(table: Table, out: *mut u32) {
    *out = table.rows[0];
}

fn main() {}
