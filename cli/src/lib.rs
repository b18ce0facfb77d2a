//! The parts of the `idgen` command that other targets call: the rules for the service's
//! untrusted input, shared with the fuzz targets in `fuzz/`.

pub mod input;
