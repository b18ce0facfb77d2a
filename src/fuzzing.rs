//! Entry points for the fuzz targets in `fuzz/`, compiled only under `cfg(fuzzing)` (which
//! `cargo fuzz` sets): the readers of the files idgen keeps, which are private.

/// Reads `bytes` as a lease record, a lease roster and a block record: none may panic, and
/// each record that parses survives being written again.
pub fn read_store_files(bytes: &[u8]) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    crate::lease::fuzz_read_files(text);
    crate::blocks::fuzz_read_files(text);
}
