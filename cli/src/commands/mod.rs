//! The `idgen` subcommands, one module each: what each one's flags are and what it does.
//! The flag groups several of them share are in `args`.

pub mod bounds;
pub mod decode;
pub mod layout;
pub mod leases;
pub mod next;
pub mod opaque;
pub mod openapi;
pub mod seq;
pub mod serve;
pub mod sql;
